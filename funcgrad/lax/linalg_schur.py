"""The Schur and Hessenberg decompositions of `lax.linalg` (`schur`, `hessenberg`) as
library primitives, and the compositions `tridiagonal` (on `hessenberg`),
`householder_product`, `ormqr`, `tridiagonal_solve`, `symmetric_product`, `qdwh` and
`cholesky_update`; JAX's algorithm enums.

NumPy exposes no LAPACK Schur routine, so `schur`'s eager implementation is the textbook QR
algorithm in float64/complex128 (Golub & Van Loan, 4th ed.): Householder reduction to
Hessenberg form, then Francis' implicit double-shift steps (real Schur form, 2x2 blocks for
complex pairs, standardized as LAPACK's) or Wilkinson-shifted single steps with Givens
rotations (complex Schur form). Like JAX's, `schur` and `hessenberg` have no derivative
rule; the compositions differentiate and batch through their lax operations. Imports core,
interpreters and lax siblings.
"""

import enum

import numpy as np

from funcgrad import errors, lax
from funcgrad.core import Primitive, ShapedArray, get_aval
from funcgrad.interpreters import ad
from funcgrad.lax.linalg_decomp import _H, _batch_front, _check_matrix, _tri

__all__ = [
    "EigImplementation", "EighImplementation", "SvdAlgorithm", "cholesky_update",
    "hessenberg", "hessenberg_p", "householder_product", "ormqr", "qdwh", "schur", "schur_p",
    "symmetric_product", "tridiagonal", "tridiagonal_solve",
]


class EigImplementation(enum.Enum):
    """JAX's choice of eigendecomposition algorithm (`eig(implementation=)`); funcgrad runs
    numpy's LAPACK."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    """JAX's choice of symmetric eigendecomposition algorithm (`eigh(implementation=)`)."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class SvdAlgorithm(enum.Enum):
    """JAX's choice of SVD algorithm (`svd(algorithm=)`)."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


# --- numpy kernels ----------------------------------------------------------------------------
def _reflector(x):
    """LAPACK's larfg: (v with v[0] = 1, tau, beta) with (I - tau v v^H) x = beta e0."""
    alpha, rest = x[0], x[1:]
    xnorm = np.linalg.norm(rest)
    if xnorm == 0 and np.imag(alpha) == 0:
        return np.concatenate([[1], np.zeros_like(rest)]), 0.0 * alpha, alpha
    beta = -np.copysign(np.hypot(np.abs(alpha), xnorm), np.real(alpha))
    tau = (beta - alpha) / beta
    return np.concatenate([[1], rest / (alpha - beta)]), tau, beta


def _hessenberg_packed(a):
    """LAPACK's gehrd for one matrix: (a with H above the first subdiagonal and the
    reflectors below it, taus)."""
    a = a.copy()
    n = a.shape[0]
    taus = np.zeros(max(n - 1, 0), a.dtype)
    for k in range(n - 1):  # the last one (length 1) makes a complex subdiagonal real
        v, tau, beta = _reflector(a[k + 1:, k])
        taus[k] = tau
        # A <- H^H A H with H = I - tau v v^H (so H^H maps the column to beta e0)
        a[k + 1:, k + 1:] -= np.conj(tau) * np.outer(v, v.conj() @ a[k + 1:, k + 1:])
        a[:, k + 1:] -= np.outer(a[:, k + 1:] @ v, tau * v.conj())
        a[k + 1, k], a[k + 2:, k] = beta, v[1:]
    return a, taus


def _q_from(a, taus, offset):
    """Q = H(0) H(1) ... from reflectors stored below diagonal `offset` of `a`'s columns."""
    m = a.shape[0]
    q = np.eye(m, dtype=a.dtype)
    for k in range(len(taus) - 1, -1, -1):
        r = k + offset
        v = np.concatenate([[1], a[r + 1:, k]]) if r < m else np.ones(0, a.dtype)
        q[r:, :] -= taus[k] * np.outer(v, v.conj() @ q[r:, :])
    return q


