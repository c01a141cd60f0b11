"""Order statistics and covariances: `quantile`, `percentile`, `nanquantile`,
`nanpercentile`, `nanmedian`, `cov`, `corrcoef`.

Quantiles sort the reduced axes (flattened into one, last) and interpolate between two
gathered order statistics, as JAX does (its `nearest` rounds a tie down, NumPy's to the even
index); derivatives flow through the sort's permutation. Imports sibling numpy modules.
"""

import numpy as np

from funcgrad import errors, lax
from funcgrad.numpy._util import (
    asarray_operand,
    canonical_axes,
    check_no_out,
    convert,
    dtype_of,
    promote,
    shape_of,
    user_dtype,
)
from funcgrad.numpy.indexing import take_along_axis
from funcgrad.numpy.logic import isnan, logical_not, where
from funcgrad.numpy.math import (
    add,
    conj,
    maximum,
    minimum,
    multiply,
    real,
    sqrt,
    subtract,
    true_divide,
)
from funcgrad.numpy.products import dot
from funcgrad.numpy.reductions import any as any_
from funcgrad.numpy.reductions import cumsum, sum
from funcgrad.numpy.shape import (
    atleast_2d,
    broadcast_to,
    concatenate,
    diagonal,
    expand_dims,
    reshape,
    transpose,
)

