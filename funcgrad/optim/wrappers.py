"""Wrappers around a transformation: apply it only when the updates are finite or a condition
holds, run it on one flat vector, keep the parameters non-negative, zero NaNs, record
measurements of the updates.

As in optax 0.2.8 (`optax.transforms`): the conditional wrappers choose with `lax.cond`, so
they work under `jit`. Imports `funcgrad.numpy`, `funcgrad.lax`, `funcgrad.tree_util` and
`optim.base`/`numerics`/`tree_utils`; not `optim.transforms`, which re-exports these names.
"""

from typing import Any, NamedTuple, Protocol

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.errors import FuncgradValueError, op_error
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.base import (
    EmptyState,
    GradientTransformation,
    GradientTransformationExtraArgs,
    stateless,
    with_extra_args_support,
)
from funcgrad.optim.numerics import safe_increment
from funcgrad.tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = [
    "ApplyIfFiniteState", "ConditionFn", "ConditionallyMaskState",
    "ConditionallyTransformState", "MonitorState", "NonNegativeParamsState", "SnapshotState",
    "ZeroNansState", "apply_if_finite", "conditionally_mask", "conditionally_transform",
    "flatten", "keep_params_nonnegative", "monitor", "snapshot", "zero_nans",
]

NonNegativeParamsState = EmptyState


class ConditionFn(Protocol):
    """`condition(step, **extra_args) -> bool scalar`: whether to transform at this step."""

    def __call__(self, step: Any, **extra_args: Any) -> Any:
        """True to apply the inner transformation."""


def _count():
    return fnp.zeros((), fnp.int32)


# ---------------------------------------------------------------------------------------------
# Conditional application


class ConditionallyTransformState(NamedTuple):
    inner_state: Any
    step: Any  # int32


def conditionally_transform(inner: GradientTransformation, should_transform_fn: ConditionFn,
                            forward_extra_args: bool = False
                            ) -> GradientTransformationExtraArgs:
    """Applies `inner` at the steps where `should_transform_fn(step)` is True; at the others
    the updates pass unchanged and `inner`'s state is kept.

    Example:
        >>> opt = conditionally_transform(scale(0.5), lambda step: step >= 10)
    """
    inner = with_extra_args_support(inner)

    def init(params):
        return ConditionallyTransformState(inner.init(params), _count())

    def update(updates, state, params=None, **extra_args):
        condition_kwargs = extra_args if forward_extra_args else {}
        updates, inner_state = lax.cond(
            should_transform_fn(state.step, **condition_kwargs),
            lambda: inner.update(updates, state.inner_state, params, **extra_args),
            lambda: (updates, state.inner_state))
        return updates, ConditionallyTransformState(inner_state, safe_increment(state.step))

    return GradientTransformationExtraArgs(init, update)


class ConditionallyMaskState(NamedTuple):
    step: Any  # int32
    inner_state: Any


def conditionally_mask(inner: GradientTransformation, should_transform_fn: ConditionFn,
                       forward_extra_args: bool = False) -> GradientTransformationExtraArgs:
    """Like `conditionally_transform`, but the updates are zero at the other steps.

    Example:
        >>> opt = conditionally_mask(sgd(0.1), lambda step: step % 2 == 0)
    """
    inner = with_extra_args_support(inner)

    def init(params):
        return ConditionallyMaskState(_count(), inner.init(params))

    def update(updates, state, params=None, **extra_args):
        condition_kwargs = extra_args if forward_extra_args else {}
        updates, inner_state = lax.cond(
            should_transform_fn(state.step, **condition_kwargs),
            lambda: inner.update(updates, state.inner_state, params, **extra_args),
            lambda: (tu.tree_zeros_like(updates), state.inner_state))
        return updates, ConditionallyMaskState(safe_increment(state.step), inner_state)

    return GradientTransformationExtraArgs(init, update)


class ApplyIfFiniteState(NamedTuple):
    notfinite_count: Any  # int32: consecutive steps with a non-finite update
    last_finite: Any  # bool: whether the latest update was finite
    total_notfinite: Any  # int32: all steps with a non-finite update
    inner_state: Any


def apply_if_finite(inner: GradientTransformation,
                    max_consecutive_errors: int) -> GradientTransformationExtraArgs:
    """Applies `inner` only to finite updates: a step with a NaN or an infinity gives zero
    updates and keeps `inner`'s state, unless it is the `max_consecutive_errors + 1`-th such
    step in a row (then it goes through, as in optax).

    Example:
        >>> opt = apply_if_finite(adam(1e-3), max_consecutive_errors=5)
    """
    inner = with_extra_args_support(inner)

    def init(params):
        return ApplyIfFiniteState(_count(), fnp.asarray(True), _count(), inner.init(params))

    def update(updates, state, params=None, **extra_args):
        leaves = tree_flatten(updates)[0]
        isfinite = fnp.all(fnp.stack([fnp.all(fnp.isfinite(p)) for p in leaves])) \
            if leaves else fnp.asarray(True)
        notfinite_count = fnp.where(isfinite, fnp.zeros((), fnp.int32),
                                    safe_increment(state.notfinite_count))
        updates, inner_state = lax.cond(
            fnp.logical_or(isfinite, notfinite_count > max_consecutive_errors),
            lambda: inner.update(updates, state.inner_state, params, **extra_args),
            lambda: (tu.tree_zeros_like(updates), state.inner_state))
        total = fnp.where(isfinite, state.total_notfinite, safe_increment(state.total_notfinite))
        return updates, ApplyIfFiniteState(notfinite_count, isfinite, total, inner_state)

    return GradientTransformationExtraArgs(init, update)


