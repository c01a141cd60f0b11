"""The rest of optax's gradient scalings: AMSGrad, Adamax, AdaDelta, Adan, AdaBelief, Yogi,
RAdam, Rprop, SM3, NovoGrad, optimistic gradients, DoG, Polyak step sizes, sign and
parameter-block scalings.

Each follows optax 0.2.8 term by term (so numbers agree to float32 rounding) and is written
with the moment helpers of `optim.tree_utils`. States that optax shares (`ScaleByAdamState`)
come from `optim.transforms`. Imports `funcgrad.numpy`, `funcgrad.lax`, `funcgrad.tree_util`
and the optim modules below this one.
"""

from typing import Any, NamedTuple

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.errors import FuncgradValueError, op_error
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.base import (
    EmptyState,
    GradientTransformation,
    GradientTransformationExtraArgs,
    init_empty_state,
)
from funcgrad.optim.numerics import abs_sq, safe_increment, safe_norm, safe_root_mean_squares
from funcgrad.optim.transforms import ScaleByAdamState
from funcgrad.tree_util import tree_leaves, tree_map

__all__ = [
    "ApplyEvery", "ScaleByAdaDeltaState", "ScaleByAdanState", "ScaleByAmsgradState",
    "ScaleByBeliefState", "ScaleByDistanceOverGradientsState", "ScaleByNovogradState",
    "ScaleByOptimisticGradientState", "ScaleByRpropState", "ScaleBySM3State", "ScaleState",
    "ScaleByTrustRatioState", "apply_every", "centralize", "normalize_by_update_norm",
    "scale_by_adadelta", "scale_by_adamax", "scale_by_adan", "scale_by_amsgrad",
    "scale_by_belief", "scale_by_distance_over_gradients", "scale_by_novograd",
    "scale_by_optimistic_gradient", "scale_by_param_block_norm", "scale_by_param_block_rms",
    "scale_by_polyak", "scale_by_radam", "scale_by_rprop", "scale_by_sign", "scale_by_sm3",
    "scale_by_yogi",
]

ScaleState = ScaleByTrustRatioState = EmptyState


def _new_count():
    return fnp.zeros((), fnp.int32)


def _require_params(who, params):
    if params is None:
        raise op_error(who, "needs the parameters: call `update(grads, state, params)`",
                       cls=FuncgradValueError)


def _nesterov_mu_hat(mu, updates, b1, count):
    # optax's Nesterov momentum: the moment debiased one step ahead, mixed with the gradient.
    return tree_map(lambda m, g: b1 * m + (1 - b1) * g,
                    tu.tree_bias_correction(mu, b1, safe_increment(count)),
                    tu.tree_bias_correction(updates, b1, count))


def _adam_ratio(mu_hat, nu_hat, eps, eps_root):
    return tree_map(lambda m, v: None if m is None else m / (fnp.sqrt(v + eps_root) + eps),
                    mu_hat, nu_hat, is_leaf=lambda x: x is None)


# ---------------------------------------------------------------------------------------------
# Adam's relatives


class ScaleByAmsgradState(NamedTuple):
    count: Any  # int32
    mu: Any
    nu: Any
    nu_max: Any  # the running maximum of the (debiased) second moment


def scale_by_amsgrad(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None,
                     bias_correction_mu: bool = True,
                     bias_correction_nu: bool = True) -> GradientTransformation:
    """AMSGrad: Adam with the running maximum of the second moment in the denominator.

    Example:
        >>> opt = chain(scale_by_amsgrad(), scale(-1e-3))
    """
    def init(params):
        return ScaleByAmsgradState(_new_count(), tu.tree_zeros_like(params, dtype=mu_dtype),
                                   tu.tree_zeros_like(params), tu.tree_zeros_like(params))

    def update(updates, state, params=None):
        mu = tu.tree_update_moment(updates, state.mu, b1, 1)
        nu = tu.tree_update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count = safe_increment(state.count)
        mu_hat = tu.tree_bias_correction(mu, b1, count) if bias_correction_mu else mu
        nu_eff = tu.tree_bias_correction(nu, b2, count) if bias_correction_nu else nu
        nu_max = tree_map(fnp.maximum, state.nu_max, nu_eff)
        updates = _adam_ratio(mu_hat, nu_max, eps, eps_root)
        return updates, ScaleByAmsgradState(count, tu.tree_cast(mu, mu_dtype), nu, nu_max)

    return GradientTransformation(init, update)


