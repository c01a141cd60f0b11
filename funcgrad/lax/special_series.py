"""Special functions of lax beyond `special.py`: the exponentially scaled Bessel functions
`bessel_i0e`, `bessel_i1e` and the Hurwitz zeta function `zeta` (primitives: numpy series
in float64, derivatives by their identities), and the regularized incomplete gamma and beta
functions `igamma`, `igammac`, `igamma_grad_a`, `random_gamma_grad`, `betainc`
(compositions: a power series or a continued fraction in a `fori_loop`, so they trace,
batch and differentiate in every argument through the iterations).

Edge values follow JAX's (XLA's). Imports core, interpreters and lax siblings only.
"""

import functools
import math
from fractions import Fraction

import numpy as np

from funcgrad import errors
from funcgrad.core import get_aval
from funcgrad.core.ir import ShapedArray
from funcgrad.core.trace import eval_jaxpr, trace_to_jaxpr
from funcgrad.interpreters import ad
from funcgrad.lax.control_flow import fori_loop
from funcgrad.lax.elementwise import (
    _const,
    abs,
    add,
    convert_element_type,
    div,
    exp,
    is_finite,
    log,
    log1p,
    mul,
    neg,
    sign,
    sub,
)
from funcgrad.lax.logic import bitwise_and, bitwise_not, bitwise_or, eq, ge, gt, le, lt, ne
from funcgrad.lax.logic import select_n as _select_n
from funcgrad.lax.shape import broadcast_in_dim, full
from funcgrad.lax.special import lgamma
from funcgrad.lax.utils import binop, match_scalars, unop

__all__ = [
    "bessel_i0e", "bessel_i0e_p", "bessel_i1e", "bessel_i1e_p", "betainc", "igamma",
    "igamma_grad_a", "igammac", "random_gamma_grad", "zeta", "zeta_p",
]


def _where(c, a, b):
    """`a` where `c` else `b`; rank-0 operands broadcast to the others' shape."""
    shape = max((get_aval(v).shape for v in (c, a, b)), key=len)
    c, a, b = [v if get_aval(v).shape == shape else broadcast_in_dim(v, shape, ())
               for v in (c, a, b)]
    return _select_n(c, b, a)


def _c(x, v):
    return _const(x, v)


def _quiet(fn):
    @functools.wraps(fn)
    def impl(*args, **params):
        args = [np.asarray(a) for a in args]
        with np.errstate(all="ignore"):
            return np.asarray(fn(*args, **params), args[0].dtype)
    return impl


# --- bessel_i0e / bessel_i1e ------------------------------------------------------------------
def _bessel_ie(nu, x):
    """exp(-|x|) I_nu(|x|) in float64: the power series up to |x| = 30, the asymptotic
    expansion beyond (both to about 1e-15)."""
    ax = np.abs(np.asarray(x, np.float64))
    small = np.minimum(ax, 30.0)
    half2 = (small / 2) ** 2
    term = (small / 2) ** nu / math.factorial(nu)
    total = term.copy()
    for k in range(1, 90):
        term = term * half2 / (k * (k + nu))
        total = total + term
    series = total * np.exp(-small)
    big = np.maximum(ax, 30.0)
    mu, term, total = 4.0 * nu * nu, np.ones_like(big), np.ones_like(big)
    for k in range(1, 30):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * big)
        total = total + term
    asym = total / np.sqrt(2 * np.pi * big)
    return np.where(ax <= 30.0, series, asym)


def bessel_i0e(x):
    """Elementwise exp(-|x|) I0(x), the exponentially scaled modified Bessel function of
    order 0.

    Example:
        >>> bessel_i0e(fnp.array([0.0, 1.0]))
        Array([1.       , 0.4657596], dtype=float32)
    """
    return bessel_i0e_p.bind(x)


bessel_i0e_p = unop("bessel_i0e", _quiet(lambda x: _bessel_ie(0, x)), kinds="f",
                    fusible=False)
# d/dx i0e = i1e - sign(x) i0e
ad.defjvp(bessel_i0e_p, lambda t, x, out: mul(t, sub(bessel_i1e(x), mul(sign(x), out))))


def bessel_i1e(x):
    """Elementwise exp(-|x|) I1(x), the exponentially scaled modified Bessel function of
    order 1 (odd in x).

    Example:
        >>> bessel_i1e(fnp.array([0.0, 1.0]))
        Array([0.        , 0.20791042], dtype=float32)
    """
    return bessel_i1e_p.bind(x)


def _bessel_i1e_tangent(t, x, out):
    # d/dx i1e = i0e - i1e (sign(x) + 1/x), which is 1/2 at x = 0
    zero = eq(x, _c(x, 0))
    safe = _where(zero, _c(x, 1), x)
    d = sub(bessel_i0e(x), mul(out, add(sign(x), div(_c(x, 1), safe))))
    return mul(t, _where(zero, _c(x, 0.5), d))