# ---------------------------------------------------------------------------------------------
# Layout and constraints


def _flatten(tree):
    return fnp.concatenate([fnp.reshape(p, [-1]) for p in tree_flatten(tree)[0]])


def _unflatten(like, flat):
    leaves, treedef = tree_flatten(like)
    offsets = np.cumsum([np.size(x) for x in leaves])[:-1].tolist()
    pieces = fnp.split(flat, offsets) if offsets else [flat]
    return tree_unflatten(treedef, [fnp.reshape(f, x.shape) for f, x in zip(pieces, leaves)])


def flatten(inner: GradientTransformation) -> GradientTransformationExtraArgs:
    """Runs `inner` on all leaves concatenated into one vector (fewer, larger operations).

    Example:
        >>> opt = flatten(adam(1e-3))
    """
    inner = with_extra_args_support(inner)

    def update(updates, state, params=None, **extra_args):
        flat_params = None if params is None else _flatten(params)
        flat, state = inner.update(_flatten(updates), state, flat_params, **extra_args)
        return _unflatten(updates, flat), state

    return GradientTransformationExtraArgs(lambda params: inner.init(_flatten(params)), update)


def keep_params_nonnegative() -> GradientTransformation:
    """Changes each update so that `params + update` stays >= 0 (an update that would cross
    zero becomes `-params`)."""
    def update(updates, state, params=None):
        if params is None:
            raise op_error("keep_params_nonnegative", "needs the parameters: call "
                                                      "`update(grads, state, params)`",
                           cls=FuncgradValueError)
        return tree_map(lambda p, u: None if p is None else fnp.where((p + u) < 0.0, -p, u),
                        params, updates, is_leaf=lambda x: x is None), state

    return GradientTransformation(lambda params: NonNegativeParamsState(), update)


class ZeroNansState(NamedTuple):
    found_nan: Any  # per leaf: whether the latest update had a NaN


def zero_nans() -> GradientTransformation:
    """Replaces NaNs in the updates by zeros and records, per leaf, whether there were any."""
    def init(params):
        return ZeroNansState(tree_map(lambda p: fnp.asarray(False), params))

    def update(updates, state, params=None):
        found = ZeroNansState(tree_map(lambda p: fnp.any(fnp.isnan(p)), updates))
        return tree_map(lambda p: fnp.where(fnp.isnan(p), fnp.zeros_like(p), p), updates), found

    return GradientTransformation(init, update)


# ---------------------------------------------------------------------------------------------
# Measurements


class SnapshotState(NamedTuple):
    measurement: dict  # {measure_name: measure(latest updates)}


def snapshot(measure_name: str, measure) -> GradientTransformation:
    """Records `measure(updates)` in the state under `measure_name` (at init: of the params);
    the updates pass unchanged.

    Example:
        >>> opt = chain(snapshot("grad_norm", tree_norm), adam(1e-3))
    """
    return GradientTransformation(
        lambda params: SnapshotState({measure_name: measure(params)}),
        lambda updates, state, params=None: (updates, SnapshotState({measure_name:
                                                                     measure(updates)})))


class MonitorState(NamedTuple):
    measurements: dict  # {name: the latest measurement}
    measure_states: tuple  # the states of the measuring transformations


def monitor(measures: dict) -> GradientTransformationExtraArgs:
    """Records several measurements of the updates (each a function of the updates or a
    transformation whose output is the measurement); the updates pass unchanged.

    Example:
        >>> opt = chain(monitor({"norm": tree_norm}), adam(1e-3))
    """
    lifted = {}
    for name, measure in measures.items():
        if callable(measure):
            measure = stateless(lambda u, _, m=measure: m(u))
        lifted[name] = with_extra_args_support(measure)
    names = tuple(lifted)

    def init(params):
        return MonitorState({}, tuple(lifted[n].init(params) for n in names))

    def update(updates, state, params=None, **extra_args):
        measurements, states = {}, []
        for i, name in enumerate(names):
            measurements[name], s = lifted[name].update(updates, state.measure_states[i],
                                                        params, **extra_args)
            states.append(s)
        return updates, MonitorState(measurements, tuple(states))

    return GradientTransformationExtraArgs(init, update)
