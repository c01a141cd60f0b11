"""`funcgrad.scipy.ndimage`: `map_coordinates`, as `jax.scipy.ndimage` (interpolation of
order 0 or 1, JAX's boundary modes).

Each point is a weighted sum of the input at its neighbouring grid nodes (gathered with
integer indexing), so it is differentiable in the input and in the coordinates (almost
everywhere) and batches and compiles like any other composition. Imports funcgrad.numpy.

    >>> map_coordinates(fnp.array([0.0, 10.0]), [fnp.array([0.25])], order=1)
    Array([2.5], dtype=float32)
"""

import functools
import itertools
import operator

import funcgrad.numpy as fnp
from funcgrad import errors

__all__ = ["map_coordinates"]


def _mirror(index, size):
    s = size - 1  # the half-wavelength of a triangular wave
    return fnp.abs((index + s) % (2 * s) - s) if s else fnp.zeros_like(index)


def _reflect(index, size):
    return fnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_FIXERS = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: fnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round_half_away(a):
    return a if a.dtype.kind in "iu" else fnp.sign(a) * fnp.floor(fnp.abs(a) + 0.5)


def _nodes(coordinate, order):
    """(index, weight) pairs of the interpolation nodes of each coordinate."""
    if order == 0:
        return [(_round_half_away(coordinate).astype(fnp.int32), 1.0)]
    lower = fnp.floor(coordinate)
    upper = coordinate - lower
    index = lower.astype(fnp.int32)
    return [(index, 1 - upper), (index + 1, upper)]


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):  # noqa: A002
    """`input` interpolated at the points `coordinates` (one array per axis of `input`, all
    of the output's shape): `order` 0 (nearest) or 1 (linear). Outside the grid: `mode`
    "constant" (`cval` for any node outside, SciPy's "grid-constant"), "nearest", "wrap"
    (SciPy's "grid-wrap"), "mirror" or "reflect". Integer inputs round the result.

    Example:
        >>> x = fnp.arange(12.0).reshape(4, 3)
        >>> map_coordinates(x, [fnp.array([0.5, 2.0]), fnp.array([0.5, 1.0])], order=1)
        Array([2., 7.], dtype=float32)
    """
    x = fnp.asarray(input)
    coords = [fnp.asarray(c) for c in coordinates]
    if len(coords) != x.ndim:
        raise errors.op_error("map_coordinates", f"coordinates must be a sequence of length "
                              f"input.ndim ({x.ndim}), got {len(coords)}",
                              cls=errors.FuncgradValueError)
    if mode not in _FIXERS:
        raise errors.op_error("map_coordinates", f"mode {errors.short_repr(mode)} is not "
                              f"supported; the modes are {', '.join(_FIXERS)}",
                              cls=errors.FuncgradValueError)
    if order not in (0, 1):
        raise errors.op_error("map_coordinates", f"order must be 0 or 1 (as in JAX), got "
                              f"{order}", cls=errors.FuncgradValueError)
    cval = fnp.asarray(cval).astype(x.dtype)
    per_axis = []
    for c, size in zip(coords, x.shape):
        per_axis.append([(_FIXERS[mode](i, size), (i >= 0) & (i < size), w)
                         for i, w in _nodes(c, order)])
    terms = []
    for items in itertools.product(*per_axis):
        idx, valid, weights = zip(*items)
        value = x[tuple(idx)]
        if mode == "constant":
            value = fnp.where(functools.reduce(operator.and_, valid), value, cval)
        terms.append(functools.reduce(operator.mul, weights) * value)
    out = functools.reduce(operator.add, terms)
    if x.dtype.kind in "iu":
        out = _round_half_away(out)
    return out.astype(x.dtype)
