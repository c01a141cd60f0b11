"""Elementwise math primitives: arithmetic, rounding, exp/log, trigonometric, roots, complex
parts, `convert_element_type` and `stop_gradient` (special functions: `lax/special.py`).
The transcendental functions take JAX's `accuracy=` (`utils.accurate`).

Each primitive is one block: wrapper, rules, `foo_p`, one registration per table. Binary
operands share a dtype and a shape, except that rank-0 operands broadcast. Comparisons,
bitwise ops, bitcasts, `select_n` and `clamp` live in `funcgrad.lax.logic`.
"""

import enum
import functools
import math

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import Array, Primitive, ShapedArray, get_aval
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters.ad import defjvp, defjvp_zero
from funcgrad.lax.logic import bitwise_and, bitwise_not, bitwise_or, eq, ge, select_n
from funcgrad.lax.shape import broadcast_in_dim, full
from funcgrad.lax.utils import accurate, binop, match_scalars, np_operands, quiet, unop


def _const(x, c):
    """A weakly typed rank-0 constant `c` with the dtype of `x`."""
    return Array(np.asarray(c, get_aval(x).dtype), True)


def _full_like(x, c):
    a = get_aval(x)
    return full(a.shape, c, a.dtype)


def _bcast(x, out):
    """A rank-0 `x` broadcast to the shape of `out` (unchanged when the shapes agree)."""
    shape = get_aval(out).shape
    return x if get_aval(x).shape == shape else broadcast_in_dim(x, shape, ())


def _defjvp2(prim, *fns):
    """`defjvp` for binary ops: each contribution is broadcast to the output's shape."""
    def wrap(fn):
        return lambda t, *xs, out, **kw: _bcast(fn(t, *xs, out=out, **kw), out)
    defjvp(prim, *[None if fn is None else wrap(fn) for fn in fns])


def _check_params(prim, check):
    """Run `check(aval, **params)` (it raises a user error) before `prim`'s shape rule."""
    shape_rule = prim.abstract_rule

    def rule(x, **params):
        check(x, **params)
        return shape_rule(x, **params)
    prim.def_abstract_eval(rule)


def _real_dtype(dt):
    return np.finfo(dt).dtype if dtypes.kind(dt) == "c" else dt


def unbroadcast(ct, aval):
    """Sum a cotangent down to a rank-0 operand's shape (undoing its broadcast)."""
    from funcgrad.lax.reductions import reduce_sum
    if aval.shape == () and get_aval(ct).shape != ():
        ct = reduce_sum(ct, tuple(range(get_aval(ct).ndim)))
    return ct


# --- add / sub / mul / div / rem -----------------------------------------------------------
def add(x, y):
    """Elementwise x + y (same dtype; equal shapes or rank-0 operands).

    Example:
        >>> add(fnp.ones(2), 1.0)
        Array([2., 2.], dtype=float32)
    """
    return add_p.bind(*match_scalars(x, y))


def _add_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if ad.is_undefined(x) else None,
            unbroadcast(ct, y.aval) if ad.is_undefined(y) else None]


add_p = binop("add", quiet(np.add))
ad.deflinear(add_p, _add_transpose)
# The tangent sum (interpreters/ad.py, which knows no kernels) computes as add does.
ad.add_any_p.declare("elementwise", dtype_kinds="biufc", fusible=True)


def sub(x, y):
    """Elementwise x - y."""
    return sub_p.bind(*match_scalars(x, y))


def _sub_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if ad.is_undefined(x) else None,
            unbroadcast(neg(ct), y.aval) if ad.is_undefined(y) else None]


sub_p = binop("sub", quiet(np.subtract))
ad.deflinear(sub_p, _sub_transpose)


def mul(x, y, *, out_dtype=None):
    """Elementwise x * y; with `out_dtype`, of the operands converted to it first (JAX)."""
    if out_dtype is not None:
        x, y = convert_element_type(x, out_dtype), convert_element_type(y, out_dtype)
    return mul_p.bind(*match_scalars(x, y))


