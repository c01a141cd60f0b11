"""Adam-like optimizers of optax 0.2.8's contrib: AdEMAMix and its simplified form, ADOPT,
ACProp, MADGRAD, and Sophia with Hutchinson's Hessian-diagonal estimator.

Imports `funcgrad.numpy`, `funcgrad.lax`, `funcgrad.random`, `funcgrad.api` and the optim
modules it chains.
"""

from typing import Any, NamedTuple

import funcgrad.numpy as fnp
from funcgrad import debug, lax, random
from funcgrad.api import grad, jvp
from funcgrad.errors import FuncgradValueError
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.base import (
    GradientTransformation,
    GradientTransformationExtraArgs,
    chain,
    with_extra_args_support,
)
from funcgrad.optim.numerics import safe_increment
from funcgrad.optim.scaling import ScaleByBeliefState
from funcgrad.optim.transforms import (
    ScaleByAdamState,
    add_decayed_weights,
    scale_by_learning_rate,
)
from funcgrad.tree_util import tree_leaves, tree_map

__all__ = [
    "HutchinsonState", "MadgradState", "ScaleByAdemamixState",
    "ScaleBySimplifiedAdEMAMixState", "SophiaState", "acprop", "ademamix", "adopt",
    "hutchinson_estimator_diag_hessian", "madgrad", "scale_by_acprop", "scale_by_ademamix",
    "scale_by_adopt", "scale_by_madgrad", "scale_by_simplified_ademamix", "simplified_ademamix",
    "sophia",
]


def _at(value, count):
    return value(count) if callable(value) else value


class ScaleByAdemamixState(NamedTuple):
    count: Any  # int32
    count_m2: Any  # int32
    m1: Any  # the fast moving average
    m2: Any  # the slow moving average
    nu: Any


def scale_by_ademamix(b1=0.9, b2=0.999, b3=0.9999, alpha=6.0, eps=1e-8, eps_root=0.0,
                      mu_dtype=None) -> GradientTransformation:
    """AdEMAMix's scaling: `(m1_hat + alpha * m2) / (sqrt(nu_hat + eps_root) + eps)` with a
    fast (`b1`) and a slow (`b3`) moving average; `b3` and `alpha` may be schedules."""
    def init(params):
        z = lambda: tu.tree_zeros_like(params, dtype=mu_dtype)  # noqa: E731
        return ScaleByAdemamixState(fnp.zeros((), fnp.int32), fnp.zeros((), fnp.int32), z(), z(),
                                    z())

    def update(updates, state, params=None):
        c_b3, c_alpha = _at(b3, state.count_m2), _at(alpha, state.count_m2)
        m1 = tu.tree_update_moment(updates, state.m1, b1, 1)
        m2 = tu.tree_update_moment(updates, state.m2, c_b3, 1)
        nu = tu.tree_update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count, count_m2 = safe_increment(state.count), safe_increment(state.count_m2)
        m1_hat = tu.tree_bias_correction(m1, b1, count)
        nu_hat = tu.tree_bias_correction(nu, b2, count)
        updates = tree_map(lambda a, b, v: (a + c_alpha * b) / (fnp.sqrt(v + eps_root) + eps),
                           m1_hat, m2, nu_hat)
        return updates, ScaleByAdemamixState(count, count_m2, m1, m2, nu)

    return GradientTransformation(init, update)


def ademamix(learning_rate, b1=0.9, b2=0.999, b3=0.9999, alpha=5.0, eps=1e-8, eps_root=0.0,
             mu_dtype=None, weight_decay=0.0, mask=None) -> GradientTransformation:
    """AdEMAMix (Pagliardini et al. 2024): Adam with a mixture of two moving averages.

    Example:
        >>> opt = ademamix(1e-3)
    """
    return chain(scale_by_ademamix(b1, b2, b3, alpha, eps, eps_root, mu_dtype),
                 add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))


class ScaleBySimplifiedAdEMAMixState(NamedTuple):
    t: Any  # int32
    m: Any
    n: Any


