"""Matrix decompositions as primitives (`jax.lax.linalg`'s names): `cholesky`,
`triangular_solve`, `lu`, `qr`, `eigh`, `svd`.

Every primitive works on the last two axes and batches over the leading ones; the eager
implementation is numpy's LAPACK (LU and a failing triangular solve are vectorized over the
batch here, as numpy has no `getrf`/`trsm`). A matrix LAPACK rejects (not positive definite,
no convergence on NaN input) gives NaN entries, as JAX does, never an exception. Derivative
rules follow JAX's (`jax/_src/lax/linalg.py`); `eigh`/`svd` derivatives need distinct
eigen/singular values. The rules conjugate where JAX does so complex inputs work. This module
imports only the core, the interpreters and other `funcgrad.lax` wrappers.
"""

import enum

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Primitive, ShapedArray, get_aval
from funcgrad.interpreters import ad, batching
from funcgrad.lax.utils import static_int

__all__ = ["cholesky", "cholesky_p", "eigh", "eigh_p", "lu", "lu_p", "lu_pivots_to_permutation",
           "qr", "qr_p", "qr_pivots_p", "svd", "svd_p", "triangular_solve", "triangular_solve_p"]


# --- helpers (lax operations on the last two axes) ------------------------------------------
def _T(x):
    nd = get_aval(x).ndim
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _H(x):
    return lax.conj(_T(x)) if dtypes.kind(get_aval(x).dtype) == "c" else _T(x)


def check_implementation(name, what, choice, available):
    """Check JAX's choice of algorithm (`implementation=`, `algorithm=`): None, or an enum
    member (`lax.linalg.SvdAlgorithm.QR`) or string whose value names one of `available`
    (what JAX's CPU backend runs; funcgrad runs numpy's LAPACK, so the results do not depend
    on it). Anything else raises NotImplementedError, as JAX does on the CPU."""
    value = choice.value if isinstance(choice, enum.Enum) else choice
    if choice is None or (isinstance(value, str) and value.lower() in available):
        return
    raise errors.op_error(name, f"{what}={errors.short_repr(choice)} is not available "
                          f"(funcgrad computes with numpy's LAPACK; available: None, "
                          f"{', '.join(available)})", cls=errors.FuncgradNotImplementedError)


def _subset(name, subset_by_index, n):
    """`(start, end)` of JAX's `subset_by_index` in [0, n], or None."""
    if subset_by_index is None:
        return None
    start, end = (static_int(name, i, "subset_by_index") for i in subset_by_index)
    if not 0 <= start <= end <= n:
        raise errors.op_error(name, f"subset_by_index=({start}, {end}) must satisfy "
                              f"0 <= start <= end <= {n}", cls=errors.FuncgradValueError)
    return start, end


def _mm(a, b):
    """Batched matrix product of two operands of equal rank and equal batch shape."""
    nd = get_aval(a).ndim
    batch = tuple(range(nd - 2))
    return lax.dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _tri(x, k=0, lower=True):
    """tril(x, k) (lower) or triu(x, k) of the last two axes, by a select (no 0 * inf)."""
    aval = get_aval(x)
    rows = lax.broadcasted_iota(np.dtype(np.int32), aval.shape, aval.ndim - 2)
    cols = lax.broadcasted_iota(np.dtype(np.int32), aval.shape, aval.ndim - 1)
    rows = lax.add(rows, lax.full((), k, np.dtype(np.int32)))
    keep = lax.le(cols, rows) if lower else lax.ge(cols, rows)
    return lax.select_n(keep, lax.full(aval.shape, 0, aval.dtype), x)


def _eye(shape, dtype):
    """Identity matrices of `shape` (..., n, n), or (..., m, n) with ones on the diagonal."""
    nd = len(shape)
    rows = lax.broadcasted_iota(np.dtype(np.int32), shape, nd - 2)
    cols = lax.broadcasted_iota(np.dtype(np.int32), shape, nd - 1)
    return lax.convert_element_type(lax.eq(rows, cols), dtype)


def _diag(x):
    """The diagonal of the last two axes of a square `x` (..., n, n) -> (..., n)."""
    aval = get_aval(x)
    picked = lax.select_n(lax.convert_element_type(_eye(aval.shape, np.dtype(np.int32)),
                                                   np.dtype(bool)),
                          lax.full(aval.shape, 0, aval.dtype), x)
    return lax.reduce_sum(picked, (aval.ndim - 1,))


def _real_dtype(dt):
    return np.dtype(np.finfo(dt).dtype) if dtypes.kind(dt) == "c" else dt