def _mul_transpose(ct, x, y):
    if ad.is_undefined(x):
        return [unbroadcast(mul(ct, y), x.aval), None]
    return [None, unbroadcast(mul(x, ct), y.aval)]


mul_p = binop("mul", quiet(np.multiply))
defjvp(mul_p, lambda t, x, y, out: mul(t, y), lambda t, x, y, out: mul(x, t))
ad.transpose_rules[mul_p] = _mul_transpose


def div(x, y):
    """Elementwise x / y; integer division rounds toward zero, as in lax (7 / -2 == -3)."""
    return div_p.bind(*match_scalars(x, y))


def _div_impl(x, y):
    x, y = np_operands(x, y)
    if dtypes.kind(x.dtype) not in "iu":
        return np.true_divide(x, y)
    q = np.floor_divide(x, y)
    if dtypes.kind(x.dtype) == "i":
        q = q + ((np.remainder(x, y) != 0) & ((x < 0) != (y < 0))).astype(x.dtype)
    return q


def _div_transpose(ct, x, y):
    return [unbroadcast(div(ct, y), x.aval), None]


div_p = binop("div", quiet(_div_impl))
defjvp(div_p, lambda t, x, y, out: div(t, y),
       lambda t, x, y, out: neg(mul(t, div(out, y))))
ad.transpose_rules[div_p] = _div_transpose


def rem(x, y):
    """Elementwise remainder with the sign of `x` (C's fmod), as lax.rem: rem(-7, 2) == -1."""
    return rem_p.bind(*match_scalars(x, y))


rem_p = binop("rem", quiet(np.fmod), kinds="iuf")
# d/dy fmod(x, y) = -trunc(x / y)
_defjvp2(rem_p, lambda t, x, y, out: t,
         lambda t, x, y, out: mul(neg(t), mul(sign(div(x, y)), floor(abs(div(x, y))))))


# --- pow / integer_pow / square / reciprocal -----------------------------------------------
def pow(x, y):
    """Elementwise x ** y for float or complex operands of one dtype."""
    return pow_p.bind(*match_scalars(x, y))


def _replace_zero(x):
    return select_n(eq(x, _const(x, 0)), x, _full_like(x, 1))


def _pow_jvp_x(t, x, y, out):
    # y * x ** (y - 1), exactly: 0 where y == 0, with its derivative in y (1 / x) kept. Where
    # y == 0 and x is 0 or not finite, x is replaced by 1: y * x ** (y - 1) would be 0 * inf
    # or NaN there, and so would the derivatives of the unused value (grad(grad(x ** 0.))(0.))
    xb, yb = _bcast(x, out), _bcast(y, out)
    odd = eq(xb, _const(x, 0))
    if get_aval(x).dtype.kind == "f":
        odd = bitwise_or(odd, bitwise_not(is_finite(xb)))
    odd = bitwise_and(eq(yb, _const(y, 0)), odd)
    safe_x = select_n(odd, xb, _full_like(out, 1))
    return mul(t, mul(yb, pow(safe_x, sub(y, _const(y, 1)))))


def _pow_jvp_y(t, x, y, out):
    return mul(t, mul(log(_replace_zero(_bcast(x, out))), out))


@functools.wraps(np.power)
def _pow_impl(x, y):
    # NumPy's loops for a rank-0 or broadcast operand take fast paths (sqrt for y = 0.5, ...)
    # that break C99's special cases (pow(-0, 0.5) = +0, pow(-inf, 0.5) = +inf): give it
    # full arrays
    host = all(isinstance(v, (np.ndarray, np.generic)) for v in (x, y))  # not CuPy arrays
    if not host:
        return np.power(x, y)
    shape = np.broadcast_shapes(x.shape, y.shape)
    if x.shape != y.shape or not shape:
        x, y = (np.array(np.broadcast_to(v, shape or (1,))) for v in (x, y))
    return np.power(x, y).reshape(shape)


