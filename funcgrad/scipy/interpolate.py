"""`funcgrad.scipy.interpolate`: `RegularGridInterpolator`, as `jax.scipy.interpolate`
(linear or nearest interpolation on a rectilinear grid in any number of dimensions).

The interpolator is a pytree (its grid, values and fill value are leaves), so it can be
made inside `jit` or passed to it, and it is differentiable in the values, the grid and the
query points. Imports funcgrad.numpy and tree_util.

    >>> f = RegularGridInterpolator((fnp.array([0.0, 1.0]),), fnp.array([0.0, 10.0]))
    >>> f(fnp.array([[0.25]]))
    Array([2.5], dtype=float32)
"""

import itertools

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.tree_util import register_pytree_node

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")


def _points_array(points, ndim):
    """Query points as an (..., ndim) array (a tuple of coordinate arrays is stacked)."""
    if isinstance(points, tuple) and len(points) == 1:
        points = points[0]
    if isinstance(points, tuple):
        p = fnp.broadcast_arrays(*[fnp.asarray(q) for q in points])
        return fnp.stack(p, axis=-1)
    points = fnp.asarray(points)
    return points.reshape(-1, ndim) if points.ndim == 1 else points


class RegularGridInterpolator:
    """Interpolation of `values` given on the grid `points` (one increasing 1-D array per
    axis; trailing axes of `values` are carried along).

    Args:
        points: the grid coordinates, one array per interpolated axis.
        values: the data, of shape (len(points[0]), ..., len(points[-1]), extra...).
        method: "linear" (default) or "nearest".
        bounds_error: must be False (as in JAX: it could not be checked under jit).
        fill_value: the value outside the grid (default NaN); None extrapolates.

    Example:
        >>> g = fnp.array([0.0, 1.0, 2.0])
        >>> f = RegularGridInterpolator((g, g), g[:, None] + 10 * g[None, :])
        >>> f(fnp.array([[0.5, 1.5]]))
        Array([15.5], dtype=float32)
    """

    def __init__(self, points, values, method="linear", bounds_error=False,
                 fill_value=np.nan):
        if method not in _METHODS:
            raise errors.op_error("RegularGridInterpolator", f"method "
                                                             f"{errors.short_repr(method)} is not "
                                  "defined; use 'linear' or 'nearest'",
                                  cls=errors.FuncgradValueError)
        if bounds_error:
            raise errors.op_error("RegularGridInterpolator", "bounds_error=True is not "
                                  "supported (as in JAX: it cannot be checked under jit)",
                                  cls=errors.FuncgradValueError,
                                  hint="use fill_value (NaN by default) for outside points")
        values = fnp.asarray(values)
        if len(points) > values.ndim:
            raise errors.op_error("RegularGridInterpolator", f"there are {len(points)} point "
                                  f"arrays, but values has {values.ndim} dimensions",
                                  cls=errors.FuncgradValueError)
        if values.dtype.kind not in "fc":
            values = values.astype(fnp.result_type(values, 1.0))
        for i, p in enumerate(points):
            if np.ndim(p) != 1 or np.shape(p)[0] != values.shape[i]:
                raise errors.op_error("RegularGridInterpolator", f"points[{i}] must be 1-D "
                                      f"with {values.shape[i]} entries (values' axis {i}), got "
                                      f"shape {np.shape(p)}", cls=errors.FuncgradValueError)
        self.method, self.bounds_error = method, bounds_error
        self.grid = tuple(fnp.asarray(p) for p in points)
        self.values = values
        self.fill_value = None if fill_value is None else fnp.asarray(fill_value)

    def __call__(self, xi, method=None):
        method = self.method if method is None else method
        if method not in _METHODS:
            raise errors.op_error("RegularGridInterpolator", f"method "
                                                             f"{errors.short_repr(method)} is not "
                                  "defined", cls=errors.FuncgradValueError)
        nd = len(self.grid)
        xi = _points_array(xi, nd)
        if xi.shape[-1] != nd:
            raise errors.op_error("RegularGridInterpolator", f"the query points have "
                                  f"dimension {xi.shape[-1]}, the grid {nd}",
                                  cls=errors.FuncgradValueError)
        shape = xi.shape
        flat = xi.reshape(-1, nd)
        indices, distances, outside = self._find(flat.T)
        out = (self._linear(indices, distances) if method == "linear"
               else self._nearest(indices, distances))
        if self.fill_value is not None:
            mask = outside.reshape(outside.shape + (1,) * (out.ndim - 1))
            out = fnp.where(mask, self.fill_value.astype(out.dtype), out)
        return out.reshape(shape[:-1] + self.values.shape[nd:])

    def _find(self, xi):
        indices, distances = [], []
        outside = fnp.zeros(xi.shape[1:], bool)
        for x, g in zip(xi, self.grid):
            i = fnp.clip(fnp.searchsorted(g, x) - 1, 0, g.shape[0] - 2)
            indices.append(i)
            distances.append((x - g[i]) / (g[i + 1] - g[i]))
            outside = outside | (x < g[0]) | (x > g[-1])
        return indices, distances, outside

    def _linear(self, indices, distances):
        extra = (slice(None),) + (None,) * (self.values.ndim - len(indices))
        total = 0.0
        for upper in itertools.product((False, True), repeat=len(indices)):  # the corners
            corner = tuple(i + 1 if u else i for i, u in zip(indices, upper))
            w = 1.0
            for u, d in zip(upper, distances):
                w = w * (d if u else 1 - d)
            total = total + self.values[corner] * w[extra]
        return total

    def _nearest(self, indices, distances):
        return self.values[tuple(fnp.where(d <= 0.5, i, i + 1)
                                 for i, d in zip(indices, distances))]


def _flatten(f):
    return (f.grid, f.values, f.fill_value), (f.method, f.bounds_error)


def _unflatten(aux, children):
    f = object.__new__(RegularGridInterpolator)
    f.grid, f.values, f.fill_value = children
    f.method, f.bounds_error = aux
    return f


register_pytree_node(RegularGridInterpolator, _flatten, _unflatten)
