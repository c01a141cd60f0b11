"""Gradient accumulation: `MultiSteps` runs an optimizer once every k mini-steps on the mean
(or sum) of the gradients in between, and can skip bad mini-steps (`skip_not_finite`,
`skip_large_updates`).

As in optax 0.2.8 (`optax.transforms`). Imports `funcgrad.numpy`, `funcgrad.tree_util` and
`optim.base`/`numerics`/`tree_utils`; not `optim.transforms`, which re-exports these names.
"""

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradValueError, op_error
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.base import GradientTransformation, with_extra_args_support
from funcgrad.optim.numerics import safe_increment
from funcgrad.tree_util import tree_leaves, tree_map

__all__ = ["MultiSteps", "MultiStepsState", "ShouldSkipUpdateFunction", "skip_large_updates",
           "skip_not_finite"]


class ShouldSkipUpdateFunction(Protocol):
    """`fn(updates, gradient_step, params) -> (should_skip bool scalar, skip_state pytree)`."""

    def __call__(self, updates: Any, gradient_step: Any, params: Any) -> tuple[Any, Any]:
        """Whether to drop this mini-step, and what to record in the state."""


def skip_not_finite(updates: Any, gradient_step: Any, params: Any) -> tuple[Any, Any]:
    """Skips a mini-step whose gradient has a NaN or an infinity (for `MultiSteps`).

    Returns:
        `(should_skip, {'should_skip', 'num_not_finite'})`.
    """
    counts = [fnp.sum(fnp.logical_not(fnp.isfinite(p))) for p in tree_leaves(updates)]
    num_not_finite = fnp.sum(fnp.stack(counts)) if counts else fnp.asarray(0)
    should_skip = num_not_finite > 0
    return should_skip, {"should_skip": should_skip, "num_not_finite": num_not_finite}


def skip_large_updates(updates: Any, gradient_step: Any, params: Any,
                       max_squared_norm) -> tuple[Any, Any]:
    """Skips a mini-step whose squared gradient norm is not below `max_squared_norm` (bind
    it with `functools.partial`).

    Returns:
        `(should_skip, {'should_skip', 'norm_squared'})`.
    """
    norms = [fnp.sum(p ** 2) for p in tree_leaves(updates)]
    norm_sq = fnp.sum(fnp.stack(norms)) if norms else fnp.asarray(0.0)
    should_skip = fnp.logical_not(norm_sq < max_squared_norm)
    return should_skip, {"should_skip": should_skip, "norm_squared": norm_sq}


class MultiStepsState(NamedTuple):
    mini_step: Any  # int32: mini-steps since the last real update
    gradient_step: Any  # int32: real updates so far
    inner_opt_state: Any
    acc_grads: Any  # the accumulated gradient (mean or sum)
    skip_state: Any = ()


def _no_skip(*args, **kwargs):
    return fnp.asarray(False), ()


class MultiSteps:
    """Accumulates gradients over `every_k_schedule` mini-steps, then applies `opt` once.

    Between real updates `update` returns zeros and keeps `opt`'s state; at every k-th
    mini-step it runs `opt` on the mean (`use_grad_mean`) or sum of the accumulated
    gradients.

    Args:
        opt: the optimizer to run every k mini-steps.
        every_k_schedule: k, or a function of the number of real updates returning k.
        use_grad_mean: average (True) or sum the mini-step gradients.
        should_skip_update_fn: drops mini-steps (see `skip_not_finite`).
        accumulator_dtype: the dtype of the accumulated gradient.

    Example:
        >>> opt = MultiSteps(adam(1e-3), every_k_schedule=4)
        >>> state = opt.init(params)
        >>> updates, state = opt.update(grads, state, params)   # zeros 3 times out of 4
        >>> bool(opt.has_updated(state))
        False
    """

    def __init__(self, opt: GradientTransformation,
                 every_k_schedule: int | Callable[[Any], Any], use_grad_mean: bool = True,
                 should_skip_update_fn: ShouldSkipUpdateFunction | None = None,
                 accumulator_dtype=fnp.float32):
        self._opt = with_extra_args_support(opt)
        self._every_k_schedule = ((lambda step: every_k_schedule)
                                  if isinstance(every_k_schedule, int) else every_k_schedule)
        self._use_grad_mean = use_grad_mean
        self._accumulator_dtype = accumulator_dtype
        self._should_skip_update_fn = should_skip_update_fn or _no_skip

    @property
    def inner_opt(self) -> GradientTransformation:
        """The optimizer run every k mini-steps."""
        return self._opt

    def init(self, params: Any) -> MultiStepsState:
        """The initial state: zero counters, `opt`'s state, a zero accumulator."""
        gradient_step = fnp.zeros((), fnp.int32)
        _, skip_state = self._should_skip_update_fn(tu.tree_zeros_like(params),
                                                    gradient_step, params)
        return MultiStepsState(fnp.zeros((), fnp.int32), gradient_step, self._opt.init(params),
                               tu.tree_zeros_like(params, dtype=self._accumulator_dtype),
                               skip_state)

    def _accumulate(self, grad, acc, n_acc):
        return acc + (grad - acc) / (n_acc + 1) if self._use_grad_mean else grad + acc

    def update(self, updates: Any, state: MultiStepsState, params: Any = None,
               **extra_args: Any) -> tuple[Any, MultiStepsState]:
        """Accumulates `updates`; every k-th mini-step runs `opt` and returns its updates."""
        k_steps = self._every_k_schedule(state.gradient_step)
        should_skip, skip_state = self._should_skip_update_fn(updates, state.gradient_step,
                                                              params)
        should_skip = fnp.asarray(should_skip)
        if (should_skip.dtype, should_skip.shape) != (fnp.dtype(bool), ()):
            raise op_error("MultiSteps.update", "should_skip_update_fn must return a bool "
                                                f"scalar, got {should_skip.dtype} "
                                                f"{tuple(should_skip.shape)}",
                           cls=FuncgradValueError)
        acc_grads = tree_map(lambda g, acc: self._accumulate(g, acc, state.mini_step),
                             updates, state.acc_grads)
        final, inner_state = self._opt.update(tu.tree_cast_like(acc_grads, updates),
                                              state.inner_opt_state, params=params,
                                              **extra_args)
        emit = state.mini_step == (k_steps - 1)
        gradient_step = emit * safe_increment(state.gradient_step) + (1 - emit) * \
            state.gradient_step
        new_state = MultiStepsState(
            safe_increment(state.mini_step) % k_steps, gradient_step,
            tree_map(lambda st, nst: fnp.where(emit, nst, st).astype(st.dtype),
                     state.inner_opt_state, inner_state),
            tree_map(lambda ga: ((1 - emit) * ga).astype(self._accumulator_dtype), acc_grads),
            skip_state)
        final = tree_map(lambda ga: emit * ga, final)
        # A skipped mini-step changes nothing but the skip state (optax chooses with lax.cond;
        # selecting after the fact gives the same values).
        kept = state._replace(skip_state=skip_state)
        return (tu.tree_where(should_skip, tu.tree_zeros_like(final), final),
                tree_map(lambda old, new: fnp.where(should_skip, old, new), kept, new_state))

    def has_updated(self, state: MultiStepsState) -> Any:
        """Whether the latest `update` ran the inner optimizer."""
        return fnp.logical_and(state.mini_step == 0, state.gradient_step > 0)

    def gradient_transformation(self) -> GradientTransformation:
        """This accumulator as a `GradientTransformation(init, update)`."""
        return GradientTransformation(self.init, self.update)