pow_p = binop("pow", quiet(_pow_impl), kinds="fc")
_defjvp2(pow_p, _pow_jvp_x, _pow_jvp_y)


def integer_pow(x, y):
    """Elementwise x ** y for a static Python int `y` (negative only for inexact dtypes).

    Example:
        >>> integer_pow(fnp.array([1.0, 2.0]), 3)
        Array([1., 8.], dtype=float32)
    """
    return integer_pow_p.bind(x, y=int(y))


def _integer_pow_jvp(t, x, *, out, y):
    if y == 0:
        return ad.Zero(get_aval(out))
    return mul(t, mul(_const(x, y), integer_pow(x, y - 1)))


def _integer_pow_impl(x, *, y):
    x = np.asarray(x)
    if x.dtype.kind in "iu":  # in 64 bits, then wrapped to x's width (as repeated mul would)
        return np.power(x.astype(np.dtype(f"{x.dtype.kind}8")), y)
    return np.power(x, y)


def _integer_pow_check(x, *, y):
    if y < 0 and dtypes.kind(x.dtype) in "iu":
        raise errors.op_error("integer_pow", f"a negative exponent y={y} needs a float or "
                              f"complex operand, got {x}", hint="convert x to float first")


integer_pow_p = unop("integer_pow", quiet(_integer_pow_impl), kinds="iufc")
_check_params(integer_pow_p, _integer_pow_check)
defjvp(integer_pow_p, _integer_pow_jvp)


def square(x):
    """Elementwise x * x (as `integer_pow(x, 2)`)."""
    return integer_pow(x, 2)


def reciprocal(x):
    """Elementwise 1 / x (as `integer_pow(x, -1)`)."""
    return integer_pow(x, -1)


# --- neg / sign / max / min / nextafter ----------------------------------------------------
def neg(x):
    """Elementwise -x."""
    return neg_p.bind(x)


neg_p = unop("neg", np.negative, kinds="iufc")
ad.deflinear(neg_p, lambda ct, x: [neg(ct)])


def sign(x):
    """Elementwise sign: -1, 0 or 1 (x / |x| for complex; NaN stays NaN)."""
    return sign_p.bind(x)


sign_p = unop("sign", np.sign, kinds="iufc")
defjvp_zero(sign_p)


def _balanced_eq(x, z, y):
    # 1 where x attains the result z, 1/2 where y does too (JAX's tie convention)
    one, zero = _full_like(z, 1), _full_like(z, 0)
    return div(select_n(eq(x, z), zero, one), select_n(eq(y, z), one, _full_like(z, 2)))


def max(x, y):
    """Elementwise maximum (NaN propagates); on ties the gradient is split 1/2 : 1/2."""
    return max_p.bind(*match_scalars(x, y))


max_p = binop("max", np.maximum, kinds="biuf")
_defjvp2(max_p, lambda t, x, y, out: mul(t, _balanced_eq(x, out, y)),
         lambda t, x, y, out: mul(t, _balanced_eq(y, out, x)))


def min(x, y):
    """Elementwise minimum (NaN propagates); on ties the gradient is split 1/2 : 1/2."""
    return min_p.bind(*match_scalars(x, y))


min_p = binop("min", np.minimum, kinds="biuf")
_defjvp2(min_p, lambda t, x, y, out: mul(t, _balanced_eq(x, out, y)),
         lambda t, x, y, out: mul(t, _balanced_eq(y, out, x)))


def nextafter(x1, x2):
    """The next float after x1 in the direction of x2. Not differentiable (as in JAX)."""
    return nextafter_p.bind(*match_scalars(x1, x2))


nextafter_p = binop("nextafter", np.nextafter, kinds="f")
nextafter_p.widens_narrow = False  # steps in bfloat16 (ml_dtypes' nextafter), not float32


