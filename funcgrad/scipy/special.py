"""`funcgrad.scipy.special`: SciPy's special functions on funcgrad arrays, as `jax.scipy.special`.

One home per concept: `logsumexp` and `expit` are the very functions of `funcgrad.nn`, and
`softmax`/`log_softmax` call nn's with SciPy's (and JAX's) default `axis=None`, the whole
array (nn's default is the last axis); `erf`, `erfc`, `erfinv`, `gammaln`, `digamma`,
`polygamma` are the lax primitives (with their derivatives). The rest is written with
`funcgrad.numpy`; the exponential, trigonometric and error-function integrals live in
`special_integrals.py`. Imports lax, numpy, nn.functions and custom_derivatives.
"""

import math
from fractions import Fraction

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.custom_derivatives import custom_jvp
from funcgrad.nn import functions as nn_functions
from funcgrad.nn.functions import logsumexp
from funcgrad.nn.functions import sigmoid as expit
from funcgrad.scipy.special_hyper import bessel_jn, hyp1f1
from funcgrad.scipy.special_integrals import (
    dawsn,
    erfcx,
    exp1,
    expi,
    expn,
    owens_t,
    sici,
    spence,
    wofz,
)

__all__ = [
    "betainc", "betaln", "digamma", "entr", "erf", "erfc", "erfinv", "expit", "gamma",
    "gammainc", "gammaincc", "gammaln", "kl_div", "log_ndtr", "log_softmax", "logit",
    "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "rel_entr", "softmax", "xlog1py",
    "xlogy",
    # the long tail (issue 28)
    "bernoulli", "beta", "boxcox", "boxcox1p", "comb", "factorial", "gammasgn", "i0", "i0e",
    "i1", "i1e", "loggamma", "poch", "zeta",
    "dawsn", "erfcx", "exp1", "expi", "expn", "owens_t", "sici", "spence", "wofz",
    "bessel_jn", "hyp1f1",
]


def softmax(x, /, axis=None):
    """exp(x) / sum(exp(x)) over `axis`: the whole array by default, as in SciPy and JAX
    (`funcgrad.nn.softmax` works over the last axis).

    Example:
        >>> softmax(fnp.array([[0.0, 0.0], [0.0, 0.0]]))
        Array([[0.25, 0.25],
               [0.25, 0.25]], dtype=float32)
    """
    return nn_functions.softmax(x, axis=axis)


def log_softmax(x, /, axis=None):
    """x - logsumexp(x) over `axis`: the whole array by default, as in SciPy and JAX.

    Example:
        >>> log_softmax(fnp.array([0.0, 0.0])).tolist()
        [-0.6931471824645996, -0.6931471824645996]
    """
    return nn_functions.log_softmax(x, axis=axis)


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


def log_ndtr(x, series_order=3):
    """log(ndtr(x)), finite far into the left tail: below -10 (-20 in float64) the
    asymptotic series `1 - 1/x^2 + 3/x^4 - 15/x^6 ...` of `series_order` terms (0 to 30),
    as JAX computes it.

    Example:
        >>> log_ndtr(-40.0)
        Array(-804.60846, dtype=float32)
    """
    if isinstance(series_order, bool) or not isinstance(series_order, int):
        raise errors.FuncgradTypeError(f"log_ndtr: series_order must be a Python int, got "
                                       f"{errors.short_repr(series_order)}\n{errors.where()}")
    if not 0 <= series_order <= 30:
        raise errors.FuncgradValueError(f"log_ndtr: series_order must be in [0, 30], got "
                                        f"{series_order}\n{errors.where()}")
    x, = _float(x)
    lower = -20.0 if x.dtype == fnp.float64 else -10.0
    pos = fnp.where(x > 0, x, 1.0)  # unused branches get safe inputs (no NaN gradients)
    mid = fnp.where(x > 0, fnp.log1p(-ndtr(-pos)), fnp.log(ndtr(fnp.maximum(x, lower))))
    t = fnp.minimum(x, lower)  # the unused branch stays finite (no NaN in its gradient)
    z = 1.0 / (t * t)
    series = 1.0
    for n in range(series_order, 0, -1):  # Horner: 1 - z (1 - 3 z (1 - 5 z (...)))
        series = 1 - (2 * n - 1) * z * series
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