def _givens(a, b):
    """(c, s) with [[c, s], [-conj(s), c]] @ [a, b] = [r, 0] (c real)."""
    if b == 0:
        return 1.0, 0.0 * b
    r = np.hypot(np.abs(a), np.abs(b))
    if a == 0:
        return 0.0, np.conj(b) / np.abs(b) * 1.0
    return np.abs(a) / r, a / np.abs(a) * np.conj(b) / r


def _complex_schur(h, z):
    """Wilkinson-shifted QR steps on the (complex) Hessenberg `h`, accumulating into `z`."""
    n = h.shape[0]
    eps = np.finfo(np.float64).eps
    p, it = n - 1, 0
    while p > 0:
        if abs(h[p, p - 1]) <= eps * (abs(h[p - 1, p - 1]) + abs(h[p, p])):
            h[p, p - 1], p, it = 0, p - 1, 0
            continue
        q = p - 1
        while q > 0 and abs(h[q, q - 1]) > eps * (abs(h[q - 1, q - 1]) + abs(h[q, q])):
            q -= 1
        if q > 0:
            h[q, q - 1] = 0
        it += 1
        if it > 100 * n:
            raise np.linalg.LinAlgError("the QR algorithm did not converge")
        a, b, c, d = h[p - 1, p - 1], h[p - 1, p], h[p, p - 1], h[p, p]
        tr, det = a + d, a * d - b * c
        disc = np.sqrt(tr * tr / 4 - det + 0j)
        mu = min(tr / 2 + disc, tr / 2 - disc, key=lambda e: abs(e - d))
        if it % 11 == 0:  # an exceptional shift breaks cycles
            mu = d + abs(h[p, p - 1]) * 1.5
        x, y = h[q, q] - mu, h[q + 1, q]
        for k in range(q, p):
            c_, s_ = _givens(x, y)
            g = np.array([[c_, s_], [-np.conj(s_), c_]])
            h[k:k + 2, :] = g @ h[k:k + 2, :]
            h[:, k:k + 2] = h[:, k:k + 2] @ g.conj().T
            z[:, k:k + 2] = z[:, k:k + 2] @ g.conj().T
            if k < p - 1:
                x, y = h[k + 1, k], h[k + 2, k]
    return h, z


def _house3(x):
    """A real reflector P = I - 2 v v^T / v^T v with P x = -+|x| e0."""
    v = x.astype(np.float64).copy()
    nrm = np.linalg.norm(v)
    if nrm == 0:
        return np.eye(len(x))
    v[0] += np.copysign(nrm, v[0])
    return np.eye(len(x)) - 2 * np.outer(v, v) / (v @ v)


def _francis(h, z):
    """Francis' double-shift QR on the real Hessenberg `h` (Golub & Van Loan 7.5.2)."""
    n = h.shape[0]
    eps = np.finfo(np.float64).eps
    p, it = n - 1, 0
    while p > 0:
        q = p
        while q > 0 and abs(h[q, q - 1]) > eps * (abs(h[q - 1, q - 1]) + abs(h[q, q])):
            q -= 1
        if q > 0:
            h[q, q - 1] = 0
        if q >= p - 1:  # a converged 1x1 or 2x2 block at the bottom
            p, it = q - 1, 0
            continue
        it += 1
        if it > 100 * n:
            raise np.linalg.LinAlgError("the QR algorithm did not converge")
        m = p
        s = h[m - 1, m - 1] + h[m, m]
        t = h[m - 1, m - 1] * h[m, m] - h[m - 1, m] * h[m, m - 1]
        if it % 11 == 0:  # exceptional shift
            w = abs(h[m, m - 1]) + abs(h[m - 1, m - 2])
            s, t = 1.5 * w, w * w
        x = h[q, q] ** 2 + h[q, q + 1] * h[q + 1, q] - s * h[q, q] + t
        y = h[q + 1, q] * (h[q, q] + h[q + 1, q + 1] - s)
        zz = h[q + 1, q] * h[q + 2, q + 1]
        for k in range(q, m - 1):
            pk = _house3(np.array([x, y, zz]))
            r = max(q, k - 1)
            h[k:k + 3, r:] = pk @ h[k:k + 3, r:]
            rr = min(k + 3, m)
            h[:rr + 1, k:k + 3] = h[:rr + 1, k:k + 3] @ pk
            z[:, k:k + 3] = z[:, k:k + 3] @ pk
            x, y = h[k + 1, k], h[k + 2, k]
            if k < m - 2:
                zz = h[k + 3, k]
        pk = _house3(np.array([x, y]))
        h[m - 1:m + 1, m - 2:] = pk @ h[m - 1:m + 1, m - 2:]
        h[:m + 1, m - 1:m + 1] = h[:m + 1, m - 1:m + 1] @ pk
        z[:, m - 1:m + 1] = z[:, m - 1:m + 1] @ pk
    return h, z