def _check_matrix(op, x, square=False):
    if x.ndim < 2:
        raise errors.op_error(op, f"expects a matrix or a stack of matrices (rank >= 2), got "
                              f"{x}", cls=errors.FuncgradValueError,
                              hint="reshape a vector to (n, 1) or (1, n)")
    if square and x.shape[-1] != x.shape[-2]:
        raise errors.op_error(op, f"expects square matrices in the last two axes, got {x}",
                              cls=errors.FuncgradValueError)
    if dtypes.kind(x.dtype) not in "fc":
        raise errors.op_error(op, f"expects a floating-point or complex operand, got {x}",
                              hint="convert with .astype(float)")


def _symmetrize(x):
    return lax.div(lax.add(x, _H(x)), lax.full((), 2, get_aval(x).dtype))


def _each_matrix(fn, x, outs):
    """`fn` applied matrix by matrix where LAPACK rejected the whole batch: results of the
    matrices it rejects are NaN (`outs`: (shape, dtype) per result)."""
    n_batch = int(np.prod(x.shape[:-2], dtype=np.int64))
    mats = x.reshape((n_batch,) + x.shape[-2:])
    res = [np.full((n_batch,) + s[len(x.shape) - 2:], np.nan, d) for s, d in outs]
    for i in range(n_batch):
        try:
            got = fn(mats[i])
        except np.linalg.LinAlgError:
            continue
        for r, g in zip(res, got if isinstance(got, (tuple, list)) else [got]):
            r[i] = g
    return [r.reshape(s) for r, (s, _) in zip(res, outs)]


def _lapack(impl):
    """`impl` on LAPACK's dtypes: half-precision operands are computed in float32 (the bind
    casts the results back to the operand's dtype)."""
    def run(*xs, **params):
        xs = [x.astype(np.float32) if dtypes.kind(x.dtype) == "f" and x.dtype.itemsize < 4 else x
              for x in xs]
        return impl(*xs, **params)
    return run


def _batch_front(prim):
    """Batching of a primitive of one operand over its last two axes: batch axis first."""
    def rule(args, dims, **params):
        out = prim.bind(batching.moveaxis(args[0], dims[0], 0), **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    batching.batch_rules[prim] = rule


# --- cholesky ---------------------------------------------------------------------------------
def cholesky(x, *, symmetrize_input=True):
    """Lower Cholesky factor `L` of Hermitian positive-definite `x` (`x = L @ L^H`).

    Args:
        x: (..., n, n) float or complex matrices.
        symmetrize_input: use `(x + x^H) / 2` (so derivatives are symmetric), as JAX does.

    Returns:
        (..., n, n) lower-triangular factors; a matrix that is not positive definite gives
        NaN entries (as in JAX), not an exception.

    Example:
        >>> cholesky(fnp.array([[4.0, 2.0], [2.0, 5.0]]))
        Array([[2., 0.], [1., 2.]], dtype=float32)
    """
    if symmetrize_input:
        _check_matrix("cholesky", get_aval(x), square=True)
        x = _symmetrize(x)
    return cholesky_p.bind(x)


def _cholesky_abstract(x):
    _check_matrix("cholesky", x, square=True)
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _cholesky_impl(x):
    try:
        return np.linalg.cholesky(x)
    except np.linalg.LinAlgError:
        return _each_matrix(np.linalg.cholesky, x, [(x.shape, x.dtype)])[0]


def _cholesky_jvp(t, x, *, out):
    # Murray (2016), arXiv:1602.07527: dL = L phi(L^-1 dA L^-H), phi = tril with half diagonal
    L = out
    tmp = triangular_solve(L, t, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
    inner = triangular_solve(L, tmp, left_side=True, lower=True)
    half = lax.full((), 0.5, get_aval(t).dtype)
    phi = lax.sub(_tri(inner), lax.mul(half, lax.mul(inner, _eye(get_aval(t).shape,
                                                                 get_aval(t).dtype))))
    return _mm(L, phi)


cholesky_p = Primitive("cholesky")
cholesky_p.def_impl(_lapack(_cholesky_impl))
cholesky_p.def_abstract_eval(_cholesky_abstract)
ad.defjvp(cholesky_p, _cholesky_jvp)
_batch_front(cholesky_p)


# --- triangular_solve -------------------------------------------------------------------------
def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False,
                     conjugate_a=False, unit_diagonal=False):
    """Solve `op(a) @ x = b` (left_side) or `x @ op(a) = b` for triangular `a`.

    Only the triangle named by `lower` of `a` is read (its diagonal taken as ones with
    `unit_diagonal`); `op` transposes with `transpose_a` and conjugates with `conjugate_a`.
    Defaults are JAX's. A zero on the diagonal gives inf/NaN entries, not an exception.

    Args:
        a: (..., m, m) triangular matrices.
        b: (..., m, n) with `left_side`, else (..., n, m); batch axes equal to `a`'s.

    Example:
        >>> triangular_solve(fnp.array([[2.0, 0.0], [1.0, 1.0]]), fnp.ones((2, 1)),
        ...                  left_side=True, lower=True)
        Array([[0.5], [0.5]], dtype=float32)
    """
    return triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                   transpose_a=bool(transpose_a),
                                   conjugate_a=bool(conjugate_a),
                                   unit_diagonal=bool(unit_diagonal))


