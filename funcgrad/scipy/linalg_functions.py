"""SciPy's matrix functions and decompositions beyond the basics (`funcgrad.scipy.linalg`
re-exports them): `schur`, `rsf2csf`, `sqrtm`, `funm`, `polar`, `expm_frechet`,
`hessenberg`, `qr_multiply`, `solve_sylvester`, `eigh_tridiagonal`.

Built on `lax.linalg` (`schur`, `hessenberg`, `qdwh`, `eigh`, `svd`, `qr`) and
funcgrad.numpy. As JAX's, `sqrtm` and `funm` work on the complex Schur form (complex
results); `sqrtm` is differentiable here (its tangent solves the triangular Sylvester
equation X dX + dX X = dA in the Schur basis; JAX's is not). Imports funcgrad.numpy, lax and
custom_derivatives.
"""

import functools

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.custom_derivatives import custom_jvp

__all__ = ["eigh_tridiagonal", "expm_frechet", "funm", "hessenberg", "polar", "qr_multiply",
           "rsf2csf", "schur", "solve_sylvester", "sqrtm"]


def _square(name, a):
    a = fnp.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise errors.op_error(name, f"expects a square matrix, got shape {a.shape}",
                              cls=errors.FuncgradValueError)
    return a.astype(fnp.result_type(a, 1.0))


def _complex(a):
    return a.astype(fnp.result_type(a, 1j))


def schur(a, output="real"):
    """The Schur decomposition a = Z T Z^H: `(T, Z)`, T quasi-triangular (`output="real"`,
    real input) or triangular (`output="complex"`).

    Example:
        >>> t, z = schur(fnp.array([[0.0, 1.0], [-1.0, 0.0]]))
        >>> t
        Array([[ 0.,  1.],
               [-1.,  0.]], dtype=float32)
    """
    if output not in ("real", "complex", "r", "c"):
        raise errors.op_error("schur", f"output must be 'real' or 'complex', got "
                                       f"{errors.short_repr(output)}",
                              cls=errors.FuncgradValueError)
    a = _square("schur", a)
    if output in ("complex", "c"):
        a = _complex(a)
    return lax.linalg.schur(a)


def rsf2csf(T, Z, check_finite=True):  # noqa: N803  (SciPy's names)
    """The complex Schur form from a real one: each 2x2 block of a complex pair is
    triangularized by a unitary rotation (SciPy's algorithm).

    Example:
        >>> t, z = rsf2csf(*schur(fnp.array([[0.0, 1.0], [-1.0, 0.0]])))
        >>> fnp.diag(t).round(6)
        Array([0.+1.j, 0.-1.j], dtype=complex64)
    """
    t, z = _complex(_square("rsf2csf", T)), _complex(_square("rsf2csf", Z))
    n = t.shape[0]
    for m in range(n - 1, 0, -1):
        sub = t[m, m - 1]  # nonzero only below a complex pair's block (then real)
        tr = t[m - 1, m - 1] + t[m, m]
        det = t[m - 1, m - 1] * t[m, m] - t[m - 1, m] * t[m, m - 1]
        root = fnp.sqrt(tr * tr / 4 - det)
        lam = tr / 2 + root - t[m, m]  # an eigenvalue of the block, shifted
        r = fnp.sqrt(fnp.abs(lam) ** 2 + fnp.abs(sub) ** 2)
        safe = fnp.where(r == 0, 1.0, r)
        c, s = lam / safe, sub / safe
        c, s = fnp.where(sub == 0, 1.0, c), fnp.where(sub == 0, 0.0, s)
        g = fnp.stack([fnp.stack([fnp.conj(c), fnp.conj(s)]), fnp.stack([-s, c])])
        t = t.at[m - 1:m + 1, m - 1:].set(g @ t[m - 1:m + 1, m - 1:])
        t = t.at[:m + 1, m - 1:m + 1].set(t[:m + 1, m - 1:m + 1] @ fnp.conj(g.T))
        z = z.at[:, m - 1:m + 1].set(z[:, m - 1:m + 1] @ fnp.conj(g.T))
        t = t.at[m, m - 1].set(0.0)
    return t, z


def _upper_sqrt(t):
    """The upper triangular square root of an upper triangular t (Björck-Hammarling)."""
    n = t.shape[0]
    r = fnp.diag(fnp.sqrt(fnp.diagonal(t)))
    for k in range(1, n):  # the k-th superdiagonal from the ones below it
        for i in range(n - k):
            j = i + k
            s = t[i, j] - (r[i, i + 1:j] @ r[i + 1:j, j] if k > 1 else 0.0)
            r = r.at[i, j].set(s / (r[i, i] + r[j, j]))
    return r


