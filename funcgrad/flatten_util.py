"""`ravel_pytree`: a pytree of arrays as one flat vector, and the function that undoes it.

As `jax.flatten_util`: the vector's dtype is the promotion of the leaves' dtypes (every leaf
converted to it); the inverse converts each piece back to its leaf's dtype. With a single
dtype the inverse keeps the dtype of the vector it is given. Built from `funcgrad.numpy`, so
both directions are differentiable and work under every transform.
"""

import functools
import itertools
import math

import funcgrad.numpy as fnp
from funcgrad import dtypes, errors
from funcgrad.core import get_aval
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree):
    """Concatenate the raveled leaves of `pytree` into one 1-D array.

    Args:
        pytree: a pytree of arrays and Python scalars.

    Returns:
        `(flat, unravel)`: `flat` has the promoted dtype of the leaves (float32 and length
        0 for a tree without leaves); `unravel(flat)` rebuilds the tree, each leaf with its
        shape and dtype.

    Example:
        >>> flat, unravel = ravel_pytree({"w": fnp.ones((2, 2)), "b": fnp.zeros(2)})
        >>> flat
        Array([0., 0., 1., 1., 1., 1.], dtype=float32)
        >>> unravel(flat)["w"].shape
        (2, 2)
    """
    leaves, treedef = tree_flatten(pytree)
    flat, unravel_list = _ravel_list(leaves)
    return flat, functools.partial(_unravel_pytree, treedef, unravel_list)


def _unravel_pytree(treedef, unravel_list, flat):
    return tree_unflatten(treedef, unravel_list(flat))


def _ravel_list(leaves):
    if not leaves:
        return fnp.zeros(0, fnp.float32), lambda flat: []
    avals = [get_aval(fnp.asarray(x)) for x in leaves]
    from_dtypes = tuple(a.dtype for a in avals)
    to_dtype = dtypes.result_type(*from_dtypes)
    sizes = tuple(math.prod(a.shape) for a in avals)
    shapes = tuple(a.shape for a in avals)
    flat = fnp.concatenate([fnp.ravel(fnp.asarray(x).astype(to_dtype)) for x in leaves])
    if all(d == to_dtype for d in from_dtypes):  # the inverse keeps the vector's dtype
        return flat, functools.partial(_unravel_list, sizes, shapes, None, None)
    return flat, functools.partial(_unravel_list, sizes, shapes, from_dtypes, to_dtype)


def _unravel_list(sizes, shapes, from_dtypes, to_dtype, flat):
    aval = get_aval(flat)
    if aval.shape != (sum(sizes),):
        raise errors.FuncgradValueError(
            f"unravel: expected a 1-D array of {sum(sizes)} elements (the raveled pytree), "
            f"got {aval.str_short()}\n{errors.where()}")
    if to_dtype is not None and aval.dtype != to_dtype:
        raise errors.FuncgradTypeError(f"unravel function given array of dtype {aval.dtype}, "
                                       f"but expected dtype {to_dtype}\n{errors.where()}")
    chunks = fnp.split(flat, list(itertools.accumulate(sizes))[:-1])
    out = [c.reshape(s) for c, s in zip(chunks, shapes)]
    if from_dtypes is None:
        return out
    return [c.astype(d) for c, d in zip(out, from_dtypes)]

