"""Reductions: reduce_sum/max/min/prod, argmax/argmin, cumulative reductions."""

import numpy as np

from funcgrad import errors
from funcgrad.core import Primitive, ShapedArray
from funcgrad.interpreters import ad, batching


def _check_axes(name, x, axes):
    if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
        raise errors.op_error(name, f"axes {axes} out of range for operand {x}",
                              cls=errors.FuncgradValueError)


def _reduced_aval(name, x, axes, dtype=None):
    _check_axes(name, x, axes)
    shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
    return ShapedArray(shape, dtype or x.dtype, x.weak_type)


# --- reduce_sum -------------------------------------------------------------------------------
def reduce_sum(x, axes):
    """Sum of `x` over `axes` (a tuple of distinct non-negative ints)."""
    return reduce_sum_p.bind(x, axes=tuple(int(a) for a in axes))


def _reduce_sum_transpose(ct, x, *, axes):
    from funcgrad.lax.shape import broadcast_in_dim
    shape = x.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [broadcast_in_dim(ct, shape, kept)]


reduce_sum_p = Primitive("reduce_sum")
reduce_sum_p.def_impl(lambda x, *, axes: np.sum(x, axis=axes, dtype=x.dtype))
reduce_sum_p.def_abstract_eval(lambda x, *, axes: _reduced_aval("reduce_sum", x, axes))
ad.deflinear(reduce_sum_p, _reduce_sum_transpose)
batching.defreducer(reduce_sum_p)
