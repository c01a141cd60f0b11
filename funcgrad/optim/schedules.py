"""Learning-rate schedules: functions of the step count returning a scalar, as in optax
(this module is optax.schedules, `inject_hyperparams` included).

A schedule takes the number of updates done so far (an int or an int32 array, traced under
`jit`) and returns a float32 scalar; pass one wherever a `learning_rate` is accepted. The
formulas follow optax 0.2.8. Imports `funcgrad.numpy`, `funcgrad.errors` and `optim.base`
(the Schedule types) and `optim.inject`.
"""

from collections.abc import Iterable, Sequence

import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradValueError
from funcgrad.optim.base import Schedule, StatefulSchedule
from funcgrad.optim.inject import (
    InjectHyperparamsState,
    InjectStatefulHyperparamsState,
    WrappedSchedule,
    inject_hyperparams,
    inject_stateful_hyperparams,
)

__all__ = [
    "InjectHyperparamsState", "InjectStatefulHyperparamsState", "Schedule", "StatefulSchedule",
    "WrappedSchedule", "constant_schedule", "cosine_decay_schedule",
    "cosine_onecycle_schedule", "exponential_decay", "inject_hyperparams",
    "inject_stateful_hyperparams", "join_schedules", "linear_onecycle_schedule",
    "linear_schedule", "piecewise_constant_schedule", "piecewise_interpolate_schedule",
    "polynomial_schedule", "sgdr_schedule", "warmup_constant_schedule",
    "warmup_cosine_decay_schedule", "warmup_exponential_decay_schedule",
]


def constant_schedule(value: float) -> Schedule:
    """`value` at every step."""
    return lambda count: value


def exponential_decay(init_value: float, transition_steps: int, decay_rate: float,
                      transition_begin: int = 0, staircase: bool = False,
                      end_value: float | None = None) -> Schedule:
    """`init_value * decay_rate ** ((count - transition_begin) / transition_steps)`.

    Constant `init_value` before `transition_begin`; with `staircase` the exponent is
    floored; `end_value` bounds the value (from below when decaying, from above when growing).

    Example:
        >>> float(exponential_decay(1.0, transition_steps=10, decay_rate=0.5)(20))
        0.25
    """
    if transition_steps <= 0:
        raise FuncgradValueError(
            f"exponential_decay: transition_steps must be positive, got {transition_steps}")
    if transition_begin < 0:
        raise FuncgradValueError(
            f"exponential_decay: transition_begin must be >= 0, got {transition_begin}")
    bound = fnp.maximum if decay_rate < 1.0 else fnp.minimum

    def schedule(count):
        count = fnp.asarray(count)
        decreased = count - transition_begin
        p = decreased / transition_steps
        if staircase:
            p = fnp.floor(p)
        value = fnp.where(decreased <= 0, init_value, init_value * fnp.power(decay_rate, p))
        return value if end_value is None else bound(value, end_value)

    return schedule


def polynomial_schedule(init_value: float, end_value: float, power: float,
                        transition_steps: int, transition_begin: int = 0) -> Schedule:
    """From `init_value` to `end_value` over `transition_steps` along `(1 - t/T) ** power`."""
    if transition_steps <= 0:
        raise FuncgradValueError(
            f"polynomial_schedule: transition_steps must be positive, got {transition_steps}")

    def schedule(count):
        count = fnp.clip(fnp.asarray(count) - transition_begin, 0, transition_steps)
        frac = 1 - count / transition_steps
        return (init_value - end_value) * (frac ** power) + end_value

    return schedule


def linear_schedule(init_value: float, end_value: float, transition_steps: int,
                    transition_begin: int = 0) -> Schedule:
    """Linear interpolation from `init_value` to `end_value` over `transition_steps`.

    Example:
        >>> float(linear_schedule(0.0, 1.0, transition_steps=4)(1))
        0.25
    """
    return polynomial_schedule(init_value, end_value, 1, transition_steps, transition_begin)


