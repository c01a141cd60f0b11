"""Schedule-free optimization (Defazio et al. 2024) and sharpness-aware minimization (SAM,
Foret et al. 2021), as optax 0.2.8's contrib.

Schedule-free: the base optimizer moves `z`; the parameters are an interpolation of `z` and
a running average `x`; evaluate the model at `schedule_free_eval_params(state, params)`.
Imports `funcgrad.numpy` and the optim modules it chains.
"""

from typing import Any, NamedTuple

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.errors import FuncgradValueError
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.aliases import sgd
from funcgrad.optim.base import (
    EmptyState,
    GradientTransformation,
    GradientTransformationExtraArgs,
    apply_updates,
    chain,
    init_empty_state,
    with_extra_args_support,
)
from funcgrad.optim.numerics import safe_increment
from funcgrad.optim.schedules import warmup_constant_schedule
from funcgrad.optim.transforms import add_decayed_weights, scale_by_learning_rate, scale_by_rms
from funcgrad.tree_util import tree_map

__all__ = ["NormalizeState", "SAMState", "ScheduleFreeState", "normalize", "sam",
           "schedule_free", "schedule_free_adamw", "schedule_free_eval_params",
           "schedule_free_sgd"]


class ScheduleFreeState(NamedTuple):
    b1: Any
    weight_sum: Any  # the sum of the averaging weights so far
    step_count: Any  # int32, starting at 1
    max_lr: Any  # the largest learning rate seen
    base_optimizer_state: Any
    z: Any  # the base optimizer's iterate


def schedule_free_eval_params(state: Any, params: Any):
    """The parameters to evaluate the model at: the average `x = (y - (1 - b1) z) / b1`.

    Example:
        >>> eval_params = schedule_free_eval_params(state, params)
    """
    b1, z = getattr(state, "b1", None), getattr(state, "z", None)
    if b1 is None or z is None:
        raise FuncgradValueError("schedule_free_eval_params: needs a ScheduleFreeState")
    return tree_map(lambda y, zi: (y - (1.0 - b1) * zi) / b1, params, z)


def schedule_free(base_optimizer: GradientTransformation, learning_rate, b1=0.9,
                  weight_lr_power=2.0, state_dtype=None) -> GradientTransformationExtraArgs:
    """Turns `base_optimizer` schedule-free: no decay schedule is needed; `learning_rate`
    (which may warm up) weights the average.

    Example:
        >>> opt = schedule_free(sgd(1.0), learning_rate=1.0)
    """
    base_optimizer = with_extra_args_support(base_optimizer)

    def init(params):
        dtype = tu.tree_dtype(params, "lowest")
        z = params if state_dtype is None else tu.tree_cast(params, state_dtype)
        return ScheduleFreeState(fnp.asarray(b1, dtype=dtype), fnp.zeros((), dtype),
                                 fnp.ones((), fnp.int32), fnp.zeros((), dtype),
                                 base_optimizer.init(params), tree_map(fnp.array, z))

    def update(grads, state, params=None, **extra_args):
        lr = learning_rate
        if callable(learning_rate):
            lr = fnp.asarray(learning_rate(state.step_count), dtype=state.max_lr.dtype)
        max_lr = fnp.maximum(state.max_lr, lr)
        weight = max_lr ** weight_lr_power
        total = state.weight_sum + weight
        ck = fnp.where(fnp.isnan(weight) | fnp.isnan(total), fnp.full(weight.shape, fnp.nan),
                       fnp.nan_to_num(weight / total, nan=0.0, posinf=fnp.inf))
        base_updates, base_state = base_optimizer.update(grads, state.base_optimizer_state,
                                                         params, **extra_args)
        z = apply_updates(state.z, base_updates)
        prev_x = tree_map(lambda y, zi: (y - (1.0 - b1) * zi) / b1, params, state.z)
        x = tree_map(lambda xi, zi: (1.0 - ck) * xi + ck * zi, prev_x, z)
        new_params = tree_map(lambda xi, zi: b1 * xi + (1.0 - b1) * zi, x, z)
        updates = tree_map(lambda n, p: n - p, new_params, params)
        return updates, ScheduleFreeState(state.b1, total, safe_increment(state.step_count),
                                          max_lr, base_state, z)

    return GradientTransformationExtraArgs(init, update)


def schedule_free_sgd(learning_rate=1.0, warmup_steps=None, b1=0.9, weight_decay=None,
                      weight_lr_power=2.0, state_dtype=None) -> GradientTransformationExtraArgs:
    """Schedule-free SGD (with optional linear warm-up and coupled weight decay)."""
    if warmup_steps is not None:
        learning_rate = warmup_constant_schedule(0, learning_rate, warmup_steps)
    optimizer = sgd(learning_rate)
    if weight_decay is not None:
        optimizer = chain(add_decayed_weights(weight_decay), optimizer)
    return schedule_free(optimizer, learning_rate=learning_rate, b1=b1,
                         weight_lr_power=weight_lr_power, state_dtype=state_dtype)


