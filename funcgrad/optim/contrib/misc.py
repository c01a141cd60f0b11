"""The remaining contrib transformations of optax 0.2.8: `reduce_on_plateau` (scales the
updates down when the loss stops improving), `split_real_and_imaginary` (runs a real
optimizer on complex parameters) and differentially private SGD (`dpsgd`).

Imports `funcgrad.numpy`, `funcgrad.lax`, `funcgrad.random` and the optim modules it chains.
"""

import warnings
from typing import Any, NamedTuple

import funcgrad.numpy as fnp
from funcgrad import lax, random
from funcgrad.errors import FuncgradValueError
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.base import (
    GradientTransformation,
    GradientTransformationExtraArgs,
    chain,
    identity,
)
from funcgrad.optim.clipping import per_example_global_norm_clip
from funcgrad.optim.numerics import safe_increment
from funcgrad.optim.transforms import scale_by_learning_rate, trace
from funcgrad.tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = ["DifferentiallyPrivateAggregateState", "ReduceLROnPlateauState",
           "SplitRealAndImaginaryState", "differentially_private_aggregate", "dpsgd",
           "reduce_on_plateau", "split_real_and_imaginary"]


class ReduceLROnPlateauState(NamedTuple):
    scale: Any  # the factor applied to the updates
    best_value: Any
    plateau_count: Any  # int32
    cooldown_count: Any  # int32
    count: Any  # int32: values accumulated since the last check
    avg_value: Any


def _check_plateau_args(factor, rtol, atol):
    if not 0.0 < factor < 1.0:
        raise FuncgradValueError(f"reduce_on_plateau: factor must be in (0, 1), got {factor}")
    if rtol < 0.0 or atol < 0.0 or (rtol == 0.0 and atol == 0.0) or rtol > 1.0:
        raise FuncgradValueError(f"reduce_on_plateau: need 0 <= rtol <= 1, atol >= 0 and one "
                                 f"of them positive, got rtol={rtol}, atol={atol}")


def reduce_on_plateau(factor: float = 0.1, patience=10, rtol: float = 1e-4, atol: float = 0.0,
                      cooldown=0, accumulation_size=1,
                      min_scale=0.0) -> GradientTransformationExtraArgs:
    """Multiplies the updates by `scale`, which drops by `factor` when the loss (given as
    `value=`, averaged over `accumulation_size` calls) has not improved by `rtol`/`atol` for
    `patience` checks; `cooldown` checks follow each drop.

    Example:
        >>> opt = chain(adam(1e-3), reduce_on_plateau(patience=5))
        >>> updates, state = opt.update(grads, state, params, value=loss)
    """
    _check_plateau_args(factor, rtol, atol)

    def init(params):
        low, high = tu.tree_dtype(params, "lowest"), tu.tree_dtype(params, "highest")
        zero = fnp.asarray(0, fnp.int32)
        return ReduceLROnPlateauState(fnp.asarray(1.0, low), fnp.asarray(float("inf"), high),
                                      zero, zero, zero, fnp.asarray(0.0, high))

    def check(state):
        improved = state.avg_value < (1 - rtol) * state.best_value - atol
        best = fnp.where(improved, state.avg_value.astype(state.best_value.dtype),
                         state.best_value)
        plateau = fnp.where(improved, 0, safe_increment(state.plateau_count))

        def in_cooldown():
            return fnp.asarray(0, fnp.int32), state.scale, state.cooldown_count - 1

        def not_in_cooldown():
            hit = plateau == patience
            return (fnp.where(hit, 0, plateau).astype(fnp.int32),
                    fnp.maximum(fnp.where(hit, state.scale * factor, state.scale), min_scale),
                    fnp.where(hit, cooldown, 0).astype(fnp.int32))

        plateau, scale, cooldown_count = lax.cond(state.cooldown_count > 0, in_cooldown,
                                                  not_in_cooldown)
        return ReduceLROnPlateauState(scale.astype(state.scale.dtype), best, plateau,
                                      cooldown_count, fnp.asarray(0, fnp.int32),
                                      fnp.asarray(0.0, state.avg_value.dtype))

    def update(updates, state, params=None, *, value, **extra_args):
        count = safe_increment(state.count)
        avg = (state.count * state.avg_value + fnp.asarray(value).astype(state.avg_value.dtype)
               ) / count
        state = state._replace(avg_value=avg.astype(state.avg_value.dtype), count=count)
        state = lax.cond(count == accumulation_size, check, lambda s: s, state)
        return tree_map(lambda g: state.scale * g, updates), state

    return GradientTransformationExtraArgs(init, update)


