"""`optimizers`: JAX's example optimizers, on funcgrad (`jax.example_libraries.optimizers`).

An optimizer is a triple `(init_fun, update_fun, get_params)`:
`opt_state = init_fun(params)`, `opt_state = update_fun(step, grads, opt_state)`,
`params = get_params(opt_state)`, all over pytrees. `OptimizerState` is a pytree, so an
update step can be jitted. The per-array rules below are JAX's (`adam` with JAX's eps
placement, `momentum` as `v = mass * v + g`); funcgrad.optim is the optax-style library.

    >>> opt_init, opt_update, get_params = sgd(0.1)
    >>> state = opt_update(0, {'w': fnp.ones(2)}, opt_init({'w': fnp.zeros(2)}))
    >>> get_params(state)['w']
    Array([-0.1, -0.1], dtype=float32)
"""

import functools
from typing import Any, NamedTuple

import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.tree_util import (
    register_pytree_node,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_unflatten,
)

__all__ = [
    "Optimizer", "OptimizerState", "adagrad", "adam", "adamax", "clip_grads", "constant",
    "exponential_decay", "inverse_time_decay", "l2_norm", "make_schedule", "momentum",
    "nesterov", "optimizer", "pack_optimizer_state", "piecewise_constant", "polynomial_decay",
    "rmsprop", "rmsprop_momentum", "sgd", "unpack_optimizer_state",
]


class OptimizerState(NamedTuple):
    """Flat per-leaf states, the parameters' tree and each leaf state's own tree."""

    packed_state: Any
    tree_def: Any
    subtree_defs: Any


register_pytree_node(OptimizerState, lambda s: ((s.packed_state,), (s.tree_def,
                                                                     s.subtree_defs)),
                     lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))


class Optimizer(NamedTuple):
    init_fn: Any
    update_fn: Any
    params_fn: Any


def optimizer(opt_maker):
    """Decorator: lift `(init, update, get_params)` on one array to pytrees of arrays."""
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        def tree_init(x0_tree):
            x0_flat, tree = tree_flatten(x0_tree)
            states = [tree_flatten(init(fnp.asarray(x0))) for x0 in x0_flat]
            return OptimizerState([s[0] for s in states], tree, tuple(s[1] for s in states))

        def tree_update(i, grad_tree, opt_state):
            states_flat, tree, subtrees = opt_state
            grad_flat, tree2 = tree_flatten(grad_tree)
            if tree2 != tree:
                raise errors.FuncgradTypeError(
                    f"optimizer update: the gradient tree {tree2} does not match the parameter "
                    f"tree {tree}\n{errors.where()}")
            new = [tree_flatten(update(i, g, tree_unflatten(sub, s)))
                   for g, s, sub in zip(grad_flat, states_flat, subtrees)]
            return OptimizerState([n[0] for n in new], tree, tuple(n[1] for n in new))

        def tree_get_params(opt_state):
            states_flat, tree, subtrees = opt_state
            return tree_unflatten(tree, [get_params(tree_unflatten(sub, s))
                                         for s, sub in zip(states_flat, subtrees)])
        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


# --- schedules ----------------------------------------------------------------------------------

def constant(step_size):
    """The schedule `i -> step_size`."""
    return lambda i: step_size


