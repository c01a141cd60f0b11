"""Comparisons, logic, bitwise ops, NaN/inf tests, `where` and `isclose`.

Comparisons promote like arithmetic (JAX's lattice) and return bool arrays; logical ops
treat any nonzero value as True; bitwise ops take integers and bools.
"""

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Array
from funcgrad.numpy._util import (
    asarray_operand,
    broadcast_shapes,
    check_no_out,
    dtype_of,
    full_like_of,
    promote,
    promote2,
    select,
    shape_of,
)
from funcgrad.numpy.math import (
    _binary_ufunc,
    _scalar_like,
    _signbit,
    complex_operand,
    unary_operand,
)

_select_bind = lax.select_n_p.bind

__all__ = [
    "allclose", "array_equal", "array_equiv", "bitwise_and", "bitwise_count",
    "bitwise_invert", "bitwise_left_shift", "bitwise_not", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "equal", "greater", "greater_equal",
    "invert", "isclose", "iscomplexobj", "isfinite", "isinf", "isnan", "isneginf", "isposinf",
    "isreal", "isrealobj", "isscalar", "left_shift", "less", "less_equal", "logical_and",
    "logical_not", "logical_or", "logical_xor", "not_equal", "right_shift",
    "signbit", "where",
]

# --- comparisons --------------------------------------------------------------------------------

equal = _binary_ufunc("equal", lax.eq_p, kinds="biufc", doc="Elementwise x1 == x2 (bool).")
not_equal = _binary_ufunc("not_equal", lax.ne_p, kinds="biufc",
                          doc="Elementwise x1 != x2 (bool).")


def _ordering(name, prim, doc):
    """A NumPy ordering comparison; complex operands compare lexicographically by (real,
    imag), as in NumPy and jax.numpy."""
    real_ufunc = _binary_ufunc(name, prim, kinds="biuf")

    def ufunc(x1, x2, /):
        (x1, c1), (x2, c2) = complex_operand(name, x1), complex_operand(name, x2)
        if not (c1 or c2):
            return real_ufunc(x1, x2)
        x1, x2 = promote2(name, x1, x2)
        re1, re2 = lax.real(x1), lax.real(x2)
        return select(lax.eq(re1, re2), prim.bind(re1, re2),
                      prim.bind(lax.imag(x1), lax.imag(x2)))
    ufunc.__name__ = ufunc.__qualname__ = name
    ufunc.__doc__ = doc
    return ufunc


less = _ordering("less", lax.lt_p, "Elementwise x1 < x2 (bool).")
less_equal = _ordering("less_equal", lax.le_p, "Elementwise x1 <= x2 (bool).")
greater = _ordering("greater", lax.gt_p, "Elementwise x1 > x2 (bool).")
greater_equal = _ordering("greater_equal", lax.ge_p, "Elementwise x1 >= x2 (bool).")

# --- bitwise ------------------------------------------------------------------------------------

bitwise_and = _binary_ufunc("bitwise_and", lax.and_p, kinds="biu",
                            doc="Elementwise x1 & x2 of integers or bools.")
bitwise_or = _binary_ufunc("bitwise_or", lax.or_p, kinds="biu",
                           doc="Elementwise x1 | x2 of integers or bools.")
bitwise_xor = _binary_ufunc("bitwise_xor", lax.xor_p, kinds="biu",
                            doc="Elementwise x1 ^ x2 of integers or bools.")


def bitwise_not(x, /):
    """Elementwise ~x of integers or bools (logical not for bools)."""
    if type(x) is Array and dtypes.kind(x._value.dtype) in "biu":
        return lax.not_p.bind(x)
    return lax.bitwise_not(unary_operand("bitwise_not", x, "biu", False))


invert = bitwise_invert = bitwise_not


def left_shift(x1, x2, /):
    """Elementwise x1 << x2 of integers."""
    x1, x2 = promote("left_shift", (x1, x2))
    _check_int("left_shift", x1)
    return lax.shift_left(x1, x2)


def right_shift(x1, x2, /):
    """Elementwise x1 >> x2 (arithmetic for signed, logical for unsigned integers)."""
    x1, x2 = promote("right_shift", (x1, x2))
    _check_int("right_shift", x1)
    if dtypes.kind(dtype_of(x1)) == "u":
        return lax.shift_right_logical(x1, x2)
    return lax.shift_right_arithmetic(x1, x2)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


