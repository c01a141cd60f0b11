"""Small linear algebra in the native backend's C (`backends/native/linalg.py`): `lu` gives
the numpy implementation's pivots and bits (square and tall matrices), `triangular_solve`
and `cholesky` agree within a few ulp times n, a matrix that is not positive definite is
NaN as in the numpy implementation, and a `fori_loop` of 4x4 `fnp.linalg.solve` runs as one
C loop with no Python per iteration. The sanitizer run is in test_native_backend.py.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.native import build
from funcgrad.compiler import pipeline
from funcgrad.lax import linalg_decomp as decomp
from funcgrad.test_util import check_grads
from tests.test_native_backend import _python_calls, native_mode

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler (checked "
                              "by test_native_backend.test_a_compiler_means_...)")
DTYPES = [np.float32, np.float64]


def _native(fn, *args):
    """`fn` jitted by the native backend (built now): (results as numpy, the C source)."""
    fg.config.update("enable_x64", True)  # float64 stays float64 (reset by conftest)
    with native_mode():
        exe = pipeline.compile_jaxpr(fg.make_jaxpr(fn)(*args), backend="cpu")
        out = exe(*args)
    return [np.asarray(o) for o in fg.tree_util.tree_leaves(out)], exe.as_text()


def _close(got, want, dtype, n):
    """Within a few ulp times n of the numpy implementation (relative to the result's size)."""
    eps = np.finfo(dtype).eps
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * n * eps * scale)


def _well_conditioned(rng, shape, dtype):
    n = shape[-1]
    return (rng.normal(size=shape) + 2 * np.sqrt(n) * np.eye(n)).astype(dtype)


@needs_cc
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", range(1, 9))
def test_lu_cholesky_and_solves_match_the_numpy_implementation(n, dtype):
    rng = np.random.default_rng(n)
    x = rng.normal(size=(3, n, n)).astype(dtype)  # pivoting matters: no dominant diagonal
    tall = rng.normal(size=(n + 2, n)).astype(dtype)
    g = rng.normal(size=(2, n, n))
    spd = (g @ np.swapaxes(g, -1, -2) + n * np.eye(n)).astype(dtype)
    b = rng.normal(size=(3, n, 2)).astype(dtype)

    def f(x, tall, spd, b):
        return (lax.linalg.lu(x), lax.linalg.lu(tall), decomp.cholesky_p.bind(spd),
                fnp.linalg.solve(x, b))
    got, text = _native(f, x, tall, spd, b)
    assert f"/* lu {n}x{n} */" in text and f"/* cholesky {n}x{n} */" in text
    want = [*decomp._lu_impl(x), *decomp._lu_impl(tall), np.linalg.cholesky(spd),
            np.linalg.solve(x, b)]
    for k in range(6):  # lu: the same pivots, permutation and bits
        np.testing.assert_array_equal(got[k], want[k])
        assert got[k].dtype == want[k].dtype
    _close(got[6], want[6], dtype, n)
    cond = np.linalg.cond(x.astype(np.float64)).max()
    _close(got[7], want[7], dtype, n * cond)
    wide = rng.normal(size=(2, n, n + 3)).astype(dtype)  # numpy's blocked step: rounding only
    (lu_, piv, perm), text = _native(lambda w: lax.linalg.lu(w), wide)
    want = decomp._lu_impl(wide)
    assert f"/* lu {n}x{n + 3} */" in text
    np.testing.assert_array_equal(piv, want[1])
    np.testing.assert_array_equal(perm, want[2])
    _close(lu_, want[0], dtype, n * n)


@needs_cc
@pytest.mark.parametrize("dtype", DTYPES)
def test_triangular_solve_every_flag(dtype):
    rng = np.random.default_rng(0)
    a = _well_conditioned(rng, (2, 5, 5), dtype)  # both triangles set: only one is read
    b_left, b_right = (rng.normal(size=s).astype(dtype) for s in [(2, 5, 3), (2, 3, 5)])
    flags = list(itertools.product([False, True], repeat=5))

    def f(a, bl, br):
        return [decomp.triangular_solve(a, bl if left else br, left_side=left, lower=lower,
                                        transpose_a=tr, conjugate_a=cj, unit_diagonal=ud)
                for left, lower, tr, cj, ud in flags]
    got, text = _native(f, a, b_left, b_right)
    assert "/* triangular_solve 5x5, b 3x5 */" in text
    for g, (left, lower, tr, cj, ud) in zip(got, flags):
        want = decomp._triangular_solve_impl(a, b_left if left else b_right, left_side=left,
                                             lower=lower, transpose_a=tr, conjugate_a=cj,
                                             unit_diagonal=ud)
        _close(g, want, dtype, 5 * 10)  # unit-diagonal solves grow up to ~10x here


