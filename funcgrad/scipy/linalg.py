"""funcgrad.scipy.linalg: SciPy's linear algebra names on funcgrad arrays, as `jax.scipy.linalg`.

Built on `funcgrad.lax.linalg`'s primitives (cholesky, triangular_solve, lu, qr, eigh, svd)
and `funcgrad.numpy`; every function differentiates, batches and jits through them. Where
SciPy reads one triangle (`cholesky`, `eigh`, `cho_factor`), so do these (the matrix is
rebuilt from that triangle first, so derivatives are those of the function SciPy computes).
`overwrite_*` and `check_finite` are accepted and ignored, as in JAX.
"""

import sys

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import concrete_value, is_concrete
from funcgrad.core.array import host_value
from funcgrad.lax import linalg_decomp as decomp
from funcgrad.numpy import creation, logic, reductions
from funcgrad.numpy import linalg as la
from funcgrad.numpy import math as m
from funcgrad.numpy import shape as _shape_module  # noqa: F401  (loads it)
from funcgrad.numpy._util import asarray_operand, dtype_of, shape_of
from funcgrad.numpy.products import matmul
from funcgrad.scipy import linalg_functions, linalg_special
from funcgrad.scipy.linalg_functions import *  # noqa: F403
from funcgrad.scipy.linalg_special import *  # noqa: F403

sh = sys.modules["funcgrad.numpy.shape"]  # the module: funcgrad.numpy.shape is also fnp.shape()

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "inv",
           "lu", "lu_factor", "lu_solve", "qr", "solve", "solve_triangular", "svd",
           *linalg_special.__all__,  # the long tail (issue 28): special matrices and
           *linalg_functions.__all__]  # matrix functions


def _square(name, a):
    return la._matrix(name, a, square=True)


def _from_triangle(a, lower):
    """The Hermitian matrix whose `lower` (or upper) triangle is that of `a`."""
    tri = decomp._tri(a, 0, lower)
    strict = decomp._tri(a, -1 if lower else 1, lower)
    return m.add(tri, la._H(strict))


def _rhs(name, a, b):
    """`a` (..., N, N) and `b` as (..., N, K) with `a`'s batch shape; whether `b` was 1-D."""
    return la._solve_operands(name, a, b)


def _vector_out(x, vector):
    return lax.reshape(x, shape_of(x)[:-1]) if vector else x