def scale_by_adamax(b1=0.9, b2=0.999, eps=1e-8) -> GradientTransformation:
    """Adamax: the first moment over the infinity norm `max(|g| + eps, b2 * nu)`."""
    def init(params):
        return ScaleByAdamState(_new_count(), tu.tree_zeros_like(params),
                                tu.tree_zeros_like(params))

    def update(updates, state, params=None):
        count = safe_increment(state.count)
        mu = tu.tree_update_moment(updates, state.mu, b1, 1)
        nu = tu.tree_update_infinity_moment(updates, state.nu, b2, eps)
        mu_hat = tu.tree_bias_correction(mu, b1, count)
        return tree_map(lambda m, v: m / v, mu_hat, nu), ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


class ScaleByAdaDeltaState(NamedTuple):
    e_g: Any  # moving average of squared gradients
    e_x: Any  # moving average of squared updates


def scale_by_adadelta(rho=0.9, eps=1e-6) -> GradientTransformation:
    """AdaDelta: `g * sqrt(E[dx**2] + eps) / sqrt(E[g**2] + eps)`."""
    def init(params):
        return ScaleByAdaDeltaState(tu.tree_zeros_like(params), tu.tree_zeros_like(params))

    def update(updates, state, params=None):
        e_g = tu.tree_update_moment(updates, state.e_g, rho, 2)
        updates = tree_map(lambda g, cur, prev: (fnp.sqrt(prev + eps) / fnp.sqrt(cur + eps)) * g,
                           updates, e_g, state.e_x)
        e_x = tu.tree_update_moment(updates, state.e_x, rho, 2)
        return updates, ScaleByAdaDeltaState(e_g, e_x)

    return GradientTransformation(init, update)


class ScaleByAdanState(NamedTuple):
    m: Any
    v: Any
    n: Any
    g: Any  # the previous gradient
    t: Any  # int32 step count


def scale_by_adan(b1=0.98, b2=0.92, b3=0.99, eps=1e-8, eps_root=0.0) -> GradientTransformation:
    """Adan (Xie et al. 2022): Nesterov-style moments of the gradient and of its change."""
    def init(params):
        z = tu.tree_zeros_like
        return ScaleByAdanState(z(params), z(params), z(params), z(params), _new_count())

    def update(updates, state, params=None):
        g = updates
        diff = tu.tree_where(state.t == 0, tu.tree_zeros_like(g), tu.tree_sub(g, state.g))
        m = tu.tree_update_moment(g, state.m, b1, 1)
        v = tu.tree_update_moment(diff, state.v, b2, 1)
        sq = tu.tree_add_scale(g, 1 - b2, diff)
        n = tu.tree_update_moment_per_elem_norm(sq, state.n, b3, 2)
        t = safe_increment(state.t)
        m_hat = tu.tree_bias_correction(m, b1, t)
        v_hat = tu.tree_bias_correction(v, b2, t)
        n_hat = tu.tree_bias_correction(n, b3, t)
        u = tu.tree_add_scale(m_hat, 1 - b2, v_hat)
        u = tu.tree_div(u, tree_map(lambda x: fnp.sqrt(x + eps_root) + eps, n_hat))
        return u, ScaleByAdanState(m, v, n, g, t)

    return GradientTransformation(init, update)


class ScaleByBeliefState(NamedTuple):
    count: Any  # int32
    mu: Any
    nu: Any  # second central moment: of (g - mu)


