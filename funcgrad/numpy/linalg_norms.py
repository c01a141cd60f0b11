"""Norms of funcgrad.numpy.linalg: `norm` (every NumPy order), `vector_norm`, `matrix_norm`
and `cond`. Singular-value orders (2, -2, 'nuc') use `lax.linalg.svd`.

Imports only funcgrad.lax and sibling funcgrad.numpy modules; `linalg.py` re-exports these.
"""

import sys

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.lax import linalg_decomp
from funcgrad.numpy import math as m
from funcgrad.numpy import reductions as r
from funcgrad.numpy import shape as _shape_module  # noqa: F401  (loads it)
from funcgrad.numpy._util import asarray_operand, canonical_axes, canonical_axis, dtype_of, shape_of

sh = sys.modules["funcgrad.numpy.shape"]  # the module: funcgrad.numpy.shape is also fnp.shape()

__all__ = ["cond", "matrix_norm", "norm", "vector_norm"]


def _inexact(name, x):
    x = asarray_operand(name, x)
    if dtypes.kind(dtype_of(x)) not in "fc":
        x = lax.convert_element_type(x, dtypes.to_inexact(dtype_of(x)))
    return x


def _abs2(x):
    if dtypes.kind(dtype_of(x)) == "c":
        return lax.real(lax.mul(x, lax.conj(x)))
    return lax.mul(x, x)


def _drop_axes(x, axes, keepdims):
    return x if keepdims else lax.reshape(x, tuple(
        d for i, d in enumerate(shape_of(x)) if i not in axes))


def svdvals_of(x):
    """Singular values of the last two axes of `x` (descending)."""
    return linalg_decomp.svd(x, compute_uv=False)


# --- norm -------------------------------------------------------------------------------------
def norm(x, ord=None, axis=None, keepdims=False):
    """Vector or matrix norm (`numpy.linalg.norm`).

    Vector norms (1-D input or an int `axis`): ord None/2, 1, inf, -inf, 0 and any other p.
    Matrix norms (2-D input or a 2-tuple `axis`): None/'fro', 'nuc', 1, -1, 2, -2, inf, -inf.

    Raises:
        FuncgradValueError: for an order that is not a norm of the input's rank.

    Example:
        >>> fnp.linalg.norm(fnp.array([3.0, 4.0]))
        Array(5., dtype=float32)
    """
    x = _inexact("norm", x)
    nd = len(shape_of(x))
    if axis is None and ord is None:
        return m.sqrt(r.sum(_abs2(x), axis=None, keepdims=keepdims))
    axes = canonical_axes("norm", axis, nd) if axis is not None else tuple(range(nd))
    if isinstance(axis, (int, np.integer)) or (axis is None and nd == 1) or len(axes) == 1:
        return _vector_norm(x, ord, axes, keepdims)
    if len(axes) != 2:
        raise errors.op_error("norm", f"improper number of dimensions to norm: axis={axis} for "
                              f"shape {shape_of(x)}", cls=errors.FuncgradValueError)
    row, col = (canonical_axis("norm", a, nd) for a in (axis if axis is not None else (0, 1)))
    if row == col:
        raise errors.op_error("norm", f"duplicate axes given: axis={axis}",
                              cls=errors.FuncgradValueError)
    return _matrix_norm(x, ord, row, col, keepdims)


def _vector_norm(x, ord, ax, keepdims):
    if ord is None or ord == 2:
        return m.sqrt(r.sum(_abs2(x), axis=ax, keepdims=keepdims))
    if isinstance(ord, str):
        raise errors.op_error("norm", f"invalid norm order {errors.short_repr(ord)} for vectors",
                              cls=errors.FuncgradValueError, hint="use a number or inf")
    a = m.abs(x)
    if ord == np.inf:
        return r.max(a, axis=ax, keepdims=keepdims)
    if ord == -np.inf:
        return r.min(a, axis=ax, keepdims=keepdims)
    if ord == 0:
        return r.sum(lax.convert_element_type(lax.ne(a, m._scalar_like(a, 0)), dtype_of(a)),
                     axis=ax, keepdims=keepdims)
    if ord == 1:
        return r.sum(a, axis=ax, keepdims=keepdims)
    p = m._scalar_like(a, ord)
    return m.power(r.sum(m.power(a, p), axis=ax, keepdims=keepdims),
                   m.true_divide(m._scalar_like(a, 1), p))


