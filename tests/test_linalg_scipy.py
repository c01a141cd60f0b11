"""funcgrad.scipy.linalg against scipy.linalg (results on drawn shapes, the triangle SciPy
reads, return layouts), derivatives with check_grads, vmap/jit, errors; and
nn.initializers.orthogonal (orthonormality, column_axis, scale, JAX's sign convention).
"""

import numpy as np
import pytest
import scipy.linalg as sl
from hypothesis import given
from hypothesis import strategies as st
from test_linalg_lax import close, distinct_symmetric, f32, spd, well_conditioned

import funcgrad as fg
import funcgrad.numpy as fnp
import funcgrad.scipy.linalg as jsl
from funcgrad import random
from funcgrad.errors import FuncgradError
from funcgrad.nn import initializers
from funcgrad.test_util import check_grads

sizes = st.integers(1, 4)
seeds = st.integers(0, 2**16)


def rng(seed):
    return np.random.default_rng(seed)


def noisy(a, seed):
    """`a` with noise in the triangle SciPy does not read (it must not matter)."""
    return a + np.triu(rng(seed + 1).standard_normal(a.shape), 1) * 10


@given(n=sizes, k=st.integers(1, 3), seed=seeds, lower=st.booleans(), vector=st.booleans())
def test_cholesky_cho_factor_cho_solve(n, k, seed, lower, vector):
    a = spd(rng(seed), (), n)
    a_read = noisy(a, seed) if lower else noisy(a, seed).T  # junk in the unread triangle
    b = rng(seed + 2).standard_normal((n,) if vector else (n, k))
    close(jsl.cholesky(f32(a_read), lower=lower), sl.cholesky(a, lower=lower), 1e-3)
    c, low = jsl.cho_factor(f32(a_read), lower=lower)
    assert low is lower
    close(jsl.cho_solve((c, low), f32(b)), sl.cho_solve(sl.cho_factor(a, lower=lower), b), 1e-3)


@given(n=sizes, k=st.integers(1, 3), seed=seeds, lower=st.booleans(),
       trans=st.sampled_from([0, 1, 2, "N", "T", "C"]), unit=st.booleans())
def test_solve_triangular(n, k, seed, lower, trans, unit):
    r = rng(seed)
    a, b = well_conditioned(r, (), n), r.standard_normal((n, k))
    close(jsl.solve_triangular(f32(a), f32(b), trans=trans, lower=lower, unit_diagonal=unit),
          sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit), 1e-3)


@given(m=sizes, n=sizes, seed=seeds, permute_l=st.booleans())
def test_lu(m, n, seed, permute_l):
    a = rng(seed).standard_normal((m, n))
    got, want = jsl.lu(f32(a), permute_l=permute_l), sl.lu(a, permute_l=permute_l)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w, 1e-3)


@given(n=sizes, k=st.integers(1, 3), seed=seeds, trans=st.sampled_from([0, 1, 2]))
def test_lu_factor_lu_solve(n, k, seed, trans):
    r = rng(seed)
    a, b = well_conditioned(r, (), n), r.standard_normal((n, k))
    lu, piv = jsl.lu_factor(f32(a))
    wlu, wpiv = sl.lu_factor(a)
    close(lu, wlu, 1e-3)
    np.testing.assert_array_equal(np.asarray(piv), wpiv)
    close(jsl.lu_solve((lu, piv), f32(b), trans=trans), sl.lu_solve((wlu, wpiv), b, trans=trans),
          1e-3)


def test_lu_factor_of_rectangular_matrices():
    for shape in [(4, 3), (3, 4)]:
        a = rng(9).standard_normal(shape)
        lu, piv = jsl.lu_factor(f32(a))
        wlu, wpiv = sl.lu_factor(a)
        close(lu, wlu, 1e-4)
        np.testing.assert_array_equal(np.asarray(piv), wpiv)


def test_lu_solve_batched_and_jitted():
    a, b = well_conditioned(rng(1), (3,), 4), rng(2).standard_normal((3, 4, 2))
    lu_solve = fg.jit(lambda a, b: jsl.lu_solve(jsl.lu_factor(a), b))
    want = np.stack([sl.lu_solve(sl.lu_factor(a[i]), b[i]) for i in range(3)])
    close(lu_solve(f32(a), f32(b)), want, 1e-4)
    close(fg.vmap(lambda a, b: jsl.lu_solve(jsl.lu_factor(a), b))(f32(a), f32(b)), want, 1e-4)


