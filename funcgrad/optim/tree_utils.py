"""optax.tree_utils: arithmetic, moments, casting and random draws over whole pytrees.

Every function maps over the leaves (`tree_add(x, y)` is `x + y` leaf by leaf) or reduces
them to one scalar (`tree_vdot`, `tree_norm`, `tree_sum`). The moment updates are the ones
every optimizer of `funcgrad.optim` is written with. `funcgrad.optim.tree` gives the same
functions optax's short names (`optim.tree.add`). The state look-ups (`tree_get`, `tree_set`,
`tree_map_params`) live in `optim.tree_state`. Imports `funcgrad.numpy`, `funcgrad.random`,
`funcgrad.tree_util` and `optim.numerics`.
"""

import functools
import operator
from typing import Any

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import random
from funcgrad.errors import FuncgradValueError
from funcgrad.optim.numerics import abs_sq
from funcgrad.optim.tree_state import (
    NamedTupleKey,
    tree_get,
    tree_get_all_with_path,
    tree_map_params,
    tree_set,
)
from funcgrad.tree_util import (
    tree_leaves,
    tree_map,
    tree_map_with_path,
    tree_reduce,
    tree_structure,
)

__all__ = [
    "NamedTupleKey", "tree_add", "tree_add_scale", "tree_allclose", "tree_batch_shape",
    "tree_bias_correction", "tree_cast", "tree_cast_like", "tree_clip", "tree_conj",
    "tree_div", "tree_dtype", "tree_full_like", "tree_get", "tree_get_all_with_path",
    "tree_map_params", "tree_max", "tree_min", "tree_mul", "tree_norm", "tree_ones_like",
    "tree_random_like", "tree_real", "tree_scale", "tree_set", "tree_size",
    "tree_split_key_like", "tree_sub", "tree_sum", "tree_unwrap_random_key_data",
    "tree_update_infinity_moment", "tree_update_moment", "tree_update_moment_per_elem_norm",
    "tree_vdot", "tree_where", "tree_zeros_like",
]


def _is_none(x):
    return x is None


# ---------------------------------------------------------------------------------------------
# Arithmetic


def tree_add(tree_x: Any, tree_y: Any, *other_trees: Any) -> Any:
    """`x + y (+ ...)` leaf by leaf.

    Example:
        >>> tree_add({'a': fnp.ones(2)}, {'a': fnp.ones(2)})
        {'a': Array([2., 2.], dtype=float32)}
    """
    return tree_map(lambda *leaves: sum(leaves), tree_x, tree_y, *other_trees)


def tree_sub(tree_x: Any, tree_y: Any) -> Any:
    """`x - y` leaf by leaf."""
    return tree_map(operator.sub, tree_x, tree_y)


def tree_mul(tree_x: Any, tree_y: Any) -> Any:
    """`x * y` leaf by leaf."""
    return tree_map(operator.mul, tree_x, tree_y)


def tree_div(tree_x: Any, tree_y: Any) -> Any:
    """`x / y` leaf by leaf."""
    return tree_map(operator.truediv, tree_x, tree_y)


def tree_scale(scalar, tree: Any) -> Any:
    """`scalar * x` for every leaf."""
    return tree_map(lambda x: scalar * x, tree)


def tree_add_scale(tree_x: Any, scalar, tree_y: Any) -> Any:
    """`x + scalar * y` leaf by leaf (None leaves of `x` stay None).

    Example:
        >>> tree_add_scale({'a': fnp.ones(2)}, 0.5, {'a': fnp.ones(2)})
        {'a': Array([1.5, 1.5], dtype=float32)}
    """
    scalar = fnp.asarray(scalar)
    return tree_map(lambda x, y: None if x is None else x + scalar * y, tree_x, tree_y,
                    is_leaf=_is_none)


def _vdot(a, b):
    a, b = fnp.asarray(a), fnp.asarray(b)
    if a.shape != b.shape:
        raise FuncgradValueError(f"tree_vdot: leaves of shapes {a.shape} and {b.shape}")
    if fnp.iscomplexobj(a):
        a = fnp.conj(a)
    return fnp.sum(a * b)


def tree_vdot(tree_x: Any, tree_y: Any):
    """The inner product `sum(conj(x) * y)` over all leaves (a scalar).

    Example:
        >>> float(tree_vdot({'a': fnp.ones(3)}, {'a': fnp.full(3, 2.0)}))
        6.0
    """
    return tree_reduce(operator.add, tree_map(_vdot, tree_x, tree_y), initializer=0)


def tree_sum(tree: Any, associative_reduction: bool = False):
    """The sum of every element of every leaf.

    `associative_reduction` is accepted for optax compatibility; the order of the sum is
    that of the leaves either way.
    """
    return tree_reduce(operator.add, tree_map(fnp.sum, tree), initializer=0)


