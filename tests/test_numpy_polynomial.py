"""funcgrad.numpy's polynomial functions (numpy/polynomial.py) against NumPy (JAX's layout
where JAX differs: `polydiv`'s untrimmed remainder, NaN roots for leading zeros under
`strip_zeros=False`), with derivatives, vmap against a loop and jit against eager."""

import numpy as np
import pytest
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.numpy as fnp

P = np.array([1.0, -3.0, 2.0, 0.5], np.float32)
Q = np.array([2.0, 0.5], np.float32)
X = np.linspace(-1, 2, 7).astype(np.float32)


def test_polyval():
    check_all(fnp.polyval, (P, X), np.polyval(P, X), grad=(0, 1), order=2)
    pp = np.stack([P, P * 2], 1)  # two polynomials as columns
    close(fnp.polyval(pp, 2.0), np.stack([np.polyval(P, 2.0), np.polyval(P * 2, 2.0)]))


@pytest.mark.parametrize("name", ["polyadd", "polysub", "polymul"])
def test_arithmetic(name):
    for a, b in ((P, Q), (Q, P)):
        check_all(getattr(fnp, name), (a, b), getattr(np, name)(a, b), grad=(0, 1))
    close(fnp.polymul(np.array([0.0, 0.0, 1.0, 2.0]), Q, trim_leading_zeros=True),
          np.polymul([1.0, 2.0], Q).astype(np.float32))


def test_polydiv_keeps_the_remainder_length():
    q, r = fnp.polydiv(P, Q)
    wq, wr = np.polydiv(P, Q)
    close(q, wq.astype(np.float32))
    close(r[-len(wr):], wr.astype(np.float32), 1e-5, 1e-5)
    assert r.shape == P.shape and np.all(np.asarray(r[:len(P) - len(wr)]) == 0)
    close(fnp.polydiv(P, Q, trim_leading_zeros=True)[1], wr.astype(np.float32), 1e-5, 1e-5)
    check_all(lambda u, v: fnp.polydiv(u, v), (P, Q), grad=(0, 1))


def test_polyder_polyint():
    for m in (0, 1, 2, 5):
        close(fnp.polyder(P, m), np.polyder(P, m).astype(np.float32))
    close(fnp.polyint(P), np.polyint(P).astype(np.float32))
    close(fnp.polyint(P, 2, [1.0, 2.0]), np.polyint(P, 2, [1.0, 2.0]).astype(np.float32))
    check_all(lambda p: fnp.polyint(fnp.polyder(p, 2), 2, 3.0), (P,), grad=(0,))
    with pytest.raises(ValueError, match="non-negative"):
        fnp.polyder(P, -1)


def test_vander():
    close(fnp.vander(X, 4), np.vander(X, 4), 1e-5)
    close(fnp.vander(np.array([2, 3]), increasing=True), np.vander([2, 3], increasing=True))
    check_all(lambda x: fnp.vander(x, 3), (X,), np.vander(X, 3), grad=(0,))


def test_polyfit_matches_numpy():
    x = np.linspace(0, 1, 9)
    y = np.stack([x ** 2, 1 - x], 1) + 0.01 * np.sin(np.arange(9))[:, None]
    fg.config.update("enable_x64", True)
    close(fnp.polyfit(x, y[:, 0], 2), np.polyfit(x, y[:, 0], 2), 1e-7, 1e-9)
    close(fnp.polyfit(x, y, 1), np.polyfit(x, y, 1), 1e-7, 1e-9)
    w = np.arange(1.0, 10.0)
    close(fnp.polyfit(x, y[:, 0], 2, w=w), np.polyfit(x, y[:, 0], 2, w=w), 1e-7, 1e-9)
    close(fnp.polyfit(x, y[:, 0], 2, cov=True), np.polyfit(x, y[:, 0], 2, cov=True), 1e-6,
          1e-10)
    got, want = fnp.polyfit(x, y[:, 0], 2, full=True), np.polyfit(x, y[:, 0], 2, full=True)
    close(got, want, 1e-6, 1e-10)
    check_all(lambda y: fnp.polyfit(x, y, 2), (y[:, 0],), grad=(0,))


def test_poly_and_roots():
    close(fnp.poly(np.array([1.0, 2.0, -0.5])), np.poly([1.0, 2.0, -0.5]).astype(np.float32),
          1e-6)
    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    close(fnp.poly(m).real, np.poly(m).astype(np.float32), 1e-5, 1e-5)
    r = np.asarray(fnp.roots(np.array([0.0, 1.0, -3.0, 2.0])))
    close(np.sort_complex(r), np.array([1, 2], np.complex64), 1e-5, 1e-5)
    z = np.asarray(fg.jit(lambda p: fnp.roots(p, strip_zeros=False))(
        np.array([0.0, 1.0, -3.0, 2.0])))
    assert np.isnan(z[-1]) and np.allclose(np.sort_complex(z[:2]), [1, 2], atol=1e-5)
    p = np.array([1.0, -2.95, 2.2], np.float32)  # two well separated real roots
    check_all(lambda p: fnp.roots(p, strip_zeros=False).real, (p,), grad=(0,), jit=False)
    check_all(fnp.poly, (np.array([0.5, -1.0, 2.0], np.float32),), grad=(0,))
