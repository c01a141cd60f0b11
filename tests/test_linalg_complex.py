"""Linear algebra on complex inputs: the decompositions and fnp.linalg against NumPy on
complex64, and derivatives (check_grads, complex128, orders 1-2 in both modes) of the
functions whose value does not depend on the phase of eigen/singular vectors.
"""

import numpy as np
import pytest
from test_linalg_lax import close

import funcgrad.numpy as fnp
from funcgrad.lax import linalg as L
from funcgrad.test_util import check_grads

R = np.random.default_rng(0)
A = R.standard_normal((2, 3, 3)) + 1j * R.standard_normal((2, 3, 3))
HPD = A @ np.conj(np.swapaxes(A, -1, -2)) + 3 * np.eye(3)
WELL = A + 3 * np.eye(3)
TALL = R.standard_normal((4, 3)) + 1j * R.standard_normal((4, 3))


def c64(x):
    return fnp.asarray(np.asarray(x, np.complex64))


def test_results_match_numpy():
    close(L.cholesky(c64(HPD)), np.linalg.cholesky(HPD), 1e-4)
    v, w = L.eigh(c64(HPD))
    assert w.dtype == np.float32 and v.dtype == np.complex64
    close(w, np.linalg.eigvalsh(HPD), 1e-4)
    close(L.svd(c64(A), compute_uv=False), np.linalg.svd(A, compute_uv=False), 1e-4)
    q, r = L.qr(c64(TALL), full_matrices=False)
    close(np.asarray(q) @ np.asarray(r), TALL, 1e-5)
    close(fnp.linalg.solve(c64(WELL), c64(A)), np.linalg.solve(WELL, A), 1e-4)
    close(fnp.linalg.inv(c64(WELL)), np.linalg.inv(WELL), 1e-4)
    close(fnp.linalg.det(c64(WELL)), np.linalg.det(WELL), 1e-3)
    sign, logdet = fnp.linalg.slogdet(c64(WELL))
    want = np.linalg.slogdet(WELL)
    close(sign, want.sign, 1e-5)
    close(logdet, want.logabsdet, 1e-5)
    close(fnp.linalg.pinv(c64(TALL)), np.linalg.pinv(TALL), 1e-4)
    close(fnp.linalg.norm(c64(A[0]), 2), np.linalg.norm(A[0], 2), 1e-5)
    x = L.triangular_solve(c64(np.tril(WELL)), c64(A), left_side=True, lower=True,
                           transpose_a=True, conjugate_a=True)
    close(x, np.linalg.solve(np.conj(np.swapaxes(np.tril(WELL), -1, -2)), A), 1e-4)


def _eig_invariant(x):
    v, w = L.eigh(x)
    return (v * fnp.exp(w)[..., None, :]) @ fnp.conj(fnp.swapaxes(v, -1, -2))


def _svd_invariant(x):
    u, s, vh = L.svd(x, full_matrices=False)
    return (u * s[..., None, :] ** 2) @ vh


DERIVATIVES = {
    "cholesky": (L.cholesky, (HPD,)),
    "triangular_solve": (lambda a, b: L.triangular_solve(
        a, b, left_side=True, lower=True, transpose_a=True, conjugate_a=True), (WELL, A)),
    "lu": (lambda x: L.lu(x)[0], (WELL,)),
    "qr": (lambda x: L.qr(x, full_matrices=False), (TALL,)),
    "eigh_invariant": (_eig_invariant, (HPD,)),
    "eigvalsh": (lambda x: L.eigh(x)[1], (HPD,)),
    "svd_invariant": (_svd_invariant, (TALL,)),
    "svdvals": (lambda x: L.svd(x, compute_uv=False), (A,)),
    "solve": (fnp.linalg.solve, (WELL, A)),
    "det": (fnp.linalg.det, (WELL,)),
    "slogdet": (lambda x: fnp.linalg.slogdet(x).logabsdet, (WELL,)),
}


@pytest.mark.parametrize("name", sorted(DERIVATIVES))
def test_derivatives(name):
    f, args = DERIVATIVES[name]
    check_grads(f, args, order=2, modes=("fwd", "rev"))
