"""bfloat16 (and the float8s) compute in float32 and round after every operation, on every
backend: each result is, bit for bit, ml_dtypes' rounding of the float32 result of the same
operation on the widened operands. Reductions and products accumulate in float32 and round
once; `astype` rounds once from any float type."""

import json
import os

import ml_dtypes
import numpy as np
import pytest
import random_bfloat16_cases
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax, optim
from funcgrad.core import Array

BF16, F32 = np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)

# (name, function, domain of each operand); the float ops of tests/test_lax_elementwise.py
UNARY = [
    ("neg", lax.neg, (-3, 3)), ("sign", lax.sign, (-3, 3)), ("floor", lax.floor, (-3, 3)),
    ("ceil", lax.ceil, (-3, 3)), ("round", lax.round, (-3, 3)), ("exp", lax.exp, (-3, 3)),
    ("exp2", lax.exp2, (-3, 3)), ("log", lax.log, (0.1, 5)), ("log1p", lax.log1p, (-0.5, 3)),
    ("expm1", lax.expm1, (-3, 3)), ("tanh", lax.tanh, (-3, 3)),
    ("logistic", lax.logistic, (-5, 5)), ("sin", lax.sin, (-3, 3)), ("cos", lax.cos, (-3, 3)),
    ("tan", lax.tan, (-1.2, 1.2)), ("asin", lax.asin, (-0.9, 0.9)),
    ("acos", lax.acos, (-0.9, 0.9)), ("atan", lax.atan, (-3, 3)), ("sinh", lax.sinh, (-3, 3)),
    ("cosh", lax.cosh, (-3, 3)), ("asinh", lax.asinh, (-3, 3)),
    ("acosh", lax.acosh, (1.1, 4)), ("atanh", lax.atanh, (-0.9, 0.9)),
    ("sqrt", lax.sqrt, (0, 5)), ("rsqrt", lax.rsqrt, (0.1, 5)), ("cbrt", lax.cbrt, (-3, 3)),
    ("abs", lax.abs, (-3, 3)), ("erf", lax.erf, (-3, 3)), ("erfc", lax.erfc, (-3, 3)),
    ("erf_inv", lax.erf_inv, (-0.99, 0.99)), ("lgamma", lax.lgamma, (0.1, 8)),
    ("digamma", lax.digamma, (0.2, 8)), ("square", lax.square, (-3, 3)),
    ("reciprocal", lax.reciprocal, (0.5, 3)), ("cube", lambda x: lax.integer_pow(x, 3), (-3, 3)),
    ("is_finite", lax.is_finite, (-3, 3)),
]
BINARY = [
    ("add", lax.add), ("sub", lax.sub), ("mul", lax.mul), ("div", lax.div), ("rem", lax.rem),
    ("pow", lambda x, y: lax.pow(lax.abs(x), y)), ("atan2", lax.atan2), ("max", lax.max),
    ("min", lax.min), ("lt", lax.lt), ("eq", lax.eq),
]


def _bits(x):
    x = np.asarray(x)
    return x.view(np.uint16) if x.dtype == BF16 else x


def _draw(rng, lo, hi, shape):
    """bfloat16 values in [lo, hi], with the specials and exact halves mixed in."""
    x = rng.uniform(lo, hi, shape).astype(np.float32)
    if x.size:
        x.flat[0] = (lo + hi) / 2
    return x.astype(BF16)


def rounded(fn, *args):
    """The reference: `fn` on the float32 widening of `args`, rounded once by ml_dtypes."""
    out = np.asarray(fn(*[Array(np.asarray(a).astype(np.float32)) for a in args]))
    return out.astype(BF16) if out.dtype == F32 else out


def _check(got, want, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=what)


@pytest.mark.parametrize("name,fn,domain", UNARY, ids=[u[0] for u in UNARY])
def test_unary_ops_round_the_float32_result_once_eager_and_jitted(name, fn, domain):
    x = _draw(np.random.default_rng(0), *domain, (5, 33))
    want = rounded(fn, x)
    _check(fn(x), want, f"eager {name}")
    _check(fg.jit(fn)(x), want, f"jit {name}")


