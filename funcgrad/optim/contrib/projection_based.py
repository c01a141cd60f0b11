"""GaLore (Zhao et al. 2024): the base optimizer runs on gradients projected onto their top
singular vectors, refreshed every `update_proj_gap` steps; as optax 0.2.8's contrib.

Imports `funcgrad.numpy`, `funcgrad.lax` and the optim modules it chains.
"""

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.errors import FuncgradTypeError, FuncgradValueError
from funcgrad.optim.base import GradientTransformation, chain
from funcgrad.optim.numerics import safe_increment
from funcgrad.optim.transforms import add_decayed_weights, scale_by_adam, scale_by_learning_rate
from funcgrad.tree_util import tree_flatten, tree_map, tree_structure, tree_transpose

__all__ = ["GaLoreDimensionNumbers", "GaLoreState", "galore", "scale_by_galore"]


class GaLoreDimensionNumbers(NamedTuple):
    """The input (`reduction_axis`) and output axes of a weight (together: all its axes)."""

    reduction_axis: Sequence[int] | int = 0
    output_axis: Sequence[int] | int = 1


def _is_dim_nums_leaf(x):
    return x is None or isinstance(x, GaLoreDimensionNumbers)


def _galore_reshape(x, dim_nums):
    """`(to [fan_in, fan_out], back)` for a weight and its dimension numbers."""
    if x.ndim < 2:
        raise FuncgradValueError(f"galore: needs parameters of rank >= 2, got shape "
                                 f"{tuple(x.shape)}")

    def norm(axes):
        return tuple(a % x.ndim for a in ((axes,) if isinstance(axes, int) else axes))
    reduction, output = norm(dim_nums.reduction_axis), norm(dim_nums.output_axis)
    if set(reduction) & set(output) or len(set(reduction) | set(output)) != x.ndim:
        raise FuncgradValueError(f"galore: reduction axes {reduction} and output axes {output} "
                                 f"must be disjoint and cover shape {tuple(x.shape)}")
    perm = reduction + output
    inverse = tuple(sorted(range(x.ndim), key=lambda i: perm[i]))
    shape = tuple(x.shape[a] for a in perm)
    flat = (math.prod(shape[:len(reduction)]), math.prod(shape[len(reduction):]))
    return (lambda y: y.transpose(perm).reshape(flat),
            lambda y: y.reshape(shape).transpose(inverse))


class GaLoreState(NamedTuple):
    count: Any  # int32
    base_optimizer_state: Any  # the base optimizer's state over the low-rank gradients
    projector: Any  # per projected leaf: the projection matrix


def _shapes(rank, p, dim_num):
    """(projector, low-rank proxy) zeros for one leaf."""
    if dim_num is None:
        return fnp.zeros((0, 0), dtype=p.dtype), fnp.zeros_like(p)
    m, n = _galore_reshape(p, dim_num)[0](p).shape
    r = min(rank, m, n)
    if m >= n:
        return fnp.zeros((m, r), p.dtype), fnp.zeros((r, n), p.dtype)
    return fnp.zeros((n, r), p.dtype), fnp.zeros((m, r), p.dtype)


def scale_by_galore(rank: int = 128, update_proj_gap: int = 200, scale: float = 1.0,
                    base_optimizer=None, weight_dimension_numbers=None) -> GradientTransformation:
    """GaLore's low-rank projection around `base_optimizer` (default `scale_by_adam()`).

    Example:
        >>> opt = chain(scale_by_galore(rank=4), scale(-1e-3))
    """
    base_optimizer = scale_by_adam() if base_optimizer is None else base_optimizer
    if not isinstance(rank, int):
        raise FuncgradTypeError(f"scale_by_galore: rank must be an int, got {type(rank)}")
    if rank <= 0:
        raise FuncgradValueError(f"scale_by_galore: rank must be positive, got {rank}")

    def dim_nums_of(params):
        given = weight_dimension_numbers
        if given is None:
            return tree_map(lambda p: GaLoreDimensionNumbers() if p.ndim == 2 else None, params)
        if callable(given):
            return given(params)
        if isinstance(given, GaLoreDimensionNumbers):
            return tree_map(lambda p: given if p.ndim >= 2 else None, params)
        return given

    def split(tree, results):
        return tree_transpose(tree_structure(tree), tree_structure((0, 0)), results)

    def init(params):
        if not tree_flatten(params)[0]:
            return GaLoreState(fnp.zeros((), fnp.int32), base_optimizer.init(params), params)
        results = tree_map(lambda p, d: _shapes(rank, p, d), params, dim_nums_of(params),
                           is_leaf=_is_dim_nums_leaf)
        projectors, proxies = split(params, results)
        return GaLoreState(fnp.zeros((), fnp.int32), base_optimizer.init(proxies), projectors)

    def project(grad, projector, dim_num, refresh):
        if dim_num is None:
            return grad, projector
        g2 = _galore_reshape(grad, dim_num)[0](grad)
        m, n = g2.shape
        r = min(rank, m, n)
        if m >= n:
            new = lax.cond(refresh, lambda: fnp.linalg.svd(
                g2.astype(fnp.float32), full_matrices=False)[0][:, :r].astype(grad.dtype),
                lambda: projector)
            return new.T @ g2, new
        new = lax.cond(refresh, lambda: fnp.linalg.svd(
            g2.astype(fnp.float32), full_matrices=False)[2][:r, :].T.astype(grad.dtype),
            lambda: projector)
        return g2 @ new, new

    def project_back(low_rank, projector, grad, dim_num):
        if dim_num is None:
            return low_rank
        to_flat, back = _galore_reshape(grad, dim_num)
        m, n = to_flat(grad).shape
        full = projector @ low_rank if m >= n else low_rank @ projector.T
        return (scale * back(full)).astype(grad.dtype)

    def update(updates, state, params=None):
        refresh = state.count % update_proj_gap == 0
        dim_nums = dim_nums_of(updates)
        results = tree_map(lambda g, p, d: project(g, p, d, refresh), updates, state.projector,
                           dim_nums, is_leaf=_is_dim_nums_leaf)
        low_rank, projectors = split(updates, results)
        low_updates, base_state = base_optimizer.update(low_rank, state.base_optimizer_state,
                                                        None)
        full = tree_map(project_back, low_updates, projectors, updates, dim_nums,
                        is_leaf=_is_dim_nums_leaf)
        return full, GaLoreState(safe_increment(state.count), base_state, projectors)

    return GradientTransformation(init, update)


def galore(learning_rate, rank: int = 128, update_proj_gap: int = 200, scale: float = 1.0,
           base_optimizer=None, weight_decay=0.0, mask=None,
           weight_dimension_numbers=None) -> GradientTransformation:
    """GaLore: memory-efficient training by gradient low-rank projection.

    Example:
        >>> opt = galore(1e-3, rank=64)
    """
    return chain(scale_by_galore(rank, update_proj_gap, scale, base_optimizer,
                                 weight_dimension_numbers),
                 add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))