def _sylvester_upper(r, c):
    """The y with r y + y r = c for upper triangular r (back substitution)."""
    n = r.shape[0]
    y = fnp.zeros_like(c)
    for j in range(n):
        for i in range(n - 1, -1, -1):
            s = c[i, j] - r[i, i + 1:] @ y[i + 1:, j] - y[i, :j] @ r[:j, j]
            y = y.at[i, j].set(s / (r[i, i] + r[j, j]))
    return y


@custom_jvp
def _sqrtm(a):
    t, z = lax.linalg.schur(_complex(a))
    return z @ _upper_sqrt(t) @ fnp.conj(z.T)


@_sqrtm.defjvp
def _sqrtm_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    t, z = lax.linalg.schur(lax.stop_gradient(_complex(a)))
    r = _upper_sqrt(t)
    x = z @ r @ fnp.conj(z.T)
    zh = fnp.conj(z.T)
    dy = _sylvester_upper(r, zh @ _complex(da) @ z)  # X dX + dX X = dA in the Schur basis
    return x, z @ dy @ zh


def sqrtm(A, blocksize=1):  # noqa: N803
    """The principal square root X of A (X @ X = A), from the complex Schur form (complex
    result, as JAX's); differentiable where A has no eigenvalues on the negative real axis
    and no two eigenvalues summing to 0.

    Example:
        >>> sqrtm(fnp.array([[4.0, 0.0], [0.0, 9.0]])).real
        Array([[2., 0.],
               [0., 3.]], dtype=float32)
    """
    if blocksize != 1:
        raise errors.op_error("sqrtm", "the blocked algorithm is not implemented (as in "
                              "JAX): blocksize must be 1", cls=errors.FuncgradValueError)
    return _sqrtm(_square("sqrtm", A))


def funm(A, func, disp=True):  # noqa: N803
    """f(A) for a scalar function `func`, by the Schur-Parlett recurrence on the complex
    Schur form (distinct eigenvalues needed; complex result as JAX's).

    Example:
        >>> funm(fnp.array([[1.0, 0.0], [0.0, 2.0]]), fnp.exp).real.round(4)
        Array([[2.7183, 0.    ],
               [0.    , 7.3891]], dtype=float32)
    """
    a = _square("funm", A)
    t, z = lax.linalg.schur(_complex(a))
    n = t.shape[0]
    d = fnp.diagonal(t)
    f = fnp.diag(func(d).astype(t.dtype))
    # F T = T F: F_ij (T_jj - T_ii) = T_ij (F_jj - F_ii) + sum_k (T_ik F_kj - F_ik T_kj)
    for k in range(1, n):
        for i in range(n - k):
            j = i + k
            s = t[i, j] * (f[j, j] - f[i, i])
            if k > 1:
                s = s + t[i, i + 1:j] @ f[i + 1:j, j] - f[i, i + 1:j] @ t[i + 1:j, j]
            f = f.at[i, j].set(s / (d[j] - d[i]))
    out = z @ f @ fnp.conj(z.T)
    if disp:
        return out
    return out, fnp.zeros((), fnp.finfo(out.dtype).dtype)


def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None):
    """The polar decomposition a = u p ("right") or p u ("left"): `(u, p)` with u unitary
    (orthonormal columns) and p Hermitian positive semi-definite; by QDWH iterations or the
    SVD (`method="svd"`).

    Example:
        >>> polar(fnp.array([[2.0, 0.0], [0.0, -3.0]]))[0].round(4)
        Array([[ 1.,  0.],
               [ 0., -1.]], dtype=float32)
    """
    if side not in ("right", "left"):
        raise errors.op_error("polar", f"side must be 'right' or 'left', got "
                                       f"{errors.short_repr(side)}",
                              cls=errors.FuncgradValueError)
    a = fnp.asarray(a)
    a = a.astype(fnp.result_type(a, 1.0))
    if a.ndim != 2:
        raise errors.op_error("polar", f"needs a matrix, got shape {a.shape}",
                              cls=errors.FuncgradValueError)
    if method == "svd":
        w, s, vh = fnp.linalg.svd(a, full_matrices=False)
        u = w @ vh
        if side == "right":
            p = fnp.conj(vh.T) @ (s[:, None] * vh)
        else:
            p = (w * s[None, :]) @ fnp.conj(w.T)
        return u, p
    if method != "qdwh":
        raise errors.op_error("polar", f"unknown method "
                                       f"{errors.short_repr(method)}; use 'qdwh' or 'svd'",
                              cls=errors.FuncgradValueError)
    m, n = a.shape
    if m < n:
        raise errors.op_error("polar", "method='qdwh' needs m >= n (as in JAX); use "
                              "method='svd'", cls=errors.FuncgradValueError)
    u, h, _, _ = lax.linalg.qdwh(a, max_iterations=max_iterations, eps=eps)
    if side == "right":
        return u, h
    p = u @ h @ fnp.conj(u.T)
    return u, (p + fnp.conj(p.T)) / 2