def scale_by_belief(b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16, *,
                    nesterov: bool = False) -> GradientTransformation:
    """AdaBelief: Adam with the variance of the gradient around its moving average."""
    def init(params):
        return ScaleByBeliefState(_new_count(), tu.tree_zeros_like(params),
                                  tu.tree_zeros_like(params))

    def update(updates, state, params=None):
        mu = tu.tree_update_moment(updates, state.mu, b1, 1)
        error = tu.tree_sub(updates, mu)
        nu = tu.tree_update_moment_per_elem_norm(error, state.nu, b2, 2)
        nu = tree_map(lambda v: v + eps_root, nu)
        count = safe_increment(state.count)
        mu_hat = (_nesterov_mu_hat(mu, updates, b1, count) if nesterov
                  else tu.tree_bias_correction(mu, b1, count))
        nu_hat = tu.tree_bias_correction(nu, b2, count)
        updates = tree_map(lambda m, v: m / (fnp.sqrt(v) + eps), mu_hat, nu_hat)
        return updates, ScaleByBeliefState(count, mu, nu)

    return GradientTransformation(init, update)


def scale_by_yogi(b1=0.9, b2=0.999, eps=1e-3, eps_root=0.0,
                  initial_accumulator_value=1e-6) -> GradientTransformation:
    """Yogi: Adam whose second moment moves additively, `nu -= (1-b2) sign(nu - g**2) g**2`."""
    def init(params):
        full = tu.tree_full_like
        return ScaleByAdamState(_new_count(), full(params, initial_accumulator_value),
                                full(params, initial_accumulator_value))

    def update(updates, state, params=None):
        mu = tu.tree_update_moment(updates, state.mu, b1, 1)
        nu = tree_map(lambda g, v: v - (1 - b2) * fnp.sign(v - abs_sq(g)) * abs_sq(g),
                      updates, state.nu)
        count = safe_increment(state.count)
        mu_hat = tu.tree_bias_correction(mu, b1, count)
        nu_hat = tu.tree_bias_correction(nu, b2, count)
        return _adam_ratio(mu_hat, nu_hat, eps, eps_root), ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


def scale_by_radam(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, threshold=5.0, *,
                   nesterov: bool = False) -> GradientTransformation:
    """Rectified Adam: the plain first moment until the variance estimate is reliable
    (`ro >= threshold`), then Adam's ratio times the rectification `r`."""
    ro_inf = 2.0 / (1.0 - b2) - 1.0

    def init(params):
        return ScaleByAdamState(_new_count(), tu.tree_zeros_like(params),
                                tu.tree_zeros_like(params))

    def update(updates, state, params=None):
        mu = tu.tree_update_moment(updates, state.mu, b1, 1)
        nu = tu.tree_update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count = safe_increment(state.count)
        b2t = b2 ** count.astype(fnp.float32)
        ro = ro_inf - 2 * count * b2t / (1 - b2t)
        mu_hat = (_nesterov_mu_hat(mu, updates, b1, count) if nesterov
                  else tu.tree_bias_correction(mu, b1, count))
        nu_hat = tu.tree_bias_correction(nu, b2, count)
        r = fnp.sqrt((ro - 4.0) * (ro - 2.0) * ro_inf / ((ro_inf - 4.0) * (ro_inf - 2.0) * ro))
        rectified = tree_map(lambda m, v: r.astype(m.dtype) * m / (fnp.sqrt(v + eps_root) + eps),
                             mu_hat, nu_hat)
        updates = tree_map(lambda t, f: fnp.where(ro >= threshold, t, f), rectified, mu_hat)
        return updates, ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


class ScaleByNovogradState(NamedTuple):
    count: Any  # int32
    mu: Any
    nu: Any  # one scalar per leaf: the moving average of the squared layer norm