@pytest.mark.parametrize("name,fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_ops_round_the_float32_result_once_eager_and_jitted(name, fn):
    rng = np.random.default_rng(1)
    x, y = _draw(rng, -3, 3, (4, 17)), _draw(rng, 0.5, 3, (4, 17))
    want = rounded(fn, x, y)
    _check(fn(x, y), want, f"eager {name}")
    _check(fg.jit(fn)(x, y), want, f"jit {name}")


def _chain(x, y):
    """A fused kernel: each step rounds to bfloat16 before the next."""
    t = lax.tanh(lax.mul(x, y))
    return lax.add(lax.mul(t, t), lax.exp(lax.neg(y)))


def _chain_rounded(x, y):
    r = lambda fn, *a: rounded(fn, *a)
    t = r(lax.tanh, r(lax.mul, x, y))
    return r(lax.add, r(lax.mul, t, t), r(lax.exp, r(lax.neg, y)))


def test_a_fused_chain_rounds_after_every_operation():
    rng = np.random.default_rng(2)
    x, y = _draw(rng, -2, 2, (64, 65)), _draw(rng, -2, 2, (64, 65))
    want = _chain_rounded(x, y)
    _check(_chain(x, y), want, "eager")
    _check(fg.jit(_chain)(x, y), want, "jit")
    once = np.asarray(_chain(x.astype(F32), y.astype(F32))).astype(BF16)
    assert not np.array_equal(_bits(once), _bits(want))  # rounding per op is visible


@given(shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9),
       seed=st.integers(0, 2 ** 31))
def test_reductions_accumulate_in_float32_and_round_once(shape, seed):
    x = _draw(np.random.default_rng(seed), -4, 4, shape)
    for fn in (lambda a: fnp.sum(a, axis=-1), fnp.sum, lambda a: fnp.mean(a, axis=0),
               lambda a: fnp.max(a, axis=-1), fnp.var, lambda a: lax.reduce_sum(a, (0,))):
        want = rounded(fn, x)
        _check(fn(x), want, "eager")
        _check(fg.jit(lambda a, fn=fn: fn(a))(x), want, "jit")


def test_sum_of_many_ones_is_exact_unlike_a_bfloat16_accumulator():
    x = fnp.ones(1000, fnp.bfloat16)
    assert float(fnp.sum(x)) == 1000.0 and fnp.sum(x).dtype == BF16
    assert float(np.add.reduce(np.ones(1000, BF16))) == 256.0  # ml_dtypes' own sum


def test_jnp_reductions_upcast_as_jax():
    text = str(fg.make_jaxpr(fnp.sum)(fnp.ones(3, fnp.bfloat16)))
    assert "f32[3] = convert_element_type" in text and "bf16[] = convert_element_type" in text


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 33, 5), (64, 128, 32)])
def test_matmul_accumulates_in_float32_and_rounds_once(m, k, n):
    rng = np.random.default_rng(m * k)
    a, b = _draw(rng, -1, 1, (m, k)), _draw(rng, -1, 1, (k, n))
    want = (a.astype(F32) @ b.astype(F32)).astype(BF16)
    for got in (fnp.matmul(a, b), fg.jit(fnp.matmul)(a, b), a @ fnp.asarray(b)):
        assert np.asarray(got).dtype == BF16
        np.testing.assert_array_equal(_bits(got), _bits(want))
    wide = lax.dot(a, b, preferred_element_type=fnp.float32)
    assert wide.dtype == F32
    np.testing.assert_allclose(np.asarray(wide), a.astype(F32) @ b.astype(F32), rtol=1e-6)


def test_astype_rounds_once_from_float64():
    fg.config.update("enable_x64", True)
    x = fnp.asarray(np.array([1 + 2 ** -8 + 2 ** -40, -(1 + 2 ** -8), 3.4e38, np.nan]))
    got = np.asarray(x.astype(fnp.bfloat16))
    assert got[0] == 1 + 2 ** -7  # via float32 this would be a tie rounded down to 1.0
    assert got[1] == -1.0 and np.isinf(got[2]) and np.isnan(got[3])
    np.testing.assert_array_equal(_bits(got), _bits(np.asarray(x).astype(BF16)))