def _substitution(a, b, left, lower):
    """The C routine's arithmetic, one rounded numpy operation at a time: rows of x scaled
    by the diagonal (a division on the left, the reciprocal's product on the right), then
    each solved row taken off the rest in solve order."""
    x = (b if left else b.T).copy()
    e = a if left else a.T  # E x = b on each right-hand side (a column of x here)
    m, one = a.shape[0], a.dtype.type(1)
    for i in (range(m) if lower == left else range(m - 1, -1, -1)):
        x[i] = x[i] / e[i, i] if left else x[i] * (one / e[i, i])
        for r in (range(i + 1, m) if lower == left else range(i)):
            x[r] = x[r] - e[r, i] * x[i]
    return x if left else x.T


SIDES = list(itertools.product([True, False], repeat=2))  # (left_side, lower)


def _solve_every_side(a, bl, br):
    return [decomp.triangular_solve(a, bl if left else br, left_side=left, lower=lower)
            for left, lower in SIDES]


@needs_cc
@pytest.mark.parametrize("dtype", DTYPES)
def test_blocked_triangular_solves_keep_the_substitution_order(dtype):
    # several right-hand sides are solved 4 rows at a time (TriangularSolve._blocked); every
    # entry must still take the unblocked substitution's operations in its order: same bits
    rng = np.random.default_rng(5)
    for m, k in [(13, 9), (8, 3), (3, 5)]:
        a = _well_conditioned(rng, (m, m), dtype)
        bl, br = rng.normal(size=(m, k)).astype(dtype), rng.normal(size=(k, m)).astype(dtype)
        got, text = _native(_solve_every_side, a, bl, br)
        assert "v -= f3 * " in text  # the blocked update
        for g, (left, lower) in zip(got, SIDES):
            np.testing.assert_array_equal(g, _substitution(a, bl if left else br, left, lower))


def _cholesky_steps(a):
    """The C cholesky's arithmetic one rounded numpy operation at a time: right-looking on
    the upper factor in double, one pivot after the other, the lower factor rounded."""
    n, w = a.shape[0], np.triu(a.T.astype(np.float64))
    for j in range(n):
        if not w[j, j] > 0 and not np.isnan(w[j, j]):
            return np.full_like(a, np.nan)
        w[j, j] = np.sqrt(w[j, j])
        w[j, j + 1:] = w[j, j + 1:] / w[j, j]
        for i in range(j + 1, n):
            w[i, i:] = w[i, i:] - w[j, i] * w[j, i:]
    return np.tril(w.T).astype(a.dtype)


@needs_cc
@pytest.mark.parametrize("dtype", DTYPES)
def test_blocked_cholesky_keeps_the_pivot_order(dtype):
    rng = np.random.default_rng(6)
    for n in (1, 6, 13):
        g = rng.normal(size=(n, n))
        spd = (g @ g.T / n + np.eye(n)).astype(dtype)
        (got,), text = _native(decomp.cholesky_p.bind, spd)
        assert "v -= g3 * " in text  # the blocked update
        np.testing.assert_array_equal(got, _cholesky_steps(spd))


@needs_cc
def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_nan():
    spd = np.array([[4.0, 2.0], [2.0, 5.0]])
    batch = np.stack([spd, [[1.0, 2.0], [2.0, 1.0]], -spd, [[np.nan, 0], [0, 1]],
                      [[1, np.nan], [np.nan, 1]]])  # NaN propagates, as in numpy's LAPACK
    for dt in DTYPES:
        (got,), text = _native(decomp.cholesky_p.bind, batch.astype(dt))
        want = decomp._cholesky_impl(batch.astype(dt))
        assert "/* cholesky 2x2 */" in text
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert np.isnan(got[1:3]).all() and np.isnan(got[3:]).any()
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


@needs_cc
def test_large_matrices_stay_lapack():  # lu above SMALL_MAX
    x = np.eye(40, dtype=np.float32)
    got, text = _native(lambda x: lax.linalg.lu(x), x)
    assert "/* lu" not in text
    np.testing.assert_array_equal(got[0], x)


