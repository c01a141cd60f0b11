"""Special functions: erf, erfc, erf_inv, lgamma, digamma, polygamma.

Split from `elementwise.py`; each primitive is one block as there. Their eager
implementations are vectorized numpy or Python's `math` per element (scipy is not a
dependency).
"""

import functools
import math

import numpy as np

from funcgrad import errors
from funcgrad.interpreters.ad import defjvp
from funcgrad.lax.elementwise import (
    _check_params,
    _const,
    exp,
    mul,
    neg,
)
from funcgrad.lax.utils import unop

__all__ = [
    "digamma", "digamma_p", "erf", "erf_inv", "erf_inv_p", "erf_p", "erfc", "erfc_p", "lgamma",
    "lgamma_p", "polygamma", "polygamma_p",
]


# --- special functions ------------------------------------------------------------------------
def _vectorize(fn):
    """A numpy function applying the float64 scalar function `fn` elementwise."""
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda x: np.asarray(ufunc(np.asarray(x, np.float64)), np.float64)


def _special(fn):
    """A special function impl, run without numpy warnings and rounded to x's dtype."""
    @functools.wraps(fn)
    def impl(x, **params):
        x = np.asarray(x)  # a compiled program may pass a literal as a Python scalar
        with np.errstate(all="ignore"):
            return np.asarray(fn(x, **params), x.dtype)
    return impl


_erf64, _erfc64 = _vectorize(math.erf), _vectorize(math.erfc)


def erf(x):
    """Elementwise error function 2/sqrt(pi) * integral_0^x exp(-t**2) dt."""
    return erf_p.bind(x)


erf_p = unop("erf", _special(_erf64), kinds="f")
defjvp(erf_p, lambda t, x, out: mul(t, mul(_const(x, 2 / math.sqrt(math.pi)),
                                           exp(neg(mul(x, x))))))


def erfc(x):
    """Elementwise complementary error function 1 - erf(x), accurate for large x."""
    return erfc_p.bind(x)


erfc_p = unop("erfc", _special(_erfc64), kinds="f")
defjvp(erfc_p, lambda t, x, out: mul(t, mul(_const(x, -2 / math.sqrt(math.pi)),
                                            exp(neg(mul(x, x))))))


def erf_inv(x):
    """Elementwise inverse error function on [-1, 1] (+-inf at +-1, NaN outside)."""
    return erf_inv_p.bind(x)


# Giles, "Approximating the erfinv function" (GPU Gems 2012), single precision, as XLA uses
# for float32 (so funcgrad.random.normal tracks JAX); float64 refines it by Newton steps.
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erf_inv_giles(y, dt):
    y = np.asarray(y, dt)
    w = -np.log1p(-y * y)  # +inf at |y| = 1, NaN beyond
    p = np.where(w < 5, np.polyval(np.asarray(_GILES_CENTRAL, dt), w - dt.type(2.5)),
                 np.polyval(np.asarray(_GILES_TAIL, dt), np.sqrt(w) - dt.type(3)))
    return np.where(np.abs(y) == 1, y * np.inf, y * p)


def _erf_inv_newton(y):
    a = np.abs(np.asarray(y, np.float64)).ravel()
    x = np.abs(_erf_inv_giles(a, np.dtype(np.float64)))
    tail, ok = a >= 0.5, np.isfinite(x)
    mid, tail = ok & ~tail, ok & tail
    log1m = np.log1p(-a[tail])  # 1 - a is exact for a >= 0.5
    for _ in range(4):  # quadratic convergence from a ~1e-7 start
        d = 2 / math.sqrt(math.pi) * np.exp(-x * x)
        x[mid] -= (_erf64(x[mid]) - a[mid]) / d[mid]
        c = _erfc64(x[tail])  # in the tail, on log(erfc(x)) = log(1 - a): nearly linear
        x[tail] -= (np.log(c) - log1m) * c / -d[tail]
    return np.copysign(x.reshape(np.shape(y)), y)


def _erf_inv_impl(y):
    if y.dtype.itemsize < 8:
        return _erf_inv_giles(y, np.dtype(np.float32))
    return _erf_inv_newton(y)


erf_inv_p = unop("erf_inv", _special(_erf_inv_impl), kinds="f")
defjvp(erf_inv_p, lambda t, x, out: mul(t, mul(_const(x, math.sqrt(math.pi) / 2),
                                               exp(mul(out, out)))))


