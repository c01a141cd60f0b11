"""funcgrad.numpy.linalg: numpy.linalg's names (and the array API's linalg extension).

Decompositions are the primitives of `funcgrad.lax.linalg` (cholesky, qr, svd, eigh, lu,
triangular_solve); everything else is built from them: solve via LU and two triangular
solves, inv via solve, det/slogdet via LU with the pivots' sign, lstsq/pinv/matrix_rank/cond
via SVD. Every function batches over leading axes as NumPy does, and differentiates through
its primitives. Singular matrices give inf/NaN (as in JAX), never an exception. The
products stay top-level `funcgrad.numpy` functions (`products.py`); norms are in
`linalg_norms.py`.
"""

import sys
from typing import NamedTuple

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Array
from funcgrad.custom_derivatives import custom_jvp
from funcgrad.lax import linalg_decomp as decomp
from funcgrad.lax import linalg_eig
from funcgrad.numpy import creation, logic, reductions
from funcgrad.numpy import math as m
from funcgrad.numpy import shape as _shape_module  # noqa: F401  (loads it)
from funcgrad.numpy._util import asarray_operand, broadcast_shapes, dtype_of, shape_of
from funcgrad.numpy.linalg_norms import cond, matrix_norm, norm, vector_norm
from funcgrad.numpy.products import dot, matmul, tensordot, vecdot  # noqa: F401  (dot: methods)
from funcgrad.numpy.products import outer as _outer

sh = sys.modules["funcgrad.numpy.shape"]  # the module: funcgrad.numpy.shape is also fnp.shape()

__all__ = ["EigResult", "EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cond",
           "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
           "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot",
           "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot",
           "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm"]


class EigResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    Q: Array
    R: Array


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


def _matrix(name, a, square=False):
    """`a` as an inexact (..., M, N) array; errors name `name` and the shape."""
    a = asarray_operand(name, a)
    if dtypes.kind(dtype_of(a)) not in "fc":
        a = lax.convert_element_type(a, dtypes.to_inexact(dtype_of(a)))
    s = shape_of(a)
    if len(s) < 2:
        raise errors.op_error(name, f"expects a matrix or a stack of matrices (..., M, N), got "
                              f"shape {s}", cls=errors.FuncgradValueError)
    if square and s[-1] != s[-2]:
        raise errors.op_error(name, f"expects square matrices (..., N, N), got shape {s}",
                              cls=errors.FuncgradValueError,
                              hint="lstsq and pinv accept non-square matrices")
    return a


def _H(x):
    return sh.matrix_transpose(m.conjugate(x) if dtypes.kind(dtype_of(x)) == "c" else x)


def _eye_like(a):
    s = shape_of(a)
    return sh.broadcast_to(creation.eye(s[-1], dtype=dtype_of(a)), s)


def _diag(x):
    return sh.diagonal(x, 0, -2, -1)


def _eps(a):
    return float(np.finfo(dtype_of(a)).eps)


# --- decompositions ---------------------------------------------------------------------------
def cholesky(a, *, upper=False, symmetrize_input=True):
    """Cholesky factor of Hermitian positive-definite (stacks of) matrices.

    Returns `L` with `a = L @ L^H` (or upper `U = L^H` with `upper=True`). A matrix that is not
    positive definite gives NaN entries (as in JAX; NumPy raises). The input is symmetrized,
    `(a + a^H) / 2`, as in JAX, so gradients are symmetric; with `symmetrize_input=False`
    only its lower triangle is read.

    Example:
        >>> fnp.linalg.cholesky(fnp.array([[4.0, 2.0], [2.0, 5.0]]))
        Array([[2., 0.], [1., 2.]], dtype=float32)
    """
    low = decomp.cholesky(_matrix("cholesky", a, square=True),
                          symmetrize_input=symmetrize_input)
    return _H(low) if upper else low