def _triangular_solve_abstract(a, b, *, left_side, **params):
    _check_matrix("triangular_solve", a, square=True)
    m = a.shape[-1]
    side = b.shape[-2] if left_side and b.ndim >= 2 else (b.shape[-1] if b.ndim else None)
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2] or side != m:
        want = "(..., m, n)" if left_side else "(..., n, m)"
        raise errors.op_error("triangular_solve", f"b must have the shape {want} with a's batch "
                              f"axes for a of shape (..., m, m), got a {a} and b {b} "
                              f"(left_side={left_side})")
    if a.dtype != b.dtype:
        raise errors.op_error("triangular_solve", f"a and b must have the same dtype, got a {a} "
                              f"and b {b}")
    return ShapedArray(b.shape, b.dtype, a.weak_type and b.weak_type)


def _substitute(a, b, lower):
    """Solve a x = b by forward (lower) or back substitution, vectorized over the batch."""
    x = np.zeros(b.shape, np.result_type(a, b))
    m = a.shape[-1]
    with np.errstate(all="ignore"):
        for i in range(m) if lower else range(m - 1, -1, -1):
            s = b[..., i, :] - np.einsum("...j,...jk->...k", a[..., i, :], x)
            x[..., i, :] = s / a[..., i, i, None]
    return x


def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    a = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        idx = np.arange(a.shape[-1])
        a[..., idx, idx] = 1
    a = a.conj() if conjugate_a else a
    lower = lower != transpose_a
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if not left_side:  # x op(a) = b  <=>  op(a)^T x^T = b^T
        a, b, lower = np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2), not lower
    if b.size == 0:
        x = np.zeros(b.shape, b.dtype)
    else:
        try:
            x = _blocked_solve(a, b, lower)
        except np.linalg.LinAlgError:
            x = _substitute(a, b, lower)
    return x if left_side else np.swapaxes(x, -1, -2)


def _blocked_solve(a, b, lower, block=64):
    """Solve triangular a x = b by halves: the diagonal blocks recursively (LAPACK below
    `block` rows), the off-diagonal block as one matrix product."""
    m = a.shape[-1]
    if m <= block:
        return np.linalg.solve(a, b)
    h = m // 2
    if lower:
        x1 = _blocked_solve(a[..., :h, :h], b[..., :h, :], lower, block)
        x2 = _blocked_solve(a[..., h:, h:], b[..., h:, :] - a[..., h:, :h] @ x1, lower, block)
    else:
        x2 = _blocked_solve(a[..., h:, h:], b[..., h:, :], lower, block)
        x1 = _blocked_solve(a[..., :h, :h], b[..., :h, :] - a[..., :h, h:] @ x2, lower, block)
    return np.concatenate([x1, x2], axis=-2)


def _triangular_solve_jvp_a(g_a, a, b, *, out, left_side, lower, transpose_a, conjugate_a,
                            unit_diagonal):
    k = 1 if unit_diagonal else 0
    g_a = lax.neg(_tri(g_a, -k, lower=True) if lower else _tri(g_a, k, lower=False))
    g_a = _T(g_a) if transpose_a else g_a
    g_a = lax.conj(g_a) if conjugate_a and dtypes.kind(get_aval(g_a).dtype) == "c" else g_a
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    # -A^-1 dA X (left) or -X dA A^-1 (right), in the cheaper order as JAX does
    m, n = get_aval(b).shape[-2:]
    if left_side:
        if m > n:
            return triangular_solve_p.bind(a, _mm(g_a, out), **params)
        return _mm(triangular_solve_p.bind(a, g_a, **params), out)
    if m < n:
        return triangular_solve_p.bind(a, _mm(out, g_a), **params)
    return _mm(out, triangular_solve_p.bind(a, g_a, **params))


def _triangular_solve_transpose(ct, a, b, *, transpose_a, **params):
    if ad.is_undefined(a):
        raise errors.FuncgradInternalError("triangular_solve is not linear in a")
    ct_b = triangular_solve_p.bind(a, ad.instantiate(ct), transpose_a=not transpose_a, **params)
    return [None, ct_b]


def _triangular_solve_batch(args, dims, **params):
    size = batching.batch_size(args, dims)
    a, b = (batching.bdim_at_front(x, d, size) for x, d in zip(args, dims))
    return triangular_solve_p.bind(a, b, **params), 0