# --- rounding ---------------------------------------------------------------------------------
class RoundingMethod(enum.IntEnum):
    """`round`'s tie rule, as `jax.lax.RoundingMethod`."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def floor(x):
    """Elementwise floor."""
    return floor_p.bind(x)


floor_p = unop("floor", np.floor, kinds="f")
defjvp_zero(floor_p)


def ceil(x):
    """Elementwise ceiling."""
    return ceil_p.bind(x)


ceil_p = unop("ceil", np.ceil, kinds="f")
defjvp_zero(ceil_p)


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Round to the nearest integer; ties away from zero (0) or to even (1).

    Example:
        >>> round(fnp.array([0.5, 2.5]), RoundingMethod.TO_NEAREST_EVEN)
        Array([0., 2.], dtype=float32)
    """
    return round_p.bind(x, rounding_method=int(rounding_method))


def _round_impl(x, *, rounding_method):
    x = np.asarray(x)
    if rounding_method == RoundingMethod.TO_NEAREST_EVEN:
        return np.rint(x)
    r = np.trunc(x)  # x - trunc(x) is exact, unlike floor(x + 0.5)
    return np.where(np.abs(x - r) >= 0.5, r + np.sign(x), r)


def _round_check(x, *, rounding_method):
    if rounding_method not in (0, 1):
        raise errors.op_error("round", f"rounding_method must be 0 (AWAY_FROM_ZERO) or 1 "
                              f"(TO_NEAREST_EVEN), got {rounding_method}",
                              cls=errors.FuncgradValueError)


round_p = unop("round", quiet(_round_impl), kinds="f")
_check_params(round_p, _round_check)
defjvp_zero(round_p)


def is_finite(x):
    """Elementwise: not inf and not NaN (bool)."""
    return is_finite_p.bind(x)


is_finite_p = unop("is_finite", np.isfinite, kinds="f", out_dtype=lambda dt: dtypes.bool_)
defjvp_zero(is_finite_p)


# --- exp / log family -------------------------------------------------------------------------
def exp(x, *, accuracy=None):
    """Elementwise e ** x."""
    return exp_p.bind(accurate("exp", x, accuracy))


exp_p = unop("exp", quiet(np.exp))
defjvp(exp_p, lambda t, x, out: mul(t, out))


def exp2(x, *, accuracy=None):
    """Elementwise 2 ** x."""
    return exp2_p.bind(accurate("exp2", x, accuracy))


exp2_p = unop("exp2", quiet(np.exp2))
defjvp(exp2_p, lambda t, x, out: mul(t, mul(_const(x, math.log(2.0)), out)))


def log(x, *, accuracy=None):
    """Elementwise natural logarithm."""
    return log_p.bind(accurate("log", x, accuracy))


log_p = unop("log", quiet(np.log))
defjvp(log_p, lambda t, x, out: div(t, x))


def log1p(x, *, accuracy=None):
    """Elementwise log(1 + x), accurate near 0."""
    return log1p_p.bind(accurate("log1p", x, accuracy))


log1p_p = unop("log1p", quiet(np.log1p))
defjvp(log1p_p, lambda t, x, out: div(t, add(x, _const(x, 1))))


def expm1(x, *, accuracy=None):
    """Elementwise e ** x - 1, accurate near 0."""
    return expm1_p.bind(accurate("expm1", x, accuracy))


def _is_complex(x):
    # device arrays (CuPy) carry a dtype: never convert them to look at it
    return (x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype).kind == "c"


def _expm1_impl(x):
    if not _is_complex(x):
        return np.expm1(x)
    x = np.asarray(x)
    # numpy's complex expm1 misses the Array API's special cases (expm1(inf+0j) = inf+0j):
    # exp(a)cos(b) - 1 = expm1(a)cos(b) - 2sin(b/2)^2, accurate near 0; exp(x) - 1 elsewhere
    a, b, e = x.real, x.imag, np.exp(x)
    out = np.empty(x.shape, x.dtype)
    out.real = np.where(np.isfinite(x), np.expm1(a) * np.cos(b) - 2 * np.sin(b / 2) ** 2,
                        e.real - 1) + 0.0  # + 0.0: expm1(-0 + 0j) is +0 + 0j
    out.imag = np.where(b == 0, b, e.imag)
    return out


