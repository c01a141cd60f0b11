"""Elementwise lax primitives: one op-spec table drives eager-vs-numpy, derivative and batching
checks; the remaining tests cover semantics a table cannot (shifts, integer division, ties,
select_n, clamp, stop_gradient, weak types, error messages)."""

import contextlib
import dataclasses
import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import funcgrad as fg
from funcgrad import errors, lax
from funcgrad.interpreters import batching
from funcgrad.test_util import check_grads

F32, F64 = np.dtype("float32"), np.dtype("float64")
C64, C128 = np.dtype("complex64"), np.dtype("complex128")
I8, I32, I64 = np.dtype("int8"), np.dtype("int32"), np.dtype("int64")
U8, U32 = np.dtype("uint8"), np.dtype("uint32")
BOOL = np.dtype("bool")
FLOAT, COMPLEX, SIGNED, INTS = (F32, F64), (C64, C128), (I32, I8, I64), (I32, I8, I64, U8, U32)
INEXACT = FLOAT + COMPLEX


@contextlib.contextmanager
def x64(on=True):
    prev = fg.config.enable_x64
    fg.config.update("enable_x64", on)
    try:
        yield
    finally:
        fg.config.update("enable_x64", prev)


def needs_x64(dt):
    return dt.itemsize == 8 and dt.kind in "iuf" or dt == C128


# --- numpy references with XLA's semantics (written independently of the implementations) ------
def _vec(fn, out=None):
    return lambda *xs: np.vectorize(fn, otypes=[out or np.float64])(*xs)


def _bits(dt):
    return np.dtype(dt).itemsize * 8


def _wrap_int(v, dt):
    b = _bits(dt)
    v &= (1 << b) - 1
    return v - (1 << b) if np.dtype(dt).kind == "i" and v >= 1 << (b - 1) else v


def _int_ref(fn):
    def ref(x, y):
        dt = x.dtype
        return np.vectorize(lambda a, b: _wrap_int(fn(int(a), int(b), _bits(dt)), dt),
                            otypes=[dt])(x, y)
    return ref


def _shl(a, s, bits):
    return a << s if 0 <= s < bits else 0


def _shr_logical(a, s, bits):
    return (a & ((1 << bits) - 1)) >> s if 0 <= s < bits else 0


def _shr_arith(a, s, bits):
    a = _wrap_int(a, f"i{bits // 8}")  # unsigned values are read as signed, as in XLA
    return a >> s if 0 <= s < bits else a >> (bits - 1)


def _div_int(a, b, bits):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _rem_int(a, b, bits):
    return a - b * _div_int(a, b, bits)


def _round_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _polygamma_ref(m, x, n=2000):
    x = np.asarray(x, np.float64)
    k = np.arange(n).reshape((n,) + (1,) * x.ndim)
    z = x + n  # tail sum_{k>=n} (x+k)^-(m+1) by Euler-Maclaurin
    tail = z ** -m / m + z ** -(m + 1) / 2 + (m + 1) * z ** -(m + 2) / 12
    return (-1) ** (m + 1) * math.factorial(m) * (np.sum((x + k) ** -(m + 1.0), 0) + tail)


def _digamma_ref(x):
    x = np.asarray(x, np.float64)  # d/dx lgamma by a central difference (error ~1e-10)
    h = 1e-5
    lg = _vec(math.lgamma)
    return (lg(x + h) - lg(x - h)) / (2 * h)


def _ref_erf_inv(y):
    # erf(erf_inv(y)) == y is checked separately; here the float64 Newton-refined values
    # serve as the reference for the float32 (Giles polynomial) implementation
    with x64():
        return np.asarray(lax.erf_inv(np.asarray(y, F64)))


def _popcount(x):
    return np.vectorize(lambda a: bin(int(a) & ((1 << _bits(x.dtype)) - 1)).count("1"),
                        otypes=[x.dtype])(x)


def _complex_ref(x, y):
    return x + 1j * y.astype(x.dtype)


def _same(dt):
    return dt


def _to_bool(dt):
    return BOOL


def _to_real(dt):
    return np.finfo(dt).dtype if dt.kind == "c" else dt


def _to_complex(dt):
    return np.result_type(dt, np.complex64)


# --- the op table -------------------------------------------------------------------------------
ANY = ((-3.0, 3.0),)
POS = ((0.5, 3.0),)
UNIT = ((-0.8, 0.8),)
NONZERO = ((-3.0, -0.5), (0.5, 3.0))
INTERIOR = ((0.1, 0.4),)


