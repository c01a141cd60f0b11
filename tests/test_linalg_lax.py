"""funcgrad.lax.linalg's decompositions (cholesky, triangular_solve, lu, qr, eigh, svd):
results against NumPy/SciPy on hypothesis-drawn shapes (batched, size 0 and 1), derivatives
with check_grads (orders 1-2, forward and reverse, on well-conditioned inputs drawn on
purpose), vmap against a Python loop, jit against eager, NaN instead of LAPACK exceptions,
and errors that name the operation and the shapes.
"""

import numpy as np
import pytest
import scipy.linalg as sl
from hypothesis import given, settings
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradError
from funcgrad.lax import linalg as L
from funcgrad.test_util import check_grads

batches = st.sampled_from([(), (1,), (2,), (0,), (2, 1)])
sizes = st.integers(0, 4)
seeds = st.integers(0, 2**16)


def _rng(seed):
    return np.random.default_rng(seed)


def spd(rng, batch, n):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def well_conditioned(rng, batch, n):
    return rng.standard_normal(batch + (n, n)) + 3 * np.eye(n)


def distinct_symmetric(rng, batch, n):
    """Symmetric matrices with eigenvalues 1, 2, ..., n (well separated)."""
    q = np.linalg.qr(rng.standard_normal(batch + (n, n)))[0]
    return q @ (np.arange(1.0, n + 1) * np.eye(n)) @ np.swapaxes(q, -1, -2)


def distinct_singular(rng, batch, m, n):
    """(m, n) matrices with singular values 1, 2, ..., min(m, n)."""
    u = np.linalg.qr(rng.standard_normal(batch + (m, m)))[0]
    v = np.linalg.qr(rng.standard_normal(batch + (n, n)))[0]
    k = min(m, n)
    s = np.zeros(batch + (m, n))
    s[..., range(k), range(k)] = np.arange(1.0, k + 1)
    return u @ s @ v


def f32(x):
    return fnp.asarray(np.asarray(x, np.float32))


def close(got, want, tol=2e-4):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# --- results against NumPy/SciPy ---------------------------------------------------------------
@given(batch=batches, n=sizes, seed=seeds)
def test_cholesky_matches_numpy(batch, n, seed):
    a = spd(_rng(seed), batch, n)
    close(L.cholesky(f32(a)), np.linalg.cholesky(a), 1e-3)


@given(batch=batches, m=sizes, k=sizes, seed=seeds, left=st.booleans(), lower=st.booleans(),
       trans=st.booleans(), unit=st.booleans())
def test_triangular_solve_matches_scipy(batch, m, k, seed, left, lower, trans, unit):
    rng = _rng(seed)
    a = well_conditioned(rng, batch, m)
    b = rng.standard_normal(batch + ((m, k) if left else (k, m)))
    got = L.triangular_solve(f32(a), f32(b), left_side=left, lower=lower, transpose_a=trans,
                             unit_diagonal=unit)
    want = np.zeros(b.shape)
    for idx in np.ndindex(*batch):
        ai, bi = a[idx], b[idx]
        if left:
            want[idx] = sl.solve_triangular(ai, bi, trans=int(trans), lower=lower,
                                            unit_diagonal=unit) if m else bi
        else:  # x op(a) = b  <=>  op(a)^T x^T = b^T
            want[idx] = sl.solve_triangular(ai, bi.T, trans=1 - int(trans), lower=lower,
                                            unit_diagonal=unit).T if m else bi
    close(got, want, 1e-3)


@given(batch=batches, m=sizes, n=sizes, seed=seeds)
def test_lu_matches_scipy(batch, m, n, seed):
    a = _rng(seed).standard_normal(batch + (m, n))
    lu, piv, perm = L.lu(f32(a))
    assert piv.dtype == np.int32 and perm.dtype == np.int32
    assert piv.shape == batch + (min(m, n),) and perm.shape == batch + (m,)
    for idx in np.ndindex(*batch):
        if m and n:
            want_lu, want_piv = sl.lu_factor(a[idx])
            close(np.asarray(lu)[idx], want_lu, 1e-3)
            np.testing.assert_array_equal(np.asarray(piv)[idx], want_piv)
    close(L.lu_pivots_to_permutation(piv, m), np.asarray(perm))
    # x[perm] = L U
    k = min(m, n)
    lo = np.tril(np.asarray(lu)[..., :, :k], -1) + np.eye(m, k)
    up = np.triu(np.asarray(lu)[..., :k, :])
    close(np.take_along_axis(a, np.asarray(perm)[..., None], -2), lo @ up, 1e-3)