def scale_by_simplified_ademamix(b1=0.99, b2=0.95, alpha=0.0, eps=1e-8,
                                 eps_root=0.0) -> GradientTransformation:
    """Simplified AdEMAMix's scaling: `(m + alpha g) / (sqrt(n_hat + eps_root) + eps)` with
    the accumulated momentum `m = g + b1 m`."""
    def init(params):
        return ScaleBySimplifiedAdEMAMixState(fnp.asarray(0, fnp.int32),
                                              tu.tree_zeros_like(params),
                                              tu.tree_zeros_like(params))

    def update(updates, state, params=None):
        c_alpha = _at(alpha, state.t)
        m = tu.tree_add_scale(updates, b1, state.m)
        sq = tu.tree_mul(updates, updates)
        n = tu.tree_add_scale(sq, b2, tu.tree_sub(state.n, sq))  # lerp(b2, g*g, n)
        t = safe_increment(state.t)
        n_hat = tu.tree_bias_correction(n, b2, t)
        u = tu.tree_div(tu.tree_add_scale(m, c_alpha, updates),
                        tree_map(lambda x: fnp.sqrt(x + eps_root) + eps, n_hat))
        return u, ScaleBySimplifiedAdEMAMixState(t, m, n)

    return GradientTransformation(init, update)


def simplified_ademamix(learning_rate, b1=0.99, b2=0.95, alpha=0.0, eps=1e-8, eps_root=0.0,
                        weight_decay=0.0, mask=None) -> GradientTransformation:
    """Simplified AdEMAMix (Morwani et al. 2025)."""
    return chain(scale_by_simplified_ademamix(b1, b2, alpha, eps, eps_root),
                 add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))


def scale_by_adopt(b1=0.9, b2=0.9999, eps=1e-6, mu_dtype=None, *, nesterov: bool = False,
                   use_clipping: bool = True,
                   clip_value_fn=lambda x: x ** 0.25) -> GradientTransformation:
    """ADOPT's scaling (Taniguchi et al. 2024): the gradient normalized by the *previous*
    second moment (clipped to `clip_value_fn(step)`), then averaged."""
    def init(params):
        return ScaleByAdamState(fnp.zeros((), fnp.int32),
                                tu.tree_zeros_like(params, dtype=mu_dtype),
                                tu.tree_zeros_like(params))

    def update(updates, state, params=None):
        b2_ = fnp.where(state.count > 0, b2, 0)
        b1_ = fnp.where(state.count > 0, b1, 1)
        nu = tu.tree_update_moment_per_elem_norm(updates, state.nu, b2_, 2)
        normalized = tree_map(lambda g, v: g / fnp.maximum(fnp.sqrt(v), eps), updates, state.nu)
        if use_clipping:
            clip_value = clip_value_fn(state.count)
            normalized = tree_map(lambda x: fnp.clip(x, -clip_value, clip_value), normalized)
        mu = tu.tree_update_moment(normalized, state.mu, b1_, 1)
        out = tu.tree_update_moment(normalized, mu, b1_, 1) if nesterov else mu
        return out, ScaleByAdamState(safe_increment(state.count), tu.tree_cast(mu, mu_dtype), nu)

    return GradientTransformation(init, update)


def adopt(learning_rate, b1=0.9, b2=0.9999, eps=1e-6, mu_dtype=None, *,
          nesterov: bool = False, use_clipping: bool = True,
          clip_value_fn=lambda x: x ** 0.25) -> GradientTransformationExtraArgs:
    """ADOPT: Adam that converges with any `b2` (Taniguchi et al. 2024)."""
    return chain(scale_by_adopt(b1, b2, eps, mu_dtype, nesterov=nesterov,
                                use_clipping=use_clipping, clip_value_fn=clip_value_fn),
                 scale_by_learning_rate(learning_rate))


