"""Clipping beyond `clip` and `clip_by_global_norm`: per-leaf RMS clipping, adaptive gradient
clipping (AGC, unit-wise), per-example clipping for differential privacy, and gradient noise.

As in optax 0.2.8 (`optax.transforms`). Imports `funcgrad.numpy`, `funcgrad.random`,
`funcgrad.tree_util`, `funcgrad.api` (vmap) and `optim.base`/`numerics`/`tree_utils`; not
`optim.transforms`, which re-exports these names.
"""

import warnings
from typing import Any, NamedTuple

import funcgrad.numpy as fnp
from funcgrad import random
from funcgrad.batching_api import vmap
from funcgrad.errors import FuncgradValueError, op_error
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.base import EmptyState, GradientTransformation, init_empty_state
from funcgrad.optim.numerics import abs_sq, safe_increment
from funcgrad.tree_util import tree_leaves, tree_map, tree_reduce, tree_structure, tree_transpose

__all__ = [
    "AdaptiveGradClipState", "AddNoiseState", "ClipState", "adaptive_grad_clip", "add_noise",
    "clip_by_block_rms", "per_example_global_norm_clip", "per_example_layer_norm_clip",
    "unitwise_clip", "unitwise_norm",
]

AdaptiveGradClipState = ClipState = EmptyState


def clip_by_block_rms(threshold) -> GradientTransformation:
    """Each leaf divided by `max(1, rms(leaf) / threshold)`: its RMS is at most `threshold`.

    Example:
        >>> clip_by_block_rms(1.0).update({'w': fnp.full(4, 3.0)}, EmptyState())[0]
        {'w': Array([1., 1., 1., 1.], dtype=float32)}
    """
    def clip_leaf(u):
        return u / fnp.maximum(1.0, fnp.sqrt(fnp.mean(abs_sq(u))) / threshold)
    return GradientTransformation(init_empty_state, lambda updates, state, params=None:
                                  (tree_map(clip_leaf, updates), state))


def unitwise_norm(x, axis=None):
    """The norm of each unit (output neuron) of a weight, broadcast back to `x.shape`.

    Without `axis`: the whole array for scalars and vectors, axis 0 for rank 2-3 (dense
    kernels `(in, out)`), the spatial and input axes for rank 4-5 (convolution kernels HWIO).
    """
    if axis is not None:
        squared = fnp.sum(abs_sq(x), axis=axis, keepdims=True)
    elif fnp.squeeze(x).ndim <= 1:
        squared = fnp.sum(abs_sq(x), keepdims=True)
    elif x.ndim in (2, 3):
        squared = fnp.sum(abs_sq(x), axis=0, keepdims=True)
    elif x.ndim in (4, 5):
        squared = fnp.sum(abs_sq(x), axis=tuple(range(x.ndim - 1)), keepdims=True)
    else:
        raise op_error("unitwise_norm", f"expected a parameter of rank 1 to 5, got shape "
                                        f"{x.shape}", cls=FuncgradValueError,
                       hint="pass `axis=` to name the reduction axes")
    return fnp.broadcast_to(fnp.sqrt(squared), x.shape)


def unitwise_clip(g_norm, max_norm, grad, div_eps=1e-6):
    """`grad` where `g_norm < max_norm`, else `grad * max_norm / max(g_norm, div_eps)`."""
    if not (fnp.shape(g_norm) == fnp.shape(max_norm) == fnp.shape(grad)):
        raise op_error("unitwise_clip", f"g_norm {fnp.shape(g_norm)}, max_norm "
                                        f"{fnp.shape(max_norm)} and grad {fnp.shape(grad)} "
                                        "must have one shape", cls=FuncgradValueError)
    clipped = grad * (max_norm / fnp.maximum(g_norm, div_eps))
    return fnp.where(g_norm < max_norm, grad, clipped)


