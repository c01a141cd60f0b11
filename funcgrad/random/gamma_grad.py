"""The derivative of a Gamma(a, 1) sample with respect to `a` at a fixed CDF value: JAX's
`random_gamma_grad` (XLA's `RandomGammaGrad`), the implicit reparameterization gradient
`dx/da = -(dP(a, x)/da) / (dP(a, x)/dx)` with `P` the regularized lower incomplete gamma.

`dP/da` comes from the power series of `P` (small `x`) or the continued fraction of
`Q = 1 - P` (large `x`), each differentiated term by term alongside its value, as XLA does.
Elementwise and written with lax ops and `while_loop`s over masks, so it runs under jit,
vmap and forward-mode differentiation like any lax function.
"""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.random.common import any_true, select


def _series(x, a, enabled, eps):
    """XLA's `IgammaSeries` in SAMPLE_DERIVATIVE mode."""
    one = a.dtype.type(1)

    def body(vals):
        enabled, r, c, ans, x, dc_da, dans_da = vals
        r_new = r + one
        dc_da_new = dc_da * (x / r_new) - (c * x) / (r_new * r_new)
        dans_da_new = dans_da + dc_da_new
        c_new = c * (x / r_new)
        ans_new = ans + c_new
        go = enabled & (fnp.abs(dc_da_new / dans_da_new) > eps)
        pick = lambda new, old: select(enabled, new, old)  # noqa: E731
        return (go, pick(r_new, r), pick(c_new, c), pick(ans_new, ans), x,
                pick(dc_da_new, dc_da), pick(dans_da_new, dans_da))

    zeros, ones = fnp.zeros_like(a), fnp.ones_like(a)
    vals = lax.while_loop(lambda v: any_true(v[0]), body, (enabled, a, ones, ones, x, zeros, zeros))
    ans, dans_da = vals[3], vals[6]
    dlogax_da = fnp.log(x) - lax.digamma(a + one)
    return -(dans_da + ans * dlogax_da) * x / a


def _continued_fraction(x, a, enabled, eps):
    """XLA's `IgammacContinuedFraction` in SAMPLE_DERIVATIVE mode."""
    dt = a.dtype.type

    def body(vals):
        (enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = vals
        c, y, z = c + dt(1), y + dt(1), z + dt(2)
        yc = y * c
        pk, qk = pkm1 * z - pkm2 * yc, qkm1 * z - qkm2 * yc
        nonzero = qk != dt(0)
        r = pk / qk
        t = select(nonzero, fnp.abs((ans - r) / r), fnp.ones_like(r))
        ans = select(nonzero, r, ans)
        dpk_da = dpkm1_da * z - pkm1 - dpkm2_da * yc + pkm2 * c
        dqk_da = dqkm1_da * z - qkm1 - dqkm2_da * yc + qkm2 * c
        dans_da_new = select(nonzero, (dpk_da - ans * dqk_da) / qk, dans_da)
        grad_cond = select(nonzero, fnp.abs(dans_da_new - dans_da), fnp.ones_like(dans_da))
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = dpkm1_da, dqkm1_da, dpk_da, dqk_da
        rescale = fnp.abs(pk) > dt(1 / eps)
        pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = (
            select(rescale, v * dt(eps), v)
            for v in (pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da))
        go = enabled & (grad_cond > dt(eps))
        new = (ans, t, y, z, pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da,
               dans_da_new)
        old = vals[1:5] + vals[6:]
        kept = [select(enabled, v_new, v_old) for v_new, v_old in zip(new, old)]
        return (go, *kept[:4], c, *kept[4:])

    y = dt(1) - a
    z = x + y + dt(1)
    pkm2, qkm2, pkm1 = fnp.ones_like(x), x, x + dt(1)
    qkm1 = z * x
    ans = pkm1 / qkm1
    zeros = fnp.zeros_like(x)
    dqkm1_da = -x
    dans_da = (zeros - ans * dqkm1_da) / qkm1
    init = (enabled, ans, fnp.ones_like(x), y, z, fnp.zeros((), x.dtype), pkm1, qkm1, pkm2,
            qkm2, zeros, zeros, zeros, dqkm1_da, dans_da)
    vals = lax.while_loop(lambda v: (v[5] < dt(2000)) & any_true(v[0]), body, init)
    ans, dans_da = vals[1], vals[14]
    dlogax_da = fnp.log(x) - lax.digamma(a)
    return -(dans_da + ans * dlogax_da) * x


def random_gamma_grad(a, x):
    """`dx/da` for Gamma(a, 1) samples `x` at a fixed CDF value (JAX's
    `lax.random_gamma_grad`), elementwise; float16 is computed in float32.

    Example:
        >>> random_gamma_grad(fnp.array([1.0, 2.0]), fnp.array([0.5, 3.0]))
        Array([0.8069791, 1.3217987], dtype=float32)
    """
    a, x = fnp.broadcast_arrays(a, x)
    dtype = a.dtype
    if dtype.itemsize < 4:
        return random_gamma_grad(a.astype(np.float32), x.astype(np.float32)).astype(dtype)
    eps = float(np.finfo(dtype).eps)
    is_nan = fnp.isnan(a) | fnp.isnan(x)
    x_is_zero = x == dtype.type(0)
    domain_error = (x < dtype.type(0)) | (a <= dtype.type(0))
    use_cf = (x > dtype.type(1)) & (x > a)
    log_ax = a * fnp.log(x) - x - lax.lgamma(a)
    underflow = log_ax < -dtype.type(np.log(np.finfo(dtype).max))
    enabled = ~(x_is_zero | domain_error | underflow | is_nan)
    out = select(use_cf, -_continued_fraction(x, a, enabled & use_cf, eps),
                     _series(x, a, enabled & ~use_cf, eps))
    out = select(x_is_zero, fnp.zeros_like(out), out)
    return select(domain_error | is_nan, fnp.full_like(a, np.nan), out)
