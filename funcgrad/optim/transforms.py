"""The small gradient transformations that optimizers are chained from, as in optax.

Each factory returns a `GradientTransformation`; its state is a NamedTuple defined next to it.
The update equations and defaults follow optax 0.2.8 term by term (same operation order), so
the numbers agree to float32 rounding. Imports only `funcgrad.numpy`, `funcgrad.tree_util`,
`funcgrad.errors` and `optim.base`.
"""

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.errors import FuncgradTypeError, FuncgradValueError, op_error
from funcgrad.optim.base import (
    EmptyState,
    GradientTransformation,
    MaskedNode,
    check_structure,
    resolve_mask,
)
from funcgrad.tree_util import tree_leaves, tree_map, tree_structure

__all__ = [
    "AddDecayedWeightsState", "ClipByGlobalNormState", "EmaState", "MaskedState",
    "ScaleByAdamState", "ScaleByLearningRateState", "ScaleByLionState",
    "ScaleByRStdDevWithCountState", "ScaleByRmsState", "ScaleByRmsWithCountState",
    "ScaleByRssState", "ScaleByScheduleState", "ScaleByStddevState", "TraceState",
    "add_decayed_weights", "clip", "clip_by_global_norm", "current_lr", "ema", "global_norm",
    "masked", "scale", "scale_by_adam", "scale_by_learning_rate", "scale_by_lion",
    "scale_by_rms", "scale_by_rss", "scale_by_schedule", "scale_by_stddev",
    "scale_by_trust_ratio", "trace",
]

_INT32_MAX = np.iinfo(np.int32).max
AddDecayedWeightsState = ClipByGlobalNormState = EmptyState


def _zeros(tree):
    return tree_map(fnp.zeros_like, tree)


def _new_count():
    return fnp.zeros((), fnp.int32)


def _increment(count):
    # optax's safe_int32_increment: stops at the largest int32 instead of wrapping.
    return fnp.where(count < _INT32_MAX, count + 1, _INT32_MAX)


def _bias_correction(decay, count):
    return 1.0 - decay ** count.astype(fnp.float32)


def _schedule_value(who, schedule, count):
    value = fnp.asarray(schedule(count))
    if value.shape != ():
        name = getattr(schedule, "__name__", type(schedule).__name__)
        raise op_error(who, f"the schedule {name} returned an array of shape {value.shape}; "
                            "a schedule must return a scalar", cls=FuncgradValueError,
                       hint="return a float or a rank-0 array from the step count")
    return value if fnp.issubdtype(value.dtype, fnp.floating) else value.astype(fnp.float32)


def _check_like_state(who, state_tree, updates):
    check_structure(who, state_tree, updates, "params", "updates")


# ---------------------------------------------------------------------------------------------
# Scaling


def scale(step_size: float) -> GradientTransformation:
    """`updates * step_size`. For gradient descent use a negative step size.

    Example:
        >>> scale(-0.1).update({'w': fnp.ones(2)}, EmptyState())[0]
        {'w': Array([-0.1, -0.1], dtype=float32)}
    """
    def update(updates, state, params=None):
        return tree_map(lambda g: step_size * g, updates), state
    return GradientTransformation(lambda params: EmptyState(), update)


class ScaleByScheduleState(NamedTuple):
    count: Any  # int32: number of updates so far


def scale_by_schedule(step_size_fn: Callable[[Any], Any]) -> GradientTransformation:
    """`updates * step_size_fn(count)`, `count` being the number of earlier updates.

    Raises:
        FuncgradValueError: (at update) if the schedule returns a non-scalar.
    """
    def update(updates, state, params=None):
        step_size = _schedule_value("scale_by_schedule", step_size_fn, state.count)
        updates = tree_map(lambda g: step_size.astype(g.dtype) * g, updates)
        return updates, ScaleByScheduleState(_increment(state.count))
    return GradientTransformation(lambda params: ScaleByScheduleState(_new_count()), update)


class ScaleByLearningRateState(NamedTuple):
    count: Any  # int32: number of updates so far
    learning_rate: Any  # float32: the rate of the latest update (before any: of the first)