def _standardize(h, z):
    """LAPACK's standard 2x2 blocks: real eigenvalues split (triangular), complex pairs with
    equal diagonal entries."""
    n, k = h.shape[0], 0
    while k < n - 1:
        if h[k + 1, k] == 0:
            k += 1
            continue
        a, b, c, d = h[k, k], h[k, k + 1], h[k + 1, k], h[k + 1, k + 1]
        disc = ((a - d) / 2) ** 2 + b * c
        if disc >= 0:  # real eigenvalues: rotate an eigenvector onto e0
            lam = (a + d) / 2 + np.copysign(np.sqrt(disc), (a - d) / 2 if a != d else 1.0)
            v = np.array([b, lam - a]) if abs(b) + abs(lam - a) > 0 else np.array([lam - d, c])
        else:  # complex pair: the angle that equalizes the diagonal
            theta = 0.5 * np.arctan2(d - a, b + c)
            v = np.array([np.cos(theta), np.sin(theta)])
        v = v / np.linalg.norm(v)
        g = np.array([[v[0], -v[1]], [v[1], v[0]]])
        h[k:k + 2, :] = g.T @ h[k:k + 2, :]
        h[:, k:k + 2] = h[:, k:k + 2] @ g
        z[:, k:k + 2] = z[:, k:k + 2] @ g
        if disc >= 0:
            h[k + 1, k] = 0
        k += 2
    return h, z


def _schur_one(a, real):
    a = np.asarray(a, np.complex128 if not real else np.float64)
    if a.shape[0] == 0:
        return a, a.copy()
    packed, taus = _hessenberg_packed(a)
    z = _q_from(packed[1:, :-1], taus, 0) if a.shape[0] > 1 else np.eye(1, dtype=a.dtype)
    z = np.block([[np.ones((1, 1), a.dtype), np.zeros((1, a.shape[0] - 1), a.dtype)],
                  [np.zeros((a.shape[0] - 1, 1), a.dtype), z]]) if a.shape[0] > 1 else z
    h = np.triu(packed, -1)
    if real:
        h, z = _francis(h, z)
        h = np.triu(h, -1)  # (the bulge chases leave round-off below the subdiagonal)
        eps = np.finfo(np.float64).eps
        for i in range(a.shape[0] - 1):  # what the last sweeps left below negligibility
            if abs(h[i + 1, i]) <= eps * (abs(h[i, i]) + abs(h[i + 1, i + 1])):
                h[i + 1, i] = 0
        h, z = _standardize(h, z)
        return np.triu(h, -1), z
    h, z = _complex_schur(h, z)
    return np.triu(h), z


# --- schur ------------------------------------------------------------------------------------
def schur(x, *, compute_schur_vectors=True, sort_eig_vals=False, select_callable=None):
    """The Schur decomposition x = Z T Z^H of (..., n, n) matrices: `(T, Z)` with `T` upper
    triangular (complex input) or quasi-triangular with standardized 2x2 blocks for the
    complex pairs (real input), `Z` unitary. Not differentiable (as in JAX).

    Example:
        >>> t, z = schur(fnp.array([[1.0, 2.0], [0.0, 3.0]]))
        >>> fnp.diag(t)
        Array([1., 3.], dtype=float32)
    """
    if sort_eig_vals or select_callable is not None:
        raise errors.op_error("schur", "sorting the eigenvalues is not supported (as in "
                              "JAX's CPU implementation)", cls=errors.FuncgradValueError)
    t, z = schur_p.bind(x)
    return (t, z) if compute_schur_vectors else (t,)