def cosine_decay_schedule(init_value: float, decay_steps: int, alpha: float = 0.0,
                          exponent: float = 1.0) -> Schedule:
    """`init_value * ((1 - alpha) * (0.5 * (1 + cos(pi * t / decay_steps))) ** exponent
    + alpha)` with `t = min(count, decay_steps)`.

    Example:
        >>> float(cosine_decay_schedule(1.0, decay_steps=10)(5))
        0.5
    """
    if decay_steps <= 0:
        raise FuncgradValueError(
            f"cosine_decay_schedule: decay_steps must be positive, got {decay_steps}")

    def schedule(count):
        count = fnp.minimum(fnp.asarray(count), decay_steps)
        cosine = 0.5 * (1 + fnp.cos(fnp.pi * count / decay_steps))
        return init_value * ((1 - alpha) * cosine ** exponent + alpha)

    return schedule


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """`schedules[i]` between `boundaries[i-1]` and `boundaries[i]`, each restarted at 0."""
    if len(boundaries) != len(schedules) - 1:
        raise FuncgradValueError(
            f"join_schedules: {len(schedules)} schedules need {len(schedules) - 1} "
            f"boundaries, got {len(boundaries)}")

    def schedule(count):
        count = fnp.asarray(count)
        out = schedules[0](count)
        for boundary, fn in zip(boundaries, schedules[1:]):
            out = fnp.where(count < boundary, out, fn(count - boundary))
        return out

    return schedule


def warmup_cosine_decay_schedule(init_value: float, peak_value: float, warmup_steps: int,
                                 decay_steps: int, end_value: float = 0.0,
                                 exponent: float = 1.0) -> Schedule:
    """Linear warm-up from `init_value` to `peak_value` over `warmup_steps`, then cosine decay
    to `end_value` at step `decay_steps` (which counts the warm-up, as in optax)."""
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules(
        [linear_schedule(init_value, peak_value, warmup_steps),
         cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)],
        [warmup_steps])


def piecewise_constant_schedule(init_value: float,
                                boundaries_and_scales: dict[int, float] | None = None
                                ) -> Schedule:
    """`init_value`, multiplied by `scale` once the count reaches each `boundary`.

    Example:
        >>> s = piecewise_constant_schedule(1.0, {10: 0.1, 20: 0.5})
        >>> [float(s(c)) for c in (9, 10, 25)]
        [1.0, 0.1, 0.05]
    """
    items = sorted((boundaries_and_scales or {}).items())
    for boundary, scale in items:
        if scale < 0:
            raise FuncgradValueError(
                f"piecewise_constant_schedule: scales must be >= 0, got {scale} at {boundary}")

    def schedule(count):
        count = fnp.asarray(count)
        value = fnp.asarray(init_value, fnp.float32)
        for boundary, scale in items:
            indicator = fnp.maximum(0.0, fnp.sign(boundary - count))
            value = value * indicator + (1 - indicator) * scale * value
        return value

    return schedule


def warmup_constant_schedule(init_value: float, peak_value: float,
                             warmup_steps: int) -> Schedule:
    """Linear warm-up from `init_value` to `peak_value` over `warmup_steps`, then constant.

    Example:
        >>> float(warmup_constant_schedule(0.0, 1.0, 4)(2))
        0.5
    """
    return linear_schedule(init_value, peak_value, warmup_steps)


def warmup_exponential_decay_schedule(init_value: float, peak_value: float, warmup_steps: int,
                                      transition_steps: int, decay_rate: float,
                                      transition_begin: int = 0, staircase: bool = False,
                                      end_value: float | None = None) -> Schedule:
    """Linear warm-up to `peak_value`, then `exponential_decay` from it (restarted at 0)."""
    return join_schedules(
        [linear_schedule(init_value, peak_value, warmup_steps),
         exponential_decay(peak_value, transition_steps, decay_rate, transition_begin,
                           staircase, end_value)],
        [warmup_steps])