def expm_frechet(A, E, *, method=None, compute_expm=True):  # noqa: N803
    """The Fréchet derivative of expm at A in the direction E, as the upper-right block of
    expm([[A, E], [0, A]]); with `compute_expm`, `(expm(A), L(A, E))`.

    Example:
        >>> expm_frechet(fnp.zeros((2, 2)), fnp.eye(2))[1]
        Array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    from funcgrad.scipy.linalg import expm
    if method not in (None, "SPS", "blockEnlarge"):
        raise errors.op_error("expm_frechet", f"unknown method {errors.short_repr(method)}",
                              cls=errors.FuncgradValueError)
    a, e = fnp.asarray(A), fnp.asarray(E)
    if a.shape != e.shape or a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise errors.op_error("expm_frechet", f"A and E must be square matrices of one "
                              f"shape, got {a.shape} and {e.shape}",
                              cls=errors.FuncgradValueError)
    n = a.shape[-1]
    dt = fnp.result_type(a, e, 1.0)
    a, e = a.astype(dt), e.astype(dt)
    top = fnp.concatenate([a, e], axis=-1)
    bottom = fnp.concatenate([fnp.zeros_like(a), a], axis=-1)
    big = expm(fnp.concatenate([top, bottom], axis=-2))
    frechet = big[..., :n, n:]
    return (big[..., :n, :n], frechet) if compute_expm else frechet


def hessenberg(a, *, calc_q=False, overwrite_a=False, check_finite=True):
    """The upper Hessenberg form H = Q^H a Q (and Q with `calc_q`).

    Example:
        >>> hessenberg(fnp.eye(3)).shape
        (3, 3)
    """
    a = _square("hessenberg", a)
    packed, taus = lax.linalg.hessenberg(a)
    h = fnp.triu(packed, -1)
    if not calc_q:
        return h
    n = a.shape[0]
    q = fnp.eye(n, dtype=a.dtype)
    if n > 1:
        q = q.at[1:, 1:].set(lax.linalg.householder_product(packed[1:, :-1], taus))
    return h, q


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False):
    """`(Q @ c, R)` ("left") or `(c @ Q, R)` ("right", SciPy's default) for the economic QR
    decomposition of `a` (`conjugate`: Q's conjugate; `pivoting`: also the permutation).

    Example:
        >>> qr_multiply(fnp.eye(2), fnp.ones((1, 2)))[0]
        Array([[1., 1.]], dtype=float32)
    """
    if mode not in ("left", "right"):
        raise errors.op_error("qr_multiply", f"mode must be 'right' or 'left', got "
                                             f"{errors.short_repr(mode)}",
                              cls=errors.FuncgradValueError)
    from funcgrad.scipy.linalg import qr
    a, c = fnp.asarray(a), fnp.asarray(c)
    out = qr(a, mode="economic", pivoting=pivoting)
    q, r = out[0], out[1]
    q = fnp.conj(q) if conjugate else q
    one_d = c.ndim == 1
    c2 = c[:, None] if one_d and mode == "left" else c[None, :] if one_d else c
    cq = q @ c2 if mode == "left" else c2 @ q
    if one_d:
        cq = cq.ravel()
    return (cq, r, out[2]) if pivoting else (cq, r)


def solve_sylvester(A, B, C, *, method="schur", tol=1e-8):  # noqa: N803
    """The X with A X + X B = C: by the Bartels-Stewart algorithm on the complex Schur forms
    (`method="schur"`) or by eigendecompositions (`method="eigen"`); differentiable in every
    argument.

    Example:
        >>> solve_sylvester(fnp.eye(2), fnp.eye(2), 2 * fnp.eye(2))
        Array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    a, b, c = (fnp.asarray(x) for x in (A, B, C))
    if a.ndim != 2 or b.ndim != 2 or c.shape != (a.shape[0], b.shape[0]):
        raise errors.op_error("solve_sylvester", f"incompatible shapes A {a.shape}, B "
                              f"{b.shape}, C {c.shape}", cls=errors.FuncgradValueError)
    if method not in ("schur", "eigen"):
        raise errors.op_error("solve_sylvester", f"method must be 'schur' or 'eigen', got "
                              f"{errors.short_repr(method)}", cls=errors.FuncgradValueError)
    dt = fnp.result_type(a, b, c, 1.0)
    x = _sylvester(a.astype(dt), b.astype(dt), c.astype(dt), method)
    return x if dt.kind == "c" else fnp.real(x).astype(dt)


def _sylvester_solve(a, b, c, method):
    if method == "eigen":
        da, va = fnp.linalg.eig(a)
        db, vb = fnp.linalg.eig(b)
        f = fnp.linalg.solve(va, _complex(c) @ vb)
        y = f / (da[:, None] + db[None, :])
        return va @ y @ fnp.linalg.inv(vb)
    ta, za = lax.linalg.schur(_complex(a))
    tb, zb = lax.linalg.schur(_complex(fnp.conj(b.T)))
    f = fnp.conj(za.T) @ _complex(c) @ zb
    y = _bartels_stewart(ta, fnp.conj(tb.T), f)
    return za @ y @ fnp.conj(zb.T)


def _real_like(x, a):
    return x if a.dtype.kind == "c" else fnp.real(x).astype(a.dtype)


@functools.partial(custom_jvp, nondiff_argnums=(3,))
def _sylvester(a, b, c, method):
    return _real_like(_sylvester_solve(a, b, c, method), a)


@_sylvester.defjvp
def _sylvester_jvp(method, primals, tangents):
    # A dX + dX B = dC - dA X - X dB: one more Sylvester solve with the same A and B
    a, b, c = (lax.stop_gradient(v) for v in primals)
    da, db, dc = tangents
    x = _real_like(_sylvester_solve(a, b, c, method), a)
    dx = _sylvester_solve(a, b, dc - da @ x - x @ db, method)
    return x, _real_like(dx, a)


def _bartels_stewart(ta, tb, f):
    """The y with ta y + y tb = f for upper triangular ta and lower triangular tb."""
    m, n = f.shape
    y = fnp.zeros_like(f)
    for j in range(n - 1, -1, -1):
        rhs = f[:, j] - y[:, j + 1:] @ tb[j + 1:, j]
        col = fnp.linalg.solve(ta + tb[j, j] * fnp.eye(m, dtype=ta.dtype), rhs)
        y = y.at[:, j].set(col)
    return y


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None, tol=None,
                     key=None):
    """The eigenvalues (and vectors) of the symmetric tridiagonal matrix with diagonal `d`
    and off-diagonal `e`: all (`select="a"`), those with indices in `select_range`
    (`select="i"`) or in the half-open interval `select_range` (`select="v"`, only with
    concrete values). Differentiable through `eigh`.

    Example:
        >>> eigh_tridiagonal(fnp.array([2.0, 2.0]), fnp.array([1.0]), eigvals_only=True)
        Array([1., 3.], dtype=float32)
    """
    d, e = fnp.asarray(d), fnp.asarray(e)
    if d.ndim != 1 or e.shape != (max(d.shape[0] - 1, 0),):
        raise errors.op_error("eigh_tridiagonal", f"d must be 1-D (n,) and e (n - 1,), got "
                              f"{d.shape} and {e.shape}", cls=errors.FuncgradValueError)
    dt = fnp.result_type(d, e, 1.0)
    t = fnp.diag(d.astype(dt)) + fnp.diag(e.astype(dt), 1) + fnp.diag(fnp.conj(e.astype(dt)),
                                                                       -1)
    w, v = fnp.linalg.eigh(t)
    if select == "i":
        lo, hi = (int(x) for x in select_range)
        w, v = w[lo:hi + 1], v[:, lo:hi + 1]
    elif select == "v":
        lo, hi = (float(x) for x in select_range)
        keep = np.flatnonzero((np.asarray(w) > lo) & (np.asarray(w) <= hi))
        w, v = w[keep], v[:, keep]
    elif select != "a":
        raise errors.op_error("eigh_tridiagonal", f"select must be 'a', 'i' or 'v', got "
                              f"{errors.short_repr(select)}", cls=errors.FuncgradValueError)
    return w if eigvals_only else (w, v)
