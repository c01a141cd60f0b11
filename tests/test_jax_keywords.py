"""The parameters funcgrad took over from JAX's signatures, each doing what JAX's does.

Every one is checked against NumPy, a Python loop, finite differences or an equivalent
formulation (outputs recorded from JAX itself are in `test_jax_references.py`).
"""

import functools

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax, nn, optim
from funcgrad import tree_util as tu
from funcgrad.compiler.jit_cache import DonatedArrayError
from funcgrad.test_util import check_grads


@pytest.fixture
def x64():
    fg.config.update("enable_x64", True)
    yield
    fg.config.update("enable_x64", False)


RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# --- transforms ---------------------------------------------------------------------------------

def test_vmap_takes_jax_positional_order_sum_match_and_spmd_axis_name():
    xs = rand(3, 2)
    np.testing.assert_allclose(fg.vmap(lambda x: lax.psum(x, "i"), 0, 0, "i")(xs),
                               np.broadcast_to(xs.sum(0), xs.shape), rtol=1e-6)
    assert fg.vmap(lambda x: x, 0, 0, None, 3)(xs).shape == (3, 2)
    summed = fg.vmap(lambda x: 2 * x, out_axes=None, sum_match=True)(xs)
    np.testing.assert_allclose(summed, 2 * xs.sum(0), rtol=1e-6)
    with pytest.raises(ValueError, match="out_axes is None"):
        fg.vmap(lambda x: 2 * x, out_axes=None)(xs)
    np.testing.assert_allclose(fg.vmap(fnp.sin, spmd_axis_name=("data",))(xs), np.sin(xs),
                               rtol=1e-6)
    with pytest.raises(TypeError, match="spmd_axis_name"):
        fg.vmap(fnp.sin, spmd_axis_name=3)


def test_jit_donate_argnames_by_position_and_by_keyword():
    f = fg.jit(lambda x, y: x + y, donate_argnames="x")
    for call in (lambda a, b: f(a, b), lambda a, b: f(y=b, x=a)):
        a, b = fnp.ones(3), fnp.ones(3)
        np.testing.assert_array_equal(call(a, b), [2, 2, 2])
        with pytest.raises(DonatedArrayError):
            a + 1
        np.testing.assert_array_equal(b, [1, 1, 1])  # not donated
    with pytest.raises(ValueError, match="donate_argnames"):
        fg.jit(lambda x: x, donate_argnames="nope")
    with pytest.raises(ValueError, match="static and donated"):
        fg.jit(lambda x, n: x, static_argnames="n", donate_argnames="n")


def test_jit_inline_records_the_body_in_place_and_the_rest_runs_the_same():
    inner = fg.jit(lambda x: fnp.sin(x) * 2, inline=True)
    text = str(fg.make_jaxpr(lambda x: inner(x) + 1)(1.0))
    assert "jit[" not in text and "sin" in text
    assert "jit[" in str(fg.make_jaxpr(lambda x: fg.jit(fnp.sin)(x) + 1)(1.0))
    np.testing.assert_allclose(inner(0.5), 2 * np.sin(0.5), rtol=1e-6)
    np.testing.assert_allclose(fg.jit(lambda x: inner(x) + 1)(0.5), 2 * np.sin(0.5) + 1,
                               rtol=1e-6)
    np.testing.assert_allclose(fg.grad(inner)(0.5), 2 * np.cos(0.5), rtol=1e-6)
    np.testing.assert_allclose(fg.vmap(inner)(fnp.arange(3.0)), 2 * np.sin(np.arange(3.0)),
                               rtol=1e-6)


def test_jit_device_keep_unused_and_compiler_options():
    cpu = fg.devices()[0]
    f = fg.jit(lambda x, unused: x * 2, device=cpu, keep_unused=True,
               compiler_options={"xla_cpu_enable_fast_math": False})
    out = f(fnp.ones(2), fnp.zeros(5))
    np.testing.assert_array_equal(out, [2, 2])
    assert out.device == cpu
    with pytest.raises(ValueError, match="both a device and a backend"):
        fg.jit(fnp.sin, device=cpu, backend="cpu")
    with pytest.raises(TypeError, match="Device"):
        fg.jit(fnp.sin, device="cpu")
    with pytest.raises(TypeError, match="compiler_options"):
        fg.jit(fnp.sin, compiler_options=["O3"])