bessel_i1e_p = unop("bessel_i1e", _quiet(lambda x: np.sign(x) * _bessel_ie(1, x)), kinds="f",
                    fusible=False)
ad.defjvp(bessel_i1e_p, _bessel_i1e_tangent)


# --- zeta -------------------------------------------------------------------------------------
_BERNOULLI = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30),
              Fraction(5, 66), Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510),
              Fraction(43867, 798), Fraction(-174611, 330), Fraction(854513, 138),
              Fraction(-236364091, 2730)]
_EM = [float(math.factorial(2 * j) / b) for j, b in enumerate(_BERNOULLI, 1)]  # (2j)!/B_2j


def zeta(x, q):
    """Elementwise Hurwitz zeta function sum_k (q + k)**-x, for x > 1 (inf at x = 1, NaN
    below) and q > 0, or a negative non-integer q with an integer x; NaN at q = 0, -1, ...
    (as JAX). Differentiable in `q` (-x zeta(x + 1, q)); JAX has no derivative at all, and
    neither has funcgrad in `x`.

    Example:
        >>> zeta(2.0, 1.0)  # pi**2 / 6
        Array(1.644934, dtype=float32)
    """
    return zeta_p.bind(*match_scalars(x, q))


_ZETA_MAX_TERMS = 100_000


def _zeta_impl(x, q):
    """Euler-Maclaurin summation (Cephes' zeta): the terms up to w = q + n >= 10 directly,
    then the integral of the rest and twelve Bernoulli corrections at w."""
    x, q = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(q, np.float64))
    finite_q = q[np.isfinite(q)]
    lowest = finite_q.min() if finite_q.size else 0.0
    n = 10 + int(min(max(0.0, np.ceil(-lowest)), _ZETA_MAX_TERMS))
    total = np.zeros(x.shape)
    for k in range(n):
        total = total + (q + k) ** -x
    w = q + n
    b = w ** -x
    total = total + b * w / (x - 1) + 0.5 * b  # the integral of the rest, and half f(w)
    a, kk = np.ones(x.shape), 0.0
    for coeff in _EM:
        a = a * (x + kk)
        b = b / w
        total = total + a * b / coeff
        a, b, kk = a * (x + kk + 1), b / w, kk + 2
    out = np.where(x == 1, np.inf, total)
    pole = (q <= 0) & (q == np.floor(q))
    bad = (x < 1) | pole | (q < -_ZETA_MAX_TERMS) | np.isnan(x) | np.isnan(q)
    return np.where(bad, np.nan, out)


def _zeta_jvp(primals, out, tangents):
    x, q = primals
    tx, tq = tangents
    if type(tx) is not ad.Zero:
        raise errors.op_error("zeta", "has no derivative in its first argument x (as in JAX)",
                              cls=errors.FuncgradTypeError,
                              hint="differentiate in q, or hold x fixed (stop_gradient)")
    if type(tq) is ad.Zero:
        return ad.Zero(get_aval(out))
    return mul(tq, neg(mul(x, zeta(add(x, _c(x, 1)), q))))


zeta_p = binop("zeta", _quiet(_zeta_impl), kinds="f", fusible=False)
ad.jvp_rules[zeta_p] = _zeta_jvp


# --- the incomplete gamma function ------------------------------------------------------------
# A power series (x < a + 1) or a continued fraction (modified Lentz), a fixed number of
# steps: with 64, the absolute error (float64) stays below 1e-13 for parameters up to about
# 60, 2e-9 for igamma at a ~ 100 and grows beyond (XLA iterates to convergence instead);
# betainc stays below 1e-8 up to 1000.
_STEPS = 64


def _floats(name, *args):
    args = match_scalars(*args)
    avals = [get_aval(a) for a in args]
    if any(a.dtype.kind != "f" for a in avals) or len({a.dtype for a in avals}) != 1:
        raise errors.op_error(name, f"operands must share one float dtype, got "
                              f"{', '.join(map(str, avals))}",
                              hint="funcgrad.scipy.special promotes; lax does not")
    shapes = {a.shape for a in avals if a.shape}
    if len(shapes) > 1:
        raise errors.op_error(name, f"operands must have equal shapes (or be rank-0), got "
                              f"{', '.join(map(str, avals))}")
    shape = shapes.pop() if shapes else ()
    return [a if get_aval(a).shape == shape else broadcast_in_dim(a, shape, ()) for a in args]


def _tiny(x):
    return _c(x, float(np.finfo(get_aval(x).dtype).tiny) * 1e3)