@given(m=sizes, n=sizes, seed=seeds, mode=st.sampled_from(["full", "economic", "r"]))
def test_qr_svd_layouts(m, n, seed, mode):
    a = rng(seed).standard_normal((m, n))
    got, want = jsl.qr(f32(a), mode=mode), sl.qr(a, mode=mode)
    assert isinstance(got, tuple) and len(got) == len(want)
    assert [g.shape for g in got] == [w.shape for w in want]
    close(np.abs(np.asarray(got[-1])), np.abs(want[-1]), 1e-3)
    u, s, vh = jsl.svd(f32(a), full_matrices=mode == "full")
    wu, ws, wvh = sl.svd(a, full_matrices=mode == "full")
    assert u.shape == wu.shape and vh.shape == wvh.shape
    close(s, ws, 1e-3)
    close(jsl.svd(f32(a), compute_uv=False), ws, 1e-3)


@given(n=sizes, seed=seeds, lower=st.booleans())
def test_eigh_reads_one_triangle(n, seed, lower):
    a = distinct_symmetric(rng(seed), (), n)
    a_read = noisy(a, seed) if lower else noisy(a, seed).T
    close(jsl.eigh(f32(a_read), lower=lower, eigvals_only=True), sl.eigh(a, eigvals_only=True),
          1e-3)
    w, v = jsl.eigh(f32(a_read), lower=lower)
    close(w, sl.eigh(a)[0], 1e-3)
    close(np.asarray(v) @ np.diag(np.asarray(w)) @ np.asarray(v).T, a, 1e-3)


@given(n=st.integers(0, 4), seed=seeds, scale=st.sampled_from([1e-3, 0.5, 3.0, 20.0]))
def test_expm(n, seed, scale):
    fg.config.update("enable_x64", True)
    a = rng(seed).standard_normal((n, n)) * scale / max(n, 1)
    want = sl.expm(a)
    tol = 1e-9 * max(1.0, np.abs(want).max(initial=1))
    close(jsl.expm(fnp.asarray(a)), want, tol)
    close(fg.jit(lambda x: jsl.expm(x))(fnp.asarray(a)), want, tol)


def test_expm_batched_and_float32():
    a = rng(3).standard_normal((3, 4, 4)) * np.array([0.01, 1.0, 8.0])[:, None, None]
    want = np.stack([sl.expm(x) for x in a])
    got = np.asarray(jsl.expm(f32(a)))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())
    close(fg.vmap(jsl.expm)(f32(a)), got, 1e-4 * np.abs(want).max())


def test_inv_det():
    a = well_conditioned(rng(10), (2,), 3)
    close(jsl.inv(f32(a)), sl.inv(a), 1e-4)
    close(jsl.det(f32(a)), sl.det(a), 1e-3)


def test_block_diag():
    blocks = [np.ones((2, 3)), 5.0, np.arange(2.0), np.eye(2)]
    close(jsl.block_diag(*[f32(b) for b in blocks]), sl.block_diag(*blocks))
    close(jsl.block_diag(), sl.block_diag())


@pytest.mark.parametrize("assume_a", ["gen", "sym", "her", "pos", "diagonal",
                                      "upper triangular", "lower triangular"])
@pytest.mark.parametrize("transposed", [False, True])
def test_solve_assume_a(assume_a, transposed):
    a, b = spd(rng(4), (), 4), rng(5).standard_normal((4, 2))
    if assume_a == "diagonal":
        a = np.diag(np.diag(a))
    elif assume_a.endswith("triangular"):
        a = np.triu(a) if assume_a[0] == "u" else np.tril(a)
    if transposed and assume_a not in ("gen", "diagonal"):
        return  # SciPy supports transposed only for general matrices
    close(jsl.solve(f32(a), f32(b), assume_a=assume_a, transposed=transposed),
          sl.solve(a, b, assume_a=assume_a, transposed=transposed), 1e-3)


