"""Line searches as gradient transformations: backtracking (Armijo) and zoom (strong Wolfe,
Nocedal & Wright's algorithms 3.5-3.6), as optax 0.2.8, with `value_and_grad_from_state`.

A line search scales the update direction by the step it finds; `update` needs the loss at
the current params (`value=`), its gradient (`grad=`) and the loss function (`value_fn=`),
and the extra keyword arguments that `value_fn` takes. The search is a `lax.while_loop`, so
it runs under `jit`. Imports `funcgrad.numpy`, `funcgrad.lax`, `funcgrad.api`,
`funcgrad.debug` and `optim.base`/`numerics`/`tree_utils`.
"""

import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import funcgrad.numpy as fnp
from funcgrad import debug, lax
from funcgrad.api import value_and_grad
from funcgrad.errors import FuncgradTypeError, FuncgradValueError
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.base import GradientTransformationExtraArgs
from funcgrad.optim.numerics import safe_increment
from funcgrad.optim.tree_state import tree_get
from funcgrad.tree_util import tree_leaves

__all__ = ["ScaleByBacktrackingLinesearchState", "ScaleByZoomLinesearchState",
           "ZoomLinesearchInfo", "scale_by_backtracking_linesearch",
           "scale_by_zoom_linesearch", "value_and_grad_from_state"]


def _value_dtype(params):
    return fnp.real(fnp.empty((), tree_leaves(params)[0].dtype)).dtype


def _split_fn_kwargs(who, value_fn, extra_args):
    """The extra arguments `value_fn` takes; any other is an error (as optax)."""
    names = list(inspect.signature(value_fn).parameters)
    unused = sorted(k for k in extra_args if k not in names)
    if unused:
        raise FuncgradTypeError(f"{who}.update: unexpected keyword arguments {unused}: they are "
                                "not parameters of value_fn")
    return {k: v for k, v in extra_args.items() if k in names}


# ---------------------------------------------------------------------------------------------
# Backtracking


class BacktrackingLinesearchInfo(NamedTuple):
    num_linesearch_steps: Any  # int
    decrease_error: Any  # float: how far the accepted step is from sufficient decrease


class ScaleByBacktrackingLinesearchState(NamedTuple):
    learning_rate: Any  # the accepted step
    value: Any  # the loss at the new params
    grad: Any  # its gradient (with store_grad), else None
    info: BacktrackingLinesearchInfo


class _BacktrackState(NamedTuple):
    learning_rate: Any
    new_value: Any
    new_grad: Any
    decrease_error: Any
    iter_num: Any