def _schur_abstract(x):
    _check_matrix("schur", x, square=True)
    return [ShapedArray(x.shape, x.dtype), ShapedArray(x.shape, x.dtype)]


def _schur_impl(x):
    real = x.dtype.kind == "f"
    flat = x.reshape((-1,) + x.shape[-2:])
    outs = [_schur_one(m, real) for m in flat]
    t = np.stack([o[0] for o in outs]) if outs else np.zeros_like(flat)
    z = np.stack([o[1] for o in outs]) if outs else np.zeros_like(flat)
    return [t.reshape(x.shape).astype(x.dtype), z.reshape(x.shape).astype(x.dtype)]


def _no_derivative(name):
    def rule(primals, outs, tangents, **params):
        raise errors.op_error(name, "has no derivative (as in JAX)",
                              cls=errors.FuncgradTypeError,
                              hint="differentiate through eig/eigh, or stop_gradient it")
    return rule


schur_p = Primitive("schur", multiple_results=True)
schur_p.def_impl(_schur_impl)
schur_p.def_abstract_eval(_schur_abstract)
ad.jvp_rules[schur_p] = _no_derivative("schur")
_batch_front(schur_p)


# --- hessenberg -------------------------------------------------------------------------------
def hessenberg(a):
    """LAPACK's gehrd: `(packed, taus)` with the upper Hessenberg form H = Q^H a Q on and above
    the first subdiagonal of `packed` and Q's Householder reflectors below it (Q = H(0) ...
    H(n-2), H(k) = I - taus[k] v v^H). Not differentiable (as in JAX).

    Example:
        >>> h, taus = hessenberg(fnp.eye(3))
        >>> taus.shape
        (2,)
    """
    return tuple(hessenberg_p.bind(a))


def _hessenberg_abstract(a):
    _check_matrix("hessenberg", a, square=True)
    n = a.shape[-1]
    return [ShapedArray(a.shape, a.dtype), ShapedArray(a.shape[:-2] + (max(n - 1, 0),),
                                                       a.dtype)]


def _hessenberg_impl(a):
    dt = np.complex128 if a.dtype.kind == "c" else np.float64
    flat = a.reshape((-1,) + a.shape[-2:]).astype(dt)
    outs = [_hessenberg_packed(m) for m in flat]
    n = a.shape[-1]
    packed = np.stack([o[0] for o in outs]) if outs else flat
    taus = np.stack([o[1] for o in outs]) if outs else np.zeros((0, max(n - 1, 0)), dt)
    return [packed.reshape(a.shape).astype(a.dtype),
            taus.reshape(a.shape[:-2] + (max(n - 1, 0),)).astype(a.dtype)]


hessenberg_p = Primitive("hessenberg", multiple_results=True)
hessenberg_p.def_impl(_hessenberg_impl)
hessenberg_p.def_abstract_eval(_hessenberg_abstract)
ad.jvp_rules[hessenberg_p] = _no_derivative("hessenberg")
_batch_front(hessenberg_p)