@dataclasses.dataclass(frozen=True)
class Op:
    name: str
    fn: Callable
    ref: Callable
    dtypes: tuple
    domain: tuple = (ANY,)  # per argument: intervals values are drawn from
    grad: int = 2  # highest order for check_grads (0: not differentiable)
    out: Callable = _same  # output dtype from input dtype
    rtol: float = 1e-6
    grad_domain: tuple = None
    complex_grad: bool = True  # False: JAX's rule is not the complex derivative (sign)

    @property
    def nargs(self):
        return len(self.domain)


OPS = [
    Op("neg", lax.neg, np.negative, INTS + INEXACT),
    Op("sign", lax.sign, np.sign, SIGNED + INEXACT, (NONZERO,), complex_grad=False),
    Op("floor", lax.floor, np.floor, FLOAT, grad_domain=(INTERIOR,)),
    Op("ceil", lax.ceil, np.ceil, FLOAT, grad_domain=(INTERIOR,)),
    Op("round", lax.round, _round_away, FLOAT, grad_domain=(INTERIOR,)),
    Op("round_even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), np.rint,
       FLOAT, grad_domain=(INTERIOR,)),
    Op("is_finite", lax.is_finite, np.isfinite, FLOAT, grad=1, out=_to_bool),
    Op("exp", lax.exp, np.exp, INEXACT),
    Op("exp2", lax.exp2, np.exp2, INEXACT),
    Op("log", lax.log, np.log, INEXACT, (POS,)),
    Op("log1p", lax.log1p, np.log1p, INEXACT, (((-0.5, 3.0),),)),
    Op("expm1", lax.expm1, np.expm1, INEXACT),
    Op("tanh", lax.tanh, np.tanh, INEXACT),
    Op("logistic", lax.logistic, lambda x: 1 / (1 + np.exp(-x)), INEXACT, rtol=1e-5),
    Op("sin", lax.sin, np.sin, INEXACT),
    Op("cos", lax.cos, np.cos, INEXACT),
    Op("tan", lax.tan, np.tan, INEXACT, (((-1.2, 1.2),),)),
    Op("asin", lax.asin, np.arcsin, INEXACT, (UNIT,)),
    Op("acos", lax.acos, np.arccos, INEXACT, (UNIT,)),
    Op("atan", lax.atan, np.arctan, INEXACT),
    Op("sinh", lax.sinh, np.sinh, INEXACT),
    Op("cosh", lax.cosh, np.cosh, INEXACT),
    Op("asinh", lax.asinh, np.arcsinh, INEXACT),
    Op("acosh", lax.acosh, np.arccosh, INEXACT, (((1.5, 4.0),),)),
    Op("atanh", lax.atanh, np.arctanh, INEXACT, (UNIT,)),
    Op("sqrt", lax.sqrt, np.sqrt, INEXACT, (POS,)),
    Op("rsqrt", lax.rsqrt, lambda x: 1 / np.sqrt(x), INEXACT, (POS,), rtol=1e-5),
    Op("cbrt", lax.cbrt, np.cbrt, FLOAT, (NONZERO,)),
    Op("abs", lax.abs, np.abs, INTS + INEXACT, (NONZERO,), out=_to_real),
    Op("erf", lax.erf, _vec(math.erf), FLOAT),
    Op("erfc", lax.erfc, _vec(math.erfc), FLOAT),
    Op("erf_inv", lax.erf_inv, _ref_erf_inv, FLOAT, (((-0.99, 0.99),),), rtol=2e-5,
       grad_domain=(UNIT,)),
    Op("lgamma", lax.lgamma, _vec(math.lgamma), FLOAT, (((0.1, 8.0), (-2.9, -2.1)),)),
    Op("digamma", lax.digamma, _digamma_ref, FLOAT, (((0.2, 8.0),),), rtol=1e-5),
    Op("polygamma1", lambda x: lax.polygamma(1, x), lambda x: _polygamma_ref(1, x), FLOAT,
       (((0.2, 8.0), (-2.9, -2.1)),), rtol=1e-5),
    Op("polygamma3", lambda x: lax.polygamma(3, x), lambda x: _polygamma_ref(3, x), FLOAT,
       (((0.5, 8.0),),), rtol=1e-5),
    Op("integer_pow3", lambda x: lax.integer_pow(x, 3), lambda x: x * x * x, INTS + INEXACT,
       rtol=1e-5),
    Op("integer_pow0", lambda x: lax.integer_pow(x, 0), lambda x: np.ones_like(x),
       INTS + INEXACT),
    Op("integer_pow-2", lambda x: lax.integer_pow(x, -2), lambda x: 1 / (x * x), INEXACT,
       (NONZERO,), rtol=1e-5),
    Op("square", lax.square, np.square, INTS + INEXACT),
    Op("reciprocal", lax.reciprocal, np.reciprocal, INEXACT, (NONZERO,)),
    Op("real", lax.real, np.real, COMPLEX, out=_to_real),
    Op("imag", lax.imag, np.imag, COMPLEX, out=_to_real),
    Op("conj", lax.conj, lambda x: np.conj(x.astype(_to_complex(x.dtype))), INEXACT,
       out=_to_complex),
    Op("not", lax.bitwise_not, np.invert, (BOOL,) + INTS, grad=0),
    Op("population_count", lax.population_count, _popcount, INTS, ((((-300, 300),)),), grad=0),
    Op("add", lax.add, np.add, INTS + INEXACT, (ANY, ANY)),
    Op("sub", lax.sub, np.subtract, INTS + INEXACT, (ANY, ANY)),
    Op("mul", lax.mul, np.multiply, INTS + INEXACT, (ANY, ANY)),
    Op("div", lax.div, np.divide, INEXACT, (ANY, NONZERO), rtol=1e-5),
    Op("div_int", lax.div, _int_ref(_div_int), INTS, (((-100, 100),), NONZERO), grad=0),
    Op("rem", lax.rem, np.fmod, FLOAT, (ANY, NONZERO)),
    Op("rem_int", lax.rem, _int_ref(_rem_int), INTS, (((-100, 100),), NONZERO), grad=0),
    Op("pow", lax.pow, np.power, INEXACT, (POS, ANY), rtol=1e-5),
    Op("atan2", lax.atan2, np.arctan2, FLOAT, (NONZERO, ANY)),
    Op("max", lax.max, np.maximum, (BOOL,) + INTS + FLOAT, (ANY, ANY)),
    Op("min", lax.min, np.minimum, (BOOL,) + INTS + FLOAT, (ANY, ANY)),
    Op("nextafter", lax.nextafter, np.nextafter, FLOAT, (ANY, ANY), grad=0),
    Op("complex", lax.complex, _complex_ref, FLOAT, (ANY, ANY), out=_to_complex),
    Op("eq", lax.eq, np.equal, (BOOL,) + INTS + INEXACT, (((-1, 1),), ((-1, 1),)), grad=1,
       out=_to_bool),
    Op("ne", lax.ne, np.not_equal, (BOOL,) + INTS + INEXACT, (((-1, 1),), ((-1, 1),)),
       grad=1, out=_to_bool),
    Op("lt", lax.lt, np.less, (BOOL,) + INTS + FLOAT, (ANY, ANY), grad=1, out=_to_bool),
    Op("le", lax.le, np.less_equal, (BOOL,) + INTS + FLOAT, (ANY, ANY), grad=1, out=_to_bool),
    Op("gt", lax.gt, np.greater, (BOOL,) + INTS + FLOAT, (ANY, ANY), grad=1, out=_to_bool),
    Op("ge", lax.ge, np.greater_equal, (BOOL,) + INTS + FLOAT, (ANY, ANY), grad=1,
       out=_to_bool),
    Op("and", lax.bitwise_and, np.bitwise_and, (BOOL,) + INTS, (((-99, 99),),) * 2, grad=0),
    Op("or", lax.bitwise_or, np.bitwise_or, (BOOL,) + INTS, (((-99, 99),),) * 2, grad=0),
    Op("xor", lax.bitwise_xor, np.bitwise_xor, (BOOL,) + INTS, (((-99, 99),),) * 2, grad=0),
    Op("shift_left", lax.shift_left, _int_ref(_shl), INTS, (((-99, 99),), ((-3, 70),)),
       grad=0),
    Op("shift_right_logical", lax.shift_right_logical, _int_ref(_shr_logical), INTS,
       (((-99, 99),), ((-3, 70),)), grad=0),
    Op("shift_right_arithmetic", lax.shift_right_arithmetic, _int_ref(_shr_arith), INTS,
       (((-99, 99),), ((-3, 70),)), grad=0),
]


