"""The general eigen-decomposition (`lax.linalg.eig`, `fnp.linalg.eig`/`eigvals`) against
NumPy/SciPy on drawn shapes (eigenvectors compared through their defining equations and
normalization), derivatives of eigenvalues and right eigenvectors with check_grads (real and
complex input, orders 1-2, both modes), vmap/jit, and the errors for what is not defined.
"""

import numpy as np
import pytest
import scipy.linalg as sl
from hypothesis import given
from hypothesis import strategies as st
from test_linalg_lax import close

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradError
from funcgrad.lax import linalg as L
from funcgrad.test_util import check_grads


def _sorted(w):
    return np.sort_complex(np.asarray(w).ravel())


@given(batch=st.sampled_from([(), (2,), (0,)]), n=st.integers(0, 4),
       seed=st.integers(0, 2**16), complex_input=st.booleans())
def test_eig_matches_scipy(batch, n, seed, complex_input):
    r = np.random.default_rng(seed)
    a = r.standard_normal(batch + (n, n)) + (1j * r.standard_normal(batch + (n, n))
                                              if complex_input else 0)
    dt = np.complex64 if complex_input else np.float32
    w, vl, vr = (np.asarray(o) for o in L.eig(fnp.asarray(a.astype(dt))))
    assert w.dtype == vr.dtype == vl.dtype == np.complex64
    for idx in np.ndindex(*batch):
        close(_sorted(w[idx]), _sorted(sl.eigvals(a[idx])), 1e-3)
    if n:
        close(a @ vr, vr * w[..., None, :], 1e-3)  # a vr = vr w
        close(np.conj(np.swapaxes(vl, -1, -2)) @ a, w[..., :, None] * np.conj(
            np.swapaxes(vl, -1, -2)), 1e-3)  # vl^H a = w vl^H
        close(np.linalg.norm(vr, axis=-2), np.ones(batch + (n,)), 1e-5)
        top = np.take_along_axis(vr, np.argmax(np.abs(vr), -2)[..., None, :], -2)
        assert (np.abs(top.imag) < 1e-6).all() and (top.real > 0).all()
    res = fnp.linalg.eig(fnp.asarray(a.astype(dt)))
    close(res.eigenvalues, w)
    close(res.eigenvectors, vr)
    close(fnp.linalg.eigvals(fnp.asarray(a.astype(dt))), w)


R = np.random.default_rng(1)
REAL = R.standard_normal((2, 4, 4))  # complex-conjugate pairs and real eigenvalues
CPLX = R.standard_normal((3, 3)) + 1j * R.standard_normal((3, 3))


@pytest.mark.parametrize("x", [REAL, CPLX], ids=["real", "complex"])
def test_derivatives(x):
    check_grads(fnp.linalg.eigvals, (x,), order=2, modes=("fwd", "rev"))
    check_grads(lambda a: tuple(fnp.linalg.eig(a)), (x,), order=2, modes=("fwd", "rev"))


def test_vmap_and_jit():
    a = fnp.asarray(REAL.astype(np.float32))
    got = fg.vmap(fnp.linalg.eig)(a)
    for i in range(2):
        one = fnp.linalg.eig(a[i])
        close(got.eigenvalues[i], np.asarray(one.eigenvalues), 1e-6)
        close(got.eigenvectors[i], np.asarray(one.eigenvectors), 1e-6)
    close(fg.jit(fnp.linalg.eigvals)(a), np.asarray(fnp.linalg.eigvals(a)), 1e-6)


def test_what_is_not_defined_is_a_clear_error():
    with pytest.raises(FuncgradError, match="eig.*left eigenvectors"):
        fg.jvp(lambda a: L.eig(a)[1], (fnp.eye(2),), (fnp.eye(2),))
    with pytest.raises(FuncgradError, match="eig.*square"):
        fnp.linalg.eig(fnp.ones((2, 3)))
    assert np.isnan(np.asarray(fnp.linalg.eigvals(fnp.full((2, 2), np.nan)))).all()