expm1_p = unop("expm1", quiet(_expm1_impl))
defjvp(expm1_p, lambda t, x, out: mul(t, add(out, _const(x, 1))))


def tanh(x, *, accuracy=None):
    """Elementwise hyperbolic tangent."""
    return tanh_p.bind(accurate("tanh", x, accuracy))


def _tanh_impl(x):
    if not _is_complex(x):
        return np.tanh(x)
    x = np.asarray(x)
    out = np.array(np.tanh(x))  # the Array API: tanh(+-inf + bj) = +-1 + copysign(0, b)j
    out.imag = np.where(np.isinf(x.real) & np.isfinite(x.imag), np.copysign(0.0, x.imag),
                        out.imag)
    return out


tanh_p = unop("tanh", quiet(_tanh_impl))
# (1 + out)(1 - out) is more accurate than 1 - out**2 near |out| = 1
defjvp(tanh_p, lambda t, x, out: mul(add(t, mul(t, out)), sub(_const(x, 1), out)))


def logistic(x, *, accuracy=None):
    """Elementwise sigmoid 1 / (1 + e ** -x), without overflow for large |x|."""
    return logistic_p.bind(accurate("logistic", x, accuracy))


def _logistic_impl(x):
    x = np.asarray(x)
    if dtypes.kind(x.dtype) == "c":
        return 1 / (1 + np.exp(-x))
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


logistic_p = unop("logistic", quiet(_logistic_impl))
defjvp(logistic_p, lambda t, x, out: mul(t, mul(out, sub(_const(x, 1), out))))


# --- trigonometric and hyperbolic -------------------------------------------------------------
def sin(x, *, accuracy=None):
    """Elementwise sine."""
    return sin_p.bind(accurate("sin", x, accuracy))


sin_p = unop("sin", quiet(np.sin))
defjvp(sin_p, lambda t, x, out: mul(t, cos(x)))


def cos(x, *, accuracy=None):
    """Elementwise cosine."""
    return cos_p.bind(accurate("cos", x, accuracy))


cos_p = unop("cos", quiet(np.cos))
defjvp(cos_p, lambda t, x, out: neg(mul(t, sin(x))))


def tan(x, *, accuracy=None):
    """Elementwise tangent."""
    return tan_p.bind(accurate("tan", x, accuracy))


tan_p = unop("tan", quiet(np.tan))
defjvp(tan_p, lambda t, x, out: mul(t, add(_const(x, 1), mul(out, out))))


def asin(x):
    """Elementwise arcsine (NaN outside [-1, 1] for floats)."""
    return asin_p.bind(x)


asin_p = unop("asin", quiet(np.arcsin))
defjvp(asin_p, lambda t, x, out: mul(t, rsqrt(sub(_const(x, 1), mul(x, x)))))


def acos(x):
    """Elementwise arccosine."""
    return acos_p.bind(x)


acos_p = unop("acos", quiet(np.arccos))
defjvp(acos_p, lambda t, x, out: neg(mul(t, rsqrt(sub(_const(x, 1), mul(x, x))))))


def atan(x):
    """Elementwise arctangent."""
    return atan_p.bind(x)


atan_p = unop("atan", quiet(np.arctan))
defjvp(atan_p, lambda t, x, out: div(t, add(_const(x, 1), mul(x, x))))


def atan2(x, y):
    """Elementwise arctangent of x / y with the quadrant from both signs (numpy's
    `arctan2(x, y)`). Example: ``atan2(1.0, -1.0)`` is ``3*pi/4``."""
    return atan2_p.bind(*match_scalars(x, y))


atan2_p = binop("atan2", np.arctan2, kinds="f")
_defjvp2(atan2_p, lambda t, x, y, out: mul(t, div(y, add(mul(x, x), mul(y, y)))),
         lambda t, x, y, out: mul(t, div(neg(x), add(mul(x, x), mul(y, y)))))


def sinh(x):
    """Elementwise hyperbolic sine."""
    return sinh_p.bind(x)


