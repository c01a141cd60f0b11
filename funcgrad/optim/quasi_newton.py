"""L-BFGS as optax 0.2.8 has it: `scale_by_lbfgs` (the two-loop recursion over a ring buffer
of parameter and gradient differences) and `lbfgs`, chained with a zoom line search.

Imports `funcgrad.numpy`, `funcgrad.lax` and the optim modules it chains.
"""

from typing import Any, NamedTuple

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.errors import FuncgradValueError
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.base import (
    GradientTransformation,
    GradientTransformationExtraArgs,
    chain,
    identity,
)
from funcgrad.optim.linesearch import scale_by_zoom_linesearch
from funcgrad.optim.numerics import safe_increment
from funcgrad.optim.transforms import scale, scale_by_learning_rate
from funcgrad.tree_util import tree_map

__all__ = ["ScaleByLBFGSState", "lbfgs", "scale_by_lbfgs"]


class ScaleByLBFGSState(NamedTuple):
    count: Any  # int32: updates so far
    params: Any  # the params of the previous update
    updates: Any  # the gradient of the previous update
    diff_params_memory: Any  # per leaf: (memory_size, *shape) parameter differences
    diff_updates_memory: Any  # per leaf: (memory_size, *shape) gradient differences
    weights_memory: Any  # (memory_size,): 1 / <diff_updates, diff_params>


def _precondition(updates, dparams, dupdates, rhos, identity_scale, memory_idx):
    """The two-loop recursion: `H_k @ updates` with the inverse-Hessian approximation."""
    memory_size = rhos.shape[0]
    indices = (memory_idx + fnp.arange(memory_size)) % memory_size

    def right(vec, idx):
        dwi, dui = tree_map(lambda x: x[idx], (dparams, dupdates))
        alpha = rhos[idx] * tu.tree_real(tu.tree_vdot(dwi, vec))
        return tu.tree_cast_like(tu.tree_add_scale(vec, -alpha, dui), vec), alpha

    vec, alphas = lax.scan(right, updates, indices, reverse=True)
    vec = tu.tree_scale(identity_scale, vec)

    def left(vec, idx_alpha):
        idx, alpha = idx_alpha
        dwi, dui = tree_map(lambda x: x[idx], (dparams, dupdates))
        beta = rhos[idx] * tu.tree_real(tu.tree_vdot(dui, vec))
        return tu.tree_cast_like(tu.tree_add_scale(vec, alpha - beta, dwi), vec), beta

    return lax.scan(left, vec, (indices, alphas))[0]


def scale_by_lbfgs(memory_size: int = 10,
                   scale_init_precond: bool = True) -> GradientTransformation:
    """Preconditions the gradient with the L-BFGS inverse-Hessian approximation built from
    the last `memory_size` steps (the first step: the gradient scaled to norm <= 1).

    Example:
        >>> opt = chain(scale_by_lbfgs(), scale(-1.0))
    """
    if memory_size < 1:
        raise FuncgradValueError(f"scale_by_lbfgs: memory_size must be >= 1, got {memory_size}")

    def init(params):
        stacked = tree_map(lambda p: fnp.zeros((memory_size,) + p.shape, p.dtype), params)
        return ScaleByLBFGSState(fnp.asarray(0, fnp.int32), tu.tree_zeros_like(params),
                                 tu.tree_zeros_like(params), stacked, stacked,
                                 fnp.zeros(memory_size))

    def update(updates, state, params=None):
        if params is None:
            raise FuncgradValueError("scale_by_lbfgs: needs the parameters: call "
                                     "`update(grads, state, params)`")
        memory_idx = state.count % memory_size
        prev_idx = (state.count - 1) % memory_size
        dparams = tu.tree_sub(params, state.params)
        dupdates = tu.tree_sub(updates, state.updates)
        curvature = tu.tree_real(tu.tree_vdot(dupdates, dparams))
        weight = fnp.where(curvature == 0.0, 0.0, 1.0 / curvature)
        dparams, dupdates, weight = tree_map(
            lambda x: fnp.where(state.count > 0, x, fnp.zeros_like(x)), (dparams, dupdates, weight))
        memories = tree_map(lambda x, y: x.at[prev_idx].set(y),
                            (state.diff_params_memory, state.diff_updates_memory,
                             state.weights_memory), (dparams, dupdates, weight))
        if scale_init_precond:
            numerator = tu.tree_real(tu.tree_vdot(dupdates, dparams))
            denominator = tu.tree_norm(dupdates, squared=True)
            identity_scale = fnp.where(denominator > 0.0, numerator / denominator, 1.0)
            capped_inv_norm = fnp.minimum(1.0, 1.0 / tu.tree_norm(lax.stop_gradient(updates)))
            identity_scale = fnp.where(state.count > 0, identity_scale, capped_inv_norm)
        else:
            identity_scale = 1.0
        precond = _precondition(updates, *memories, identity_scale, memory_idx)
        return precond, ScaleByLBFGSState(safe_increment(state.count), params, updates,
                                          *memories)

    return GradientTransformation(init, update)


def lbfgs(learning_rate=None, memory_size: int = 10, scale_init_precond: bool = True,
          linesearch=scale_by_zoom_linesearch(max_linesearch_steps=20,
                                              initial_guess_strategy="one")
          ) -> GradientTransformationExtraArgs:
    """L-BFGS with a zoom line search (strong Wolfe conditions) by default.

    `update` needs `value=`, `grad=` and `value_fn=` for the line search; pair it with
    `value_and_grad_from_state` to reuse the line search's last evaluation.

    Example:
        >>> opt = lbfgs()
        >>> state = opt.init(params)
        >>> value_and_grad = value_and_grad_from_state(loss)
        >>> for _ in range(20):
        ...     value, grad = value_and_grad(params, state=state)
        ...     updates, state = opt.update(grad, state, params, value=value, grad=grad,
        ...                                 value_fn=loss)
        ...     params = apply_updates(params, updates)
    """
    base_scaling = scale(-1.0) if learning_rate is None else scale_by_learning_rate(learning_rate)
    return chain(scale_by_lbfgs(memory_size=memory_size, scale_init_precond=scale_init_precond),
                 base_scaling, identity() if linesearch is None else linesearch)
