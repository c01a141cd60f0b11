"""The long tail's linear algebra (issue 28): lax.linalg's schur (the QR algorithm),
hessenberg, tridiagonal, householder_product, ormqr (against LAPACK through SciPy),
cholesky_update, tridiagonal_solve,
symmetric_product, qdwh, and scipy.linalg's special matrices, schur/rsf2csf, sqrtm, funm,
polar, expm_frechet, hessenberg, qr_multiply, solve_sylvester, eigh_tridiagonal, against
SciPy, with derivatives (check_grads), vmap and jit where they apply."""

import numpy as np
import pytest
import scipy.linalg as sl
from scipy.linalg import lapack
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.scipy.linalg as fl

R = np.random.default_rng(31)


def _quasi_triangular(t):
    n = t.shape[0]
    blocks = [i for i in range(n - 1) if t[i + 1, i] != 0]
    assert np.all(np.tril(t, -2) == 0)
    assert not any(b + 1 in blocks for b in blocks)  # no overlapping 2x2 blocks
    for i in blocks:  # LAPACK's standard form: equal diagonal, off-diagonals of both signs
        assert abs(t[i, i] - t[i + 1, i + 1]) < 1e-10 and t[i, i + 1] * t[i + 1, i] < 0


@pytest.mark.parametrize("n", [1, 2, 3, 6, 11])
def test_schur_real_and_complex(n):
    fg.config.update("enable_x64", True)
    for _ in range(3):
        a = R.normal(size=(n, n))
        t, z = (np.asarray(v) for v in lax.linalg.schur(a))
        close(z @ t @ z.T, a, 1e-10, 1e-10)
        close(z.T @ z, np.eye(n), 1e-12, 1e-12)
        _quasi_triangular(t)
        ev = np.linalg.eigvals(a)
        close(np.sort_complex(np.linalg.eigvals(t)), np.sort_complex(ev), 1e-8, 1e-8)
        c = a + 1j * R.normal(size=(n, n))
        t, z = (np.asarray(v) for v in lax.linalg.schur(c))
        close(z @ t @ z.conj().T, c, 1e-10, 1e-10)
        assert np.allclose(np.tril(t, -1), 0)


def test_schur_batches_jits_and_has_no_derivative():
    a = R.normal(size=(3, 4, 4)).astype(np.float32)
    t, z = lax.linalg.schur(a)
    close(fg.vmap(lambda m: lax.linalg.schur(m)[0])(a), t)
    close(fg.jit(lambda m: lax.linalg.schur(m)[1])(a), z)
    with pytest.raises(TypeError, match="no derivative"):
        fg.grad(lambda m: lax.linalg.schur(m)[0].sum())(a[0])


def test_hessenberg_householder_product_ormqr_match_lapack():
    fg.config.update("enable_x64", True)
    a = R.normal(size=(6, 6))
    packed, taus = lax.linalg.hessenberg(a)
    want, want_tau, _ = lapack.dgehrd(a)
    close(packed, want, 1e-12, 1e-12)
    close(taus, want_tau[:5], 1e-12, 1e-12)
    qa, qtau, _, _ = lapack.dgeqrf(R.normal(size=(5, 3)))
    close(lax.linalg.householder_product(qa, qtau), lapack.dorgqr(qa, qtau)[0], 1e-12, 1e-12)
    c = R.normal(size=(5, 2))
    close(lax.linalg.ormqr(qa, qtau, c, transpose=True),
          lapack.dormqr("L", "T", qa, qtau, c, 5)[0], 1e-12, 1e-12)
    fg.config.update("enable_x64", False)
    qa32, qtau32 = qa.astype(np.float32), qtau.astype(np.float32)
    check_all(lax.linalg.householder_product, (qa32, qtau32), grad=(0, 1), rtol=1e-4)


def test_tridiagonal_and_complex_hessenberg_match_lapack():
    fg.config.update("enable_x64", True)
    c = R.normal(size=(5, 5)) + 1j * R.normal(size=(5, 5))
    packed, taus = lax.linalg.hessenberg(c)
    want, want_tau, _ = lapack.zgehrd(c)  # the last reflector makes the subdiagonal real
    close((packed, taus), (want, want_tau[:4]), 1e-12, 1e-12)
    for a, routine in ((R.normal(size=(5, 5)), lapack.dsytrd), (c, lapack.zhetrd)):
        for lower in (True, False):  # only that triangle is read (the other is kept)
            *want, _ = routine(a, lower=int(lower))
            close(lax.linalg.tridiagonal(a, lower=lower), tuple(want), 1e-12, 1e-12)
    fg.config.update("enable_x64", False)
    batch = R.normal(size=(3, 4, 4)).astype(np.float32)
    close(fg.vmap(lambda m: lax.linalg.tridiagonal(m, lower=False))(batch),
          lax.linalg.tridiagonal(batch, lower=False), 1e-5, 1e-5)
    close(fg.jit(lax.linalg.tridiagonal)(batch), lax.linalg.tridiagonal(batch), 1e-5, 1e-5)