def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 at p == 0 (q >= 0); +inf otherwise.

    Example:
        >>> rel_entr(1.0, 1.0)
        Array(0., dtype=float32)
    """
    p, q = _float(p, q)
    safe = (p > 0) & (q > 0)
    val = p * (fnp.log(fnp.where(safe, p, 1.0)) - fnp.log(fnp.where(safe, q, 1.0)))
    return fnp.where(safe, val, fnp.where((p == 0) & (q >= 0), 0.0, fnp.inf))


def kl_div(p, q):
    """p log(p / q) - p + q for p, q > 0; q at p == 0 (q >= 0); +inf otherwise.

    Example:
        >>> kl_div(1.0, 1.0)
        Array(0., dtype=float32)
    """
    p, q = _float(p, q)
    return fnp.where((p == 0) & (q >= 0), q, rel_entr(p, q) - p + q)


# --- incomplete gamma and beta functions: lax's compositions (lax/special_series.py) -------
def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x) (JAX's values at the edges:
    0 at x = 0, 1 at a = 0 or x = inf; NaN for negative arguments).

    Differentiable in `a` and `x`; accurate to ~1e-13 for a up to about 60.

    Example:
        >>> gammainc(1.0, 1.0)  # 1 - exp(-1) = 0.63212055...
        Array(0.63212043, dtype=float32)
    """
    return lax.igamma(*_float(a, x))


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x).

    Example:
        >>> gammaincc(1.0, 1.0)  # exp(-1) = 0.36787944...
        Array(0.36787957, dtype=float32)
    """
    return lax.igammac(*_float(a, x))


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (a, b >= 0, 0 <= x <= 1; NaN else),
    differentiable in all three arguments (JAX's only in x).

    Example:
        >>> betainc(1.0, 1.0, 0.25)  # float32 rounding in the continued fraction
        Array(0.2500002, dtype=float32)
    """
    return lax.betainc(*_float(a, b, x))


# --- Bessel, zeta and gamma relatives ---------------------------------------------------------
def i0e(x):
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0.

    Example:
        >>> i0e(0.0)
        Array(1., dtype=float32)
    """
    return lax.bessel_i0e(*_float(x))


def i0(x):
    """The modified Bessel function of the first kind of order 0, I0(x).

    Example:
        >>> i0(0.0)
        Array(1., dtype=float32)
    """
    x, = _float(x)
    return fnp.exp(fnp.abs(x)) * lax.bessel_i0e(x)


def i1e(x):
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order 1.

    Example:
        >>> i1e(0.0)
        Array(0., dtype=float32)
    """
    return lax.bessel_i1e(*_float(x))


