"""Number-theoretic and floating-point elementwise functions of funcgrad.numpy: `gcd`, `lcm`,
`ldexp`, `frexp`, `modf`, `spacing`, `nextafter`, `i0`.

Compositions of lax elementwise ops (`gcd` iterates Euclid's step in a `while_loop`, so it
traces and batches); `frexp` and `ldexp` split and scale by powers of two exactly, so the
mantissa's derivative is that of x * 2**-e. Imports sibling numpy modules and lax.
"""

import numpy as np

from funcgrad import errors, lax
from funcgrad.numpy._util import dtype_of, promote, shape_of
from funcgrad.numpy.logic import isfinite, where
from funcgrad.numpy.math import abs as abs_
from funcgrad.numpy.math import copysign, exp, floor_divide, multiply, subtract, trunc

__all__ = ["frexp", "gcd", "i0", "lcm", "ldexp", "modf", "nextafter", "spacing"]


def _integers(name, x1, x2):
    a, b = promote(name, [x1, x2])
    if dtype_of(a).kind not in "iub":
        raise errors.op_error(name, f"needs integer arguments, got {dtype_of(a)}",
                              cls=errors.FuncgradTypeError)
    return a, b


def gcd(x1, x2):
    """Elementwise greatest common divisor of integers (non-negative; gcd(0, 0) = 0).

    Example:
        >>> fnp.gcd(fnp.array([12, 7]), fnp.array([18, 0]))
        Array([6, 7], dtype=int32)
    """
    a, b = _integers("gcd", x1, x2)
    a, b = abs_(a), abs_(b)

    def cond(ab):  # Euclid's step until every divisor is 0
        return lax.reduce_or(lax.ne(ab[1], lax.full_like(ab[1], 0)).reshape(-1), (0,))

    def body(ab):
        x, y = ab
        nz = y != 0
        safe = where(nz, y, 1)
        return where(nz, y, x), where(nz, lax.rem(x, safe), y)
    if not shape_of(a):
        cond = lambda ab: ab[1] != 0  # noqa: E731
    return lax.while_loop(cond, body, (a, b))[0]


def lcm(x1, x2):
    """Elementwise least common multiple of integers (0 if either is 0).

    Example:
        >>> fnp.lcm(fnp.array([4, 6]), fnp.array([6, 0]))
        Array([12,  0], dtype=int32)
    """
    a, b = _integers("lcm", x1, x2)
    g = gcd(a, b)
    return where(g == 0, 0, abs_(multiply(a, floor_divide(b, where(g == 0, 1, g)))))


def ldexp(x1, x2, /):
    """Elementwise x1 * 2**x2 (x2 integer), exact: the power is applied in two halves, so
    a large exponent meeting a small mantissa does not overflow on the way.

    Example:
        >>> fnp.ldexp(fnp.array([1.5, 3.0]), fnp.array([2, -1]))
        Array([6. , 1.5], dtype=float32)
    """
    (x,) = promote("ldexp", [x1], inexact=True, broadcast=False)
    (e,) = promote("ldexp", [x2], broadcast=False)
    if dtype_of(e).kind not in "iub":
        raise errors.op_error("ldexp", f"the exponent must be an integer, got {dtype_of(e)}",
                              cls=errors.FuncgradTypeError)
    e = e.astype(np.int32)
    half = floor_divide(e, 2)
    two = np.asarray(2.0, dtype_of(x))
    return multiply(multiply(x, lax.pow(two, half.astype(dtype_of(x)))),
                    lax.pow(two, subtract(e, half).astype(dtype_of(x))))


def frexp(x, /):
    """`(mantissa, exponent)` with x = mantissa * 2**exponent, 0.5 <= |mantissa| < 1
    (0 and non-finite x give (x, 0)).

    Example:
        >>> fnp.frexp(fnp.array([8.0, -0.75]))
        (Array([ 0.5 , -0.75], dtype=float32), Array([4, 0], dtype=int32))
    """
    (x,) = promote("frexp", [x], inexact=True, broadcast=False)
    if dtype_of(x).kind == "c":
        raise errors.op_error("frexp", "complex input is not supported",
                              cls=errors.FuncgradTypeError)
    info = np.finfo(dtype_of(x))
    ut = np.dtype(f"u{dtype_of(x).itemsize}")
    nm = info.nmant
    sub = abs_(x) < info.tiny  # subnormal (or zero): scale into the normal range first
    scaled = where(sub, multiply(x, float(2.0 ** (nm + 1))), x)
    bits = lax.bitcast_convert_type(lax.stop_gradient(scaled), ut)
    field = lax.shift_right_logical(bits, lax.full_like(bits, nm))
    field = lax.bitwise_and(field, lax.full_like(field, (1 << (8 * dtype_of(x).itemsize - 1
                                                                 - nm)) - 1))
    e = field.astype(np.int32) - np.int32(-info.minexp)  # (the field of 0.5 is -minexp)
    e = where(sub, e - np.int32(nm + 1), e)
    ok = isfinite(x) & (x != 0)
    e = where(ok, e, 0)
    return where(ok, ldexp(x, -e), x), e


def modf(x, /, out=None):
    """`(fractional, integral)` parts of x, both with x's sign.

    Example:
        >>> fnp.modf(fnp.array([2.5, -1.25]))
        (Array([ 0.5 , -0.25], dtype=float32), Array([ 2., -1.], dtype=float32))
    """
    if out is not None:
        raise errors.op_error("modf", "the out argument is not supported (arrays are "
                              "immutable)", cls=errors.FuncgradValueError)
    (x,) = promote("modf", [x], inexact=True, broadcast=False)
    whole = trunc(x)
    frac = where(abs_(x) == np.inf, copysign(0.0, x), subtract(x, whole))
    return frac, whole


def nextafter(x, y, /):
    """Elementwise the next float after x in the direction of y.

    Example:
        >>> fnp.nextafter(fnp.array(1.0), 2.0) > 1.0
        Array(True, dtype=bool)
    """
    x, y = promote("nextafter", [x, y], inexact=True)
    return lax.nextafter(x, y)


def spacing(x, /):
    """Elementwise distance from x to the next float away from zero (negative for negative
    x), as NumPy.

    Example:
        >>> fnp.spacing(fnp.array(1.0)) == fnp.finfo(fnp.float32).eps
        Array(True, dtype=bool)
    """
    (x,) = promote("spacing", [x], inexact=True, broadcast=False)
    x = lax.stop_gradient(x)  # piecewise constant: its derivative is 0 (where it exists)
    away = copysign(np.inf, x).astype(dtype_of(x))
    return subtract(lax.nextafter(x, away), x)


def i0(x):
    """The modified Bessel function of the first kind of order 0 (its derivative is I1).

    Example:
        >>> fnp.i0(fnp.array(0.0))
        Array(1., dtype=float32)
    """
    (x,) = promote("i0", [x], inexact=True, broadcast=False)
    if dtype_of(x).kind == "c":
        raise errors.op_error("i0", "complex input is not supported",
                              cls=errors.FuncgradTypeError)
    return multiply(exp(abs_(x)), lax.bessel_i0e(x))