def draw(rng, intervals, shape, dt):
    """Values of dtype `dt` and `shape`, each from one of `intervals` (ints: rounded)."""
    dt = np.dtype(dt)
    k = rng.integers(len(intervals), size=shape)
    lo = np.array([a for a, _ in intervals], np.float64)[k]
    hi = np.array([b for _, b in intervals], np.float64)[k]
    u = lo + (hi - lo) * rng.random(shape)
    if dt.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if dt.kind in "iu":
        u = np.round(u)
        if dt.kind == "u":
            u = np.abs(u)
        info = np.iinfo(dt)
        return np.asarray(np.clip(u, info.min, info.max), dt)
    if dt.kind == "c":
        return np.asarray(u + 1j * (lo + (hi - lo) * rng.random(shape)), dt)
    return np.asarray(u, dt)


def _tol(op, dt):
    if dt.kind in "iub":
        return 0, 0
    return (op.rtol, 1e-6) if dt in (F32, C64) else (1e-9, 1e-9)


# --- eager results vs numpy ---------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@given(data=st.data())
def test_eager_matches_numpy(op, data):
    dt = np.dtype(data.draw(st.sampled_from(op.dtypes), label="dtype"))
    shape = data.draw(array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3), label="shape")
    # some operands rank-0 (they broadcast against the full-rank ones)
    rank0 = data.draw(st.lists(st.booleans(), min_size=op.nargs, max_size=op.nargs))
    if all(rank0) and op.nargs > 1:
        rank0[0] = False
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    with x64(needs_x64(dt)):
        args = [draw(rng, dom, () if r and op.nargs > 1 else shape, dt)
                for dom, r in zip(op.domain, rank0)]
        got = op.fn(*args)
        want = op.ref(*args)
    assert got.dtype == op.out(dt), (got.dtype, op.out(dt))
    assert got.shape == np.broadcast_shapes(*[a.shape for a in args])
    rtol, atol = _tol(op, dt)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want).astype(got.dtype), rtol=rtol,
                               atol=atol, equal_nan=True)