def exponential_decay(step_size, decay_steps, decay_rate):
    """`i -> step_size * decay_rate ** (i / decay_steps)`."""
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    """`i -> step_size / (1 + decay_rate * i / decay_steps)` (floored with `staircase`)."""
    if staircase:
        return lambda i: step_size / (1 + decay_rate * fnp.floor(i / decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    """From `step_size` to `final_step_size` over `decay_steps` along `(1 - t) ** power`."""
    def schedule(i):
        i = fnp.minimum(i, decay_steps)
        return (step_size - final_step_size) * (1 - i / decay_steps) ** power + final_step_size
    return schedule


def piecewise_constant(boundaries, values):
    """`values[k]` for steps in `[boundaries[k-1], boundaries[k])` (len(values) = len + 1)."""
    boundaries, values = fnp.array(boundaries), fnp.array(values)
    if values.ndim != 1 or boundaries.ndim != 1 or values.shape[0] != boundaries.shape[0] + 1:
        raise errors.FuncgradValueError(
            f"piecewise_constant: needs one more value than boundaries, got {values.shape} "
            f"values and {boundaries.shape} boundaries\n{errors.where()}")
    return lambda i: values[fnp.sum(i > boundaries)]


def make_schedule(scalar_or_schedule):
    """A schedule from a schedule (returned as is) or a constant step size."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if fnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise errors.FuncgradTypeError(f"make_schedule: expected a scalar or a function of the "
                                   f"step, got {type(scalar_or_schedule).__name__}\n"
                                   f"{errors.where()}")


# --- optimizers (each on one array; `optimizer` lifts them to pytrees) --------------------------

@optimizer
def sgd(step_size):
    """x -= step_size(i) * g."""
    step_size = make_schedule(step_size)
    return (lambda x0: x0, lambda i, g, x: x - step_size(i) * g, lambda x: x)


@optimizer
def momentum(step_size, mass):
    """v = mass * v + g; x -= step_size(i) * v."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity
    return (lambda x0: (x0, fnp.zeros_like(x0)), update, lambda state: state[0])


@optimizer
def nesterov(step_size, mass):
    """v = mass * v + g; x -= step_size(i) * (mass * v + g)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity
    return (lambda x0: (x0, fnp.zeros_like(x0)), update, lambda state: state[0])


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad with momentum on the normalized gradient (JAX's variant)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + fnp.square(g)
        g_sq_inv_sqrt = fnp.where(g_sq > 0, 1.0 / fnp.sqrt(fnp.where(g_sq > 0, g_sq, 1.0)), 0.0)
        m = (1.0 - momentum) * (g * g_sq_inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return (lambda x0: (x0, fnp.zeros_like(x0), fnp.zeros_like(x0)), update,
            lambda state: state[0])


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """avg = gamma * avg + (1 - gamma) * g**2; x -= step_size(i) * g / sqrt(avg + eps)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + fnp.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / fnp.sqrt(avg_sq_grad + eps), avg_sq_grad
    return (lambda x0: (x0, fnp.zeros_like(x0)), update, lambda state: state[0])


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp whose scaled step goes through a momentum buffer."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + fnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / fnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom
    return (lambda x0: (x0, fnp.zeros_like(x0), fnp.zeros_like(x0)), update,
            lambda state: state[0])


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam: x -= step_size(i) * mhat / (sqrt(vhat) + eps), bias-corrected at step i + 1."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * fnp.square(g) + b2 * v
        t = fnp.asarray(i, m.dtype) + 1
        mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        return x - step_size(i) * mhat / (fnp.sqrt(vhat) + eps), m, v
    return (lambda x0: (x0, fnp.zeros_like(x0), fnp.zeros_like(x0)), update,
            lambda state: state[0])


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adamax: the infinity-norm variant of Adam."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = fnp.maximum(b2 * u, fnp.abs(g))
        t = fnp.asarray(i, m.dtype) + 1
        return x - (step_size(i) / (1 - b1 ** t)) * m / (u + eps), m, u
    return (lambda x0: (x0, fnp.zeros_like(x0), fnp.zeros_like(x0)), update,
            lambda state: state[0])


# --- utilities ----------------------------------------------------------------------------------

def l2_norm(tree):
    """The l2 norm of all the leaves of `tree` together."""
    return fnp.sqrt(sum(fnp.vdot(x, x) for x in tree_leaves(tree)))


def clip_grads(grad_tree, max_norm):
    """Scale `grad_tree` down so that its `l2_norm` is at most `max_norm`."""
    norm = l2_norm(grad_tree)
    return tree_map(lambda g: fnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


def unpack_optimizer_state(opt_state):
    """The state as a pytree of per-parameter state tuples (e.g. to save it)."""
    states_flat, tree, subtrees = opt_state
    return tree_unflatten(tree, [tree_unflatten(sub, s) for s, sub in zip(states_flat, subtrees)])


def pack_optimizer_state(marked_pytree):
    """The inverse of `unpack_optimizer_state`."""
    leaves, tree = tree_flatten(marked_pytree, is_leaf=lambda x: isinstance(x, tuple))
    flat = [tree_flatten(s) for s in leaves]
    return OptimizerState([f[0] for f in flat], tree, tuple(f[1] for f in flat))