def scale_by_learning_rate(learning_rate=None, *, flip_sign: bool = True
                           ) -> GradientTransformation:
    """`updates * -learning_rate` (or `+` with `flip_sign=False`); the rate may be a schedule
    (None: the updates unchanged, as in optax).

    Unlike optax, the state records the learning rate (read it with `current_lr(state)`):
    before any update, the rate the first update will use; afterwards, the rate of the latest
    update (as optax's `inject_hyperparams` does).

    Args:
        learning_rate: a float or a schedule `count -> scalar`.
        flip_sign: multiply by `-learning_rate` (descent) when True.
    """
    if learning_rate is None:  # optax's default: no scaling at all (not even the sign)
        return GradientTransformation(lambda params: EmptyState(),
                                      lambda updates, state, params=None: (updates, state))
    sign = -1.0 if flip_sign else 1.0
    scheduled = callable(learning_rate)

    def rate(count):
        if scheduled:
            return _schedule_value("scale_by_learning_rate", learning_rate, count)
        return fnp.asarray(learning_rate, fnp.float32)

    def init(params):
        count = _new_count()
        return ScaleByLearningRateState(count, rate(count))

    def update(updates, state, params=None):
        lr = rate(state.count)
        if scheduled:
            step = sign * lr
            updates = tree_map(lambda g: step.astype(g.dtype) * g, updates)
        else:
            updates = tree_map(lambda g: (sign * learning_rate) * g, updates)
        return updates, ScaleByLearningRateState(_increment(state.count), lr)

    return GradientTransformation(init, update)


def current_lr(state: Any):
    """The learning rate recorded in an optimizer state (see `scale_by_learning_rate`).

    Works on the state of any alias (`adam`, `sgd`, ...) or chain containing
    `scale_by_learning_rate`; returns a float32 scalar array (a tracer under `jit`).

    Raises:
        FuncgradValueError: if the state holds no learning rate.

    Example:
        >>> opt = adam(exponential_decay(1e-2, 10, 0.5))
        >>> float(current_lr(opt.init(params)))
        0.01
    """
    found = _find_lr(state)
    if found is None:
        raise FuncgradValueError(
            "current_lr: this optimizer state records no learning rate (it has no "
            "scale_by_learning_rate in its chain)")
    return found


def _find_lr(state):
    if isinstance(state, ScaleByLearningRateState):
        return state.learning_rate
    if isinstance(state, (tuple, list)):
        for s in state:
            found = _find_lr(s)
            if found is not None:
                return found
    if isinstance(state, dict):
        return next((f for f in map(_find_lr, state.values()) if f is not None), None)
    return None


# ---------------------------------------------------------------------------------------------
# Moments: Adam, RMSProp, Adagrad, Lion


class ScaleByAdamState(NamedTuple):
    count: Any  # int32
    mu: Any  # first moment, like params
    nu: Any  # second moment, like params


# optax's `(1 - decay) * g + decay * t` with the sum's operands swapped (the same bits: a
# float addition is commutative): the old moment, dying, is the first operand, so the memory
# plan writes the new moment into its (donated) buffer instead of a fresh array.
def _moment(updates, moments, decay):
    return tree_map(lambda g, t: decay * t + (1 - decay) * g, updates, moments)


def _moment_sq(updates, moments, decay):
    return tree_map(lambda g, t: decay * t + (1 - decay) * (g * g), updates, moments)