def i1(x):
    """The modified Bessel function of the first kind of order 1, I1(x).

    Example:
        >>> i1(0.0)
        Array(0., dtype=float32)
    """
    x, = _float(x)
    return fnp.exp(fnp.abs(x)) * lax.bessel_i1e(x)


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (q + k)**-x (x > 1); the Riemann zeta function when
    `q` is None (JAX raises there). Differentiable in `q`.

    Example:
        >>> zeta(2.0, 1.0)  # pi**2 / 6
        Array(1.644934, dtype=float32)
    """
    return lax.zeta(*_float(x, 1.0 if q is None else q))


def gammasgn(x):
    """The sign of Gamma(x): 1, or -1 (negative x between an odd and an even pole, and -0.0);
    NaN at the poles.

    Example:
        >>> gammasgn(-0.5)
        Array(-1., dtype=float32)
    """
    x, = _float(x)
    neg = x < 0
    fl = fnp.floor(x)
    minus = (neg & (fl % 2 != 0)) | ((x == 0) & fnp.signbit(x))
    out = fnp.where(minus, -1.0, 1.0).astype(x.dtype)
    return fnp.where((neg & (x == fl)) | fnp.isnan(x), fnp.nan, out)


def loggamma(x):
    """log Gamma(x) for real x > 0 (NaN for x <= 0, as JAX's real loggamma).

    Example:
        >>> loggamma(3.0)  # log 2
        Array(0.6931472, dtype=float32)
    """
    x, = _float(x)
    return fnp.where(x > 0, lax.lgamma(x), fnp.nan)


def beta(a, b):
    """The beta function B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b).

    Example:
        >>> beta(2.0, 3.0)  # 1/12
        Array(0.08333334, dtype=float32)
    """
    a, b = _float(a, b)
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * fnp.exp(betaln(a, b))


def factorial(n, exact=False):
    """n! as Gamma(n + 1) (0 for negative n); `exact=True` is not supported (as in JAX).

    Example:
        >>> factorial(4.0)
        Array(24., dtype=float32)
    """
    if exact:
        raise errors.op_error("factorial", "exact=True is not supported (as in JAX); "
                              "factorial is computed in floating point",
                              cls=errors.FuncgradValueError)
    n, = _float(n)
    return fnp.where(n < 0, 0.0, fnp.exp(lax.lgamma(n + 1))).astype(n.dtype)


def comb(N, k, *, repetition=False):  # noqa: N803  (SciPy's name)
    """The binomial coefficient N choose k in floating point (0 outside 0 <= k <= N); with
    `repetition`, the number of multisets: comb(N + k - 1, k).

    Example:
        >>> comb(5.0, 2.0)  # through gammaln (float32 rounding, as JAX's)
        Array(10.000001, dtype=float32)
    """
    N, k = _float(N, k)
    if repetition:
        return fnp.where((k == 0) & (N >= 0), 1.0, comb(N + k - 1, k)).astype(N.dtype)
    ok = (k <= N) & (N >= 0) & (k >= 0)
    sn, sk = fnp.where(ok, N, 0.0), fnp.where(ok, k, 0.0)
    val = fnp.exp(lax.lgamma(sn + 1) - lax.lgamma(sk + 1) - lax.lgamma(sn + 1 - sk))
    return fnp.where(ok, val, 0.0).astype(N.dtype)


@custom_jvp
def poch(z, m):
    """The Pochhammer symbol (rising factorial) Gamma(z + m) / Gamma(z) (1 for m = 0).

    Example:
        >>> poch(3.0, 2.0)  # 3 * 4
        Array(12., dtype=float32)
    """
    z, m = _float(z, m)
    return fnp.where(m == 0, 1.0, gamma(z + m) / gamma(z)).astype(z.dtype)


@poch.defjvp
def _poch_jvp(primals, tangents):
    z, m = _float(*primals)
    tz, tm = tangents
    out = poch(z, m)
    dz = (lax.digamma(z + m) - lax.digamma(z)) * out
    return out, dz * tz + lax.digamma(z + m) * out * tm


def boxcox(x, lmbda):
    """The Box-Cox transform (x**lmbda - 1) / lmbda (log x at lmbda = 0), computed with
    expm1 for accuracy near 0.

    Example:
        >>> boxcox(fnp.e, 0.0)
        Array(1., dtype=float32)
    """
    x, lmbda = _float(x, lmbda)
    zero = lmbda == 0
    safe = fnp.where(zero, 1.0, lmbda).astype(x.dtype)
    lx = fnp.log(x)
    return fnp.where(zero, lx, fnp.expm1(safe * lx) / safe)


def boxcox1p(x, lmbda):
    """The Box-Cox transform of 1 + x (defined for x > -1).

    Example:
        >>> boxcox1p(0.0, 2.0)
        Array(0., dtype=float32)
    """
    x, lmbda = _float(x, lmbda)
    zero = lmbda == 0
    safe = fnp.where(zero, 1.0, lmbda).astype(x.dtype)
    lx = fnp.log1p(x)
    return fnp.where(zero, lx, fnp.expm1(safe * lx) / safe)


def bernoulli(n):
    """The Bernoulli numbers B_0 .. B_n (B_1 = -1/2), as a float array (n a Python int).

    Example:
        >>> bernoulli(4)
        Array([ 1.        , -0.5       ,  0.16666667,  0.        , -0.03333334], dtype=float32)
    """
    n = int(n)
    if n < 0:
        raise errors.op_error("bernoulli", f"n must be a non-negative integer, got {n}",
                              cls=errors.FuncgradValueError)
    b = [Fraction(1)]
    for m in range(1, n + 1):  # sum_{k<=m} C(m+1, k) B_k = 0
        b.append(-sum(math.comb(m + 1, k) * b[k] for k in range(m)) / (m + 1))
    return fnp.asarray(np.array([float(v) for v in b]))