@pytest.mark.parametrize("lower, trans", [(True, False), (False, False), (True, True)])
def test_blocked_triangular_solve_of_larger_matrices_matches_scipy(lower, trans):
    """Past one block (64 rows): the halves and their off-diagonal product."""
    fg.config.update("enable_x64", True)
    r = np.random.default_rng(8)
    a, b = well_conditioned(r, (2,), 150), r.standard_normal((2, 150, 3))
    got = L.triangular_solve(fnp.asarray(a), fnp.asarray(b), left_side=True, lower=lower,
                             transpose_a=trans)
    for i in range(2):
        close(np.asarray(got)[i], sl.solve_triangular(a[i], b[i], lower=lower,
                                                      trans=int(trans)), 1e-9)


@pytest.mark.parametrize("shape", [(2, 70, 90), (90, 70), (65, 65)])
def test_blocked_lu_of_larger_matrices_matches_scipy(shape):
    """Past one panel (32 columns): the triangular solve and trailing update of blocked LU."""
    a = np.random.default_rng(7).standard_normal(shape)
    fg.config.update("enable_x64", True)
    lu, piv, _ = L.lu(fnp.asarray(a))
    for idx in np.ndindex(*shape[:-2]):
        want_lu, want_piv = sl.lu_factor(a[idx])
        close(np.asarray(lu)[idx], want_lu, 1e-10)
        np.testing.assert_array_equal(np.asarray(piv)[idx], want_piv)


@given(batch=batches, m=sizes, n=sizes, seed=seeds, full=st.booleans())
def test_qr_matches_numpy(batch, m, n, seed, full):
    a = _rng(seed).standard_normal(batch + (m, n))
    q, r = L.qr(f32(a), full_matrices=full)
    wq, wr = np.linalg.qr(a, mode="complete" if full else "reduced")
    assert q.shape == wq.shape and r.shape == wr.shape
    close(np.asarray(q) @ np.asarray(r), a, 1e-3)
    close(np.abs(np.asarray(r)), np.abs(wr), 1e-3)  # equal up to the signs of rows
    close(np.swapaxes(np.asarray(q), -1, -2) @ np.asarray(q), np.broadcast_to(
        np.eye(q.shape[-1]), batch + (q.shape[-1],) * 2), 1e-3)


@given(batch=batches, n=sizes, seed=seeds)
def test_eigh_matches_numpy(batch, n, seed):
    a = distinct_symmetric(_rng(seed), batch, n)
    v, w = L.eigh(f32(a))
    close(w, np.linalg.eigvalsh(a), 1e-3)
    close(np.asarray(v) @ (np.asarray(w)[..., None] * np.swapaxes(np.asarray(v), -1, -2)), a,
          1e-3)


@given(batch=batches, m=sizes, n=sizes, seed=seeds, full=st.booleans())
def test_svd_matches_numpy(batch, m, n, seed, full):
    a = _rng(seed).standard_normal(batch + (m, n))
    u, s, vh = L.svd(f32(a), full_matrices=full)
    wu, ws, wvh = np.linalg.svd(a, full_matrices=full)
    assert u.shape == wu.shape and vh.shape == wvh.shape
    close(s, ws, 1e-3)
    k = min(m, n)
    close((np.asarray(u)[..., :, :k] * np.asarray(s)[..., None, :]) @ np.asarray(vh)[..., :k, :],
          a, 1e-3)
    close(L.svd(f32(a), compute_uv=False), ws, 1e-3)


