"""`inject_hyperparams`: an optimizer whose hyperparameters live in its state, so a schedule
can drive any of them and a training loop can read or change them (`state.hyperparams`).

As in optax 0.2.8: numbers become arrays in the state; callables are schedules of the step
count (or stateful schedules); bools, strings, None and `static_args` stay fixed. Imports
`funcgrad.numpy`, `funcgrad.core` (the Array type) and `optim.base`/`numerics`/`tree_utils`.
"""

import functools
import inspect
import warnings
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

import funcgrad.numpy as fnp
from funcgrad.core import Array
from funcgrad.errors import FuncgradValueError
from funcgrad.optim.base import (
    GradientTransformationExtraArgs,
    StatefulSchedule,
    with_extra_args_support,
)
from funcgrad.optim.numerics import safe_increment
from funcgrad.optim.tree_utils import tree_dtype

__all__ = ["InjectHyperparamsState", "InjectStatefulHyperparamsState", "WrappedSchedule",
           "inject_hyperparams", "inject_stateful_hyperparams"]


def _convert_floats(x, dtype):
    """A float hyperparameter as an array of `dtype`; arrays and non-floats unchanged."""
    if isinstance(x, Array):
        return x
    current = x.dtype if hasattr(x, "dtype") else type(x)
    if fnp.issubdtype(current, fnp.floating):
        return fnp.asarray(x, dtype=dtype)
    return x


class InjectHyperparamsState(NamedTuple):
    """Deprecated in optax (0.1.9) for `InjectStatefulHyperparamsState`; kept for old code."""

    count: Any
    hyperparams: dict
    inner_state: Any


class InjectStatefulHyperparamsState(NamedTuple):
    count: Any  # int32: updates so far
    hyperparams: dict  # {name: value used by the latest update (at init: the first one)}
    hyperparams_states: dict  # {name: state of that hyperparameter's schedule}
    inner_state: Any


class WrappedScheduleState(NamedTuple):
    count: Any  # int32


class WrappedSchedule:
    """A schedule of the step count as a stateful schedule (its state is the count)."""

    def __init__(self, schedule_fn: Callable[[Any], Any]):
        self.schedule_fn = schedule_fn

    def init(self) -> WrappedScheduleState:
        """Count 0."""
        return WrappedScheduleState(fnp.zeros((), fnp.int32))

    def update(self, state: WrappedScheduleState, **extra_args) -> WrappedScheduleState:
        """The count plus one."""
        return WrappedScheduleState(safe_increment(state.count))

    def __call__(self, state: WrappedScheduleState, **extra_args):
        """The schedule's value at the count."""
        return self.schedule_fn(state.count)


def _split_hyperparams(arguments, static_args):
    scheduled, numeric, other = {}, {}, {}
    for name, value in arguments.items():
        if name in static_args or isinstance(value, bool):
            other[name] = value
        elif isinstance(value, StatefulSchedule):
            scheduled[name] = value
        elif callable(value):
            scheduled[name] = WrappedSchedule(value)
        elif isinstance(value, (int, float, Array, np.ndarray)):
            numeric[name] = value
        else:
            other[name] = value
    return scheduled, numeric, other


def inject_hyperparams(inner_factory: Callable[..., Any], static_args: str | Iterable[str] = (),
                       hyperparam_dtype=None) -> Callable[..., GradientTransformationExtraArgs]:
    """Wraps an optimizer factory so that its numeric arguments are kept in the state.

    Args:
        inner_factory: e.g. `adam`; called again at every update with the current values.
        static_args: names of arguments to keep as given (not put in the state).
        hyperparam_dtype: the dtype of float hyperparameters (default: the params' highest).

    Returns:
        A factory with `inner_factory`'s arguments, where each number may also be a schedule.

    Example:
        >>> opt = inject_hyperparams(adam)(learning_rate=exponential_decay(0.1, 100, 0.5))
        >>> state = opt.init(params)
        >>> float(state.hyperparams['learning_rate'])
        0.1
        >>> state.hyperparams['b1'] = 0.8        # change a hyperparameter between steps
    """
    static_args = {static_args} if isinstance(static_args, str) else set(static_args)
    signature = inspect.signature(inner_factory)
    if not static_args.issubset(signature.parameters):
        raise FuncgradValueError(
            f"inject_hyperparams: static_args {sorted(static_args)} must name parameters of "
            f"{getattr(inner_factory, '__name__', inner_factory)}: "
            f"{sorted(signature.parameters)}")

    @functools.wraps(inner_factory)
    def wrapped(*args, **kwargs) -> GradientTransformationExtraArgs:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        scheduled, numeric, other = _split_hyperparams(bound.arguments, static_args)

        def dtype_for(params):
            return hyperparam_dtype or tree_dtype(params, "highest")

        def init(params):
            dtype = dtype_for(params)
            hparams = {k: fnp.asarray(_convert_floats(v, dtype)) for k, v in numeric.items()}
            states = {k: f.init() for k, f in scheduled.items()}
            hparams.update({k: _convert_floats(f(states[k]), dtype)
                            for k, f in scheduled.items()})
            return InjectStatefulHyperparamsState(
                fnp.zeros((), fnp.int32), hparams, states,
                inner_factory(**other, **hparams).init(params))

        def update(updates, state, params=None, **extra_args):
            dtype = dtype_for(params)
            hparams = {k: _convert_floats(v, dtype) for k, v in state.hyperparams.items()}
            hparams.update({k: _convert_floats(f(state.hyperparams_states[k], **extra_args),
                                               dtype)
                            for k, f in scheduled.items()})
            states = {k: f.update(state.hyperparams_states[k], **extra_args)
                      for k, f in scheduled.items()}
            inner = with_extra_args_support(inner_factory(**other, **hparams))
            updates, inner_state = inner.update(updates, state.inner_state, params,
                                                **extra_args)
            return updates, InjectStatefulHyperparamsState(safe_increment(state.count),
                                                           hparams, states, inner_state)

        return GradientTransformationExtraArgs(init, update)

    return wrapped


def inject_stateful_hyperparams(inner_factory: Callable[..., Any],
                                static_args: str | Iterable[str] = (),
                                hyperparam_dtype=None
                                ) -> Callable[..., GradientTransformationExtraArgs]:
    """Deprecated in optax (0.1.9): the same as `inject_hyperparams`."""
    warnings.warn("inject_stateful_hyperparams is deprecated, use inject_hyperparams",
                  DeprecationWarning, stacklevel=2)
    return inject_hyperparams(inner_factory, static_args, hyperparam_dtype)