class _RealAndImaginary(NamedTuple):
    real: Any
    imaginary: Any


class SplitRealAndImaginaryState(NamedTuple):
    inner_state: Any


def _to_pair(x):
    return _RealAndImaginary(fnp.real(x), fnp.imag(x)) if fnp.iscomplexobj(x) else x


def _from_pair(x):
    return x.real + x.imaginary * 1j if isinstance(x, _RealAndImaginary) else x


def split_real_and_imaginary(inner: GradientTransformation) -> GradientTransformation:
    """Runs `inner` on the real and imaginary parts of complex leaves as separate real
    parameters.

    Example:
        >>> opt = split_real_and_imaginary(adam(1e-3))
    """
    def update(updates, state, params=None):
        params = None if params is None else tree_map(_to_pair, params)
        updates, inner_state = inner.update(tree_map(_to_pair, updates), state.inner_state,
                                            params)
        updates = tree_map(_from_pair, updates, is_leaf=lambda x: isinstance(x,
                                                                             _RealAndImaginary))
        return updates, SplitRealAndImaginaryState(inner_state)

    return GradientTransformation(
        lambda params: SplitRealAndImaginaryState(inner.init(tree_map(_to_pair, params))),
        update)


class DifferentiallyPrivateAggregateState(NamedTuple):
    rng_key: Any


def _canonical_key(key):
    return random.PRNGKey(key) if isinstance(key, int) else fnp.asarray(key)


def differentially_private_aggregate(l2_norm_clip, noise_multiplier, key=None, *,
                                     seed=None) -> GradientTransformation:
    """The DP-SGD aggregation (Abadi et al. 2016): per-example gradients (axis 0 of every
    leaf) clipped to `l2_norm_clip`, summed, noised with `N(0, (clip * noise_multiplier)**2)`
    and averaged."""
    if seed is not None:
        warnings.warn('"seed" is deprecated, use "key"', DeprecationWarning, stacklevel=2)
        if key is not None:
            raise FuncgradValueError("differentially_private_aggregate: pass one of seed, key")
        key = seed
    if key is None:
        warnings.warn("differentially_private_aggregate: pass a key; using 0", stacklevel=2)
        key = 0
    key = _canonical_key(key)
    noise_std = l2_norm_clip * noise_multiplier

    def update(updates, state, params=None):
        grads, treedef = tree_flatten(updates)
        batch = grads[0].shape[0]
        clipped, _ = per_example_global_norm_clip(grads, l2_norm_clip)
        keys = random.split(state.rng_key, len(grads) + 1)
        noised = [(g + noise_std * random.normal(keys[i + 1], g.shape, g.dtype)) / batch
                  for i, g in enumerate(clipped)]
        return tree_unflatten(treedef, noised), DifferentiallyPrivateAggregateState(keys[0])

    return GradientTransformation(lambda params: DifferentiallyPrivateAggregateState(key),
                                  update)


def dpsgd(learning_rate, l2_norm_clip, noise_multiplier, seed: int, momentum=None,
          nesterov: bool = False) -> GradientTransformation:
    """Differentially private SGD: `differentially_private_aggregate`, optional momentum,
    then the learning rate.

    Example:
        >>> opt = dpsgd(0.1, l2_norm_clip=1.0, noise_multiplier=1.1, seed=0)
    """
    return chain(differentially_private_aggregate(l2_norm_clip, noise_multiplier, key=seed),
                 trace(decay=momentum, nesterov=nesterov) if momentum is not None else identity(),
                 scale_by_learning_rate(learning_rate))
