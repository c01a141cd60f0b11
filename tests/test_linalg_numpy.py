"""funcgrad.numpy.linalg against numpy.linalg: every function on hypothesis-drawn shapes
(batched, size 0 and 1), derivatives with check_grads (orders 1-2, both modes) on
well-conditioned inputs, vmap against a loop, jit against eager, singular input giving
inf/NaN as in JAX, and errors naming the function and the shapes.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_linalg_lax import (
    close,
    distinct_singular,
    distinct_symmetric,
    f32,
    spd,
    well_conditioned,
)

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradError
from funcgrad.test_util import check_grads

LA = fnp.linalg
batches = st.sampled_from([(), (1,), (2,), (0,), (2, 1)])
sizes = st.integers(0, 4)
seeds = st.integers(0, 2**16)
EPS32 = float(np.finfo(np.float32).eps)


def rng(seed):
    return np.random.default_rng(seed)


@given(batch=batches, n=sizes, k=st.integers(1, 3), seed=seeds, vector=st.booleans())
def test_solve_inv_det_slogdet(batch, n, k, seed, vector):
    r = rng(seed)
    a = well_conditioned(r, batch, n)
    b = r.standard_normal((n,) if vector else batch + (n, k))
    close(LA.solve(f32(a), f32(b)), np.linalg.solve(a, b), 1e-3)
    close(LA.inv(f32(a)), np.linalg.inv(a), 1e-3)
    close(LA.det(f32(a)), np.linalg.det(a), 1e-3 * max(1, np.abs(np.linalg.det(a)).max(
        initial=1)))
    sign, logdet = LA.slogdet(f32(a))
    want = np.linalg.slogdet(a)
    close(sign, want.sign)
    close(logdet, want.logabsdet, 1e-3)


def test_solve_broadcasts_batch_axes_like_numpy():
    r = rng(0)
    a, b = well_conditioned(r, (2, 1), 3), r.standard_normal((4, 3, 2))
    close(LA.solve(f32(a), f32(b)), np.linalg.solve(a, b), 1e-4)


@given(batch=batches, n=sizes, seed=seeds, upper=st.booleans(), uplo=st.sampled_from("LU"))
def test_cholesky_eigh_eigvalsh(batch, n, seed, upper, uplo):
    a = spd(rng(seed), batch, n)
    close(LA.cholesky(f32(a), upper=upper), np.linalg.cholesky(a, upper=upper), 1e-3)
    s = distinct_symmetric(rng(seed), batch, n)
    w, v = LA.eigh(f32(s), UPLO=uplo)
    close(w, np.linalg.eigvalsh(s, UPLO=uplo), 1e-3)
    close(LA.eigvalsh(f32(s)), np.linalg.eigvalsh(s), 1e-3)
    assert v.shape == s.shape


@given(batch=batches, m=sizes, n=sizes, seed=seeds, mode=st.sampled_from(
    ["reduced", "complete", "r"]), full=st.booleans())
def test_qr_svd_svdvals_shapes_and_values(batch, m, n, seed, mode, full):
    a = rng(seed).standard_normal(batch + (m, n))
    got, want = LA.qr(f32(a), mode=mode), np.linalg.qr(a, mode=mode)
    if mode == "r":
        close(np.abs(np.asarray(got)), np.abs(want), 1e-3)
    else:
        assert got.Q.shape == want.Q.shape and got.R.shape == want.R.shape
        close(np.asarray(got.Q) @ np.asarray(got.R), a, 1e-3)
    res = LA.svd(f32(a), full_matrices=full)
    wres = np.linalg.svd(a, full_matrices=full)
    assert res.U.shape == wres.U.shape and res.Vh.shape == wres.Vh.shape
    close(res.S, wres.S, 1e-3)
    close(LA.svdvals(f32(a)), wres.S, 1e-3)
    close(LA.svd(f32(a), compute_uv=False), wres.S, 1e-3)


@given(batch=batches, m=st.integers(1, 4), n=st.integers(1, 4), seed=seeds)
def test_pinv_matrix_rank(batch, m, n, seed):
    a = rng(seed).standard_normal(batch + (m, n))
    rtol = 10 * max(m, n) * EPS32
    close(LA.pinv(f32(a)), np.linalg.pinv(a, rtol=rtol), 1e-3)
    close(LA.matrix_rank(f32(a)), np.linalg.matrix_rank(a))
    tol = rng(seed + 1).uniform(0, 2, batch)  # per-matrix tolerances, as NumPy takes them
    close(LA.matrix_rank(f32(a), tol=f32(tol)), np.linalg.matrix_rank(a, tol=tol))
    close(LA.matrix_rank(f32(a), rtol=0.5), np.linalg.matrix_rank(a, rtol=0.5))
    close(LA.pinv(f32(a), rtol=f32(tol / 2)), np.linalg.pinv(a, rtol=tol / 2), 1e-3)
    low = a[..., :, :1] * np.ones((1, n))  # rank 1
    close(LA.matrix_rank(f32(low)), np.linalg.matrix_rank(low, rtol=max(m, n) * EPS32))


@given(m=st.integers(1, 5), n=st.integers(1, 4), k=st.integers(1, 3), seed=seeds,
       vector=st.booleans())
def test_lstsq(m, n, k, seed, vector):
    r = rng(seed)
    a = r.standard_normal((m, n))
    b = r.standard_normal((m,) if vector else (m, k))
    x, resid, rank, s = LA.lstsq(f32(a), f32(b))
    wx, wresid, wrank, ws = np.linalg.lstsq(a, b, rcond=EPS32 * max(m, n))
    close(x, wx, 2e-3)
    assert int(rank) == wrank
    close(s, ws, 1e-3)
    if wresid.size:  # NumPy returns residuals only when rank == N < M; funcgrad always (JAX)
        close(resid, wresid, 2e-3)
    close(resid, np.sum((b.reshape(m, -1) - a @ wx.reshape(n, -1)) ** 2, axis=0), 2e-3)


@given(batch=batches, n=st.integers(0, 3), p=st.integers(-3, 5), seed=seeds)
def test_matrix_power(batch, n, p, seed):
    a = well_conditioned(rng(seed), batch, n) / 3
    close(LA.matrix_power(f32(a), p), np.linalg.matrix_power(a, p), 1e-3)


ORDS_MATRIX = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]
ORDS_VECTOR = [None, 0, 1, -1, 2, 3, 0.5, np.inf, -np.inf]


@given(batch=st.sampled_from([(), (2,)]), m=st.integers(1, 4), n=st.integers(1, 4),
       seed=seeds, keepdims=st.booleans())
def test_norms_every_order(batch, m, n, seed, keepdims):
    a = rng(seed).standard_normal(batch + (m, n))
    nd = a.ndim
    for o in ORDS_MATRIX:
        close(LA.norm(f32(a), o, axis=(nd - 2, nd - 1), keepdims=keepdims),
              np.linalg.norm(a, o, axis=(nd - 2, nd - 1), keepdims=keepdims), 1e-3)
        close(LA.matrix_norm(f32(a), ord="fro" if o is None else o, keepdims=keepdims),
              np.linalg.matrix_norm(a, ord="fro" if o is None else o, keepdims=keepdims), 1e-3)
    for o in ORDS_VECTOR:
        close(LA.norm(f32(a), o, axis=-1, keepdims=keepdims),
              np.linalg.norm(a, o, axis=-1, keepdims=keepdims), 1e-3)
        close(LA.vector_norm(f32(a), ord=2 if o is None else o, axis=-1),
              np.linalg.vector_norm(a, ord=2 if o is None else o, axis=-1), 1e-3)
    close(LA.vector_norm(f32(a)), np.linalg.vector_norm(a), 1e-3)


@given(batch=st.sampled_from([(), (2,)]), n=st.integers(1, 4), seed=seeds,
       p=st.sampled_from(ORDS_MATRIX))
def test_cond(batch, n, seed, p):
    a = well_conditioned(rng(seed), batch, n)
    close(LA.cond(f32(a), p), np.linalg.cond(a, p), 1e-3 * np.linalg.cond(a, p).max())


@given(seed=seeds, shapes=st.sampled_from([((3,), (3,)), ((2, 3), (3,)), ((4, 1, 3), (2, 3))]),
       axis=st.sampled_from([-1]))
def test_cross(seed, shapes, axis):
    r = rng(seed)
    x, y = r.standard_normal(shapes[0]), r.standard_normal(shapes[1])
    close(LA.cross(f32(x), f32(y), axis=axis), np.linalg.cross(x, y, axis=axis), 1e-4)


def test_cross_along_another_axis():
    x, y = rng(1).standard_normal((3, 2)), rng(2).standard_normal((3, 2))
    close(LA.cross(f32(x), f32(y), axis=0), np.linalg.cross(x, y, axis=0), 1e-5)


@given(seed=seeds, dims=st.lists(st.integers(1, 4), min_size=3, max_size=6),
       first=st.booleans(), last=st.booleans())
def test_multi_dot(seed, dims, first, last):
    r = rng(seed)
    arrays = [r.standard_normal((dims[i], dims[i + 1])) for i in range(len(dims) - 1)]
    if first:
        arrays[0] = arrays[0][0]
    if last:
        arrays[-1] = arrays[-1][:, 0]
    close(LA.multi_dot([f32(x) for x in arrays]), np.linalg.multi_dot(arrays), 1e-3)


def test_tensorsolve_tensorinv_and_array_api_names():
    r = rng(3)
    a = r.standard_normal((2, 3, 6)) + np.eye(6).reshape(2, 3, 6) * 3
    b = r.standard_normal((2, 3))
    close(LA.tensorsolve(f32(a), f32(b)), np.linalg.tensorsolve(a, b), 1e-4)
    a4 = r.standard_normal((4, 6, 8, 3)) + np.eye(24).reshape(4, 6, 8, 3) * 3
    close(LA.tensorinv(f32(a4), ind=2), np.linalg.tensorinv(a4, ind=2), 1e-4)
    t = r.standard_normal((2, 3, 6))
    close(LA.tensorsolve(f32(np.moveaxis(a, 2, 0)), f32(b), axes=(0,)),
          np.linalg.tensorsolve(np.moveaxis(a, 2, 0), b, axes=(0,)), 1e-4)
    close(LA.diagonal(f32(t), offset=1), np.linalg.diagonal(t, offset=1))
    close(LA.trace(f32(t)), np.linalg.trace(t), 1e-5)
    close(LA.matrix_transpose(f32(t)), np.linalg.matrix_transpose(t))
    close(LA.outer(f32(b[0]), f32(b[1])), np.linalg.outer(b[0], b[1]), 1e-6)
    close(LA.vecdot(f32(t), f32(t)), np.linalg.vecdot(t, t), 1e-5)
    close(LA.matmul(f32(t), f32(np.swapaxes(t, -1, -2))), t @ np.swapaxes(t, -1, -2), 1e-5)
    ax = ((1, 2), (1, 2))
    close(LA.tensordot(f32(t), f32(t), axes=ax), np.linalg.tensordot(t, t, axes=ax), 1e-4)
    assert not hasattr(fnp, "solve") and fnp.matmul is not None  # products stay top-level


def test_singular_matrices_give_inf_or_nan_like_jax():
    z = fnp.zeros((2, 2))
    assert not np.isfinite(np.asarray(LA.solve(z, fnp.ones(2)))).any()
    assert not np.isfinite(np.asarray(LA.inv(fnp.ones((2, 2))))).all()
    assert float(LA.det(z)) == 0.0
    sign, logdet = LA.slogdet(z)
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    assert np.isnan(np.asarray(LA.cholesky(-fnp.eye(2)))).all()
    close(LA.pinv(z), np.zeros((2, 2)))


@pytest.mark.parametrize("call, words", [
    (lambda: LA.solve(fnp.ones((2, 3)), fnp.ones(2)), ["solve", "square", "(2, 3)"]),
    (lambda: LA.solve(fnp.eye(2), fnp.ones(3)), ["solve", "(2, 2)", "(3,)"]),
    (lambda: LA.inv(fnp.ones(3)), ["inv", "(3,)"]),
    (lambda: LA.det(fnp.ones((2, 3))), ["det", "square", "(2, 3)"]),
    (lambda: LA.cholesky(fnp.ones((3, 2))), ["cholesky", "square", "(3, 2)"]),
    (lambda: LA.eigh(fnp.eye(2), UPLO="X"), ["eigh", "UPLO"]),
    (lambda: LA.qr(fnp.eye(2), mode="raw"), ["qr", "mode"]),
    (lambda: LA.lstsq(fnp.ones((3, 2)), fnp.ones(4)), ["lstsq", "(3, 2)", "(4,)"]),
    (lambda: LA.matrix_power(fnp.ones((2, 3)), 2), ["matrix_power", "(2, 3)"]),
    (lambda: LA.matrix_power(fnp.eye(2), 1.5), ["matrix_power", "integer"]),
    (lambda: LA.norm(fnp.eye(2), "bad"), ["norm", "bad"]),
    (lambda: LA.cross(fnp.ones(2), fnp.ones(3)), ["cross", "size 3", "(2,)"]),
    (lambda: LA.multi_dot([fnp.ones((2, 3))]), ["multi_dot", "two"]),
    (lambda: LA.tensorinv(fnp.ones((2, 3)), ind=1), ["tensorinv", "(2, 3)"]),
])
def test_errors_name_function_and_shapes(call, words):
    with pytest.raises(FuncgradError) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


R = np.random.default_rng(5)
A3 = well_conditioned(R, (2,), 3)
DERIVATIVES = {
    "solve": (LA.solve, (A3, R.standard_normal((2, 3, 2)))),
    "solve_vector": (LA.solve, (A3[0], R.standard_normal(3))),
    "inv": (LA.inv, (A3,)),
    "det": (LA.det, (A3,)),
    "slogdet": (lambda a: LA.slogdet(a).logabsdet, (A3,)),
    "pinv": (LA.pinv, (distinct_singular(R, (2,), 3, 2),)),
    "pinv_rank_deficient": (lambda u, v: LA.pinv(u @ v),  # rank 1 along every direction
                            (R.standard_normal((2, 4, 1)), R.standard_normal((2, 1, 3)))),
    "lstsq": (lambda a, b: LA.lstsq(a, b)[0], (distinct_singular(R, (), 4, 2),
                                               R.standard_normal(4))),
    "matrix_power": (lambda a: LA.matrix_power(a, -3), (A3 / 3 + np.eye(3),)),
    "norm_nuc": (lambda a: LA.norm(a, "nuc"), (distinct_singular(R, (), 3, 2),)),
    "norm_2": (lambda a: LA.matrix_norm(a, ord=2), (distinct_singular(R, (2,), 2, 3),)),
    "cond": (LA.cond, (distinct_singular(R, (), 3, 3),)),
    "cond_fro": (lambda a: LA.cond(a, "fro"), (A3,)),
    "eigvalsh": (LA.eigvalsh, (distinct_symmetric(R, (), 3),)),
    "cholesky": (LA.cholesky, (spd(R, (), 3),)),
    "multi_dot": (lambda a, b, c: LA.multi_dot([a, b, c]),
                  (R.standard_normal(3), R.standard_normal((3, 4)), R.standard_normal((4, 2)))),
    "cross": (LA.cross, (R.standard_normal((2, 3)), R.standard_normal((2, 3)))),
    "tensorsolve": (LA.tensorsolve, (well_conditioned(R, (), 6).reshape(2, 3, 6),
                                     R.standard_normal((2, 3)))),
}


@pytest.mark.parametrize("name", sorted(DERIVATIVES))
def test_derivatives(name):
    f, args = DERIVATIVES[name]
    check_grads(f, args, order=2, modes=("fwd", "rev"))


def test_vmap_matches_a_loop_and_jit_matches_eager():
    a = f32(well_conditioned(rng(6), (3,), 3))
    b = f32(rng(7).standard_normal((3, 3)))
    fns = [LA.solve, lambda a, b: LA.det(a) * b, lambda a, b: LA.slogdet(a).logabsdet + b,
           lambda a, b: LA.pinv(a) @ b, lambda a, b: LA.matrix_norm(a, ord=2) + LA.cond(a) * b,
           lambda a, b: LA.inv(a) @ b]
    for f in fns:
        got = np.asarray(fg.vmap(f)(a, b))
        close(got, np.stack([np.asarray(f(a[i], b[i])) for i in range(3)]), 1e-4)
        close(fg.jit(f)(a, b), np.asarray(f(a, b)), 1e-5)
        close(fg.jit(fg.vmap(f))(a, b), got, 1e-5)


def test_bad_arguments_give_funcgrad_errors_naming_the_function():
    """test_api_robustness's fuzz (every argument made bad in turn) over fnp.linalg,
    funcgrad.scipy.linalg and lax.linalg's decompositions."""
    import test_api_robustness as robust

    import funcgrad.scipy.linalg as jsl
    from funcgrad.lax import linalg as lax_linalg
    from funcgrad.lax import linalg_decomp, linalg_eig
    fns = robust._public(LA, "numpy.linalg") + robust._public(jsl, "scipy.linalg") + [
        (f"lax.linalg.{n}", getattr(lax_linalg, n))
        for n in linalg_decomp.__all__ + linalg_eig.__all__ if not n.endswith("_p")]
    assert len(fns) > 45
    problems = []
    for qualname, fn in fns:
        for label, args, kwargs in robust._calls(fn):
            args = [robust._value(a) for a in args]
            kwargs = {k: robust._value(v) for k, v in kwargs.items()}
            p = robust._problem(qualname, fn, *args, **kwargs)
            if p:
                problems.append(f"{qualname}({label}): {p}")
    assert not problems, "\n".join(problems[:20])