def _solves(n):
    def step(i, x):
        m = fnp.outer(fnp.tanh(x), x) * 0.1 + 4.0 * fnp.eye(4, dtype=x.dtype)
        return x + 0.5 * fnp.linalg.solve(m, fnp.cos(x) + i.astype(x.dtype))
    return lambda x: lax.fori_loop(0, n, step, x)


@needs_cc
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_fori_loop_of_solves_is_one_c_loop(dtype):
    fg.config.update("enable_x64", True)
    x = np.linspace(0.1, 1, 4).astype(dtype)
    calls = {}
    for n in (8, 64):
        closed = fg.make_jaxpr(_solves(n))(x)
        with native_mode():
            exe = pipeline.compile_jaxpr(closed, backend="cpu")
        text = exe.as_text()
        assert "/* scan loop */" in text and "/* lu 4x4 */" in text
        want = pipeline.compile_jaxpr(closed, backend="numpy")(x)[0]
        _close(np.asarray(exe(x)[0]), np.asarray(want), dtype, 4 * n)
        calls[n] = _python_calls(exe, x)
    assert calls[8] == calls[64] < 50, calls


@needs_cc
def test_a_loop_with_solve_and_jacfwd_like_ilqr_runs_in_c():
    a = (np.eye(4) + 0.05 * np.arange(16).reshape(4, 4)).astype(np.float32)

    def dyn(x, u):
        return fnp.tanh(a @ x) + 0.1 * u

    def step(i, x):
        jac = fg.jacfwd(dyn)(x, x)
        return x - 0.1 * fnp.linalg.solve(jac + 2.0 * fnp.eye(4), x)
    def loop(x):
        return lax.fori_loop(0, 16, step, x)
    x = np.linspace(-1, 1, 4).astype(np.float32)
    with native_mode():
        fn = fg.jit(loop)
        got = fn(x)
        text = fn.lower(x).compile().as_text()
    assert "/* scan loop */" in text and "/* triangular_solve 4x4, b 4x1 */" in text
    want = fg.jit(loop, backend="numpy")(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


@needs_cc
def test_transposes_and_reshapes_in_a_loop_body_are_c_copies():
    x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)

    def f(x):
        def body(i, c):
            t = fnp.transpose(c, (2, 0, 1)) * 1.5 + 1.0
            return fnp.transpose(t, (1, 2, 0)) - fnp.reshape(c.T, (2, 3, 4)) * 0.25
        return lax.fori_loop(0, 3, body, x)
    (got,), text = _native(f, x)
    assert "/* scan loop */" in text and "/* transpose (2, 1, 0) */" in text
    np.testing.assert_array_equal(got, np.asarray(fg.jit(f, backend="numpy")(x)))


@needs_cc
@pytest.mark.parametrize("dtype", DTYPES)
def test_gp_sized_cholesky_and_solves_run_in_c(dtype):
    rng = np.random.default_rng(1)
    n = 100
    g = rng.normal(size=(n, n)) / np.sqrt(n)
    spd = np.stack([g @ g.T + np.eye(n), -np.eye(n)]).astype(dtype)  # the second is not PD
    tri = _well_conditioned(rng, (n, n), dtype)
    b = rng.normal(size=(n, 3)).astype(dtype)
    flags = [dict(left_side=True, lower=True), dict(left_side=False, lower=True),
             dict(left_side=True, lower=False, transpose_a=True),
             dict(left_side=False, lower=False, transpose_a=True, unit_diagonal=True)]

    def f(spd, tri, b):
        return [decomp.cholesky_p.bind(spd)] + [
            decomp.triangular_solve(tri, b if p["left_side"] else b.T, **p) for p in flags]
    got, text = _native(f, spd, tri, b)
    assert f"/* cholesky {n}x{n} */" in text and f"/* triangular_solve {n}x{n}, b 3x{n} */" in text
    want = decomp._cholesky_impl(spd)
    _close(got[0][0], want[0], dtype, n)
    assert np.isnan(got[0][1]).all() and np.isnan(want[1]).all()
    for g_, p in zip(got[1:], flags):
        rhs = b if p["left_side"] else b.T
        _close(g_, decomp._triangular_solve_impl(tri, rhs, **dict(
            dict(transpose_a=False, conjugate_a=False, unit_diagonal=False), **p)), dtype,
            n * (20 if p.get("unit_diagonal") else 1))