def test_creation_functions_take_bfloat16():
    for x in (fnp.zeros(3, fnp.bfloat16), fnp.ones((2,), "bfloat16"),
              fnp.full((2,), 1.5, fnp.bfloat16), fnp.arange(3, dtype=fnp.bfloat16),
              fnp.asarray([1.0, 2.0], dtype=fnp.bfloat16), fnp.bfloat16(2.5),
              fnp.linspace(0, 1, 5, dtype=fnp.bfloat16), fnp.eye(2, dtype=fnp.bfloat16),
              fnp.zeros_like(fnp.ones(2, fnp.bfloat16))):
        assert x.dtype == BF16, x
    assert repr(fnp.ones(2, fnp.bfloat16)) == "Array([1, 1], dtype=bfloat16)"
    assert float(fnp.bfloat16(2.5)) == 2.5


def test_weak_scalars_keep_bfloat16_and_promotion_follows_jax():
    x = fnp.ones(3, fnp.bfloat16)
    assert (x * 2.0).dtype == BF16 and (x + 1).dtype == BF16
    assert (x + fnp.ones(3, fnp.float16)).dtype == F32
    assert (x + fnp.ones(3, fnp.float32)).dtype == F32
    with pytest.raises(fg.dtypes.TypePromotionError):
        x + fnp.ones(3, fnp.float8_e4m3fn)


def test_jax_dtypes_names_know_the_narrow_types():
    # JAX 0.10.2's answers (jax.dtypes.itemsize_bits, issubdtype, scalar_type_of)
    d = fg.dtypes
    assert [d.itemsize_bits(t) for t in (fnp.int4, fnp.float4_e2m1fn, fnp.bfloat16,
                                         fnp.float8_e4m3fn)] == [4, 4, 16, 8]
    assert d.issubdtype(fnp.bfloat16, np.floating) and d.issubdtype(fnp.int4, np.signedinteger)
    assert d.issubdtype(fnp.bfloat16, fnp.bfloat16) and not d.issubdtype(fnp.bfloat16,
                                                                         np.float16)
    assert d.scalar_type_of(fnp.ones(2, fnp.bfloat16)) is float
    assert d.scalar_type_of(fnp.ones(2, fnp.int4)) is int
    assert d.canonicalize_dtype(fnp.bfloat16) == BF16 and d.finfo(fnp.bfloat16).eps == 2.0 ** -7
    assert d.iinfo(fnp.int4).max == 7


def test_eval_shape_and_shape_dtype_structs_take_bfloat16():
    s = fg.ShapeDtypeStruct((2, 3), fnp.bfloat16)
    out = fg.eval_shape(lambda x: (fnp.mean(x, 0), x @ x.T, x.astype(fnp.float32)), s)
    assert [(o.shape, o.dtype) for o in out] == [((3,), BF16), ((2, 2), BF16), ((2, 3), F32)]
    x = fnp.asarray(np.arange(6.0).reshape(2, 3), fnp.bfloat16)
    compiled = fg.jit(lambda x: x * 1.5).lower(s).compile()
    assert _bits(compiled(x)).tolist() == _bits(x * 1.5).tolist()


def test_nextafter_steps_in_bfloat16():
    x = fnp.ones(2, fnp.bfloat16)
    got = lax.nextafter(x, fnp.asarray([2.0, 0.0], fnp.bfloat16))
    assert np.asarray(got).tolist() == [1 + 2 ** -7, 1 - 2 ** -8]


def test_bitcast_sees_the_bfloat16_bits():
    x = fnp.asarray([1.0, -2.0], fnp.bfloat16)
    bits = lax.bitcast_convert_type(x, fnp.uint16)
    assert np.asarray(bits).tolist() == [0x3F80, 0xC000]
    assert np.asarray(lax.bitcast_convert_type(bits, fnp.bfloat16)).tolist() == [1.0, -2.0]


# (function, the same computed in float32 with `r` rounding to the narrow type after each op)
NARROW_CASES = [
    (lambda a: a * a + a, lambda a, r: r(r(a * a) + a)),
    (lambda a: fnp.exp(-a), lambda a, r: r(np.exp(r(-a)))),
    (lambda a: fnp.sum(a, axis=0), lambda a, r: r(np.sum(a, axis=0))),
]


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                  "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e3m4",
                                  "float8_e4m3", "float8_e8m0fnu", "float4_e2m1fn",
                                  "float6_e2m3fn", "float6_e3m2fn"])