def _debias(tree, decay, count):
    correction = _bias_correction(decay, count)
    return tree_map(lambda t: t / correction.astype(t.dtype), tree)


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                  eps_root: float = 0.0, mu_dtype=None, *,
                  nesterov: bool = False) -> GradientTransformation:
    """Adam's scaling: `m / (sqrt(v + eps_root) + eps)` with bias-corrected moments.

        mu = (1 - b1) * g + b1 * mu;   nu = (1 - b2) * g**2 + b2 * nu;   t += 1
        update = (mu / (1 - b1**t)) / (sqrt(nu / (1 - b2**t) + eps_root) + eps)

    Args:
        b1, b2: decay rates of the first and second moments.
        eps, eps_root: added outside / inside the square root.
        mu_dtype: dtype of the first moment (default: that of the params).
        nesterov: use Nesterov momentum (NAdam), as optax.
    """
    def init(params):
        mu = tree_map(lambda p: fnp.zeros_like(p, dtype=mu_dtype), params)
        return ScaleByAdamState(_new_count(), mu, _zeros(params))

    def update(updates, state, params=None):
        _check_like_state("scale_by_adam update", state.nu, updates)
        mu = _moment(updates, state.mu, b1)
        nu = _moment_sq(updates, state.nu, b2)
        count = _increment(state.count)
        if nesterov:
            mu_hat = tree_map(lambda m, g: b1 * m + (1 - b1) * g,
                              _debias(mu, b1, _increment(count)), _debias(updates, b1, count))
        else:
            mu_hat = _debias(mu, b1, count)
        nu_hat = _debias(nu, b2, count)
        skip_root = isinstance(eps_root, (int, float)) and eps_root == 0  # not a traced value
        root = fnp.sqrt if skip_root else (lambda v: fnp.sqrt(v + eps_root))
        updates = tree_map(lambda m, v: m / (root(v) + eps), mu_hat, nu_hat)
        if mu_dtype is not None:
            mu = tree_map(lambda m: m.astype(mu_dtype), mu)
        return updates, ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


class ScaleByRmsState(NamedTuple):
    nu: Any  # moving average of squared gradients, like params


class ScaleByRmsWithCountState(NamedTuple):
    count: Any  # int32: number of updates so far
    nu: Any  # moving average of squared gradients


def scale_by_rms(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                 eps_in_sqrt: bool = True, bias_correction: bool = False
                 ) -> GradientTransformation:
    """RMSProp's scaling: `g / sqrt(nu + eps)` with `nu = (1 - decay) * g**2 + decay * nu`.

    With `eps_in_sqrt=False` the update is `g / (sqrt(nu) + eps)`; with `bias_correction`,
    `nu` is divided by `1 - decay**count` first (the state then counts the updates:
    `ScaleByRmsWithCountState`), as in optax.
    """
    def init(params):
        nu = tree_map(lambda p: fnp.full_like(p, initial_scale), params)
        return ScaleByRmsWithCountState(_new_count(), nu) if bias_correction else \
            ScaleByRmsState(nu)

    def update(updates, state, params=None):
        _check_like_state("scale_by_rms update", state.nu, updates)
        nu = _moment_sq(updates, state.nu, decay)
        count = _increment(state.count) if bias_correction else None
        nu_hat = _debias(nu, decay, count) if bias_correction else nu
        updates = tree_map(lambda g, n: g * _rms_scaling(n, eps, eps_in_sqrt), updates, nu_hat)
        return updates, (ScaleByRmsWithCountState(count, nu) if bias_correction else
                         ScaleByRmsState(nu))

    return GradientTransformation(init, update)


def _rms_scaling(n, eps, eps_in_sqrt):
    return lax.rsqrt(n + eps) if eps_in_sqrt else 1.0 / (fnp.sqrt(n) + eps)


class ScaleByStddevState(NamedTuple):
    mu: Any  # moving average of gradients
    nu: Any  # moving average of squared gradients


class ScaleByRStdDevWithCountState(NamedTuple):
    count: Any  # int32: number of updates so far
    mu: Any  # moving average of gradients
    nu: Any  # moving average of squared gradients


def scale_by_stddev(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                    eps_in_sqrt: bool = True, bias_correction: bool = False
                    ) -> GradientTransformation:
    """Centered RMSProp's scaling: `g / sqrt(nu - mu**2 + eps)` (`g / (sqrt(nu - mu**2) +
    eps)` with `eps_in_sqrt=False`); `bias_correction` divides both moments by
    `1 - decay**count` first (state `ScaleByRStdDevWithCountState`), as in optax."""
    def init(params):
        mu, nu = _zeros(params), tree_map(lambda p: fnp.full_like(p, initial_scale), params)
        return ScaleByRStdDevWithCountState(_new_count(), mu, nu) if bias_correction else \
            ScaleByStddevState(mu, nu)

    def update(updates, state, params=None):
        _check_like_state("scale_by_stddev update", state.nu, updates)
        mu = _moment(updates, state.mu, decay)
        nu = _moment_sq(updates, state.nu, decay)
        count = _increment(state.count) if bias_correction else None
        mu_hat, nu_hat = ((_debias(mu, decay, count), _debias(nu, decay, count))
                          if bias_correction else (mu, nu))
        updates = tree_map(lambda g, m, n: g * _rms_scaling(n - m * m, eps, eps_in_sqrt),
                           updates, mu_hat, nu_hat)
        return updates, (ScaleByRStdDevWithCountState(count, mu, nu) if bias_correction else
                         ScaleByStddevState(mu, nu))

    return GradientTransformation(init, update)