def scale_by_backtracking_linesearch(max_backtracking_steps, slope_rtol=1e-4,
                                     decrease_factor=0.8, increase_factor=1.5,
                                     max_learning_rate=1.0, atol=0.0, rtol=0.0,
                                     store_grad: bool = False,
                                     verbose: bool = False) -> GradientTransformationExtraArgs:
    """Backtracking: starting from `increase_factor` times the previous step (at most
    `max_learning_rate`), shrinks the step by `decrease_factor` until the loss decreases
    enough: `f(x + s u) <= (1 + rtol) f(x) + s * slope_rtol * <u, grad> + atol`.

    Example:
        >>> opt = chain(sgd(1.0), scale_by_backtracking_linesearch(max_backtracking_steps=15))
        >>> updates, state = opt.update(grad, state, params, value=value, grad=grad,
        ...                             value_fn=loss)
    """
    def init(params):
        dtype = _value_dtype(params)
        return ScaleByBacktrackingLinesearchState(
            fnp.asarray(1.0, dtype), fnp.asarray(fnp.inf, dtype),
            tu.tree_zeros_like(params) if store_grad else None,
            BacktrackingLinesearchInfo(fnp.asarray(0), fnp.asarray(fnp.inf, dtype)))

    def decrease_error_at(stepsize, slope, value, new_value):
        error = new_value - (1.0 + rtol) * value - stepsize * slope_rtol * slope
        return fnp.maximum(fnp.where(fnp.isnan(error), fnp.inf, error), 0.0)

    def update(updates, state, params=None, *, value, grad, value_fn, **extra_args):
        fn = functools.partial(value_fn, **_split_fn_kwargs(
            "scale_by_backtracking_linesearch", value_fn, extra_args))
        slope = tu.tree_real(tu.tree_vdot(updates, tu.tree_conj(grad)))

        def body(s):
            lr = fnp.where(s.iter_num > 0, decrease_factor * s.learning_rate, s.learning_rate)
            new_params = tu.tree_add_scale(params, lr, updates)
            new_grad = s.new_grad
            if store_grad:
                new_value, grad_here = value_and_grad(fn)(new_params)
                error = decrease_error_at(lr, slope, value, new_value)
                keep = (error <= atol) | (s.iter_num == max_backtracking_steps)
                new_grad = tu.tree_where(keep, grad_here, new_grad)
            else:
                new_value = fn(new_params)
                error = decrease_error_at(lr, slope, value, new_value)
            new = _BacktrackState(lr, new_value, new_grad, error, s.iter_num + 1)
            return tu.tree_cast_like(new, s)

        start = _BacktrackState(fnp.minimum(increase_factor * state.learning_rate,
                                            max_learning_rate),
                                value, tu.tree_zeros_like(params), fnp.asarray(fnp.inf),
                                fnp.asarray(0))
        found = lax.while_loop(
            lambda s: (~(s.decrease_error <= atol)) & (s.iter_num <= max_backtracking_steps),
            body, start)
        new_lr = fnp.where(fnp.isinf(found.decrease_error), 0.0, found.learning_rate)
        if verbose:
            _cond_print(found.decrease_error > atol,
                        "scale_by_backtracking_linesearch: no step with sufficient decrease "
                        "found (value {}, slope {}, step {})", value, slope,
                        found.learning_rate)
        new_state = ScaleByBacktrackingLinesearchState(
            new_lr, found.new_value, found.new_grad if store_grad else None,
            BacktrackingLinesearchInfo(found.iter_num, found.decrease_error))
        return tu.tree_scale(new_lr, updates), tu.tree_cast_like(new_state, state)

    return GradientTransformationExtraArgs(init, update)


def _cond_print(condition, message, *args):
    lax.cond(condition, lambda: debug.print(message, *args), lambda: None)


# ---------------------------------------------------------------------------------------------
# Zoom (strong Wolfe conditions)


class _Zoom(NamedTuple):
    """The zoom search's state: the current step, the bracketing interval `[low, high]`
    (with values and slopes), and the best step with sufficient decrease seen so far."""

    count: Any
    params: Any
    updates: Any
    stepsize_guess: Any
    stepsize: Any
    value: Any
    grad: Any
    slope: Any
    value_init: Any
    slope_init: Any
    decrease_error: Any
    curvature_error: Any
    error: Any
    interval_found: Any
    done: Any
    failed: Any
    low: Any
    value_low: Any
    slope_low: Any
    high: Any
    value_high: Any
    slope_high: Any
    cubic_ref: Any
    value_cubic_ref: Any
    safe_stepsize: Any
    safe_value: Any
    safe_grad: Any


class _ZoomConfig(NamedTuple):
    max_steps: Any
    max_stepsize: Any
    tol: Any
    increase_factor: Any
    slope_rtol: Any
    curv_rtol: Any
    approx_dec_rtol: Any
    interval_threshold: Any


def _value_and_slope(value_and_grad_fn, params, stepsize, updates):
    value, grad = value_and_grad_fn(tu.tree_add_scale(params, stepsize, updates))
    return value, grad, tu.tree_real(tu.tree_vdot(tu.tree_conj(grad), updates))


def _decrease_error(cfg, stepsize, value, slope, value_init, slope_init):
    error = value - value_init - cfg.slope_rtol * stepsize * slope_init
    if cfg.approx_dec_rtol is not None:
        approx = fnp.maximum(slope - (2 * cfg.slope_rtol - 1.0) * slope_init,
                             value - value_init - cfg.approx_dec_rtol * fnp.abs(value_init))
        error = fnp.minimum(approx, error)
    error = fnp.maximum(error, 0.0)
    return fnp.where(fnp.isnan(error), fnp.inf, error)


