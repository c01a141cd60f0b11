"""Learning-rate-free optimizers of optax 0.2.8's contrib: Prodigy, D-Adaptation AdamW, COCOB,
DoG and DoWG, Mechanic (`mechanize`), and the model-based Momo / Momo-Adam.

Each estimates its own step size from the distance travelled or from the loss; `momo` and
`momo_adam` need the loss as `value=`. Imports `funcgrad.numpy`, `funcgrad.lax` and the
optim modules it chains.
"""

from typing import Any, NamedTuple

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.errors import FuncgradValueError
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.base import (
    GradientTransformation,
    GradientTransformationExtraArgs,
    chain,
    identity,
    with_extra_args_support,
)
from funcgrad.optim.numerics import safe_increment
from funcgrad.optim.transforms import add_decayed_weights, scale_by_learning_rate
from funcgrad.tree_util import tree_map

__all__ = [
    "COCOBState", "DAdaptAdamWState", "DoGState", "DoWGState", "MechanicState",
    "MomoAdamState", "MomoState", "ProdigyState", "cocob", "dadapt_adamw", "dog", "dowg",
    "mechanize", "momo", "momo_adam", "prodigy", "scale_by_cocob",
]


def _require_params(who, params):
    if params is None:
        raise FuncgradValueError(f"{who}: needs the parameters: call "
                                 "`update(grads, state, params)`")


def _scalar(value, params):
    return fnp.asarray(value, dtype=tu.tree_dtype(params, "lowest"))


class ProdigyState(NamedTuple):
    exp_avg: Any
    exp_avg_sq: Any
    grad_sum: Any
    params0: Any
    estim_lr: Any  # the distance estimate d
    numerator_weighted: Any
    count: Any  # int32


def prodigy(learning_rate=1.0, betas=(0.9, 0.999), beta3=None, eps=1e-8, estim_lr0=1e-6,
            estim_lr_coef=1.0, weight_decay=0.0,
            safeguard_warmup: bool = False) -> GradientTransformationExtraArgs:
    """Prodigy (Mishchenko & Defazio 2023): Adam whose step size is estimated from the
    distance to the solution.

    Example:
        >>> opt = prodigy()     # no learning rate to tune
    """
    beta1, beta2 = betas
    beta3 = beta2 ** 0.5 if beta3 is None else beta3

    def init(params):
        z = tu.tree_zeros_like
        return ProdigyState(z(params), z(params), z(params), params, _scalar(estim_lr0, params),
                            _scalar(0.0, params), fnp.zeros((), fnp.int32))

    def update(updates, state, params=None, **extra_args):
        _require_params("prodigy", params)
        count_inc = safe_increment(state.count)
        sched = learning_rate(state.count) if callable(learning_rate) else learning_rate
        d = state.estim_lr
        bc = ((1 - beta2 ** count_inc) ** 0.5) / (1 - beta1 ** count_inc)
        dlr = fnp.asarray(d * sched * bc, dtype=d.dtype)
        dg = tree_map(lambda g: d * g, updates)
        numerator_acum = tu.tree_vdot(updates, tree_map(lambda p0, p: p0 - p, state.params0,
                                                        params))
        exp_avg = tree_map(lambda ea, x: beta1 * ea + (1 - beta1) * x, state.exp_avg, dg)
        exp_avg_sq = tree_map(lambda eas, x: beta2 * eas + (1 - beta2) * x * x,
                              state.exp_avg_sq, dg)
        weight = d if safeguard_warmup else dlr
        grad_sum = tree_map(lambda sk, x: beta3 * sk + weight * x / estim_lr0, state.grad_sum, dg)
        numerator = beta3 * state.numerator_weighted + (d / estim_lr0) * dlr * numerator_acum
        denominator = tu.tree_sum(tree_map(fnp.abs, grad_sum))
        estim_lr = fnp.maximum(d, estim_lr_coef * numerator / denominator)
        p_update = tree_map(lambda ea, eas, p: -weight_decay * dlr * p
                            - dlr * ea / (fnp.sqrt(eas) + d * eps), exp_avg, exp_avg_sq, params)
        return p_update, ProdigyState(exp_avg, exp_avg_sq, grad_sum, state.params0, estim_lr,
                                      numerator, count_inc)

    return GradientTransformationExtraArgs(init, update)