def tree_max(tree: Any):
    """The largest element over all leaves (`-inf` for an empty tree)."""
    maxes = [fnp.max(x) for x in tree_leaves(tree) if fnp.size(x)]
    return functools.reduce(fnp.maximum, maxes, -float("inf"))


def tree_min(tree: Any):
    """The smallest element over all leaves (`inf` for an empty tree)."""
    mins = [fnp.min(x) for x in tree_leaves(tree) if fnp.size(x)]
    return functools.reduce(fnp.minimum, mins, float("inf"))


def tree_size(tree: Any) -> int:
    """The number of elements over all leaves."""
    return sum(int(fnp.size(leaf)) for leaf in tree_leaves(tree))


def tree_conj(tree: Any) -> Any:
    """The complex conjugate of every leaf."""
    return tree_map(fnp.conj, tree)


def tree_real(tree: Any) -> Any:
    """The real part of every leaf."""
    return tree_map(fnp.real, tree)


def _square(leaf):
    return fnp.square(fnp.real(leaf)) + fnp.square(fnp.imag(leaf))


def tree_norm(tree: Any, ord=None, squared: bool = False):  # noqa: A002
    """The norm of all leaves seen as one vector: `ord` None or 2 (Euclidean), 1 or `inf`.

    Example:
        >>> float(tree_norm({'a': fnp.array([3.0]), 'b': fnp.array([4.0])}))
        5.0
    """
    if ord is None or ord == 2:
        sqnorm = tree_sum(tree_map(_square, tree))
        return fnp.asarray(sqnorm if squared else fnp.sqrt(sqnorm))
    if ord == 1:
        ret = tree_sum(tree_map(fnp.abs, tree))
    elif ord == float("inf") or ord in ("inf", "infinity"):
        ret = tree_max(tree_map(fnp.abs, tree))
    else:
        raise FuncgradValueError(f"tree_norm: unsupported ord {ord!r} (use None, 1, 2 or inf)")
    return fnp.asarray(ret if not squared else _square(fnp.asarray(ret)))


def tree_batch_shape(tree: Any, shape: tuple[int, ...] = ()):
    """Every leaf broadcast to `shape + leaf.shape`."""
    return tree_map(lambda x: fnp.broadcast_to(x, (*shape, *fnp.shape(x))), tree)


def tree_zeros_like(tree: Any, dtype=None) -> Any:
    """Zeros shaped like every leaf (of `dtype` when given)."""
    return tree_map(lambda x: fnp.zeros_like(x, dtype=dtype), tree)


def tree_ones_like(tree: Any, dtype=None) -> Any:
    """Ones shaped like every leaf (of `dtype` when given)."""
    return tree_map(lambda x: fnp.ones_like(x, dtype=dtype), tree)


def tree_full_like(tree: Any, fill_value, dtype=None) -> Any:
    """`fill_value` shaped like every leaf (of `dtype` when given)."""
    return tree_map(lambda x: fnp.full_like(x, fill_value, dtype=dtype), tree)


def tree_clip(tree: Any, min_value=None, max_value=None) -> Any:
    """Every leaf clipped to `[min_value, max_value]`."""
    return tree_map(lambda g: fnp.clip(g, min_value, max_value), tree)


def tree_where(condition, tree_x, tree_y):
    """`where(condition, x, y)` leaf by leaf, for one scalar or broadcastable condition."""
    return tree_map(lambda x, y: fnp.where(condition, x, y), tree_x, tree_y)


def tree_allclose(a: Any, b: Any, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """Whether every pair of leaves is `allclose`."""
    leaves = tree_leaves(tree_map(
        lambda x, y: fnp.allclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan), a, b))
    return functools.reduce(operator.and_, leaves, True)


# ---------------------------------------------------------------------------------------------
# Moments


def tree_update_moment(updates, moments, decay, order):
    """The exponential moving average `(1 - decay) * g**order + decay * m` leaf by leaf.

    The sum is written with the old moment first (the same bits: addition commutes), so
    that under `jit` the new moment can reuse the old one's buffer.

    Example:
        >>> tree_update_moment({'a': fnp.ones(1)}, {'a': fnp.zeros(1)}, 0.9, 1)
        {'a': Array([0.1], dtype=float32)}
    """
    return tree_map(lambda g, t: None if g is None else decay * t + (1 - decay) * (g ** order),
                    updates, moments, is_leaf=_is_none)


def tree_update_infinity_moment(updates, moments, decay, eps):
    """`max(|g| + eps, decay * m)` leaf by leaf (Adamax's infinity norm)."""
    return tree_map(lambda g, t: None if g is None else fnp.maximum(fnp.abs(g) + eps, decay * t),
                    updates, moments, is_leaf=_is_none)