# --- compositions -----------------------------------------------------------------------------
def householder_product(a, taus):
    """LAPACK's orgqr: the (..., m, n) matrix Q = H(0) H(1) ... H(k-1) of the reflectors in
    the columns of `a` below the diagonal (v[i] = 1 implicit), H(i) = I - taus[i] v v^H.
    Differentiable in `a` and `taus`.

    Example:
        >>> householder_product(fnp.zeros((3, 2)), fnp.zeros(2))
        Array([[1., 0.],
               [0., 1.],
               [0., 0.]], dtype=float32)
    """
    av = get_aval(a)
    m, n = av.shape[-2:]
    k = get_aval(taus).shape[-1]
    q = lax.broadcast_in_dim(_eye(m, av.dtype), av.shape[:-2] + (m, m),
                             (av.ndim - 2, av.ndim - 1))
    rows = lax.broadcasted_iota(np.int32, av.shape, av.ndim - 2)
    cols = lax.broadcasted_iota(np.int32, av.shape, av.ndim - 1)
    below = lax.select_n(lax.gt(rows, cols), lax.full(av.shape, 0, av.dtype), a)
    vs = lax.add(below, lax.convert_element_type(lax.eq(rows, cols), av.dtype))
    for i in range(k - 1, -1, -1):
        v = lax.index_in_dim(vs, i, av.ndim - 1, keepdims=True)  # (..., m, 1)
        tau = lax.index_in_dim(taus, i, av.ndim - 2, keepdims=True)[..., None]
        vh_q = lax.dot_general(_H(v), q, (((av.ndim - 1,), (av.ndim - 2,)),
                                          (tuple(range(av.ndim - 2)),) * 2))
        outer = lax.dot_general(v, vh_q, (((av.ndim - 1,), (av.ndim - 2,)),
                                          (tuple(range(av.ndim - 2)),) * 2))
        q = lax.sub(q, lax.mul(lax.broadcast_in_dim(tau, get_aval(q).shape,
                                                    tuple(range(av.ndim))), outer))
    return lax.slice_in_dim(q, 0, n, 1, av.ndim - 1)


def _eye(n, dt):
    return lax.convert_element_type(lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0),
                                           lax.broadcasted_iota(np.int32, (n, n), 1)), dt)