class DAdaptAdamWState(NamedTuple):
    exp_avg: Any
    exp_avg_sq: Any
    grad_sum: Any
    estim_lr: Any
    numerator_weighted: Any
    count: Any  # int32


def dadapt_adamw(learning_rate=1.0, betas=(0.9, 0.999), eps=1e-8, estim_lr0=1e-6,
                 weight_decay=0.0) -> GradientTransformationExtraArgs:
    """D-Adaptation AdamW (Defazio & Mishchenko 2023): AdamW with an estimated step size."""
    beta1, beta2 = betas
    sb2 = beta2 ** 0.5

    def init(params):
        z = tu.tree_zeros_like
        return DAdaptAdamWState(z(params), z(params), z(params), _scalar(estim_lr0, params),
                                _scalar(0.0, params), fnp.zeros((), fnp.int32))

    def update(updates, state, params=None, **extra_args):
        _require_params("dadapt_adamw", params)
        sched = learning_rate(state.count) if callable(learning_rate) else learning_rate
        count_inc = safe_increment(state.count)
        bc = ((1 - beta2 ** count_inc) ** 0.5) / (1 - beta1 ** count_inc)
        dlr = (state.estim_lr * sched * bc).astype(state.numerator_weighted.dtype)
        s_weighted = tree_map(lambda sk, eas: sk / (fnp.sqrt(eas) + eps), state.grad_sum,
                              state.exp_avg_sq)
        numerator_acum = tu.tree_vdot(updates, s_weighted)
        exp_avg = tree_map(lambda ea, g: beta1 * ea + (1 - beta1) * dlr * g, state.exp_avg,
                           updates)
        exp_avg_sq = tree_map(lambda eas, g: beta2 * eas + (1 - beta2) * g * g,
                              state.exp_avg_sq, updates)
        grad_sum = tree_map(lambda sk, g: sb2 * sk + (1 - sb2) * dlr * g, state.grad_sum,
                            updates)
        grad_sum_l1 = tu.tree_sum(tree_map(fnp.abs, grad_sum))
        numerator = sb2 * state.numerator_weighted + (1 - sb2) * dlr * numerator_acum
        estim_lr = fnp.maximum(state.estim_lr, numerator / ((1 - sb2) * grad_sum_l1))
        p_update = tree_map(lambda ea, eas, p: -weight_decay * dlr * p
                            - ea / (fnp.sqrt(eas) + eps), exp_avg, exp_avg_sq, params)
        return p_update, DAdaptAdamWState(exp_avg, exp_avg_sq, grad_sum, estim_lr, numerator,
                                          count_inc)

    return GradientTransformationExtraArgs(init, update)


class COCOBState(NamedTuple):
    init_particles: Any
    cumulative_gradients: Any
    scale: Any
    subgradients: Any
    reward: Any


def scale_by_cocob(alpha=100.0, eps=1e-8) -> GradientTransformation:
    """COCOB-Backprop (Orabona & Tommasi 2017): coin-betting steps, no learning rate."""
    def init(params):
        zeros = tu.tree_zeros_like(params)
        return COCOBState(params, zeros, tu.tree_scale(eps, tu.tree_ones_like(params)), zeros,
                          zeros)

    def update(updates, state, params=None):
        _require_params("scale_by_cocob", params)
        p0, cumulative, scale, subgradients, reward = state
        scale = tree_map(lambda lo, c: fnp.maximum(lo, fnp.abs(c)), scale, updates)
        subgradients = tree_map(lambda g, c: g + fnp.abs(c), subgradients, updates)
        reward = tree_map(lambda r, c, p, q: fnp.maximum(r - c * (p - q), 0), reward, updates,
                          params, p0)
        cumulative = tree_map(lambda c0, c: c0 - c, cumulative, updates)
        new_updates = tree_map(
            lambda p, q, c, lo, g, r: -p + (q + c / (lo * fnp.maximum(g + lo, alpha * lo))
                                            * (lo + r)),
            params, p0, cumulative, scale, subgradients, reward)
        return new_updates, COCOBState(p0, cumulative, scale, subgradients, reward)

    return GradientTransformation(init, update)