def _lentz(an_bn, start, x):
    """The continued fraction b0 + a1/(b1 + a2/(b2 + ...)) with (an, bn) = an_bn(n)."""
    tiny = _tiny(x)

    def clamp(v):
        return _where(lt(abs(v), tiny), tiny, v)

    def body(n, carry):
        c, d, h = carry
        an, bn = an_bn(n + 1)
        d, c = div(_c(x, 1), clamp(add(bn, mul(an, d)))), clamp(add(bn, div(an, c)))
        return c, d, mul(h, mul(c, d))
    h0 = clamp(start)
    return fori_loop(0, _STEPS, body, (h0, mul(h0, _c(h0, 0)), h0))[2]


def _gamma_prefactor(a, x):
    return exp(sub(sub(mul(a, log(x)), x), lgamma(a)))


def _gamma_series(a, x):
    def body(n, carry):
        term, total = carry
        nf = _as(n, a)
        term = mul(term, div(x, add(a, add(nf, _c(a, 1)))))
        return term, add(total, term)
    t0 = div(_c(a, 1), a)
    return mul(fori_loop(0, _STEPS, body, (t0, t0))[1], _gamma_prefactor(a, x))


def _as(n, like):
    return convert_element_type(n, get_aval(like).dtype)


def _gamma_fraction(a, x):
    def an_bn(n):
        nf = _as(n, a)
        return (neg(mul(nf, sub(nf, a))),
                add(add(sub(x, a), _c(x, 1)), mul(_c(x, 2), nf)))
    return div(_gamma_prefactor(a, x), _lentz(an_bn, add(sub(x, a), _c(x, 1)), x))


def _incomplete_gamma(a, x):
    """(P, Q) at a > 0, x > 0, each from the better-converging expansion."""
    series = lt(x, add(a, _c(a, 1)))
    xs = _where(series, x, add(a, _c(a, 1)))  # the unused one gets a point where it converges
    xf = _where(series, add(a, _c(a, 2)), x)
    p, q = _gamma_series(a, xs), _gamma_fraction(a, xf)
    one = _c(a, 1)
    return _where(series, p, sub(one, q)), _where(series, sub(one, p), q)


def _igamma_parts(a, x):
    """(P, Q, inside): the values at regular points (a, x > 0 finite), the mask of those."""
    inside = bitwise_and(bitwise_and(gt(a, _c(a, 0)), gt(x, _c(x, 0))),
                         bitwise_and(is_finite(a), is_finite(x)))
    one = _c(a, 1)
    p, q = _incomplete_gamma(_where(inside, a, one), _where(inside, x, one))
    return p, q, inside


def _igamma_edges(a, x, lower):
    """JAX's values off the regular points: P(a, 0) = 0, P(a, inf) = 1 (a = inf included),
    P(0, x > 0) = 1; NaN for a NaN, a negative, (0, 0) and an infinite a at a finite x."""
    nan, one, zero = _c(a, np.nan), _c(a, 1), _c(a, 0)
    x_inf = eq(x, _c(x, np.inf))
    bad = bitwise_or(bitwise_or(lt(a, zero), lt(x, zero)), bitwise_or(ne(a, a), ne(x, x)))
    bad = bitwise_or(bad, bitwise_and(eq(a, zero), eq(x, zero)))
    bad = bitwise_or(bad, bitwise_and(bitwise_not(is_finite(a)), bitwise_not(x_inf)))
    p = _where(eq(x, zero), zero, one)  # x = 0: 0; x = inf or a = 0: 1
    return _where(bad, nan, p if lower else sub(one, p))


def igamma(a, x):
    """Elementwise regularized lower incomplete gamma function P(a, x).

    Example:
        >>> igamma(fnp.array(1.0), fnp.array(1.0))  # 1 - exp(-1)
        Array(0.63212043, dtype=float32)
    """
    a, x = _floats("igamma", a, x)
    p, _, inside = _igamma_parts(a, x)
    return _where(inside, p, _igamma_edges(a, x, True))


def igammac(a, x):
    """Elementwise regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x).

    Example:
        >>> igammac(fnp.array(1.0), fnp.array(1.0))  # exp(-1)
        Array(0.36787957, dtype=float32)
    """
    a, x = _floats("igammac", a, x)
    _, q, inside = _igamma_parts(a, x)
    return _where(inside, q, _igamma_edges(a, x, False))


@functools.lru_cache(maxsize=64)
def _igamma_jvp_program(shape, dtype):
    """The jvp of igamma in `a`, traced once per shape and dtype."""
    aval = ShapedArray(shape, np.dtype(dtype), False)
    closed = trace_to_jaxpr(lambda a, x: [igamma(a, x)], [aval, aval], "igamma")
    return ad.jvp_jaxpr(closed, [True, False], instantiate=True)[0]