def scale_by_novograd(b1=0.9, b2=0.25, eps=1e-8, eps_root=0.0, weight_decay=0.0,
                      mu_dtype=None) -> GradientTransformation:
    """NovoGrad: layer-wise second moments (of `||g||**2`) and decoupled weight decay."""
    def nu_addition(g):
        return fnp.linalg.norm(g) ** 2

    def mu_addition(g, p, n):
        return g / (fnp.sqrt(n + eps_root) + eps) + weight_decay * p

    def init_nu(grads, nu):
        return tree_map(lambda g, n: nu_addition(g).astype(n.dtype), grads, nu)

    def update_nu(grads, nu):
        return tu.tree_update_moment(tree_map(nu_addition, grads), nu, b2, 1)

    def init_mu(grads, params, mu, nu):
        return tree_map(mu_addition, grads, params, nu)

    def update_mu(grads, params, mu, nu):
        return tree_map(lambda m, u: b1 * m + u, mu, tree_map(mu_addition, grads, params, nu))

    def init(params):
        return ScaleByNovogradState(_new_count(), tu.tree_zeros_like(params, dtype=mu_dtype),
                                    tree_map(lambda p: fnp.asarray(0.0, dtype=p.dtype), params))

    def update(updates, state, params=None):
        _require_params("scale_by_novograd", params)
        count = safe_increment(state.count)
        nu = lax.cond(count == 1, init_nu, update_nu, updates, state.nu)
        mu = lax.cond(count == 1, init_mu, update_mu, updates, params, state.mu, nu)
        mu = tu.tree_cast(mu, mu_dtype)
        return mu, ScaleByNovogradState(count, mu, nu)

    return GradientTransformation(init, update)


# ---------------------------------------------------------------------------------------------
# Sign, Rprop, SM3, optimistic gradients


def scale_by_sign() -> GradientTransformation:
    """`sign(updates)`."""
    return GradientTransformation(init_empty_state,
                                  lambda updates, state, params=None:
                                  (tree_map(fnp.sign, updates), state))


class ScaleByRpropState(NamedTuple):
    step_sizes: Any
    prev_updates: Any


def scale_by_rprop(learning_rate, eta_minus=0.5, eta_plus=1.2, min_step_size=1e-6,
                   max_step_size=50.0) -> GradientTransformation:
    """Rprop: per-coordinate step sizes that grow while the gradient keeps its sign and shrink
    when it flips; the update is `step_size * sign(g)` (zero right after a flip)."""
    def init(params):
        return ScaleByRpropState(tu.tree_full_like(params, learning_rate),
                                 tu.tree_zeros_like(params))

    def new_step(s, step):
        grown = fnp.clip(step * fnp.where(s > 0, eta_plus, eta_minus),
                         min_step_size, max_step_size)
        return fnp.where(s == 0, step, grown)

    def update(updates, state, params=None):
        sign = tree_map(lambda g, prev: g * prev, updates, state.prev_updates)
        steps = tree_map(new_step, sign, state.step_sizes)
        prev_updates = tree_map(lambda s, g, st: fnp.where(s < 0, fnp.zeros_like(g),
                                                           st * fnp.sign(g)),
                                sign, updates, steps)
        updates = tree_map(lambda s, g, prev: fnp.where(s < 0, fnp.zeros_like(prev), prev),
                           sign, prev_updates, state.prev_updates)
        return updates, ScaleByRpropState(steps, prev_updates)

    return GradientTransformation(init, update)


class ScaleBySM3State(NamedTuple):
    mu: Any  # per leaf: one accumulator per axis
    nu: Any  # the momentum of the scaled updates


def _other_axes(i, ndim):
    return tuple(a for a in range(ndim) if a != i)