def test_float8_types_compute_in_float32_and_round_after_every_operation(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    x = np.random.default_rng(3).uniform(0.25, 4, (3, 7)).astype(np.float32).astype(dt)
    r = lambda v: np.asarray(v, np.float32).astype(dt).astype(np.float32)
    for fn, ref in NARROW_CASES:
        want = np.asarray(ref(x.astype(np.float32), r)).astype(dt)
        for got in (fn(fnp.asarray(x)), fg.jit(lambda a, fn=fn: fn(a))(x)):
            assert got.dtype == dt
            np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8))


GOLDEN = json.load(open(os.path.join(os.path.dirname(__file__), "golden", "jax",
                                   "dtypes.json")))["random"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_random_samples_in_narrow_floats_are_jax_bits(dtype):
    dt = np.dtype(dtype)
    key = fg.random.PRNGKey(42)
    got = {"uniform": fg.random.uniform(key, (64,), dt), "normal": fg.random.normal(key, (64,), dt),
           "uniform_bounds": fg.random.uniform(key, (16,), dt, minval=-2.0, maxval=3.0)}
    for name, x in got.items():
        assert x.dtype == dt
        assert np.asarray(x).view(np.uint16).tolist() == GOLDEN[f"{name}/{dtype}"], name


RANDOM = json.load(open(os.path.join(os.path.dirname(__file__), "golden", "jax",
                                   "random_bfloat16.json")))["cases"]


@pytest.mark.parametrize("name", sorted(random_bfloat16_cases.CASES))
def test_every_sampler_in_bfloat16_gives_jax_bits(name):
    # recorded with XLA rounding every bfloat16 operation (no excess precision): JAX's
    # algorithm computed in float32 and rounded after each operation, as funcgrad computes
    fn, want = random_bfloat16_cases.CASES[name], RANDOM[name]
    x = np.asarray(fn(fg.random, fnp, fg.random.PRNGKey(3)))
    assert x.dtype == BF16 and list(x.shape) == want["shape"]
    assert x.view(np.uint16).ravel().tolist() == want["bits"]


def test_jitted_bfloat16_samplers_give_eager_bits():
    key = fg.random.PRNGKey(3)
    for name in ("normal", "gamma", "truncated_normal"):
        fn = random_bfloat16_cases.CASES[name]
        jitted = fg.jit(lambda k, fn=fn: fn(fg.random, fnp, k))(key)
        assert _bits(jitted).tolist() == _bits(fn(fg.random, fnp, key)).tolist(), name


def test_checkpoints_round_trip_bfloat16_float8_and_int4(tmp_path):
    tree = {"w": fnp.linspace(-1, 1, 5).astype(fnp.bfloat16),
            "f8": fnp.asarray([0.5, 448.0], fnp.float8_e4m3fn),
            "i4": fnp.arange(-3, 3).astype(fnp.int4),
            "host": np.asarray([1.5, -2.0], BF16)}
    fg.io.save(tmp_path / "ckpt.npz", tree)
    for loaded in (fg.io.load(tmp_path / "ckpt.npz"), fg.io.load(tmp_path / "ckpt.npz", tree)):
        for k, v in tree.items():
            assert loaded[k].dtype == v.dtype and type(loaded[k]) is type(v), k
            np.testing.assert_array_equal(np.asarray(loaded[k]).view(np.uint8),
                                          np.asarray(v).view(np.uint8))


# --- the native C backend: bfloat16 stored as 16 bits, computed in float, rounded per op ----

from funcgrad.backends.native import build  # noqa: E402
from funcgrad.compiler import pipeline  # noqa: E402

needs_cc = pytest.mark.skipif(build.find_compiler() is None,
                              reason="no C compiler (test_native_backend.py checks that)")


def native(fn, *args):
    """`fn` compiled by the native backend (its kernels in C: the program text is checked)."""
    closed = fg.make_jaxpr(fn)(*args)
    fg.config.update("native", "sync")
    try:
        exe = pipeline.compile_jaxpr(closed, backend="cpu")
    finally:
        fg.config.update("native", "off")
    return exe, exe(*args)


def native_rounded(fn, *args):
    """The native backend's float32 result of `fn` on the widened `args`, rounded once."""
    _, out = native(fn, *[np.asarray(a).astype(np.float32) for a in args])
    out = np.asarray(out[0])
    return out.astype(BF16) if out.dtype == F32 else out


@needs_cc
@pytest.mark.parametrize("name,fn,domain", UNARY, ids=[u[0] for u in UNARY])
def test_native_unary_ops_round_the_native_float32_result(name, fn, domain):
    x = _draw(np.random.default_rng(4), *domain, (7, 37))
    exe, out = native(fn, x)
    _check(out[0], native_rounded(fn, x), f"native {name}")


@needs_cc
@pytest.mark.parametrize("name,fn", BINARY, ids=[b[0] for b in BINARY])
def test_native_binary_ops_round_the_native_float32_result(name, fn):
    rng = np.random.default_rng(5)
    x, y = _draw(rng, -3, 3, (5, 41)), _draw(rng, 0.5, 3, (5, 41))
    exe, out = native(fn, x, y)
    assert "fg_bf16" in exe.as_text() or name in ("rem", "pow")
    _check(out[0], native_rounded(fn, x, y), f"native {name}")


@needs_cc
def test_native_fused_chain_rounds_after_every_operation_in_c():
    rng = np.random.default_rng(6)
    x, y = _draw(rng, -2, 2, (64, 65)), _draw(rng, -2, 2, (64, 65))
    exe, out = native(_chain, x, y)
    text = exe.as_text()
    assert "fg_round_bf16" in text and "fg_f2bf" in text, text
    r = lambda fn, *a: native_rounded(fn, *a)
    t = r(lax.tanh, r(lax.mul, x, y))
    _check(out[0], r(lax.add, r(lax.mul, t, t), r(lax.exp, r(lax.neg, y))), "native chain")


@needs_cc
def test_native_exact_operations_give_eager_bits_including_specials():
    x = np.array([1.0, -0.0, np.inf, -np.inf, np.nan, 3.0e38, 1e-39, -2.5, 7.0], np.float32)
    y = np.array([3.0, 2.0, -1.0, 0.5, 1.0, 10.0, 3.0, 0.0, -0.0], np.float32)
    a, b = x.astype(BF16), y.astype(BF16)
    fns = [lambda u, v: (u * v + u) / (v - 0.25), lambda u, v: fnp.sqrt(fnp.abs(u)) - v,
           lambda u, v: fnp.maximum(u, v) * fnp.minimum(u, v), lambda u, v: lax.nextafter(u, v),
           lambda u, v: (u.astype(np.float32) * 3.0).astype(fnp.bfloat16) + v]
    for fn in fns:
        exe, out = native(fn, a, b)
        assert "fg_bf16" in exe.as_text()
        _check(out[0], np.asarray(fn(fnp.asarray(a), fnp.asarray(b))), "native exact")


@needs_cc
def test_native_conversions_round_once_like_ml_dtypes():
    fg.config.update("enable_x64", True)
    wide = np.array([1 + 2 ** -8 + 2 ** -40, -(1 + 2 ** -8), 3.4e38, np.nan, 2.0 ** -130])
    ints = np.array([2 ** 24 + 2 ** 16 + 1, -7, 0, 2 ** 31 - 1], np.int32)
    with np.errstate(over="ignore"):
        sources = (wide, ints, wide.astype(np.float32), wide.astype(np.float16))
    for x in sources:
        exe, out = native(lambda u: u.astype(fnp.bfloat16) * 1.0, x)
        once_from_double = x.dtype in (np.float64, np.int32)  # through double: one rounding
        assert ("fg_round_bf16_d((double)" in exe.as_text()) == once_from_double, x.dtype
        _check(out[0], x.astype(BF16), f"native convert from {x.dtype}")


@needs_cc
def test_native_runs_float8_and_int4_through_numpy():
    x = np.random.default_rng(8).uniform(0.25, 4, (3, 7)).astype(np.float32)
    for dt in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.int4):
        a = x.astype(dt)
        fn = lambda u: u * u + u
        exe, out = native(fn, a)
        assert "C module" not in exe.as_text()  # C has no type for them: numpy computes
        np.testing.assert_array_equal(np.asarray(out[0]).view(np.uint8),
                                      np.asarray(fn(fnp.asarray(a))).view(np.uint8))


