"""The summary statistics of `jax.scipy.stats`: `mode`, `rankdata`, `sem`.

`mode` compares every pair along the axis (the count of each value), `rankdata` sorts and
finds the runs of ties; both trace under jit with static shapes. Imports funcgrad.numpy.

    >>> sem(fnp.array([1.0, 2.0, 3.0]))
    Array(0.57735026, dtype=float32)
"""

from typing import NamedTuple

import funcgrad.numpy as fnp
from funcgrad import dtypes, errors, lax

__all__ = ["ModeResult", "mode", "rankdata", "sem"]


class ModeResult(NamedTuple):
    """`mode`'s result: the most frequent values and how often they occur."""

    mode: object
    count: object


def _nan_policy(name, policy):
    if policy not in ("propagate", "omit", "raise"):
        raise errors.op_error(name, f"illegal nan_policy "
                                    f"{errors.short_repr(policy)}; expected 'propagate', "
                              "'omit' or 'raise'", cls=errors.FuncgradValueError)
    if policy != "propagate":
        raise errors.op_error(name, f"nan_policy="
                                    f"{errors.short_repr(policy)} is not supported (as in JAX)",
                              cls=errors.FuncgradValueError)


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """The most frequent value along `axis` (the smallest one among ties) and its count.

    Example:
        >>> mode(fnp.array([3, 1, 3, 2, 1, 3])).mode
        Array(3, dtype=int32)
    """
    _nan_policy("mode", nan_policy)
    x = fnp.atleast_1d(fnp.asarray(a))
    shape = x.shape
    if axis is None:
        x, ax = x.ravel(), 0
    else:
        ax = axis % x.ndim
    x = fnp.moveaxis(x, ax, -1)
    counts = fnp.sum(x[..., :, None] == x[..., None, :], axis=-1)  # how often each entry is
    best = fnp.max(counts, axis=-1, keepdims=True)
    big = fnp.where(counts == best, x, fnp.max(x, axis=-1, keepdims=True))
    m = fnp.min(big, axis=-1)
    c = best[..., 0].astype(dtypes.default_int())
    if keepdims:
        out_shape = tuple(1 for _ in shape) if axis is None else tuple(
            1 if i == ax else s for i, s in enumerate(shape))
        m, c = m.reshape(out_shape), c.reshape(out_shape)
    return ModeResult(m, c)


def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """The ranks (1-based) of the entries of `a` (flattened, or along `axis`); ties get the
    "average", "min", "max", "dense" or "ordinal" rank; a NaN makes every rank NaN.

    Example:
        >>> rankdata(fnp.array([10.0, 20.0, 10.0]))
        Array([1.5, 3. , 1.5], dtype=float32)
    """
    _nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise errors.op_error("rankdata", f"unknown method {errors.short_repr(method)}",
                              cls=errors.FuncgradValueError)
    if axis is not None:
        return fnp.apply_along_axis(lambda v: rankdata(v, method), axis, a)
    a = fnp.ravel(fnp.asarray(a))
    out = dtypes.default_float()
    n = a.shape[0]
    srt, order = lax.sort((a, fnp.arange(n)), num_keys=1)
    inv = fnp.zeros(n, order.dtype).at[order].set(fnp.arange(n, dtype=order.dtype))
    if method == "ordinal":
        ranks = (inv + 1).astype(out)
    else:
        new = fnp.concatenate([fnp.array([True]), srt[1:] != srt[:-1]])
        dense = fnp.cumsum(new)[inv]
        if method == "dense":
            ranks = dense.astype(out)
        else:
            starts = fnp.nonzero(new, size=n + 1, fill_value=n)[0].astype(out)
            lo, hi = starts[dense - 1] + 1, starts[dense]
            ranks = {"min": lo, "max": hi, "average": 0.5 * (lo + hi)}[method]
    return fnp.where(fnp.any(fnp.isnan(a)), fnp.nan, ranks).astype(out)


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """The standard error of the mean along `axis` (NaNs ignored with `nan_policy="omit"`).

    Example:
        >>> sem(fnp.array([[1.0, 2.0], [3.0, 6.0]]), axis=1)
        Array([0.5, 1.5], dtype=float32)
    """
    b = fnp.asarray(a)
    b = b.astype(fnp.result_type(b, 1.0))
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return fnp.std(b, axis, ddof=ddof, keepdims=keepdims) / fnp.sqrt(
            fnp.asarray(size, b.dtype))
    if nan_policy == "omit":
        count = fnp.sum(~fnp.isnan(b), axis, keepdims=keepdims)
        return fnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims) / fnp.sqrt(count).astype(
            b.dtype)
    raise errors.op_error("sem", f"nan_policy={errors.short_repr(nan_policy)} is not supported",
                          cls=errors.FuncgradValueError)
