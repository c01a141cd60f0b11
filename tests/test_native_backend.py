"""The native C backend: kernels compiled by the system C compiler give the numpy backend's
numbers (exactly for arithmetic, comparisons, selects, casts and integer ops; within a few
ulp for libm functions), the C source is safe and readable, modules are cached in memory
and on disk (a second process compiles nothing), a missing compiler falls back to numpy
with one warning, and kernels run clean under AddressSanitizer/UBSan.

These tests need a C compiler; `test_a_compiler_means_the_native_backend_runs` fails (not
skips) when one is on PATH but the backend does not work.
"""

import contextlib
import ctypes
import os
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.backends import native
from funcgrad.backends.native import blas as native_blas
from funcgrad.backends.native import build, tiers
from funcgrad.compiler import pipeline

HAVE_CC = build.find_compiler() is not None
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler (checked by the test below)")


@contextlib.contextmanager
def native_mode(mode="sync", **options):
    saved = {k: getattr(fg.config, k) for k in ["native", *options]}
    fg.config.update("native", mode)
    for k, v in options.items():
        fg.config.update(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            fg.config.update(k, v)


def both(fn, *args):
    """(native executable, its results, the numpy backend's results) of `fn` on `args`."""
    closed = fg.make_jaxpr(fn)(*args)
    with native_mode():
        exe = pipeline.compile_jaxpr(closed, backend="cpu")
    ref = pipeline.compile_jaxpr(closed, backend="numpy")(*args)
    return exe, exe(*args), ref


def assert_same(got, want):
    """Bit for bit, NaN payloads aside (NaN where NaN, signed zeros equal in sign)."""
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if g.dtype.kind == "f":
            assert np.array_equal(np.isnan(g), np.isnan(w))
            ok = ~np.isnan(g)
            assert np.array_equal(g[ok], w[ok]), (g, w)
            assert np.array_equal(np.signbit(g[ok]), np.signbit(w[ok]))
        else:
            assert np.array_equal(g, w), (g, w)


def test_a_compiler_means_the_native_backend_runs():
    if not HAVE_CC:  # the same property without a compiler: the fallback (tested below)
        assert build.compiler() is None
        return
    cc = build.compiler()
    assert cc is not None, f"{build.find_compiler()} is on PATH but does not build C"
    exe, got, want = both(lambda x: fnp.tanh(x) * 2.0 + 1.0, np.linspace(-3, 3, 7, dtype="f"))
    assert isinstance(exe, native.NativeExecutable)
    assert "void fg_k0(" in exe.as_text() and "_fg0(a0, b0, " in exe.as_text()
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


# --- exact numbers ---------------------------------------------------------------------------

SPECIAL = np.array([0.0, -0.0, 1.5, -2.5, 3.0, np.inf, -np.inf, np.nan, 1e-40, -7.25, 65504.0,
                    2.0 ** 31, -(2.0 ** 31) - 10, 1e30], np.float32)
INTS = {dt: np.array([0, 1, -1, 7, -7, 3, np.iinfo(dt).max, np.iinfo(dt).min, 2, -128 % 100],
                     dt) for dt in ("int8", "int32", "int64")}
UINTS = {dt: np.array([0, 1, 7, 3, np.iinfo(dt).max, 2, 200 % np.iinfo(dt).max, 5, 64, 9], dt)
         for dt in ("uint8", "uint32", "uint64")}
EXACT_BINARY = {
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem,
    "max": lax.max, "min": lax.min, "lt": lax.lt, "eq": lax.eq, "ge": lax.ge,
}
BITS = {"and": lax.bitwise_and, "or": lax.bitwise_or, "xor": lax.bitwise_xor,
        "shl": lax.shift_left, "shr": lax.shift_right_logical,
        "sar": lax.shift_right_arithmetic}


@needs_cc
@pytest.mark.parametrize("name", sorted(EXACT_BINARY))
def test_float_arithmetic_is_bit_exact(name):
    x = np.repeat(SPECIAL, len(SPECIAL))
    y = np.tile(SPECIAL[::-1], len(SPECIAL))
    _, got, want = both(EXACT_BINARY[name], x, y)
    assert_same(got, want)


def _float32_bits(rng, n):
    """`n` float32s of uniformly random bit patterns (every exponent: subnormals, inf, NaN),
    with a third of them having the divisor's significand (quotients near powers of two)."""
    return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_division_by_a_row_invariant_divisor_is_ieee_division(dtype):
    # a value that is the same along the inner loop (a scalar, a per-row divisor, a
    # literal): every class of float divides as numpy does (C kernels once multiplied by its
    # double reciprocal instead, which missed subnormal ties: the test below)
    rng = np.random.default_rng(12)
    x = _float32_bits(rng, 256 * 1024).reshape(256, 1024)
    d = np.concatenate([_float32_bits(rng, 256 - len(SPECIAL)), SPECIAL.astype(np.float32)])
    d[:40] = rng.integers(1, 1000, 40) / rng.integers(1, 97, 40)  # ordinary divisors
    d[40:48] = np.float32(2.0) ** rng.integers(-149, 127, 8)  # powers of two, subnormal ones
    x[:40] = (rng.integers(0, 1 << 20, (40, 1)) * d[:40, None]).astype(np.float32)  # ~exact
    with np.errstate(over="ignore"):
        x, d = x.astype(dtype), d.astype(dtype)
    fns = {"row": lambda x, d: x / d[:, None],
           "scalar": lambda x, d: (x / d[3], x / (d[5] * 2 + 1)),
           "nested": lambda x, d: x / (fnp.broadcast_to(d[3], x.shape)  # an invariant
                                       / (1 - fnp.broadcast_to(d[5], x.shape))),  # quotient
           "literal": lambda x, d: (x / 0.65132153, x / 3.0, x / -1e-40, x / 7e3),
           "loop": lambda x, d: fg.lax.fori_loop(  # a C loop's kernels
               0, 3, lambda k, c: c / (fnp.abs(c).max(1, keepdims=True) + 1), x),
           "reductions": lambda x, d: ((x / d[:, None]).max(1), (x / d[7]).min(0),  # exact
                                       (x[:, :1] / d[3]).max(1), (x[:, :1] / d[:, None]).max(1))}
    for name, fn in fns.items():
        exe, got, want = both(fn, x, d)
        assert "C module" in exe.as_text(), name
        assert_same(got, want)


@needs_cc
def test_division_by_an_invariant_divisor_rounds_subnormal_ties_as_ieee():
    # 147 * 2^-149 / 98 is 1.5 * 2^-149, a tie of the subnormal floats, which IEEE division
    # rounds to even (3e-45); a double product missing it by one ulp gave 1e-45 (issue 25).
    # Quotients (2m + 1) * 2^-150 are such ties for every divisor 2c with x = (2m + 1) c 2^-149
    with native_mode():
        assert fg.jit(lambda a: a / 98.0)(np.float32(147 * 2.0**-149)) == np.float32(3e-45)
    rng = np.random.default_rng(5)
    c = rng.integers(1, 2 ** 9, (64, 1))
    m = rng.integers(0, 2 ** 12, (64, 256))
    sign = np.where(rng.random((64, 256)) < 0.5, -1.0, 1.0)
    x = (sign * (2 * m + 1) * c * 2.0 ** -149).astype(np.float32)  # exact
    x[:, :8] = np.nextafter(x[:, :8], np.float32(1))  # next to ties: exact quotients too
    d = (2 * c).astype(np.float32)
    lit = (sign * (2 * m + 1) * 147 * 2.0 ** -149).astype(np.float32)  # ties over 98, 294, 6
    fns = {"row": lambda x, d, lit: x / d, "scalar": lambda x, d, lit: x / d[5, 0],
           "literal": lambda x, d, lit: (lit / 98.0, lit / 294.0, lit / 6.0, x / 3.0)}
    for name, fn in fns.items():
        exe, got, want = both(fn, x, d, lit)
        assert "void fg_k0(" in exe.as_text(), name
        assert_same(got, want)


@needs_cc
def test_broadcast_constants_are_made_contiguous_once():
    # constant folding leaves masks (eye, tril) as broadcast views; a C kernel would copy
    # each one on every call, so the native program binds contiguous copies instead
    x = np.random.default_rng(2).normal(size=(64, 64)).astype(np.float32)
    fn = lambda x: x * fnp.eye(64, dtype=np.float32) + fnp.tril(x) * 2
    exe, got, want = both(fn, x)
    consts = {k: v for k, v in exe._fn.__globals__.items() if k[0] == "c" and k[1:].isdigit()}
    assert consts and all(v.flags.c_contiguous and not v.flags.writeable
                          for v in consts.values()), {k: v.strides for k, v in consts.items()}
    assert_same(got, want)


@needs_cc
@pytest.mark.parametrize("dt", sorted(INTS) + sorted(UINTS))
def test_integer_ops_wrap_and_divide_as_numpy(dt):
    fg.config.update("enable_x64", True)  # 64-bit integers stay 64-bit (reset by conftest)
    v = {**INTS, **UINTS}[dt]
    x, y = np.repeat(v, len(v)), np.tile(v, len(v))
    ops = {**EXACT_BINARY, **BITS}
    for name in sorted(ops):
        yy = (y % 70).astype(dt) if name in ("shl", "shr", "sar") else y
        _, got, want = both(ops[name], x, yy)
        assert_same(got, want)
    _, got, want = both(lambda a: (-a, lax.integer_pow(a, 3), lax.abs(a), lax.sign(a),
                                   a.astype(np.float32), ~a), x)
    assert_same(got, want)


@needs_cc
def test_casts_selects_and_unary_ops_are_bit_exact():
    x = SPECIAL
    fns = [lambda a: a.astype(np.int32), lambda a: a.astype(np.uint8),
           lambda a: a.astype(np.int64), lambda a: a.astype(np.bool_),
           lambda a: a.astype(np.float16), lambda a: fnp.where(a > 1.0, a, -a),
           lambda a: fnp.floor(a), lambda a: fnp.ceil(a), lambda a: fnp.round(a),
           lambda a: fnp.abs(a), lambda a: fnp.sqrt(a), lambda a: fnp.sign(a),
           lambda a: a ** 3, lambda a: a ** -2, lambda a: fnp.clip(a, -1.0, 2.0),
           lambda a: fnp.isfinite(a), lambda a: fnp.maximum(a, 0.0)]
    for fn in fns:
        _, got, want = both(fn, x)
        assert_same(got, want)


@needs_cc
def test_float16_rounds_after_every_operation():
    x = np.linspace(-30, 30, 301).astype(np.float16)
    _, got, want = both(lambda a: (a * 3.3 + a * a) / 7.0 - fnp.tanh(a), x)
    assert got[0].dtype == np.float16
    np.testing.assert_array_max_ulp(got[0], want[0], maxulp=1)
    _, got, want = both(lambda a: ((a * a) * 1.5 + 2.25, fnp.sum(a, axis=0)), x.reshape(7, 43))
    assert_same(got[:1], want[:1])
    # sums accumulate in double: the exact sum, rounded (numpy's float16 sum is less exact)
    exact = x.reshape(7, 43).astype(np.float64).sum(axis=0).astype(np.float16)
    np.testing.assert_array_max_ulp(got[1], exact, maxulp=1)


# libm against numpy's own (SIMD) implementations: a few ulp apart.
TRANSCENDENTAL = ["exp", "log", "tanh", "sin", "cos", "log1p", "expm1", "arctan", "arcsinh",
                  "cbrt", "exp2", "erf"]


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_libm_functions_agree_within_a_few_ulp(dtype):
    fg.config.update("enable_x64", True)
    x = np.concatenate([np.linspace(-5, 5, 200), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    x = x.astype(dtype)
    for name in TRANSCENDENTAL:
        fn = getattr(fnp, name) if hasattr(fnp, name) else getattr(lax, name)
        _, got, want = both(fn, x)
        ok = np.isfinite(want[0])
        np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]), err_msg=name)
        np.testing.assert_array_equal(got[0][~ok], want[0][~ok], err_msg=name)
        np.testing.assert_array_max_ulp(got[0][ok], want[0][ok], maxulp=4, dtype=dtype)