NARROW_INTS = json.load(open(os.path.join(os.path.dirname(__file__), "golden", "jax",
                                          "narrow_ints.json")))  # tools/record_jax_narrow_ints.py


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2"])
def test_float_to_int4_and_co_saturates_as_jax(name):
    # toward zero, saturating at the type's range, NaN -> 0: eager, the numpy backend's fused
    # cast and the native tier (numpy computes these types) give JAX's numbers
    x = np.array([float(v) for v in NARROW_INTS["values"]], np.float32)
    dt = getattr(fnp, name)
    want = NARROW_INTS["casts"][name]
    assert np.asarray(fnp.asarray(x).astype(dt)).astype(int).tolist() == want
    for backend in ("numpy", "cpu"):
        got = fg.jit(lambda u: (u * 1).astype(dt), backend=backend)(x)
        assert np.asarray(got).dtype == dt and np.asarray(got).astype(int).tolist() == want


@pytest.mark.parametrize("case", sorted(NARROW_INTS["randint"]))
def test_randint_draws_int4_and_uint4_as_jax(case):
    name, lo, hi = case.split()
    r = fg.random.randint(fg.random.key(0), (12,), int(lo), int(hi), dtype=getattr(fnp, name))
    assert np.asarray(r).dtype == getattr(fnp, name)
    assert np.asarray(r).astype(int).tolist() == NARROW_INTS["randint"][case]