def cocob(learning_rate=1.0, alpha=100.0, eps=1e-8, weight_decay=0.0,
          mask=None) -> GradientTransformation:
    """COCOB with coupled weight decay; `learning_rate` only scales the gradients."""
    return chain(add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate, flip_sign=False),
                 scale_by_cocob(alpha, eps))


class DoGState(NamedTuple):
    is_init_step: Any  # bool
    init_params: Any
    max_dist: Any
    sum_sq_norm_grads: Any


def _scale_by_dog(init_step, eps=1e-8) -> GradientTransformation:
    kind, value = init_step
    if kind not in ("distance", "learning_rate", "heuristic"):
        raise FuncgradValueError(f"dog: invalid init_step {init_step!r}")

    def init(params):
        if kind == "distance":
            r_eps = value
        elif kind == "heuristic":
            r_eps = value * (1 + tu.tree_norm(params))
        else:
            r_eps = 0.0
        return DoGState(fnp.asarray(True), params, _scalar(r_eps, params), _scalar(0.0, params))

    def update(updates, state, params=None):
        _require_params("dog", params)
        max_dist = fnp.maximum(state.max_dist, tu.tree_norm(tu.tree_sub(state.init_params,
                                                                        params)))
        sum_sq = state.sum_sq_norm_grads + tu.tree_norm(updates, squared=True)
        lr = max_dist / fnp.sqrt(sum_sq + eps)
        if kind == "learning_rate":
            lr = fnp.where(state.is_init_step, value, lr)
        return tu.tree_scale(lr, updates), DoGState(fnp.asarray(False), state.init_params,
                                                    max_dist, sum_sq)

    return GradientTransformation(init, update)


def dog(learning_rate=1.0, init_step=("heuristic", 1e-6), eps=1e-8, weight_decay=None,
        mask=None):
    """DoG (Ivgi et al. 2023): `lr = max distance from the start / sqrt(sum ||g||**2)`.

    Example:
        >>> opt = dog()
    """
    return chain(add_decayed_weights(weight_decay, mask) if weight_decay is not None
                 else identity(), _scale_by_dog(init_step, eps),
                 scale_by_learning_rate(learning_rate))


class DoWGState(NamedTuple):
    init_params: Any
    weighted_sq_norm_grads: Any
    estim_sq_dist: Any


def _scale_by_dowg(init_estim_sq_dist=None, eps=1e-4) -> GradientTransformation:
    def init(params):
        start = eps if init_estim_sq_dist is None else init_estim_sq_dist
        return DoWGState(params, _scalar(0.0, params), _scalar(start, params))

    def update(updates, state, params=None):
        _require_params("dowg", params)
        sq_dist = tu.tree_norm(tu.tree_sub(state.init_params, params), squared=True)
        estim = fnp.maximum(state.estim_sq_dist, sq_dist)
        weighted = estim * tu.tree_norm(updates, squared=True) + state.weighted_sq_norm_grads
        lr = estim / (fnp.sqrt(weighted) + eps)
        return tu.tree_scale(lr, updates), state._replace(estim_sq_dist=estim,
                                                          weighted_sq_norm_grads=weighted)

    return GradientTransformation(init, update)


def dowg(learning_rate=1.0, init_estim_sq_dist=None, eps=1e-4, weight_decay=None, mask=None):
    """DoWG (Khaled et al. 2023): distance over weighted gradients."""
    return chain(add_decayed_weights(weight_decay, mask) if weight_decay is not None
                 else identity(), _scale_by_dowg(init_estim_sq_dist, eps),
                 scale_by_learning_rate(learning_rate))


class MechanicState(NamedTuple):
    base_optimizer_state: Any
    count: Any  # int32
    r: Any
    m: Any
    v: Any
    s: Any
    x0: Any