def _curvature_error(cfg, slope, slope_init):
    error = fnp.maximum(fnp.abs(slope) - cfg.curv_rtol * fnp.abs(slope_init), 0.0)
    return fnp.where(fnp.isnan(error), fnp.inf, error)


def _zoom_init(updates, params, value, grad, stepsize_guess):
    dtype = _value_dtype(params)
    slope = tu.tree_real(tu.tree_vdot(updates, grad))
    inf, zero, false = fnp.asarray(fnp.inf), fnp.asarray(0.0), fnp.asarray(False)
    return _Zoom(fnp.asarray(0), params, updates, stepsize_guess, fnp.asarray(0.0, dtype),
                 fnp.asarray(value, dtype), grad, slope, value, slope, inf, inf, inf, false,
                 false, false, zero, value, slope, zero, value, slope, zero, value, zero,
                 value, grad)


def _search_interval(cfg, value_and_grad_fn, s):
    """One step of the search for an interval containing a step satisfying the conditions."""
    new_step = fnp.where(s.count == 0, s.stepsize_guess, cfg.increase_factor * s.stepsize)
    if cfg.max_stepsize is not None:
        max_reached = new_step >= cfg.max_stepsize
        new_step = fnp.minimum(new_step, cfg.max_stepsize)
    else:
        max_reached = fnp.asarray(False)
    value, grad, slope = _value_and_slope(value_and_grad_fn, s.params, new_step, s.updates)
    dec = _decrease_error(cfg, new_step, value, slope, s.value_init, s.slope_init)
    curv = _curvature_error(cfg, slope, s.slope_init)
    error = fnp.maximum(dec, curv)
    safe = tu.tree_where(dec <= cfg.tol, [new_step, value, grad],
                         [s.safe_stepsize, s.safe_value, s.safe_grad])
    high_to_new = (dec > 0.0) | ((value >= s.value) & (s.count > 0))
    low_to_new = (slope >= 0.0) & (~high_to_new)
    interval = tu.tree_where(low_to_new, [new_step, value, slope, s.stepsize, s.value, s.slope],
                             [s.stepsize, s.value, s.slope, new_step, value, slope])
    interval_found = high_to_new | low_to_new | (error <= cfg.tol)
    done = (error <= cfg.tol) | (max_reached & ~interval_found)
    failed = (s.count + 1 >= cfg.max_steps) & (~done)
    new = s._replace(count=safe_increment(s.count), stepsize=new_step, value=value, grad=grad,
                     slope=slope, decrease_error=dec, curvature_error=curv, error=error,
                     interval_found=fnp.asarray(interval_found), done=fnp.asarray(done),
                     failed=fnp.asarray(failed), low=interval[0], value_low=interval[1],
                     slope_low=interval[2], high=interval[3], value_high=interval[4],
                     slope_high=interval[5], cubic_ref=interval[0],
                     value_cubic_ref=interval[1], safe_stepsize=safe[0], safe_value=safe[1],
                     safe_grad=safe[2])
    return tu.tree_cast_like(new, s)


def _middle_of(cfg, s):
    """The next trial step inside `[low, high]`: cubic, else quadratic, else bisection."""
    delta = fnp.abs(s.high - s.low)
    left, right = fnp.minimum(s.high, s.low), fnp.maximum(s.high, s.low)
    cubic = _cubicmin(s.low, s.value_low, s.slope_low, s.high, s.value_high, s.cubic_ref,
                      s.value_cubic_ref)
    use_cubic = (cubic > left + 0.2 * delta) & (cubic < right - 0.2 * delta)
    quad = _quadmin(s.low, s.value_low, s.slope_low, s.high, s.value_high)
    use_quad = (~use_cubic) & (quad > left + 0.1 * delta) & (quad < right - 0.1 * delta)
    middle = fnp.where(use_cubic, cubic, s.cubic_ref)
    middle = fnp.where(use_quad, quad, middle)
    return fnp.where((~use_cubic) & (~use_quad), (s.low + s.high) / 2.0, middle)


