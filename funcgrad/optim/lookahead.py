"""Lookahead (Zhang et al. 2019): a fast optimizer explores for `sync_period` steps, then the
slow weights move `slow_step_size` of the way towards the fast ones; as optax 0.2.8.

The params are `LookaheadParams(fast, slow)` (`LookaheadParams.init_synced(params)`), and
the updates returned change both. Imports `funcgrad.numpy` and `optim.base`.
"""

import warnings
from typing import Any, NamedTuple

import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradValueError
from funcgrad.optim.base import GradientTransformation
from funcgrad.tree_util import tree_map

__all__ = ["LookaheadParams", "LookaheadState", "lookahead"]


class LookaheadState(NamedTuple):
    fast_state: Any  # the fast optimizer's state
    steps_since_sync: Any  # int32


class LookaheadParams(NamedTuple):
    fast: Any  # the fast weights (where the gradient is computed)
    slow: Any  # the slow weights (the ones to evaluate)

    @classmethod
    def init_synced(cls, params: Any) -> "LookaheadParams":
        """Fast and slow weights both equal to `params`."""
        return cls(slow=params, fast=params)


def lookahead(fast_optimizer: GradientTransformation, sync_period, slow_step_size,
              reset_state: bool = False) -> GradientTransformation:
    """Wraps `fast_optimizer` in Lookahead.

    Example:
        >>> opt = lookahead(adam(1e-3), sync_period=5, slow_step_size=0.5)
        >>> params = LookaheadParams.init_synced(params)
        >>> state = opt.init(params)
        >>> updates, state = opt.update(grads_at_fast, state, params)
    """
    if sync_period < 1:
        raise FuncgradValueError(f"lookahead: sync_period must be >= 1, got {sync_period}")

    def init(params):
        fast = getattr(params, "fast", None)
        if fast is None:
            warnings.warn("lookahead: params have no `fast` attribute; assuming they are the "
                          "fast parameters", stacklevel=2)
            fast = params
        return LookaheadState(fast_optimizer.init(fast), fnp.zeros((), fnp.int32))

    def update(updates, state, params=None):
        updates, fast_state = fast_optimizer.update(updates, state.fast_state, params.fast)
        sync = state.steps_since_sync == (sync_period - 1)
        diff = tree_map(lambda f, u, s: f + u - s, params.fast, updates, params.slow)
        slow_updates = tree_map(lambda d: slow_step_size * sync * d, diff)
        fast_updates = tree_map(lambda u, d: u - sync * (1 - slow_step_size) * d, updates, diff)
        if reset_state:
            fresh = fast_optimizer.init(params.fast)
            fast_state = tree_map(lambda cur, ini: (1 - sync) * cur + sync * ini, fast_state,
                                  fresh)
        return (LookaheadParams(fast=fast_updates, slow=slow_updates),
                LookaheadState(fast_state, (state.steps_since_sync + 1) % sync_period))

    return GradientTransformation(init, update)