triangular_solve_p = Primitive("triangular_solve")
triangular_solve_p.def_impl(_lapack(_triangular_solve_impl))
triangular_solve_p.def_abstract_eval(_triangular_solve_abstract)
ad.defjvp(triangular_solve_p, _triangular_solve_jvp_a,
          lambda g_b, a, b, *, out, **p: triangular_solve_p.bind(a, g_b, **p))
ad.transpose_rules[triangular_solve_p] = _triangular_solve_transpose
batching.batch_rules[triangular_solve_p] = _triangular_solve_batch


# --- lu ---------------------------------------------------------------------------------------
def lu(x):
    """LU decomposition with partial pivoting: `(lu, pivots, permutation)` as in JAX.

    `x[..., permutation, :] = L @ U` with `L` the unit lower triangle of `lu` and `U` its upper
    triangle; `pivots[i]` is the row swapped with row `i` at step `i` (LAPACK's `ipiv`, from
    0). A singular matrix gives a zero on `U`'s diagonal (solves with it give inf/NaN).

    Args:
        x: (..., m, n) float or complex matrices.

    Returns:
        `lu` (..., m, n), `pivots` int32 (..., min(m, n)), `permutation` int32 (..., m).

    Example:
        >>> lu(fnp.array([[1.0, 2.0], [3.0, 4.0]]))[2]
        Array([1, 0], dtype=int32)
    """
    return tuple(lu_p.bind(x))


def _lu_abstract(x):
    _check_matrix("lu", x)
    m, n = x.shape[-2:]
    i32 = np.dtype(np.int32)
    return [ShapedArray(x.shape, x.dtype, x.weak_type),
            ShapedArray(x.shape[:-2] + (min(m, n),), i32), ShapedArray(x.shape[:-2] + (m,), i32)]


_LU_BLOCK = 32


def _lu_impl(x, xp=np):
    """Partial pivoting LU, vectorized over the batch: LAPACK's right-looking blocked
    algorithm (a column loop inside each panel, then a triangular solve and one matrix
    product for the rest). `xp` is numpy or an array module with its API (CuPy)."""
    *batch, m, n = x.shape
    k = min(m, n)
    a = xp.array(x, copy=True).reshape(int(np.prod(batch, dtype=np.int64)), m, n)
    perm = xp.tile(xp.arange(m, dtype=np.int32), (a.shape[0], 1))
    piv = xp.zeros((a.shape[0], k), np.int32)
    rows = xp.arange(a.shape[0])
    with np.errstate(all="ignore"):
        for j0 in range(0, k, _LU_BLOCK):
            j1 = min(j0 + _LU_BLOCK, k)
            for j in range(j0, j1):
                p = j + xp.argmax(xp.abs(a[:, j:, j]), axis=1)
                piv[:, j] = p
                a[rows, j], a[rows, p] = a[rows, p], a[rows, j].copy()
                perm[rows, j], perm[rows, p] = perm[rows, p], perm[rows, j].copy()
                pivot = a[:, j, j]
                a[:, j + 1:, j] /= xp.where(pivot == 0, 1, pivot)[:, None]  # as LAPACK: 0 stays
                a[:, j + 1:, j + 1:j1] -= a[:, j + 1:, j, None] * a[:, j, None, j + 1:j1]
            if j1 < n:  # U12 = L11^-1 A12, A22 -= L21 U12
                l11 = xp.tril(a[:, j0:j1, j0:j1], -1) + xp.eye(j1 - j0, dtype=a.dtype)
                a[:, j0:j1, j1:] = xp.linalg.solve(l11, a[:, j0:j1, j1:])
                if j1 < m:
                    a[:, j1:, j1:] -= xp.matmul(a[:, j1:, j0:j1], a[:, j0:j1, j1:])
    return [a.reshape(x.shape), piv.reshape(tuple(batch) + (k,)),
            perm.reshape(tuple(batch) + (m,))]


def _permutation_matrix(perm, dtype):
    """P with P[..., i, j] = (perm[..., i] == j), so that P @ x = x[..., perm, :]."""
    shape = get_aval(perm).shape
    full = shape + (shape[-1],)
    rows = lax.broadcast_in_dim(perm, full, tuple(range(len(shape))))
    return lax.convert_element_type(
        lax.eq(rows, lax.broadcasted_iota(np.dtype(np.int32), full, len(shape))), dtype)


