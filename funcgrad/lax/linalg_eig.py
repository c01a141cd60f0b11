"""The general (non-symmetric) eigen-decomposition as a primitive: `eig`, as
`jax.lax.linalg.eig`.

Eigenvalues and eigenvectors are complex whatever the input's dtype (as in JAX); the eager
implementation is numpy's LAPACK `geev` (no GPU version: the CUDA backend runs it on the CPU
with a warning). Eigenvalues and right eigenvectors are differentiable. This module imports
only the core, the interpreters and other `funcgrad.lax` wrappers.
"""

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Primitive, ShapedArray, get_aval
from funcgrad.interpreters import ad
from funcgrad.lax import linalg_decomp as decomp

__all__ = ["eig", "eig_p"]


def eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
        enable_eigvec_derivs=False, implementation=None, use_magma=None):
    """Eigenvalues `w` and left/right eigenvectors of square (stacks of) matrices.

    Returns `[w]` plus `vl` (`vl^H x = w vl^H`) and `vr` (`x vr = vr w`) as requested, all
    complex, eigenvectors of unit norm with their largest component real and positive
    (LAPACK's convention, with the sign fixed so the result is continuous in `x`).
    Derivatives: of the eigenvalues, and of the right eigenvectors where the eigenvalues
    are distinct, whatever `enable_eigvec_derivs` says (JAX needs it True for them); not of
    the left eigenvectors. `implementation`: None or "lapack" (numpy's; as JAX on the CPU);
    `use_magma` (a GPU library choice in JAX) changes nothing.

    Example:
        >>> eig(fnp.array([[2.0, 0.0], [0.0, 1.0]]), compute_left_eigenvectors=False,
        ...     compute_right_eigenvectors=False)[0]
        Array([2.+0.j, 1.+0.j], dtype=complex64)
    """
    decomp.check_implementation("eig", "implementation", implementation, ("lapack",))
    return list(eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                           compute_right_eigenvectors=bool(compute_right_eigenvectors)))


def _complex_dtype(dt):
    return np.dtype(np.complex128) if dt.itemsize >= 8 and dtypes.kind(dt) == "f" or (
        dt == np.complex128) else np.dtype(np.complex64)


def _eig_abstract(x, *, compute_left_eigenvectors, compute_right_eigenvectors):
    decomp._check_matrix("eig", x, square=True)
    c = _complex_dtype(x.dtype)
    n_vectors = int(compute_left_eigenvectors) + int(compute_right_eigenvectors)
    return [ShapedArray(x.shape[:-1], c)] + [ShapedArray(x.shape, c)] * n_vectors


def _unit_columns(v):
    """Columns scaled to unit norm with their largest-magnitude component real and > 0."""
    v = v / np.linalg.norm(v, axis=-2, keepdims=True)
    big = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
    return v * (np.abs(big) / np.where(big == 0, 1, big))


def _eig_impl(x, *, compute_left_eigenvectors, compute_right_eigenvectors):
    c = _complex_dtype(x.dtype)
    x = x.astype(np.float32) if dtypes.kind(x.dtype) == "f" and x.dtype.itemsize < 4 else x

    def one(a):
        w, vr = np.linalg.eig(a)
        out = [w.astype(c)]
        if compute_left_eigenvectors:
            out.append(_unit_columns(np.conj(np.swapaxes(np.linalg.inv(vr), -1, -2))).astype(c))
        if compute_right_eigenvectors:
            out.append(_unit_columns(vr).astype(c))
        return out
    shapes = [(x.shape[:-1], c)] + [(x.shape, c)] * (
        int(compute_left_eigenvectors) + int(compute_right_eigenvectors))
    if x.size == 0:
        return [np.zeros(s, d) for s, d in shapes]
    with np.errstate(all="ignore"):
        try:
            return one(x)
        except np.linalg.LinAlgError:
            return decomp._each_matrix(one, x, shapes)


def _eig_jvp(primals, outs, tangents, *, compute_left_eigenvectors,
             compute_right_eigenvectors):
    if compute_left_eigenvectors:
        raise errors.op_error("eig", "the derivative of left eigenvectors is not defined here "
                              "(only eigenvalues and right eigenvectors)",
                              cls=errors.FuncgradValueError,
                              hint="use compute_left_eigenvectors=False")
    (x,), (dx,) = primals, tangents
    w, v = (outs if compute_right_eigenvectors else
            eig_p.bind(x, compute_left_eigenvectors=False, compute_right_eigenvectors=True))
    c = get_aval(v).dtype
    dx = lax.convert_element_type(ad.instantiate(dx), c)
    lu, _, perm = decomp.lu(v)  # M = V^-1 dA V: dw = diag(M)
    rhs = decomp._mm(decomp._permutation_matrix(perm, c), decomp._mm(dx, v))
    y = decomp.triangular_solve(lu, rhs, left_side=True, lower=True, unit_diagonal=True)
    m = decomp.triangular_solve(lu, y, left_side=True, lower=False)
    dw = decomp._diag(m)
    if not compute_right_eigenvectors:
        return [dw]
    return [dw, _eigenvector_tangent(w, v, m)]


def _eigenvector_tangent(w, v, m):
    # dV = V (F o M) + V diag(k), F_ij = 1 / (w_j - w_i) off the diagonal; k keeps LAPACK's
    # normalization: unit norm (Re v_i^H dv_i = 0), largest component real (Im dv_ki = 0)
    c, shape = get_aval(v).dtype, get_aval(v).shape
    nd = len(shape)
    wj = lax.broadcast_in_dim(w, shape, tuple(range(nd - 2)) + (nd - 1,))
    eye = decomp._eye(shape, c)
    f = lax.sub(lax.div(lax.full((), 1, c), lax.add(lax.sub(wj, decomp._T(wj)), eye)), eye)
    dv0 = decomp._mm(v, lax.mul(f, m))
    along = lax.reduce_sum(lax.mul(lax.conj(v), dv0), (nd - 2,))
    mag = lax.abs(v)
    top = lax.eq(mag, lax.broadcast_in_dim(lax.reduce_max(mag, (nd - 2,)), shape,
                                           tuple(range(nd - 2)) + (nd - 1,)))
    top = lax.convert_element_type(top, c)
    count = lax.reduce_sum(top, (nd - 2,))
    pick = lambda x: lax.div(lax.reduce_sum(lax.mul(top, x), (nd - 2,)), count)  # noqa: E731
    k_im = lax.neg(lax.div(lax.imag(pick(dv0)), lax.real(pick(v))))
    k = lax.complex(lax.neg(lax.real(along)), k_im)
    return lax.add(dv0, lax.mul(v, lax.broadcast_in_dim(k, shape, tuple(range(nd - 2)) + (
        nd - 1,))))


eig_p = Primitive("eig", multiple_results=True)
eig_p.def_impl(_eig_impl)
eig_p.def_abstract_eval(_eig_abstract)
ad.jvp_rules[eig_p] = _eig_jvp
decomp._batch_front(eig_p)