def mechanize(base_optimizer: GradientTransformation, weight_decay=1e-2, eps=1e-8,
              s_init=1e-6, num_betas: int = 6) -> GradientTransformationExtraArgs:
    """Mechanic (Cutkosky et al. 2023): learns the scale of `base_optimizer`'s updates.

    Example:
        >>> opt = mechanize(adam(1.0))
    """
    base_optimizer = with_extra_args_support(base_optimizer)

    def init(params):
        dtype = tu.tree_dtype(params, "lowest")
        zeros = fnp.zeros([num_betas], dtype=dtype)
        return MechanicState(base_optimizer.init(params), fnp.zeros((), fnp.int32), zeros,
                             zeros, zeros, fnp.ones([num_betas], dtype=dtype) * s_init, params)

    def update(updates, state, params=None, **extra_args):
        _require_params("mechanize", params)
        neg_updates, base_state = base_optimizer.update(updates, state.base_optimizer_state,
                                                        params, **extra_args)
        x0 = lax.cond(state.count == 0, lambda: params, lambda: state.x0)
        s_sum = fnp.sum(state.s)
        decay = weight_decay * s_sum * tu.tree_norm(updates) / (tu.tree_norm(params) + eps)
        updates = tree_map(lambda g, p: g + decay * p, updates, params)
        delta_prev = tree_map(lambda x, x0i: (x0i - x) / (s_sum + eps), params, x0)
        delta = tree_map(lambda d, u: d - u, delta_prev, neg_updates)
        h = tu.tree_vdot(updates, delta_prev)
        clipped_h = fnp.clip(fnp.ones_like(state.m) * h, -state.m, state.m)
        betas = fnp.asarray([1.0 - 0.1 ** i for i in range(1, num_betas + 1)],
                            dtype=state.s.dtype)
        m = fnp.maximum(betas * state.m, fnp.abs(h) + eps)
        v = betas ** 2 * state.v + h ** 2
        r = betas * state.r + clipped_h * state.s
        s = ((s_init / betas.shape[0]) * m + fnp.maximum(0.0, r)) / (fnp.sqrt(v) + eps)
        new_params = tree_map(lambda x0i, d: x0i - fnp.sum(s) * d, x0, delta)
        return (tree_map(lambda n, p: n - p, new_params, params),
                MechanicState(base_state, safe_increment(state.count), r, m, v, s, x0))

    return GradientTransformationExtraArgs(init, update)


class MomoState(NamedTuple):
    exp_avg: Any
    barf: Any  # the averaged loss
    gamma: Any
    lb: Any  # the lower bound on the loss
    count: Any  # int32


def _momo_lower_bound(adapt, cap, factor, lb, lower_bound):
    if not adapt:
        return lb
    return fnp.where(cap < factor * lb, fnp.maximum(cap / (2 * factor), lower_bound), lb)


def momo(learning_rate=1.0, beta=0.9, lower_bound=0.0, weight_decay=0.0,
         adapt_lower_bound: bool = False) -> GradientTransformationExtraArgs:
    """Momo (Schaipp et al. 2023): SGD with momentum and a model-based (Polyak-like)
    step size, capped by `learning_rate`; `update` needs `value=` (the loss).

    Example:
        >>> updates, state = momo().update(grads, state, params, value=loss)
    """
    def init(params):
        return MomoState(tu.tree_zeros_like(params), _scalar(0.0, params), _scalar(0.0, params),
                         _scalar(lower_bound, params), fnp.zeros((), fnp.int32))

    def update(updates, state, params=None, *, value, **extra_args):
        _require_params("momo", params)
        bt = fnp.where(state.count == 0, 0.0, beta)
        barf = bt * state.barf + (1 - bt) * fnp.asarray(value, dtype=state.barf.dtype)
        exp_avg = tree_map(lambda ea, g: bt * ea + (1 - bt) * g, state.exp_avg, updates)
        gamma = bt * state.gamma + (1 - bt) * tu.tree_vdot(updates, params)
        exp_avg_norm = tu.tree_norm(exp_avg, squared=True)
        iprod = tu.tree_vdot(exp_avg, params)
        alpha = learning_rate(state.count) if callable(learning_rate) else learning_rate
        factor = 1 + alpha * weight_decay
        lb = _momo_lower_bound(adapt_lower_bound, factor * (barf - gamma) + iprod, factor,
                               state.lb, lower_bound)
        t1 = fnp.maximum(factor * (barf - lb - gamma) + iprod, 0.0) / exp_avg_norm
        t1 = fnp.where(exp_avg_norm <= np.finfo(float).eps, 0.0, t1)
        tau = fnp.minimum(alpha, t1)
        p_update = tree_map(lambda ea, p: -(alpha * weight_decay) / factor * p - tau * ea,
                            exp_avg, params)
        new_lb = (fnp.maximum((barf + iprod - gamma) - 0.5 * tau * exp_avg_norm, lower_bound)
                  if adapt_lower_bound else state.lb)
        return p_update, MomoState(exp_avg, barf, gamma, new_lb, safe_increment(state.count))

    return GradientTransformationExtraArgs(init, update)