def test_grad_allow_int_gives_float0_zeros_as_jax():
    g = fg.grad(lambda x, i: x * i, argnums=(0, 1), allow_int=True)(1.5, 3)
    np.testing.assert_allclose(g[0], 3.0)
    assert isinstance(g[1], np.ndarray) and g[1].dtype == fg.dtypes.float0 and g[1].shape == ()
    tree = fg.grad(lambda d: (d["a"] * d["n"]).sum(), allow_int=True)(
        {"a": fnp.ones(2), "n": fnp.arange(2)})
    assert tree["n"].dtype == fg.dtypes.float0 and tree["n"].shape == (2,)
    np.testing.assert_array_equal(tree["a"], [0, 1])
    value, gb = fg.value_and_grad(lambda b: 2.0 * b, allow_int=True)(True)
    assert float(value) == 2.0 and gb.dtype == fg.dtypes.float0
    with pytest.raises(TypeError, match="allow_int"):
        fg.grad(lambda i: 1.0 * i)(3)
    with pytest.raises(NotImplementedError, match="reduce_axes"):
        fg.grad(fnp.sin, reduce_axes=("batch",))


def test_jacrev_and_jacobian_allow_int_blocks_are_integer_zeros():
    jx, ji = fg.jacrev(lambda x, i: x * i, argnums=(0, 1), allow_int=True)(
        fnp.ones(2), fnp.arange(2))
    np.testing.assert_array_equal(jx, np.diag([0.0, 1.0]))
    assert ji.dtype == np.int32 and ji.shape == (2, 2) and not np.asarray(ji).any()
    assert fg.jacobian(lambda i: 1.0 * i, allow_int=True)(fnp.int32(3)).dtype == np.int32


def test_linearize_has_aux_and_make_jaxpr_axis_env_and_return_shape():
    out, f_jvp, aux = fg.linearize(lambda x: (fnp.sin(x), {"twice": 2 * x}), 0.5, has_aux=True)
    np.testing.assert_allclose([out, f_jvp(2.0)], [np.sin(0.5), 2 * np.cos(0.5)], rtol=1e-6)
    assert float(aux["twice"]) == 1.0
    text = str(fg.make_jaxpr(lambda x: lax.psum(x, "i"), axis_env=[("i", 4)])(1.0))
    assert "psum" in text
    closed, shapes = fg.make_jaxpr(lambda x: {"y": x[:2] * 2}, return_shape=True)(fnp.ones(3))
    assert shapes["y"] == fg.ShapeDtypeStruct((2,), np.float32)  # JAX's type, not an aval
    assert "mul" in str(closed)


def test_checkpoint_static_argnames_and_removed_concrete():
    def f(x, n):
        for _ in range(n):
            x = fnp.sin(x)
        return x
    c = fg.checkpoint(f, static_argnames="n")
    want = fg.grad(lambda x: f(x, 3))(0.7)
    for got in (fg.grad(c)(0.7, 3), fg.grad(lambda x: c(x, n=3))(0.7),
                fg.jit(fg.grad(lambda x: c(x, n=3)))(0.7)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="concrete"):
        fg.checkpoint(f, concrete=True)


def test_custom_vjp_and_custom_jvp_nondiff_argnames():
    @functools.partial(fg.custom_vjp, nondiff_argnames=("n",))
    def power(x, n):
        return x ** n
    power.defvjp(lambda x, n: (x ** n, x), lambda n, x, g: (10 * g * n * x ** (n - 1),))
    np.testing.assert_allclose(fg.grad(power)(2.0, 3), 120.0)
    np.testing.assert_allclose(fg.grad(lambda x: power(x, n=3))(2.0), 120.0)

    @functools.partial(fg.custom_jvp, nondiff_argnames="n")
    def scaled(x, n):
        return x * n
    scaled.defjvp(lambda n, p, t: (scaled(p[0], n), 10 * n * t[0]))
    np.testing.assert_allclose(fg.grad(scaled)(1.0, 2), 20.0)
    with pytest.raises(ValueError, match="nondiff_argnames"):
        fg.custom_vjp(lambda x: x, nondiff_argnames="y")


# --- lax ----------------------------------------------------------------------------------------