def _tanh_sample():
    """Every 97th float from 0 to 11 and beyond, both signs; x[n] is -0.0."""
    bits = np.arange(0, 0x41400000, 97, dtype=np.uint32)
    x = bits.view(np.float32)
    return np.concatenate([x, -x, np.float32([20.0, 88.0, 1e30, np.inf, -np.inf])]), bits.size


def _ulps(got, x):
    exact = np.tanh(x.astype(np.float64))
    return np.abs(got.astype(np.float64) - exact) / np.spacing(exact.astype(np.float32))


@needs_cc
def test_float_tanh_within_one_and_a_half_ulp_of_the_exact_value():
    # the kernels' fg_tanhf: libmvec's 16-lane tanhf with 512-bit vectors (1.37 ulp at most,
    # and numpy's own AVX-512 tanh gives the same bits), fg_tanhf_inline elsewhere
    x, n = _tanh_sample()
    _, got, _ = both(fnp.tanh, x)
    err = _ulps(got[0], x)
    assert err.max() <= 1.5, (err.max(), x[np.argmax(err)])
    assert got[0][n] == 0 and np.signbit(got[0][n]) and got[0][-1] == -1.0 and got[0][-2] == 1.0
    assert np.isnan(both(fnp.tanh, np.float32([np.nan]))[1][0]).all()


@needs_cc
def test_inline_float_tanh_within_about_one_ulp_on_every_machine():
    # fg_tanhf_inline (odd polynomial below 0.75, 1 - 2 / (e^2x + 1) with an inline expf
    # above), called directly whichever tanh this machine's kernels use
    import ctypes

    from funcgrad.backends.native import ops
    lib = build.load(ops.PRELUDE + "void fg_t(const float *restrict x, float *restrict y, "
                     "long long n) {\n#pragma omp simd\nfor (long long i = 0; i < n; ++i) "
                     "y[i] = fg_tanhf_inline(x[i]);\n}\n")
    x, n = _tanh_sample()
    x = np.concatenate([x, np.float32([np.nan])])
    got = np.empty_like(x)
    lib.fg_t(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(got.ctypes.data),
             ctypes.c_longlong(x.size))
    err = _ulps(got[:-1], x[:-1])
    assert err.max() <= 1.1, (err.max(), x[np.argmax(err)])
    assert got[n] == 0 and np.signbit(got[n]) and got[-2] == -1.0 and got[-3] == 1.0
    assert np.isnan(got[-1])


@needs_cc
def test_float_exp_within_about_one_ulp_over_every_61st_float():
    # fg_expf (no call, so masked softmax lanes at -inf take the same path as the others):
    # against the exact exp, subnormal results included; the limits and special values
    bits = np.arange(0, 1 << 32, 61, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[(x > -110) & (x < 88.72)]  # NaNs out; below -104 and near the top: exact below
    _, got, _ = both(fnp.exp, x)
    exact = np.exp(x.astype(np.float64))
    err = np.abs(got[0].astype(np.float64) - exact) / np.spacing(exact.astype(np.float32))
    assert err.max() <= 1.01, (err.max(), x[np.argmax(err)])
    edge = np.float32([-np.inf, -1e30, -104.5, -103.95, -0.0, 0.0, 88.72, 88.73, 1e30,
                       np.inf, np.nan])
    _, got, _ = both(fnp.exp, edge)
    want = [0.0, 0.0, 0.0, np.float32(1.4e-45), 1.0, 1.0, np.exp(np.float64(edge[6])),
            np.inf, np.inf, np.inf]
    np.testing.assert_array_equal(got[0][:4], want[:4])
    assert not np.signbit(got[0][:3]).any() and np.isnan(got[0][-1])
    np.testing.assert_allclose(got[0][4:-1], np.float32(want[4:]), rtol=2e-7)
    assert "fg_expf(" in both(fnp.exp, x[:8])[0].as_text()


@needs_cc
def test_reductions_broadcasts_and_transposed_reads():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 5, 4)).astype(np.float32)
    b = rng.normal(size=(5, 1)).astype(np.float32)

    def f(x, b):
        y = fnp.exp(x * b) - x.transpose(0, 2, 1).transpose(0, 2, 1)
        return (y, fnp.sum(y, axis=(0, 2)), fnp.max(x, axis=1, keepdims=True),
                fnp.min(x.T, axis=0), fnp.sum(x > 0, axis=2), fnp.sum(x))
    exe, got, want = both(f, x, b)
    assert exe.as_text().count("void fg_k") >= 3
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6)


