"""Elementwise math of funcgrad.numpy: arithmetic, powers, exponentials, trigonometry,
rounding and the float-only helpers (`hypot`, `logaddexp`, `sinc`, ...).

Each ufunc promotes its operands (JAX's lattice, weak Python scalars), broadcasts them
(NumPy rules) and binds lax primitives. The common eager cases (two Arrays of one shape
and dtype; an Array and a Python scalar) skip straight to `prim.bind`.
"""

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Array
from funcgrad.custom_derivatives import custom_jvp
from funcgrad.numpy._util import (
    _PY_SCALARS,
    asarray_operand,
    broadcast_shapes,
    broadcast_to_shape,
    check_no_out,
    check_rank_promotion,
    convert,
    dtype_of,
    full_like_of,
    promote,
    promote2,
    scalar_array,
    select,
    shape_of,
    weak_scalar,
)

__all__ = [
    "abs", "absolute", "add", "angle", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
    "arctan2", "arctanh", "around", "cbrt", "ceil", "clip", "conj", "conjugate", "copysign", "cos",
    "cosh", "deg2rad", "degrees", "divide", "divmod", "exp", "exp2", "expm1", "fabs",
    "fix", "float_power", "floor", "floor_divide", "fmax", "fmin", "fmod", "heaviside",
    "hypot", "imag", "iscomplex", "log", "log10", "log1p", "log2", "logaddexp", "logaddexp2",
    "maximum", "minimum", "mod", "multiply", "nan_to_num", "negative", "positive", "pow", "power",
    "rad2deg", "radians", "real", "reciprocal", "remainder", "rint", "round", "sign", "sin",
    "sinc", "sinh", "sqrt", "square", "subtract", "tan", "tanh", "true_divide", "trunc",
]

# --- factories --------------------------------------------------------------------------------

def _kind_error(name, x, allowed):
    return errors.op_error(name, f"does not support dtype {dtype_of(x)} (operand of shape "
                                 f"{shape_of(x)}); it takes {allowed} operands")


def _binary_ufunc(name, prim, kinds="iufc", bool_fn=None, inexact=False, doc=""):
    """A NumPy binary ufunc over lax primitive `prim` (same-dtype, same-shape operands).

    `kinds`: dtype kinds `prim` accepts; `bool_fn`: what bool operands use instead (e.g.
    `bitwise_or` for add); `inexact`: integer operands are promoted to the default float.
    """
    bind = prim.bind
    fast_kinds = kinds.replace("i", "").replace("u", "").replace("b", "") if inexact else kinds
    # Python scalars join arrays of these kinds without changing their dtype (float: any
    # number; signed int: ints that fit)
    scalar_kinds = ("f" if "f" in kinds else "") + ("i" if "i" in fast_kinds else "")

    def slow(x, y):
        x, y = promote2(name, x, y, inexact)
        k = dtypes.kind(dtype_of(x))
        if k == "b" and bool_fn is not None:
            return bool_fn(x, y)
        if k not in kinds:
            raise _kind_error(name, x, _KIND_WORDS[kinds])
        return bind(x, y)

    def ufunc(x, y, /):
        tx, ty = type(x), type(y)
        if tx is Array:
            vx = x._value
            if ty is Array:
                vy = y._value
                d = vx.dtype
                if d == vy.dtype and dtypes.kind(d) in fast_kinds:
                    sx, sy = vx.shape, vy.shape
                    if sx == sy or not sx or not sy:
                        return bind(x, y)
                    if len(sx) != len(sy):
                        check_rank_promotion(name, (sx, sy))
                    shape = broadcast_shapes(name, sx, sy)
                    return bind(broadcast_to_shape(x, shape), broadcast_to_shape(y, shape))
            elif ty is float or ty is int:
                k = dtypes.kind(vx.dtype)
                if k in scalar_kinds and (k == "f" or ty is int):
                    try:
                        return bind(x, weak_scalar(y, vx.dtype))
                    except OverflowError:
                        pass
        elif ty is Array and (tx is float or tx is int):
            vy = y._value
            k = dtypes.kind(vy.dtype)
            if k in scalar_kinds and (k == "f" or tx is int):
                try:
                    return bind(weak_scalar(x, vy.dtype), y)
                except OverflowError:
                    pass
        return slow(x, y)

    ufunc.__name__ = ufunc.__qualname__ = name
    ufunc.__doc__ = doc
    return ufunc