@needs_cc
@settings(max_examples=8)
@given(batch=st.lists(st.integers(1, 3), max_size=2), m=st.integers(1, 6),
       k=st.integers(1, 4), flags=st.tuples(*[st.booleans()] * 4))
def test_batched_shapes_agree_with_the_numpy_implementation(batch, m, k, flags):
    left, lower, tr, ud = flags
    rng = np.random.default_rng(m * 10 + k)
    a = _well_conditioned(rng, (*batch, m, m), np.float32)
    b = rng.normal(size=(*batch, m, k) if left else (*batch, k, m)).astype(np.float32)
    params = dict(left_side=left, lower=lower, transpose_a=tr, conjugate_a=False,
                  unit_diagonal=ud)
    (x, lu_, piv, perm), _ = _native(
        lambda a, b: (decomp.triangular_solve(a, b, **params), *lax.linalg.lu(a)), a, b)
    _close(x, decomp._triangular_solve_impl(a, b, **params), np.float32, m * 10)
    for g, w in zip((lu_, piv, perm), decomp._lu_impl(a)):
        np.testing.assert_array_equal(g, w)


@needs_cc
def test_grad_of_a_loop_of_solves_runs_in_c_and_matches_numpy():
    fg.config.update("enable_x64", True)
    x = np.linspace(0.1, 1, 4)
    loss = lambda x: fnp.sum(_solves(6)(x) ** 2)  # noqa: E731
    with native_mode():
        g = fg.jit(fg.grad(loss))
        got = g(x)
        text = g.lower(x).compile().as_text()
    assert text.count("/* scan loop */") == 2 and "transpose_a" not in text
    np.testing.assert_allclose(np.asarray(got), np.asarray(fg.jit(fg.grad(loss),
                                                                  backend="numpy")(x)),
                               rtol=1e-12, atol=1e-12)
    check_grads(loss, (x,), order=1)


@needs_cc
def test_slices_pads_broadcasts_and_transposed_products_in_a_loop_body():
    x = np.arange(24.0, dtype=np.float32).reshape(4, 6) / 10

    def f(x):
        def body(i, c):
            s = lax.slice(c, (1, 0), (4, 6), (2, 3))  # [2, 2]
            p = lax.pad(s, 0.5, ((1, 1, 1), (0, 2, 2)))  # [5, 6]
            b = lax.broadcast_in_dim(c[:1, :], (3, 4, 6), (1, 2))
            d = lax.dot_general(c, c, (((0,), (0,)), ((), ())))  # c^T c
            return c * 0.9 + p[:4] * 0.1 + b[1] * 0.01 + d[:4] * 1e-3
        return lax.fori_loop(0, 3, body, x)
    (got,), text = _native(f, x)
    for marker in ("scan loop", "slice (1, 0)", "pad ((1, 1, 1), (0, 2, 2))",
                   "broadcast_in_dim (1, 6) -> (3, 4, 6)", "dot_general 6x4 @ 4x6"):
        assert f"/* {marker} */" in text, marker
    np.testing.assert_array_equal(got, np.asarray(fg.jit(f, backend="numpy")(x)))


@needs_cc
def test_dynamic_indexing_in_a_loop_body_is_c_and_clamps_or_drops_like_numpy():
    rng = np.random.default_rng(2)
    xs = (rng.normal(size=(10, 3, 3)) * 0.3).astype(np.float32)

    def f(xs, x):
        def body(i, c):
            x, out = c
            x = fnp.tanh(xs[i] @ x) + lax.dynamic_slice(xs, (i + 5, 0, 1), (1, 3, 2))[0, :, 0]
            up = lax.dynamic_update_slice(out, x[None, :] * 2.0, (i - 3, 0))  # clamps
            up = up.at[i - 3].set(x).at[i + 8].add(1.0)  # wraps; drops beyond the end
            return x, up
        return lax.fori_loop(0, 10, body, (x, fnp.zeros((10, 3), x.dtype)))
    x = np.ones(3, np.float32)
    got, text = _native(f, xs, x)
    for marker in ("scan loop", "dynamic_slice (1, 3, 3)", "dynamic_slice (1, 3, 2)",
                   "dynamic_update_slice (1, 3)", "scatter (1, 3)", "scatter-add (1, 3)"):
        assert f"/* {marker} */" in text, marker
    want = fg.jit(f, backend="numpy")(xs, x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-6, atol=1e-6)