# --- derivatives --------------------------------------------------------------------------------
GRAD_OPS = [op for op in OPS if op.grad and any(d.kind in "fc" for d in op.dtypes)]


@pytest.mark.parametrize("op", GRAD_OPS, ids=lambda op: op.name)
def test_grads(op):
    rng = np.random.default_rng(0)
    dom = op.grad_domain or op.domain
    for dt in [d for d in (F64, C128) if d in op.dtypes and (d == F64 or op.complex_grad)]:
        args = [draw(rng, d, (3,), dt) for d in dom]
        check_grads(op.fn, args, order=op.grad)
        if op.nargs == 2:  # a rank-0 operand broadcasting against a full one, either side
            check_grads(op.fn, [args[0], args[1][0]], order=op.grad)
            check_grads(op.fn, [args[0][0], args[1]], order=1)


def test_erf_inv_inverts_erf_and_edges():
    with x64():
        y = np.linspace(-0.999999, 0.999999, 101)
        x = np.asarray(lax.erf_inv(y))
        np.testing.assert_allclose(np.vectorize(math.erf)(x), y, rtol=1e-15, atol=1e-15)
        y_tail = 1 - np.logspace(-16, -2, 29)
        x_tail = np.asarray(lax.erf_inv(y_tail))
        np.testing.assert_allclose(np.vectorize(math.erfc)(x_tail), 1 - y_tail, rtol=1e-13)
    edge = np.asarray(lax.erf_inv(np.array([1.0, -1.0, 1.5, np.nan, -0.0], F32)))
    assert edge[0] == np.inf and edge[1] == -np.inf and np.isnan(edge[2:4]).all()
    assert edge[4] == 0 and np.signbit(edge[4])


def test_special_function_values():
    with x64():
        np.testing.assert_allclose(float(lax.digamma(1.0)), -0.5772156649015329, rtol=1e-14)
        np.testing.assert_allclose(float(lax.digamma(-0.5)), 0.03648997397857652, rtol=1e-13)
        np.testing.assert_allclose(float(lax.polygamma(1, 0.5)), np.pi ** 2 / 2, rtol=1e-14)
        np.testing.assert_allclose(float(lax.lgamma(0.5)), math.log(math.sqrt(math.pi)))
        # near a pole, where pi * x rounds badly unless x is first reduced to [-1/2, 1/2]
        np.testing.assert_allclose(float(lax.digamma(-8.000000000000002)), 562949953421314.1,
                                   rtol=1e-12)
    poles = np.asarray(lax.digamma(np.array([0.0, -1.0, -7.0], F32)))
    assert np.isnan(poles).all()
    assert (np.asarray(lax.lgamma(np.array([0.0, -3.0], F32))) == np.inf).all()