def _lu_jvp(primals, outs, tangents):
    # de Hoog, Anderssen, Lukas: L^-1 P dA U^-1 = dL' + dU', split by triangle
    (a_dot,), (lu_, piv, perm) = tangents, outs
    if type(a_dot) is ad.Zero:
        return [ad.Zero(get_aval(o)) for o in outs]
    aval = get_aval(lu_)
    *batch, m, n = aval.shape
    k, nb, dt = min(m, n), len(batch), aval.dtype
    x = _mm(_permutation_matrix(perm, dt), a_dot)
    zero = lax.full((), 0, dt)
    lower = lax.slice(lu_, (0,) * (nb + 2), tuple(batch) + (m, k))
    lower = lax.pad(_tri(lower, -1), zero, [(0, 0, 0)] * (nb + 1) + [(0, m - k, 0)])
    lower = lax.add(lower, _eye(tuple(batch) + (m, m), dt))
    upper = _tri(lax.slice(lu_, (0,) * (nb + 2), tuple(batch) + (k, n)), lower=False)
    upper = lax.pad(upper, zero, [(0, 0, 0)] * nb + [(0, n - k, 0), (0, 0, 0)])
    u_eye = lax.pad(_eye(tuple(batch) + (n - k, n - k), dt), zero,
                    [(0, 0, 0)] * nb + [(k, 0, 0), (k, 0, 0)])
    upper = lax.add(upper, u_eye)
    la = triangular_solve(lower, x, left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(upper, la, left_side=False, lower=False)
    lu_dot = lax.add(_mm(lower, _tri(lau, -1)), _mm(_tri(lau, lower=False), upper))
    return [lu_dot, ad.Zero(get_aval(piv)), ad.Zero(get_aval(perm))]


lu_p = Primitive("lu", multiple_results=True)
lu_p.def_impl(_lu_impl)
lu_p.def_abstract_eval(_lu_abstract)
ad.jvp_rules[lu_p] = _lu_jvp
_batch_front(lu_p)


def lu_pivots_to_permutation(pivots, permutation_size):
    """The permutation that LAPACK-style `pivots` (row swaps, from 0) apply, as in JAX.

    Built from lax operations (one select per swap), so it traces, batches and jits.

    Example:
        >>> lu_pivots_to_permutation(fnp.array([1, 1], dtype=fnp.int32), 3)
        Array([1, 0, 2], dtype=int32)
    """
    permutation_size = static_int("lu_pivots_to_permutation", permutation_size,
                                  "permutation_size")
    aval = get_aval(pivots)
    if aval.ndim < 1 or dtypes.kind(aval.dtype) not in "iu" or aval.shape[-1] > permutation_size:
        raise errors.op_error("lu_pivots_to_permutation", f"pivots must be integers of shape "
                              f"(..., k) with k <= permutation_size={permutation_size}, got "
                              f"{aval}")
    i32 = np.dtype(np.int32)
    pivots = lax.convert_element_type(pivots, i32)
    shape = aval.shape[:-1] + (permutation_size,)
    iota = lax.broadcasted_iota(i32, shape, len(shape) - 1)
    perm, zero, last = iota, lax.full(shape, 0, i32), len(shape) - 1
    for j in range(aval.shape[-1]):
        start = (0,) * last + (j,)
        p = lax.slice(pivots, start, aval.shape[:-1] + (j + 1,))
        p = lax.broadcast_in_dim(lax.reshape(p, aval.shape[:-1]), shape, tuple(range(last)))
        at_p = lax.eq(iota, p)
        v_p = lax.reduce_sum(lax.select_n(at_p, zero, perm), (last,))
        v_j = lax.reduce_sum(lax.select_n(lax.eq(iota, lax.full(shape, j, i32)), zero, perm),
                             (last,))
        v_p, v_j = (lax.broadcast_in_dim(v, shape, tuple(range(last))) for v in (v_p, v_j))
        perm = lax.select_n(at_p, lax.select_n(lax.eq(iota, lax.full(shape, j, i32)), perm,
                                               v_p), v_j)
    return perm


# --- qr ---------------------------------------------------------------------------------------
def qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
    """QR decomposition `x = q @ r` of (..., m, n) matrices: `(q, r)` as in JAX.

    With `full_matrices`, `q` is (..., m, m) and `r` (..., m, n); else `q` is (..., m, k) and
    `r` (..., k, n), k = min(m, n). The derivative needs m >= n (and m == n with
    `full_matrices`), as in JAX. `use_magma` chooses a GPU library in JAX; it is accepted and
    changes nothing here. With `pivoting=True` (LAPACK's geqp3, as JAX on CPUs) the result is
    `(q, r, p)`: `x[..., :, p] = q @ r`, the column of the largest remaining norm first, so
    `|diag(r)|` does not increase; `p` (int32) is constant to the derivative.

    Example:
        >>> q, r = qr(fnp.eye(3)); r.shape
        (3, 3)
    """
    if pivoting:
        from funcgrad.lax.sorting import _take_along_axis
        _check_matrix("qr", get_aval(x))
        p = qr_pivots_p.bind(x)
        aval = get_aval(x)
        cols = lax.broadcast_in_dim(p, aval.shape, tuple(range(aval.ndim - 2)) + (aval.ndim - 1,))
        permuted = _take_along_axis(x, cols, aval.ndim - 1)
        return (*qr_p.bind(permuted, full_matrices=bool(full_matrices)), p)
    return tuple(qr_p.bind(x, full_matrices=bool(full_matrices)))


# --- qr_pivots: the column order of LAPACK's geqp3 -------------------------------------------
def _geqp3_pivots(a):
    """Householder QR with column pivoting (geqp3's choice: the largest remaining column
    norm, the first on ties); returns the order of the columns."""
    a = np.array(a)
    m, n = a.shape
    perm = np.arange(n)
    for k in range(min(m, n)):
        j = k + int(np.argmax(np.linalg.norm(a[k:, k:], axis=0)))
        a[:, [k, j]], perm[[k, j]] = a[:, [j, k]], perm[[j, k]]
        v = a[k:, k].copy()
        norm = np.linalg.norm(v)
        if norm == 0 or not np.isfinite(norm):
            continue
        v[0] += (v[0] / abs(v[0]) if v[0] != 0 else 1) * norm
        v /= np.linalg.norm(v)
        a[k:, k:] -= 2 * np.outer(v, v.conj() @ a[k:, k:])
    return perm


def _qr_pivots_impl(x):
    *batch, _, n = x.shape
    out = np.empty(tuple(batch) + (n,), np.int32)
    for i in np.ndindex(*batch):
        out[i] = _geqp3_pivots(x[i])
    return out


qr_pivots_p = Primitive("qr_pivots")
qr_pivots_p.def_impl(_lapack(_qr_pivots_impl))
qr_pivots_p.def_abstract_eval(lambda x: ShapedArray(x.shape[:-2] + x.shape[-1:],
                                                     np.dtype(np.int32)))
ad.defjvp_zero(qr_pivots_p)
_batch_front(qr_pivots_p)


def _qr_abstract(x, *, full_matrices):
    _check_matrix("qr", x)
    *batch, m, n = x.shape
    k = m if full_matrices else min(m, n)
    return [ShapedArray(tuple(batch) + (m, k), x.dtype, x.weak_type),
            ShapedArray(tuple(batch) + (k, n), x.dtype, x.weak_type)]


def _qr_impl(x, *, full_matrices):
    *batch, m, n = x.shape
    k = m if full_matrices else min(m, n)
    if x.size == 0:
        q = np.broadcast_to(np.eye(m, k, dtype=x.dtype), tuple(batch) + (m, k)).copy()
        return [q, np.zeros(tuple(batch) + (k, n), x.dtype)]
    return list(np.linalg.qr(x, mode="complete" if full_matrices else "reduced"))


def _qr_jvp(primals, outs, tangents, *, full_matrices):
    # J. Townsend, "Differentiating the QR decomposition" (2018), as in JAX
    (x,), (dx,) = primals, tangents
    *_, m, n = get_aval(x).shape
    if m < n or (full_matrices and m != n):
        raise errors.op_error("qr", f"the derivative is defined for m >= n (and reduced "
                              f"matrices unless m == n), got {get_aval(x)} with full_matrices="
                              f"{full_matrices}", cls=errors.FuncgradValueError,
                              hint="use full_matrices=False (numpy's mode='reduced')")
    q, r = outs
    dx = ad.instantiate(dx)
    dx_rinv = triangular_solve(r, dx)
    qt_dx_rinv = _mm(_H(q), dx_rinv)
    low = _tri(qt_dx_rinv, -1)
    do = lax.sub(low, _H(low))
    if dtypes.kind(get_aval(x).dtype) == "c":
        imag = lax.sub(qt_dx_rinv, lax.convert_element_type(lax.real(qt_dx_rinv),
                                                            get_aval(x).dtype))
        do = lax.add(do, lax.mul(_eye(get_aval(do).shape, get_aval(x).dtype), imag))
    dq = lax.add(_mm(q, lax.sub(do, qt_dx_rinv)), dx_rinv)
    dr = _mm(lax.sub(qt_dx_rinv, do), r)
    return [dq, dr]


qr_p = Primitive("qr", multiple_results=True)
qr_p.def_impl(_lapack(_qr_impl))
qr_p.def_abstract_eval(_qr_abstract)
ad.jvp_rules[qr_p] = _qr_jvp
_batch_front(qr_p)


# --- eigh -------------------------------------------------------------------------------------
def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True, subset_by_index=None,
         implementation=None):
    """Eigen-decomposition of Hermitian `x`: `(v, w)` with `x @ v = v * w`, as in JAX.

    Eigenvalues `w` ascend (LAPACK's order; `sort_eigenvalues` is accepted for JAX
    compatibility). Only the `lower` (or upper) triangle is read unless `symmetrize_input`.
    `subset_by_index=(start, end)` keeps the eigenpairs `start:end` of that order (JAX
    implements it on TPUs only). `implementation`: None or "qr" (`check_implementation`).
    The derivative of `v` needs distinct eigenvalues (it divides by their differences).

    Example:
        >>> v, w = eigh(fnp.array([[2.0, 0.0], [0.0, 1.0]])); w
        Array([1., 2.], dtype=float32)
    """
    check_implementation("eigh", "implementation", implementation, ("qr",))
    if symmetrize_input:
        _check_matrix("eigh", get_aval(x), square=True)
        x = _symmetrize(x)
    v, w = eigh_p.bind(x, lower=bool(lower))
    subset = _subset("eigh", subset_by_index, get_aval(w).shape[-1])
    if subset is None:
        return v, w
    nd = get_aval(v).ndim
    return (lax.slice_in_dim(v, *subset, axis=nd - 1),
            lax.slice_in_dim(w, *subset, axis=nd - 2))