sinh_p = unop("sinh", quiet(np.sinh))
defjvp(sinh_p, lambda t, x, out: mul(t, cosh(x)))


def cosh(x):
    """Elementwise hyperbolic cosine."""
    return cosh_p.bind(x)


cosh_p = unop("cosh", quiet(np.cosh))
defjvp(cosh_p, lambda t, x, out: mul(t, sinh(x)))


def asinh(x):
    """Elementwise inverse hyperbolic sine."""
    return asinh_p.bind(x)


asinh_p = unop("asinh", np.arcsinh)
defjvp(asinh_p, lambda t, x, out: mul(t, rsqrt(add(mul(x, x), _const(x, 1)))))


def acosh(x):
    """Elementwise inverse hyperbolic cosine (NaN below 1 for floats)."""
    return acosh_p.bind(x)


def _acosh_jvp(t, x, out):
    xm, xp = sub(x, _const(x, 1)), add(x, _const(x, 1))  # not x**2 - 1: accurate near 1
    if dtypes.kind(get_aval(x).dtype) == "c":  # the principal branch: 1 / (sqrt(x - 1) sqrt(x + 1))
        return mul(t, mul(rsqrt(xm), rsqrt(xp)))
    return mul(t, rsqrt(mul(xm, xp)))


acosh_p = unop("acosh", quiet(np.arccosh))
defjvp(acosh_p, _acosh_jvp)


def atanh(x):
    """Elementwise inverse hyperbolic tangent."""
    return atanh_p.bind(x)


atanh_p = unop("atanh", quiet(np.arctanh))
defjvp(atanh_p, lambda t, x, out: div(div(t, sub(_const(x, 1), x)), add(_const(x, 1), x)))


# --- roots and abs ----------------------------------------------------------------------------
def sqrt(x, *, accuracy=None):
    """Elementwise square root."""
    return sqrt_p.bind(accurate("sqrt", x, accuracy))


sqrt_p = unop("sqrt", quiet(np.sqrt))
defjvp(sqrt_p, lambda t, x, out: mul(t, div(_const(x, 0.5), out)))


def rsqrt(x, *, accuracy=None):
    """Elementwise 1 / sqrt(x)."""
    return rsqrt_p.bind(accurate("rsqrt", x, accuracy))


rsqrt_p = unop("rsqrt", quiet(lambda x: 1 / np.sqrt(x)))
defjvp(rsqrt_p, lambda t, x, out: mul(t, mul(_const(x, -0.5), div(out, x))))


def cbrt(x, *, accuracy=None):
    """Elementwise real cube root (negative for negative x)."""
    return cbrt_p.bind(accurate("cbrt", x, accuracy))


cbrt_p = unop("cbrt", np.cbrt, kinds="f")
defjvp(cbrt_p, lambda t, x, out: mul(t, mul(_const(x, 1 / 3), integer_pow(out, -2))))


def abs(x):
    """Elementwise |x|; for complex x the (real) modulus.

    Example:
        >>> abs(3 + 4j)
        Array(5., dtype=float32)
    """
    return abs_p.bind(x)


def _abs_jvp(t, x, out):
    if dtypes.kind(get_aval(x).dtype) != "c":
        return select_n(ge(x, _const(x, 0)), neg(t), t)
    # Re(t * conj(x) / |x|), with |x| = 0 replaced by 1 (gradient 0 at the origin)
    mod = _replace_zero(convert_element_type(out, get_aval(x).dtype))
    return real(mul(t, div(conj(x), mod)))


abs_p = unop("abs", np.abs, kinds="iufc", out_dtype=_real_dtype)
defjvp(abs_p, _abs_jvp)


# --- complex parts ---------------------------------------------------------------------------
def real(x):
    """Elementwise real part of a complex array (a real array)."""
    return real_p.bind(x)


real_p = unop("real", np.real, kinds="c", out_dtype=_real_dtype)
ad.deflinear(real_p, lambda ct, x: [complex(ct, _const(ct, 0))])