def scale_by_sm3(b1=0.9, b2=1.0, eps=1e-8) -> GradientTransformation:
    """SM3 (Anil et al. 2019): memory-efficient adaptive scaling with one accumulator per
    axis (the cover of each entry is the minimum over its axes)."""
    coeffs = ((1.0 - b2) if b2 != 1.0 else 1.0, b2)

    def init(params):
        if any(fnp.iscomplexobj(x) for x in tree_leaves(params)):
            raise FuncgradValueError("scale_by_sm3: complex parameters are not supported")
        mu = tree_map(lambda p: [fnp.zeros((p.shape[i],), p.dtype) for i in range(p.ndim)],
                      params)
        return ScaleBySM3State(mu, tu.tree_zeros_like(params))

    def accumulate(g, v):
        cover = v[0] if g.ndim < 2 else _min_all(v)
        return coeffs[0] * g ** 2 + coeffs[1] * cover

    def update(updates, state, params=None):
        mu = tree_map(lambda g, v: [fnp.reshape(v[i], [1] * i + [g.shape[i]]
                                                + [1] * (g.ndim - i - 1))
                                    for i in range(g.ndim)], updates, state.mu)
        accum = tree_map(accumulate, updates, mu)
        inv = tree_map(lambda t: fnp.where(t > 0, lax.rsqrt(t + eps), 0.0), accum)
        up = tree_map(lambda g, a: g * a, updates, inv)
        nu = tu.tree_update_moment(up, state.nu, b1, 1)
        mu = tree_map(lambda a: [a if a.ndim < 2 else fnp.max(a, axis=_other_axes(i, a.ndim))
                                 for i in range(a.ndim)], accum)
        return nu, ScaleBySM3State(mu, nu)

    return GradientTransformation(init, update)


def _min_all(arrays):
    out = arrays[0]
    for a in arrays[1:]:
        out = fnp.minimum(out, a)
    return out


class ScaleByOptimisticGradientState(NamedTuple):
    is_initial_step: Any  # bool
    previous_gradient: Any


def scale_by_optimistic_gradient(alpha=1.0, beta=1.0) -> GradientTransformation:
    """Optimistic gradient: `(alpha + beta) * g - beta * g_previous`."""
    def init(params):
        return ScaleByOptimisticGradientState(fnp.asarray(True), tu.tree_zeros_like(params))

    def update(updates, state, params=None):
        def f(g, prev):
            prev = fnp.where(state.is_initial_step, g, prev)
            return (alpha + beta) * g - beta * prev
        return (tree_map(f, updates, state.previous_gradient),
                ScaleByOptimisticGradientState(fnp.asarray(False), updates))

    return GradientTransformation(init, update)


# ---------------------------------------------------------------------------------------------
# Distances, Polyak steps, parameter-block scalings


class ScaleByDistanceOverGradientsState(NamedTuple):
    max_dist: Any
    grad_sum_of_squares: Any
    init_params: Any


def scale_by_distance_over_gradients(reps_rel=1e-6, eps=1e-8, param_dtype=fnp.float32,
                                     global_scale=1.0) -> GradientTransformation:
    """DoG's layer-wise step (Ivgi et al. 2023): `distance travelled / sqrt(sum ||g||**2)`."""
    def l2(x, y=0.0):
        return fnp.sqrt(fnp.sum(fnp.square(x - y)))

    def init(params):
        return ScaleByDistanceOverGradientsState(
            tree_map(lambda x: reps_rel * (1 + l2(x)), params),
            tree_map(lambda x: fnp.zeros(1), params), tu.tree_cast(params, param_dtype))

    def update(updates, state, params=None):
        _require_params("scale_by_distance_over_gradients", params)
        max_dist = tree_map(lambda d, x, y: fnp.maximum(d, l2(x, y)), state.max_dist, params,
                            state.init_params)
        g_sos = tree_map(lambda x, y: x + fnp.sum(fnp.square(y)), state.grad_sum_of_squares,
                         updates)
        updates = tree_map(lambda g, d, s: global_scale * (d / fnp.sqrt(s + eps)) * g,
                           updates, max_dist, g_sos)
        return updates, ScaleByDistanceOverGradientsState(max_dist, g_sos, state.init_params)

    return GradientTransformation(init, update)