def qr(a, mode="reduced"):
    """QR decomposition: `QRResult(Q, R)` for modes 'reduced' and 'complete', `R` for 'r'.

    Example:
        >>> fnp.linalg.qr(fnp.ones((3, 2))).Q.shape
        (3, 2)
    """
    if mode not in ("reduced", "complete", "r"):
        raise errors.op_error("qr", f"mode must be 'reduced', 'complete' or 'r', got "
                              f"{errors.short_repr(mode)}", cls=errors.FuncgradValueError,
                              hint="mode='raw' (LAPACK's Householder form) is not supported")
    q, r = decomp.qr(_matrix("qr", a), full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def _uplo(name, UPLO):
    if UPLO not in ("L", "U"):
        raise errors.op_error(name, f"UPLO must be 'L' or 'U', got {errors.short_repr(UPLO)}",
                              cls=errors.FuncgradValueError)
    return UPLO == "L"


def eigh(a, UPLO=None, symmetrize_input=True):
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices: `EighResult(w, v)`.

    Reads the `UPLO` triangle ("L", the default, or "U") when `symmetrize_input=False`; by
    default it uses `(a + a^H) / 2`, as JAX does. Derivatives of the eigenvectors need
    distinct eigenvalues.

    Example:
        >>> fnp.linalg.eigh(fnp.array([[2.0, 0.0], [0.0, 1.0]])).eigenvalues
        Array([1., 2.], dtype=float32)
    """
    lower = _uplo("eigh", "L" if UPLO is None else UPLO)
    v, w = decomp.eigh(_matrix("eigh", a, square=True), lower=lower,
                       symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    """Eigenvalues (ascending) of Hermitian matrices (`symmetrize_input` as in `eigh`).

    Example:
        >>> fnp.linalg.eigvalsh(fnp.array([[2.0, 1.0], [1.0, 2.0]]))
        Array([1., 3.], dtype=float32)
    """
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def eig(a):
    """Eigenvalues and right eigenvectors of general square matrices: `EigResult(w, v)`,
    complex whatever the input (as in JAX; NumPy returns real arrays when it can).

    Eigenvectors have unit norm and their largest component real and positive.
    Differentiable where the eigenvalues are distinct. CPU only (a GPU runs it on the CPU).

    Example:
        >>> fnp.linalg.eig(fnp.array([[2.0, 0.0], [0.0, 1.0]])).eigenvalues
        Array([2.+0.j, 1.+0.j], dtype=complex64)
    """
    w, v = linalg_eig.eig(_matrix("eig", a, square=True), compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a):
    """Eigenvalues of general square matrices (complex, as in JAX).

    Example:
        >>> fnp.linalg.eigvals(fnp.array([[0.0, 1.0], [-1.0, 0.0]]))
        Array([0.+1.j, 0.-1.j], dtype=complex64)
    """
    return linalg_eig.eig(_matrix("eigvals", a, square=True), compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    """Singular value decomposition: `SVDResult(U, S, Vh)` with `a = U @ diag(S) @ Vh`, or
    `S` alone (descending).

    `hermitian` is accepted for NumPy compatibility; the general SVD is always used.
    `subset_by_index=(start, end)` keeps the singular triplets `start:end` (with
    `full_matrices=False`; see `lax.linalg.svd`). Derivatives of `U`, `Vh` need distinct
    singular values and `full_matrices=False` for non-square matrices (as in JAX).

    Example:
        >>> fnp.linalg.svd(fnp.array([[3.0, 0.0], [0.0, 4.0]]), compute_uv=False)
        Array([4., 3.], dtype=float32)
    """
    a = _matrix("svd", a)
    if not compute_uv:
        return decomp.svd(a, full_matrices=full_matrices and subset_by_index is None,
                          compute_uv=False, subset_by_index=subset_by_index)
    return SVDResult(*decomp.svd(a, full_matrices=full_matrices,
                                 subset_by_index=subset_by_index))


def svdvals(x, /):
    """Singular values (descending) of (a stack of) matrices.

    Example:
        >>> fnp.linalg.svdvals(fnp.eye(2))
        Array([1., 1.], dtype=float32)
    """
    return decomp.svd(_matrix("svdvals", x), compute_uv=False)


# --- solve, inv, det --------------------------------------------------------------------------
def _permute_rows(perm, b, inverse=False):
    """`b[..., perm, :]` (or the inverse permutation) as a product with the permutation
    matrix: batched, differentiable."""
    p = decomp._permutation_matrix(perm, dtype_of(b))
    return decomp._mm(sh.matrix_transpose(p) if inverse else p, b)


def _lu_solve(lu, perm, b, trans=0):
    """Solve `a x = b` (trans 0), `a^T x = b` (1) or `a^H x = b` (2) from `lu(a)`; `b` is
    (..., M, K) with `lu`'s batch shape."""
    tri = decomp.triangular_solve
    if trans == 0:
        y = tri(lu, _permute_rows(perm, b), left_side=True, lower=True, unit_diagonal=True)
        return tri(lu, y, left_side=True, lower=False)
    conj = trans == 2
    y = tri(lu, b, left_side=True, lower=False, transpose_a=True, conjugate_a=conj)
    x = tri(lu, y, left_side=True, lower=True, transpose_a=True, conjugate_a=conj,
            unit_diagonal=True)
    return _permute_rows(perm, x, inverse=True)  # a = P^T L U: a^T x = U^T L^T P x


def _solve_operands(name, a, b):
    """`a` (..., M, M) and `b` as (..., M, K) with one broadcast batch shape; and whether `b`
    was a vector (NumPy 2: only a 1-D `b` is a vector)."""
    a = _matrix(name, a, square=True)
    b = asarray_operand(name, b)
    dt = dtypes.promote_types((dtype_of(a), False), (dtype_of(b), False))[0]
    dt = dtypes.to_inexact(dt)
    a, b = (x if dtype_of(x) == dt else lax.convert_element_type(x, dt) for x in (a, b))
    sa, sb = shape_of(a), shape_of(b)
    vector = len(sb) == 1
    if vector:
        b = lax.reshape(b, sb + (1,))
    sb = shape_of(b)
    if len(sb) < 2 or sb[-2] != sa[-1]:
        raise errors.op_error(name, f"b must have shape (M,) or (..., M, K) for a of shape "
                              f"(..., M, M) = {sa}, got b of shape {sb[:1] if vector else sb}",
                              cls=errors.FuncgradValueError)
    batch = broadcast_shapes(name, sa[:-2], sb[:-2])
    return sh.broadcast_to(a, batch + sa[-2:]), sh.broadcast_to(b, batch + sb[-2:]), vector


def solve(a, b):
    """Solve `a @ x = b` for square (stacks of) `a`; `b` is (M,) or (..., M, K) (NumPy 2).

    Uses LU with partial pivoting. A singular `a` gives inf/NaN entries (as in JAX; NumPy
    raises LinAlgError).

    Example:
        >>> fnp.linalg.solve(fnp.array([[2.0, 0.0], [0.0, 4.0]]), fnp.array([2.0, 2.0]))
        Array([1. , 0.5], dtype=float32)
    """
    a, b, vector = _solve_operands("solve", a, b)
    lu, _, perm = decomp.lu(a)
    x = _lu_solve(lu, perm, b)
    return lax.reshape(x, shape_of(x)[:-1]) if vector else x


def inv(a):
    """Inverse of square (stacks of) matrices; singular ones give inf/NaN entries.

    Example:
        >>> fnp.linalg.inv(fnp.array([[2.0, 0.0], [0.0, 4.0]]))
        Array([[0.5 , 0.  ], [0.  , 0.25]], dtype=float32)
    """
    a = _matrix("inv", a, square=True)
    return solve(a, _eye_like(a))


def _lu_parts(name, a):
    """LU of square `a`: (diagonal of U, -1/+1 sign of the row permutation)."""
    a = _matrix(name, a, square=True)
    lu, piv, _ = decomp.lu(a)
    n = shape_of(a)[-1]
    swaps = reductions.sum(logic.not_equal(piv, creation.arange(n, dtype=dtype_of(piv))),
                           axis=-1)
    parity = lax.convert_element_type(m.remainder(swaps, 2), dtype_of(a))
    sign = m.subtract(m._scalar_like(parity, 1), m.multiply(m._scalar_like(parity, 2), parity))
    return _diag(lu), sign


def det(a):
    """Determinant of square (stacks of) matrices, via LU.

    Example:
        >>> fnp.linalg.det(fnp.array([[2.0, 1.0], [1.0, 3.0]]))
        Array(5., dtype=float32)
    """
    d, sign = _lu_parts("det", a)
    return m.multiply(sign, reductions.prod(d, axis=-1))


def slogdet(a, *, method=None):
    """Sign and log of the absolute determinant: `SlogdetResult(sign, logabsdet)`.

    A singular matrix gives sign 0 and logabsdet -inf, as in NumPy. `method` is "lu" (the
    default) or "qr" (real matrices: the diagonal of R, the sign of det Q), as in JAX.

    Example:
        >>> fnp.linalg.slogdet(fnp.array([[2.0, 0.0], [0.0, 3.0]])).logabsdet
        Array(1.7917595, dtype=float32)
    """
    if method == "qr":
        return _slogdet_qr(a)
    if method not in (None, "lu"):
        raise errors.op_error("slogdet", f"unknown method {errors.short_repr(method)}",
                              cls=errors.FuncgradValueError, hint="use 'lu' or 'qr'")
    d, sign = _lu_parts("slogdet", a)
    mag = m.abs(d)
    logabsdet = reductions.sum(m.log(mag), axis=-1)
    if dtypes.kind(dtype_of(d)) == "c":
        zero = logic.equal(mag, m._scalar_like(mag, 0))
        unit = logic.where(zero, m._scalar_like(d, 0), m.true_divide(d, mag))
    else:
        unit = m.sign(d)
    return SlogdetResult(m.multiply(sign, reductions.prod(unit, axis=-1)), logabsdet)


def _slogdet_qr(a):
    a = _matrix("slogdet", a, square=True)
    if dtypes.kind(dtype_of(a)) == "c":
        raise errors.op_error("slogdet", "method='qr' is not implemented for complex inputs "
                              "(as in JAX)", cls=errors.FuncgradNotImplementedError,
                              hint="use method='lu'")
    q, r = decomp.qr(a)
    d = _diag(r)
    q_diag, q_sign = _lu_parts("slogdet", lax.stop_gradient(q))  # det Q is +1 or -1
    sign = m.multiply(m.multiply(q_sign, reductions.prod(m.sign(q_diag), axis=-1)),
                      reductions.prod(m.sign(d), axis=-1))
    return SlogdetResult(sign, reductions.sum(m.log(m.abs(d)), axis=-1))


# --- least squares, pseudo-inverse, rank ------------------------------------------------------
def _cutoff_inverse(s, cutoff):
    """1/s where s > cutoff (broadcast), else 0, with no division by a dropped value."""
    keep = logic.greater(s, cutoff)
    safe = logic.where(keep, s, m._scalar_like(s, 1))
    return logic.where(keep, m.true_divide(m._scalar_like(s, 1), safe), m._scalar_like(s, 0))


def _per_matrix(value, s):
    """A scalar or per-matrix (batch-shaped) tolerance, broadcast against s (..., k)."""
    if isinstance(value, (int, float, np.integer, np.floating)):
        return m._scalar_like(s, value)
    value = asarray_operand("tolerance", value)
    return sh.expand_dims(lax.convert_element_type(value, dtype_of(s)), -1)


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """Least-squares solution of `a @ x = b` for 2-D `a` (M, N): `(x, residuals, rank, s)`.

    Via the SVD; singular values below `rcond * max(s)` (default `eps * max(M, N)`) are
    dropped. As in JAX, `residuals` (the squared 2-norm of `b - a @ x` per column) is always
    returned, where NumPy returns an empty array when the rank is below N or M <= N; with
    `numpy_resid=True` it is NumPy's (the rank must then be concrete: not under `jit`).

    Example:
        >>> x, res, rank, s = fnp.linalg.lstsq(fnp.array([[2.0, 0.0], [0.0, 4.0]]),
        ...                                    fnp.array([2.0, 2.0]))
        >>> x
        Array([1. , 0.5], dtype=float32)
    """
    a = _matrix("lstsq", a)
    b = asarray_operand("lstsq", b)
    if dtype_of(b) != dtype_of(a):
        b = lax.convert_element_type(b, dtype_of(a))
    sa, sb = shape_of(a), shape_of(b)
    if len(sa) != 2 or len(sb) not in (1, 2) or sb[0] != sa[0]:
        raise errors.op_error("lstsq", f"expects a of shape (M, N) and b of shape (M,) or "
                              f"(M, K), got {sa} and {sb}", cls=errors.FuncgradValueError)
    b2 = lax.reshape(b, sb + (1,)) if len(sb) == 1 else b
    u, s, vh = decomp.svd(a, full_matrices=False)
    rcond = _eps(a) * max(sa) if rcond is None or rcond < 0 else rcond
    cutoff = m.multiply(m._scalar_like(s, rcond), reductions.max(s, initial=0.0)
                        if 0 in sa else reductions.max(s))
    inv_s = lax.convert_element_type(_cutoff_inverse(s, cutoff), dtype_of(a))
    x = matmul(_H(vh), m.multiply(sh.expand_dims(inv_s, -1), matmul(_H(u), b2)))
    resid = reductions.sum(m.square(m.abs(m.subtract(b2, matmul(a, x)))), axis=0)
    rank = reductions.sum(logic.greater(s, cutoff))
    if numpy_resid and (bool(rank < sa[1]) or sa[0] <= sa[1]):
        resid = creation.zeros((0,), dtype_of(resid))
    return (lax.reshape(x, shape_of(x)[:1]) if len(sb) == 1 else x), resid, rank, s


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """Moore-Penrose pseudo-inverse of (stacks of) matrices, via the SVD.

    Singular values at most `rtol * max(s)` are dropped; the default `rtol` is JAX's,
    `10 * max(M, N) * eps` (`rcond` is NumPy's older name). `hermitian` is accepted and
    ignored. The derivative is JAX's (Golub and Pereyra), defined wherever the rank does
    not change, rank-deficient matrices included.

    Example:
        >>> fnp.linalg.pinv(fnp.array([[2.0, 0.0], [0.0, 0.0]]))
        Array([[0.5, 0. ], [0. , 0. ]], dtype=float32)
    """
    a = _matrix("pinv", a)
    rtol = rcond if rtol is None else rtol
    sa = shape_of(a)
    if rtol is None:
        rtol = 10 * max(sa[-2:]) * _eps(a)
    if 0 in sa[-2:]:
        return sh.matrix_transpose(a)
    return _pinv(a, rtol)


def _pinv_impl(a, rtol):
    u, s, vh = decomp.svd(a, full_matrices=False)
    cutoff = m.multiply(_per_matrix(rtol, s), reductions.max(s, axis=-1, keepdims=True))
    inv_s = lax.convert_element_type(_cutoff_inverse(s, cutoff), dtype_of(a))
    return matmul(m.multiply(_H(vh), sh.expand_dims(inv_s, -2)), _H(u))


def _pinv_jvp(rtol, primals, tangents):
    # Golub & Pereyra (1973), as JAX: dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P
    (a,), (da,) = primals, tangents
    p = _pinv(a, rtol)
    ph, dah = _H(p), _H(da)
    eye_m = _eye_like(matmul(a, p))
    eye_n = _eye_like(matmul(p, a))
    out = m.negative(matmul(matmul(p, da), p))
    out = m.add(out, matmul(matmul(matmul(p, ph), dah), m.subtract(eye_m, matmul(a, p))))
    out = m.add(out, matmul(matmul(m.subtract(eye_n, matmul(p, a)), dah), matmul(ph, p)))
    return p, out


_pinv = custom_jvp(_pinv_impl, nondiff_argnums=(1,))
_pinv.defjvp(_pinv_jvp)


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):
    """Number of singular values above `rtol * max(s)` (default `rtol`: `max(M, N) * eps`),
    or above the absolute `tol` (NumPy's older argument; only one of the two may be given).
    `rtol` is relative as JAX's and NumPy's docs say (JAX 0.10.2's code compares the singular
    values with `rtol` itself).

    Example:
        >>> fnp.linalg.matrix_rank(fnp.array([[1.0, 2.0], [2.0, 4.0]]))
        Array(1, dtype=int32)
    """
    if tol is not None and rtol is not None:
        raise errors.op_error("matrix_rank", "only one of tol or rtol may be specified",
                              cls=errors.FuncgradValueError)
    A = asarray_operand("matrix_rank", M)
    if len(shape_of(A)) < 2:
        return lax.convert_element_type(reductions.any(logic.not_equal(A, 0)), np.int32)
    A = _matrix("matrix_rank", A)
    s = decomp.svd(A, compute_uv=False)
    if tol is None:
        rtol = max(shape_of(A)[-2:]) * _eps(A) if rtol is None else rtol
        tol = m.multiply(reductions.max(s, axis=-1, keepdims=True), _per_matrix(rtol, s))
    else:
        tol = _per_matrix(tol, s)
    return reductions.sum(logic.greater(s, tol), axis=-1)


