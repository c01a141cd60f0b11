"""Cases run twice: by `tools/record_optax_golden.py` with optax, jax.numpy and jax (recorded in
`tests/golden/optax_golden.json`), and by `tests/test_optim_golden.py` with funcgrad.optim,
funcgrad.numpy and funcgrad, which compares the two. Only the module namespace `m` differs:
each case is written once, as optax code (`m.optax.adam(0.1)`, `m.jnp.sum(...)`,
`m.jax.grad(...)`), so it also shows that optax code runs on funcgrad unchanged.

This module imports numpy only (the recorder runs it without funcgrad, the tests without JAX).
"""

import inspect
from collections import namedtuple

import numpy as np

Frameworks = namedtuple("Frameworks", "optax jnp jax")

NAMESPACES = ["optax", "optax.schedules", "optax.losses", "optax.transforms", "optax.contrib",
              "optax.tree_utils", "optax.tree", "optax.projections", "optax.perturbations",
              "optax.second_order", "optax.assignment"]

CASES = {}


def case(fn):
    """Registers `fn(m) -> pytree of arrays` under its name."""
    CASES[fn.__name__] = fn
    return fn


# ---------------------------------------------------------------------------------------------
# Describing an API entry (signatures compared by tests/test_optim_api.py)


def _default(value):
    if value is inspect.Parameter.empty:
        return "<required>"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if hasattr(type(value), "_fields"):
        return f"<{type(value).__name__}>"
    if isinstance(value, tuple):
        return "(" + ", ".join(_default(v) for v in value) + ")"
    if isinstance(value, type):
        try:
            return f"<dtype {np.dtype(value).name}>"
        except TypeError:
            return f"<class {value.__name__}>"
    if callable(value):
        return f"<function {getattr(value, '__name__', type(value).__name__)}>"
    return f"<{type(value).__name__}>"