# --- batching -------------------------------------------------------------------------------
B = 2


def _batched(x, d):
    """Stack B variations of example `x` along axis `d` (None: unbatched)."""
    if d is None:
        return x
    xs = [x if i == 0 else np.roll(x.reshape(-1)[::-1], i).reshape(x.shape)
          for i in range(B)]
    return np.stack(xs, axis=d)


def _check_batched(f, examples, dims):
    closed = fg.make_jaxpr(f)(*examples)
    args = [_batched(x, d) for x, d in zip(examples, dims)]
    outs, out_dims = batching.batch_eval(closed.jaxpr, closed.consts, args, dims)
    for o, od, b in zip(outs, out_dims, range(len(outs))):
        loop = [np.asarray(f(*[a if d is None else np.take(a, i, axis=d)
                               for a, d in zip(args, dims)])) for i in range(B)]
        got = np.asarray(o) if od is None else np.moveaxis(np.asarray(o), od, 0)
        want = np.stack(loop) if od is not None else loop[0]
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"output {b}")


UNARY_DIMS = [(0,), (1,)]
BINARY_DIMS = [(0, 0), (1, 0), (0, 1), (None, 1), (1, None), ("s0", 0), (1, "s0"),
               ("sN", 1), (0, "sN")]  # "s0"/"sN": a rank-0 operand, batched / unbatched


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_batching_matches_loop(op):
    dt = np.dtype(op.dtypes[0])
    rng = np.random.default_rng(1)
    for dims in UNARY_DIMS if op.nargs == 1 else BINARY_DIMS:
        examples = [draw(rng, dom, () if isinstance(d, str) else (3, 2), dt)
                    for dom, d in zip(op.domain, dims)]
        plain = [None if d == "sN" else 0 if d == "s0" else d for d in dims]
        _check_batched(op.fn, examples, plain)


# --- semantics a table cannot express -----------------------------------------------------
def test_shifts_uint32_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2 ** 32, size=64, dtype=np.uint32)
    s = rng.integers(0, 40, size=64).astype(np.uint32)
    ok = s < 32
    sc = np.where(ok, s, 0)
    np.testing.assert_array_equal(np.asarray(lax.shift_right_logical(x, s)),
                                  np.where(ok, x >> sc, 0).astype(np.uint32))
    np.testing.assert_array_equal(np.asarray(lax.shift_left(x, s)),
                                  np.where(ok, x << sc, 0).astype(np.uint32))
    assert lax.shift_right_logical(x, s).dtype == np.uint32
    top = np.uint32(0x80000000)
    assert int(lax.shift_right_logical(top, np.uint32(31))) == 1
    assert int(lax.shift_right_arithmetic(top, np.uint32(31))) == 0xFFFFFFFF
    assert int(lax.shift_right_logical(np.int32(-1), np.int32(28))) == 15
    assert int(lax.shift_right_arithmetic(np.int32(-16), np.int32(40))) == -1
    rot = lax.bitwise_or(lax.shift_left(x, np.uint32(13)),
                         lax.shift_right_logical(x, np.uint32(19)))  # Threefry's rotation
    np.testing.assert_array_equal(np.asarray(rot), (x << 13) | (x >> 19))


def test_integer_div_is_exact_and_truncates():
    a = np.array([7, -7, 7, -7, 2 ** 31 - 1, -(2 ** 31), 2 ** 31 - 2], np.int32)
    b = np.array([2, 2, -2, -2, 1, 3, 2 ** 31 - 1], np.int32)
    np.testing.assert_array_equal(np.asarray(lax.div(a, b)), [3, -3, -3, 3, 2 ** 31 - 1,
                                                             -715827882, 0])
    np.testing.assert_array_equal(np.asarray(lax.rem(a, b)), np.fmod(a, b))
    with x64():
        big = np.array([2 ** 62 + 1, -(2 ** 62) - 1], np.int64)
        np.testing.assert_array_equal(np.asarray(lax.div(big, np.int64(3))),
                                      [(2 ** 62 + 1) // 3, -((2 ** 62 + 1) // 3)])
    assert float(lax.rem(-7.5, 2.0)) == -1.5


def test_round_ties():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997], F32)
    np.testing.assert_array_equal(np.asarray(lax.round(x)), [-3, -2, -1, 1, 2, 3, 0])
    np.testing.assert_array_equal(np.asarray(lax.round(x, 1)), [-2, -2, -0, 0, 2, 2, 0])
    assert np.signbit(np.asarray(lax.round(np.float32(-0.3))))