def bitwise_count(x, /):
    """The number of 1 bits in |x| (uint8 result, as NumPy)."""
    x = unary_operand("bitwise_count", x, "biu", False)
    if dtypes.kind(dtype_of(x)) == "i":
        x = lax.abs(x)
    return lax.convert_element_type(lax.population_count(x), np.uint8)


def _check_int(name, x):
    if dtypes.kind(dtype_of(x)) not in "iu":
        raise errors.op_error(name, f"does not support dtype {dtype_of(x)}; it takes integer "
                                    "operands")


# --- logical ------------------------------------------------------------------------------------

def _as_bool(name, x):
    if type(x) is bool:
        return Array(np.asarray(x), False)
    x = asarray_operand(name, x)
    if dtypes.kind(dtype_of(x)) == "b":
        return x
    return lax.ne(x, _scalar_like(x, 0))


def _logical(name, fn, doc):
    def ufunc(x1, x2, /):
        a, b = _as_bool(name, x1), _as_bool(name, x2)
        return fn(*promote(name, (a, b)))
    ufunc.__name__ = ufunc.__qualname__ = name
    ufunc.__doc__ = doc
    return ufunc


logical_and = _logical("logical_and", lax.bitwise_and, "Elementwise truth of x1 and x2.")
logical_or = _logical("logical_or", lax.bitwise_or, "Elementwise truth of x1 or x2.")
logical_xor = _logical("logical_xor", lax.bitwise_xor, "Elementwise truth of x1 xor x2.")


def logical_not(x, /):
    """Elementwise truth of not x."""
    return lax.bitwise_not(_as_bool("logical_not", x))


# --- NaN and inf tests ----------------------------------------------------------------------

def isnan(x, /):
    """Elementwise test for NaN (False for integers and bools)."""
    x = unary_operand("isnan", x, "biufc", False)
    if dtypes.kind(dtype_of(x)) not in "fc":
        return full_like_of(x, False, dtypes.bool_)
    return lax.ne(x, x)


def isinf(x, /):
    """Elementwise test for +-inf (False for integers and bools)."""
    x = unary_operand("isinf", x, "biufc", False)
    k = dtypes.kind(dtype_of(x))
    if k not in "fc":
        return full_like_of(x, False, dtypes.bool_)
    if k == "c":
        return lax.bitwise_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    return lax.eq(lax.abs(x), _scalar_like(x, np.inf))


def isposinf(x, /, out=None):
    """Elementwise test for +inf (`out` must be None, as in JAX)."""
    check_no_out("isposinf", out)
    x = unary_operand("isposinf", x, "biuf", False)
    if dtypes.kind(dtype_of(x)) != "f":
        return full_like_of(x, False, dtypes.bool_)
    return lax.eq(x, _scalar_like(x, np.inf))


def isneginf(x, /, out=None):
    """Elementwise test for -inf (`out` must be None, as in JAX)."""
    check_no_out("isneginf", out)
    x = unary_operand("isneginf", x, "biuf", False)
    if dtypes.kind(dtype_of(x)) != "f":
        return full_like_of(x, False, dtypes.bool_)
    return lax.eq(x, _scalar_like(x, -np.inf))


def isfinite(x, /):
    """Elementwise test for finite values (not NaN, not inf)."""
    x = unary_operand("isfinite", x, "biufc", False)
    k = dtypes.kind(dtype_of(x))
    if k not in "fc":
        return full_like_of(x, True, dtypes.bool_)
    if k == "c":
        return lax.bitwise_and(isfinite(lax.real(x)), isfinite(lax.imag(x)))
    return lax.is_finite(x)


def signbit(x, /):
    """Elementwise test for a set sign bit (True for -0.0 and negative values)."""
    x = unary_operand("signbit", x, "biuf", False)
    k = dtypes.kind(dtype_of(x))
    if k in "bu":
        return full_like_of(x, False, dtypes.bool_)
    if k == "i":
        return lax.lt(x, _scalar_like(x, 0))
    return _signbit(x)


def isreal(x):
    """Elementwise test for a zero imaginary part."""
    x = unary_operand("isreal", x, "biufc", False)
    if dtypes.kind(dtype_of(x)) != "c":
        return full_like_of(x, True, dtypes.bool_)
    return lax.eq(lax.imag(x), _scalar_like(lax.imag(x), 0))