def schedule_free_adamw(learning_rate=0.0025, warmup_steps=None, b1=0.9, b2=0.999, eps=1e-8,
                        weight_decay=0.0, weight_lr_power=2.0,
                        state_dtype=None) -> GradientTransformationExtraArgs:
    """Schedule-free AdamW: RMS scaling with bias correction as the base optimizer.

    Example:
        >>> opt = schedule_free_adamw(1e-3, warmup_steps=100)
    """
    if warmup_steps is not None:
        learning_rate = warmup_constant_schedule(0, learning_rate, warmup_steps)
    optimizer = chain(scale_by_rms(decay=b2, eps=eps, eps_in_sqrt=False, bias_correction=True),
                      add_decayed_weights(weight_decay), scale_by_learning_rate(learning_rate))
    return schedule_free(optimizer, learning_rate=learning_rate, b1=b1,
                         weight_lr_power=weight_lr_power, state_dtype=state_dtype)


# ---------------------------------------------------------------------------------------------
# SAM

NormalizeState = EmptyState


def normalize() -> GradientTransformation:
    """`updates / ||updates||` (the global norm): SAM's adversarial direction."""
    def update(updates, state, params=None):
        g_norm = tu.tree_norm(updates)
        return tree_map(lambda g: g / g_norm, updates), state
    return GradientTransformation(init_empty_state, update)


class SAMState(NamedTuple):
    steps_since_sync: Any  # int32
    opt_state: Any
    adv_state: Any
    cache: Any  # the outer params (transparent mode), else None


def _pick(cond, if_true, if_false):
    return tree_map(lambda t, f: cond * t + (1 - cond) * f, if_true, if_false)


def sam(optimizer: GradientTransformation, adv_optimizer: GradientTransformation,
        sync_period: int = 2, reset_state: bool = True, opaque_mode: bool = False,
        batch_axis_name: str | None = None) -> GradientTransformationExtraArgs:
    """Sharpness-aware minimization: `sync_period - 1` adversarial ascent steps by
    `adv_optimizer`, then one step of `optimizer` with the gradient found there, applied at
    the outer params.

    Transparent mode (default): call `update` once per gradient; the params move to the
    adversarial point and back. Opaque mode: one `update` per outer step, with
    `grad_fn(params, i)` computing the gradients at the adversarial points.

    Example:
        >>> opt = sam(sgd(0.1), chain(normalize(), sgd(0.05)), sync_period=2)
    """
    if sync_period < 1:
        raise FuncgradValueError(f"sam: sync_period must be >= 1, got {sync_period}")

    def init(params):
        return SAMState(fnp.zeros((), fnp.int32), optimizer.init(params),
                        adv_optimizer.init(params), None if opaque_mode else params)

    def transparent(updates, state, params=None, *, grad_fn=None):
        first, last = state.steps_since_sync == 0, state.steps_since_sync == sync_period - 1
        adv_updates, adv_state = adv_optimizer.update(updates, state.adv_state, params)
        adv_updates = tree_map(lambda x: -x, adv_updates)
        opt_updates, opt_state = optimizer.update(updates, state.opt_state, state.cache)
        opt_updates = tree_map(lambda c, p, u: c - p + u, state.cache, params, opt_updates)
        cache = _pick(first, params, state.cache)
        updates = _pick(last, opt_updates, adv_updates)
        kept_adv = adv_optimizer.init(params) if reset_state else state.adv_state
        return updates, SAMState((state.steps_since_sync + 1) % sync_period,
                                 _pick(last, opt_state, state.opt_state),
                                 _pick(last, kept_adv, adv_state), cache)

    def opaque(updates, state, params=None, *, grad_fn=None):
        if grad_fn is None:
            raise FuncgradValueError("sam: grad_fn must be given when opaque_mode=True")
        adv_params, adv_updates, adv_state = params, updates, state.adv_state
        for i in range(sync_period - 1):
            adv_updates, adv_state = adv_optimizer.update(adv_updates, adv_state, adv_params)
            adv_params = apply_updates(adv_params, tree_map(lambda x: -x, adv_updates))
            adv_updates = grad_fn(adv_params, i)
            if batch_axis_name is not None:
                adv_updates = lax.pmean(adv_updates, axis_name=batch_axis_name)
        if reset_state:
            adv_state = adv_optimizer.init(params)
        updates, opt_state = optimizer.update(adv_updates, state.opt_state, params)
        return updates, SAMState(fnp.zeros((), fnp.int32), opt_state, adv_state, None)

    return GradientTransformationExtraArgs(init, opaque if opaque_mode else transparent)