def imag(x):
    """Elementwise imaginary part of a complex array (a real array)."""
    return imag_p.bind(x)


imag_p = unop("imag", np.imag, kinds="c", out_dtype=_real_dtype)
ad.deflinear(imag_p, lambda ct, x: [complex(_const(ct, 0), neg(ct))])


def _complex_dtype(dt):
    return np.result_type(dt, np.complex64)


def conj(x):
    """Elementwise complex conjugate; a real input gives a complex result, as in lax."""
    return conj_p.bind(x)


def _conj_transpose(ct, x):
    return [conj(ct) if dtypes.kind(x.aval.dtype) == "c" else real(ct)]


conj_p = unop("conj", lambda x: np.conj(np.asarray(x, _complex_dtype(np.asarray(x).dtype))),
              kinds="fc",
              out_dtype=_complex_dtype)
ad.deflinear(conj_p, _conj_transpose)


def complex(x, y):
    """Elementwise x + i*y from two real arrays of one dtype."""
    return complex_p.bind(*match_scalars(x, y))


def _complex_impl(x, y):
    x, y = np_operands(x, y)
    out = np.empty(np.broadcast_shapes(x.shape, y.shape), _complex_dtype(x.dtype))
    out.real, out.imag = x, y  # not x + 1j*y, which turns inf into nan
    return out


def _complex_transpose(ct, x, y):
    return [unbroadcast(real(ct), x.aval) if ad.is_undefined(x) else None,
            unbroadcast(imag(neg(ct)), y.aval) if ad.is_undefined(y) else None]


# Not fusible: a kernel would hold complex values, which the CUDA renderer cannot type.
complex_p = binop("complex", _complex_impl, kinds="f", out_dtype=_complex_dtype,
                  fusible=False)
ad.deflinear(complex_p, _complex_transpose)


# --- convert_element_type ----------------------------------------------------------
def convert_element_type(operand, new_dtype, *, weak_type=False):
    """Cast `operand` to `new_dtype` (canonicalized). Float -> integer rounds toward zero and
    saturates as in JAX (XLA): values beyond the integer range (and +-inf) give its bounds,
    NaN gives 0. Complex -> real keeps the real part; anything -> bool is `x != 0`.

    Example:
        >>> convert_element_type(fnp.array([2.7, -300.0, fnp.inf, fnp.nan]), fnp.int8)
        Array([   2, -128,  127,    0], dtype=int8)
    """
    try:
        dt = dtypes.canonicalize(new_dtype)
    except TypeError as e:
        raise errors.op_error("convert_element_type", f"new_dtype {errors.short_repr(new_dtype)}"
                              f" is not a dtype funcgrad supports ({e})") from None
    return convert_element_type_p.bind(operand, new_dtype=dt, weak_type=bool(weak_type))


def _convert_abstract(x, *, new_dtype, weak_type):
    return ShapedArray(x.shape, new_dtype, weak_type)


def float_to_int(x, dtype):
    """numpy float array `x` as integer `dtype` as XLA converts (toward zero, saturating, NaN
    -> 0; numpy's cast is platform-defined there), as the numpy backend's fused cast does."""
    info = dtypes.iinfo(dtype)
    if dtype.num >= 256:  # int4 & co. (ml_dtypes): numpy's ufuncs do not write them
        return np.clip(np.where(x == x, np.trunc(x), 0), info.min, info.max).astype(dtype)
    if dtype.itemsize < 8:  # the bounds are exact in float32 (8, 16 bits) or float64 (32 bits)
        f = np.float32 if dtype.itemsize < 4 else np.float64
        out = np.empty(np.shape(x), dtype)
        if info.min == 0:  # fmax maps NaN to the lower bound, 0
            return np.fmin(np.fmax(x, f(0)), f(info.max), out=out, casting="unsafe")
        return np.clip(np.where(x == x, x, 0), f(info.min), f(info.max), out=out,
                       casting="unsafe")
    top = np.float64(2.0 ** (64 if info.min == 0 else 63))  # max + 1, a power of two
    below = np.nextafter(top, np.float64(0))
    inside = (np.fmin(np.fmax(x, np.float64(0)), below) if info.min == 0 else
              np.clip(np.where(x == x, x, 0), np.float64(info.min), below))
    return np.where(x >= top, dtype.type(info.max), inside.astype(dtype))