# --- Cholesky ---------------------------------------------------------------------------------
def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """Cholesky factor of a Hermitian positive-definite matrix: upper `U` (`a = U^H U`) by
    default, as in SciPy, or lower `L` with `lower=True`. Only that triangle of `a` is read;
    a matrix that is not positive definite gives NaN entries.

    Example:
        >>> funcgrad.scipy.linalg.cholesky(fnp.array([[4.0, 2.0], [2.0, 5.0]]))
        Array([[2., 1.], [0., 2.]], dtype=float32)
    """
    a = _square("cholesky", a)
    low = decomp.cholesky(_from_triangle(a, lower), symmetrize_input=False)
    return low if lower else la._H(low)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """`(c, lower)` for `cho_solve`: `c` is `cholesky(a, lower)` (zeros off its triangle).

    Example:
        >>> c, low = funcgrad.scipy.linalg.cho_factor(fnp.eye(2)); low
        False
    """
    return cholesky(a, lower=lower), bool(lower)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solve `a x = b` from `cho_factor(a)`'s `(c, lower)`.

    Example:
        >>> funcgrad.scipy.linalg.cho_solve((2 * fnp.eye(2), True), fnp.ones(2))
        Array([0.25, 0.25], dtype=float32)
    """
    try:
        c, lower = c_and_lower
    except (TypeError, ValueError):
        raise errors.op_error("cho_solve", "the first argument must be the pair (c, lower) "
                              "that cho_factor returns") from None
    c, b, vector = _rhs("cho_solve", c, b)
    tri = decomp.triangular_solve
    if lower:  # L L^H x = b
        y = tri(c, b, left_side=True, lower=True)
        x = tri(c, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)
    else:  # U^H U x = b
        y = tri(c, b, left_side=True, lower=False, transpose_a=True, conjugate_a=True)
        x = tri(c, y, left_side=True, lower=False)
    return _vector_out(x, vector)


# --- triangular solves ------------------------------------------------------------------------
_TRANS = {0: 0, "N": 0, 1: 1, "T": 1, 2: 2, "C": 2}


def _trans(name, trans):
    if trans not in _TRANS or isinstance(trans, bool):
        raise errors.op_error(name, f"trans must be 0/'N', 1/'T' or 2/'C', got "
                              f"{errors.short_repr(trans)}", cls=errors.FuncgradValueError)
    return _TRANS[trans]


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """Solve `op(a) x = b` for triangular `a` (`op`: none, transpose, conjugate transpose).

    A zero on the diagonal gives inf/NaN entries, not an exception. `overwrite_b`, `debug`
    and `check_finite` are accepted and unused, as in JAX.

    Example:
        >>> funcgrad.scipy.linalg.solve_triangular(fnp.array([[2.0, 1.0], [0.0, 1.0]]),
        ...                                        fnp.array([3.0, 1.0]))
        Array([1., 1.], dtype=float32)
    """
    t = _trans("solve_triangular", trans)
    a, b, vector = _rhs("solve_triangular", a, b)
    x = decomp.triangular_solve(a, b, left_side=True, lower=bool(lower), transpose_a=t > 0,
                                conjugate_a=t == 2, unit_diagonal=bool(unit_diagonal))
    return _vector_out(x, vector)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen", *, transposed=False):
    """Solve `a x = b` (`a^T x = b` with `transposed`) for square `a`.

    `assume_a`: 'gen'/'sym'/'her' (LU with partial pivoting of the whole matrix, as in JAX),
    'pos' (Cholesky of the `lower` triangle), 'diagonal', 'upper triangular' or 'lower
    triangular'. A singular `a` gives inf/NaN entries. `overwrite_*`, `debug` and
    `check_finite` are accepted and unused, as in JAX; `transposed` is SciPy's.

    Example:
        >>> funcgrad.scipy.linalg.solve(fnp.array([[2.0, 0.0], [0.0, 4.0]]), fnp.ones(2),
        ...                             assume_a="pos")
        Array([0.5 , 0.25], dtype=float32)
    """
    kinds = {"gen": "gen", "general": "gen", "sym": "gen", "symmetric": "gen", "her": "gen",
             "hermitian": "gen", "pos": "pos", "positive definite": "pos",
             "diagonal": "diagonal", "upper triangular": "upper", "lower triangular": "lower"}
    if assume_a not in kinds:
        raise errors.op_error("solve", f"assume_a must be one of {sorted(kinds)}, got "
                              f"{errors.short_repr(assume_a)}", cls=errors.FuncgradValueError)
    kind = kinds[assume_a]
    a, b, vector = _rhs("solve", a, b)
    if transposed:
        a = sh.matrix_transpose(a)
    if kind == "gen":
        lu_, _, perm = decomp.lu(a)
        x = la._lu_solve(lu_, perm, b)
    elif kind == "pos":
        x = cho_solve(cho_factor(a, lower=lower), b)
    elif kind == "diagonal":
        x = m.true_divide(b, sh.expand_dims(la._diag(a), -1))
    else:
        x = decomp.triangular_solve(a, b, left_side=True, lower=kind == "lower")
    return _vector_out(x, vector)


def inv(a, overwrite_a=False, check_finite=True):
    """Inverse of square (stacks of) matrices (`numpy.linalg.inv`); singular ones give
    inf/NaN entries.

    Example:
        >>> funcgrad.scipy.linalg.inv(2 * fnp.eye(2))
        Array([[0.5, 0. ], [0. , 0.5]], dtype=float32)
    """
    return la.inv(a)


def det(a, overwrite_a=False, check_finite=True):
    """Determinant of square (stacks of) matrices, via LU.

    Example:
        >>> funcgrad.scipy.linalg.det(2 * fnp.eye(2))
        Array(4., dtype=float32)
    """
    return la.det(a)


# --- LU ---------------------------------------------------------------------------------------
def lu_factor(a, overwrite_a=False, check_finite=True):
    """`(lu, piv)`: LU with partial pivoting in LAPACK's compact form; `piv[i]` is the row
    swapped with row `i` (from 0). A singular matrix gives a zero on U's diagonal.

    Example:
        >>> funcgrad.scipy.linalg.lu_factor(fnp.array([[1.0, 2.0], [3.0, 4.0]]))[1]
        Array([1, 1], dtype=int32)
    """
    lu_, piv, _ = decomp.lu(la._matrix("lu_factor", a))
    return lu_, piv


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Solve `a x = b` (`trans`: 0, 1 for `a^T`, 2 for `a^H`) from `lu_factor(a)`.

    Example:
        >>> f = funcgrad.scipy.linalg.lu_factor(fnp.array([[2.0, 0.0], [0.0, 4.0]]))
        >>> funcgrad.scipy.linalg.lu_solve(f, fnp.ones(2))
        Array([0.5 , 0.25], dtype=float32)
    """
    t = _trans("lu_solve", trans)
    try:
        lu_, piv = lu_and_piv
    except (TypeError, ValueError):
        raise errors.op_error("lu_solve", "the first argument must be the pair (lu, piv) that "
                              "lu_factor returns") from None
    lu_, b, vector = _rhs("lu_solve", lu_, b)
    perm = decomp.lu_pivots_to_permutation(asarray_operand("lu_solve", piv), shape_of(lu_)[-1])
    perm = sh.broadcast_to(perm, shape_of(lu_)[:-1])
    return _vector_out(la._lu_solve(lu_, perm, b, t), vector)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """`(p, l, u)` with `a = p @ l @ u` (or `(p @ l, u)` with `permute_l`) for (..., M, N)
    matrices: `l` is (..., M, K) unit lower, `u` (..., K, N) upper, K = min(M, N).

    Example:
        >>> p, l, u = funcgrad.scipy.linalg.lu(fnp.array([[1.0, 2.0], [3.0, 4.0]])); p
        Array([[0., 1.], [1., 0.]], dtype=float32)
    """
    a = la._matrix("lu", a)
    lu_, _, perm = decomp.lu(a)
    *batch, mm, n = shape_of(a)
    k = min(mm, n)
    lower = lax.slice(lu_, (0,) * (len(batch) + 2), tuple(batch) + (mm, k))
    lower = m.add(decomp._tri(lower, -1), decomp._eye(tuple(batch) + (mm, k), dtype_of(a)))
    upper = decomp._tri(lax.slice(lu_, (0,) * (len(batch) + 2), tuple(batch) + (k, n)),
                        lower=False)
    p = sh.matrix_transpose(decomp._permutation_matrix(perm, dtype_of(a)))
    return (matmul(p, lower), upper) if permute_l else (p, lower, upper)


