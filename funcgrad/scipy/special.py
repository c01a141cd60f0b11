"""`funcgrad.scipy.special`: SciPy's special functions on funcgrad arrays, as `jax.scipy.special`.

One home per concept: `logsumexp`, `softmax`, `log_softmax` and `expit` are the very functions
of `funcgrad.nn`; `erf`, `erfc`, `erfinv`, `gammaln`, `digamma`, `polygamma` are the lax
primitives (with their derivatives). The rest is written with `funcgrad.numpy`. Imports lax,
numpy, nn.functions and custom_derivatives.
"""

import math

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.custom_derivatives import custom_jvp
from funcgrad.nn.functions import log_softmax, logsumexp, softmax
from funcgrad.nn.functions import sigmoid as expit

__all__ = [
    "betaln", "digamma", "entr", "erf", "erfc", "erfinv", "expit", "gamma", "gammaln",
    "log_ndtr", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri",
    "polygamma", "softmax", "xlog1py", "xlogy",
]


def _float(*xs):
    """Promote to a common float dtype (ints become the default float), as JAX does."""
    xs = fnp.broadcast_arrays(*[fnp.asarray(x) for x in xs]) if len(xs) > 1 else [
        fnp.asarray(xs[0])]
    dt = fnp.result_type(*xs, 1.0)
    return [x.astype(dt) for x in xs]


def erf(x):
    """The error function 2/sqrt(pi) * integral_0^x exp(-t**2) dt.

    Example:
        >>> erf(0.0)
        Array(0., dtype=float32)
    """
    return lax.erf(*_float(x))


def erfc(x):
    """The complementary error function 1 - erf(x), accurate for large x.

    Example:
        >>> erfc(0.0)
        Array(1., dtype=float32)
    """
    return lax.erfc(*_float(x))


def erfinv(x):
    """The inverse of `erf` on [-1, 1] (+-inf at +-1, NaN outside).

    Example:
        >>> erfinv(0.0)
        Array(0., dtype=float32)
    """
    return lax.erf_inv(*_float(x))


def gammaln(x):
    """log |Gamma(x)|; its derivative is `digamma`.

    Example:
        >>> gammaln(1.0)
        Array(0., dtype=float32)
    """
    return lax.lgamma(*_float(x))


def gamma(x):
    """Gamma(x), as sign * exp(gammaln(x)) (negative between the poles where it is).

    Example:
        >>> gamma(5.0)
        Array(24., dtype=float32)
    """
    x, = _float(x)
    sign = fnp.where((x > 0) | (fnp.floor(x) % 2 == 0), 1.0, -1.0).astype(x.dtype)
    return sign * fnp.exp(lax.lgamma(x))


def digamma(x):
    """psi(x) = d/dx gammaln(x); its derivative is `polygamma(1, x)`.

    Example:
        >>> digamma(1.0)  # minus the Euler-Mascheroni constant
        Array(-0.5772157, dtype=float32)
    """
    return lax.digamma(*_float(x))


def polygamma(n, x):
    """The n-th derivative of digamma (n a concrete integer >= 1; 0 gives digamma).

    Example:
        >>> polygamma(1, 1.0)  # pi**2 / 6
        Array(1.644934, dtype=float32)
    """
    if int(n) == 0:
        return digamma(x)
    return lax.polygamma(int(n), *_float(x))


def betaln(a, b):
    """log |B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b).

    Example:
        >>> betaln(1.0, 1.0)
        Array(0., dtype=float32)
    """
    a, b = _float(a, b)
    return lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension `d` (a Python int).

    Example:
        >>> multigammaln(1.0, 1)
        Array(0., dtype=float32)
    """
    a, = _float(a)
    d = int(d)
    terms = sum(lax.lgamma(a - 0.5 * j) for j in range(d))
    return terms + 0.25 * d * (d - 1) * math.log(math.pi)


def logit(x):
    """log(x / (1 - x)), the inverse of `expit`.

    Example:
        >>> logit(0.5)
        Array(0., dtype=float32)
    """
    x, = _float(x)
    return fnp.log(x) - fnp.log1p(-x)


def _xlogy_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    out = xlogy(x, y)
    return out, tx * fnp.where(x == 0, 0.0, fnp.log(y)) + ty * _safe_div(x, y)


def _safe_div(x, y):
    """x / y, and 0 where x == 0 (whatever y is), as in JAX's xlogy derivative."""
    return fnp.where(x == 0, 0.0, x / fnp.where(x == 0, 1.0, y))


@custom_jvp
def _xlogy(x, y):
    return fnp.where(x == 0, 0.0, x * fnp.log(fnp.where(x == 0, 1.0, y)))


_xlogy.defjvp(_xlogy_jvp)


def xlogy(x, y):
    """x * log(y), and 0 where x == 0 (even for y == 0), with JAX's derivatives.

    Example:
        >>> xlogy(0.0, 0.0)
        Array(0., dtype=float32)
    """
    return _xlogy(*_float(x, y))


def _xlog1py_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    out = xlog1py(x, y)
    return out, tx * fnp.where(x == 0, 0.0, fnp.log1p(y)) + ty * _safe_div(x, 1.0 + y)


@custom_jvp
def _xlog1py(x, y):
    return fnp.where(x == 0, 0.0, x * fnp.log1p(fnp.where(x == 0, 0.0, y)))


_xlog1py.defjvp(_xlog1py_jvp)


def xlog1py(x, y):
    """x * log1p(y), and 0 where x == 0 (even for y == -1), with JAX's derivatives.

    Example:
        >>> xlog1py(0.0, -1.0)
        Array(0., dtype=float32)
    """
    return _xlog1py(*_float(x, y))


def entr(x):
    """The elementwise entropy -x log(x): 0 at 0, -inf for x < 0.

    Example:
        >>> entr(1.0)
        Array(-0., dtype=float32)
    """
    x, = _float(x)
    return fnp.where(x < 0, -fnp.inf, -xlogy(x, x))


_SQRT1_2 = 1 / math.sqrt(2)


def ndtr(x):
    """The standard normal CDF, 0.5 * erfc(-x / sqrt(2)).

    Example:
        >>> ndtr(0.0)
        Array(0.5, dtype=float32)
    """
    x, = _float(x)
    return 0.5 * lax.erfc(-x * _SQRT1_2)


def log_ndtr(x):
    """log(ndtr(x)), finite far into the left tail (an asymptotic series below -10).

    Example:
        >>> log_ndtr(-40.0)
        Array(-804.6084, dtype=float32)
    """
    x, = _float(x)
    lower = -10.0
    pos = fnp.where(x > 0, x, 1.0)  # unused branches get safe inputs (no NaN gradients)
    mid = fnp.where(x > 0, fnp.log1p(-ndtr(-pos)), fnp.log(ndtr(fnp.maximum(x, lower))))
    t = fnp.minimum(x, lower)  # the unused branch stays finite (no NaN in its gradient)
    z = 1.0 / (t * t)
    series = 1 - z * (1 - 3 * z * (1 - 5 * z * (1 - 7 * z)))
    tail = -0.5 * t * t - fnp.log(-t) - 0.5 * math.log(2 * math.pi) + fnp.log(series)
    return fnp.where(x < lower, tail, mid)


def ndtri(p):
    """The inverse of `ndtr`: sqrt(2) * erfinv(2p - 1) (+-inf at 1 and 0, NaN outside).

    Example:
        >>> ndtri(0.5)
        Array(0., dtype=float32)
    """
    p, = _float(p)
    return math.sqrt(2) * lax.erf_inv(2 * p - 1)