@needs_cc
def test_gathers_and_scatters_in_a_loop_body_are_c_and_match_numpy():
    rng = np.random.default_rng(3)
    emb = rng.normal(size=(12, 5)).astype(np.float32)
    toks = rng.integers(-14, 14, size=(6, 4)).astype(np.int32)  # some out of bounds
    counts = np.full(5, 2**31 - 3, np.int32)  # adds wrap past the int32 maximum
    mask = rng.normal(size=(12,)) > 0

    def f(emb, toks, counts, mask):
        def body(c, t):
            h, n, acc = c
            rows = emb[fnp.clip(t, -12, 11)]                    # x[idx] (negative wraps)
            filled = fnp.take(emb, t, axis=0, mode="fill", fill_value=-7.0)
            clipped = fnp.take(emb, t, axis=0, mode="clip")
            along = fnp.take_along_axis(emb[:4], fnp.abs(t)[:, None] % 5, axis=1)
            points = emb[fnp.abs(t) % 12, fnp.abs(t) % 5]      # a point per index pair
            picked = mask[fnp.abs(t) % 12]                      # bool
            ints = fnp.take(counts, t, mode="fill")             # int32 minimum when out
            h = fnp.tanh(h + rows.sum(0) + fnp.where(fnp.isnan(filled), 0.0, filled).sum(0)
                         + clipped.mean(0) + along.sum() + points.sum() + picked.sum())
            acc = acc.at[t % 12].add(h)                         # repeated rows add in order
            acc = acc.at[t].set(h * 0.5, mode="drop")           # out of bounds dropped
            n = n.at[fnp.abs(t) % 5].add(counts[:4])            # int32, wraps
            return (h, n, acc), ints.sum() + picked.sum()
        return lax.scan(body, (fnp.zeros(5, fnp.float32), counts, fnp.zeros((12, 5))), toks)

    got, text = _native(f, emb, toks, counts, mask)
    assert "/* scan loop */" in text
    for marker in ("gather (1, 5)", "gather (1, 1)", "scatter-add (1, 5)", "scatter (1, 5)",
                   "scatter-add (1,)"):
        assert f"/* {marker} */" in text, marker
    want = fg.tree_util.tree_leaves(fg.jit(f, backend="numpy")(emb, toks, counts, mask))
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind == "f":  # tanh and sums: libm and summation order, a few ulp
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        else:  # the gathered and scattered integers and bools: exact
            np.testing.assert_array_equal(g, w)
    assert got[1].min() < 0  # the int32 adds did wrap


@needs_cc
def test_scatters_at_top_level_are_c_routines_with_numpys_bits():
    # an embedding's gradient (repeated rows add in numpy's order), set with drop and clip,
    # and int32 adds that wrap: the same bits as the numpy backend
    rng = np.random.default_rng(5)
    emb = rng.normal(size=(64, 16)).astype(np.float32)
    toks = rng.integers(-70, 70, size=(8, 32)).astype(np.int32)
    counts = np.full(6, 2**31 - 3, np.int32)

    def f(emb, toks, counts):
        g = fg.grad(lambda e: fnp.sum((e[toks % 64] * 3.0) ** 2))(emb)  # no libm: exact
        return (g, emb.at[toks].set(-1.0, mode="drop"), emb.at[toks].add(2.0, mode="clip"),
                counts.at[fnp.abs(toks) % 6].add(counts[0]))
    got, text = _native(f, emb, toks, counts)
    wrapper = text.split("# ---- C module")[0]
    assert "_scatter" not in wrapper and text.count("/* scatter-add (1, 16) */") == 2
    assert "/* scatter (1, 16) */" in text and "/* scatter-add (1,) */" in text
    want = fg.tree_util.tree_leaves(fg.jit(f, backend="numpy")(emb, toks, counts))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.asarray(w))
    assert got[3].min() < 0  # wrapped


