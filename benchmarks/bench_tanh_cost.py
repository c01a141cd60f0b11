"""What a gelu(x*a+b) loop on 4M float32 costs in C, by the tanh it calls: is it memory-bound?

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. \
        python benchmarks/bench_tanh_cost.py [--threads 1]

Compiles one C program with the native backend's compiler and flags (`build.compiler()`) and
its prelude (`ops.PRELUDE`), and times, best of 15 and median, the same loop as the native
gelu kernel with the tanh replaced by: nothing (the `x*a+b` pass, which runs at copy speed),
`fg_tanhf_inline` (1.05 ulp; what kernels call without 512-bit vectors), glibc's `tanhf`
(libmvec when the flags vectorize it; what kernels call with AVX-512), an inline exp and one
division only (`1 - 2/(e+1)`, no polynomial branch and no selects: a lower bound for any tanh
of this form), and Eigen's 13/6 rational approximation (which XLA uses; its error in ulp over
every 7th float in [0, 11] is printed).
Two more rows: the gelu arithmetic with no tanh at all, and the `x*a+b` pass writing with
non-temporal stores (as glibc's memcpy does for copies larger than its cache threshold).
The share is of memcpy's bandwidth over the same bytes (read x, write out); the last column is
of the copy bandwidth bench_native_programs.py reports (np.copyto of 256 MiB, which glibc
does with non-temporal stores). `--cold` writes a 256 MiB buffer before every timed run, as
the other libraries' steps do between the interleaved steps of bench_native_programs.py: x
then comes from memory and the caches hold dirty lines.
"""

import argparse
import os
import subprocess
import sys
import tempfile

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <immintrin.h>
#ifdef _OPENMP
#include <omp.h>
#endif
static inline float exp_div_only(float x) {  /* lower bound: inline exp, one division */
    const float a = fabsf(x), e = fg_expf_tanh(2.0f * (a < 10.0f ? a : 10.0f));
    return copysignf(1.0f - 2.0f / (e + 1.0f), x);
}
static inline float eigen_tanhf(float x) {  /* Eigen's ptanh_float, as XLA emits it */
    const float c = 7.90531110763549805f, xc = x < -c ? -c : (x > c ? c : x), x2 = xc * xc;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f; p = p * x2 - 8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f; p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f; p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f; q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return fabsf(x) < 0.0004f ? x : (p * xc) / q;
}
#define ROWS 4096
#define COLS 1024
#define N (ROWS * COLS)
#define GELU(name, T) \
void name(const float *restrict x, const float *restrict a, const float *restrict b, \
          float *restrict o) { \
    _Pragma("omp parallel for") for (long long i = 0; i < ROWS; ++i) { \
        _Pragma("omp simd") for (long long j = 0; j < COLS; ++j) { \
            const float y = x[i * COLS + j] * a[j] + b[j]; \
            const float u = 0.7978846f * (y + 0.044715f * y * y * y); \
            o[i * COLS + j] = 0.5f * y * (1.0f + T(u)); } } }