def test_cholesky_update_and_algorithm_enums():
    fg.config.update("enable_x64", True)
    a = R.normal(size=(4, 4))
    r = np.linalg.cholesky(a @ a.T + 4 * np.eye(4)).T
    w = R.normal(size=4)
    new = np.asarray(lax.linalg.cholesky_update(r, w))
    close(new.T @ new, r.T @ r + np.outer(w, w), 1e-12, 1e-12)
    close(np.abs(new), np.abs(np.linalg.cholesky(r.T @ r + np.outer(w, w)).T), 1e-12, 1e-12)
    close(lax.linalg.cholesky_update(r, np.zeros(4)), r)  # zero rotations leave R as it is
    fg.config.update("enable_x64", False)
    check_all(lax.linalg.cholesky_update, (r.astype(np.float32), w.astype(np.float32)),
              grad=(0, 1), rtol=1e-4, atol=1e-5)
    m = np.eye(3, dtype=np.float32)
    lax.linalg.svd(m, algorithm=lax.linalg.SvdAlgorithm.QR)
    lax.linalg.eigh(m, implementation=lax.linalg.EighImplementation.QR)
    lax.linalg.eig(m, implementation=lax.linalg.EigImplementation.LAPACK)
    with pytest.raises(fg.errors.FuncgradNotImplementedError):
        lax.linalg.svd(m, algorithm=lax.linalg.SvdAlgorithm.JACOBI)


def test_tridiagonal_solve_and_symmetric_product():
    dl, du = R.normal(size=(2, 6)).astype(np.float32), R.normal(size=(2, 6)).astype(np.float32)
    d = (R.normal(size=(2, 6)) + 4).astype(np.float32)
    b = R.normal(size=(2, 6, 3)).astype(np.float32)
    mats = [np.diag(d[k]) + np.diag(dl[k, 1:], -1) + np.diag(du[k, :-1], 1) for k in range(2)]
    want = np.stack([np.linalg.solve(m, bb) for m, bb in zip(mats, b)])
    check_all(lax.linalg.tridiagonal_solve, (dl, d, du, b), want, grad=(0, 1, 2, 3),
              rtol=1e-4, atol=1e-5)
    x = R.normal(size=(4, 3)).astype(np.float32)
    check_all(lambda x, c: lax.linalg.symmetric_product(x, c, alpha=2.0, beta=0.5),
              (x, np.eye(4, dtype=np.float32)), 2 * x @ x.T + 0.5 * np.eye(4), grad=(0, 1))


def test_qdwh_and_polar():
    fg.config.update("enable_x64", True)
    x = R.normal(size=(5, 3))
    u, h, _, _ = lax.linalg.qdwh(x)
    uu, pp = sl.polar(x)
    close((u, h), (uu, pp), 1e-8, 1e-8)
    a = R.normal(size=(4, 4))
    for side in ("right", "left"):
        for method in ("qdwh", "svd"):
            close(fl.polar(a, side, method=method), sl.polar(a, side), 1e-8, 1e-8)
    fg.config.update("enable_x64", False)
    check_all(lambda x: fl.polar(x)[0], (x.astype(np.float32),), grad=(0,), rtol=1e-4,
              grad_tol=5e-4)


def test_sqrtm_funm_schur_rsf2csf():
    fg.config.update("enable_x64", True)
    a = R.normal(size=(5, 5))
    spd = a @ a.T + np.eye(5)
    close(fl.sqrtm(spd), sl.sqrtm(spd).astype(np.complex128), 1e-8, 1e-8)
    s = np.asarray(fl.sqrtm(a))
    close(s @ s, a.astype(np.complex128), 1e-8, 1e-8)
    close(fl.funm(a, np.exp), sl.expm(a).astype(np.complex128), 1e-8, 1e-8)
    close(fl.funm(a, np.sin), sl.funm(a, np.sin).astype(np.complex128), 1e-8, 1e-8)
    t, z = fl.schur(a)
    tc, zc = (np.asarray(v) for v in fl.rsf2csf(t, z))
    close(zc @ tc @ zc.conj().T, a.astype(np.complex128), 1e-10, 1e-10)
    assert np.allclose(np.tril(tc, -1), 0)
    fg.config.update("enable_x64", False)
    m = (spd / 5).astype(np.float32)
    check_all(lambda m: fl.sqrtm(m).real, (m,), sl.sqrtm(m).real, grad=(0,), rtol=1e-4,
              atol=1e-5)