def _orderth_norm(g, order):
    if fnp.isrealobj(g):
        return g ** order
    half_order = order / 2
    if float(half_order).is_integer():
        half_order = int(half_order)
    return abs_sq(g) ** half_order


def tree_update_moment_per_elem_norm(updates, moments, decay, order):
    """The moving average of `|g|**order`: `(1 - decay) * |g|**order + decay * m`."""
    return tree_map(
        lambda g, t: None if g is None else decay * t + (1 - decay) * _orderth_norm(g, order),
        updates, moments, is_leaf=_is_none)


def tree_bias_correction(moment, decay, count):
    """`m / (1 - decay**count)` leaf by leaf (Adam's bias correction).

    The correction is computed in float32 (or the count's float dtype), then cast to each
    leaf's dtype, so a bfloat16 moment stays bfloat16.
    """
    count = fnp.asarray(count)
    if not fnp.issubdtype(count.dtype, fnp.floating):
        count = count.astype(fnp.float32)
    correction = 1 - decay ** count
    return tree_map(lambda t: t / correction.astype(t.dtype), moment)


# ---------------------------------------------------------------------------------------------
# Casting


def tree_cast(tree: Any, dtype) -> Any:
    """Every leaf cast to `dtype` (the tree itself when `dtype` is None)."""
    if dtype is None:
        return tree
    return tree_map(lambda t: t.astype(dtype), tree)


def tree_cast_like(tree: Any, other_tree: Any) -> Any:
    """Every leaf cast to the dtype of the matching leaf of `other_tree`."""
    return tree_map(lambda t, o: t.astype(o.dtype) if hasattr(o, "dtype") else t,
                    tree, other_tree)


def _lower_dtype(a, b):
    promoted = fnp.promote_types(a, b)
    if promoted == a:
        return b
    if promoted == b:
        return a
    raise FuncgradValueError(f"tree_dtype: neither of {a} and {b} promotes to the other")


def _higher_dtype(a, b):
    return b if _lower_dtype(a, b) == a else a


def tree_dtype(tree: Any, mixed_dtype_handler: str | None = None):
    """The dtype of the leaves: the common one (an error if they differ), or with
    `mixed_dtype_handler` "promote", "highest" or "lowest" one computed from them all.

    Example:
        >>> tree_dtype({'a': fnp.ones(2), 'b': fnp.zeros(1)})
        dtype('float32')
    """
    dtypes = [fnp.asarray(x).dtype for x in tree_leaves(tree)]
    if not dtypes:
        return np.dtype(np.float32)
    if mixed_dtype_handler is None:
        paths = tree_leaves(tree_map_with_path(
            lambda p, x: None if fnp.asarray(x).dtype == dtypes[0] else p, tree))
        if paths:
            raise FuncgradValueError(
                f"tree_dtype: expected dtype {dtypes[0]} for every leaf, but {paths[0]} has "
                f"another; pass mixed_dtype_handler='promote', 'highest' or 'lowest'")
        return dtypes[0]
    combine = {"promote": fnp.promote_types, "highest": _higher_dtype,
               "lowest": _lower_dtype}.get(mixed_dtype_handler)
    if combine is None:
        raise FuncgradValueError(
            f"tree_dtype: invalid mixed_dtype_handler={mixed_dtype_handler!r}; possible values "
            "are None, 'promote', 'highest', 'lowest'")
    return functools.reduce(combine, dtypes)


# ---------------------------------------------------------------------------------------------
# Random


def tree_split_key_like(rng_key, target_tree: Any) -> Any:
    """One key per leaf of `target_tree`, split from `rng_key`, in its structure."""
    treedef = tree_structure(target_tree)
    keys = random.split(rng_key, treedef.num_leaves)
    return treedef.unflatten([keys[i] for i in range(treedef.num_leaves)])


def tree_random_like(rng_key, target_tree: Any, sampler=random.normal, dtype=None) -> Any:
    """A random tree shaped like `target_tree`: `sampler(key, leaf.shape, dtype)` per leaf
    with independent keys.

    Example:
        >>> noise = tree_random_like(random.PRNGKey(0), {'w': fnp.zeros((2, 3))})
    """
    keys = tree_split_key_like(rng_key, target_tree)
    return tree_map(lambda leaf, key: sampler(key, leaf.shape, dtype or leaf.dtype),
                    target_tree, keys)


def tree_unwrap_random_key_data(input_tree: Any) -> Any:
    """Typed random keys replaced by their raw `uint32` data (other leaves unchanged).

    funcgrad's keys are raw `uint32[2]` arrays, so every leaf comes back unchanged unless
    it is a typed key.
    """
    def unwrap(x):
        if "key" in str(getattr(x, "dtype", "")):
            return random.key_data(x)
        return x
    return tree_map(unwrap, input_tree)