def isrealobj(x):
    """True unless `x` has a complex dtype."""
    return dtypes.kind(dtype_of(asarray_operand("isrealobj", x))) != "c"


def iscomplexobj(x):
    """True when `x` has a complex dtype."""
    return not isrealobj(x)


def isscalar(element):
    """True for Python/NumPy scalars and rank-0 arrays (as `jnp.isscalar`)."""
    if isinstance(element, (bool, int, float, complex, np.generic)):
        return True
    from funcgrad.core import ArrayBase
    return isinstance(element, ArrayBase) and shape_of(element) == ()


# --- where ------------------------------------------------------------------------------------

def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """Elementwise `x` where `condition` else `y`, with promotion and broadcasting.

    Args:
        condition: array-like; nonzero values count as True.
        x, y: values to choose from (arrays or Python scalars, promoted together).
        size, fill_value: only for the one-argument form, as in `nonzero`.

    Returns:
        The selected values; with only `condition`, `nonzero(condition)`, which needs a
        concrete condition (or a static `size`).

    Example:
        >>> fnp.where(fnp.array([True, False]), 1.0, fnp.zeros(2))
        Array([1., 0.], dtype=float32)
    """
    if type(condition) is Array and type(x) is Array and type(y) is Array:
        vc, vx, vy = condition._value, x._value, y._value
        if (dtypes.kind(vc.dtype) == "b" and vx.dtype == vy.dtype
                and vc.shape == vx.shape == vy.shape):
            return _select_bind(condition, y, x)
    if x is None and y is None:
        from funcgrad.numpy.searching import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise errors.op_error("where", "takes either 1 or 3 arguments (condition, x, y)",
                              cls=errors.FuncgradTypeError)
    cond = _as_bool("where", condition)
    x, y = promote("where", (x, y), broadcast=False)
    return select(cond, y, x)


# --- closeness ----------------------------------------------------------------------------------

def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |a - b| <= atol + rtol * |b|, with NumPy's handling of inf and NaN.

    Example:
        >>> fnp.isclose(fnp.array([1.0, fnp.inf]), fnp.array([1.0 + 1e-9, fnp.inf]))
        Array([ True,  True], dtype=bool)
    """
    a, b = promote("isclose", (a, b), inexact=True)
    dt = dtype_of(a)
    rt, at = Array(np.asarray(rtol, dt), True), Array(np.asarray(atol, dt), True)
    if dtypes.kind(dt) == "c":
        rt, at = lax.real(rt), lax.real(at)
    out = lax.le(lax.abs(lax.sub(a, b)), lax.add(at, lax.mul(rt, lax.abs(b))))
    a_inf, b_inf = isinf(a), isinf(b)
    out = lax.bitwise_and(out, lax.bitwise_not(lax.bitwise_or(a_inf, b_inf)))
    out = lax.bitwise_or(out, lax.bitwise_and(lax.bitwise_and(a_inf, b_inf), lax.eq(a, b)))
    if equal_nan:
        out = lax.bitwise_or(out, lax.bitwise_and(isnan(a), isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element of `a` and `b` is close (a bool array of shape ())."""
    from funcgrad.numpy.reductions import all as all_
    return all_(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    """True when `a1` and `a2` have the same shape and elements (a bool array of shape ())."""
    from funcgrad.numpy.reductions import all as all_
    a1, a2 = asarray_operand("array_equal", a1), asarray_operand("array_equal", a2)
    if shape_of(a1) != shape_of(a2):
        return Array(np.asarray(False), False)
    eq = equal(a1, a2)
    if equal_nan:
        eq = lax.bitwise_or(eq, lax.bitwise_and(isnan(a1), isnan(a2)))
    return all_(eq)


def array_equiv(a1, a2):
    """True when `a1` and `a2` broadcast to each other and are elementwise equal."""
    from funcgrad.numpy.reductions import all as all_
    a1, a2 = asarray_operand("array_equiv", a1), asarray_operand("array_equiv", a2)
    try:
        broadcast_shapes("array_equiv", shape_of(a1), shape_of(a2))
    except errors.FuncgradValueError:
        return Array(np.asarray(False), False)
    return all_(equal(a1, a2))

