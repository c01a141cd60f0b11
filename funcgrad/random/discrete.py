"""Counting distributions, JAX's algorithms on the same bits: `geometric` (inverse CDF),
`poisson` (Knuth's product of uniforms below 10, Hormann's transformed rejection above),
`binomial` (geometric inversion for small means, BTRS rejection otherwise) and `multinomial`
(a scan of conditional binomials). The rejection loops are `while_loop`s over the whole
array, as in JAX: every element keeps drawing until it is accepted."""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, lax
from funcgrad.random import prng
from funcgrad.random.common import (
    any_true,
    compiled,
    float_dtype,
    int_dtype,
    param,
    sample_shape,
    select,
)
from funcgrad.random.keys import unwrap
from funcgrad.random.samplers import unit_uniform


def _inexact(x):
    return x if dtypes.kind(x.dtype) in "fc" else x.astype(dtypes.default_float())


@compiled
def _geometric(key, p, *, shape, dtype):
    p = _inexact(p)
    u = unit_uniform(key, shape, p.dtype)
    u = fnp.where(u == 0, 1, u)  # JAX's guard against log(0), keeping its numbers
    log_one_minus_p = fnp.broadcast_to(lax.log1p(-p), shape)
    return (lax.floor(lax.div(lax.log(u), log_one_minus_p)) + 1).astype(dtype)


def geometric(key, p, shape=None, dtype=None, *, out_sharding=None):
    """Geometric samples (trials up to the first success, from 1) of success probability `p`.

    Example:
        >>> bool((geometric(PRNGKey(0), 0.3, (5,)) >= 1).all())
        True
    """
    data, _ = unwrap("geometric", key)
    dtype = int_dtype("geometric", dtype)
    p = param("geometric", "p", p)
    return _geometric(data, p, shape=sample_shape("geometric", shape, p), dtype=dtype)


# --- poisson -----------------------------------------------------------------------------------
def _poisson_knuth(key, lam, shape, dtype):
    def body(carry):
        i, k, rng, log_prod = carry
        rng, subkey = prng.split2(rng)
        k = select(log_prod > -lam, k + 1, k)
        return i + 1, k, rng, log_prod + fnp.log(unit_uniform(subkey, shape, lam.dtype))

    start = (fnp.int32(0), fnp.zeros(shape, dtype), prng.key_words(key),
             fnp.zeros(shape, lam.dtype))
    k = lax.while_loop(lambda c: any_true(c[3] > -lam), body, start)[1]
    return (k - 1).astype(dtype)


def _poisson_rejection(key, lam, shape, dtype):
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = prng.split2(key, 3)
        u = unit_uniform(subkey_0, shape, lam.dtype) - 0.5
        v = unit_uniform(subkey_1, shape, lam.dtype)
        u_shifted = 0.5 - abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t))
        return i + 1, select(accept, k, k_out), accepted | accept, key

    start = (fnp.int32(0), fnp.full(shape, -1, lam.dtype), fnp.zeros(shape, bool),
             prng.key_words(key))
    k = lax.while_loop(lambda c: any_true(~c[2]), body, start)[1]
    return k.astype(dtype)


@compiled
def _poisson(key, lam, *, shape, dtype):
    lam = lax.convert_element_type(fnp.broadcast_to(lam, shape), np.dtype(np.float32))
    use_knuth = fnp.isnan(lam) | (lam < 10)
    lam_knuth = select(use_knuth, lam, fnp.zeros_like(lam))
    # the rejection method's acceptance tops out near 89% as lam grows: any large value
    lam_rejection = select(use_knuth, fnp.full_like(lam, 1e5), lam)
    result = select(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype),
                        _poisson_rejection(key, lam_rejection, shape, dtype))
    return select(lam == 0, fnp.zeros_like(result), result)


def poisson(key, lam, shape=None, dtype=None, *, out_sharding=None):
    """Poisson samples of rate `lam` (computed in float32, as JAX).

    Example:
        >>> poisson(PRNGKey(0), 3.0, (4,)).dtype
        dtype('int32')
    """
    data, _ = unwrap("poisson", key)
    dtype = int_dtype("poisson", dtype)
    lam = param("poisson", "lam", lam)
    return _poisson(data, lam, shape=sample_shape("poisson", shape, lam), dtype=dtype)


# --- binomial ----------------------------------------------------------------------------------
_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                           0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                           0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                           0.00833056343336287])


def _stirling_approx_tail(k):
    """log(k!) minus its Stirling approximation: a table below 10, the series above."""
    table = fnp.asarray(_STIRLING_TAIL.astype(k.dtype))
    small = k <= 9
    k = lax.clamp(k.dtype.type(0), k, k.dtype.type(9))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    return select(small, table[fnp.floor(k).astype(np.int32)], approx)


def _binomial_inversion(key, count, prob, shape, dtype):
    log1minusprob = fnp.log1p(-prob)

    def body(carry):
        i, num_geom, geom_sum, key = carry
        subkey, key = prng.split2(key)
        num_geom_out = select(geom_sum <= count, num_geom + 1, num_geom)
        u = unit_uniform(subkey, shape, prob.dtype)
        geom = fnp.ceil(fnp.log(u) / log1minusprob)
        return i + 1, num_geom_out, geom_sum + geom, key

    start = (fnp.int32(0), fnp.zeros(shape, prob.dtype), fnp.zeros(shape, prob.dtype),
             prng.key_words(key))
    k = lax.while_loop(lambda c: any_true(c[2] <= count), body, start)[1]
    return (k - 1).astype(dtype)