__all__ = ["corrcoef", "cov", "nanmedian", "nanpercentile", "nanquantile", "percentile",
           "quantile"]

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """The `q`-th quantiles (scalar or 1-D `q` in [0, 1]) of `a` over `axis`; a slice
    holding a NaN gives NaN. Result shape: `q.shape` + the kept axes.

    Args:
        method: "linear" (interpolate), "lower", "higher", "midpoint", "nearest" (a tie
            rounds down, as JAX) or "inverted_cdf" (the only one taking `weights`, which
            have `a`'s shape or the reduced axes' shape).

    Example:
        >>> fnp.quantile(fnp.array([1.0, 2.0, 3.0, 4.0]), 0.5)
        Array(2.5, dtype=float32)
    """
    return _quantile("quantile", a, q, axis, out, method, keepdims, False, weights)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, out_sharding=None):
    """`quantile` with `q` in percent (0-100).

    Example:
        >>> fnp.percentile(fnp.array([1.0, 2.0, 3.0, 4.0]), 50)
        Array(2.5, dtype=float32)
    """
    from funcgrad.numpy.creation import place
    (q,) = promote("percentile", [q], inexact=True, broadcast=False)
    return place("percentile", _quantile("percentile", a, true_divide(q, 100.0), axis, out,
                                         method, keepdims, False, weights), None, out_sharding)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    """`quantile` ignoring NaNs (NaN only where a slice holds nothing else).

    Example:
        >>> fnp.nanquantile(fnp.array([1.0, fnp.nan, 3.0]), 0.5)
        Array(2., dtype=float32)
    """
    return _quantile("nanquantile", a, q, axis, out, method, keepdims, True, weights)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    """`percentile` ignoring NaNs.

    Example:
        >>> fnp.nanpercentile(fnp.array([1.0, fnp.nan, 3.0]), 50)
        Array(2., dtype=float32)
    """
    (q,) = promote("nanpercentile", [q], inexact=True, broadcast=False)
    return _quantile("nanpercentile", a, true_divide(q, 100.0), axis, out, method, keepdims,
                     True, weights)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median over `axis` ignoring NaNs.

    Example:
        >>> fnp.nanmedian(fnp.array([[1.0, fnp.nan], [2.0, 4.0]]), axis=1)
        Array([1., 3.], dtype=float32)
    """
    return _quantile("nanmedian", a, 0.5, axis, out, "linear", keepdims, True, None)


def _flatten_reduced(a, axes):
    """`a` with the reduced `axes` moved last and merged: (kept..., n)."""
    shape = shape_of(a)
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    moved = transpose(a, kept + axes) if kept + axes != tuple(range(len(shape))) else a
    return reshape(moved, tuple(shape[i] for i in kept) + (int(np.prod(
        [shape[i] for i in axes], dtype=np.int64)),))


def _prepare(name, a, q, axis, weights, method):
    if method not in _METHODS:
        raise errors.op_error(name, f"method must be one of {', '.join(_METHODS)}, got "
                              f"{errors.short_repr(method)}", cls=errors.FuncgradValueError)
    if weights is not None and method != "inverted_cdf":
        raise errors.op_error(name, f"method {errors.short_repr(method)} takes no weights; only "
                              "'inverted_cdf' does (as in JAX)", cls=errors.FuncgradValueError)
    a, q = promote(name, [a, q], inexact=True, broadcast=False)
    if dtype_of(a).kind == "c":
        raise errors.op_error(name, "complex input is not supported (the order is not "
                              "defined)", cls=errors.FuncgradTypeError)
    if len(shape_of(q)) > 1:
        raise errors.op_error(name, f"q must have rank <= 1, got shape {shape_of(q)}",
                              cls=errors.FuncgradValueError)
    axes = canonical_axes(name, axis, len(shape_of(a)))
    if weights is not None:
        weights = convert(asarray_operand(name, weights), dtype_of(a))
        ws, shape = shape_of(weights), shape_of(a)
        if ws != shape:
            if axis is None or ws != tuple(shape[i] for i in axes):
                raise errors.op_error(name, f"weights of shape {ws} must have the shape of a "
                                      f"{shape} or of its reduced axes",
                                      cls=errors.FuncgradValueError)
            weights = lax.broadcast_in_dim(weights, shape, axes)
    return a, q, axes, weights


def _quantile(name, a, q, axis, out, method, keepdims, squash_nans, weights):
    check_no_out(name, out)
    a, q, axes, weights = _prepare(name, a, q, axis, weights, method)
    shape = shape_of(a)
    x = _flatten_reduced(a, axes)
    w = None if weights is None else _flatten_reduced(weights, axes)
    n = shape_of(x)[-1]
    if n == 0:
        raise errors.op_error(name, f"of an empty reduction (shape {shape}, axis {axis})",
                              cls=errors.FuncgradValueError)
    d = len(shape_of(x)) - 1
    if w is None:
        srt = lax.sort(x, dimension=d)
    else:
        srt, w = lax.sort((x, w), dimension=d, num_keys=1)
    nan = isnan(srt)
    counts = (sum(logical_not(nan), axis=-1, dtype=dtype_of(q)) if squash_nans
              else lax.full(shape_of(x)[:-1], n, dtype_of(q)))
    qs, kept = shape_of(q), shape_of(x)[:-1]
    qq = reshape(q, qs + (1,) * len(kept))
    big = broadcast_to(srt, qs + shape_of(srt))

    def at(index):  # the order statistics at integer `index` (shape qs + kept)
        return take_along_axis(big, expand_dims(index, -1), axis=-1)[..., 0]
    if method == "inverted_cdf":
        result = _inverted_cdf(srt, w, nan, qq, counts, at)
    else:
        result = _interpolated(method, qq, counts, at)
    if squash_nans:
        bad = counts == 0
    else:
        bad = any_(nan, axis=-1)
    result = where(bad, np.nan, result)
    if keepdims:
        result = reshape(result, qs + tuple(1 if i in axes else s for i, s in enumerate(shape)))
    return result


def _interpolated(method, qq, counts, at):
    pos = multiply(qq, subtract(counts, 1))
    low, high = lax.floor(pos), lax.ceil(pos)
    hw = subtract(pos, low)
    top = subtract(counts, 1)
    lo = at(maximum(0, minimum(low, top)).astype(np.int32))
    hi = at(maximum(0, minimum(high, top)).astype(np.int32))
    if method == "linear":
        return add(multiply(lo, subtract(1, hw)), multiply(hi, hw))
    if method == "lower":
        return lo
    if method == "higher":
        return hi
    if method == "nearest":
        return where(hw <= 0.5, lo, hi)
    return multiply(add(lo, hi), 0.5)  # midpoint


def _inverted_cdf(srt, w, nan, qq, counts, at):
    """The first order statistic whose cumulative weight reaches q of the total (NaN data
    and negative or NaN weights count 0; a negative or NaN weight makes the result NaN)."""
    if w is None:
        w = lax.full_like(srt, 1)
    bad_w = (w < 0) | isnan(w)
    clean = where(bad_w | nan, 0, w)
    cw = cumsum(clean, axis=-1)
    total = cw[..., -1]
    target = multiply(qq, total)
    idx = sum(cw < expand_dims(target, -1), axis=-1)  # shape q.shape + kept
    idx = maximum(0, minimum(idx, subtract(counts, 1).astype(idx.dtype)))
    return where(any_(bad_w, axis=-1), np.nan, at(idx))


# --- covariance -------------------------------------------------------------------------------
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    """The covariance matrix of the variables in the rows of `m` (columns without
    `rowvar`), stacked with those of `y`; `fweights` (integer repeat counts) and `aweights`
    weight the observations, `ddof` (default 1, or 0 with `bias`) corrects the normalization.

    Example:
        >>> fnp.cov(fnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
        Array([[ 1., -1.],
               [-1.,  1.]], dtype=float32)
    """
    if ddof is not None and ddof != int(ddof):
        raise errors.op_error("cov", f"ddof must be an integer, got {ddof}",
                              cls=errors.FuncgradValueError)
    parts = [m] if y is None else [m, y]
    xs = promote("cov", parts, inexact=True, broadcast=False)
    if dtype is not None:
        xs = [convert(x, user_dtype(dtype)) for x in xs]
    if len(shape_of(xs[0])) > 2:
        raise errors.op_error("cov", f"m has more than 2 dimensions ({shape_of(xs[0])})",
                              cls=errors.FuncgradValueError)
    xs = [atleast_2d(x) for x in xs]
    if not rowvar:
        xs = [transpose(x) for x in xs]
    x = concatenate(xs, 0) if len(xs) > 1 else xs[0]
    if ddof is None:
        ddof = 0 if bias else 1
    n_obs = shape_of(x)[1]
    w = None
    for weights, what in ((fweights, "fweights"), (aweights, "aweights")):
        if weights is None:
            continue
        wt = asarray_operand("cov", weights)
        if shape_of(wt) != (n_obs,):
            raise errors.op_error("cov", f"{what} must be 1-D with one entry per observation "
                                  f"({n_obs}), got shape {shape_of(wt)}",
                                  cls=errors.FuncgradValueError)
        wt = convert(wt, dtype_of(x))
        w = wt if w is None else multiply(w, wt)
    if w is None:
        avg = true_divide(sum(x, axis=1), n_obs)
        w_sum = n_obs
        fact = n_obs - ddof
    else:
        w_sum = sum(w)
        avg = true_divide(sum(multiply(x, w), axis=1), w_sum)
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = subtract(w_sum, ddof)
        else:
            a = convert(asarray_operand("cov", aweights), dtype_of(x))
            fact = subtract(w_sum, true_divide(multiply(ddof, sum(multiply(w, a))), w_sum))
    xc = subtract(x, avg[:, None])
    xw = xc if w is None else multiply(xc, w)
    c = true_divide(dot(xw, conj(transpose(xc))), fact)
    return c[0, 0] if shape_of(c) == (1, 1) else c


def corrcoef(x, y=None, rowvar=True, dtype=None):
    """Pearson correlation coefficients: `cov(x, y, rowvar)` normalized by the standard
    deviations (real parts clipped to [-1, 1], as NumPy).

    Example:
        >>> fnp.corrcoef(fnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.5]]))[0, 1].round(4)
        Array(-0.982, dtype=float32)
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if not shape_of(c):
        return true_divide(c, c)
    d = diagonal(c)
    s = sqrt(real(d)) if dtype_of(d).kind == "c" else sqrt(d)
    c = true_divide(true_divide(c, s[:, None]), s[None, :])
    if dtype_of(c).kind == "c":
        return lax.complex(lax.clamp(-1.0, real(c), 1.0), lax.imag(c))
    return where(c > 1, 1.0, where(c < -1, -1.0, c)).astype(dtype_of(c))