@needs_cc
def test_the_gradient_of_an_embedding_rnn_scan_stays_one_c_loop_each_way():
    rng = np.random.default_rng(4)
    emb = rng.normal(size=(20, 8)).astype(np.float32)
    w = (rng.normal(size=(8, 8)) * 0.3).astype(np.float32)
    toks = rng.integers(0, 20, size=(15, 3)).astype(np.int32)

    def loss(emb, w, toks):
        def body(h, t):
            h = fnp.tanh(emb[t] + h @ w)
            return h, fnp.sum(h * h)
        return fnp.sum(lax.scan(body, fnp.zeros((3, 8)), toks)[1])
    f = fg.value_and_grad(loss, argnums=(0, 1))
    got, text = _native(f, emb, w, toks)
    assert text.count("/* scan loop */") == 2 and "/* gather (1, 8) */" in text
    assert "/* scatter-add (1, 8) */" in text and " for " not in text.split("# ----")[0]
    want = fg.tree_util.tree_leaves(fg.jit(f, backend="numpy")(emb, w, toks))
    for g, wv in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(wv), rtol=2e-5, atol=2e-6)


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.int64])
def test_argmax_and_cumulative_ops_in_a_loop_body_are_c_and_bit_exact(dtype):
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, size=(3, 5, 4)).astype(dtype)  # ties everywhere
    if np.dtype(dtype).kind == "f":
        x[0, 2, 1] = x[1, 0, 3] = np.nan  # a NaN is the first extremum; NaN propagates
        x[2, 1, 0] = -0.0
    big = np.full((3, 5, 4), np.iinfo(dtype).max if np.dtype(dtype).kind in "iu" else 1e30,
                  dtype)  # integer sums and products wrap

    def f(x, big):
        def body(i, c):
            acc, idx = c
            y, b = x + acc, big + acc  # carry-dependent, so nothing leaves the loop
            idx = idx + lax.argmax(y, 1, np.int32) + lax.argmin(y, 2, np.int64)[:, :4]
            acc = (lax.cumsum(y, 1) + lax.cumsum(y, 2, reverse=True) + lax.cummax(y, 0)
                   + lax.cummin(y, 1, reverse=True) + lax.cumprod(b, 1) + lax.cumsum(b, 2))
            return acc, idx
        return lax.fori_loop(0, 3, body, (fnp.zeros_like(x), fnp.zeros((3, 4), np.int64)))

    got, text = _native(f, x, big)
    assert "/* scan loop */" in text
    for marker in ("argmax axis 1", "argmin axis 2", "cumsum axis 1", "cumsum axis 2",
                   "cummax axis 0", "cummin axis 1", "cumprod axis 1"):
        assert f"/* {marker} of (3, 5, 4) */" in text, marker
    want = [np.asarray(w) for w in fg.tree_util.tree_leaves(
        fg.jit(f, backend="numpy")(x, big))]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@needs_cc
def test_top_level_cond_and_switch_are_c_branches():
    x = np.linspace(-1, 1, 16).astype(np.float32)

    def f(x, k):
        y = x * 2.0 + 1.0
        z = lax.cond(fnp.sum(y) > 0, lambda y: y * y - 1.0, lambda y: y + 3.0, y)
        w = lax.switch(k, [lambda z: z + 1.0, lambda z: z * 2.0, lambda z: -z], z)
        return (w * 3.0, lax.cond(k > 1, lambda y: fnp.sum(y), lambda y: fnp.max(y) * 2.0, y),
                lax.cond(k > 1, lambda: fnp.float32(1.0), lambda: fnp.float32(-2.5)))  # literals

    for k in (-5, 0, 1, 2, 7):  # out of range clamps to the first or last branch
        got, text = _native(f, x, np.int32(k))
        assert text.count("/* cond branches */") == 4 and "if " not in text.split("# ----")[0]
        want = [np.asarray(w) for w in fg.jit(f, backend="numpy")(x, np.int32(k))]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    with native_mode():
        jf = fg.jit(f)
        jf(x, np.int32(1))
        # the wrapper, its C calls and the argument checks; nothing per branch
        assert _python_calls(jf, x, np.int32(1)) < _python_calls(
            fg.jit(f, backend="numpy"), x, np.int32(1))


@needs_cc
def test_a_loop_body_with_a_constant_result_stays_c():
    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    f = lambda x: lax.scan(lambda c, t: (c * 0.5 + t, (fnp.float32(1.5), fnp.int32(-7), c)),
                           x[0], x)
    got, text = _native(f, x)
    assert "/* scan loop */" in text
    want = fg.tree_util.tree_leaves(fg.jit(f, backend="numpy")(x))
    for g, w in zip(got, want):
        assert g.dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, np.asarray(w))