def ormqr(a, taus, c, *, left=True, transpose=False):
    """LAPACK's ormqr: `c` multiplied by Q (or Q^H with `transpose`) from the left (or
    right) for the Q of `householder_product(a, taus)`, completed to m x m.

    Example:
        >>> ormqr(fnp.zeros((2, 2)), fnp.zeros(2), fnp.eye(2))
        Array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    av = get_aval(a)
    m = av.shape[-2]
    full = lax.pad(a, lax.full((), 0, av.dtype), [(0, 0, 0)] * (av.ndim - 1)
                   + [(0, max(m - av.shape[-1], 0), 0)]) if av.shape[-1] < m else a
    q = householder_product(full, taus)
    q = _H(q) if transpose else q
    nb = av.ndim - 2
    batch = (tuple(range(nb)),) * 2
    if left:
        return lax.dot_general(q, c, (((nb + 1,), (nb,)), batch))
    return lax.dot_general(c, q, (((nb + 1,), (nb,)), batch))


def tridiagonal_solve(dl, d, du, b, *, perturb_singular=False):
    """The solution x of the tridiagonal system with sub-, main and super-diagonals `dl`,
    `d`, `du` ((..., m); dl[0] and du[-1] are ignored) and right-hand sides `b` (..., m, n),
    by the Thomas algorithm in two `scan`s: differentiable and batched through them.

    Example:
        >>> tridiagonal_solve(fnp.zeros(2), fnp.full(2, 2.0), fnp.zeros(2), fnp.ones((2, 1)))
        Array([[0.5],
               [0.5]], dtype=float32)
    """
    if perturb_singular:
        raise errors.op_error("tridiagonal_solve", "perturb_singular=True is not supported",
                              cls=errors.FuncgradValueError)
    bv = get_aval(b)
    if bv.ndim < 2 or get_aval(d).shape != bv.shape[:-1]:
        raise errors.op_error("tridiagonal_solve", f"b must be (..., m, n) with the "
                              f"diagonals (..., m), got {get_aval(d)} and {bv}",
                              cls=errors.FuncgradValueError)
    nd = bv.ndim
    front = lambda x, ax: lax.transpose(x, (ax,) + tuple(i for i in range(get_aval(x).ndim)
                                                          if i != ax))
    dl_, d_, du_ = (front(v, nd - 2) for v in (dl, d, du))
    b_ = front(b, nd - 2)
    expand = lambda v: lax.broadcast_in_dim(v, get_aval(v).shape + (bv.shape[-1],),
                                            tuple(range(get_aval(v).ndim)))

    def forward(carry, row):
        c_prev, g_prev = carry
        a_i, d_i, c_i, b_i = row
        den = lax.sub(d_i, lax.mul(a_i, c_prev))
        c_new = lax.div(c_i, den)
        g_new = lax.div(lax.sub(b_i, lax.mul(expand(a_i), g_prev)), expand(den))
        return (c_new, g_new), (c_new, g_new)
    zero_c = lax.full(get_aval(d_).shape[1:], 0, bv.dtype)
    zero_g = lax.full(get_aval(b_).shape[1:], 0, bv.dtype)
    _, (cs, gs) = lax.scan(forward, (zero_c, zero_g), (dl_, d_, du_, b_))

    def backward(x_next, row):
        c_i, g_i = row
        x = lax.sub(g_i, lax.mul(expand(c_i), x_next))
        return x, x
    _, xs = lax.scan(backward, zero_g, (cs, gs), reverse=True)
    back = tuple(range(1, nd - 1)) + (0, nd - 1)
    return lax.transpose(xs, tuple(int(i) for i in np.argsort(back)))


def symmetric_product(a_matrix, c_matrix, *, alpha=1.0, beta=0.0, symmetrize_output=False):
    """alpha a a^T + beta c (BLAS syrk); with `symmetrize_output`, the result made exactly
    symmetric from its lower triangle.

    Example:
        >>> symmetric_product(fnp.eye(2), fnp.ones((2, 2)), alpha=2.0, beta=1.0)
        Array([[3., 1.],
               [1., 3.]], dtype=float32)
    """
    av = get_aval(a_matrix)
    nb = av.ndim - 2
    batch = (tuple(range(nb)),) * 2
    aat = lax.dot_general(a_matrix, a_matrix, (((nb + 1,), (nb + 1,)), batch))
    out = lax.add(lax.mul(lax.full((), alpha, av.dtype), aat),
                  lax.mul(lax.full((), beta, av.dtype), c_matrix))
    if symmetrize_output:
        from funcgrad.lax.linalg_decomp import _tri
        low, strict = _tri(out, 0, True), _tri(out, -1, True)
        out = lax.add(low, lax.transpose(strict, tuple(range(nb)) + (nb + 1, nb)))
    return out


def qdwh(x, *, is_hermitian=False, max_iterations=None, eps=None, dynamic_shape=None):
    """The polar decomposition x = u h by the QDWH iteration (Nakatsukasa, Bai, Gygi 2010):
    `(u, h, num_iters, is_converged)` for an (m, n) x with m >= n; `u` has orthonormal
    columns and `h` is Hermitian positive semi-definite. A fixed number of steps (10 by
    default) in a `fori_loop`, so it is differentiable.

    Example:
        >>> u, h, _, _ = qdwh(fnp.array([[2.0, 0.0], [0.0, -3.0]]))
        >>> u.round(4)
        Array([[ 1.,  0.],
               [ 0., -1.]], dtype=float32)
    """
    if dynamic_shape is not None:
        raise errors.op_error("qdwh", "dynamic_shape is not supported",
                              cls=errors.FuncgradValueError)
    xv = get_aval(x)
    if xv.ndim != 2 or xv.shape[0] < xv.shape[1]:
        raise errors.op_error("qdwh", f"needs an (m, n) matrix with m >= n, got {xv}",
                              cls=errors.FuncgradValueError)
    m, n = xv.shape
    steps = 10 if max_iterations is None else int(max_iterations)
    rt = np.dtype(np.real(np.zeros((), xv.dtype)).dtype)
    tol = float(np.finfo(rt).eps) if eps is None else float(eps)
    f = lambda v: lax.full((), v, rt)  # noqa: E731
    from funcgrad.lax.linalg_decomp import qr
    sq = lax.real(lax.mul(x, lax.conj(x))) if xv.dtype.kind == "c" else lax.mul(x, x)
    u0 = lax.div(x, lax.convert_element_type(lax.sqrt(lax.reduce_sum(sq, (0, 1))), xv.dtype))
    eye = _eye(n, xv.dtype)

    def step(_, carry):  # one dynamically weighted Halley step
        u, low = carry
        l2 = lax.mul(low, low)
        d = lax.pow(lax.div(lax.mul(f(4.0), lax.sub(f(1.0), l2)), lax.mul(l2, l2)), f(1 / 3))
        root = lax.sqrt(lax.add(f(1.0), d))
        inner = lax.add(lax.sub(f(8.0), lax.mul(f(4.0), d)),
                        lax.div(lax.mul(f(8.0), lax.sub(f(2.0), l2)), lax.mul(l2, root)))
        a = lax.add(root, lax.mul(f(0.5), lax.sqrt(inner)))
        b = lax.div(lax.mul(lax.sub(a, f(1.0)), lax.sub(a, f(1.0))), f(4.0))
        c = lax.sub(lax.add(a, b), f(1.0))
        cx = lax.convert_element_type(c, xv.dtype)
        q, _ = qr(lax.concatenate([lax.mul(lax.sqrt(cx), u), eye], 0), full_matrices=False)
        q1, q2 = lax.slice_in_dim(q, 0, m, 1, 0), lax.slice_in_dim(q, m, m + n, 1, 0)
        b_c = lax.div(b, c)
        weight = lax.convert_element_type(lax.div(lax.sub(a, b_c), lax.sqrt(c)), xv.dtype)
        u = lax.add(lax.mul(lax.convert_element_type(b_c, xv.dtype), u),
                    lax.mul(weight, lax.dot(q1, _H(q2))))
        low = lax.div(lax.mul(low, lax.add(a, lax.mul(b, l2))),
                      lax.add(f(1.0), lax.mul(c, l2)))
        return u, lax.min(low, f(1.0))
    u, _ = lax.fori_loop(0, steps, step, (u0, f(max(tol, 1e-15) * 10)))
    h = lax.dot(_H(u), x)
    h = lax.div(lax.add(h, _H(h)), lax.full((), 2, xv.dtype))
    return u, h, lax.full((), steps, np.dtype(np.int32)), lax.full((), True, np.dtype(bool))


def _diagonal(x, k):
    """The k-th subdiagonal (k >= 0) of the last two axes: (..., n - k)."""
    av = get_aval(x)
    n = av.shape[-1]
    sub = lax.slice_in_dim(lax.slice_in_dim(x, k, n, 1, av.ndim - 2), 0, n - k, 1, av.ndim - 1)
    sv = get_aval(sub)
    eye = lax.eq(lax.broadcasted_iota(np.int32, sv.shape, sv.ndim - 2),
                 lax.broadcasted_iota(np.int32, sv.shape, sv.ndim - 1))
    return lax.reduce_sum(lax.select_n(eye, lax.full(sv.shape, 0, sv.dtype), sub),
                          (sv.ndim - 1,))


def _flip2(x):
    nd = get_aval(x).ndim
    return lax.rev(x, (nd - 2, nd - 1))


def tridiagonal(a, *, lower=True):
    """LAPACK's sytrd/hetrd: `(a, d, e, taus)` with the symmetric (Hermitian) tridiagonal T =
    Q^H a Q read from one triangle of `a` (`lower`): d its diagonal, e its first sub- (or
    super-) diagonal (real), the reflectors of Q beyond it in the returned `a` (the other
    triangle as given) and their `taus`. Built on `hessenberg` of the matrix made symmetric
    from that triangle; not differentiable (as in JAX).

    Example:
        >>> _, d, e, taus = tridiagonal(fnp.array([[2.0, 1.0], [1.0, 3.0]]))
        >>> d, e
        (Array([2., 3.], dtype=float32), Array([1.], dtype=float32))
    """
    _check_matrix("tridiagonal", get_aval(a), square=True)
    av = get_aval(a)
    nd, n = av.ndim, av.shape[-1]
    b = a if lower else _flip2(a)
    perm = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    strict = _tri(b, -1, True)
    diag = _tri(_tri(b, 0, True), 0, False)
    if av.dtype.kind == "c":
        diag = lax.convert_element_type(lax.real(diag), av.dtype)
    sym = lax.add(lax.add(strict, diag), _H(strict) if av.dtype.kind == "c"
                  else lax.transpose(strict, perm))
    packed, taus = hessenberg(sym)
    real = np.dtype(np.float32 if av.dtype in (np.float32, np.complex64) else np.float64)
    d = _diagonal(packed, 0)
    e = _diagonal(packed, 1) if n > 1 else lax.full(av.shape[:-2] + (0,), 0, av.dtype)
    if av.dtype.kind == "c":
        d, e = lax.real(d), lax.real(e)
    rows = lax.broadcasted_iota(np.int32, av.shape, nd - 2)
    cols = lax.broadcasted_iota(np.int32, av.shape, nd - 1)
    out = lax.select_n(lax.ge(rows, lax.add(cols, lax.full((), 2, np.int32))), b, packed)
    on_band = lax.bitwise_or(lax.eq(rows, cols), lax.eq(rows, lax.add(cols, lax.full(
        (), 1, np.int32))))
    band = lax.add(_tri(_tri(packed, 0, True), -1, False), lax.full(av.shape, 0, av.dtype))
    if av.dtype.kind == "c":
        band = lax.convert_element_type(lax.real(band), av.dtype)
    out = lax.select_n(on_band, out, band)
    d, e = lax.convert_element_type(d, real), lax.convert_element_type(e, real)
    if lower:
        return out, d, e, taus
    last = lambda v: lax.rev(v, (get_aval(v).ndim - 1,))
    return _flip2(out), last(d), last(e), last(taus)


def cholesky_update(r_matrix, w_vector):
    """The upper Cholesky factor of R^T R + w w^T from R's (R^T R = A) in O(n^2): JAX's
    Givens rotations, one per row; differentiable through them.

    Example:
        >>> cholesky_update(fnp.eye(2), fnp.array([0.0, 1.0]))
        Array([[1.       , 0.       ],
               [0.       , 1.4142135]], dtype=float32)
    """
    rv, wv = get_aval(r_matrix), get_aval(w_vector)
    if rv.ndim != 2 or rv.shape[0] != rv.shape[1] or wv.shape != (rv.shape[1],):
        raise errors.op_error("cholesky_update", f"takes a square matrix and a vector of its "
                              f"size, got shapes {rv.shape} and {wv.shape}",
                              cls=errors.FuncgradValueError)
    dt = rv.dtype
    zero, one = lax.full((), 0, dt), lax.full((), 1, dt)
    z, rows = w_vector, []
    for k in range(rv.shape[0]):
        row = lax.index_in_dim(r_matrix, k, 0, keepdims=False)
        x = lax.index_in_dim(row, k, 0, keepdims=False)
        y = lax.index_in_dim(z, k, 0, keepdims=False)
        ax, ay = lax.abs(x), lax.abs(y)
        flat = lax.eq(y, zero)
        den = lax.select_n(flat, lax.select_n(lax.gt(ax, ay), ay, ax), one)
        xs, ys = lax.div(x, den), lax.div(y, den)
        rh = lax.rsqrt(lax.select_n(flat, lax.add(lax.mul(xs, xs), lax.mul(ys, ys)), one))
        c = lax.select_n(flat, lax.mul(xs, rh), one)
        s = lax.select_n(flat, lax.neg(lax.mul(ys, rh)), zero)
        cb = lambda v: lax.broadcast_in_dim(v, wv.shape, ())
        rows.append(lax.sub(lax.mul(cb(c), row), lax.mul(cb(s), z)))
        z = lax.add(lax.mul(cb(c), z), lax.mul(cb(s), row))
    return lax.concatenate([lax.broadcast_in_dim(r, (1,) + wv.shape, (1,)) for r in rows], 0)