def scale_by_acprop(b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16) -> GradientTransformation:
    """ACProp's scaling (Zhuang et al. 2021): the gradient over the previous step's belief
    (centered second moment)."""
    def init(params):
        return ScaleByBeliefState(fnp.zeros((), fnp.int32), tu.tree_zeros_like(params),
                                  tu.tree_zeros_like(params))

    def update(updates, state, params=None):
        mu = tu.tree_update_moment(updates, state.mu, b1, 1)
        error = tree_map(lambda g, m: g - m, updates, state.mu)
        nu = tu.tree_update_moment_per_elem_norm(error, state.nu, b2, 2)
        nu = tree_map(lambda v: v + eps_root, nu)
        count = safe_increment(state.count)
        initial = state.count == 0
        t = fnp.where(initial, count, state.count)
        nu_hat = tree_map(lambda x: fnp.where(initial, 1, x),
                          tu.tree_bias_correction(state.nu, b2, t))
        updates = tree_map(lambda g, v: g / (fnp.sqrt(v) + eps), updates, nu_hat)
        return updates, ScaleByBeliefState(count, mu, nu)

    return GradientTransformation(init, update)


def acprop(learning_rate, b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16, weight_decay=0.0,
           mask=None) -> GradientTransformation:
    """ACProp: asynchronous centering of the second moment."""
    return chain(scale_by_acprop(b1, b2, eps, eps_root), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


class MadgradState(NamedTuple):
    count: Any  # int32
    grad_sum_sq: Any  # the weighted sum of squared gradients
    s: Any  # the weighted sum of gradients
    x0: Any  # the initial params


def scale_by_madgrad(learning_rate, momentum: float = 0.9,
                     eps: float = 1e-6) -> GradientTransformation:
    """MADGRAD's dual-averaging step (Defazio & Jelassi 2021); it applies the learning rate
    itself (the output is the parameter change)."""
    def init(params):
        return MadgradState(fnp.zeros((), fnp.int32), tu.tree_zeros_like(params),
                            tu.tree_zeros_like(params), tree_map(lambda x: x, params))

    def update(updates, state, params=None):
        if params is None:
            raise FuncgradValueError("scale_by_madgrad: needs the parameters")
        lamb = (_at(learning_rate, state.count) + eps) * fnp.sqrt(state.count + 1)
        grad_sum_sq = tree_map(lambda s, g: s + (lamb * (g ** 2)).astype(g.dtype),
                               state.grad_sum_sq, updates)
        s = tree_map(lambda s0, g: s0 + (lamb * g).astype(g.dtype), state.s, updates)
        z = tree_map(lambda x0, si, sq: x0 - si / (fnp.cbrt(sq) + eps), state.x0, s, grad_sum_sq)
        new = tree_map(lambda zi, x: (1 - momentum) * zi + momentum * x, z, params)
        return (tree_map(lambda n, o: n - o, new, params),
                MadgradState(safe_increment(state.count), grad_sum_sq, s, state.x0))

    return GradientTransformation(init, update)


def madgrad(learning_rate, momentum: float = 0.9, weight_decay: float = 0.0,
            eps: float = 1e-6) -> GradientTransformation:
    """MADGRAD with coupled weight decay."""
    return chain(add_decayed_weights(weight_decay),
                 scale_by_madgrad(learning_rate=learning_rate, momentum=momentum, eps=eps))


class HutchinsonState(NamedTuple):
    key: Any


def _rademacher(key, shape, dtype):
    # jax.random.rademacher: 2 * bernoulli(key, 0.5) - 1 (the same bits).
    return 2 * random.bernoulli(key, 0.5, shape).astype(dtype) - 1


def hutchinson_estimator_diag_hessian(random_seed=None):
    """Hutchinson's estimate of the Hessian diagonal of `obj_fn` (given to `update`):
    `z * (H z)` with a random sign vector `z`."""
    def init_fn(params):
        return HutchinsonState(random.PRNGKey(0) if random_seed is None else random_seed)

    def update_fn(updates, state, params=None, obj_fn=None, **extra_args):
        if params is None or obj_fn is None:
            raise FuncgradValueError("hutchinson_estimator_diag_hessian: update needs params "
                                     "and obj_fn")
        key, subkey = random.split(state.key)
        signs = tu.tree_random_like(subkey, params, _rademacher, dtype=fnp.float32)
        signs = tu.tree_cast(signs, tu.tree_dtype(params, "lowest"))
        hvp = jvp(grad(obj_fn), (params,), (signs,))[1]
        return tree_map(lambda h, r: h * r, hvp, signs), HutchinsonState(key)

    return GradientTransformationExtraArgs(init_fn, update_fn)


class SophiaState(NamedTuple):
    count: Any  # int32
    mu: Any  # momentum
    nu: Any  # moving average of the Hessian diagonal
    hessian_fn_state: Any


def _scale_by_sophia(b1, b2, eps, gamma, clip_threshold, update_interval, hessian_diagonal_fn,
                     mu_dtype, report_every) -> GradientTransformationExtraArgs:
    hessian_diagonal_fn = with_extra_args_support(hessian_diagonal_fn)

    def init(params):
        return SophiaState(fnp.zeros((), fnp.int32), tu.tree_zeros_like(params, dtype=mu_dtype),
                           tu.tree_zeros_like(params), hessian_diagonal_fn.init(params))

    def update(updates, state, params=None, **hess_fn_kwargs):
        if params is None:
            raise FuncgradValueError("sophia: needs the parameters")
        grads = updates
        mu = tu.tree_update_moment(updates, state.mu, b1, 1)
        mu_hat = tu.tree_bias_correction(mu, b1, safe_increment(state.count))
        updates = tree_map(lambda m, h: m / fnp.maximum(gamma * h, eps), mu_hat, state.nu)
        if clip_threshold is not None:
            if report_every is not None:
                _report_win_rate(updates, clip_threshold, safe_increment(state.count),
                                 report_every)
            updates = tree_map(lambda u: fnp.clip(u, -clip_threshold, clip_threshold), updates)

        def refresh(hess_state, nu):
            diag, hess_state = hessian_diagonal_fn.update(grads, hess_state, params=params,
                                                          **hess_fn_kwargs)
            return hess_state, tu.tree_update_moment(diag, nu, b2, 1)

        hess_state, nu = lax.cond(state.count % update_interval == 0, refresh,
                                  lambda h, n: (h, n), state.hessian_fn_state, state.nu)
        return updates, SophiaState(safe_increment(state.count), tu.tree_cast(mu, mu_dtype), nu,
                                    hess_state)

    return GradientTransformationExtraArgs(init, update)


def _report_win_rate(updates, clip_threshold, count, every):
    kept = sum(fnp.sum(fnp.abs(u) < clip_threshold) for u in tree_leaves(updates))
    win_rate = kept / tu.tree_size(updates)
    lax.cond(count % every == 0, lambda: debug.print("Sophia optimizer win rate: {}", win_rate),
             lambda: None)


def sophia(learning_rate, b1=0.965, b2=0.99, eps=1e-8, weight_decay=1e-4,
           weight_decay_mask=None, gamma=0.01, clip_threshold=1.0, update_interval=10,
           hessian_diagonal_fn=hutchinson_estimator_diag_hessian(), mu_dtype=None,
           verbose: bool = False,
           print_win_rate_every_n_steps=0) -> GradientTransformationExtraArgs:
    """Sophia (Liu et al. 2023): momentum over a clipped diagonal-Hessian preconditioner,
    refreshed every `update_interval` steps; `update` needs `obj_fn=` (the loss of the
    params) for the default Hutchinson estimator.

    `verbose` prints the share of coordinates left unclipped every
    `print_win_rate_every_n_steps` steps.

    Example:
        >>> updates, state = sophia(1e-3).update(grads, state, params, obj_fn=loss)
    """
    report_every = print_win_rate_every_n_steps if verbose else None
    return chain(_scale_by_sophia(b1, b2, eps, gamma, clip_threshold, update_interval,
                                  hessian_diagonal_fn, mu_dtype, report_every),
                 add_decayed_weights(weight_decay, mask=weight_decay_mask),
                 scale_by_learning_rate(learning_rate))