def test_max_min_tie_gradient_is_split():
    g = fg.grad(lambda x, y: lax.max(x, y), argnums=(0, 1))(1.0, 1.0)
    assert [float(v) for v in g] == [0.5, 0.5]
    assert float(fg.grad(lambda x: lax.min(x, x))(2.0)) == 1.0
    assert float(fg.grad(lambda x: lax.max(x, 0.0))(3.0)) == 1.0
    assert float(fg.grad(lambda x: lax.max(x, 0.0))(-3.0)) == 0.0


def test_abs_grad_at_zero_and_complex():
    assert float(fg.grad(lax.abs)(0.0)) == 1.0  # JAX's convention: select(x >= 0, g, -g)
    z = np.array([3 + 4j, 0j], C64)
    out, vjp_fn = fg.vjp(lax.abs, z)
    assert out.dtype == F32
    # JAX's convention for a real function of z = x + iy: df/dx - i df/dy
    np.testing.assert_allclose(np.asarray(vjp_fn(np.ones(2, F32))[0]), [0.6 - 0.8j, 0])


def test_select_n():
    cases = [np.arange(4.0, dtype=F32) + 10 * k for k in range(3)]
    which = np.array([0, 2, 1, 7], np.int32)  # out of range: clamped
    np.testing.assert_array_equal(np.asarray(lax.select_n(which, *cases)), [0, 21, 12, 23])
    pred = np.array([True, False, True, False])
    np.testing.assert_array_equal(np.asarray(lax.select_n(pred, cases[0], cases[1])),
                                  [10, 1, 12, 3])
    assert float(lax.select_n(True, 1.0, 2.0)) == 2.0
    np.testing.assert_array_equal(np.asarray(lax.select_n(np.int32(1), *cases)), cases[1])
    with x64():
        const = np.full(4, 5.0)
        check_grads(lambda a, b: lax.select_n(pred, a, b), (cases[0], cases[1]), order=2)
        check_grads(lambda a: lax.select_n(which, a, const, lax.sin(a)), (cases[0],), order=2)
        check_grads(lambda a: lax.select_n(np.int32(2), a, const, lax.mul(a, a)),
                    (cases[0],), order=2)


def test_select_n_batching():
    pred = np.array([True, False, True])
    x, y = np.arange(3.0, dtype=F32), -np.arange(3.0, dtype=F32)
    for dims in [(0, 0, 0), (None, 0, None), (0, None, 1), (1, 1, None)]:
        _check_batched(lax.select_n, [pred, x, y], dims)
    _check_batched(lax.select_n, [np.bool_(True), x, y], (0, None, 0))  # rank-0 `which`
    _check_batched(lax.select_n, [np.bool_(True), x, y], (None, 1, 0))


def test_clamp():
    x = np.array([-2.0, 0.5, 3.0], F32)
    np.testing.assert_array_equal(np.asarray(lax.clamp(0.0, x, 1.0)), [0, 0.5, 1])
    lo, hi = np.array([-3.0, 0.6, 0.0], F32), np.array([-1.0, 1.0, 2.0], F32)
    np.testing.assert_array_equal(np.asarray(lax.clamp(lo, x, hi)), np.float32([-2, 0.6, 2]))
    with x64():
        check_grads(lax.clamp, (-1.0, np.array([-2.0, 0.5, 3.0]), 1.0), order=2)
        check_grads(lax.clamp, (lo.astype(F64), x.astype(F64), hi.astype(F64)), order=2)
    _check_batched(lax.clamp, [np.float32(0.0), x, np.float32(1.0)], (0, 1, None))
    _check_batched(lax.clamp, [lo, x, np.float32(1.0)], (None, 0, 0))


def test_stop_gradient():
    f = lambda x: lax.mul(x, lax.stop_gradient(x))
    assert float(fg.grad(f)(3.0)) == 3.0
    assert "stop_gradient" in str(fg.make_jaxpr(f)(3.0))
    tree = {"a": np.float32(2.0), "n": np.int32(4)}
    out = lax.stop_gradient(tree)
    assert float(out["a"]) == 2.0 and out["n"] is tree["n"]
    g = fg.grad(lambda t: lax.mul(t["a"], lax.stop_gradient(t)["a"]))(
        {"a": np.float32(2.0)})
    assert float(g["a"]) == 2.0
    _, t = fg.jvp(lax.stop_gradient, (np.float32(1.0),), (np.float32(1.0),))
    assert float(t) == 0.0
    _check_batched(lax.stop_gradient, [np.arange(3.0, dtype=F32)], (1,))