def signature(fn):
    """[[name, kind, default], ...] of `fn`'s parameters, or None when it has none to show."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, _default(p.default)] for p in sig.parameters.values()]


def describe(value):
    """{"kind", "signature", "fields"} of one public name."""
    if inspect.isclass(value):
        if hasattr(value, "_fields"):
            return {"kind": "namedtuple", "fields": list(value._fields), "signature": None}
        own_init = "__init__" in vars(value) or hasattr(value, "__dataclass_fields__")
        return {"kind": "class", "fields": None,
                "signature": signature(value) if own_init else None}
    if callable(value):
        return {"kind": "function", "fields": None, "signature": signature(value)}
    return {"kind": "value", "fields": None, "signature": None}


def to_json(tree):
    """Arrays as nested lists (floats as float64, ints, bools); dicts and sequences kept."""
    if isinstance(tree, dict):
        return {str(k): to_json(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [to_json(v) for v in tree]
    if tree is None or isinstance(tree, str):
        return tree
    array = np.asarray(tree)
    if array.dtype.kind == "b":
        return array.tolist()
    if array.dtype.kind in "iu":
        return array.astype(np.int64).tolist()
    return array.astype(np.float64).tolist()


# ---------------------------------------------------------------------------------------------
# Shared data: a small fixed pytree and a smooth loss over it


def _array(*shape, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=shape).astype(np.float32)


PARAMS = {"w": _array(3, 4, seed=0), "b": _array(4, seed=1)}
TARGET = {"w": _array(3, 4, seed=2), "b": _array(4, seed=3)}
CURVATURE = {"w": (1.0 + np.arange(12, dtype=np.float32).reshape(3, 4) / 4),
             "b": np.array([0.5, 1.0, 2.0, 4.0], np.float32)}


def params(m):
    return {k: m.jnp.asarray(v) for k, v in PARAMS.items()}


def loss(m, p):
    """A smooth, non-quadratic loss: sum(c (p - t)**2 / 2 + (p - t)**4 / 10)."""
    total = 0.0
    for k in sorted(p):
        e = p[k] - m.jnp.asarray(TARGET[k])
        total = total + m.jnp.sum(0.5 * m.jnp.asarray(CURVATURE[k]) * e * e + 0.1 * e ** 4)
    return total


def run(m, opt, steps=5, extra_args=None, grads_fn=None):
    """`steps` updates of `opt` on `loss` from PARAMS; returns the final params.

    `extra_args(value, grads, params)` gives the keyword arguments of `update` (for the
    transformations that need the loss value); `grads_fn(t, grads)` alters the gradient.
    """
    p = params(m)
    state = opt.init(p)
    for t in range(steps):
        value, grads = m.jax.value_and_grad(lambda q: loss(m, q))(p)
        if grads_fn is not None:
            grads = grads_fn(t, grads)
        kwargs = extra_args(value, grads, p) if extra_args else {}
        updates, state = opt.update(grads, state, p, **kwargs)
        p = m.optax.apply_updates(p, updates)
    return p


def tree_a(m):
    return {"x": m.jnp.asarray(np.array([1.0, -2.0, 3.0], np.float32)),
            "y": [m.jnp.asarray(np.array([[0.5, -0.25], [4.0, 0.0]], np.float32))]}


def tree_b(m):
    return {"x": m.jnp.asarray(np.array([0.5, 1.5, -1.0], np.float32)),
            "y": [m.jnp.asarray(np.array([[2.0, 1.0], [-3.0, 0.75]], np.float32))]}


# ---------------------------------------------------------------------------------------------
# optax.tree_utils and numerics


@case
def tree_math(m):
    tu, a, b = m.optax.tree_utils, tree_a(m), tree_b(m)
    return {"add": tu.tree_add(a, b, a), "sub": tu.tree_sub(a, b), "mul": tu.tree_mul(a, b),
            "div": tu.tree_div(a, b), "scale": tu.tree_scale(0.5, a),
            "add_scale": tu.tree_add_scale(a, -2.0, b), "vdot": tu.tree_vdot(a, b),
            "sum": tu.tree_sum(a), "max": tu.tree_max(a), "min": tu.tree_min(a),
            "size": tu.tree_size(a), "norm": tu.tree_norm(a), "norm1": tu.tree_norm(a, 1),
            "norm_inf": tu.tree_norm(a, "inf"), "sqnorm": tu.tree_norm(a, squared=True),
            "clip": tu.tree_clip(a, -1.0, 2.0), "where": tu.tree_where(True, a, b),
            "full_like": tu.tree_full_like(a, 3.0), "batch": tu.tree_batch_shape(a, (2,)),
            "allclose": m.jnp.asarray(tu.tree_allclose(a, a))}


@case
def tree_moments(m):
    tu, a, b = m.optax.tree_utils, tree_a(m), tree_b(m)
    count = m.jnp.asarray(3, m.jnp.int32)
    return {"moment1": tu.tree_update_moment(a, b, 0.9, 1),
            "moment2": tu.tree_update_moment(a, b, 0.9, 2),
            "infinity": tu.tree_update_infinity_moment(a, b, 0.9, 1e-3),
            "per_elem": tu.tree_update_moment_per_elem_norm(a, b, 0.99, 2),
            "bias": tu.tree_bias_correction(a, 0.9, count),
            "top_level": m.optax.update_moment(a, b, 0.8, 2),
            "top_bias": m.optax.bias_correction(a, 0.999, count)}


@case
def numerics(m):
    o, jnp = m.optax, m.jnp
    x = jnp.asarray(np.array([[3.0, -4.0], [0.0, 1.0]], np.float32))
    z = jnp.zeros((3,), jnp.float32)
    big = jnp.asarray(np.iinfo(np.int32).max, jnp.int32)
    return {"norm": o.safe_norm(x, 1e-3), "norm_zero": o.safe_norm(z, 1e-3),
            "norm_axis": o.safe_norm(x, 0.5, axis=1),
            "norm_keep": o.safe_norm(x, 0.5, ord=1, axis=0, keepdims=True),
            "rms": o.safe_root_mean_squares(x, 1e-3), "rms_zero": o.safe_root_mean_squares(z, 1.0),
            "inc": o.safe_increment(jnp.asarray(4, jnp.int32)), "inc_max": o.safe_increment(big),
            "inc32": o.safe_int32_increment(big),
            "grad_norm": m.jax.grad(lambda v: o.safe_norm(v, 1e-3))(z)}