def test_fori_loop_unroll_and_lax_map_batch_size_match_loops():
    body = lambda i, s: s * 1.5 + i
    want = lax.fori_loop(0, 7, body, 1.0)
    for unroll in (None, 1, 3, True, False):
        np.testing.assert_allclose(lax.fori_loop(0, 7, body, 1.0, unroll=unroll), want)
    with pytest.raises(ValueError, match="unroll"):
        fg.jit(lambda n: lax.fori_loop(0, n, body, 1.0, unroll=2))(7)
    xs = {"a": rand(7, 3), "b": rand(7)}
    f = lambda d: {"s": fnp.sin(d["a"]).sum() * d["b"], "v": d["a"] * 2}
    loop = [f({"a": xs["a"][i], "b": xs["b"][i]}) for i in range(7)]
    for bs in (None, 0, 1, 2, 3, 7, 9):
        out = lax.map(f, xs, batch_size=bs)
        np.testing.assert_allclose(out["s"], [o["s"] for o in loop], rtol=1e-5)
        np.testing.assert_allclose(out["v"], np.stack([o["v"] for o in loop]), rtol=1e-6)
    jitted = fg.jit(lambda d: lax.map(f, d, batch_size=3))(xs)
    np.testing.assert_allclose(jitted["s"], [o["s"] for o in loop], rtol=1e-5)


def test_lax_map_batch_size_derivatives_and_vmap(x64):
    c = np.float64(0.3)
    fun = lambda x, c: lax.map(lambda r: fnp.sin(r * c).sum(), x, batch_size=2)
    check_grads(fun, (RNG.standard_normal((5, 3)), c), order=1)
    xs = RNG.standard_normal((2, 5, 3))
    got = fg.vmap(lambda x: fun(x, c))(xs)
    np.testing.assert_allclose(got, np.sin(xs * c).sum(-1), rtol=1e-12)


def test_top_k_along_any_axis_matches_numpy():
    x = rand(3, 5, 4)
    for axis in (0, 1, -1, -2):
        vals, idx = lax.top_k(x, 2, axis=axis)
        order = np.argsort(-x, axis=axis, kind="stable")
        np.testing.assert_array_equal(idx, np.take(order, [0, 1], axis=axis))
        np.testing.assert_allclose(vals, np.take_along_axis(x, np.asarray(idx), axis=axis))
    g = fg.grad(lambda x: lax.top_k(x, 1, axis=0)[0].sum())(x)
    np.testing.assert_array_equal(g, (x == x.max(0, keepdims=True)).astype(np.float32))


def test_lax_dot_mul_reduce_window_and_accuracy():
    a, b = rand(4, 2, 3), rand(4, 3)
    dn = (((2,), (1,)), ((0,), (0,)))
    np.testing.assert_allclose(lax.dot(a, b, dimension_numbers=dn),
                               lax.dot_general(a, b, dn), rtol=1e-6)
    i8 = fnp.array([100, -100], fnp.int8)
    np.testing.assert_array_equal(lax.mul(i8, i8, out_dtype=fnp.int32), [10000, 10000])
    np.testing.assert_allclose(lax.reduce_window(fnp.arange(5.0), 0.0, lax.add, (2,)),
                               [1, 3, 5, 7])
    np.testing.assert_allclose(lax.exp(1.0, accuracy=None), np.e, rtol=1e-6)
    with pytest.raises(ValueError, match="accuracy"):
        lax.sin(1.0, accuracy="high")


def test_conv_transpose_consistent_padding_is_the_gradient_of_the_conv():
    x, k = rand(1, 7, 2), rand(3, 2, 4)
    dn = ("NWC", "WIO", "NWC")
    for pads in ([(1, 1)], [(0, 2)], [(2, 0)]):
        y, vjp = fg.vjp(lambda x, pads=pads: lax.conv_general_dilated(x, k, (2,), pads,
                                                                      dimension_numbers=dn), x)
        ct = rand(*y.shape)
        got = lax.conv_transpose(ct, k, (2,), pads, dimension_numbers=dn, transpose_kernel=True,
                                 use_consistent_padding=True)
        want = vjp(ct)[0]
        assert got.shape[1] >= want.shape[1]  # a longer result ends with what the conv ignored
        np.testing.assert_allclose(got[:, :want.shape[1]], want, rtol=1e-5, atol=1e-6)