# --- powers and products ----------------------------------------------------------------------
def matrix_power(a, n):
    """`a` raised to the integer power `n` by repeated squaring (`n < 0` inverts first).

    Example:
        >>> fnp.linalg.matrix_power(fnp.array([[1.0, 1.0], [0.0, 1.0]]), 3)
        Array([[1., 3.], [0., 1.]], dtype=float32)
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise errors.op_error("matrix_power", f"the exponent must be an integer, got "
                              f"{errors.short_repr(n)}")
    a = asarray_operand("matrix_power", a)
    s = shape_of(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise errors.op_error("matrix_power", f"expects square matrices (..., N, N), got "
                              f"shape {s}", cls=errors.FuncgradValueError)
    n = int(n)
    if n == 0:
        return sh.broadcast_to(creation.eye(s[-1], dtype=dtype_of(a)), s)
    if n < 0:
        a, n = inv(a), -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else matmul(result, a)
        n >>= 1
        if n:
            a = matmul(a, a)
    return result


def multi_dot(arrays, *, precision=None):
    """Product of several matrices in the cheapest order (NumPy's dynamic programme); the
    first may be 1-D (a row) and the last 1-D (a column).

    Example:
        >>> fnp.linalg.multi_dot([fnp.ones(3), fnp.ones((3, 4)), fnp.ones(4)])
        Array(12., dtype=float32)
    """
    arrays = [asarray_operand("multi_dot", x) for x in arrays]
    if len(arrays) < 2:
        raise errors.op_error("multi_dot", f"expects at least two arrays, got {len(arrays)}",
                              cls=errors.FuncgradValueError)
    first, last = len(shape_of(arrays[0])) == 1, len(shape_of(arrays[-1])) == 1
    if first:
        arrays[0] = sh.expand_dims(arrays[0], 0)
    if last:
        arrays[-1] = sh.expand_dims(arrays[-1], -1)
    if any(len(shape_of(x)) != 2 for x in arrays):
        raise errors.op_error("multi_dot", f"expects 2-D arrays (the first and last may be "
                              f"1-D), got shapes {[shape_of(x) for x in arrays]}",
                              cls=errors.FuncgradValueError)
    out = _chain(arrays, _chain_order([shape_of(x) for x in arrays]), 0, len(arrays) - 1,
                 precision)
    if first:
        out = lax.reshape(out, shape_of(out)[1:])
    if last:
        out = lax.reshape(out, shape_of(out)[:-1])
    return out


def _chain_order(shapes):
    """split[i][j]: where the cheapest product of arrays i..j splits (matrix-chain order)."""
    dims = [s[0] for s in shapes] + [shapes[-1][1]]
    n = len(shapes)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(arrays, split, i, j, precision):
    if i == j:
        return arrays[i]
    k = split[i][j]
    return matmul(_chain(arrays, split, i, k, precision),
                  _chain(arrays, split, k + 1, j, precision), precision=precision)


def tensorsolve(a, b, axes=None):
    """Solve `tensordot(a, x, x.ndim) = b` for `x` (NumPy's tensorsolve).

    Example:
        >>> fnp.linalg.tensorsolve(fnp.eye(6).reshape(2, 3, 6), fnp.ones((2, 3))).shape
        (6,)
    """
    a, b = asarray_operand("tensorsolve", a), asarray_operand("tensorsolve", b)
    nd = len(shape_of(a))
    if axes is not None:
        axes = [ax % nd for ax in axes]
        a = sh.moveaxis(a, axes, list(range(nd - len(axes), nd)))
    sa, sb = shape_of(a), shape_of(b)
    x_shape = sa[len(sb):]
    size = int(np.prod(x_shape, dtype=np.int64))
    if sa[:len(sb)] != sb or int(np.prod(sb, dtype=np.int64)) != size:
        raise errors.op_error("tensorsolve", f"a of shape {sa} must be b.shape + x.shape with "
                              f"prod(x.shape) == prod(b.shape), got b of shape {sb}",
                              cls=errors.FuncgradValueError)
    x = solve(sh.reshape(a, (size, size)), sh.reshape(b, (size,)))
    return sh.reshape(x, x_shape)


def tensorinv(a, ind=2):
    """Inverse of `a` with respect to `tensordot(..., ind)` (NumPy's tensorinv).

    Example:
        >>> fnp.linalg.tensorinv(fnp.eye(4).reshape(4, 2, 2), ind=1).shape
        (2, 2, 4)
    """
    a = asarray_operand("tensorinv", a)
    s = shape_of(a)
    if not isinstance(ind, (int, np.integer)) or ind <= 0:
        raise errors.op_error("tensorinv", f"ind must be a positive integer, got "
                              f"{errors.short_repr(ind)}", cls=errors.FuncgradValueError)
    out_shape = s[ind:] + s[:ind]
    rows = int(np.prod(s[:ind], dtype=np.int64))
    if rows != int(np.prod(s[ind:], dtype=np.int64)):
        raise errors.op_error("tensorinv", f"prod(a.shape[:ind]) must equal "
                              f"prod(a.shape[ind:]), got shape {s} with ind={ind}",
                              cls=errors.FuncgradValueError)
    return sh.reshape(inv(sh.reshape(a, (rows, rows))), out_shape)


# --- the array API's linalg extension ---------------------------------------------------------
def cross(x1, x2, /, *, axis=-1):
    """Cross product of 3-vectors along `axis` (broadcasting the other axes).

    Example:
        >>> fnp.linalg.cross(fnp.array([1.0, 0.0, 0.0]), fnp.array([0.0, 1.0, 0.0]))
        Array([0., 0., 1.], dtype=float32)
    """
    x1, x2 = asarray_operand("cross", x1), asarray_operand("cross", x2)
    s1, s2 = shape_of(x1), shape_of(x2)
    try:
        n1, n2 = s1[axis], s2[axis]
    except IndexError:
        n1 = n2 = None
    if n1 != 3 or n2 != 3:
        raise errors.op_error("cross", f"axis {axis} must have size 3 in both operands, got "
                              f"shapes {s1} and {s2}", cls=errors.FuncgradValueError)
    a = _components(x1, axis)
    b = _components(x2, axis)
    parts = [m.subtract(m.multiply(a[1], b[2]), m.multiply(a[2], b[1])),
             m.subtract(m.multiply(a[2], b[0]), m.multiply(a[0], b[2])),
             m.subtract(m.multiply(a[0], b[1]), m.multiply(a[1], b[0]))]
    out = sh.stack(parts, axis=-1)
    return sh.moveaxis(out, -1, axis) if axis != -1 else out


def _components(x, axis):
    x = sh.moveaxis(x, axis, -1)
    return [sh.squeeze(sh.split(x, 3, axis=-1)[i], -1) for i in range(3)]


def diagonal(x, /, *, offset=0):
    """Diagonals of the last two axes (the array API's `linalg.diagonal`).

    Example:
        >>> fnp.linalg.diagonal(fnp.eye(2))
        Array([1., 1.], dtype=float32)
    """
    return sh.diagonal(x, offset, -2, -1)


def matrix_transpose(x, /):
    """Swap the last two axes.

    Example:
        >>> fnp.linalg.matrix_transpose(fnp.ones((2, 3))).shape
        (3, 2)
    """
    return sh.matrix_transpose(x)


def trace(x, /, *, offset=0, dtype=None):
    """Sum of the diagonals of the last two axes (the array API's `linalg.trace`).

    Example:
        >>> fnp.linalg.trace(fnp.eye(3))
        Array(3., dtype=float32)
    """
    return sh.trace(x, offset, -2, -1, dtype=dtype)


def outer(x1, x2, /):
    """Outer product of two 1-D arrays (the array API's `linalg.outer`).

    Example:
        >>> fnp.linalg.outer(fnp.ones(2), fnp.ones(3)).shape
        (2, 3)
    """
    x1, x2 = asarray_operand("outer", x1), asarray_operand("outer", x2)
    if len(shape_of(x1)) != 1 or len(shape_of(x2)) != 1:
        raise errors.op_error("outer", f"expects 1-D operands, got shapes {shape_of(x1)} and "
                              f"{shape_of(x2)}", cls=errors.FuncgradValueError)
    return _outer(x1, x2)


def _install_boundaries():
    """Every public function behind `errors.api_boundary`, named `numpy.linalg.<name>`."""
    import inspect
    ns = globals()
    for name in __all__:
        if inspect.isfunction(ns[name]):
            ns[name] = errors.api_boundary(ns[name], f"numpy.linalg.{name}")


_install_boundaries()