def _eigh_abstract(x, *, lower):
    _check_matrix("eigh", x, square=True)
    return [ShapedArray(x.shape, x.dtype, x.weak_type),
            ShapedArray(x.shape[:-1], _real_dtype(x.dtype), x.weak_type)]


def _eigh_impl(x, *, lower):
    def one(a):
        w, v = np.linalg.eigh(a, UPLO="L" if lower else "U")
        return v, w
    if x.size == 0:
        return [np.zeros(x.shape, x.dtype), np.zeros(x.shape[:-1], _real_dtype(x.dtype))]
    try:
        return list(one(x))
    except np.linalg.LinAlgError:
        return _each_matrix(one, x, [(x.shape, x.dtype), (x.shape[:-1], _real_dtype(x.dtype))])


def _eigh_jvp(primals, outs, tangents, *, lower):
    (a_dot,), (v, w) = tangents, outs
    a_dot = ad.instantiate(a_dot)
    dt = get_aval(v).dtype
    wc = lax.convert_element_type(w, dt)
    shape = get_aval(v).shape
    nd = len(shape)
    diff = lax.sub(lax.broadcast_in_dim(wc, shape, tuple(range(nd - 2)) + (nd - 1,)),
                   lax.broadcast_in_dim(wc, shape, tuple(range(nd - 1))))
    eye = _eye(shape, dt)
    f = lax.sub(lax.div(lax.full((), 1, dt), lax.add(eye, diff)), eye)  # 1/(w_j - w_i), 0 on i=j
    vdag_adot_v = _mm(_mm(_H(v), a_dot), v)
    dv = _mm(v, lax.mul(f, vdag_adot_v))
    dw = _diag(vdag_adot_v)
    dw = lax.real(dw) if dtypes.kind(dt) == "c" else dw
    return [dv, dw]