class ScaleByRssState(NamedTuple):
    sum_of_squares: Any  # running sum of squared gradients, like params


def scale_by_rss(initial_accumulator_value: float = 0.1,
                 eps: float = 1e-7) -> GradientTransformation:
    """Adagrad's scaling: `g / sqrt(sum of g**2 + eps)` (0 where the sum is 0)."""
    def init(params):
        return ScaleByRssState(
            tree_map(lambda p: fnp.full_like(p, initial_accumulator_value), params))

    def update(updates, state, params=None):
        _check_like_state("scale_by_rss update", state.sum_of_squares, updates)
        sums = tree_map(lambda g, t: t + g * g, updates, state.sum_of_squares)
        inv = tree_map(lambda t: fnp.where(t > 0, lax.rsqrt(t + eps), 0.0), sums)
        updates = tree_map(lambda s, g: s * g, inv, updates)
        return updates, ScaleByRssState(sums)

    return GradientTransformation(init, update)


class ScaleByLionState(NamedTuple):
    count: Any  # int32
    mu: Any  # momentum, like params


def scale_by_lion(b1: float = 0.9, b2: float = 0.99, mu_dtype=None, *, mode: str = "hard",
                  smooth_beta: float = 1.0) -> GradientTransformation:
    """Lion's scaling: `sign((1 - b1) * g + b1 * mu)`, then `mu = (1 - b2) * g + b2 * mu`.

    `mode`: "hard" (`sign`), "smooth" (`tanh(smooth_beta * x)`) or "refined" (`x` where
    `|x| < 1`, else `sign(x)`), as in optax.
    """
    signs = {"hard": fnp.sign, "smooth": lambda x: fnp.tanh(smooth_beta * x),
             "refined": lambda x: fnp.where(fnp.abs(x) < 1.0, x, fnp.sign(x))}
    if mode not in signs:
        raise FuncgradValueError(f"scale_by_lion: unknown mode {mode!r}; it must be one of "
                                 "'hard', 'smooth', 'refined'")

    def init(params):
        mu = tree_map(lambda p: fnp.zeros_like(p, dtype=mu_dtype), params)
        return ScaleByLionState(_new_count(), mu)

    def update(updates, state, params=None):
        _check_like_state("scale_by_lion update", state.mu, updates)
        new_updates = tree_map(lambda g, m: signs[mode]((1.0 - b1) * g + b1 * m),
                               updates, state.mu)
        mu = _moment(updates, state.mu, b2)
        if mu_dtype is not None:
            mu = tree_map(lambda m: m.astype(mu_dtype), mu)
        return new_updates, ScaleByLionState(_increment(state.count), mu)

    return GradientTransformation(init, update)


def scale_by_trust_ratio(min_norm: float = 0.0, trust_coefficient: float = 1.0,
                         eps: float = 0.0) -> GradientTransformation:
    """LAMB's layer-wise scaling: `update * ||param|| / ||update||` (1 where a norm is 0)."""
    def scale_leaf(u, p):
        p_norm = _safe_norm(p, min_norm)
        u_norm = _safe_norm(u, min_norm)
        ratio = trust_coefficient * p_norm / (u_norm + eps)
        zero = fnp.logical_or(p_norm == 0.0, u_norm == 0.0)
        return u * fnp.where(zero, 1.0, ratio).astype(u.dtype)

    def update(updates, state, params=None):
        _require_params("scale_by_trust_ratio", params)
        check_structure("scale_by_trust_ratio update", params, updates, "params", "updates")
        return tree_map(scale_leaf, updates, params), state

    return GradientTransformation(lambda params: EmptyState(), update)


def _safe_norm(x, min_norm):
    norm = fnp.sqrt(fnp.sum(x * x))
    return fnp.where(norm <= min_norm, min_norm, norm) if min_norm else norm


# ---------------------------------------------------------------------------------------------
# Momentum