# --- bad input: NaN like JAX, errors naming the operation ---------------------------------------
def test_rejected_matrices_give_nan_not_exceptions():
    bad = np.stack([np.eye(2), -np.eye(2)]).astype(np.float32)
    c = np.asarray(L.cholesky(fnp.asarray(bad)))
    close(c[0], np.eye(2))
    assert np.isnan(c[1]).all()
    x = np.asarray(L.triangular_solve(fnp.zeros((2, 2)), fnp.ones((2, 1)), left_side=True,
                                      lower=True))
    assert not np.isfinite(x).any()
    lu, piv, perm = L.lu(fnp.zeros((3, 3)))
    assert (np.asarray(lu) == 0).all() and np.asarray(perm).tolist() == [0, 1, 2]
    nan = fnp.full((2, 2), np.nan)
    assert np.isnan(np.asarray(L.svd(nan, compute_uv=False))).all()
    assert np.isnan(np.asarray(L.eigh(nan)[1])).all()


@pytest.mark.parametrize("call, words", [
    (lambda: L.cholesky(fnp.ones((2, 3))), ["cholesky", "square", "f32[2,3]"]),
    (lambda: L.eigh(fnp.ones((3, 2))), ["eigh", "square", "f32[3,2]"]),
    (lambda: L.qr(fnp.ones(3)), ["qr", "rank >= 2", "f32[3]"]),
    (lambda: L.lu(fnp.ones((2, 2), dtype=np.int32)), ["lu", "floating", "i32[2,2]"]),
    (lambda: L.triangular_solve(fnp.ones((2, 2)), fnp.ones((3, 1)), left_side=True),
     ["triangular_solve", "f32[2,2]", "f32[3,1]"]),
    (lambda: L.triangular_solve(fnp.ones((2, 2, 2)), fnp.ones((3, 2, 1)), left_side=True),
     ["triangular_solve", "batch", "f32[3,2,1]"]),
    (lambda: L.svd(fnp.ones((2,))), ["svd", "rank >= 2"]),
])
def test_errors_name_operation_and_shapes(call, words):
    with pytest.raises(FuncgradError) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_unsupported_derivatives_are_clear_errors():
    with pytest.raises(FuncgradError, match="qr.*m >= n"):
        fg.jvp(lambda x: L.qr(x, full_matrices=False)[0], (fnp.ones((2, 3)),),
               (fnp.ones((2, 3)),))
    with pytest.raises(FuncgradError, match="svd.*full_matrices"):
        fg.grad(lambda x: L.svd(x)[0].sum())(fnp.ones((3, 2)))


# --- derivatives -----------------------------------------------------------------------------
R = np.random.default_rng(0)
TRI = np.tril(R.standard_normal((2, 3, 3))) + 3 * np.eye(3)
DERIVATIVES = {
    "cholesky": (L.cholesky, (spd(R, (2,), 3),)),
    "triangular_solve_left_lower": (lambda a, b: L.triangular_solve(
        a, b, left_side=True, lower=True), (TRI, R.standard_normal((2, 3, 2)))),
    "triangular_solve_right_transposed": (lambda a, b: L.triangular_solve(
        a, b, left_side=False, lower=True, transpose_a=True), (TRI, R.standard_normal((2, 4, 3)))),
    "triangular_solve_unit_upper": (lambda a, b: L.triangular_solve(
        a, b, left_side=True, lower=False, unit_diagonal=True),
        (np.swapaxes(TRI, -1, -2), R.standard_normal((2, 3, 1)))),
    "lu_square": (lambda x: L.lu(x)[0], (well_conditioned(R, (2,), 3),)),
    "lu_wide": (lambda x: L.lu(x)[0], (R.standard_normal((3, 4)) + np.eye(3, 4) * 3,)),
    "lu_tall": (lambda x: L.lu(x)[0], (R.standard_normal((4, 3)) + np.eye(4, 3) * 3,)),
    "qr_reduced": (lambda x: L.qr(x, full_matrices=False), (R.standard_normal((2, 4, 3)),)),
    "qr_square": (L.qr, (well_conditioned(R, (), 3),)),
    "eigh": (L.eigh, (distinct_symmetric(R, (2,), 3),)),
    "svd_tall": (lambda x: L.svd(x, full_matrices=False), (distinct_singular(R, (2,), 4, 3),)),
    "svd_wide": (lambda x: L.svd(x, full_matrices=False), (distinct_singular(R, (), 2, 4),)),
    "svd_values": (lambda x: L.svd(x, compute_uv=False), (distinct_singular(R, (), 3, 3),)),
}