def sgdr_schedule(cosine_kwargs: Iterable[dict]) -> Schedule:
    """SGDR (Loshchilov & Hutter 2017): warm restarts, one `warmup_cosine_decay_schedule`
    per dict of keyword arguments, each starting when the previous one's `decay_steps` end.

    Example:
        >>> s = sgdr_schedule([dict(init_value=0.0, peak_value=1.0, warmup_steps=2,
        ...                         decay_steps=10)] * 3)
    """
    boundaries, schedules, step = [], [], 0
    for kwargs in cosine_kwargs:
        schedules.append(warmup_cosine_decay_schedule(**kwargs))
        step += kwargs["decay_steps"]
        boundaries.append(step)
    return join_schedules(schedules, boundaries[:-1])


def _linear_interpolate(start, end, pct):
    return (end - start) * pct + start


def _cosine_interpolate(start, end, pct):
    return end + (start - end) / 2.0 * (fnp.cos(fnp.pi * pct) + 1)


def piecewise_interpolate_schedule(interpolate_type: str, init_value: float,
                                   boundaries_and_scales: dict[int, float] | None = None
                                   ) -> Schedule:
    """`init_value` scaled by each `scale` at its `boundary`, interpolated ("linear" or
    "cosine") from one boundary to the next.

    Example:
        >>> s = piecewise_interpolate_schedule("linear", 1.0, {10: 0.5})
        >>> [float(s(c)) for c in (0, 5, 10)]
        [1.0, 0.75, 0.5]
    """
    interpolate = {"linear": _linear_interpolate, "cosine": _cosine_interpolate}.get(
        interpolate_type)
    if interpolate is None:
        raise FuncgradValueError("piecewise_interpolate_schedule: interpolate_type must be "
                                 f"'cosine' or 'linear', got {interpolate_type!r}")
    boundaries, scales = (zip(*sorted(boundaries_and_scales.items()))
                          if boundaries_and_scales else ((), ()))
    if any(scale < 0.0 for scale in scales):
        raise FuncgradValueError("piecewise_interpolate_schedule: scales must be >= 0")
    bounds = fnp.asarray((0,) + tuple(boundaries), fnp.int32)
    values = fnp.cumprod(fnp.asarray((init_value,) + tuple(scales), fnp.float32))

    def schedule(count):
        count = fnp.asarray(count)
        sizes = fnp.maximum(bounds[1:] - bounds[:-1], 1)
        indicator = fnp.logical_and(bounds[:-1] <= count, count < bounds[1:])
        pct = (count - bounds[:-1]) / sizes
        interp = interpolate(values[:-1], values[1:], pct)
        return fnp.dot(indicator.astype(interp.dtype), interp) + (bounds[-1] <= count) * values[-1]

    return schedule


def linear_onecycle_schedule(transition_steps: int, peak_value: float, pct_start: float = 0.3,
                             pct_final: float = 0.85, div_factor: float = 25.0,
                             final_div_factor: float = 1e4) -> Schedule:
    """The one-cycle policy (Smith & Topin 2017) with linear pieces: up to `peak_value` at
    `pct_start`, back down at `pct_final`, then to `peak / (div * final_div)`."""
    if transition_steps <= 0:
        raise FuncgradValueError(
            f"linear_onecycle_schedule: transition_steps must be positive, got "
            f"{transition_steps}")
    return piecewise_interpolate_schedule(
        "linear", peak_value / div_factor,
        {int(pct_start * transition_steps): div_factor,
         int(pct_final * transition_steps): 1.0 / div_factor,
         transition_steps: 1.0 / final_div_factor})


def cosine_onecycle_schedule(transition_steps: int, peak_value: float, pct_start: float = 0.3,
                             div_factor: float = 25.0, final_div_factor: float = 1e4
                             ) -> Schedule:
    """The one-cycle policy with cosine pieces: up to `peak_value` at `pct_start`, then down
    to `peak / (div * final_div)` at `transition_steps`."""
    if transition_steps <= 0:
        raise FuncgradValueError(
            f"cosine_onecycle_schedule: transition_steps must be positive, got "
            f"{transition_steps}")
    return piecewise_interpolate_schedule(
        "cosine", peak_value / div_factor,
        {int(pct_start * transition_steps): div_factor,
         int(transition_steps): 1.0 / (div_factor * final_div_factor)})