def test_out_sharding_and_sharding_place_results_or_say_why_not():
    cpu = fg.devices()[0]

    class OneDevice:  # JAX's Sharding interface
        device_set = {cpu}

    class TwoDevices:
        device_set = {cpu, fg.devices("cpu")[0].__class__("cpu", 1)}
    for make in (lambda s: fnp.zeros(3, out_sharding=s), lambda s: lax.full((3,), 1.0,
                                                                             sharding=s),
                 lambda s: fnp.matmul(fnp.ones((2, 2)), fnp.ones(2), out_sharding=s),
                 lambda s: lax.reduce_sum(fnp.ones((2, 2)), (0,), out_sharding=s),
                 lambda s: nn.initializers.zeros(None, (2,), fnp.float32, s)):
        for s in (None, cpu, OneDevice(), fg.sharding.SingleDeviceSharding(cpu)):
            assert make(s).device == cpu
        with pytest.raises(ValueError, match="spans 2 devices"):
            make(TwoDevices())
        with pytest.raises(TypeError, match="must be None"):
            make("cpu")
    with pytest.raises(ValueError, match="both device and out_sharding"):
        fnp.ones(2, device=cpu, out_sharding=cpu)


def test_gather_and_scatter_with_batching_dims_match_a_loop():
    op, idx = rand(4, 5, 3), RNG.integers(0, 5, (4, 2, 1)).astype(np.int32)
    dn = lax.GatherDimensionNumbers((2,), (1,), (1,), operand_batching_dims=(0,),
                                    start_indices_batching_dims=(0,))
    out = lax.gather(op, idx, dn, (1, 1, 3))
    np.testing.assert_array_equal(out, np.stack([op[b][idx[b, :, 0]] for b in range(4)]))
    sdn = lax.ScatterDimensionNumbers((2,), (1,), (1,), operand_batching_dims=(0,),
                                      scatter_indices_batching_dims=(0,))
    upd = rand(4, 2, 3)
    want = op.copy()
    for b in range(4):
        np.add.at(want[b], idx[b, :, 0], upd[b])
    np.testing.assert_allclose(lax.scatter_add(op, idx, upd, sdn), want, rtol=1e-6)
    g = fg.grad(lambda o: (lax.gather(o, idx, dn, (1, 1, 3)) ** 2).sum())(op)
    want_g = np.zeros_like(op)
    for b in range(4):
        np.add.at(want_g[b], idx[b, :, 0], 2 * op[b][idx[b, :, 0]])
    np.testing.assert_allclose(g, want_g, rtol=1e-6)
    with pytest.raises(ValueError, match="batching dims"):
        lax.gather(op, idx[:3], dn, (1, 1, 3))


def test_cond_and_switch_take_the_operand_keyword():
    assert float(lax.cond(True, lambda x: x + 1, lambda x: x - 1, operand=1.0)) == 2.0
    assert float(lax.switch(1, [lambda x: x, lambda x: 3 * x], operand=2.0)) == 6.0
    with pytest.raises(TypeError, match="operand"):
        lax.cond(True, lambda x: x, lambda x: x, 1.0, operand=2.0)


def test_linalg_subsets_and_algorithm_choices(x64):
    a = RNG.standard_normal((2, 5, 5))
    a = a + np.swapaxes(a, -1, -2)
    v, w = lax.linalg.eigh(a, subset_by_index=(1, 4), implementation="qr")
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a)[:, 1:4], rtol=1e-10)
    np.testing.assert_allclose(a @ v, v * w[:, None, :], atol=1e-10)
    u, s, vh = lax.linalg.svd(a, full_matrices=False, subset_by_index=(0, 2), algorithm="qr")
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False)[:, :2], rtol=1e-10)
    np.testing.assert_allclose(fnp.linalg.svd(a, False, True, False, (0, 2)).S, s)
    with pytest.raises(ValueError, match="full_matrices"):
        lax.linalg.svd(a, subset_by_index=(0, 2))
    with pytest.raises(NotImplementedError, match="jacobi"):
        lax.linalg.svd(a, algorithm="jacobi")
    q, r, p = lax.linalg.qr(a[0] + np.diag(np.arange(5.0)), pivoting=True)
    np.testing.assert_allclose(q @ r, (a[0] + np.diag(np.arange(5.0)))[:, p], atol=1e-12)
    assert np.all(np.diff(np.abs(np.diag(r))) <= 1e-12) and sorted(p.tolist()) == list(range(5))
    check_grads(lambda a: lax.linalg.qr(a, pivoting=True, full_matrices=False)[0],
                (a[0][:, :3],), order=1)
    import scipy.linalg as sl
    q2, r2, p2 = fg.scipy.linalg.qr(a[1][:4], pivoting=True)
    want_q, want_r, want_p = sl.qr(a[1][:4], pivoting=True)
    np.testing.assert_array_equal(p2, want_p)
    np.testing.assert_allclose(r2, want_r, atol=1e-12)
    check_grads(lambda a: lax.linalg.eigh(a, subset_by_index=(3, 5))[1].sum(), (a[0],), order=1)