class TraceState(NamedTuple):
    trace: Any  # like params


def trace(decay: float, nesterov: bool = False, accumulator_dtype=None) -> GradientTransformation:
    """Heavy-ball momentum as in optax and PyTorch: `t = decay * t + g`, update `t`.

    With `nesterov=True` the update is `decay * t + g` (with the new `t`). This is the
    convention of `sgd(lr, momentum=b)`; for the exponential moving average
    `u = b * u + (1 - b) * g` (Needle, the CMU course library) use `ema(b, debias=False)`:
    `chain(ema(b, debias=False), scale(-lr))` equals `sgd(lr * (1 - b), momentum=b)`
    (same parameters step for step, as `t = u / (1 - b)`).
    """
    def init(params):
        return TraceState(tree_map(lambda p: fnp.zeros_like(p, dtype=accumulator_dtype),
                                   params))

    def update(updates, state, params=None):
        _check_like_state("trace update", state.trace, updates)
        f = lambda g, t: decay * t + g  # the dying trace first: written in place (_moment)
        new_trace = tree_map(f, updates, state.trace)
        updates = tree_map(f, updates, new_trace) if nesterov else new_trace
        if accumulator_dtype is not None:
            new_trace = tree_map(lambda t: t.astype(accumulator_dtype), new_trace)
        return updates, TraceState(new_trace)

    return GradientTransformation(init, update)


class EmaState(NamedTuple):
    count: Any  # int32
    ema: Any  # like params


def ema(decay: float, debias: bool = True, accumulator_dtype=None) -> GradientTransformation:
    """Exponential moving average of the updates: `u = (1 - decay) * g + decay * u`.

    With `debias=True` (optax's default) the output is `u / (1 - decay**t)`. With
    `debias=False`, `chain(ema(b, debias=False), scale(-lr))` is SGD with momentum in the EMA
    convention (Needle's `u = b*u + (1-b)*g; p -= lr*u`); it takes the same steps as optax's
    `sgd(lr * (1 - b), momentum=b)` (see `trace`).

    Example:
        >>> needle_sgd = chain(ema(0.9, debias=False), scale(-0.1))
        >>> same_steps = sgd(0.1 * (1 - 0.9), momentum=0.9)
    """
    def init(params):
        return EmaState(_new_count(),
                        tree_map(lambda p: fnp.zeros_like(p, dtype=accumulator_dtype), params))

    def update(updates, state, params=None):
        _check_like_state("ema update", state.ema, updates)
        new_ema = _moment(updates, state.ema, decay)
        count = _increment(state.count)
        updates = _debias(new_ema, decay, count) if debias else new_ema
        if accumulator_dtype is not None:
            new_ema = tree_map(lambda t: t.astype(accumulator_dtype), new_ema)
        return updates, EmaState(count, new_ema)

    return GradientTransformation(init, update)


# ---------------------------------------------------------------------------------------------
# Weight decay, clipping, masks


def _require_params(who, params):
    if params is None:
        raise op_error(who, "needs the parameters: call `update(grads, state, params)`",
                       cls=FuncgradValueError)


class WeightDecaySchedule(NamedTuple):
    count: Any  # int32: the step count of a scheduled weight decay


def add_decayed_weights(weight_decay=0.0, mask=None) -> GradientTransformation:
    """`updates + weight_decay * params` (`weight_decay` may be a schedule of the step count).

    Chained after a scaling (as in `adamw`) this is decoupled weight decay; chained first, as
    `chain(add_decayed_weights(wd), sgd(lr))`, it is the classic coupled L2 penalty.

    Args:
        weight_decay: the decay rate.
        mask: where to apply it: a bool pytree, a callable `params -> bool pytree` or glob
            patterns over leaf paths (`"**/w"`); see `masked`.
    """
    scheduled = callable(weight_decay)

    def init(params):
        return WeightDecaySchedule(_new_count()) if scheduled else EmptyState()

    def update(updates, state, params=None):
        _require_params("add_decayed_weights", params)
        check_structure("add_decayed_weights update", params, updates, "params", "updates")
        new_state = WeightDecaySchedule(_increment(state.count)) if scheduled else state
        if isinstance(weight_decay, (int, float)) and weight_decay == 0.0:
            return updates, new_state
        rate = weight_decay(state.count) if scheduled else weight_decay
        return tree_map(lambda g, p: g + rate * p, updates, params), new_state

    inner = GradientTransformation(init, update)
    return inner if mask is None else masked(inner, mask)