def test_weak_types():
    assert lax.add(1.0, 2.0).weak_type
    assert lax.sin(2.0).weak_type
    strong = lax.add(np.float32(1.0), 2.0)
    assert not strong.weak_type and strong.dtype == F32
    assert not lax.lt(1.0, 2.0).weak_type
    assert lax.abs(1 + 2j).weak_type and lax.abs(1 + 2j).dtype == F32
    assert lax.mul(np.ones(2, np.int8), 3).dtype == np.int8
    assert lax.shift_right_logical(np.uint32(8), 1).dtype == np.uint32
    out_aval = fg.make_jaxpr(lambda x: lax.mul(x, 2.0))(1.0).out_avals[0]
    assert out_aval.weak_type
    assert lax.convert_element_type(1, F32, weak_type=True).weak_type


@pytest.mark.parametrize("call, words", [
    (lambda: lax.add(np.ones(3, F32), np.ones(3, I32)), ["add", "f32[3]", "i32[3]", "dtype"]),
    (lambda: lax.mul(np.ones(3, F32), np.ones(4, F32)), ["mul", "f32[3]", "f32[4]", "shape"]),
    (lambda: lax.atan2(np.ones((2, 3), F32), np.ones((3, 2), F32)),
     ["atan2", "f32[2,3]", "f32[3,2]"]),
    (lambda: lax.sin(np.ones(2, I32)), ["sin", "i32[2]", "float"]),
    (lambda: lax.shift_left(np.ones(2, F32), np.ones(2, F32)), ["shift_left", "f32[2]"]),
    (lambda: lax.select_n(np.ones(2, F32), np.ones(2), np.ones(2)), ["select_n", "which"]),
    (lambda: lax.select_n(np.array([True]), np.ones(2, F32), np.ones(2, F32)),
     ["select_n", "bool[1]", "f32[2]"]),
    (lambda: lax.select_n(True, np.ones(2, F32), np.ones(3, F32)),
     ["select_n", "f32[2]", "f32[3]"]),
    (lambda: lax.clamp(np.ones(2, F32), np.ones(3, F32), 1.0), ["clamp", "f32[2]", "f32[3]"]),
    (lambda: lax.integer_pow(np.ones(2, I32), -1), ["integer_pow", "y=-1", "i32[2]"]),
    (lambda: lax.bitcast_convert_type(np.ones(2, F32), np.int8), ["bitcast_convert_type",
                                                                 "f32[2]", "int8"]),
    (lambda: fg.make_jaxpr(lambda x: lax.add(x, np.ones(4, F32)))(np.ones(3, F32)),
     ["add", "f32[3]", "f32[4]"]),
])
def test_error_messages_name_op_and_shapes(call, words):
    with pytest.raises(errors.FuncgradError) as info:
        call()
    for w in words:
        assert w in str(info.value)
    assert __file__ in str(info.value)  # the user's line


def test_round_method_error():
    with pytest.raises(ValueError, match="rounding_method"):
        lax.round(np.ones(2, F32), 3)


def test_nextafter_has_no_derivative():
    with pytest.raises(errors.FuncgradError, match="nextafter"):
        fg.grad(lambda x: lax.nextafter(x, 2.0))(1.0)


def test_bitcast_and_convert():
    one = lax.bitcast_convert_type(np.float32(1.0), np.uint32)
    assert one.dtype == np.uint32 and int(one) == 0x3F800000
    back = lax.bitcast_convert_type(np.array([0x3F800000, 0], np.uint32), F32)
    np.testing.assert_array_equal(np.asarray(back), [1.0, 0.0])
    np.testing.assert_array_equal(np.asarray(lax.convert_element_type(
        np.array([-1.7, 1.7], F32), I32)), [-1, 1])
    _check_batched(lambda x: lax.bitcast_convert_type(x, np.int32),
                   [np.arange(3.0, dtype=F32)], (1,))


def test_complex_parts_roundtrip_and_inf():
    z = lax.complex(np.array([np.inf, 1.0], F32), np.array([0.0, -2.0], F32))
    assert z.dtype == C64
    np.testing.assert_array_equal(np.asarray(lax.real(z)), [np.inf, 1.0])
    np.testing.assert_array_equal(np.asarray(lax.imag(z)), [0.0, -2.0])
    assert lax.conj(np.float32(1.0)).dtype == C64


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, np.nan, 3e38, -3e38], F32)