def test_numpy_linalg_keywords(x64):
    a = RNG.standard_normal((4, 4, 4))
    a[1] = a[1][[1, 0, 2, 3]]  # some determinants negative
    sign, logdet = fnp.linalg.slogdet(a, method="qr")
    want_sign, want_logdet = np.linalg.slogdet(a)
    np.testing.assert_allclose(sign, want_sign)
    np.testing.assert_allclose(logdet, want_logdet, rtol=1e-10)
    check_grads(lambda a: fnp.linalg.slogdet(a, method="qr")[1], (a[0],), order=1)
    spd = a[0] @ a[0].T + 4 * np.eye(4)
    lower_only = np.tril(spd) + np.triu(RNG.standard_normal((4, 4)), 1)
    np.testing.assert_allclose(fnp.linalg.cholesky(lower_only, symmetrize_input=False),
                               np.linalg.cholesky(spd), rtol=1e-10)
    np.testing.assert_allclose(fnp.linalg.eigvalsh(lower_only, symmetrize_input=False),
                               np.linalg.eigvalsh(spd), rtol=1e-10)
    tall, b = RNG.standard_normal((5, 2)), RNG.standard_normal(5)
    assert fnp.linalg.lstsq(tall, b, numpy_resid=True)[1].shape == (1,)
    assert fnp.linalg.lstsq(tall.T, b[:2], numpy_resid=True)[1].shape == (0,)
    with pytest.raises(ValueError, match="only one"):
        fnp.linalg.matrix_rank(a[0], 0.1, tol=0.1)
    assert int(fnp.linalg.matrix_rank(np.diag([10.0, 1.0]), 0.5)) == 1  # relative, NumPy's


# --- numpy ------------------------------------------------------------------------------------

def test_reduction_keywords_match_numpy():
    a = rand(3, 4)
    m = a.mean(1, keepdims=True)
    np.testing.assert_allclose(fnp.var(a, 1, mean=m), a.var(1), rtol=1e-5)
    np.testing.assert_allclose(fnp.std(a, 1, None, None, 1, mean=m), a.std(1, ddof=1),
                               rtol=1e-5)
    b = a.copy()
    b[0, 0] = np.nan
    where = a > -0.5
    np.testing.assert_allclose(fnp.nanmean(b, 1, None, None, False, where),
                               np.nanmean(b, 1, where=where), rtol=1e-5)
    np.testing.assert_allclose(fnp.nanvar(b, 1, mean=np.nanmean(b, 1, keepdims=True)),
                               np.nanvar(b, 1), rtol=1e-5)
    np.testing.assert_allclose(fnp.nanstd(b, 1, None, None, 0, False, where),
                               np.nanstd(b, 1, where=where), rtol=1e-5)
    i8 = fnp.array([100, 100], fnp.int8)
    assert fnp.sum(i8).dtype == np.int32 and int(fnp.sum(i8)) == 200
    assert fnp.sum(i8, promote_integers=False).dtype == np.int8
    assert int(fnp.sum(i8, promote_integers=False)) == -56  # wraps, as in JAX
    assert fnp.prod(fnp.ones(2, bool), promote_integers=False).dtype == np.int32