# --- QR, SVD, eigh ----------------------------------------------------------------------------
def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """QR decomposition: `(q, r)` for modes 'full' and 'economic', `(r,)` for 'r' (SciPy's
    return layouts); with `pivoting`, the column order `p` follows (`a[:, p] = q @ r`, as
    `lax.linalg.qr`). Mode 'raw' is not supported.

    Example:
        >>> q, r = funcgrad.scipy.linalg.qr(fnp.ones((3, 2)), mode="economic"); q.shape
        (3, 2)
    """
    if mode not in ("full", "economic", "r") or not isinstance(pivoting, (bool, int,
                                                                         np.integer)):
        raise errors.op_error("qr", f"mode must be 'full', 'economic' or 'r' and pivoting a "
                              f"bool, got mode={errors.short_repr(mode)}, pivoting="
                              f"{errors.short_repr(pivoting)}",
                              cls=errors.FuncgradValueError)
    q, r, *p = decomp.qr(la._matrix("qr", a), pivoting=bool(pivoting),
                         full_matrices=mode != "economic")
    return (r, *p) if mode == "r" else (q, r, *p)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """`(U, s, Vh)` with `a = U @ diag(s) @ Vh`, or `s` alone (descending).

    Example:
        >>> funcgrad.scipy.linalg.svd(fnp.eye(2), compute_uv=False)
        Array([1., 1.], dtype=float32)
    """
    a = la._matrix("svd", a)
    if not compute_uv:
        return decomp.svd(a, compute_uv=False)
    return decomp.svd(a, full_matrices=full_matrices)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True, *, subset_by_index=None,
         subset_by_value=None, driver=None):
    """Eigenvalues `w` (ascending) and eigenvectors `v` of a Hermitian matrix, reading its
    `lower` (or upper) triangle: `(w, v)`, or `w` with `eigvals_only`. The generalized
    problem (`b`) and subsets are not supported.

    Example:
        >>> funcgrad.scipy.linalg.eigh(fnp.array([[2.0, 0.0], [0.0, 1.0]]), eigvals_only=True)
        Array([1., 2.], dtype=float32)
    """
    if b is not None or eigvals is not None or subset_by_index is not None or (
            subset_by_value is not None):
        raise errors.op_error("eigh", "the generalized problem (b) and eigenvalue subsets are "
                              "not supported", cls=errors.FuncgradValueError)
    a = _square("eigh", a)
    v, w = decomp.eigh(_from_triangle(a, lower), lower=bool(lower), symmetrize_input=False)
    return w if eigvals_only else (w, v)