@pytest.mark.parametrize("op", [op for op in OPS if F32 in op.dtypes], ids=lambda op: op.name)
def test_special_values_give_no_numpy_warnings(op, recwarn):
    op.fn(*[SPECIAL if i == 0 else SPECIAL[::-1] for i in range(op.nargs)])
    lax.div(np.array([1, 0], I32), np.array([0, 0], I32))
    assert not [str(w.message) for w in recwarn if issubclass(w.category, RuntimeWarning)]


def _binary_int_prims():
    """Every lax primitive that is elementwise over two integer operands with a rank-0 one
    (found by its shape rule), with the integer dtypes it accepts."""
    from funcgrad.core import Primitive, ShapedArray
    out = []
    for name in sorted(dir(lax)):
        p = getattr(lax, name)
        if not isinstance(p, Primitive) or p.multiple_results:
            continue
        for dt in (I32, U8):
            try:
                aval = p.abstract_eval(ShapedArray((), dt), ShapedArray((3,), dt))
            except Exception:  # not binary, needs params or rejects integers
                continue
            if getattr(aval, "shape", None) == (3,):
                out.append(pytest.param(p, dt, id=f"{p.name}-{dt}"))
    return out


_BINARY_INT = _binary_int_prims()


def test_binary_integer_primitives_are_found():
    names = {p.values[0].name for p in _BINARY_INT}
    assert {"add", "div", "rem", "shift_left", "shift_right_logical", "max", "and",
            "eq", "select_n"} <= names


@pytest.mark.parametrize("prim, dt", _BINARY_INT)
def test_impls_take_python_scalar_operands(prim, dt):
    # A compiled program may hand a rank-0 literal to an impl as a Python or numpy scalar.
    x = np.array([1, 2, 3], dt)
    for one in (1, np.asarray(1, dt), np.asarray(1, dt)[()]):
        for args in ((one, x), (x, one)):
            if prim.name == "select_n" and args[0] is x:
                continue  # `which` must be the rank-0 operand to pair with one case
            got = np.asarray(prim.impl_rule(*args))
            want = prim.impl_rule(*[np.asarray(a, dt) for a in args])
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype or prim.name == "select_n", (got.dtype, want.dtype)


@pytest.mark.parametrize("prim, dt", _BINARY_INT)
def test_jit_with_a_literal_operand_equals_eager(prim, dt):
    from funcgrad.core import Array
    one = Array(np.asarray(1, dt), True)  # a weak rank-0 constant: a literal under jit
    x = np.array([1, 2, 3], dt)
    fns = [lambda v: prim.bind(one, v)]
    if prim.name != "select_n":
        fns.append(lambda v: prim.bind(v, one))
    for f in fns:
        want = f(x)
        got = fg.jit(f)(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_python_int_first_operand_of_integer_ops_under_jit():
    import funcgrad.numpy as fnp
    x = fnp.array([1, 2, 3, -4], dtype=np.int32)
    for f in (lambda v: 1 // v, lambda v: 1 << v, fnp.reciprocal,
              lambda v: fnp.floor_divide(1, v), lambda v: 7 % v, lambda v: 1 >> v):
        want = f(x)
        got = fg.jit(f)(x)
        assert got.dtype == want.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _unary_prims():
    """Every lax primitive taking one operand and no parameters, with the dtypes it accepts."""
    from funcgrad.core import Primitive, ShapedArray
    out = []
    for name in sorted(dir(lax)):
        p = getattr(lax, name)
        if not isinstance(p, Primitive) or p.multiple_results:
            continue
        for dt, value in ((F32, 0.5), (I32, 3), (C64, 1 + 2j)):
            a = ShapedArray((), dt)
            try:
                p.abstract_eval(a)
            except Exception:  # needs params, more operands or another dtype
                continue
            try:
                p.abstract_eval(a, a)
                continue  # an n-ary op whose shape rule also takes one operand
            except Exception:
                out.append(pytest.param(p, dt, value, id=f"{p.name}-{dt}"))
    return out


@pytest.mark.parametrize("prim, dt, value", _unary_prims())
def test_unary_impls_take_python_scalars(prim, dt, value):
    want = np.asarray(prim.impl_rule(np.asarray(value, dt)))
    for arg in (value, np.asarray(value, dt)[()]):
        got = np.asarray(prim.impl_rule(arg)).astype(want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-6)