@needs_cc
def test_large_kernels_run_on_threads_with_the_same_numbers():
    from funcgrad.backends.native import kernel
    n = kernel.PARALLEL_MIN_ELEMENTS + 12345  # not a multiple of the thread block
    rng = np.random.default_rng(2)
    x = rng.normal(size=n).astype(np.float32)
    m = rng.normal(size=(n // 100, 100)).astype(np.float32)
    exe, got, want = both(lambda x, m: (fnp.tanh(x) * 2.0 - x, fnp.exp(m) + m[:, :1],
                                        fnp.max(m, axis=1), fnp.sum(m * m, axis=1)), x, m)
    assert exe.as_text().count("fg_parallel(fg_k") >= 4  # every kernel in blocks on the pool
    for g, w in zip(got[:2], want[:2]):  # libm functions: ulps apart (see above)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    assert_same(got[2:3], want[2:3])
    np.testing.assert_allclose(got[3], want[3], rtol=1e-5)
    # column reductions in blocks of rows, and an outer axis of 3 split one step per block
    c = rng.normal(size=(400, 1000)).astype(np.float32)
    t = rng.normal(size=(3, 300, 200)).astype(np.float32)
    exe, got, want = both(lambda c, t: (fnp.max(c, axis=0), fnp.sum(c, axis=0),
                                        t * t[:1] - t[:, :1]), c, t)
    text = exe.as_text()
    assert "fg_parallel(fg_k0_task, fg_a, 4)" in text and ", fg_a, 3);" in text, text[-3000:]
    assert_same([got[0], got[2]], [want[0], want[2]])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-4)


@needs_cc
def test_streaming_kernels_prefetch_ahead_with_the_same_numbers():
    # kernels of PREFETCH_MIN_BYTES or more run their innermost loop in chunks that first
    # prefetch the arrays they read whole; chunk tails, block edges, every element size
    from funcgrad.backends.native import kernel
    fg.config.update("enable_x64", True)  # float64 stays float64 (reset by conftest)
    rng = np.random.default_rng(3)
    n = kernel.PREFETCH_MIN_BYTES // 4 + 37  # float32 in and out: over the limit, odd tail
    x = rng.normal(size=n).astype(np.float32)
    d = rng.normal(size=(n // 300, 301))  # float64 rows of 301: a tail in every row
    r = rng.normal(size=301)  # broadcast along the rows: not a stream
    h = rng.normal(size=(900, 700)).astype(np.float16)
    m = rng.integers(-100, 100, size=(900, 700)).astype(np.int8)

    def f(x, d, r, h, m):
        return (x * 3.0 - 1.0, d * r + d, h * h + 1.0, fnp.where(m > 3, m * 2, m - 1),
                (m > 0) & (h > 0))
    exe, got, want = both(f, x, d, r, h, m)
    text = exe.as_text()
    fetched = {ln.split("(")[1].split(",")[0] for ln in text.splitlines()
               if ln.strip().startswith("FG_PREFETCH(")}
    assert text.count("for (long long _c = ") == 5 and "fg_parallel(" in text, text[-4000:]
    assert len(fetched) == 2 and "p_in1" in fetched  # d, not r; per kernel, renumbered
    assert_same(got, want)
    small = both(lambda x: x * 3.0 - 1.0, x[: n // 4])[0].as_text()
    narrow = both(lambda d, r: d * r, rng.normal(size=(8000, 40)), r[:40])[0].as_text()
    assert "FG_PREFETCH(p_" not in small + narrow  # too few bytes; rows too short


@needs_cc
def test_consecutive_kernels_are_one_call_with_each_array_passed_once():
    # an optimizer's per-array kernels: one call from Python, the same bits, and the timed
    # variants still time (and name) every kernel on its own
    rng = np.random.default_rng(4)
    shapes = [(5, 7), (7,), (3, 7), (2,)]
    ps, gs = ([rng.normal(size=s).astype(np.float32) for s in shapes] for _ in range(2))
    ms = [np.abs(rng.normal(size=s)).astype(np.float32) for s in shapes]

    def update(ps, gs, ms):
        new_m = [0.9 * m + 0.1 * g * g for m, g in zip(ms, gs)]
        return [p - 0.01 * g / (fnp.sqrt(m) + 1e-8) for p, g, m in zip(ps, gs, new_m)], new_m
    with native_mode():
        f = fg.jit(update, donate_argnums=(0, 2))
        exe = f.lower(ps, gs, ms).compile()
        text = exe.as_text()
        wrapper = text.split("# ---- C module")[0]
        assert wrapper.count("_fg0(") == 1 and "_fg1" not in wrapper, wrapper
        assert text.count("FG_UPPER_CLEAN(); fg_k") == 4 and "int fg_run0(" in text  # in C
        want = fg.jit(update, backend="numpy")(ps, gs, ms)
        got = f([fnp.asarray(p.copy()) for p in ps], gs, [fnp.asarray(m.copy()) for m in ms])
        assert_same(fg.tree_util.tree_leaves(got), fg.tree_util.tree_leaves(want))
        rows = str(exe._exe.profile(*ps, *gs, *[m.copy() for m in ms], repeat=2)).splitlines()
        assert sorted(r.split()[2][:3] for r in rows[1:-1]) == ["k0_", "k1_", "k2_", "k3_"]
    # a product between kernels is C too: the whole program is still one call
    h = lambda x, w: (fnp.tanh(fnp.tanh(x) @ w) * 2.0 + 1.0, fnp.exp(x) - 1.0, x * 3.0,
                      fnp.sum(x * x, axis=0))
    x, w = (rng.normal(size=s).astype(np.float32) for s in ((6, 5), (5, 5)))
    exe, got, want = both(h, x, w)
    lines = [ln.split("#")[0].strip() for ln in exe.as_text().split("# ---- C module")[0]
             .splitlines()[2:] if ln.strip() and not ln.strip().startswith("#")]
    calls = [ln.split("(")[0].split(" = ")[-1] for ln in lines if "np.empty" not in ln]
    assert calls == ["_fg0", "return [b1, b0, b2, b3]"], lines
    assert "fg_mm" in exe.as_text().split("int fg_run0(")[1]
    for g, w_ in zip(got, want):  # tanh, exp: libm ulps apart; the sum in double
        np.testing.assert_allclose(g, w_, rtol=2e-6, atol=1e-6)
    assert_same(got[2:3], want[2:3])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 1 << 40), st.integers(1, 1 << 24))
def test_parallel_blocks_cover_the_loop_once_within_the_pool_limit(n, work):
    # a loop of n steps of `work` elements: the blocks cover every step once, with at
    # least PARALLEL_BLOCK elements each, at most MAX_BLOCKS of them, and small loops whole
    from funcgrad.backends.native import kernel, threads
    tasks, rows = kernel.CKernel.blocks(n, work)
    if n * work < kernel.PARALLEL_MIN_ELEMENTS or n < 2:
        assert (tasks, rows) == (1, n)
        return
    assert 1 <= tasks <= threads.MAX_BLOCKS and (tasks - 1) * rows < n <= tasks * rows
    assert rows * work >= kernel.PARALLEL_BLOCK or rows == n


POOL_PROBE = r"""
#include <stdatomic.h>
static void fg_count(void *const *a, long long b) {
    volatile double x = 1.0;  /* a little work, so blocks overlap the caller's wait */
    for (int i = 0; i < 200; ++i) x = x * 1.0000001;
    atomic_fetch_add_explicit((_Atomic int *)a[0] + b, 1, memory_order_relaxed);
}
/* After every call each block must have run exactly once more: returns the mismatches. */
long long fg_run_counting(int *counts, long long blocks, int reps) {
    void *const a[] = {(void *)counts};
    long long bad = 0;
    for (int r = 0; r < reps; ++r) {
        fg_parallel(fg_count, a, blocks);
        for (long long b = 0; b < blocks; ++b)
            bad += atomic_load((_Atomic int *)counts + b) != r + 1;
    }
    return bad;
}
"""


@needs_cc
def test_the_thread_pool_runs_every_block_exactly_once():
    # many calls of every size, from four Python threads at once (one of them holds the
    # pool, the others run their blocks serially): no block lost or run twice, and with two
    # CPUs or more the workers ran some of them
    from funcgrad.backends.native import ops, threads
    cc = build.compiler()
    lib = build.load(ops.PRELUDE + threads.MODULE_HEADER + POOL_PROBE, cc)
    lib.fg_run_counting.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int]
    lib.fg_run_counting.restype = ctypes.c_longlong
    lib.fg_set_parallel(ctypes.c_void_p(threads.address(cc)))  # as build.load did
    before = threads.worker_blocks(cc)
    sizes = [1, 2, 3, 7, 64, 1000, threads.MAX_BLOCKS]
    failures = []

    def run(seed):
        for blocks in sizes * 3:
            counts = np.zeros(blocks, np.int32)
            reps = 1 + (seed + blocks) % 50 if blocks < 1000 else 3
            bad = lib.fg_run_counting(counts.ctypes.data, blocks, reps)
            if bad or not (counts == reps).all():
                failures.append((blocks, reps, bad, np.unique(counts)))

    workers = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures
    if threads.threads() > 1 and threads.address(cc):
        assert threads.worker_blocks(cc) > before
    else:
        assert threads.worker_blocks(cc) == before
    # without a pool (as when it does not build) the blocks run in order on the caller
    lib.fg_set_parallel(None)
    before = threads.worker_blocks(cc)
    run(0)
    assert not failures and threads.worker_blocks(cc) == before


@pytest.mark.parametrize("files, cpus", [
    ({"cpu.max": "200000 100000\n"}, 2), ({"cpu.max": "150000 100000\n"}, 2),
    ({"cpu.max": "max 100000\n"}, None), ({}, None), ({"cpu.max": "junk\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None)])
def test_the_pool_keeps_to_the_cgroup_cpu_quota(tmp_path, files, cpus):
    from funcgrad.backends.native import threads
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert threads.cgroup_cpus(str(tmp_path)) == cpus


def test_the_pool_size_is_omp_num_threads_else_cpus_within_the_quota(monkeypatch):
    from funcgrad.backends.native import threads
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "cgroup_cpus", lambda: None)
    cpus = threads.threads()
    assert cpus == len(os.sched_getaffinity(0))
    monkeypatch.setattr(threads, "cgroup_cpus", lambda: 1)
    assert threads.threads() == 1
    monkeypatch.setattr(threads, "cgroup_cpus", lambda: cpus + 5)  # a quota above the CPUs
    assert threads.threads() == cpus
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.threads() == 3


POOL_TSAN_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
static void count(void *const *a, long long b) {
    atomic_fetch_add_explicit((_Atomic int *)a[0] + b, 1, memory_order_relaxed);
}
static void *caller(void *arg) {  /* calls of 1..3000 blocks, each checked at once */
    long long bad = 0;
    for (int r = 0; r < 300; ++r) {
        const long long blocks = 1 + (r * 37 + (long long)arg * 11) % 3000;
        _Atomic int *counts = calloc(blocks, sizeof(int));
        void *const args[] = {(void *)counts};
        fg_parallel_run(count, args, blocks);
        for (long long b = 0; b < blocks; ++b) bad += atomic_load(counts + b) != 1;
        free(counts);
    }
    return (void *)bad;
}
int main(void) {
    fg_pool_configure(4, 200000);
    pthread_t t[3];
    for (long k = 0; k < 3; ++k) pthread_create(&t[k], 0, caller, (void *)k);
    long long bad = (long long)caller((void *)3);
    for (int k = 0; k < 3; ++k) { void *r; pthread_join(t[k], &r); bad += (long long)r; }
    printf("bad %lld workers %lld\n", bad, fg_pool_worker_blocks());
    return bad != 0;
}
"""


@needs_cc
def test_the_thread_pool_is_clean_under_the_thread_sanitizer(tmp_path):
    # the pool's C alone, four threads calling it, built with -fsanitize=thread: a data race
    # (a plain variable read without the ordering the claims rely on) is reported
    from funcgrad.backends.native import threads
    cc = build.find_compiler()
    src, exe = tmp_path / "pool.c", tmp_path / "pool"
    src.write_text(threads.POOL_SOURCE + POOL_TSAN_MAIN)
    build_cmd = [cc, "-std=c11", "-O1", "-g", "-pthread", str(src), "-o", str(exe)]
    done = subprocess.run(build_cmd[:3] + ["-fsanitize=thread"] + build_cmd[3:],
                          capture_output=True, text=True)
    if done.returncode != 0 and "tsan" in done.stderr.lower():
        # no ThreadSanitizer runtime: the same driver still checks every block, unsanitized
        done = subprocess.run(build_cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, TSAN_OPTIONS="halt_on_error=1"))
    assert run.returncode == 0 and "ThreadSanitizer" not in run.stderr, run.stderr[-4000:]
    assert run.stdout.startswith("bad 0 ")


POOL_FORK = textwrap.dedent("""
    import os, sys
    import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
    fg.config.update("native", "sync")
    f = fg.jit(lambda x: x * 2.0 + 1.0)
    x = np.arange(1 << 20, dtype=np.float32)
    assert (np.asarray(f(x)) == x * 2 + 1).all()
    pid = os.fork()  # the child has no workers: it starts its own
    if pid == 0:
        ok = all((np.asarray(f(x + k)) == (x + k) * 2 + 1).all() for k in range(20))
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status))
""")


@needs_cc
def test_a_forked_child_runs_pool_kernels():
    done = subprocess.run([sys.executable, "-c", POOL_FORK], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["0"]


@needs_cc
def test_nan_and_empty_reductions():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, -0.0]], np.float32)
    _, got, want = both(lambda a: (fnp.max(a, axis=1), fnp.min(a, axis=0), fnp.sum(a, 1)), x)
    assert_same(got, want)
    e = np.zeros((0, 3), np.float32)
    _, got, want = both(lambda a: (fnp.sum(a, axis=0), fnp.max(a * 2, axis=0, initial=-1.0),
                                   a + 1), e)
    assert_same(got, want)


@needs_cc
def test_donated_state_updates_in_place_like_adam():
    def step(p, m, g):
        m = 0.9 * m + 0.1 * g
        return p - 0.01 * m / (fnp.sqrt(m * m) + 1e-8), m
    rng = np.random.default_rng(1)
    p, m, g = (rng.normal(size=(300, 7)).astype(np.float32) for _ in range(3))
    want = fg.jit(step, backend="numpy")(p, m, g)
    with native_mode():
        jitted = fg.jit(step, donate_argnums=(0, 1))
        got = jitted(fnp.array(p), fnp.array(m), fnp.array(g))
        text = jitted.lower(p, m, g).compile().as_text()
    assert "C module" in text
    assert_same(got, want)


# --- safety ----------------------------------------------------------------------------------

@needs_cc
def test_hostile_names_reach_the_c_source_only_as_comments():
    src = "def f(x):\n    return fnp.tanh(x)  # */ system(\"rm -rf ~\"); /* \\\n"
    ns = {"fnp": fnp}
    exec(compile(src, "evil */ #include <stdlib.h> /*\n.py", "exec"), ns)
    f = ns["f"]
    f.__name__ = "*/ int main(){} /*"
    exe, got, want = both(f, np.ones(3, np.float32))
    c = exe.c_source()
    assert "#include <stdlib.h>" not in c and "int main" not in c
    for line in c.splitlines():
        if "evil" in line:
            assert line.rstrip().endswith("*/") and line.count("*/") == 1, line
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


def test_sanitize_option_is_checked():
    with native_mode(native_sanitize="address; rm -rf /"):
        with pytest.raises(ValueError, match="native_sanitize"):
            build.sanitize_option()


# --- compile cache, fallback, tiers ----------------------------------------------------------

CHILD = textwrap.dedent("""
    import json, sys, numpy as np, funcgrad as fg, funcgrad.numpy as fnp
    from funcgrad.backends.native import build
    fg.config.update("native", "sync")
    fg.config.update("native_cache_dir", sys.argv[1])
    f = fg.jit(lambda x: fnp.tanh(x * 3.0) + fnp.sum(x))
    y = np.asarray(f(np.arange(5, dtype=np.float32)))
    print(json.dumps({"stats": dict(build.stats), "y": y.tolist()}))
""")


@needs_cc
def test_a_second_process_reuses_the_compiled_module(tmp_path):
    import json
    runs = [subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True,
                           text=True, check=True) for _ in range(2)]
    first, second = (json.loads(r.stdout.splitlines()[-1]) for r in runs)
    assert first["stats"].get("compiles") == 1 and not first["stats"].get("disk_hits")
    assert second["stats"].get("disk_hits") == 1 and not second["stats"].get("compiles")
    assert first["y"] == second["y"]
    assert len(list(tmp_path.glob("*.so"))) == 1 and len(list(tmp_path.glob("*.c"))) == 1


PROBE_CHILD = """
import sys
import funcgrad as fg
from funcgrad.backends.native import build
fg.config.update("native_cache_dir", sys.argv[1])
if sys.argv[2] == "second":  # the compiler must not be probed again
    build._builds = lambda *args, **kwargs: sys.exit("probed the compiler again")
cc = build.compiler()
print(cc.flags, cc.libs)
"""


@needs_cc
def test_a_second_process_reads_the_compiler_probe_from_disk(tmp_path):
    first, second = (subprocess.run([sys.executable, "-c", PROBE_CHILD, str(tmp_path), which],
                                    capture_output=True, text=True) for which in ("1", "second"))
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert first.stdout == second.stdout and build.OPT_LEVEL in first.stdout
    assert len(list(tmp_path.glob("probe-*.json"))) == 1


def test_no_compiler_falls_back_to_numpy_with_one_warning(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(tiers, "_warned", set())
    with native_mode():
        with pytest.warns(RuntimeWarning, match="no C compiler found.*apt install gcc"):
            exe = pipeline.compile_jaxpr(fg.make_jaxpr(lambda x: x * 2.0)(np.ones(3, "f")))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            again = pipeline.compile_jaxpr(fg.make_jaxpr(lambda x: x + 2.0)(np.ones(3, "f")))
    assert not isinstance(exe, native.NativeExecutable)
    assert "np.multiply" in exe.as_text()
    np.testing.assert_array_equal(exe(np.ones(3, "f"))[0], [2, 2, 2])
    np.testing.assert_array_equal(again(np.ones(3, "f"))[0], [3, 3, 3])


@needs_cc
def test_background_mode_runs_numpy_first_then_native():
    closed = fg.make_jaxpr(lambda x: fnp.sin(x) * 3.0)(np.ones(4, "f"))
    with native_mode("background"):
        exe = pipeline.compile_jaxpr(closed)
    assert isinstance(exe, tiers.TieredExecutable)
    first = exe(np.ones(4, "f"))[0]
    assert exe.wait(timeout=120).native
    assert "C module" in exe.as_text()
    np.testing.assert_allclose(exe(np.ones(4, "f"))[0], first, rtol=1e-6)


def test_backend_numpy_forces_the_numpy_code_generator():
    with native_mode():
        f = fg.jit(lambda x: x * 2.0 + 1.0, backend="numpy")
        text = f.lower(np.ones(3, "f")).compile().as_text()
    assert "C module" not in text and "np.multiply" in text


# --- sanitizers ------------------------------------------------------------------------------

SANITIZED = textwrap.dedent("""
    import sys, numpy as np, funcgrad as fg, funcgrad.numpy as fnp
    fg.config.update("native", "sync")
    fg.config.update("native_sanitize", "address,undefined")
    fg.config.update("native_cache_dir", sys.argv[1])
    rng = np.random.default_rng(0)
    x = rng.normal(size=(9, 7)).astype(np.float32)
    v = rng.normal(size=(7,)).astype(np.float32)
    i = rng.integers(-100, 100, size=(9, 7)).astype(np.int8)
    progs = [lambda x, v, i: (fnp.exp(x * v), fnp.sum(x.T, axis=0), fnp.max(x, axis=1),
                              fnp.sum(x * v, axis=0), fnp.min(x, axis=0)),
             lambda x, v, i: (i * i + i // 3, i << 9, (i.astype(np.int32) * 70000) ** 2),
             lambda x, v, i: (x.astype(np.int32), x.astype(np.float16) * 2, x[::-1] + x),
             lambda x, v, i: fg.lax.scan(lambda c, r: (c * 0.5 + fnp.sin(r), c + r), v, x),
             lambda x, v, i: fg.grad(lambda x: fnp.sum(fg.lax.reduce_window(  # pooling grad
                 x, -np.inf, fg.lax.max, (3, 2), (2, 1), ((1, 2), (0, 1)), (2, 1)) ** 2))(x),
             lambda x, v, i: fg.lax.fori_loop(0, 4, lambda k, c: (  # along one axis, in C
                 fg.lax.cumsum(c[0], 1, reverse=True) * 0.5 + fnp.argmax(c[0], 0) * 0.1,
                 fg.lax.cumprod(c[1] + i, 0)), (x, i)),
             lambda x, v, i: (lambda m: (  # small linear algebra: C routines
                 fnp.linalg.solve(m, v), fg.lax.linalg.lu(x),
                 fg.lax.linalg.cholesky(fnp.stack([m @ m.T, -m, m @ m.T])),
                 fg.lax.linalg.triangular_solve(m, x[:3], lower=True, transpose_a=True),
                 fg.lax.linalg.triangular_solve(m, x[:7, :5], left_side=True),  # blocked
                 fg.lax.fori_loop(0, 5, lambda k, c: c + fnp.linalg.solve(m, fnp.tanh(c)), v),
                 fg.lax.fori_loop(0, 9, lambda k, c: c.at[k + 3].add(c[k - 2] * 0.5), x),
                 fg.vmap(lambda w: fg.lax.fori_loop(0, 3, lambda k, c: fnp.tanh(w @ c), w[0]))(
                     fnp.stack([m, m.T]))
             ))(x[:7] + 8 * fnp.eye(7)),
             lambda x, v, i: fg.lax.scan(  # gathers and scatters, some indices out of bounds
                 lambda c, t: (c.at[t % 9].add(x[t % 9]).at[t].set(1.0, mode="drop")
                               + fnp.take(x, t, axis=0, mode="fill").sum(0),
                               fnp.take_along_axis(x[:3], fnp.abs(t)[:, None] % 7, axis=1)),
                 x[:3], i[:, :3].astype(np.int32) // 8),
             lambda x, v, i: (lambda w: fg.lax.scan(
                 lambda c, r: (fnp.tanh(c @ w + r), x @ c), v, x))(x[:7] * 0.3),
             lambda x, v, i: fg.lax.fori_loop(0, 3, lambda k, c: (  # sorts, rev, random, nested
                 fnp.sort(c[0], axis=0) * 0.5 + fg.lax.rev(c[0], (1,)) * 0.5
                 + fg.random.normal(fg.random.fold_in(fg.random.PRNGKey(0), k), (9, 7)) * 0.1
                 + fnp.prod(c[0] * 0.1 + 1.0, axis=0) * 0.01,
                 fg.lax.top_k(c[0], 3)[1] + fnp.argsort(c[1], axis=1)[:, :3],
                 fg.lax.fori_loop(0, 2, lambda j, d: d * 0.5 + 1.0, c[2])),
                 (x, i[:, :3].astype(np.int32), v))]
    for p in progs:
        f = fg.jit(p)
        out = f(x, v, i)
        ref = fg.jit(p, backend="numpy")(x, v, i)
        for a, b in zip(fg.tree_util.tree_leaves(out), fg.tree_util.tree_leaves(ref)):
            np.testing.assert_allclose(np.asarray(a, 'f8'), np.asarray(b, 'f8'), rtol=1e-5)
        assert "C module" in f.lower(x, v, i).compile().as_text()
    text = lambda p: fg.jit(p).lower(x, v, i).compile().as_text()
    assert "dot_general 1x7 @ 7x7" in text(progs[-2])
    assert "/* lu 7x7 */" in text(progs[-4])
    assert "/* gather (1, 7) */" in text(progs[-3])
    assert all(s in text(progs[-1]) for s in ("/* sort axis", "/* top_k axis", "/* rev",
                                              "reduces axes",  # the fused reduce_prod
                                              "/* bitcast_convert_type */", "loop */"))
    big = rng.normal(size=(700, 300)).astype(np.float32)  # kernels in blocks on the pool
    g = lambda b: (fnp.tanh(b) * 2.0 - b[:, :1], fnp.sum(b, axis=1), fnp.sum(b, axis=0),
                   fnp.max(b * b, axis=0), fg.lax.fori_loop(0, 2, lambda k, c: c * 0.5, b))
    for a, r in zip(fg.jit(g)(big), fg.jit(g, backend="numpy")(big)):
        np.testing.assert_allclose(np.asarray(a, 'f8'), np.asarray(r, 'f8'), rtol=1e-5,
                                   atol=1e-4)  # libm ulps; float32 sums of 700 (numpy)
    big_text = fg.jit(g).lower(big).compile().as_text()
    assert big_text.count("fg_parallel(fg_") >= 4 and "FG_PREFETCH(p_" in big_text
    print("sanitized ok")
""")


@needs_cc
def test_kernels_run_clean_under_address_and_undefined_sanitizers(tmp_path):
    cc = build.find_compiler()
    asan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True,
                          text=True).stdout.strip()
    if not os.path.isabs(asan):  # a compiler without a separate ASan runtime (clang)
        pytest.skip("the compiler ships no libasan.so to preload")
    env = dict(os.environ, LD_PRELOAD=asan, ASAN_OPTIONS="detect_leaks=0")
    done = subprocess.run([sys.executable, "-c", SANITIZED, str(tmp_path)], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "sanitized ok" in done.stdout, done.stderr[-3000:]


# --- loops in C ------------------------------------------------------------------------------

def _python_calls(fn, *args):
    """How many Python-level function calls running `fn(*args)` makes."""
    count = [0]

    def prof(frame, event, arg):
        if event == "call":
            count[0] += 1
    sys.setprofile(prof)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return count[0]


def _rnn(xs, h0, w):
    def step(h, x):
        h = fnp.tanh(h * w + x)
        return h, h * 2.0
    return lax.scan(step, h0, xs)


def _rnn_matmul(h, w, u, xs):  # small matmuls in the body: C loops too
    return lax.scan(lambda h, x: (fnp.tanh(h @ w + x @ u), w @ h), h, xs)


def _branchy(x):  # cond and switch (clamped index) inside a loop: C if/else
    def body(i, c):
        c = lax.cond(i % 2 == 0, lambda c: c * 2.0, lambda c: fnp.tanh(c) - 1.0, c)
        return lax.switch(i % 4 - 1, [lambda c: c * 0.5, lambda c: c + fnp.sum(c),
                                      lambda c: -c], c)
    return lax.fori_loop(0, 11, body, x)


def _swap_loop(n):
    def f(x):
        def body(i, c):
            a, b = c
            return b, a * 0.5 + fnp.tanh(b) + i.astype(np.float32)
        return lax.fori_loop(0, n, body, (x, x * 2.0))
    return f


def _while(x):
    return lax.while_loop(lambda c: c[1] < 100.0,
                          lambda c: (c[0] * 1.01, c[1] + fnp.sum(c[0])), (x, 0.0))


@needs_cc
def test_loops_whose_bodies_are_kernels_run_in_c():
    rng = np.random.default_rng(3)
    x = np.linspace(0.1, 1, 5).astype(np.float32)
    xs = rng.normal(size=(40, 5)).astype(np.float32)
    cases = [(_rnn, (xs, x, x), "scan loop"), (_swap_loop(9), (x,), "scan loop"),
             (lax.cumsum, (xs,), None), (_while, (x,), "while loop"),
             (_branchy, (x,), "scan loop"),
             (_rnn_matmul, (x, rng.normal(size=(5, 5)).astype(np.float32) * 0.4,
                            rng.normal(size=(5, 5)).astype(np.float32) * 0.4, xs), "scan loop")]
    for fn, args, marker in cases:
        with native_mode():
            jitted = fg.jit(fn)
            got = fg.tree_util.tree_leaves(jitted(*args))
            text = jitted.lower(*args).compile().as_text()
        want = fg.tree_util.tree_leaves(fg.jit(fn, backend="numpy")(*args))
        if marker:
            assert f"/* {marker} */" in text, fn
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)


def _rnn_grad(w, u, h0, xs):  # an RNN's value and gradient: products of 32x64x64 per step
    def loss(w, u):
        def body(h, x):
            h = fnp.tanh(h @ w + x @ u)
            return h, (h * h).mean()
        return lax.scan(body, h0, xs)[1].mean()
    return fg.value_and_grad(loss, argnums=(0, 1))(w, u)


def test_numpys_own_openblas_is_found_for_the_c_loops():
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    if blas.get("name") == "scipy-openblas":  # the PyPI wheels: an ILP64 OpenBLAS
        assert set(native_blas.functions()) == set(native_blas.NAMES)


@needs_cc
@pytest.mark.parametrize("blas", [True, False])
def test_loop_products_call_numpys_blas_from_c(monkeypatch, blas):
    if not blas:  # without numpy's BLAS the loops multiply with their own C code
        monkeypatch.setattr(native_blas, "functions", lambda: {})
    blas = bool(native_blas.functions())  # numpy's PyPI wheels ship an ILP64 OpenBLAS
    rng = np.random.default_rng(4)
    args = [(rng.normal(size=s) * 0.1).astype(np.float32)
            for s in ((64, 64), (32, 64), (32, 64), (12, 32, 32))]
    with native_mode():
        jitted = fg.jit(lambda *a: _rnn_grad(*a))  # a function of its own: no cached program
        got = fg.tree_util.tree_leaves(jitted(*args))
        text = jitted.lower(*args).compile().as_text()
    assert text.count("/* scan loop */") == 2 and ("fg_sgemm(101" in text) == blas
    want = fg.tree_util.tree_leaves(fg.jit(_rnn_grad, backend="numpy")(*args))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6)


@needs_cc
def test_a_native_loop_runs_no_python_per_iteration():
    x = np.linspace(0.1, 1, 5).astype(np.float32)
    calls = {}
    for n in (10, 1000):
        closed = fg.make_jaxpr(_swap_loop(n))(x)
        with native_mode():
            exe = pipeline.compile_jaxpr(closed)
        assert "/* scan loop */" in exe.as_text()
        exe(x)
        calls[n] = _python_calls(exe, x)
        numpy_exe = pipeline.compile_jaxpr(closed, backend="numpy")
        np.testing.assert_allclose(exe(x)[0], numpy_exe(x)[0], rtol=1e-6)
        calls[n, "numpy"] = _python_calls(numpy_exe, x)
    assert calls[10] == calls[1000] < 50, calls
    assert calls[1000, "numpy"] > 1000 > calls[1000]


@needs_cc
def test_background_mode_runs_loops_and_switches_them_to_c():
    x = np.linspace(0.1, 1, 5).astype(np.float32)
    f = _swap_loop(20)
    want = fg.tree_util.tree_leaves(fg.jit(f, backend="numpy")(x))
    with native_mode("background"):
        exe = pipeline.compile_jaxpr(fg.make_jaxpr(f)(x))
        first = exe(x)
        assert exe.wait(timeout=120).native
    assert "/* scan loop */" in exe.as_text()
    for got in (first, exe(x)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


@needs_cc
def test_background_builds_keep_no_dead_program_alive():
    import gc
    import linecache
    sources = lambda: {k for k in linecache.cache if k.startswith("<funcgrad-jit-")}
    before = sources()
    with native_mode("background"):
        for i in range(12):
            f = fg.jit(lambda x, i=i: fnp.sin(x) * 2.0 + i)
            np.testing.assert_allclose(np.asarray(f(fnp.ones(2))), [np.sin(1) * 2 + i] * 2,
                                       rtol=1e-6)
        del f
        tiers.drain()
    gc.collect()
    assert sources() - before == set()


@needs_cc
def test_no_wrong_pointer_reaches_c():
    from funcgrad import errors
    closed = fg.make_jaxpr(lambda x: fnp.sin(x) * 2.0)(np.ones(4, np.float32))
    with native_mode():
        exe = pipeline.compile_jaxpr(closed)
    assert isinstance(exe, native.NativeExecutable)
    wide = np.linspace(0, 1, 4)  # float64 and strided: converted, not reinterpreted
    np.testing.assert_allclose(exe(wide)[0], np.sin(wide) * 2, rtol=1e-6)
    np.testing.assert_allclose(exe(np.linspace(0, 1, 8, dtype="f")[::2])[0],
                               np.sin(np.linspace(0, 1, 8)[::2]) * 2, rtol=1e-6)
    with pytest.raises(errors.FuncgradInternalError, match="compiled for 4"):
        exe(np.ones(3, np.float32))


@needs_cc
def test_negative_constants_print_as_valid_c():
    import ctypes

    from funcgrad.backends.native import ops
    from funcgrad.backends.native.kernel import CKernel
    from funcgrad.compiler.fusion import Const, Instr, KernelInput, KernelOutput, KernelSpec
    body = (Instr("t0", "neg", (Const(-0.5, "float32"),), "float32"),
            Instr("t1", "logistic", (Const(-2.0, "float32"),), "float32"),
            Instr("t2", "mul", ("in0", "t0"), "float32"),
            Instr("t3", "add", ("t2", "t1"), "float32"))
    spec = KernelSpec("k", (3,), (KernelInput("in0", "float32", (3,), (0,)),), body,
                      (KernelOutput("out0", "t3", "float32", (3,)),))
    lib = build.load(ops.PRELUDE + CKernel(spec, "fg_k0").source())
    x, out = np.array([1, 2, 3], np.float32), np.empty(3, np.float32)
    lib.fg_k0(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data))
    np.testing.assert_allclose(out, x * 0.5 + 1 / (1 + np.exp(2.0)), rtol=1e-6)


@needs_cc
def test_random_normal_under_native_jit_is_eager_bit_for_bit():
    key = fg.random.PRNGKey(3)
    with native_mode():
        f = fg.jit(lambda k: (fg.random.normal(k, (500,)), fg.random.truncated_normal(
            k, -1.5, 2.0, (300,)), fg.random.uniform(k, (200,))))
        got = f(key)
        assert "C module" in f.lower(key).compile().as_text()
    want = (fg.random.normal(key, (500,)), fg.random.truncated_normal(key, -1.5, 2.0, (300,)),
            fg.random.uniform(key, (200,)))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@needs_cc
def test_read_only_and_empty_inputs_reach_c_correctly():
    x = np.linspace(-1, 1, 12).astype(np.float32)
    x.flags.writeable = False  # the fast pointer path needs a writable buffer: falls back
    with native_mode():
        f = fg.jit(lambda x, e: (x * 3.0 + 1.0, e * 2.0))
        got, empty = f(x, np.zeros((0,), np.float32))
        assert "C module" in f.lower(x, np.zeros((0,), np.float32)).compile().as_text()
    np.testing.assert_array_equal(np.asarray(got), x * np.float32(3) + np.float32(1))
    assert np.asarray(empty).shape == (0,)


@needs_cc
def test_the_disk_cache_keeps_to_its_size_by_dropping_the_least_recently_used(tmp_path):
    sources = [f"double fg_probe{i}(double x) {{ return x + {i}; }}\n" for i in range(4)]
    fg.config.update("native_cache_dir", str(tmp_path))
    try:
        for src in sources[:3]:
            build.load(src)
        one = max(os.path.getsize(p) for p in tmp_path.glob("*.so"))
        keys = [build.cache_key(src, build.compiler()) for src in sources]
        os.utime(tmp_path / f"{keys[0]}.so", (1, 1))  # the first module: the least recent
        # room for the newest two modules and their sources, not three
        fg.config.update("native_cache_bytes", 2 * one + sum(len(s) for s in sources) + 200)
        build.load(sources[3])
        left = {p.stem for p in tmp_path.glob("*.so")}
        assert keys[3] in left and keys[0] not in left and len(left) <= 3
        assert not (tmp_path / f"{keys[0]}.c").exists()
        assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= fg.config.native_cache_bytes
    finally:
        fg.config.update("native_cache_dir", None)
        fg.config.update("native_cache_bytes", 1 << 30)


@needs_cc
def test_float16_nextafter_steps_a_float16_ulp():
    # float16 computes in float: a float32 nextafterf stepped a float32 ulp, which rounded
    # back (nextafter(0, -1) was -0.0, not -6e-08); every finite half against numpy
    x = np.arange(0, 0x10000, dtype=np.uint16).view(np.float16)
    x = x[np.isfinite(x)]
    for target in (np.inf, -np.inf, 0.0, -0.0, 1.0):
        y = np.full_like(x, target)
        _, got, ref = both(lax.nextafter, x, y)
        with np.errstate(over="ignore"):  # max towards inf is inf
            want = np.nextafter(x, y)
        assert_same(got, [want])
        assert_same(ref, [want])


SWEEP_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                np.float16, np.float32, np.float64, np.bool_]
SWEEP_BINARY = [lax.add, lax.sub, lax.mul, lax.div, lax.rem, lax.max, lax.min, lax.pow,
                lax.atan2, lax.bitwise_and, lax.bitwise_or, lax.bitwise_xor, lax.shift_left,
                lax.shift_right_arithmetic, lax.shift_right_logical, lax.lt, lax.eq, lax.ne,
                lax.ge, lax.nextafter, fnp.floor_divide, fnp.remainder, fnp.power]
SWEEP_UNARY = [lax.neg, lax.abs, lax.sign, lax.bitwise_not, lax.floor, lax.ceil, lax.round,
               lax.sqrt, lax.exp, lax.log, lax.population_count, lax.is_finite, fnp.square,
               fnp.reciprocal, fnp.trunc, fnp.rint]
SWEEP_LIBM = {lax.pow, lax.atan2, lax.sqrt, lax.exp, lax.log, fnp.power}  # a few ulp apart


def _sweep_values(dt, rng, n=48):
    """Random values of `dt` with its extremes first (min, max, 0, +-1, inf, nan, -0...)."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        out = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        special = [info.min, info.max, 0, 1, info.max // 2]
        special += [-1, -2, info.min + 1] if dt.kind == "i" else [2, 3, info.max - 1]
    else:
        out = (rng.normal(size=n) * 10).astype(dt)
        special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.5, 3.5,
                   np.finfo(dt).max, np.finfo(dt).tiny]
    out[:len(special)] = np.array(special, dt)
    return out


@needs_cc
@pytest.mark.parametrize("dtype", SWEEP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_with_extreme_values_matches_eager(dtype):
    # every elementwise op and cast the dtype takes, on its extremes, in one program per
    # dtype: native and the numpy backend against eager, bit for bit (libm: within 4e-7)
    fg.config.update("enable_x64", True)  # 64-bit values stay 64-bit (reset by conftest)
    rng = np.random.default_rng(0)
    a, b = _sweep_values(dtype, rng), _sweep_values(dtype, rng)[::-1].copy()
    ops = [(f, 2) for f in SWEEP_BINARY] + [(f, 1) for f in SWEEP_UNARY]
    ops += [(lambda x, d=d: lax.convert_element_type(x, d), 1) for d in SWEEP_DTYPES]
    usable = []
    for f, arity in ops:  # the ops eager accepts for this dtype
        try:
            with np.errstate(all="ignore"):
                f(*[fnp.asarray(v) for v in (a, b)[:arity]])
            usable.append((f, arity))
        except errors.FuncgradError:
            pass
    prog = lambda a, b: tuple(f(*(a, b)[:arity]) for f, arity in usable)
    with np.errstate(all="ignore"):
        eager = prog(fnp.asarray(a), fnp.asarray(b))
    _, got, ref = both(prog, a, b)
    for (f, _), w, g, r in zip(usable, eager, got, ref):
        w = np.asarray(w)
        for label, x in (("native", g), ("numpy backend", r)):
            x = np.asarray(x)
            assert x.dtype == w.dtype, (f, label)
            if f in SWEEP_LIBM and w.dtype.kind == "f":
                np.testing.assert_allclose(x, w, rtol=4e-7 if w.dtype != np.float16 else 1e-3,
                                           equal_nan=True, err_msg=f"{f} {label}")
            else:
                assert_same([x], [w])


@needs_cc
def test_random_numbers_inside_a_loop_stay_a_c_loop_with_the_same_bits():
    # threefry bits become floats through bitcast_convert_type: as a C copy it keeps an
    # ADVI- or MCMC-style loop that draws samples each step in C (before: a Python loop)
    from funcgrad import random

    def f(key, x):
        def body(i, c):
            k, x = c
            k, sub = random.split(k)
            noise = random.normal(sub, x.shape) + random.uniform(random.fold_in(sub, i), x.shape)
            return k, x * 0.9 + noise
        return lax.fori_loop(0, 50, body, (key, x))[1]
    key, x = random.PRNGKey(3), np.zeros((4, 8), np.float32)
    closed = fg.make_jaxpr(f)(key, x)
    with native_mode():
        exe = pipeline.compile_jaxpr(closed)
    assert "/* bitcast_convert_type */" in exe.as_text() and "loop */" in exe.as_text()
    assert _python_calls(exe, key, x) < 50  # not one Python step per iteration
    numpy_exe = pipeline.compile_jaxpr(closed, backend="numpy")
    assert_same(exe(key, x), numpy_exe(key, x))
    assert_same(exe(key, x), [f(key, x)])


@needs_cc
def test_nested_loops_are_one_c_function():
    # an iLQR/MPC-style fori_loop inside a fori_loop, a while inside a scan, and an inner
    # body holding an array constant (passed down from the outer C function)
    w = np.linspace(-1, 1, 12).astype(np.float32).reshape(3, 4)

    def nested(x):
        def inner(j, c):
            return fnp.tanh(c @ w.T @ w * 0.1 + fnp.array([0.5, -0.5, 0.25, 0.0]) * j)
        def outer(i, c):
            c = lax.fori_loop(0, 4, inner, c)
            halve = lax.while_loop(lambda d: fnp.sum(fnp.abs(d)) > 0.5, lambda d: d * 0.5, c)
            return c + halve
        ys = lax.scan(lambda c, _: (lax.fori_loop(0, 3, outer, c), fnp.sum(c)), x, None,
                      length=5)
        return ys
    x = np.linspace(0.1, 1, 8).astype(np.float32).reshape(2, 4)
    closed = fg.make_jaxpr(nested)(x)
    with native_mode():
        exe = pipeline.compile_jaxpr(closed)
    text = exe.as_text()
    assert text.count("loop */") >= 4 and "for i0 in range" not in text, text[:2000]
    assert _python_calls(exe, x) < 50
    want = pipeline.compile_jaxpr(closed, backend="numpy")(x)
    for g, r in zip(exe(x), want):
        np.testing.assert_allclose(g, r, rtol=2e-6, atol=1e-7)
    for g, r in zip(exe(x), nested(fnp.asarray(x))):
        np.testing.assert_allclose(g, np.asarray(r), rtol=2e-6, atol=1e-7)


@needs_cc
def test_rev_in_a_loop_body_is_a_c_copy():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 24
    for dims in ((0,), (1,), (2,), (0, 2), (0, 1, 2)):
        def f(x, dims=dims):
            return lax.fori_loop(0, 3, lambda i, c: lax.rev(c, dims) * 0.5 + c, x)
        closed = fg.make_jaxpr(f)(x)
        with native_mode():
            exe = pipeline.compile_jaxpr(closed)
        assert "loop */" in exe.as_text() and f"/* rev {list(dims)} */" in exe.as_text()
        assert_same(exe(x), pipeline.compile_jaxpr(closed, backend="numpy")(x))
        assert_same(exe(x), [f(fnp.asarray(x))])


@needs_cc
def test_sorts_in_a_loop_body_match_numpy_stable_order():
    # sort, argsort (a sort of (x, iota)), sort_key_val, top_k and permutation in a C loop body:
    # the numpy backend's and eager's order exactly (stable; NaNs last; -0.0 and 0.0 tie)
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, size=(5, 37)).astype(np.float32)
    x[0, :4] = [np.nan, -0.0, 0.0, np.nan]
    x[1, 5:9] = [np.inf, -np.inf, np.nan, -0.0]
    cases = {
        "sort axis -1": lambda c: fnp.sort(c, axis=-1),
        "sort axis 0": lambda c: fnp.sort(c, axis=0),
        "argsort": lambda c: fnp.argsort(c, axis=-1).astype(fnp.float32),
        "key_val": lambda c: lax.sort_key_val(c, c * 2.0 + 1.0)[1],
        "ints": lambda c: fnp.sort((c * 3).astype(fnp.int32), axis=1).astype(fnp.float32),
    }
    for name, op in cases.items():
        def f(x, op=op):
            return lax.fori_loop(0, 2, lambda i, c: op(c) + 0.0 * c, x)
        closed = fg.make_jaxpr(f)(x)
        with native_mode():
            exe = pipeline.compile_jaxpr(closed)
        text = exe.as_text()
        assert "loop */" in text and "/* sort axis" in text, name
        assert_same(exe(x), pipeline.compile_jaxpr(closed, backend="numpy")(x))
        assert_same(exe(x), [f(fnp.asarray(x))])
    def topk(x):  # top-k sampling's shape: values and indices, NaN largest, ties by index
        step = lambda i, s: (s[0], lax.top_k(s[0] + s[1][0][:, :1] * 0.0, 4))
        return lax.fori_loop(0, 2, step, (x, lax.top_k(x, 4)))[1]
    closed = fg.make_jaxpr(topk)(x)
    with native_mode():
        exe = pipeline.compile_jaxpr(closed)
    assert "/* top_k axis" in exe.as_text()
    assert_same(exe(x), pipeline.compile_jaxpr(closed, backend="numpy")(x))
    assert_same(exe(x), topk(fnp.asarray(x)))
    key = fg.random.PRNGKey(1)

    def perm(k):
        step = lambda i, s: (fg.random.split(s[0])[0], fg.random.permutation(s[0], 50) + s[1] * 0)
        return lax.fori_loop(0, 3, step, (k, fnp.arange(50)))[1]
    closed = fg.make_jaxpr(perm)(key)
    with native_mode():
        exe = pipeline.compile_jaxpr(closed)
    assert "/* sort axis" in exe.as_text()
    assert_same(exe(key), pipeline.compile_jaxpr(closed, backend="numpy")(key))


@needs_cc
def test_products_in_a_loop_body_are_c_kernels():
    # reduce_prod over any axes (and so det), a fused reduction, keeps the loop C: integers
    # wrap exactly as the numpy backend's, floats agree to a few ulp (another multiplication
    # order; float32 products in double)
    fg.config.update("enable_x64", True)  # 64-bit values stay 64-bit (reset by conftest)
    rng = np.random.default_rng(0)
    for dt in (np.float32, np.float64, np.int8, np.int32, np.uint16, np.int64):
        if np.dtype(dt).kind == "f":
            x = (rng.normal(size=(3, 4, 5)) * 1.3).astype(dt)
        else:
            x = rng.integers(0 if np.dtype(dt).kind == "u" else -9, 9, (3, 4, 5)).astype(dt)
        for axes in ((0,), (2,), (0, 2), (0, 1, 2)):
            def f(x, axes=axes):
                step = lambda i, c: (c[0], lax.reduce_prod(c[0] * c[0], axes))
                return lax.fori_loop(0, 1, step, (x, lax.reduce_prod(x, axes)))[1]
            closed = fg.make_jaxpr(f)(x)
            with native_mode():
                exe = pipeline.compile_jaxpr(closed)
            assert "reduces axes" in exe.as_text() and "loop */" in exe.as_text()
            got, want = exe(x)[0], pipeline.compile_jaxpr(closed, backend="numpy")(x)[0]
            assert got.dtype == want.dtype
            if np.dtype(dt).kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-6)
            else:
                np.testing.assert_array_equal(got, want)
    m = (np.eye(3) * 2 + 0.1).astype(np.float32)
    f = lambda x: lax.fori_loop(0, 3, lambda i, c: c * 0.9 + fnp.linalg.det(c) * 0.01, x)
    closed = fg.make_jaxpr(f)(m)
    with native_mode():
        exe = pipeline.compile_jaxpr(closed)
    assert "reduces axes" in exe.as_text() and "loop */" in exe.as_text()
    np.testing.assert_allclose(exe(m)[0], np.asarray(f(fnp.asarray(m))), rtol=1e-6)