def global_norm(updates: Any):
    """The L2 norm of all leaves together: `sqrt(sum of squares of every element)`."""
    return fnp.sqrt(sum(fnp.sum(x * x) for x in tree_leaves(updates)))


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Rescales all updates together so that their global norm is at most `max_norm`."""
    def update(updates, state, params=None):
        g_norm = global_norm(updates)
        trigger = g_norm < max_norm
        updates = tree_map(
            lambda t: fnp.where(trigger, t, (t / g_norm.astype(t.dtype)) * max_norm), updates)
        return updates, state

    return GradientTransformation(lambda params: EmptyState(), update)


def clip(max_delta: float) -> GradientTransformation:
    """Clips every update element to `[-max_delta, max_delta]`."""
    def update(updates, state, params=None):
        return tree_map(lambda g: fnp.clip(g, -max_delta, max_delta), updates), state

    return GradientTransformation(lambda params: EmptyState(), update)


class MaskedState(NamedTuple):
    inner_state: Any


def _takes_extra_args(update):
    try:
        params = inspect.signature(update).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _mask_tree(tree, mask_tree):
    return tree_map(lambda x, m: x if m else MaskedNode(), tree, mask_tree)


def masked(inner: GradientTransformation, mask, *,
           mask_compatible_extra_args: bool = False) -> GradientTransformation:
    """Applies `inner` only to the leaves where `mask` is True; the others pass unchanged.

    `update` also takes optax's extra keyword arguments and passes them to `inner` when its
    update takes them; with `mask_compatible_extra_args`, those with the structure of the
    updates are masked too.

    Args:
        inner: the transformation to mask.
        mask: a pytree of bools with the structure of the params, a callable
            `params -> bool pytree`, or glob patterns (a string or a list of strings) over
            `/`-separated leaf paths: `*` matches inside one segment, `**` any number of
            segments. `"**/w"` selects every leaf named `w` ("w", "layer0/w", ...).

    Example:
        >>> opt = masked(add_decayed_weights(1e-4), "**/w")   # no decay on biases
    """
    if not isinstance(inner, GradientTransformation):
        raise FuncgradTypeError(f"masked: inner must be a GradientTransformation, "
                                f"got {type(inner).__name__}")

    def init(params):
        mask_tree = resolve_mask("masked init", mask, params)
        return MaskedState(inner.init(_mask_tree(params, mask_tree)))

    def update(updates, state, params=None, **extra_args):
        mask_tree = resolve_mask("masked update", mask, updates)
        masked_params = None if params is None else _mask_tree(params, mask_tree)
        structure = tree_structure(updates)
        extra = {k: _mask_tree(v, mask_tree) if mask_compatible_extra_args
                 and tree_structure(v) == structure else v for k, v in extra_args.items()}
        if not _takes_extra_args(inner.update):
            extra = {}
        new, inner_state = inner.update(_mask_tree(updates, mask_tree), state.inner_state,
                                        masked_params, **extra)
        updates = tree_map(lambda old, n, m: n if m else old, updates, new, mask_tree)
        return updates, MaskedState(inner_state)

    return GradientTransformation(init, update)


# optax.transforms also holds `chain` and the wrappers. The wrappers live in their own modules
# (which do not import this one when they load) and are re-exported here, with the scheduled
# weight decay's state and optax's name of the centered RMSProp state.
from funcgrad.optim import accumulation, clipping, combining, wrappers  # noqa: E402
from funcgrad.optim.accumulation import *  # noqa: E402,F403
from funcgrad.optim.base import chain  # noqa: E402
from funcgrad.optim.clipping import *  # noqa: E402,F403
from funcgrad.optim.combining import *  # noqa: E402,F403
from funcgrad.optim.wrappers import *  # noqa: E402,F403

ScaleByRStdDevState = ScaleByStddevState
__all__ += ["ScaleByRStdDevState", "WeightDecaySchedule", "chain"] + accumulation.__all__ + \
    clipping.__all__ + combining.__all__ + wrappers.__all__
