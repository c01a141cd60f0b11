"""The BLAS numpy ships, called from C: the addresses of its ILP64 CBLAS routines and the
module piece that holds them.

numpy's wheels load OpenBLAS (`scipy_openblas64_`, symbols `scipy_cblas_sgemm64_`...); a C
module whose code multiplies matrices declares `BLAS` (the function pointer types and
`fg_set_blas`), and `program.py` hands it the addresses once loaded, so a product computed in
C is the same call numpy makes (the same bits). Without them (no OpenBLAS in the process) the
pointers stay NULL and the callers keep their own loops or stay numpy's.

    fns = functions()           # {"sgemm": address, ...} or {}
    lib.fg_set_blas(*[ctypes.c_void_p(fns.get(n)) for n in NAMES])
"""

import ctypes
import functools

from funcgrad.backends.native import cnode

# the routines, in the order `fg_set_blas` takes them
NAMES = ("sgemm", "dgemm", "sgemv", "dgemv", "sdot", "ddot", "ssyrk", "dsyrk")

_TYPES = r"""
typedef void (*fg_gemm32)(int, int, int, long long, long long, long long, float, const float *,
                          long long, const float *, long long, float, float *, long long);
typedef void (*fg_gemm64)(int, int, int, long long, long long, long long, double,
                          const double *, long long, const double *, long long, double,
                          double *, long long);
typedef void (*fg_gemv32)(int, int, long long, long long, float, const float *, long long,
                          const float *, long long, float, float *, long long);
typedef void (*fg_gemv64)(int, int, long long, long long, double, const double *, long long,
                          const double *, long long, double, double *, long long);
typedef float (*fg_dot32)(long long, const float *, long long, const float *, long long);
typedef double (*fg_dot64)(long long, const double *, long long, const double *, long long);
typedef void (*fg_syrk32)(int, int, int, long long, long long, float, const float *, long long,
                          float, float *, long long);
typedef void (*fg_syrk64)(int, int, int, long long, long long, double, const double *,
                          long long, double, double *, long long);
static fg_gemm32 fg_sgemm;
static fg_gemm64 fg_dgemm;
static fg_gemv32 fg_sgemv;
static fg_gemv64 fg_dgemv;
static fg_dot32 fg_sdot;
static fg_dot64 fg_ddot;
static fg_syrk32 fg_ssyrk;
static fg_syrk64 fg_dsyrk;
void fg_set_blas(void *sgemm, void *dgemm, void *sgemv, void *dgemv, void *sdot, void *ddot,
                 void *ssyrk, void *dsyrk) {
    fg_sgemm = (fg_gemm32)sgemm; fg_dgemm = (fg_gemm64)dgemm;
    fg_sgemv = (fg_gemv32)sgemv; fg_dgemv = (fg_gemv64)dgemv;
    fg_sdot = (fg_dot32)sdot; fg_ddot = (fg_dot64)ddot;
    fg_ssyrk = (fg_syrk32)ssyrk; fg_dsyrk = (fg_syrk64)dsyrk;
}
"""
BLAS = cnode.Piece("blas", _TYPES)  # what a function calling fg_sgemm & co. needs

# CBLAS's enumerations
ROW_MAJOR, COL_MAJOR, NO_TRANS, TRANS, UPPER = 101, 102, 111, 112, 121


@functools.cache
def functions():
    """{name: address} of the ILP64 CBLAS routines `NAMES` of the OpenBLAS numpy itself
    loaded, or {} when there is none (or one of them is missing)."""
    import numpy  # noqa: F401  (numpy has loaded its BLAS)
    try:
        with open("/proc/self/maps") as f:
            paths = {ln.split()[-1] for ln in f if "openblas" in ln.lower() and "/" in ln}
    except OSError:
        return {}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_cblas_", "cblas_"):
            fns = [getattr(lib, f"{prefix}{n}64_", None) for n in NAMES]
            if all(fns):
                return {n: ctypes.cast(fn, ctypes.c_void_p).value for n, fn in zip(NAMES, fns)}
    return {}


def bind(lib):
    """Hand loaded module `lib` (one declaring `BLAS`) the routines' addresses."""
    fns = functions()
    lib.fg_set_blas(*[ctypes.c_void_p(fns.get(n)) for n in NAMES])