# --- expm, block_diag -------------------------------------------------------------------------
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152


def expm(A, *, upper_triangular=False, max_squarings=16):
    """Matrix exponential of (stacks of) square matrices: Padé 13 with scaling and squaring
    (Higham 2005). Differentiable; under jit up to `max_squarings` squarings are applied,
    selected per matrix.

    Example:
        >>> funcgrad.scipy.linalg.expm(fnp.zeros((2, 2)))
        Array([[1., 0.], [0., 1.]], dtype=float32)
    """
    a = _square("expm", A)
    if 0 in shape_of(a):
        return a
    norm1 = reductions.max(reductions.sum(m.abs(a), axis=-2), axis=-1)
    ratio = m.true_divide(norm1, m._scalar_like(norm1, _THETA13))
    tiny = m._scalar_like(ratio, np.finfo(dtype_of(ratio)).tiny)
    s = m.maximum(m.ceil(m.log2(m.maximum(ratio, tiny))), m._scalar_like(ratio, 0))
    s = m.minimum(s, m._scalar_like(s, max_squarings))
    scale = sh.expand_dims(sh.expand_dims(m.power(m._scalar_like(s, 2), m.negative(s)), -1), -1)
    r = _pade13(m.multiply(a, lax.convert_element_type(scale, dtype_of(a))))
    rounds = int(np.max(host_value(concrete_value(s)))) if is_concrete(s) else max_squarings
    for i in range(rounds):
        again = sh.expand_dims(sh.expand_dims(logic.greater(s, m._scalar_like(s, i)), -1), -1)
        r = logic.where(again, matmul(r, r), r)
    return r


def _pade13(a):
    b = [m._scalar_like(a, c) for c in _PADE13]
    eye = la._eye_like(a)
    a2 = matmul(a, a)
    a4 = matmul(a2, a2)
    a6 = matmul(a4, a2)

    def comb(*terms):
        out = m.multiply(terms[0][0], terms[0][1])
        for c, x in terms[1:]:
            out = m.add(out, m.multiply(c, x))
        return out
    u = matmul(a, m.add(matmul(a6, comb((b[13], a6), (b[11], a4), (b[9], a2))),
                        comb((b[7], a6), (b[5], a4), (b[3], a2), (b[1], eye))))
    v = m.add(matmul(a6, comb((b[12], a6), (b[10], a4), (b[8], a2))),
              comb((b[6], a6), (b[4], a4), (b[2], a2), (b[0], eye)))
    return la.solve(m.subtract(v, u), m.add(v, u))


def block_diag(*arrs):
    """Block-diagonal matrix of the given blocks (0-D and 1-D blocks are rows, as in SciPy).

    Example:
        >>> funcgrad.scipy.linalg.block_diag(fnp.ones((1, 1)), 2 * fnp.ones((2, 2))).shape
        (3, 3)
    """
    if not arrs:
        return creation.zeros((1, 0))
    blocks = [asarray_operand("block_diag", x) for x in arrs]
    if any(len(shape_of(x)) > 2 for x in blocks):
        raise errors.op_error("block_diag", f"blocks must be at most 2-D, got shapes "
                              f"{[shape_of(x) for x in blocks]}", cls=errors.FuncgradValueError)
    blocks = [sh.reshape(x, (1, -1)) if len(shape_of(x)) < 2 else x for x in blocks]
    dt = dtypes.promote_types(*[(dtype_of(x), False) for x in blocks])[0]
    blocks = [x if dtype_of(x) == dt else lax.convert_element_type(x, dt) for x in blocks]
    cols = sum(shape_of(x)[1] for x in blocks)
    rows, left = [], 0
    for x in blocks:
        w = shape_of(x)[1]
        rows.append(lax.pad(x, lax.full((), 0, dt), [(0, 0, 0), (left, cols - left - w, 0)]))
        left += w
    return sh.concatenate(rows, axis=0)


def _install_boundaries():
    """Every public function behind `errors.api_boundary`, named `scipy.linalg.<name>`."""
    ns = globals()
    for name in __all__:
        ns[name] = errors.api_boundary(ns[name], f"scipy.linalg.{name}")


_install_boundaries()