def test_sorting_and_indexing_keywords():
    x = fnp.array([[5, 3, 4], [2, 7, 6]])
    idx = fnp.argsort(x, dtype=fnp.int16)
    assert idx.dtype == np.int16
    np.testing.assert_array_equal(idx, np.argsort(np.asarray(x)))
    np.testing.assert_array_equal(fnp.unique(x, sorted=False), [2, 3, 4, 5, 6, 7])
    neg = fnp.array([[-1], [0]])
    np.testing.assert_array_equal(fnp.take_along_axis(x, neg, 1), [[4], [2]])
    np.testing.assert_array_equal(
        fnp.take_along_axis(x, neg, 1, mode="clip", wrap_negative_indices=False), [[5], [2]])
    filled = fnp.take_along_axis(x, neg, 1, wrap_negative_indices=False)
    assert int(filled[0, 0]) == np.iinfo(np.int32).min and int(filled[1, 0]) == 2
    flat = fnp.ravel_multi_index((fnp.array([1, 0]), fnp.array([2, 1])), (2, 3),
                                 dtype=fnp.int8)
    assert flat.dtype == np.int8 and flat.tolist() == [5, 1]
    with pytest.raises(ValueError, match="cannot hold"):
        fnp.ravel_multi_index((fnp.array([1]),), (300,), dtype=fnp.int8)
    with pytest.raises(ValueError, match="method"):
        fnp.searchsorted(fnp.arange(3), 1, method="binary")


# --- nn, scipy, optax, tree_util ----------------------------------------------------------------

def test_standardize_algorithms_and_smooth_labels(x64):
    x = RNG.standard_normal((3, 5)) + 1e3
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(nn.standardize(x, algorithm="stable"), want, rtol=1e-8)
    np.testing.assert_allclose(nn.standardize(x), want, rtol=1e-4)
    with pytest.raises(ValueError, match="algorithm"):
        nn.standardize(x, algorithm="welford")
    labels = np.eye(3)[[0, 2]]
    np.testing.assert_allclose(nn.smooth_labels(labels, 0.3, axis=(0, 1)),
                               0.7 * labels + 0.3 / 6)
    where = np.array([True, True, False])
    np.testing.assert_allclose(nn.smooth_labels(labels, 0.3, where=where), 0.7 * labels + 0.15)


def test_log_ndtr_series_order_is_the_asymptotic_series(x64):
    import scipy.special as ss

    from funcgrad.scipy import special as sp
    x = np.array([-45.0, -25.0, -21.0])
    for order in (0, 1, 2, 3, 6):
        z = 1 / x ** 2
        series = sum((-1) ** n * np.prod(np.arange(2 * n - 1, 0, -2)) * z ** n
                     for n in range(order + 1))
        want = -0.5 * x ** 2 - np.log(-x) - 0.5 * np.log(2 * np.pi) + np.log(series)
        np.testing.assert_allclose(sp.log_ndtr(x, order), want, rtol=1e-14)
    np.testing.assert_allclose(sp.log_ndtr(x, 6), ss.log_ndtr(x), rtol=1e-12)
    with pytest.raises(ValueError, match="series_order"):
        sp.log_ndtr(x, 31)


def test_masked_passes_and_masks_extra_arguments():
    seen = {}

    def init(params):
        return optim.EmptyState()

    def update(updates, state, params=None, **extra_args):  # optax's ExtraArgs protocol
        seen.update(extra_args)
        return updates, state
    inner = optim.GradientTransformation(init, update)
    params = {"w": fnp.ones(2), "b": fnp.ones(1)}
    for compatible in (False, True):
        opt = optim.masked(inner, {"w": True, "b": False}, mask_compatible_extra_args=compatible)
        opt.update(params, opt.init(params), params, tags={"w": "a", "b": "b"}, step=3)
        assert seen["step"] == 3
        assert isinstance(seen["tags"]["b"], optim.MaskedNode) == compatible
    plain = optim.masked(optim.scale(2.0), {"w": True, "b": False})
    out, _ = plain.update(params, plain.init(params), tags=None)
    np.testing.assert_array_equal(out["w"], [2, 2])