def test_expm_frechet_hessenberg_qr_multiply_sylvester_tridiagonal():
    fg.config.update("enable_x64", True)
    a, e = R.normal(size=(5, 5)) * 0.3, R.normal(size=(5, 5))
    close(fl.expm_frechet(a, e), sl.expm_frechet(a, e), 1e-8, 1e-10)
    close(fl.hessenberg(a, calc_q=True), sl.hessenberg(a, calc_q=True), 1e-10, 1e-12)
    c = R.normal(size=(2, 5))
    close(fl.qr_multiply(a, c)[0], sl.qr_multiply(a, c)[0], 1e-10, 1e-12)
    b, cc = R.normal(size=(3, 3)), R.normal(size=(5, 3))
    for method in ("schur", "eigen"):
        close(fl.solve_sylvester(a + 3 * np.eye(5), b, cc, method=method),
              sl.solve_sylvester(a + 3 * np.eye(5), b, cc), 1e-8, 1e-10)
    d, off = R.normal(size=6), R.normal(size=5)
    w, v = fl.eigh_tridiagonal(d, off)
    ww, vv = sl.eigh_tridiagonal(d, off)
    close((w, np.abs(v)), (ww, np.abs(vv)), 1e-10, 1e-10)
    close(fl.eigh_tridiagonal(d, off, eigvals_only=True, select="i", select_range=(1, 3)),
          sl.eigh_tridiagonal(d, off, eigvals_only=True, select="i", select_range=(1, 3)),
          1e-10)
    fg.config.update("enable_x64", False)
    a32, e32 = a.astype(np.float32), e.astype(np.float32)
    check_all(lambda a, e: fl.expm_frechet(a, e, compute_expm=False), (a32, e32),
              grad=(0, 1), rtol=1e-4, atol=1e-5)
    for method in ("schur", "eigen"):  # differentiable in A, B and C (JAX's is not)
        check_all(lambda x, y, z, m=method: fl.solve_sylvester(x, y, z, method=m),
                  (a32 + 3 * np.eye(5, dtype=np.float32), b.astype(np.float32),
                   cc.astype(np.float32)), grad=(0, 1, 2), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name,args", [
    ("toeplitz", (R.normal(size=4), R.normal(size=3))), ("hankel", (R.normal(size=4),
                                                                   R.normal(size=3))),
    ("circulant", (R.normal(size=4),)), ("fiedler", (R.normal(size=4),)),
    ("companion", (np.array([1.0, -3.0, 2.0, 5.0]),)),
    ("fiedler_companion", (np.array([1.0, -3.0, 2.0, 5.0, -1.0]),)),
    ("leslie", (np.array([0.1, 2.0, 1.5]), np.array([0.2, 0.8]))),
])
def test_special_matrices_match_scipy(name, args):
    fg.config.update("enable_x64", True)
    close(getattr(fl, name)(*args), getattr(sl, name)(*args), 1e-12, 1e-12)
    fg.config.update("enable_x64", False)
    check_all(getattr(fl, name), tuple(a.astype(np.float32) for a in args),
              grad=tuple(range(len(args))), batch=() if name in ("companion", "leslie",
                                                                 "fiedler_companion") else None)


def test_special_matrices_of_a_size_and_batches():
    for mode in ("full", "same", "valid"):
        for n in (2, 3, 6):
            close(fl.convolution_matrix(np.array([1.0, -3.0, 2.0]), n, mode),
                  sl.convolution_matrix(np.array([1.0, -3.0, 2.0]), n, mode).astype(
                      np.float32))
    close(fl.dft(5, "sqrtn"), sl.dft(5, "sqrtn").astype(np.complex64), 1e-6, 1e-6)
    close(fl.hadamard(8), sl.hadamard(8).astype(np.int32))
    close(fl.helmert(5, True), sl.helmert(5, True).astype(np.float32), 1e-6, 1e-7)
    close(fl.hilbert(5), sl.hilbert(5).astype(np.float32))
    close(fl.invhilbert(6), sl.invhilbert(6).astype(np.float32), 1e-6)
    for kind in ("symmetric", "lower", "upper"):
        close(fl.pascal(5, kind), sl.pascal(5, kind).astype(np.float32))
        close(fl.invpascal(5, kind), sl.invpascal(5, kind).astype(np.float32))
    c = R.normal(size=(2, 3)).astype(np.float32)
    close(fl.toeplitz(c, c[:, ::-1]), np.stack([sl.toeplitz(x, x[::-1]) for x in c]))