def test_int4_operations_whose_identity_is_the_types_bound():
    # segment reductions, safe_increment and index arithmetic read the type's range (ml_dtypes'
    # iinfo: numpy's says "Invalid integer data type 'V'"); the numbers are int8's, cast back
    x8 = np.array([3, -2, 5, 1, -8, 7], np.int8)
    x, ids = fnp.asarray(x8.astype(fnp.int4)), fnp.asarray([0, 0, 1, 1, 2, 3])
    for op in ("segment_max", "segment_min", "segment_sum"):
        got, want = (getattr(fg.ops, op)(a, ids, 4) for a in (x, fnp.asarray(x8)))
        assert np.asarray(got).dtype == fnp.int4, op
        assert np.asarray(got).astype(int).tolist() == np.asarray(want).astype(
            fnp.int4).astype(int).tolist(), op
    empty = fg.ops.segment_max(x, ids, 5)[4]  # an empty segment holds the identity, int4's min
    assert int(empty) == -8
    assert int(optim.safe_increment(fnp.asarray(7, fnp.int4))) == 7
    assert fnp.ravel_multi_index((fnp.asarray([1, 0], fnp.int4), fnp.asarray([2, 1], fnp.int4)),
                                 (3, 4)).tolist() == [6, 1]


@needs_cc
def test_native_reductions_accumulate_in_float_and_round_once():
    x = _draw(np.random.default_rng(7), -4, 4, (33, 129))
    for fn in (lambda a: lax.reduce_sum(a, (1,)), lambda a: lax.reduce_max(a, (0,)),
               lambda a: fnp.sum(a * a, axis=1), lambda a: fnp.mean(a, axis=0)):
        _, out = native(fn, x)
        _check(out[0], native_rounded(fn, x), "native reduction")


# --- transforms of bfloat16 programs -------------------------------------------------------

@pytest.mark.parametrize("fn,derivative", [(fnp.sin, fnp.cos), (fnp.exp, fnp.exp),
                                           (lambda x: x * x * 0.5, lambda x: x),
                                           (fnp.sqrt, lambda x: 0.5 / fnp.sqrt(x))],
                         ids=["sin", "exp", "square", "sqrt"])
def test_grad_of_a_bfloat16_function_is_its_bfloat16_derivative(fn, derivative):
    # the derivative rule runs in bfloat16 too: each of its operations rounded (sin's
    # cotangent is cos(x) * 1, bit for bit the rounded cos)
    x = _draw(np.random.default_rng(9), 0.1, 3, (40,))
    g = fg.grad(lambda a: fnp.sum(fn(a)))(x)
    assert g.dtype == BF16
    _check(g, np.asarray(derivative(fnp.asarray(x))), "grad")
    _check(fg.jit(fg.grad(lambda a: fnp.sum(fn(a))))(x), np.asarray(g), "jit(grad)")


