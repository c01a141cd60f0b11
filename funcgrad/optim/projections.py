"""optax.projections: Euclidean projections of a pytree onto convex sets (boxes, balls,
spheres, the simplex, hyperplanes), for projected gradient methods.

    params = projection_simplex(apply_updates(params, updates))

A pytree is treated as one vector (all leaves together). `projection_simplex` has optax's
derivative (the Jacobian of the projection on its support). Imports `funcgrad.numpy`,
`funcgrad.lax`, `funcgrad.custom_derivatives`, `funcgrad.tree_util` and `optim.tree_utils`.
"""

from typing import Any

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.custom_derivatives import custom_jvp
from funcgrad.optim import tree_utils as tu
from funcgrad.tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = [
    "projection_box", "projection_halfspace", "projection_hypercube", "projection_hyperplane",
    "projection_l1_ball", "projection_l1_sphere", "projection_l2_ball", "projection_l2_sphere",
    "projection_linf_ball", "projection_non_negative", "projection_simplex",
    "projection_vector",
]


def projection_non_negative(tree: Any) -> Any:
    """`max(x, 0)` leafwise: the projection onto the non-negative orthant.

    Example:
        >>> projection_non_negative({'w': fnp.array([-1.0, 2.0])})
        {'w': Array([0., 2.], dtype=float32)}
    """
    return tree_map(lambda x: fnp.maximum(x, 0), tree)


def projection_box(tree: Any, lower: Any, upper: Any) -> Any:
    """`clip(x, lower, upper)` leafwise (`lower` and `upper` are trees like `tree`, or scalars
    when `tree` is one array)."""
    return tree_map(fnp.clip, tree, lower, upper)


def projection_hypercube(tree: Any, scale: Any = 1) -> Any:
    """The projection onto `[0, scale]` (a box)."""
    return projection_box(tree, lower=0, upper=scale)


@custom_jvp
def _projection_unit_simplex(values):
    n = values.shape[0]
    u = fnp.sort(values)[::-1]
    cumsum_u = fnp.cumsum(u)
    ind = fnp.arange(n) + 1
    idx = fnp.count_nonzero(1 / ind + (u - cumsum_u / ind) > 0)
    return fnp.maximum(1 / idx + (values - cumsum_u[idx - 1] / idx), 0)


@_projection_unit_simplex.defjvp
def _projection_unit_simplex_jvp(primals, tangents):
    (values,), (values_dot,) = primals, tangents
    out = _projection_unit_simplex(values)
    supp = out > 0
    card = fnp.count_nonzero(supp)
    return out, supp * values_dot - (fnp.dot(supp.astype(values_dot.dtype), values_dot)
                                     / card) * supp


def _ravel(tree):
    leaves, treedef = tree_flatten(tree)
    flat = fnp.concatenate([fnp.ravel(x) for x in leaves])
    splits = np.cumsum([int(np.size(x)) for x in leaves])[:-1].tolist()

    def unravel(vector):
        pieces = fnp.split(vector, splits) if splits else [vector]
        return tree_unflatten(treedef, [fnp.reshape(p, x.shape).astype(x.dtype)
                                        for p, x in zip(pieces, leaves)])
    return flat, unravel


def projection_simplex(tree: Any, scale=1) -> Any:
    """The projection onto the simplex `{x >= 0, sum(x) = scale}` (all leaves together).

    Example:
        >>> projection_simplex(fnp.array([0.5, 2.0, -1.0]))
        Array([0., 1., 0.], dtype=float32)
    """
    values, unravel = _ravel(tree)
    return unravel(scale * _projection_unit_simplex(values / scale))


def projection_l1_sphere(tree: Any, scale=1) -> Any:
    """The projection onto the l1 sphere `{sum |x| = scale}`."""
    signs = tree_map(fnp.sign, tree)
    return tu.tree_mul(signs, projection_simplex(tree_map(fnp.abs, tree), scale))


def projection_l1_ball(tree: Any, scale=1) -> Any:
    """The projection onto the l1 ball `{sum |x| <= scale}`."""
    return lax.cond(tu.tree_norm(tree, ord=1) <= scale, lambda t: t,
                    lambda t: projection_l1_sphere(t, scale), tree)


def projection_l2_sphere(tree: Any, scale=1) -> Any:
    """The projection onto the l2 sphere `{||x|| = scale}`: `x * scale / ||x||`."""
    return tu.tree_scale(scale / tu.tree_norm(tree), tree)


def projection_l2_ball(tree: Any, scale=1) -> Any:
    """The projection onto the l2 ball `{||x|| <= scale}`."""
    squared_norm = tu.tree_norm(tree, squared=True)
    return tu.tree_scale(scale / fnp.sqrt(fnp.maximum(squared_norm, scale ** 2)), tree)


def projection_linf_ball(tree: Any, scale=1) -> Any:
    """The projection onto the l-infinity ball: every entry clipped to `[-scale, scale]`."""
    return projection_box(tree, tu.tree_full_like(tree, -scale),
                          tu.tree_full_like(tree, scale))


def projection_vector(x: Any, a: Any) -> Any:
    """The projection of `x` onto the line spanned by `a`: `(<x, a> / <a, a>) a`."""
    return tu.tree_scale(tu.tree_vdot(x, a) / tu.tree_vdot(a, a), a)


def projection_hyperplane(x: Any, a: Any, b) -> Any:
    """The projection onto the hyperplane `{<a, x> = b}`."""
    return tu.tree_add_scale(x, (b - tu.tree_vdot(x, a)) / tu.tree_vdot(a, a), a)


def projection_halfspace(x: Any, a: Any, b) -> Any:
    """The projection onto the half-space `{<a, x> <= b}`."""
    scalar = fnp.minimum((b - tu.tree_vdot(x, a)) / tu.tree_vdot(a, a), 0)
    return tu.tree_add_scale(x, scalar, a)