def _lgamma1(v):
    try:
        return math.lgamma(v)
    except ValueError:  # the poles 0, -1, -2, ...
        return math.inf


def lgamma(x):
    """Elementwise log |Gamma(x)| (+inf at the poles 0, -1, -2, ...)."""
    return lgamma_p.bind(x)


lgamma_p = unop("lgamma", _special(_vectorize(_lgamma1)), kinds="f")
defjvp(lgamma_p, lambda t, x, out: mul(t, digamma(x)))


def digamma(x):
    """Elementwise digamma psi(x) = d/dx lgamma(x) (NaN at the poles, as in XLA)."""
    return digamma_p.bind(x)


def _digamma_impl(x):
    v = np.asarray(x, np.float64)
    refl = v < 0.5  # psi(x) = psi(1 - x) - pi cot(pi x)
    z = np.where(refl, 1 - v, v)
    acc = np.zeros_like(z)
    for _ in range(10):  # psi(z) = psi(z + 1) - 1/z until z >= 10
        small = z < 10
        acc -= np.where(small, 1 / z, 0)
        z = np.where(small, z + 1, z)
    iz2 = 1 / (z * z)  # asymptotic series with Bernoulli numbers B2..B14
    res = np.log(z) - 0.5 / z - iz2 * (1 / 12 - iz2 * (1 / 120 - iz2 * (1 / 252 - iz2 * (
        1 / 240 - iz2 * (1 / 132 - iz2 * (691 / 32760 - iz2 / 12))))))
    res = res + acc
    res = np.where(refl, res - np.pi / np.tan(np.pi * (v - np.rint(v))), res)
    return np.where((v <= 0) & (v == np.floor(v)), np.nan, res)


digamma_p = unop("digamma", _special(_digamma_impl), kinds="f")
defjvp(digamma_p, lambda t, x, out: mul(t, polygamma(1, x)))


def polygamma(m, x):
    """Elementwise m-th derivative of digamma, for m >= 1.

    Unlike JAX, `m` must be a concrete integer (a Python int or a concrete array).
    """
    return polygamma_p.bind(x, m=int(m))


_B2K = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)


def _cot_derivative(m, c):
    """The m-th derivative of cot, as a polynomial in c = cot(u) (cot' = -(1 + cot**2))."""
    p = np.polynomial.Polynomial([0, 1])
    for _ in range(m):
        p = p.deriv() * np.polynomial.Polynomial([-1, 0, -1])
    return p(c)


def _polygamma_impl(x, *, m):
    v = np.asarray(x, np.float64)
    refl = v < 0.5  # psi_m(x) = (-1)^m psi_m(1 - x) - pi^(m+1) cot^(m)(pi x)
    z = np.where(refl, 1 - v, v)
    sgn, fact = (-1) ** (m + 1), math.factorial(m)
    acc = np.zeros_like(z)
    for _ in range(20):  # psi_m(z) = psi_m(z + 1) + (-1)^(m+1) m! / z^(m+1) until z >= 20
        small = z < 20
        acc += np.where(small, sgn * fact / z ** (m + 1), 0)
        z = np.where(small, z + 1, z)
    res = math.factorial(m - 1) / z ** m + fact / (2 * z ** (m + 1))
    for k, b in enumerate(_B2K, 1):
        res = res + b * math.factorial(2 * k + m - 1) / math.factorial(2 * k) / z ** (2 * k + m)
    res = sgn * res + acc
    cot = 1 / np.tan(np.pi * (v - np.rint(v)))
    res = np.where(refl, (-1) ** m * res - np.pi ** (m + 1) * _cot_derivative(m, cot), res)
    return np.where((v <= 0) & (v == np.floor(v)), np.nan, res)


def _polygamma_check(x, *, m):
    if not 1 <= m <= 170:  # beyond 170, m! overflows float64 (and the series with it)
        raise errors.op_error("polygamma", f"m must be in [1, 170] (use digamma for m=0), "
                              f"got {m}", cls=errors.FuncgradValueError)


# Not fusible: no backend has an expression for its series (a CUDA kernel would fall back).
polygamma_p = unop("polygamma", _special(_polygamma_impl), kinds="f", fusible=False)
_check_params(polygamma_p, _polygamma_check)
defjvp(polygamma_p, lambda t, x, out, m: mul(t, polygamma(m + 1, x)))