eigh_p = Primitive("eigh", multiple_results=True)
eigh_p.def_impl(_lapack(_eigh_impl))
eigh_p.def_abstract_eval(_eigh_abstract)
ad.jvp_rules[eigh_p] = _eigh_jvp
_batch_front(eigh_p)


# --- svd --------------------------------------------------------------------------------------
def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """Singular value decomposition `x = u @ diag(s) @ vh`: `(u, s, vh)`, or `s` alone.

    Singular values descend. The derivative of `u`, `vh` needs distinct non-zero singular
    values and `full_matrices=False` unless `x` is square (as in JAX); that of `s` alone is
    defined wherever the singular values are distinct. `subset_by_index=(start, end)` keeps
    the singular triplets `start:end` (with `full_matrices=False`; JAX implements it on TPUs
    only). `algorithm`: None, "default", "qr" or "divide_and_conquer" (`check_implementation`).

    Example:
        >>> svd(fnp.array([[3.0, 0.0], [0.0, 4.0]]), compute_uv=False)
        Array([4., 3.], dtype=float32)
    """
    check_implementation("svd", "algorithm", algorithm, ("default", "qr", "divide_and_conquer"))
    aval = get_aval(x)
    subset = _subset("svd", subset_by_index, min(aval.shape[-2:]) if aval.ndim >= 2 else 0)
    if subset is not None and full_matrices and subset != (0, min(aval.shape[-2:])):
        raise errors.op_error("svd", "full_matrices and subset_by_index cannot both be set",
                              cls=errors.FuncgradValueError)
    out = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if subset is not None:
        nd = aval.ndim
        out = [lax.slice_in_dim(out[0], *subset, axis=nd - 2)] + (
            [lax.slice_in_dim(out[1], *subset, axis=nd - 1),
             lax.slice_in_dim(out[2], *subset, axis=nd - 2)] if compute_uv else [])
    return (out[1], out[0], out[2]) if compute_uv else out[0]


