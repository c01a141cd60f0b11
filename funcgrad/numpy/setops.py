"""Set functions of funcgrad.numpy: the Array API's `unique_all`, `unique_counts`,
`unique_inverse`, `unique_values`, and NumPy's `unique` (flattened).

One path, built from lax: a stable sort of the flattened input, a mask of the first element
of each run of equal values, and `nonzero(mask, size=...)` for the run starts. Without
`size=` the input must be concrete (eager): the number of unique values is counted first;
with JAX's `size=`/`fill_value=` the result has a static length and works under every
transform. Imports lax and the sibling numpy modules only.
"""

from typing import NamedTuple

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import concrete_value
from funcgrad.numpy import _util
from funcgrad.numpy.indexing import take
from funcgrad.numpy.reductions import cumsum
from funcgrad.numpy.searching import nonzero

__all__ = ["unique", "unique_all", "unique_counts", "unique_inverse", "unique_values"]


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _run_starts(name, x, size, equal_nan):
    """(sorted values, sort permutation, new-run mask, run starts padded with x.size, size):
    `size + 1` starts, so the last kept run's count is exact even when truncated."""
    flat = lax.reshape(x, (x.size,))
    idt, n = dtypes.default_int(), x.size
    srt, perm = lax.sort((flat, lax.iota(idt, n)), dimension=0, is_stable=True, num_keys=1)
    new = lax.ne(lax.slice(srt, (1,), (n,)), lax.slice(srt, (0,), (n - 1,)))
    if equal_nan and dtypes.kind(x.dtype) in "fc":
        both_nan = lax.bitwise_and(lax.ne(lax.slice(srt, (1,), (n,)), lax.slice(srt, (1,), (n,))),
                                   lax.ne(lax.slice(srt, (0,), (n - 1,)),
                                          lax.slice(srt, (0,), (n - 1,))))
        new = lax.bitwise_and(new, lax.bitwise_not(both_nan))
    mask = lax.concatenate([lax.full((1,), True, np.dtype(bool)), new], 0)
    if size is None:
        known = concrete_value(mask)
        if known is None:
            raise errors.op_error(
                name, f"the input {x.aval} is traced, so the number of unique values (the "
                "output shape) is unknown", cls=errors.ConcretizationTypeError,
                hint="pass a static size=N (and optionally fill_value=...), as in JAX")
        size = int(np.count_nonzero(known))
    starts = nonzero(mask, size=size + 1, fill_value=n)[0]
    return srt, perm, mask, starts, size


def _unique(name, x, size, fill_value, equal_nan=False):
    """(values, indices, inverse_indices, counts) of `x`, each of length `size` (padded)."""
    x = _util.asarray_operand(name, x)
    if size is not None:
        size = _util.static_int(name, size, "size")
    idt = dtypes.default_int()
    if x.size == 0:
        size = size or 0
        fill = 0 if fill_value is None else fill_value
        return (lax.full((size,), fill, x.dtype), lax.full((size,), 0, idt),
                lax.full(x.shape, 0, idt), lax.full((size,), 0, idt))
    srt, perm, mask, starts, size = _run_starts(name, x, size, equal_nan)
    n = x.size
    first = lax.slice(starts, (0,), (size,))
    counts = lax.sub(lax.slice(starts, (1,), (size + 1,)), first)
    valid = lax.lt(first, lax.full((), n, idt))
    at = lax.min(first, lax.full((), n - 1, idt))
    values = _util.select(valid, _fill(name, fill_value, srt, size), take(srt, at))
    indices = _util.select(valid, lax.full((size,), 0, idt), take(perm, at))
    group = lax.sub(cumsum(lax.convert_element_type(mask, idt)), lax.full((), 1, idt))
    inverse = lax.full((n,), 0, idt).at[perm].set(group, unique_indices=True)
    return values, indices, lax.reshape(inverse, x.shape), counts


def _fill(name, fill_value, srt, size):
    """The padding of `values`: `fill_value`, or (as JAX) the smallest value."""
    if fill_value is None:
        fill = lax.reshape(lax.slice(srt, (0,), (1,)), ())
    else:
        fill = _util.convert(_util.asarray_operand(name, fill_value), srt.dtype, False)
        if fill.ndim:
            raise errors.op_error(name, f"fill_value must be a scalar, got shape {fill.shape}",
                                  cls=errors.FuncgradValueError)
    return lax.broadcast_in_dim(fill, (size,), ())


def unique_values(x, /, *, size=None, fill_value=None):
    """The sorted unique elements of `x` (flattened); NaNs are distinct, as the Array API
    says. With `size=`, exactly `size` values (padded with `fill_value`, default the smallest
    value), which works under jit.

    Example:
        >>> fnp.unique_values(fnp.array([3, 1, 3, 2]))
        Array([1, 2, 3], dtype=int32)
    """
    return _unique("unique_values", x, size, fill_value)[0]


def unique_counts(x, /, *, size=None, fill_value=None):
    """`(values, counts)` of the unique elements of `x`; padded counts are 0.

    Example:
        >>> fnp.unique_counts(fnp.array([3, 1, 3])).counts
        Array([1, 2], dtype=int32)
    """
    values, _, _, counts = _unique("unique_counts", x, size, fill_value)
    return UniqueCountsResult(values, counts)


def unique_inverse(x, /, *, size=None, fill_value=None):
    """`(values, inverse_indices)`: `values[inverse_indices]` rebuilds `x` (same shape).

    Example:
        >>> fnp.unique_inverse(fnp.array([3, 1, 3])).inverse_indices
        Array([1, 0, 1], dtype=int32)
    """
    values, _, inverse, _ = _unique("unique_inverse", x, size, fill_value)
    return UniqueInverseResult(values, inverse)


def unique_all(x, /, *, size=None, fill_value=None):
    """`(values, indices, inverse_indices, counts)`: `indices` of the first occurrences in
    the flattened `x`; padded indices and counts are 0.

    Example:
        >>> fnp.unique_all(fnp.array([3, 1, 3])).indices
        Array([1, 0], dtype=int32)
    """
    return UniqueAllResult(*_unique("unique_all", x, size, fill_value))


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):
    """NumPy's `unique` of the flattened `ar` (NaNs collapse unless `equal_nan=False`), with
    JAX's `size=`/`fill_value=` for use under jit; `inverse` has the shape of `ar`. The
    values are always sorted (`sorted` is accepted: JAX does not use it either).

    Example:
        >>> fnp.unique(fnp.array([2, 1, 2]), return_counts=True)
        (Array([1, 2], dtype=int32), Array([1, 2], dtype=int32))
    """
    if axis is not None:
        raise errors.op_error("unique", "axis= is not supported", hint="flatten or use "
                              "unique over a reshaped array")
    values, index, inverse, counts = _unique("unique", ar, size, fill_value, equal_nan)
    extra = [v for v, on in ((index, return_index), (inverse, return_inverse),
                             (counts, return_counts)) if on]
    return (values, *extra) if extra else values