@needs_cc
def test_a_cond_with_large_results_stays_a_python_if():
    x = np.ones(1 << 15, np.float32)  # 128 KiB of results: no copy through C temporaries
    got, text = _native(lambda x: lax.cond(x[0] > 0, lambda x: x * 2.0, lambda x: x - 1.0, x), x)
    assert "/* cond branches */" not in text and "if " in text.split("# ----")[0]
    np.testing.assert_array_equal(got[0], x * 2.0)


@needs_cc
def test_many_right_hand_sides_stay_lapack():
    a, b = np.eye(4, dtype=np.float32) * 2, np.ones((4, 20000), np.float32)
    (got,), text = _native(lambda a, b: decomp.triangular_solve(a, b, left_side=True), a, b)
    assert "/* triangular_solve" not in text
    np.testing.assert_array_equal(got, b / 2)


@needs_cc
def test_concatenate_in_a_loop_body():
    x = np.arange(12.0, dtype=np.float32).reshape(2, 6) / 10

    def f(x):
        def body(i, c):
            w = fnp.concatenate([c[:, :2] @ c[:, 2:4], fnp.sin(c[:, 4:]), c[:, :2].T], axis=1)
            return c * 0.5 + w[:, :6] * 0.1
        return lax.fori_loop(0, 4, body, x)
    (got,), text = _native(f, x)
    assert "/* scan loop */" in text and "/* concatenate axis 1 */" in text
    np.testing.assert_allclose(got, np.asarray(fg.jit(f, backend="numpy")(x)), rtol=1e-6)


@needs_cc
def test_a_vmapped_loop_of_solves_batches_its_products_and_routines_in_c():
    rng = np.random.default_rng(4)
    a = rng.normal(size=(4, 4)) * 0.4  # float64: Gauss-Newton amplifies float32 rounding

    def newton(c, x):
        def body(i, x):
            j = fg.jacfwd(lambda x: fnp.tanh(a @ x) + 0.1 * x ** 3 - c)(x)
            r = fnp.tanh(a @ x) + 0.1 * x ** 3 - c
            return x - fnp.linalg.solve(j.T @ j + 1e-3 * fnp.eye(4, dtype=x.dtype), j.T @ r)
        return lax.fori_loop(0, 8, body, x)
    cs, x = 0.3 * rng.normal(size=(5, 4)), np.zeros(4)
    batched = fg.vmap(newton, in_axes=(0, None))
    (got,), text = _native(batched, cs, x)
    assert "/* scan loop */" in text and "/* dot_general 5 x 4x4 @ 4x4 */" in text
    assert "/* lu 4x4 */" in text
    want = fg.jit(batched, backend="numpy")(cs, x)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-10)


@needs_cc
def test_lu_of_singular_and_nan_matrices_is_the_numpy_implementation_bit_for_bit():
    mats = np.array([[[0.0, 0.0, 1.0], [0.0, 0.0, 2.0], [0.0, 0.0, 3.0]],  # zero pivots
                     [[1.0, np.nan, 2.0], [np.nan, 1.0, 0.0], [3.0, 0.0, 1.0]],  # NaN wins
                     [[2.0, 1.0, 0.0], [-2.0, 3.0, 1.0], [2.0, -1.0, 4.0]]])  # ties: first
    for dt in DTYPES:
        got, _ = _native(lambda x: lax.linalg.lu(x), mats.astype(dt))
        for g, w in zip(got, decomp._lu_impl(mats.astype(dt))):
            np.testing.assert_array_equal(g, w)


@needs_cc
def test_outer_products_in_a_loop_body():
    x = np.linspace(-1, 1, 4).astype(np.float32)
    none = (((), ()), ((), ()))

    def f(x):
        def body(i, c):
            o = lax.dot_general(c, fnp.cos(c), none)  # [4, 4]
            s = lax.dot_general(fnp.sum(c), fnp.sin(c), none)  # scalar x vector
            return fnp.tanh(o @ c) * 0.5 + s * 0.1
        return lax.fori_loop(0, 5, body, x)
    (got,), text = _native(f, x)
    assert "/* scan loop */" in text and "/* dot_general 4x1 @ 1x4 */" in text
    assert "/* dot_general 1x1 @ 1x4 */" in text
    np.testing.assert_allclose(got, np.asarray(fg.jit(f, backend="numpy")(x)), rtol=1e-6,
                               atol=1e-7)