def scale_by_polyak(f_min=0.0, max_learning_rate=1.0, eps=0.0,
                    variant: str = "sps") -> GradientTransformationExtraArgs:
    """The Polyak step size `min((value - f_min) / ||g||**2, max_learning_rate)`; `update`
    needs the loss as `value=` ("sps+" clips a negative gap to 0).

    Example:
        >>> opt = chain(sgd(1.0), scale_by_polyak())
        >>> updates, state = opt.update(grads, state, params, value=loss)
    """
    if variant not in ("sps", "sps+"):
        raise FuncgradValueError(f"scale_by_polyak: invalid variant {variant!r} "
                                 "(use 'sps' or 'sps+')")

    def update(updates, state, params=None, *, value, **extra_args):
        grad_sq_norm = tu.tree_norm(updates, squared=True)
        gap = fnp.asarray(value - f_min).astype(grad_sq_norm.dtype)
        if variant == "sps+":
            gap = fnp.maximum(gap, 0.0)
        step = fnp.where(grad_sq_norm + eps <= np.finfo(float).eps, fnp.asarray(0.0),
                         fnp.minimum(gap / (grad_sq_norm + eps), max_learning_rate))
        return tu.tree_scale(step, updates), state

    return GradientTransformationExtraArgs(init_empty_state, update)


def scale_by_param_block_norm(min_scale=1e-3) -> GradientTransformation:
    """Each update leaf times `max(||param leaf||, min_scale)`."""
    def update(updates, state, params=None):
        _require_params("scale_by_param_block_norm", params)
        return tree_map(lambda u, p: u * safe_norm(p, min_scale), updates, params), state
    return GradientTransformation(init_empty_state, update)


def scale_by_param_block_rms(min_scale=1e-3) -> GradientTransformation:
    """Each update leaf times `max(rms(param leaf), min_scale)` (Adafactor's scaling)."""
    def update(updates, state, params=None):
        _require_params("scale_by_param_block_rms", params)
        return (tree_map(lambda u, p: u * safe_root_mean_squares(p, min_scale), updates,
                         params), state)
    return GradientTransformation(init_empty_state, update)


def normalize_by_update_norm(scale_factor=1.0, eps=1e-6) -> GradientTransformation:
    """`updates * scale_factor / (||updates|| + eps)` (the global norm)."""
    def update(updates, state, params=None):
        g_norm = (tu.tree_norm(updates) + eps) / scale_factor
        return tree_map(lambda g: g / g_norm, updates), state
    return GradientTransformation(init_empty_state, update)


def centralize() -> GradientTransformation:
    """Gradient centralization: each leaf of rank > 1 minus its mean over all axes but 0."""
    def subtract_mean(g):
        return g - g.mean(tuple(range(1, g.ndim)), keepdims=True) if g.ndim > 1 else g
    return GradientTransformation(init_empty_state, lambda updates, state, params=None:
                                  (tree_map(subtract_mean, updates), state))


class ApplyEvery(NamedTuple):
    count: Any  # int32, modulo k
    grad_acc: Any  # the sum of the updates since the last emission


def apply_every(k=1) -> GradientTransformation:
    """Accumulates `k` updates and emits their sum every `k`-th step (zeros between).

    See `MultiSteps` for accumulation around an optimizer (its state then changes only every
    k steps).
    """
    def init(params):
        return ApplyEvery(_new_count(), tu.tree_zeros_like(params))

    def update(updates, state, params=None):
        c = state.count % k
        acc = c != 0
        grad_acc = tree_map(lambda g, ga: acc * ga + g, updates, state.grad_acc)
        emit = c == (k - 1)
        updates = tree_map(lambda ga: emit * ga, grad_acc)
        return updates, ApplyEvery(safe_increment(state.count) % k, grad_acc)

    return GradientTransformation(init, update)