_KIND_WORDS = {"iufc": "numeric (not bool)", "fc": "float or complex", "f": "real float",
               "iuf": "real numeric", "biu": "integer or bool", "iu": "integer",
               "biuf": "real", "biufc": "any"}


def unary_operand(name, x, kinds, inexact):
    """`x` as an operand of a unary ufunc: ints/bools become floats if `inexact`
    (`dtypes.to_inexact`)."""
    if type(x) in _PY_SCALARS:
        dt, weak = dtypes.scalar_dtype(x)
        if inexact:
            dt = dtypes.to_inexact(dt)
        x = scalar_array(x, dt, weak, name)
        if dtypes.kind(dt) not in kinds:  # as for arrays: floor(1 + 2j) is an error, as in NumPy
            raise _kind_error(name, x, _KIND_WORDS[kinds])
        return x
    x = asarray_operand(name, x)
    k = dtypes.kind(dtype_of(x))
    if inexact and k not in "fc":
        return lax.convert_element_type(x, dtypes.to_inexact(dtype_of(x)), weak_type=x.weak_type)
    if k not in kinds:
        raise _kind_error(name, x, _KIND_WORDS[kinds])
    return x


def _unary_ufunc(name, prim, kinds="fc", inexact=True, doc=""):
    """A NumPy unary ufunc over lax primitive `prim`; integer inputs become float if `inexact`."""
    bind = prim.bind

    def ufunc(x, /):
        if type(x) is Array and dtypes.kind(x._value.dtype) in kinds:
            return bind(x)
        return bind(unary_operand(name, x, kinds, inexact))

    ufunc.__name__ = ufunc.__qualname__ = name
    ufunc.__doc__ = doc
    return ufunc


def _scalar_like(x, value):
    """A weak rank-0 constant with the dtype of `x`."""
    return weak_scalar(value, dtype_of(x))


# --- arithmetic -------------------------------------------------------------------------------

add = _binary_ufunc("add", lax.add_p, bool_fn=lambda x, y: lax.bitwise_or(x, y),
                    doc="Elementwise x + y with broadcasting (bool: logical or).")
subtract = _binary_ufunc("subtract", lax.sub_p, doc="Elementwise x - y with broadcasting.")
multiply = _binary_ufunc("multiply", lax.mul_p, bool_fn=lambda x, y: lax.bitwise_and(x, y),
                         doc="Elementwise x * y with broadcasting (bool: logical and).")
true_divide = _binary_ufunc(
    "true_divide", lax.div_p, kinds="fc", inexact=True,
    doc="Elementwise x / y; integer operands give the default float (int / int -> float32).")
divide = true_divide