def _matrix_norm(x, ord, row, col, keepdims):
    if ord in (None, "fro"):
        return m.sqrt(r.sum(_abs2(x), axis=(row, col), keepdims=keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        red, other = (row, col) if ord in (1, -1) else (col, row)
        s = r.sum(m.abs(x), axis=red, keepdims=True)
        pick = r.max if ord in (1, np.inf) else r.min
        return _drop_axes(pick(s, axis=other, keepdims=True), (row, col), keepdims)
    if ord in (2, -2, "nuc"):
        nd = len(shape_of(x))
        s = svdvals_of(sh.moveaxis(x, (row, col), (nd - 2, nd - 1)))
        out = {2: r.max, -2: r.min, "nuc": r.sum}[ord](s, axis=-1)
        if keepdims:
            out = lax.reshape(out, tuple(1 if i in (row, col) else d
                                         for i, d in enumerate(shape_of(x))))
        return out
    raise errors.op_error("norm", f"invalid norm order {errors.short_repr(ord)} for matrices",
                          cls=errors.FuncgradValueError,
                          hint="use None/'fro', 'nuc', 1, -1, 2, -2, inf or -inf")


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """Vector norm over `axis` (None: all axes, flattened), as the array API defines it.

    Example:
        >>> fnp.linalg.vector_norm(fnp.ones((2, 2)), ord=1)
        Array(4., dtype=float32)
    """
    x = _inexact("vector_norm", x)
    nd = len(shape_of(x))
    axes = canonical_axes("vector_norm", axis, nd)
    if ord in (None, 2) and axis is None:
        return m.sqrt(r.sum(_abs2(x), axis=None, keepdims=keepdims))
    return _vector_norm(x, ord, axes, keepdims)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Matrix norm of the last two axes (a stack of matrices), as the array API defines it.

    Example:
        >>> fnp.linalg.matrix_norm(fnp.eye(3), ord="nuc")
        Array(3., dtype=float32)
    """
    x = _inexact("matrix_norm", x)
    nd = len(shape_of(x))
    if nd < 2:
        raise errors.op_error("matrix_norm", f"expects a matrix or a stack of matrices, got "
                              f"shape {shape_of(x)}", cls=errors.FuncgradValueError)
    return _matrix_norm(x, ord, nd - 2, nd - 1, keepdims)


def cond(x, p=None):
    """Condition number of (a stack of) matrices in the norm `p` (None: the 2-norm, via SVD).

    Orders other than None/2/-2 need square matrices (they use `inv`); a singular matrix
    gives inf (or NaN), as in NumPy.

    Example:
        >>> fnp.linalg.cond(fnp.array([[2.0, 0.0], [0.0, 1.0]]))
        Array(2., dtype=float32)
    """
    from funcgrad.numpy.linalg import inv
    x = _inexact("cond", x)
    s = shape_of(x)
    if len(s) < 2:
        raise errors.op_error("cond", f"expects a matrix or a stack of matrices, got shape {s}",
                              cls=errors.FuncgradValueError)
    if p in (None, 2, -2):
        sv = svdvals_of(x)
        big, small = r.max(sv, axis=-1), r.min(sv, axis=-1)
        return m.true_divide(big, small) if p != -2 else m.true_divide(small, big)
    if s[-1] != s[-2]:
        raise errors.op_error("cond", f"p={errors.short_repr(p)} needs square matrices, got "
                              f"shape {s}",
                              cls=errors.FuncgradValueError, hint="use p=None (the 2-norm)")
    nd = len(s)
    return m.multiply(_matrix_norm(x, p, nd - 2, nd - 1, False),
                      _matrix_norm(inv(x), p, nd - 2, nd - 1, False))