def _svd_shapes(shape, full_matrices):
    *batch, m, n = shape
    k = min(m, n)
    um, vn = (m, n) if full_matrices else (k, k)
    return tuple(batch) + (k,), tuple(batch) + (m, um), tuple(batch) + (vn, n)


def _svd_abstract(x, *, full_matrices, compute_uv):
    _check_matrix("svd", x)
    s, u, vh = _svd_shapes(x.shape, full_matrices)
    out = [ShapedArray(s, _real_dtype(x.dtype), x.weak_type)]
    return out + ([ShapedArray(u, x.dtype, x.weak_type), ShapedArray(vh, x.dtype, x.weak_type)]
                  if compute_uv else [])


def _svd_impl(x, *, full_matrices, compute_uv):
    s, u, vh = _svd_shapes(x.shape, full_matrices)
    outs = [(s, _real_dtype(x.dtype))] + ([(u, x.dtype), (vh, x.dtype)] if compute_uv else [])
    if x.size == 0:
        zeros = [np.zeros(s_, d) for s_, d in outs]
        return zeros[:1] + [np.broadcast_to(np.eye(*s_[-2:], dtype=d), s_).copy()
                            for s_, d in outs[1:]]

    def one(a):
        if not compute_uv:
            return [np.linalg.svd(a, compute_uv=False)]
        u_, s_, vh_ = np.linalg.svd(a, full_matrices=full_matrices)
        return [s_, u_, vh_]
    try:
        return one(x)
    except np.linalg.LinAlgError:
        return _each_matrix(one, x, outs)


def _svd_jvp(primals, outs, tangents, *, full_matrices, compute_uv):
    (a,), (da,) = primals, tangents
    *_, m, n = get_aval(a).shape
    if compute_uv and full_matrices and m != n:
        raise errors.op_error("svd", f"the derivative of u and vh with full_matrices=True is "
                              f"defined for square matrices only, got {get_aval(a)}",
                              cls=errors.FuncgradValueError, hint="use full_matrices=False")
    if compute_uv:  # full_matrices only when square: the reduced factors
        s, u, vh = outs
    else:
        s, u, vh = svd_p.bind(a, full_matrices=False, compute_uv=True)
    return _svd_tangents(a, ad.instantiate(da), s, u, vh, compute_uv)


def _svd_tangents(a, da, s, u, vh, compute_uv):
    dt = get_aval(a).dtype
    *_, m, n = get_aval(a).shape
    ut, v = _H(u), _H(vh)
    ds_mat = _mm(_mm(ut, da), v)
    ds = _diag(ds_mat)
    ds = lax.real(ds) if dtypes.kind(dt) == "c" else ds
    if not compute_uv:
        return [ds]
    shape = get_aval(ds_mat).shape
    nd = len(shape)
    row = lax.broadcast_in_dim(lax.convert_element_type(s, dt), shape, tuple(range(nd - 2)) + (
        nd - 1,))  # s_j along columns
    col = _T(row)  # s_i along rows
    eye, one = _eye(shape, dt), lax.full((), 1, dt)
    f = lax.sub(lax.div(one, lax.add(lax.mul(lax.add(row, col), lax.sub(row, col)), eye)), eye)
    dss, sds = lax.mul(row, ds_mat), lax.mul(col, ds_mat)
    zero_s = lax.convert_element_type(lax.eq(row, lax.full((), 0, dt)), dt)
    s_inv = lax.mul(lax.sub(lax.div(one, lax.add(row, zero_s)), zero_s), eye)
    half = lax.full((), 0.5, dt)
    dudv_diag = lax.mul(lax.mul(half, lax.sub(ds_mat, _H(ds_mat))), s_inv)
    du = _mm(u, lax.add(lax.mul(f, lax.add(dss, _H(dss))), dudv_diag))
    dv = _mm(v, lax.mul(f, lax.add(sds, _H(sds))))
    if m > n:
        dav = _mm(da, v)
        du = lax.add(du, lax.div(lax.sub(dav, _mm(u, _mm(ut, dav))), _rows_like(s, dav, dt)))
    if n > m:
        dahu = _mm(_H(da), u)
        dv = lax.add(dv, lax.div(lax.sub(dahu, _mm(v, _mm(vh, dahu))), _rows_like(s, dahu, dt)))
    return [ds, du, _H(dv)]


def _rows_like(s, x, dt):
    """s (..., k) broadcast along the rows of x (..., r, k)."""
    shape = get_aval(x).shape
    return lax.broadcast_in_dim(lax.convert_element_type(s, dt), shape,
                                tuple(range(len(shape) - 2)) + (len(shape) - 1,))


svd_p = Primitive("svd", multiple_results=True)
svd_p.def_impl(_lapack(_svd_impl))
svd_p.def_abstract_eval(_svd_abstract)
ad.jvp_rules[svd_p] = _svd_jvp
_batch_front(svd_p)