def _zoom_into_interval(cfg, value_and_grad_fn, s):
    """One step of zooming into the interval `[low, high]`."""
    too_small = fnp.abs(s.high - s.low) <= cfg.interval_threshold
    middle = _middle_of(cfg, s)
    value, grad, slope = _value_and_slope(value_and_grad_fn, s.params, middle, s.updates)
    dec = _decrease_error(cfg, middle, value, slope, s.value_init, s.slope_init)
    curv = _curvature_error(cfg, slope, s.slope_init)
    error = fnp.maximum(dec, curv)
    safe = tu.tree_where((dec <= cfg.tol) & (value < s.safe_value), [middle, value, grad],
                         [s.safe_stepsize, s.safe_value, s.safe_grad])
    done = error <= cfg.tol
    high_to_middle = (dec > 0.0) | (value >= s.value_low)
    high_to_low = (slope * (s.high - s.low) >= 0.0) & (~high_to_middle)
    low_to_middle = ~high_to_middle
    high = tu.tree_where(high_to_middle, [middle, value, slope],
                         [s.high, s.value_high, s.slope_high])
    high = tu.tree_where(high_to_low, [s.low, s.value_low, s.slope_low], high)
    low = tu.tree_where(low_to_middle, [middle, value, slope],
                        [s.low, s.value_low, s.slope_low])
    cubic_ref = tu.tree_where(high_to_middle | high_to_low, [s.high, s.value_high],
                              [s.low, s.value_low])
    failed = (fnp.asarray((s.count + 1) >= cfg.max_steps)
              | (too_small & (safe[0] > 0.0))) & ~done
    new = s._replace(count=safe_increment(s.count), stepsize=middle, value=value, grad=grad,
                     slope=slope, decrease_error=dec, curvature_error=curv, error=error,
                     done=done, failed=failed, low=low[0], value_low=low[1], slope_low=low[2],
                     high=high[0], value_high=high[1], slope_high=high[2],
                     cubic_ref=cubic_ref[0], value_cubic_ref=cubic_ref[1],
                     safe_stepsize=safe[0], safe_value=safe[1], safe_grad=safe[2])
    return tu.tree_cast_like(new, s)


def _try_safe_step(verbose, s):
    """After a failure: the best step with sufficient decrease if there is one."""
    outside_domain = fnp.isinf(s.decrease_error)
    step, value, grad = tu.tree_where((s.safe_stepsize > 0.0) | outside_domain,
                                      [s.safe_stepsize, s.safe_value, s.safe_grad],
                                      [s.stepsize, s.value, s.grad])
    if verbose:
        _cond_print(s.safe_stepsize > 0.0, "scale_by_zoom_linesearch: returning a step with "
                    "sufficient decrease but without the curvature condition: {}",
                    s.safe_stepsize)
        _cond_print(s.safe_stepsize <= 0.0, "scale_by_zoom_linesearch: no step with "
                    "sufficient decrease found (slope at 0: {}, step: {})", s.slope_init,
                    s.stepsize)
    return tu.tree_cast_like(s._replace(stepsize=step, grad=grad, value=value), s)


def _zoom_step(cfg, verbose, value_and_grad_fn, s):
    new = lax.cond(s.interval_found,
                   lambda st: _zoom_into_interval(cfg, value_and_grad_fn, st),
                   lambda st: _search_interval(cfg, value_and_grad_fn, st), s)
    new = lax.cond(new.failed, lambda st: _try_safe_step(verbose, st), lambda st: st, new)
    return tu.tree_cast_like(new, s)


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The minimum of the cubic through (a, fa) with slope fpa, (b, fb) and (c, fc)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    rhs0, rhs1 = fb - fa - fpa * db, fc - fa - fpa * dc
    big_a = (dc ** 2 * rhs0 - db ** 2 * rhs1) / denom
    big_b = (-(dc ** 3) * rhs0 + db ** 3 * rhs1) / denom
    radical = big_b * big_b - 3.0 * big_a * fpa
    return a + (-big_b + fnp.sqrt(radical)) / (3.0 * big_a)


def _quadmin(a, fa, fpa, b, fb):
    """The minimum of the parabola through (a, fa) with slope fpa and (b, fb)."""
    db = b - a
    return a - fpa / (2.0 * ((fb - fa - fpa * db) / (db ** 2)))


class ZoomLinesearchInfo(NamedTuple):
    num_linesearch_steps: Any  # int
    decrease_error: Any  # float
    curvature_error: Any  # float