def test_tree_util_path_leaves_and_keyed_registration():
    tree = {"a": (1, 2), "b": {"c": 3}}
    pairs = tu.tree_leaves_with_path(tree, is_leaf=lambda p, x: len(p) == 1 and p[0].key == "a",
                                     is_leaf_takes_path=True)
    assert [x for _, x in pairs] == [(1, 2), 3]
    mapped = fg.tree.map_with_path(lambda p, x: tu.keystr(p), tree,
                                   is_leaf=lambda p, x: len(p) == 1 and isinstance(x, dict),
                                   is_leaf_takes_path=True)
    assert mapped == {"a": ("['a'][0]", "['a'][1]"), "b": "['b']"}

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b
    tu.register_pytree_node(
        Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c),
        lambda p: (((tu.GetAttrKey("a"), p.a), (tu.GetAttrKey("b"), p.b)), None))
    assert [tu.keystr(k) for k, _ in tu.tree_leaves_with_path(Pair(1, 2))] == [".a", ".b"]


def _attention_reference(q, k, v, bias, keep, scale):
    """softmax(q k^T * scale + bias) v per head in NumPy (keep: the boolean mask)."""
    groups = q.shape[-2] // k.shape[-2]
    k, v = np.repeat(k, groups, axis=-2), np.repeat(v, groups, axis=-2)
    logits = np.einsum("...tnh,...snh->...nts", q, k) * scale + bias
    logits = np.where(keep, logits, -0.7 * np.finfo(np.float32).max)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    return np.einsum("...nts,...snh->...tnh", w / w.sum(-1, keepdims=True), v)


def test_dot_product_attention_against_numpy_with_every_constraint(x64):
    b, t, s, n, kh, h = 2, 4, 5, 4, 2, 3
    q, k, v = rand(b, t, n, h, dtype=np.float64), rand(b, s, kh, h, dtype=np.float64), rand(
        b, s, kh, h, dtype=np.float64)
    bias, mask = rand(1, n, t, s, dtype=np.float64), RNG.random((b, 1, t, s)) < 0.8
    q_len, kv_len = np.array([3, 4], np.int32), np.array([5, 2], np.int32)
    tpos, spos = np.arange(t)[:, None], np.arange(s)[None, :]
    keep = (mask & (tpos >= spos) & (tpos <= spos + 1) & (tpos >= spos - 2)
            & (np.arange(t)[None, None, :, None] < q_len[:, None, None, None])
            & (np.arange(s)[None, None, None, :] < kv_len[:, None, None, None]))
    want = _attention_reference(q, k, v, bias, keep, 0.7)
    want *= (np.arange(t)[None, :] < q_len[:, None])[:, :, None, None]
    kw = dict(scale=0.7, is_causal=True, local_window_size=(1, 2), query_seq_lengths=q_len,
              key_value_seq_lengths=kv_len)
    got = nn.dot_product_attention(q, k, v, bias, mask, **kw)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fg.jit(lambda *a: nn.dot_product_attention(*a, **kw))(
        q, k, v, bias, mask), want, rtol=1e-10, atol=1e-12)
    looped = np.stack([nn.dot_product_attention(q[i], k[i], v[i], bias[0], mask[i, 0],
                                                scale=0.7, is_causal=True) for i in range(b)])
    np.testing.assert_allclose(
        fg.vmap(lambda q, k, v, m: nn.dot_product_attention(q, k, v, bias[0], m, scale=0.7,
                                                            is_causal=True))(q, k, v, mask[:, 0]),
        looped, rtol=1e-10)
    check_grads(lambda q, k, v, bias: nn.dot_product_attention(
        q, k, v, bias, mask, is_causal=True), (q, k, v, bias), order=1)


def test_dot_product_attention_rejects_what_jax_rejects():
    q = rand(2, 3, 2, 4)
    with pytest.raises(ValueError, match="cudnn"):
        nn.dot_product_attention(q, q, q, implementation="cudnn")
    with pytest.raises(ValueError, match="implementation"):
        nn.dot_product_attention(q, q, q, implementation="flash")
    with pytest.raises(ValueError, match="one dtype"):
        nn.dot_product_attention(q, q.astype(np.float16), q)
    with pytest.raises(ValueError, match="int32 of shape"):
        nn.dot_product_attention(q, q, q, query_seq_lengths=np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="multiple"):
        nn.dot_product_attention(rand(3, 3, 4), rand(3, 2, 4), rand(3, 2, 4))
    with pytest.raises(ValueError, match="bias"):
        nn.dot_product_attention(q, q, q, bias=rand(2, 3, 3, 3))
