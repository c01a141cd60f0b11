"""Adafactor's factored second moments: for a matrix-like leaf, one running average per row
and one per column instead of one per entry (Shazeer & Stern 2018), as optax 0.2.8.

Imports `funcgrad.numpy`, `funcgrad.tree_util` and `optim.base`/`numerics`.
"""

from typing import Any, NamedTuple

import numpy as np

import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradValueError, op_error
from funcgrad.optim.base import GradientTransformation
from funcgrad.optim.numerics import abs_sq, safe_increment
from funcgrad.tree_util import tree_map

__all__ = ["FactoredState", "scale_by_factored_rms"]


def _decay_rate_pow(i, exponent=0.8):
    """The second-moment decay at step `i`: `1 - (i + 1) ** -exponent`."""
    t = fnp.asarray(i + 1, fnp.float32)
    return 1.0 - t ** (-exponent)


def _factored_dims(shape, factored, min_dim_size_to_factor):
    """The two largest axes `(d1, d0)` when the leaf is factored, else None."""
    if not factored or len(shape) < 2:
        return None
    sorted_dims = np.argsort(shape)
    if shape[sorted_dims[-2]] < min_dim_size_to_factor:
        return None
    return int(sorted_dims[-2]), int(sorted_dims[-1])


class FactoredState(NamedTuple):
    count: Any  # int32: updates so far
    v_row: Any  # per factored leaf: the row averages (a (1,) placeholder otherwise)
    v_col: Any  # per factored leaf: the column averages (a (1,) placeholder otherwise)
    v: Any  # per unfactored leaf: the full second moment (a (1,) placeholder otherwise)


class _Result(NamedTuple):
    update: Any
    v_row: Any
    v_col: Any
    v: Any


def scale_by_factored_rms(factored: bool = True, decay_rate=0.8, step_offset=0,
                          min_dim_size_to_factor: int = 128, epsilon=1e-30,
                          decay_rate_fn=_decay_rate_pow) -> GradientTransformation:
    """Scales by the inverse square root of (factored) second moments, as Adafactor.

    Args:
        factored: factor the second moments of leaves of rank >= 2.
        decay_rate: the exponent of the step-dependent decay `1 - t**-decay_rate`.
        step_offset: subtracted from the step count in the decay.
        min_dim_size_to_factor: factor only when the second largest axis is at least this.
        epsilon: added to the squared gradients.
        decay_rate_fn: `(step, decay_rate) -> decay`.

    Example:
        >>> opt = chain(scale_by_factored_rms(min_dim_size_to_factor=2), scale(-1e-2))
    """
    def placeholder(dtype):
        return fnp.zeros((1,), dtype=dtype)

    def init_leaf(param):
        dims = _factored_dims(param.shape, factored, min_dim_size_to_factor)
        if dims is None:
            return _Result(placeholder(param.dtype), placeholder(param.dtype),
                           placeholder(param.dtype), fnp.zeros_like(param))
        d1, d0 = dims
        row = fnp.zeros(np.delete(param.shape, d0).tolist(), param.dtype)
        col = fnp.zeros(np.delete(param.shape, d1).tolist(), param.dtype)
        return _Result(placeholder(param.dtype), row, col, placeholder(param.dtype))

    def update_leaf(grad, v_row, v_col, v, param, step):
        dtype = param.dtype
        decay = decay_rate_fn(step - step_offset, decay_rate)
        dims = _factored_dims(param.shape, factored, min_dim_size_to_factor)
        grad_sqr = abs_sq(grad) + epsilon
        if dims is None:
            new_v = (decay * v + (1.0 - decay) * grad_sqr).astype(dtype)
            return _Result(grad * new_v ** -0.5, placeholder(dtype), placeholder(dtype), new_v)
        d1, d0 = dims
        new_row = (decay * v_row + (1.0 - decay) * fnp.mean(grad_sqr, axis=d0)).astype(dtype)
        new_col = (decay * v_col + (1.0 - decay) * fnp.mean(grad_sqr, axis=d1)).astype(dtype)
        reduced_d1 = d1 - 1 if d1 > d0 else d1
        row_col_mean = fnp.mean(new_row, axis=reduced_d1, keepdims=True)
        row_factor = (new_row / row_col_mean) ** -0.5
        col_factor = new_col ** -0.5
        update = (grad * fnp.expand_dims(row_factor, axis=d0)
                  * fnp.expand_dims(col_factor, axis=d1))
        return _Result(update, new_row, new_col, placeholder(dtype))

    def to_state(count, results):
        is_result = lambda x: isinstance(x, _Result)  # noqa: E731
        pick = lambda i: tree_map(lambda r: r[i], results, is_leaf=is_result)  # noqa: E731
        return FactoredState(count, pick(1), pick(2), pick(3)), pick(0)

    def init(params):
        return to_state(fnp.zeros((), fnp.int32), tree_map(init_leaf, params))[0]

    def update(grads, state, params=None):
        if params is None:
            raise op_error("scale_by_factored_rms", "needs the parameters: call "
                                                    "`update(grads, state, params)`",
                           cls=FuncgradValueError)
        results = tree_map(lambda *a: update_leaf(*a, state.count), grads, state.v_row,
                           state.v_col, state.v, params)
        new_state, updates = to_state(safe_increment(state.count), results)
        return updates, new_state

    return GradientTransformation(init, update)