#define NONE(u) (0.0f * (u))
GELU(k_none, NONE)
GELU(k_shipped, fg_tanhf_inline)
GELU(k_libm, tanhf)
GELU(k_expdiv, exp_div_only)
GELU(k_eigen, eigen_tanhf)
static void k_copy(const float *restrict x, const float *restrict a, const float *restrict b,
                   float *restrict o) {
    (void)a; (void)b;
    _Pragma("omp parallel for") for (long long i = 0; i < ROWS; ++i)
        memcpy(o + i * COLS, x + i * COLS, COLS * sizeof(float));
}
#define IDENTITY(u) (u)
GELU(k_no_tanh, IDENTITY)
static void k_stream(const float *restrict x, const float *restrict a, const float *restrict b,
                     float *restrict o) {  /* x*a+b through an L1 row, non-temporal stores */
    _Pragma("omp parallel for") for (long long i = 0; i < ROWS; ++i) {
        float row[COLS] __attribute__((aligned(64)));
        _Pragma("omp simd") for (long long j = 0; j < COLS; ++j)
            row[j] = x[i * COLS + j] * a[j] + b[j];
#ifdef __AVX512F__
        for (long long j = 0; j < COLS; j += 16)
            _mm512_stream_ps(o + i * COLS + j, _mm512_load_ps(row + j));
#else
        for (long long j = 0; j < COLS; j += 8)
            _mm256_stream_ps(o + i * COLS + j, _mm256_load_ps(row + j));
#endif
    }
    _mm_sfence();
}
#define BIG (1LL << 26)  /* 256 MiB of float32 */
static float *big_out;
static void flush(void) {  /* dirty 256 MiB, as other libraries' steps do */
    for (long long i = 0; i < BIG; ++i) big_out[i] += 1.0f;
}
typedef void (*kern)(const float *, const float *, const float *, float *);
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void *p, const void *q) {
    const double a = *(const double *)p, b = *(const double *)q; return (a > b) - (a < b);
}
int main(int argc, char **argv) {
    (void)argc;
    float *x = aligned_alloc(64, 4 * N), *o = aligned_alloc(64, 4 * N), a[COLS], b[COLS];
    srand(1);
    for (long long i = 0; i < N; ++i) x[i] = 6.0f * rand() / (float)RAND_MAX - 3.0f;
    for (int j = 0; j < COLS; ++j) { a[j] = 1.0f; b[j] = 0.0f; }
    big_out = calloc(BIG, 4);
    const double copy_bw = atof(argv[1]);  /* bytes/s, bench_native.copy_bandwidth() */
    kern ks[] = {k_copy, k_none, k_stream, k_no_tanh, k_shipped, k_libm, k_expdiv, k_eigen};
    const char *names[] = {"memcpy", "x*a+b only", "x*a+b, non-temporal stores",
                           "gelu arithmetic, no tanh", "fg_tanhf_inline (1.05 ulp)",
                           "tanhf (glibc)", "exp + one division only", "Eigen rational (XLA)"};
    double copy = 0;
    printf("%s; copy bandwidth (np.copyto of 256 MiB) %.1f GB/s\n\n",
           FG_COLD ? "cold: 256 MiB written before each run" : "warm: runs back to back",
           copy_bw / 1e9);
    printf("| loop | best ms | median ms | share of memcpy | share of copy bandwidth |\n"
           "| --- | ---: | ---: | ---: | ---: |\n");
    for (int k = 0; k < 8; ++k) {
        double t[15];
        for (int r = 0; r < 15; ++r) {
            if (FG_COLD) flush();
            double s = now(); ks[k](x, a, b, o); t[r] = now() - s;
        }
        qsort(t, 15, sizeof(double), cmp);
        if (k == 0) copy = t[0];
        printf("| %s | %.3f | %.3f | %.0f%% | %.0f%% |\n", names[k], 1e3 * t[0], 1e3 * t[7],
               100.0 * copy / t[0], 100.0 * 8.0 * N / t[0] / copy_bw);
    }
    double worst = 0;
    for (unsigned u = 0; u < 0x41300000u; u += 7) {
        float f, r; memcpy(&f, &u, 4);
        const double exact = tanh((double)f);
        r = eigen_tanhf(f);
        const double ulp = nextafterf((float)exact, INFINITY) - (float)exact;
        const double e = fabs(r - exact) / ulp;
        if (e > worst) worst = e;
    }
    printf("\nEigen rational: %.2f ulp at most over every 7th float in [0, 11]\n", worst);
    return 0;
}
"""


def run_harness(source, name, description, cold=False):
    """Compile C `source` (a `main()` printing a table) with the native backend's compiler and
    flags, and run it with `--threads` as OMP_NUM_THREADS (also used by bench_adam_cost.py);
    `cold`: offer `--cold`, compiled in as FG_COLD (0 or 1)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--threads", default=None, help="OMP_NUM_THREADS for the loops")
    if cold:
        ap.add_argument("--cold", action="store_true", help="dirty 256 MiB before each run")
    args = ap.parse_args()
    from funcgrad.backends.native import build
    cc = build.compiler()
    if cc is None:
        sys.exit("no C compiler: nothing to measure")
    # the kernels' flags; the harness's own loops use OpenMP threads (the kernels use
    # funcgrad's pool, which a standalone program does not have)
    flags = [f for f in cc.flags if f not in ("-shared", "-fPIC", "-fopenmp-simd")]
    flags += ["-fopenmp", "-D_POSIX_C_SOURCE=199309L"]
    if cold:
        flags.append(f"-DFG_COLD={int(args.cold)}")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, f"{name}.c"), os.path.join(tmp, name)
        with open(src, "w") as f:
            f.write(source)
        subprocess.run([cc.path, *flags, src, "-o", exe, *cc.libs, "-lm"], check=True)
        env = dict(os.environ, **({"OMP_NUM_THREADS": args.threads} if args.threads else {}))
        print(f"compiler: {cc.version}; flags: {' '.join(flags)}; "
              f"OMP_NUM_THREADS={env.get('OMP_NUM_THREADS', 'unset')}\n")
        extra = []
        if cold:  # the copy bandwidth as bench_native_programs.py measures it
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from bench_native import copy_bandwidth
            extra = [repr(copy_bandwidth())]
        subprocess.run([exe, *extra], check=True, env=env)


def main():
    from funcgrad.backends.native import ops
    run_harness(ops.PRELUDE + HARNESS, "tanh_cost", __doc__.splitlines()[0], cold=True)


if __name__ == "__main__":
    main()