def adaptive_grad_clip(clipping, eps=1e-3, axis=None) -> GradientTransformation:
    """Adaptive gradient clipping (Brock et al. 2021): each unit's gradient norm is clipped to
    `clipping * max(||param unit||, eps)`.

    Example:
        >>> opt = chain(adaptive_grad_clip(0.01), sgd(0.1))
    """
    def update(updates, state, params=None):
        if params is None:
            raise op_error("adaptive_grad_clip", "needs the parameters: call "
                                                 "`update(grads, state, params)`",
                           cls=FuncgradValueError)
        g_norm = tree_map(lambda x: unitwise_norm(x, axis=axis), updates)
        p_norm = tree_map(lambda x: unitwise_norm(x, axis=axis), params)
        max_norm = tree_map(lambda x: clipping * fnp.maximum(x, eps), p_norm)
        return tree_map(unitwise_clip, g_norm, max_norm, updates), state

    return GradientTransformation(init_empty_state, update)


def _check_batch_dim(who, grads):
    leaves = tree_leaves(grads)
    if not leaves or not all(g.ndim >= 1 and g.shape[0] == leaves[0].shape[0] for g in leaves):
        raise op_error(who, "expects every gradient leaf to have the batch (per-example) axis "
                            f"first; got shapes {[tuple(g.shape) for g in leaves]}",
                       cls=FuncgradValueError)


def per_example_global_norm_clip(grads: Any, l2_norm_clip) -> tuple[Any, Any]:
    """Clips each example's gradient (axis 0 of every leaf) to global norm `l2_norm_clip`
    and sums over the examples; returns `(clipped sum, number of examples clipped)`.

    Example:
        >>> summed, n_clipped = per_example_global_norm_clip(per_example_grads, 1.0)
    """
    _check_batch_dim("per_example_global_norm_clip", grads)
    norms = vmap(tu.tree_norm)(grads)
    multipliers = fnp.nan_to_num(fnp.minimum(l2_norm_clip / norms, 1.0), nan=1.0)
    num_clipped = fnp.sum(multipliers < 1.0)
    return tree_map(lambda g: fnp.tensordot(multipliers, g, axes=1), grads), num_clipped


def per_example_layer_norm_clip(grads: Any, global_l2_norm_clip,
                                uniform: bool = True) -> tuple[Any, Any]:
    """Per-example clipping leaf by leaf: each leaf gets the clip norm
    `global / sqrt(number of leaves)` (`uniform`) or `global * sqrt(leaf size / total size)`;
    returns `(clipped sums, numbers clipped)`, each a tree like `grads`."""
    _check_batch_dim("per_example_layer_norm_clip", grads)
    if uniform:
        num_layers = len(tree_leaves(grads))
        clips = tree_map(lambda _: global_l2_norm_clip * (1.0 / num_layers) ** 0.5, grads)
    else:
        total = tree_reduce(lambda x, g: x + g[0].size, grads, 0)
        clips = tree_map(lambda g: global_l2_norm_clip * (g[0].size / total) ** 0.5, grads)
    result = tree_map(per_example_global_norm_clip, grads, clips)
    return tree_transpose(tree_structure(grads), tree_structure((0, 0)), result)


class AddNoiseState(NamedTuple):
    count: Any  # int32
    rng_key: Any


def add_noise(eta, gamma, key=None, *, seed=None) -> GradientTransformation:
    """Adds Gaussian noise of variance `eta / (t + 1)**gamma` to the updates (Neelakantan et
    al. 2015).

    Args:
        eta: the initial variance.
        gamma: how fast the variance decays.
        key: a `funcgrad.random` key or an int seed (0 when omitted, with a warning).
        seed: deprecated spelling of an int `key`.
    """
    if seed is not None:
        warnings.warn('"seed" is deprecated, use "key"', DeprecationWarning, stacklevel=2)
        if key is not None:
            raise FuncgradValueError("add_noise: pass only one of seed and key")
        key = seed
    if key is None:
        warnings.warn("add_noise: pass a key (optax 0.2.7 requires one); using 0",
                      stacklevel=2)
        key = 0

    def init(params):
        rng = random.PRNGKey(key) if isinstance(key, int) else fnp.asarray(key)
        return AddNoiseState(fnp.zeros((), fnp.int32), rng)

    def update(updates, state, params=None):
        count = safe_increment(state.count)
        std = fnp.sqrt(eta / count ** gamma)
        rng_key, sample_key = random.split(state.rng_key)
        noise = tu.tree_random_like(sample_key, updates, sampler=random.normal)
        return tu.tree_add_scale(updates, std, noise), AddNoiseState(count, rng_key)

    return GradientTransformation(init, update)