class ScaleByZoomLinesearchState(NamedTuple):
    learning_rate: Any  # the accepted step
    value: Any  # the loss at the new params
    grad: Any  # its gradient
    info: ZoomLinesearchInfo


def scale_by_zoom_linesearch(max_linesearch_steps, max_learning_rate=None, tol=0.0,
                             increase_factor=2.0, slope_rtol=0.0001, curv_rtol=0.9,
                             approx_dec_rtol=1e-06, stepsize_precision=1e-05,
                             initial_guess_strategy: str = "keep",
                             verbose: bool = False) -> GradientTransformationExtraArgs:
    """A step satisfying the strong Wolfe conditions (sufficient decrease with `slope_rtol`,
    curvature with `curv_rtol`), found by growing the step until an interval brackets one,
    then zooming in with cubic/quadratic interpolation (Hager-Zhang's approximate decrease
    with `approx_dec_rtol`).

    The state keeps the value and gradient at the new params: `value_and_grad_from_state`
    reuses them at the next step.

    Example:
        >>> opt = chain(sgd(1.0), scale_by_zoom_linesearch(max_linesearch_steps=15))
        >>> updates, state = opt.update(grad, state, params, value=value, grad=grad,
        ...                             value_fn=loss)
    """
    if initial_guess_strategy not in ("one", "keep"):
        raise FuncgradValueError(f"scale_by_zoom_linesearch: unknown initial_guess_strategy "
                                 f"{initial_guess_strategy!r} (use 'one' or 'keep')")
    cfg = _ZoomConfig(max_linesearch_steps, max_learning_rate, tol, increase_factor,
                      slope_rtol, curv_rtol, approx_dec_rtol, stepsize_precision)

    def init_fn(params):
        dtype = _value_dtype(params)
        inf = fnp.asarray(fnp.inf)
        return ScaleByZoomLinesearchState(fnp.asarray(1.0, dtype), fnp.asarray(fnp.inf, dtype),
                                          tu.tree_zeros_like(params),
                                          ZoomLinesearchInfo(fnp.asarray(0), inf, inf))

    def update_fn(updates, state, params=None, *, value, grad, value_fn, **extra_args):
        fn = functools.partial(value_fn, **_split_fn_kwargs("scale_by_zoom_linesearch",
                                                            value_fn, extra_args))
        guess = fnp.asarray(1.0) if initial_guess_strategy == "one" else state.learning_rate
        start = _zoom_init(updates, params, value, grad, guess)
        final = lax.while_loop(lambda s: ~(s.done | s.failed),
                               functools.partial(_zoom_step, cfg, verbose, value_and_grad(fn)),
                               start)
        info = ZoomLinesearchInfo(final.count, final.decrease_error, final.curvature_error)
        new_state = ScaleByZoomLinesearchState(final.stepsize, final.value, final.grad, info)
        return tu.tree_scale(final.stepsize, updates), tu.tree_cast_like(new_state, state)

    return GradientTransformationExtraArgs(init_fn, update_fn)


def value_and_grad_from_state(value_fn: Callable[..., Any]) -> Callable[..., tuple[Any, Any]]:
    """`value_and_grad(value_fn)` that reuses the value and gradient a line search stored in
    the optimizer state (passed as `state=`) when they are finite.

    Example:
        >>> opt = lbfgs()
        >>> value_and_grad = value_and_grad_from_state(loss)
        >>> value, grad = value_and_grad(params, state=state)
        >>> updates, state = opt.update(grad, state, params, value=value, grad=grad,
        ...                             value_fn=loss)
    """
    def value_and_grad_fn(params, *fn_args, state, **fn_kwargs):
        value, grad = tree_get(state, "value"), tree_get(state, "grad")
        if value is None or grad is None:
            raise FuncgradValueError("value_and_grad_from_state: the state holds no 'value' "
                                     "and 'grad' (use an optimizer with a line search)")
        return lax.cond((~fnp.isinf(value)) & (~fnp.isnan(value)),
                        lambda p, a, kw: (value, grad),
                        lambda p, a, kw: value_and_grad(value_fn)(p, *a, **kw),
                        params, fn_args, fn_kwargs)

    return value_and_grad_fn