@pytest.mark.parametrize("name", sorted(DERIVATIVES))
def test_derivatives(name):
    f, args = DERIVATIVES[name]
    check_grads(f, args, order=2, modes=("fwd", "rev"))


def test_cholesky_gradient_is_symmetric_like_jax():
    a = spd(np.random.default_rng(1), (), 3).astype(np.float32)
    g = np.asarray(fg.grad(lambda x: L.cholesky(x)[2, 0])(fnp.asarray(a)))
    close(g, g.T, 1e-5)


# --- vmap against a loop, jit against eager ------------------------------------------------------
RULES = {
    "cholesky": (L.cholesky, lambda r: (spd(r, (3,), 3),)),
    "triangular_solve": (lambda a, b: L.triangular_solve(a, b, left_side=True, lower=True),
                         lambda r: (well_conditioned(r, (3,), 3), r.standard_normal((3, 3, 2)))),
    "lu": (L.lu, lambda r: (r.standard_normal((3, 3, 4)),)),
    "qr": (L.qr, lambda r: (r.standard_normal((3, 4, 3)),)),
    "eigh": (L.eigh, lambda r: (distinct_symmetric(r, (3,), 3),)),
    "svd": (lambda x: L.svd(x, full_matrices=False), lambda r: (r.standard_normal((3, 2, 4)),)),
    "svdvals": (lambda x: L.svd(x, compute_uv=False), lambda r: (r.standard_normal((3, 2, 4)),)),
}


def _leaves(x):
    return [np.asarray(v) for v in fg.tree_util.tree_leaves(x)]


@pytest.mark.parametrize("name", sorted(RULES))
def test_vmap_matches_a_loop_and_jit_matches_eager(name):
    f, make = RULES[name]
    args = [f32(a) for a in make(np.random.default_rng(2))]
    for axis in (0, 1):
        moved = [fnp.moveaxis(a, 0, min(axis, a.ndim - 1)) for a in args]
        got = fg.vmap(f, in_axes=min(axis, 1))(*moved)
        loop = [f(*[a[i] for a in args]) for i in range(3)]
        for g, *each in zip(_leaves(got), *[_leaves(x) for x in loop]):
            close(g, np.stack(each), 1e-5)
    for g, e in zip(_leaves(fg.jit(f)(*args)), _leaves(f(*args))):
        close(g, e, 1e-6)


def test_vmap_with_an_unbatched_operand():
    a, b = well_conditioned(np.random.default_rng(3), (), 3), np.ones((4, 3, 2))
    got = fg.vmap(lambda b: L.triangular_solve(f32(a), b, left_side=True, lower=True))(f32(b))
    want = sl.solve_triangular(np.tril(a), b[0], lower=True)
    close(got, np.broadcast_to(want, (4, 3, 2)), 1e-4)


def test_grad_under_jit_and_vmap_of_grad():
    a = spd(np.random.default_rng(4), (3,), 3)

    def f(x):
        return fnp.sum(L.cholesky(x) ** 2) + fnp.sum(L.eigh(x)[1] ** 3)
    g = fg.grad(f)
    eager = np.asarray(fg.vmap(g)(f32(a)))
    close(fg.jit(fg.vmap(g))(f32(a)), eager, 1e-4)
    close(np.stack([np.asarray(g(f32(x))) for x in a]), eager, 1e-4)


def test_jit_source_calls_the_library():
    text = fg.jit(L.cholesky).lower(fnp.eye(3)).compile().as_text()
    assert "cholesky" in text


@settings(max_examples=10)
@given(seed=seeds)
def test_float64_under_x64(seed):
    fg.config.update("enable_x64", True)
    a = spd(_rng(seed), (2,), 3)
    got = L.cholesky(fnp.asarray(a))
    assert got.dtype == np.float64
    close(got, np.linalg.cholesky(a), 1e-10)