def test_grad_of_a_bfloat16_network_is_the_float64_gradient_to_bfloat16_precision():
    rng = np.random.default_rng(10)
    w1, w2 = _draw(rng, -0.5, 0.5, (16, 32)), _draw(rng, -0.5, 0.5, (32, 4))
    x = _draw(rng, -1, 1, (8, 16))

    def loss(w1, w2, x):
        h = fnp.tanh(x @ w1)
        return fnp.mean((h @ w2).astype(fnp.float32) ** 2)

    g16 = fg.grad(loss, argnums=(0, 1))(w1, w2, x)
    fg.config.update("enable_x64", True)
    g64 = fg.grad(loss, argnums=(0, 1))(*[np.asarray(a, np.float64) for a in (w1, w2, x)])
    for a, b in zip(g16, g64):
        assert a.dtype == BF16
        a, b = np.asarray(a, np.float64), np.asarray(b)
        assert np.linalg.norm(a - b) < 2 ** -5 * np.linalg.norm(b)


def test_vmap_of_a_bfloat16_function_matches_a_loop_bit_for_bit():
    rng = np.random.default_rng(11)
    xs, w = _draw(rng, -1, 1, (5, 7, 3)), _draw(rng, -1, 1, (3, 6))
    fn = lambda x, w: fnp.sum(fnp.tanh(x @ w), axis=0) * 0.5
    got = fg.vmap(fn, in_axes=(0, None))(xs, w)
    want = np.stack([np.asarray(fn(fnp.asarray(x), fnp.asarray(w))) for x in xs])
    _check(got, want, "vmap")
    _check(fg.jit(fg.vmap(fn, in_axes=(0, None)))(xs, w), want, "jit(vmap)")


JNP = json.load(open(os.path.join(os.path.dirname(__file__), "golden", "jax",
                                  "dtypes.json")))["jnp_bfloat16"]


@pytest.mark.parametrize("name", sorted(n for n in JNP if hasattr(fnp, n)))
def test_funcgrad_numpy_keeps_bfloat16_where_jax_numpy_does(name):
    rec = JNP[name]
    x = fnp.asarray(np.asarray(
        [[0.125, 0.25, 0.5, 0.875], [0.375, 0.625, 0.75, 0.1875], [0.3125, 0.5625, 0.6875,
                                                                   0.9375]], BF16))
    got = getattr(fnp, name)(*[x] * rec["nargs"])
    assert str(got.dtype) == rec["dtype"], (name, got.dtype)
    if name not in ("empty_like",):  # JAX's values, to a few bfloat16 roundings
        np.testing.assert_allclose(np.asarray(got, np.float64).ravel(), rec["values"],
                                   rtol=2 ** -5, atol=2 ** -6, err_msg=name)


def test_cuda_program_in_the_cpu_emulation_gives_eager_bits():
    # the CUDA text of the kernels (fg_bf16 storage, rounding after every instruction) and
    # the library calls (the matmul widened to float32), run by the CPU emulation
    from funcgrad.backends.cuda import emulate, program
    if emulate.compiler() is None:
        pytest.skip("no C++ compiler for the CUDA emulation (test_cuda_emulation checks it)")
    rng = np.random.default_rng(12)
    a, b = _draw(rng, -1, 1, (16, 32)), _draw(rng, -1, 1, (32, 8))
    fn = lambda a, b: (fnp.tanh(a @ b) * 2.0 + 1.0, fnp.max(a, axis=1))
    closed = fg.make_jaxpr(fn)(a, b)
    old = program.set_runtime(emulate.EmulatedRuntime())
    try:
        exe = pipeline.compile_jaxpr(closed, backend="cuda")
        got = exe(a, b)
    finally:
        program.set_runtime(old)
    assert "fg_round_bf16" in exe.as_text()
    for g, w in zip(got, fn(fnp.asarray(a), fnp.asarray(b))):
        _check(g, np.asarray(w), "cuda emulation")
