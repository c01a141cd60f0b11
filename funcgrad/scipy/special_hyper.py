"""SciPy's Bessel function of integer order and the confluent hypergeometric function on
funcgrad arrays, as JAX's (`funcgrad.scipy.special` re-exports them): `bessel_jn` and
`hyp1f1`.

The algorithms are JAX 0.10.2's: `bessel_jn` is Zhang and Jin's backward recurrence (a fixed
number of steps, normalized by the sum identity), differentiated through its operations;
`hyp1f1` is Pearson, Olver and Porter's Taylor series for |x| < 100 and their asymptotic
series beyond, summed until the next term is below the dtype's epsilon (at most 250 terms),
with the closed-form derivative series of each argument (custom_jvp). The series run
elementwise: an element stops adding terms once it has converged, as JAX's per-element loop;
the a- and b-derivative series always take 249 masked steps (a scan), so that reverse mode
can go through them where a second derivative needs it.
Imports funcgrad.numpy, lax and custom_derivatives.
"""

import functools
import operator

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.custom_derivatives import custom_jvp

__all__ = ["bessel_jn", "hyp1f1"]


def bessel_jn(z, *, v, n_iter=50):
    """The Bessel functions of the first kind J_0(z), ..., J_v(z) of real z, stacked along a
    new first axis (shape `(v + 1, *z.shape)`), by `n_iter` steps of backward recurrence (as
    JAX's; `n_iter` must grow with |z|, see JAX's docstring; in float32 the recurrence
    overflows for small |z| and gives nan, as JAX's: use float64 there).

    Example:
        >>> bessel_jn(fnp.array([7.5, 20.0]), v=1)
        Array([[0.2663397 , 0.16702464],
               [0.13524845, 0.06683309]], dtype=float32)
    """
    z = fnp.asarray(z)
    z = z.astype(fnp.result_type(z, 1.0))
    if z.dtype.kind == "c":
        raise errors.op_error("bessel_jn", "complex input not supported (as in JAX)",
                              cls=errors.FuncgradValueError)
    try:
        v, n_iter = operator.index(v), int(n_iter)
    except TypeError as e:
        raise errors.op_error("bessel_jn", f"v must be an int and n_iter a number, got "
                              f"v={errors.short_repr(v)}, n_iter={errors.short_repr(n_iter)}",
                              cls=errors.FuncgradTypeError) from e
    if v < 0 or n_iter < v:
        raise errors.op_error("bessel_jn", f"needs 0 <= v <= n_iter, got v={v}, "
                              f"n_iter={n_iter}", cls=errors.FuncgradValueError)
    f0, f1 = fnp.zeros_like(z), fnp.full_like(z, 1e-16)
    total, values = fnp.zeros_like(z), []
    for k in range(n_iter, -1, -1):
        f = 2.0 * (k + 1.0) * f1 / z - f0
        if k % 2 == 0:
            total = total + 2.0 * f
        f0, f1 = f1, f
        values.append(f)
    values = values[::-1]  # values[k] is the recurrence's value for order k
    return fnp.stack(values[:v + 1]) / (total - values[0])


# --- hyp1f1 -----------------------------------------------------------------------------------

def _series(x, first, init, step, extra=None, fixed=False):
    """Sum `init + sum_k term_k (* extra(k))` elementwise, term_1 = `first`, term_{k+1} =
    term_k * step(k), each element stopping when |term| / |sum| <= eps or after 250 terms.
    `fixed`: always 249 masked steps (a scan, so reverse mode can differentiate it)."""
    eps = float(np.finfo(x.dtype).eps)

    def active(state):
        k, total, term = state
        return (k < 250) & (fnp.abs(term) > eps * fnp.abs(total))

    def body(state):
        k, total, term = state
        on = active(state)
        add = term if extra is None else term * extra(k)
        return (k + 1, fnp.where(on, total + add, total),
                fnp.where(on, term * step(k), term))

    state = (fnp.asarray(1.0, x.dtype), init, first)
    if fixed:
        return lax.fori_loop(1, 250, lambda _, st: body(st), state)[1]
    return lax.while_loop(lambda st: fnp.any(active(st)), body, state)[1]


def _hyp1f1_taylor(a, b, x):
    return _series(x, a / b * x, fnp.ones_like(x),
                   lambda k: (a + k) / (b + k) * x / (k + 1))


def _hyp1f1_asymptotic(a, b, x):
    from funcgrad.scipy.special import gamma
    s = _series(x, (b - a) * (1 - a) / x, fnp.ones_like(x),
                lambda k: (b - a + k) * (1 - a + k) / (k + 1) / x)
    return gamma(b) / gamma(a) * fnp.exp(x) * x ** (a - b) * s


def _hyp1f1_value(a, b, x):
    small = fnp.abs(x) < 100
    xs, xl = fnp.where(small, x, 0.0), fnp.where(small, 100.0, x)
    value = fnp.where(small, _hyp1f1_taylor(a, b, xs), _hyp1f1_asymptotic(a, b, xl))
    value = fnp.where((b == 0) & (a != 0), np.inf, value)
    value = fnp.where((a == b) & (a != 0), fnp.exp(x), value)
    return fnp.where(a == 0, 1.0, value).astype(x.dtype)


def _hyp1f1_da(a, b, x):
    from funcgrad.scipy.special import digamma
    return _series(x, a / b * x, fnp.zeros_like(x),
                   lambda k: (a + k) / (b + k) * x / (k + 1),
                   lambda k: digamma(a + k) - digamma(a), fixed=True)


def _hyp1f1_db(a, b, x):
    from funcgrad.scipy.special import digamma
    return _series(x, a / b * x, fnp.zeros_like(x),
                   lambda k: (a + k) / (b + k) * x / (k + 1),
                   lambda k: digamma(b) - digamma(b + k), fixed=True)


@functools.partial(custom_jvp, nondiff_argnums=(0,))
def _hyp1f1(n, a, b, x):
    """1F1(a + n; b + n; x): the shift `n` is static, so that the x-derivative (a/b times
    1F1(a + 1; b + 1; x)) calls this function on the rule's own primal values."""
    return _hyp1f1_value(a + n, b + n, x)


@_hyp1f1.defjvp
def _hyp1f1_jvp(n, primals, tangents):
    a, b, x = primals
    ta, tb, tx = tangents
    an, bn = a + n, b + n
    dx = an / bn * _hyp1f1(n + 1, a, b, x)
    return _hyp1f1(n, a, b, x), ta * _hyp1f1_da(an, bn, x) + tb * _hyp1f1_db(an, bn, x) + \
        tx * dx


def hyp1f1(a, b, x):
    """The confluent hypergeometric function 1F1(a; b; x) = sum_k (a)_k / (b)_k x^k / k! of
    real arguments (as JAX's: 1F1(0; 0; x) = 1, where SciPy says nan; large values lose
    precision in float32). Differentiable in a, b and x.

    Example:
        >>> hyp1f1(1.0, 2.0, 1.0)
        Array(1.7182816, dtype=float32)
    """
    xs = [fnp.asarray(t) for t in (a, b, x)]
    dt = fnp.result_type(*xs, 1.0)
    if dt.kind == "c":
        raise errors.op_error("hyp1f1", "does not support complex-valued inputs (as in JAX)",
                              cls=errors.FuncgradValueError)
    a, b, x = fnp.broadcast_arrays(*[t.astype(dt) for t in xs])
    return _hyp1f1(0, a, b, x)