def igamma_grad_a(a, x):
    """Elementwise derivative of igamma(a, x) in `a` (the jvp of igamma's iterations, so it
    is differentiable again, which JAX's is not).

    Example:
        >>> igamma_grad_a(fnp.array(2.0), fnp.array(3.0))
        Array(-0.1974256, dtype=float32)
    """
    a, x = _floats("igamma_grad_a", a, x)
    aval = get_aval(a)
    prog = _igamma_jvp_program(aval.shape, aval.dtype.str)
    return eval_jaxpr(prog.jaxpr, prog.consts, a, x, full(aval.shape, 1, aval.dtype))[1]


def random_gamma_grad(a, x):
    """The derivative of a Gamma(a, 1) sample `x` in its shape `a` at fixed uniform noise
    (implicit reparameterization): -dP/da / dP/dx.

    Example:
        >>> random_gamma_grad(fnp.array(2.0), fnp.array(3.0))
        Array(1.3217998, dtype=float32)
    """
    a, x = _floats("random_gamma_grad", a, x)
    log_pdf = sub(sub(mul(sub(a, _c(a, 1)), log(x)), x), lgamma(a))
    return neg(div(igamma_grad_a(a, x), exp(log_pdf)))


# --- the incomplete beta function -------------------------------------------------------------
def _beta_fraction(a, b, x):
    def an_bn(n):  # d_2m = m (b - m) x / ((a + 2m - 1)(a + 2m)), d_2m+1 = -(a + m)(a + b + m) x
        m = _as(n // 2, a)  # / ((a + 2m)(a + 2m + 1))
        even = eq(_as(n % 2, a), _c(a, 0))
        two_m = mul(_c(m, 2), m)
        num_even = div(mul(mul(m, sub(b, m)), x),
                       mul(add(a, sub(two_m, _c(a, 1))), add(a, two_m)))
        num_odd = neg(div(mul(mul(add(a, m), add(add(a, b), m)), x),
                          mul(add(a, two_m), add(add(a, two_m), _c(a, 1)))))
        return _where(even, num_even, num_odd), _c(a, 1)
    return _lentz(an_bn, add(mul(x, _c(x, 0)), _c(x, 1)), x)


def betainc(a, b, x):
    """Elementwise regularized incomplete beta function I_x(a, b), for a, b >= 0 and
    0 <= x <= 1 (JAX's values at the edges: I_x(0, b) = 1, I_x(a, 0) = 0 for x in (0, 1];
    NaN outside).

    Example:
        >>> betainc(fnp.array(1.0), fnp.array(1.0), fnp.array(0.25))
        Array(0.2500002, dtype=float32)
    """
    a, b, x = _floats("betainc", a, b, x)
    zero, one = _c(a, 0), _c(a, 1)
    inside = bitwise_and(bitwise_and(gt(a, zero), gt(b, zero)),
                         bitwise_and(gt(x, zero), lt(x, one)))
    inside = bitwise_and(inside, bitwise_and(is_finite(a), is_finite(b)))
    a1, b1, x1 = _where(inside, a, one), _where(inside, b, one), _where(inside, x, _c(x, 0.5))
    front = exp(add(sub(sub(lgamma(add(a1, b1)), lgamma(a1)), lgamma(b1)),
                    add(mul(a1, log(x1)), mul(b1, _log1m(x1)))))
    direct = lt(x1, div(add(a1, one), add(add(a1, b1), _c(a, 2))))
    val = _where(direct, div(front, mul(a1, _beta_fraction(a1, b1, x1))),
                 sub(one, div(front, mul(b1, _beta_fraction(b1, a1, sub(one, x1))))))
    return _where(inside, val, _betainc_edges(a, b, x))


def _log1m(x):
    return log1p(neg(x))


def _betainc_edges(a, b, x):
    """JAX's values off the regular points: 0 at x = 0, 1 at x = 1; else 1 for a = 0 or
    b = inf, 0 for b = 0 or a = inf; NaN for a NaN, a negative parameter, x outside [0, 1]
    or a = b = 0."""
    zero, one, nan = _c(a, 0), _c(a, 1), _c(a, np.nan)
    bad = bitwise_or(bitwise_or(lt(a, zero), lt(b, zero)), bitwise_or(lt(x, zero), gt(x, one)))
    bad = bitwise_or(bad, bitwise_or(bitwise_and(eq(a, zero), eq(b, zero)),
                                     bitwise_or(ne(a, a), bitwise_or(ne(b, b), ne(x, x)))))
    inf = _c(a, np.inf)
    val = _where(bitwise_or(eq(a, zero), eq(b, inf)), one, zero)
    val = _where(le(x, zero), zero, _where(ge(x, one), one, val))
    return _where(bad, nan, val)