class MomoAdamState(NamedTuple):
    exp_avg: Any
    exp_avg_sq: Any
    barf: Any
    gamma: Any
    lb: Any
    count: Any  # int32


def momo_adam(learning_rate=1e-2, b1=0.9, b2=0.999, eps=1e-8, lower_bound=0.0,
              weight_decay=0.0, adapt_lower_bound: bool = False
              ) -> GradientTransformationExtraArgs:
    """Momo with Adam's preconditioning; `update` needs `value=` (the loss)."""
    def init(params):
        z = tu.tree_zeros_like
        return MomoAdamState(z(params), z(params), _scalar(0.0, params), _scalar(0.0, params),
                             _scalar(lower_bound, params), fnp.zeros((), fnp.int32))

    def update(updates, state, params=None, *, value, **extra_args):
        _require_params("momo_adam", params)
        count_inc = safe_increment(state.count)
        barf = b1 * state.barf + (1 - b1) * fnp.asarray(value, dtype=state.barf.dtype)
        exp_avg = tree_map(lambda ea, g: b1 * ea + (1 - b1) * g, state.exp_avg, updates)
        exp_avg_sq = tree_map(lambda eas, g: b2 * eas + (1 - b2) * g * g, state.exp_avg_sq,
                              updates)
        bc2 = fnp.asarray(1 - b2 ** count_inc, dtype=barf.dtype)
        precond = tree_map(lambda eas: eps + fnp.sqrt(eas / bc2), exp_avg_sq)
        exp_avg_norm = tu.tree_vdot(exp_avg, tree_map(lambda ea, pr: ea / pr, exp_avg, precond))
        gamma = b1 * state.gamma + (1 - b1) * tu.tree_vdot(updates, params)
        iprod = tu.tree_vdot(exp_avg, params)
        alpha = learning_rate(state.count) if callable(learning_rate) else learning_rate
        bc1 = fnp.asarray(1 - b1 ** count_inc, dtype=barf.dtype)
        factor = 1 + alpha * weight_decay
        lb = _momo_lower_bound(adapt_lower_bound, factor * (barf - gamma) + iprod, factor * bc1,
                               state.lb, lower_bound)
        t1 = fnp.maximum(factor * (barf - bc1 * lb - gamma) + iprod, 0.0) / exp_avg_norm
        t1 = fnp.where(exp_avg_norm <= np.finfo(float).eps, 0.0, t1)
        tau = fnp.minimum(alpha / bc1, t1)
        p_update = tree_map(lambda ea, pr, p: -(alpha * weight_decay) / factor * p
                            - tau * ea / pr, exp_avg, precond, params)
        if adapt_lower_bound:
            new_lb = fnp.maximum(((barf + iprod - gamma) - 0.5 * tau * exp_avg_norm) / bc1,
                                 lower_bound)
        else:
            new_lb = state.lb
        return p_update, MomoAdamState(exp_avg, exp_avg_sq, barf, gamma, new_lb, count_inc)

    return GradientTransformationExtraArgs(init, update)