def _convert_impl(x, *, new_dtype, weak_type):
    x = np.asarray(x)
    x = x.real if dtypes.kind(x.dtype) == "c" and dtypes.kind(new_dtype) != "c" else x
    if dtypes.kind(x.dtype) == "f" and dtypes.kind(new_dtype) in "iu":
        return float_to_int(x, new_dtype)
    return x.astype(new_dtype)


def _convert_jvp(primals, out, tangents, *, new_dtype, weak_type):
    if not (dtypes.is_inexact(new_dtype) and dtypes.is_inexact(get_aval(primals[0]).dtype)):
        return ad.Zero(get_aval(out))
    return convert_element_type_p.bind(tangents[0], new_dtype=new_dtype, weak_type=weak_type)


def _convert_transpose(ct, x, *, new_dtype, weak_type):
    return [convert_element_type_p.bind(ct, new_dtype=x.aval.dtype, weak_type=x.aval.weak_type)]


convert_element_type_p = Primitive("convert_element_type")
convert_element_type_p.def_impl(quiet(_convert_impl))  # nan -> int casts
convert_element_type_p.def_abstract_eval(_convert_abstract)
ad.jvp_rules[convert_element_type_p] = _convert_jvp
ad.transpose_rules[convert_element_type_p] = _convert_transpose
batching.defvectorized(convert_element_type_p)
convert_element_type_p.declare("elementwise", dtype_kinds="biufc", fusible=True)


# --- stop_gradient --------------------------------------------------------------------------
def stop_gradient(x):
    """The identity on a pytree, whose derivative is zero: float leaves go through
    `stop_gradient_p` (visible in the IR); integer and bool leaves are returned as they are.

    Example:
        >>> funcgrad.grad(lambda x: x * stop_gradient(x))(3.0)
        Array(3., dtype=float32)
    """
    from funcgrad.tree_util import tree_map

    def stop(leaf):
        return stop_gradient_p.bind(leaf) if dtypes.is_inexact(get_aval(leaf).dtype) else leaf
    return tree_map(stop, x)


# Not fusible: `simplify` removes it before fusion.
stop_gradient_p = unop("stop_gradient", lambda x: x, kinds="fc", fusible=False)
defjvp_zero(stop_gradient_p)

__all__ = [
    "RoundingMethod", "abs", "abs_p", "acos", "acos_p", "acosh", "acosh_p", "add", "add_p", "asin",
    "asin_p", "asinh", "asinh_p", "atan", "atan2", "atan2_p", "atan_p", "atanh", "atanh_p", "cbrt",
    "cbrt_p", "ceil", "ceil_p", "complex", "complex_p", "conj", "conj_p", "convert_element_type",
    "convert_element_type_p", "cos", "cos_p", "cosh", "cosh_p", "div", "div_p", "exp", "exp2",
    "exp2_p", "exp_p", "expm1", "expm1_p", "floor", "floor_p", "imag", "imag_p", "integer_pow",
    "integer_pow_p", "is_finite", "is_finite_p", "log", "log1p", "log1p_p", "log_p", "logistic",
    "logistic_p", "max", "max_p", "min", "min_p", "mul", "mul_p", "neg", "neg_p", "nextafter",
    "nextafter_p", "pow", "pow_p", "real", "real_p", "reciprocal", "rem", "rem_p", "round",
    "round_p", "rsqrt", "rsqrt_p", "sign", "sign_p", "sin", "sin_p", "sinh", "sinh_p", "sqrt",
    "sqrt_p", "square", "stop_gradient", "stop_gradient_p", "sub", "sub_p", "tan", "tan_p", "tanh",
    "tanh_p",
]