def complex_operand(name, x):
    """`(x, whether it has a complex dtype)`; an array-like other than a Python scalar (a list,
    which may hold traced values) is converted first, once."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        if type(x) in _PY_SCALARS:
            return x, type(x) is complex
        x = asarray_operand(name, x)
        dt = dtype_of(x)
    return x, dtypes.kind(np.dtype(dt)) == "c"


def _extremum(name, prim, order, doc):
    """maximum/minimum: NaN-propagating; complex operands are ordered lexicographically by
    (real, imag), as in NumPy and jax.numpy (lax.max on complex)."""
    real_ufunc = _binary_ufunc(name, prim, kinds="biuf")

    def ufunc(x1, x2, /):
        (x1, c1), (x2, c2) = complex_operand(name, x1), complex_operand(name, x2)
        if not (c1 or c2):
            return real_ufunc(x1, x2)
        x1, x2 = promote2(name, x1, x2)
        re1, re2, im1, im2 = lax.real(x1), lax.real(x2), lax.imag(x1), lax.imag(x2)
        first = select(lax.eq(re1, re2), order(re1, re2), order(im1, im2))
        # a NaN in x1 wins, then one in x2
        first = lax.bitwise_or(lax.ne(x1, x1), lax.bitwise_and(first, lax.eq(x2, x2)))
        return select(first, x2, x1)
    ufunc.__name__ = ufunc.__qualname__ = name
    ufunc.__doc__ = doc
    return ufunc


maximum = _extremum("maximum", lax.max_p, lax.gt, "Elementwise maximum (NaN-propagating).")
minimum = _extremum("minimum", lax.min_p, lax.lt, "Elementwise minimum (NaN-propagating).")
arctan2 = _binary_ufunc("arctan2", lax.atan2_p, kinds="f", inexact=True,
                        doc="Elementwise arc tangent of x1 / x2 choosing the quadrant.")

negative = _unary_ufunc("negative", lax.neg_p, kinds="iufc", inexact=False,
                        doc="Elementwise -x.")
sign = _unary_ufunc("sign", lax.sign_p, kinds="iufc", inexact=False,
                    doc="Elementwise sign: -1, 0 or 1 (NaN for NaN).")
exp = _unary_ufunc("exp", lax.exp_p, doc="Elementwise e**x.")
exp2 = _unary_ufunc("exp2", lax.exp2_p, doc="Elementwise 2**x.")
expm1 = _unary_ufunc("expm1", lax.expm1_p, doc="Elementwise e**x - 1, accurate near 0.")
log = _unary_ufunc("log", lax.log_p, doc="Elementwise natural logarithm.")
log1p = _unary_ufunc("log1p", lax.log1p_p, doc="Elementwise log(1 + x), accurate near 0.")
sqrt = _unary_ufunc("sqrt", lax.sqrt_p, doc="Elementwise non-negative square root.")
cbrt = _unary_ufunc("cbrt", lax.cbrt_p, kinds="f", doc="Elementwise real cube root.")
sin = _unary_ufunc("sin", lax.sin_p, doc="Elementwise sine.")
cos = _unary_ufunc("cos", lax.cos_p, doc="Elementwise cosine.")
tan = _unary_ufunc("tan", lax.tan_p, doc="Elementwise tangent.")
arcsin = _unary_ufunc("arcsin", lax.asin_p, doc="Elementwise inverse sine.")
arccos = _unary_ufunc("arccos", lax.acos_p, doc="Elementwise inverse cosine.")
arctan = _unary_ufunc("arctan", lax.atan_p, doc="Elementwise inverse tangent.")
sinh = _unary_ufunc("sinh", lax.sinh_p, doc="Elementwise hyperbolic sine.")
cosh = _unary_ufunc("cosh", lax.cosh_p, doc="Elementwise hyperbolic cosine.")
tanh = _unary_ufunc("tanh", lax.tanh_p, doc="Elementwise hyperbolic tangent.")
arcsinh = _unary_ufunc("arcsinh", lax.asinh_p, doc="Elementwise inverse hyperbolic sine.")
arccosh = _unary_ufunc("arccosh", lax.acosh_p, doc="Elementwise inverse hyperbolic cosine.")
arctanh = _unary_ufunc("arctanh", lax.atanh_p, doc="Elementwise inverse hyperbolic tangent.")


def positive(x, /):
    """Elementwise +x (the array itself)."""
    return unary_operand("positive", x, "iufc", False)


def abs(x, /):
    """Elementwise absolute value (complex: the modulus, a real array; bool: unchanged)."""
    if type(x) is Array and dtypes.kind(x._value.dtype) in "if":
        return lax.abs_p.bind(x)
    x = unary_operand("abs", x, "biufc", False)
    if dtypes.kind(dtype_of(x)) in "bu":
        return x
    return lax.abs(x)


absolute = abs


def fabs(x, /):
    """Elementwise absolute value as a float."""
    return abs(unary_operand("fabs", x, "f", True))


def square(x, /):
    """Elementwise x * x."""
    x = unary_operand("square", x, "iufc", False)
    return lax.integer_pow(x, 2)


def reciprocal(x, /):
    """Elementwise 1 / x (integer operands use integer division, as NumPy)."""
    x = unary_operand("reciprocal", x, "iufc", False)
    return lax.div(_scalar_like(x, 1), x)


def log2(x, /):
    """Elementwise base-2 logarithm."""
    x = unary_operand("log2", x, "fc", True)
    return lax.div(lax.log(x), _scalar_like(x, np.log(2)))


def log10(x, /):
    """Elementwise base-10 logarithm."""
    x = unary_operand("log10", x, "fc", True)
    return lax.div(lax.log(x), _scalar_like(x, np.log(10)))


def floor_divide(x1, x2, /):
    """Elementwise floor(x1 / x2) with NumPy's semantics (rounds toward -inf).

    Example:
        >>> fnp.floor_divide(fnp.array([-7, 7]), 2)
        Array([-4,  3], dtype=int32)
    """
    x1, x2 = promote("floor_divide", (x1, x2))
    k = dtypes.kind(dtype_of(x1))
    if k == "b":
        raise _kind_error("floor_divide", x1, "numeric (not bool)")
    if k == "u":
        return lax.div(x1, x2)
    zero = _scalar_like(x1, 0)
    if k == "i":
        q = lax.div(x1, x2)
        fix = lax.bitwise_and(lax.ne(lax.rem(x1, x2), zero),
                              lax.ne(lax.lt(x1, zero), lax.lt(x2, zero)))
        return select(fix, q, lax.sub(q, _scalar_like(q, 1)))
    # NumPy's npy_divmod: div = (x1 - fmod(x1, x2)) / x2, corrected to the floor; x1 / 0 as is
    mod = lax.rem(x1, x2)
    div = lax.div(lax.sub(x1, mod), x2)
    ind = lax.bitwise_and(lax.ne(mod, zero), lax.ne(lax.lt(x2, zero), lax.lt(mod, zero)))
    div = select(ind, div, lax.sub(div, _scalar_like(x1, 1)))
    floordiv = lax.floor(div)
    floordiv = select(lax.gt(lax.sub(div, floordiv), _scalar_like(x1, 0.5)), floordiv,
                      lax.add(floordiv, _scalar_like(x1, 1)))
    return select(lax.eq(x2, zero), floordiv, lax.div(x1, x2))


def remainder(x1, x2, /):
    """Elementwise remainder with the sign of the divisor (NumPy's `%`).

    Example:
        >>> fnp.remainder(fnp.array([-7, 7]), 3)
        Array([2, 1], dtype=int32)
    """
    x1, x2 = promote("remainder", (x1, x2))
    k = dtypes.kind(dtype_of(x1))
    if k == "b":
        raise _kind_error("remainder", x1, "numeric (not bool)")
    r = lax.rem(x1, x2)
    if k == "u":
        return r
    zero = _scalar_like(x1, 0)
    fix = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.lt(r, zero), lax.lt(x2, zero)))
    return select(fix, r, lax.add(r, x2))


mod = remainder


def fmod(x1, x2, /):
    """Elementwise C-style remainder (sign of the dividend)."""
    x1, x2 = promote("fmod", (x1, x2))
    return lax.rem(x1, x2)


def divmod(x1, x2, /):
    """`(floor_divide(x1, x2), remainder(x1, x2))`."""
    return floor_divide(x1, x2), remainder(x1, x2)


def power(x1, x2, /):
    """Elementwise x1 ** x2; a static Python int exponent uses repeated multiplication.

    Integer arrays raised to integer arrays use exact square-and-multiply; a negative
    integer exponent gives 0, except for the bases 1 and -1 (where NumPy raises).

    Example:
        >>> fnp.power(fnp.arange(4), 2)
        Array([0, 1, 4, 9], dtype=int32)
    """
    if type(x2) is int and not isinstance(x1, (bool, complex)):
        x1 = unary_operand("power", x1, "iufc", False)
        if x2 >= 0 or dtypes.kind(dtype_of(x1)) in "fc":
            return lax.integer_pow(x1, x2)
    exponent_weak = type(x2) in _PY_SCALARS or asarray_operand("power", x2).weak_type
    x1, x2 = promote("power", (x1, x2))
    k = dtypes.kind(dtype_of(x1))
    if k in "fc":  # (JAX: a float base to an integer array power is lax.pow(x1, x2), strong)
        out = lax.pow(x1, x2)
        return out if exponent_weak else convert(out, dtype_of(out), False)
    if k == "b":
        raise _kind_error("power", x1, "numeric (not bool)")
    return _int_pow(x1, x2)


def _int_pow(x, y):
    # square-and-multiply over the bits of y (negative exponents give 0 except for +-1 bases)
    bits = dtype_of(y).itemsize * 8
    one = _scalar_like(x, 1)
    acc = full_like_of(x, 1)
    base, e = x, y
    for _ in range(bits):
        bit = lax.ne(lax.bitwise_and(e, _scalar_like(e, 1)), _scalar_like(e, 0))
        acc = select(bit, acc, lax.mul(acc, base))
        base = lax.mul(base, base)
        e = lax.shift_right_logical(e, _scalar_like(e, 1))
    neg = lax.lt(y, _scalar_like(y, 0))
    neg_val = select(lax.eq(x, one), _scalar_like(x, 0), one)
    if dtypes.kind(dtype_of(x)) == "i":
        odd = lax.ne(lax.bitwise_and(y, _scalar_like(y, 1)), _scalar_like(y, 0))
        minus_one = select(odd, one, _scalar_like(x, -1))
        neg_val = select(lax.eq(x, _scalar_like(x, -1)), neg_val, minus_one)
    return select(neg, acc, neg_val)


pow = power


def float_power(x1, x2, /):
    """Elementwise x1 ** x2 after promoting both to an inexact dtype (as JAX's: float16 and
    bfloat16 stay as they are, int32 becomes float32 even with x64; NumPy computes in
    float64).

    Example:
        >>> fnp.float_power(fnp.arange(3), 2)
        Array([0., 1., 4.], dtype=float32)
    """
    x1, x2 = promote("float_power", (x1, x2), inexact=True)
    return lax.pow(x1, x2)


# --- rounding ---------------------------------------------------------------------------------

def floor(x, /):
    """Elementwise floor (integer and bool inputs are returned unchanged, as in JAX)."""
    if type(x) is Array and dtypes.kind(x._value.dtype) == "f":
        return lax.floor_p.bind(x)
    x = unary_operand("floor", x, "biuf", False)
    return lax.floor(x) if dtypes.kind(dtype_of(x)) == "f" else x


def ceil(x, /):
    """Elementwise ceiling (integer and bool inputs are returned unchanged)."""
    x = unary_operand("ceil", x, "biuf", False)
    return lax.ceil(x) if dtypes.kind(dtype_of(x)) == "f" else x


def trunc(x):
    """Elementwise rounding toward zero (integer and bool inputs unchanged)."""
    x = unary_operand("trunc", x, "biuf", False)
    if dtypes.kind(dtype_of(x)) != "f":
        return x
    return select(lax.lt(x, _scalar_like(x, 0)), lax.floor(x), lax.ceil(x))


fix = trunc


def rint(x, /):
    """Elementwise rounding to the nearest integer, halves to even; a complex input has both
    parts rounded (as in NumPy)."""
    x = unary_operand("rint", x, "biufc", False)
    k = dtypes.kind(dtype_of(x))
    if k == "c":
        return lax.complex(rint(lax.real(x)), rint(lax.imag(x)))
    if k != "f":  # (JAX: the default float, not `dtypes.to_inexact`)
        return lax.convert_element_type(x, dtypes.default_float(), weak_type=x.weak_type)
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


def round(a, decimals=0, out=None):
    """Round to `decimals` decimal places, halves to even (NumPy's `around`).

    Example:
        >>> fnp.round(fnp.array([0.5, 1.5, 1.234]), 1)
        Array([0.5, 1.5, 1.2], dtype=float32)
    """
    check_no_out("round", out)
    a = unary_operand("round", a, "biufc", False)
    k = dtypes.kind(dtype_of(a))
    decimals = int(decimals)
    if k == "b" or (k in "iu" and decimals >= 0):
        return a
    if k in "iu":
        return _round_int(a, _scalar_like(a, 10 ** -decimals))
    if k == "c":
        return lax.complex(round(lax.real(a), decimals), round(lax.imag(a), decimals))
    rnd = lax.RoundingMethod.TO_NEAREST_EVEN
    if decimals == 0:
        return lax.round(a, rnd)
    f = _scalar_like(a, 10.0 ** decimals)
    return lax.div(lax.round(lax.mul(a, f), rnd), f)


def _round_int(a, f):
    # round to a multiple of f, halves to even, by floor division of a + f/2
    q = floor_divide(a, f)
    r = lax.sub(a, lax.mul(q, f))
    half = lax.div(f, _scalar_like(f, 2))
    up = lax.bitwise_or(lax.gt(r, half), lax.bitwise_and(
        lax.eq(r, half), lax.ne(lax.rem(q, _scalar_like(q, 2)), _scalar_like(q, 0))))
    return lax.mul(select(up, q, lax.add(q, _scalar_like(q, 1))), f)


around = round


def clip(a, a_min=None, a_max=None):
    """Clip `a` to `[a_min, a_max]` (either may be None) with broadcasting.

    Example:
        >>> fnp.clip(fnp.arange(5), 1, 3)
        Array([1, 1, 2, 3, 3], dtype=int32)
    """
    if a_min is None and a_max is None:
        raise errors.op_error("clip", "at most one of a_min and a_max may be None",
                              cls=errors.FuncgradValueError)
    if any(b is not None and complex_operand("clip", b)[1] for b in (a, a_min, a_max)):
        raise errors.op_error("clip", "complex values have no order and cannot be clipped",
                              cls=errors.FuncgradValueError,
                              hint="clip the real and imaginary parts, or the modulus")
    if a_min is not None:
        a = maximum(a, a_min)
    if a_max is not None:
        a = minimum(a, a_max)
    return a


# --- float helpers -----------------------------------------------------------------------------

def fmax(x1, x2):
    """Elementwise maximum ignoring NaNs (NaN only where both are NaN)."""
    x1, x2 = promote("fmax", (x1, x2))
    if dtypes.kind(dtype_of(x1)) not in "fc":
        return maximum(x1, x2)
    return select(lax.bitwise_or(lax.gt(x1, x2), lax.ne(x2, x2)), x2, x1)


def fmin(x1, x2):
    """Elementwise minimum ignoring NaNs (NaN only where both are NaN)."""
    x1, x2 = promote("fmin", (x1, x2))
    if dtypes.kind(dtype_of(x1)) not in "fc":
        return minimum(x1, x2)
    return select(lax.bitwise_or(lax.lt(x1, x2), lax.ne(x2, x2)), x2, x1)


def hypot(x1, x2, /):
    """Elementwise sqrt(x1**2 + x2**2) without overflow for large inputs; an infinite
    operand gives inf (also with a NaN), as in NumPy.

    The operands are scaled by s = max(|x1|, |x2|), held constant for derivatives (it
    cancels), so every derivative is sqrt's: the second one is right where |x1| == |x2|
    too (JAX's, through max and min, is 0 there). At (0, 0), where no gradient exists, it
    is 0 (the smallest subgradient; JAX's is 0.5, 0.5).

    Example:
        >>> fnp.hypot(3.0, 4.0)
        Array(5., dtype=float32, weak_type=True)
    """
    x1, x2 = promote("hypot", (x1, x2), inexact=True)
    a, b = lax.abs(x1), lax.abs(x2)
    s = lax.stop_gradient(lax.max(a, b))
    zero = lax.eq(s, _scalar_like(s, 0))
    safe_s = select(zero, s, _scalar_like(s, 1))
    ra, rb = lax.div(a, safe_s), lax.div(b, safe_s)  # one is 1: the sum is 1 + r * r
    sumsq = select(zero, lax.add(lax.mul(ra, ra), lax.mul(rb, rb)), _scalar_like(s, 1))
    out = select(zero, lax.mul(safe_s, lax.sqrt(sumsq)), s)  # (0, 0): 0, gradient 0
    inf = _scalar_like(s, np.inf)
    return select(lax.bitwise_or(lax.eq(a, inf), lax.eq(b, inf)), out, inf)


def logaddexp(x1, x2, /):
    """Elementwise log(exp(x1) + exp(x2)), computed stably.

    Example:
        >>> fnp.logaddexp(1000.0, 1000.0)
        Array(1000.6931, dtype=float32, weak_type=True)
    """
    x1, x2 = promote("logaddexp", (x1, x2), inexact=True)
    return _logaddexp(x1, x2)


def _logaddexp_impl(x1, x2):
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    finite = lax.log1p(lax.exp(lax.neg(lax.abs(delta))))
    return select(lax.ne(delta, delta), lax.add(amax, finite), lax.add(x1, x2))


def _logaddexp_jvp(primals, tangents):
    # d/dx1 = exp(x1 - out): smooth everywhere (0.5 at ties), unlike max + log1p(exp(-|d|)).
    x1, x2 = primals
    t1, t2 = tangents
    out = _logaddexp(x1, x2)  # the custom function itself, so higher orders stay smooth
    w1 = lax.exp(lax.sub(x1, out))
    w2 = lax.exp(lax.sub(x2, out))
    return out, lax.add(lax.mul(t1, w1), lax.mul(t2, w2))


_logaddexp = custom_jvp(_logaddexp_impl)
_logaddexp.defjvp(_logaddexp_jvp)


def logaddexp2(x1, x2, /):
    """Elementwise log2(2**x1 + 2**x2), computed stably."""
    x1, x2 = promote("logaddexp2", (x1, x2), inexact=True)
    ln2 = _scalar_like(x1, np.log(2))
    return lax.div(logaddexp(lax.mul(x1, ln2), lax.mul(x2, ln2)), ln2)


def _signbit(x):
    """True where float `x` has its sign bit set (negative values, -0.0 and -NaN)."""
    bits = lax.bitcast_convert_type(x, np.dtype(f"int{dtype_of(x).itemsize * 8}"))
    return lax.lt(bits, _scalar_like(bits, 0))


def copysign(x1, x2, /):
    """Elementwise |x1| with the sign of x2 (the sign of -0.0 counts)."""
    x1, x2 = promote("copysign", (x1, x2), inexact=True)
    a = lax.abs(x1)
    return select(_signbit(x2), a, lax.neg(a))


def heaviside(x1, x2, /):
    """Heaviside step: 0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0."""
    x1, x2 = promote("heaviside", (x1, x2), inexact=True)
    # JAX's constants (and so its result) are weak only for a weak rank-0 x1
    weak = x1.weak_type and not shape_of(x1)
    zero, one = (scalar_array(v, dtype_of(x1), weak) for v in (0, 1))
    at_zero = select(lax.ne(x1, x1), x2, x1)  # NaN stays NaN, as in NumPy
    pos = select(lax.gt(x1, zero), at_zero, one)
    return select(lax.lt(x1, zero), pos, zero)


def sinc(x, /):
    """Elementwise sin(pi x) / (pi x), with sinc(0) = 1 (and a finite gradient there)."""
    x = unary_operand("sinc", x, "fc", True)
    zero = _scalar_like(x, 0)
    is_zero = lax.eq(x, zero)
    safe = select(is_zero, x, _scalar_like(x, 1))
    pix = lax.mul(safe, _scalar_like(x, np.pi))
    return select(is_zero, lax.div(lax.sin(pix), pix), _scalar_like(x, 1))


def degrees(x, /):
    """Convert radians to degrees."""
    x = unary_operand("degrees", x, "f", True)
    return lax.mul(x, _scalar_like(x, 180.0 / np.pi))


def radians(x, /):
    """Convert degrees to radians."""
    x = unary_operand("radians", x, "f", True)
    return lax.mul(x, _scalar_like(x, np.pi / 180.0))


rad2deg, deg2rad = degrees, radians


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN by `nan` and +-inf by `posinf`/`neginf` (default: the dtype's max/min).

    Example:
        >>> fnp.nan_to_num(fnp.array([fnp.nan, fnp.inf, 1.0]))
        Array([0.0000000e+00, 3.4028235e+38, 1.0000000e+00], dtype=float32)
    """
    x = unary_operand("nan_to_num", x, "biufc", False)
    k = dtypes.kind(dtype_of(x))
    if k not in "fc":
        return x
    if k == "c":
        return lax.complex(nan_to_num(lax.real(x), nan=nan, posinf=posinf, neginf=neginf),
                           nan_to_num(lax.imag(x), nan=nan, posinf=posinf, neginf=neginf))
    info = np.finfo(dtype_of(x))
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    x = select(lax.ne(x, x), x, _scalar_like(x, nan))
    x = select(lax.eq(x, _scalar_like(x, np.inf)), x, _scalar_like(x, posinf))
    return select(lax.eq(x, _scalar_like(x, -np.inf)), x, _scalar_like(x, neginf))


# --- complex parts ------------------------------------------------------------------------------

def real(val, /):
    """The real part (the array itself for real dtypes)."""
    x = unary_operand("real", val, "biufc", False)
    return lax.real(x) if dtypes.kind(dtype_of(x)) == "c" else x


def imag(val, /):
    """The imaginary part (zeros for real dtypes)."""
    x = unary_operand("imag", val, "biufc", False)
    if dtypes.kind(dtype_of(x)) == "c":
        return lax.imag(x)
    return full_like_of(x, 0)


def conjugate(x, /):
    """The complex conjugate (the array itself for real dtypes)."""
    x = unary_operand("conjugate", x, "biufc", False)
    return lax.conj(x) if dtypes.kind(dtype_of(x)) == "c" else x


conj = conjugate


def iscomplex(x):
    """Elementwise: the imaginary part is nonzero (all False for real dtypes).

    Example:
        >>> fnp.iscomplex(fnp.array([1 + 1j, 2]))
        Array([ True, False], dtype=bool)
    """
    return lax.ne(imag(x), 0)


def angle(z, deg=False):
    """The argument (phase) of `z` in radians, or degrees with `deg=True`: `atan2(imag, real)`
    (0 or pi for real inputs), a real array.

    Example:
        >>> fnp.angle(fnp.array([1j, -1.0]))
        Array([1.5707964, 3.1415927], dtype=float32)
    """
    z = unary_operand("angle", z, "biufc", False)
    if dtypes.kind(dtype_of(z)) == "c":
        re, im = lax.real(z), lax.imag(z)
    else:
        re = z if dtypes.kind(dtype_of(z)) == "f" else lax.convert_element_type(
            z, dtypes.default_float(), weak_type=z.weak_type)  # (JAX: not `to_inexact`)
        im = full_like_of(re, 0)
    out = lax.atan2(im, re)
    return lax.mul(out, _scalar_like(out, 180 / np.pi)) if deg else out