def _btrs(key, count, prob, shape, dtype):
    """Transformed rejection with squeeze (Hormann 1993)."""
    stddev = fnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = fnp.floor((count + 1) * prob)

    def body(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = prng.split2(key, 3)
        u = unit_uniform(subkey_0, shape, prob.dtype) - 0.5
        v = unit_uniform(subkey_1, shape, prob.dtype)
        us = 0.5 - fnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = fnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = fnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * fnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * fnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * fnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(k) - _stirling_approx_tail(count - k))
        accept = accept1 | (~reject & (v <= ub))
        return i + 1, select(accept, k, k_out), accepted | accept, key

    start = (fnp.int32(0), fnp.full(shape, -1, prob.dtype), fnp.zeros(shape, bool),
             prng.key_words(key))
    return lax.while_loop(lambda c: any_true(~c[2]), body, start)[1].astype(dtype)


def binomial_floats(key, count, prob, shape, dtype):
    """JAX's `_binomial` (TensorFlow's algorithm): inversion where `n * min(p, 1 - p) <= 10`,
    BTRS elsewhere, with NaN for invalid parameters and `inf` for an infinite count."""
    prob = _inexact(prob)
    count = fnp.broadcast_to(lax.convert_element_type(count, prob.dtype), shape)
    prob = fnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = select(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = fnp.isnan(count) | (count < 0.0)
    count_inf = fnp.isinf(count)
    q_is_nan, q_l_0 = fnp.isnan(q), q < 0.0
    q = select(q_is_nan | q_l_0, fnp.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = fnp.floor(count)
    count_inv = select(use_inversion, count, fnp.zeros_like(count))
    count_btrs = select(use_inversion, fnp.full_like(count, 1e4), count)
    q_btrs = select(use_inversion, fnp.full_like(q, 0.5), q)
    samples = select(use_inversion, _binomial_inversion(key, count_inv, q, shape, dtype),
                         _btrs(key, count_btrs, q_btrs, shape, dtype))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = select(invalid, fnp.full_like(samples, np.nan), samples)
    samples = select(count_inf & ~invalid, fnp.full_like(samples, np.inf), samples)
    return select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                      count.astype(dtype) - samples)


@compiled
def _binomial(key, n, p, *, shape, dtype):
    return binomial_floats(key, n, p, shape, dtype)


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial samples: successes in `n` trials of probability `p` (a float dtype, as JAX;
    NaN for a negative or NaN `n` or an invalid `p`).

    Example:
        >>> x = binomial(PRNGKey(0), 10.0, 0.3, (6,))
        >>> bool(((x >= 0) & (x <= 10)).all())
        True
    """
    data, _ = unwrap("binomial", key)
    dtype = float_dtype("binomial", dtype)
    n, p = param("binomial", "n", n), param("binomial", "p", p)
    return _binomial(data, n, p, shape=sample_shape("binomial", shape, n, p), dtype=dtype)


# --- multinomial -------------------------------------------------------------------------------
@compiled
def _multinomial(key, n, p, *, shape, dtype, unroll):
    n = fnp.broadcast_to(n, shape[:-1])
    p = fnp.moveaxis(fnp.broadcast_to(p, shape), -1, 0)
    remaining = fnp.flip(fnp.cumsum(fnp.flip(p, 0), axis=0), 0)
    ratios = p / fnp.where(remaining == 0, 1, remaining)
    keys = prng.hash_counters(key, (ratios.shape[0],))  # split(key, n) as its two words

    def step(remainder, ratio_key):
        ratio, k = ratio_key
        count = binomial_floats(k, remainder, fnp.clip(ratio, 0, 1), remainder.shape,
                                remainder.dtype)
        return remainder - count, count

    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    return fnp.moveaxis(counts, 0, -1).astype(dtype)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Multinomial counts of `n` draws over the categories of `p` (last axis): a scan of
    binomials, each category's count given the draws left.

    Args:
        key: a key.
        n: the number of draws (broadcast to `shape[:-1]`).
        p: category probabilities, summing to 1 along the last axis.
        shape: the result shape (default `p.shape`).
        dtype: the result dtype (default float32, float64 with x64).
        unroll: the scan's unroll factor.

    Example:
        >>> multinomial(PRNGKey(0), 10.0, fnp.array([0.2, 0.3, 0.5])).sum()
        Array(10., dtype=float32)
    """
    data, _ = unwrap("multinomial", key)
    n, p = param("multinomial", "n", n), param("multinomial", "p", p)
    common = np.dtype(fnp.result_type(n, p))
    common = common if dtypes.kind(common) in "fc" else dtypes.default_float()
    n, p = n.astype(common), p.astype(common)
    shape = tuple(p.shape) if shape is None else sample_shape("multinomial", shape)
    dtype = float_dtype("multinomial", dtype, kinds="biuf")
    return _multinomial(data, n, p, shape=shape, dtype=dtype, unroll=unroll)