@pytest.mark.parametrize("call, words", [
    (lambda: jsl.cholesky(fnp.ones((2, 3))), ["cholesky", "square", "(2, 3)"]),
    (lambda: jsl.solve(fnp.eye(2), fnp.ones(2), assume_a="banded"), ["solve", "assume_a"]),
    (lambda: jsl.solve_triangular(fnp.eye(2), fnp.ones(3)), ["solve_triangular", "(3,)"]),
    (lambda: jsl.solve_triangular(fnp.eye(2), fnp.ones(2), trans="X"), ["trans"]),
    (lambda: jsl.lu_solve(fnp.eye(2), fnp.ones(2)), ["lu_solve", "lu_factor"]),
    (lambda: jsl.qr(fnp.eye(2), mode="raw"), ["qr", "mode"]),
    (lambda: jsl.eigh(fnp.eye(2), fnp.eye(2)), ["eigh", "generalized"]),
    (lambda: jsl.expm(fnp.ones((2, 3))), ["expm", "square"]),
    (lambda: jsl.block_diag(fnp.ones((2, 2, 2))), ["block_diag", "2-D"]),
])
def test_errors_name_function_and_shapes(call, words):
    with pytest.raises(FuncgradError) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


R = np.random.default_rng(6)
DERIVATIVES = {
    "cholesky_upper": (jsl.cholesky, (spd(R, (), 3),)),
    "cholesky_lower": (lambda a: jsl.cholesky(a, lower=True), (noisy(spd(R, (), 3), 1),)),
    "cho_solve": (lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b),
                  (spd(R, (), 3), R.standard_normal((3, 2)))),
    "solve_triangular": (lambda a, b: jsl.solve_triangular(a, b, trans=1, lower=True),
                         (well_conditioned(R, (), 3), R.standard_normal(3))),
    "lu_solve": (lambda a, b: jsl.lu_solve(jsl.lu_factor(a), b),
                 (well_conditioned(R, (), 3), R.standard_normal(3))),
    "lu_u": (lambda a: jsl.lu(a)[2], (well_conditioned(R, (), 3),)),
    "eigh": (lambda a: jsl.eigh(a, lower=False), (distinct_symmetric(R, (), 3),)),
    "expm": (jsl.expm, (R.standard_normal((3, 3)),)),
    "solve_pos": (lambda a, b: jsl.solve(a, b, assume_a="pos"),
                  (spd(R, (), 3), R.standard_normal(3))),
    "block_diag": (lambda a, b: jsl.block_diag(a, b), (R.standard_normal((2, 1)),
                                                       R.standard_normal((1, 2)))),
}


@pytest.mark.parametrize("name", sorted(DERIVATIVES))
def test_derivatives(name):
    f, args = DERIVATIVES[name]
    check_grads(f, args, order=2, modes=("fwd", "rev"))


# --- nn.initializers.orthogonal ----------------------------------------------------------------
@pytest.mark.parametrize("shape, axis", [((4, 3), -1), ((3, 5), -1), ((2, 3, 4), -1),
                                         ((2, 3, 4), 0), ((3, 3), 0), ((6, 2), 1)])
def test_orthogonal_is_orthonormal(shape, axis):
    q = np.asarray(initializers.orthogonal(2.0, column_axis=axis)(random.PRNGKey(0), shape))
    assert q.shape == shape and q.dtype == np.float32
    mat = np.moveaxis(q, axis, -1).reshape(-1, shape[axis]) / 2.0
    gram = mat.T @ mat if mat.shape[0] >= mat.shape[1] else mat @ mat.T
    close(gram, np.eye(len(gram)), 1e-5)


def test_orthogonal_follows_jax_construction():
    key = random.PRNGKey(3)
    a = np.asarray(random.normal(key, (5, 3)), np.float64)
    q, r = np.linalg.qr(a)
    want = q * np.sign(np.diag(r))  # JAX: Q times the signs of R's diagonal
    close(initializers.orthogonal()(key, (5, 3)), want, 1e-5)
    wide = np.asarray(initializers.orthogonal()(key, (3, 5)))
    close(wide, want.T, 1e-5)  # fewer rows than columns: the transposed draw
    assert initializers.orthogonal(dtype=np.float16)(key, (2, 2)).dtype == np.float16
    with pytest.raises(ValueError, match="orthogonal"):
        initializers.orthogonal()(key, (3,))
