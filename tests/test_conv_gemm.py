"""`conv_general_dilated` as packed GEMMs (`lax/conv_plan.py`, `backends/native/conv.py`):
forward, input gradient and kernel gradient against loops over the kernel's offsets, for any
dimension numbers, strides, padding, lhs/rhs dilation, feature and batch groups; eager, the
numpy backend and the native tier give the same bits (the C routine packs as numpy does and
calls the same BLAS gemm with the same arguments), also when a problem is cut into chunks;
float16 computes in float32; derivatives in float64 and vmap against a loop.
"""

import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funcgrad as fg
from funcgrad import lax
from funcgrad.backends.native import blas, build
from funcgrad.compiler import pipeline
from funcgrad.lax import conv_plan
from funcgrad.test_util import check_grads
from tests.test_native_backend import native_mode

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler (checked "
                              "by test_native_backend.test_a_compiler_means_...)")


# --- the reference: loops over kernel offsets and groups, float64 -----------------------------
def _positions(shape, padding, lhs_dil):
    """For the padded, dilated canonical input (N, C, S...): the flat index of the input
    element at each position, -1 where there is none (padding, holes, cropped)."""
    idx = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    for d, ((lo, hi), r) in enumerate(zip(padding, lhs_dil)):
        ax = 2 + d
        n = idx.shape[ax]
        full = list(idx.shape)
        full[ax] = 0 if n == 0 else (n - 1) * r + 1
        y = np.full(full, -1, np.int64)
        sl = [slice(None)] * idx.ndim
        sl[ax] = slice(None, None, r)
        y[tuple(sl)] = idx
        pad = [(0, 0)] * idx.ndim
        pad[ax] = (max(lo, 0), max(hi, 0))
        y = np.pad(y, pad, constant_values=-1)
        sl[ax] = slice(max(-lo, 0), y.shape[ax] - max(-hi, 0))
        idx = y[tuple(sl)]
    return idx


def conv_loops(x, w, ct, strides, padding, lhs_dil, rhs_dil, fgc, bgc):
    """(out, d out/dx . ct, d out/dw . ct) of a canonical conv: x (N, C, S...), w (O, I, K...),
    ct (N/bgc, O, out...), all float64."""
    pos = _positions(x.shape, padding, lhs_dil)
    xpd = np.where(pos >= 0, x.reshape(-1)[np.maximum(pos, 0)], 0.0)
    kernel, (n, c), o = w.shape[2:], x.shape[:2], w.shape[0]
    groups = fgc * bgc
    out_sp = [(p - ((k - 1) * r + 1)) // s + 1
              for p, k, r, s in zip(xpd.shape[2:], kernel, rhs_dil, strides)]
    out, gx, gw = np.zeros([n // bgc, o] + out_sp), np.zeros(xpd.shape), np.zeros(w.shape)
    for k in itertools.product(*[range(kk) for kk in kernel]):
        win = (slice(None), slice(None)) + tuple(
            slice(ki * r, ki * r + (oi - 1) * s + 1, s)
            for ki, r, oi, s in zip(k, rhs_dil, out_sp, strides))
        for g in range(groups):
            og = slice(g * (o // groups), (g + 1) * (o // groups))
            xs = (slice(None), slice(g * (c // fgc), (g + 1) * (c // fgc))) if fgc > 1 else (
                slice(g * (n // bgc), (g + 1) * (n // bgc)), slice(None))
            patch = xpd[win][xs]
            wk = w[(og, slice(None)) + k]
            out[:, og] += np.einsum("nc...,oc->no...", patch, wk)
            gw[(og, slice(None)) + k] += np.einsum(
                "ncs,nos->oc", patch.reshape(patch.shape[:2] + (-1,)),
                ct[:, og].reshape(ct[:, og].shape[:2] + (-1,)))
            view = gx[win][xs]
            view += np.einsum("no...,oc->nc...", ct[:, og], wk)
            gx[win][xs] = view
    dx = np.zeros(x.size)
    np.add.at(dx, pos[pos >= 0], gx[pos >= 0])
    return out, dx.reshape(x.shape), gw


# --- random problems ---------------------------------------------------------------------------
@st.composite
def problems(draw, max_spatial=2):
    """A random convolution: operands in random layouts, its params, and a cotangent."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    nsp = draw(st.integers(1, max_spatial))
    fgc, bgc = draw(st.sampled_from([(1, 1), (1, 1), (2, 1), (1, 2), (3, 1)]))
    n, cg, og = bgc * draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kernel = [draw(st.integers(1, 3)) for _ in range(nsp)]
    rd = [draw(st.integers(1, 2)) for _ in range(nsp)]
    ld = [draw(st.integers(1, 2)) for _ in range(nsp)]
    strides = [draw(st.integers(1, 3)) for _ in range(nsp)]
    spatial = [draw(st.integers(1, 6)) for _ in range(nsp)]
    padding = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(nsp)]
    for i in range(nsp):  # the padded input at least as large as the dilated kernel
        need = (kernel[i] - 1) * rd[i] + 1 - ((spatial[i] - 1) * ld[i] + 1)
        padding[i] = (padding[i][0], max(padding[i][1], need - padding[i][0]))
    perms = [draw(st.permutations(range(nsp + 2))) for _ in range(3)]
    x = rng.standard_normal([n, cg * fgc] + spatial)
    w = rng.standard_normal([og * fgc * bgc, cg] + kernel)
    params = dict(window_strides=tuple(strides), padding=tuple(padding),
                  lhs_dilation=tuple(ld), rhs_dilation=tuple(rd),
                  feature_group_count=fgc, batch_group_count=bgc)
    return x, w, perms, params, rng


def _layout(x, w, perms, params, dtype):
    """The operands in their layouts, the dimension numbers, and the canonical->layout maps."""
    lp, rp, op = (list(p) for p in perms)
    dn = lax.ConvDimensionNumbers(*(tuple(p.index(i) for i in range(len(p)))
                                    for p in (lp, rp, op)))
    return x.transpose(lp).astype(dtype), w.transpose(rp).astype(dtype), dn


def _conv(dn, params):
    return lambda a, b: lax.conv_general_dilated(a, b, dimension_numbers=dn, **params)


def _all_three(dn, params):
    """(out, dx, dw) of a cotangent, as one function."""
    f = _conv(dn, params)

    def run(a, b, ct):
        out, vjp = fg.vjp(f, a, b)
        return (out, *vjp(ct))
    return run


def _canonical(y, spec):
    return np.asarray(y).transpose(spec)


@given(problems(max_spatial=3))
def test_forward_and_both_gradients_match_loops(problem):
    x, w, perms, params, rng = problem
    fg.config.update("enable_x64", True)
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 1e-4)):
        xl, wl, dn = _layout(x, w, perms, params, dtype)
        out = _conv(dn, params)(xl, wl)
        ct_can = rng.standard_normal(_canonical(out, dn.out_spec).shape)
        ct = ct_can.transpose(np.argsort(dn.out_spec)).astype(dtype)
        got = _all_three(dn, params)(xl, wl, ct)
        want = conv_loops(x.astype(dtype).astype(np.float64), w.astype(dtype).astype(np.float64),
                          ct_can.astype(dtype).astype(np.float64), params["window_strides"],
                          params["padding"], params["lhs_dilation"], params["rhs_dilation"],
                          params["feature_group_count"], params["batch_group_count"])
        for g, spec, wnt in zip(got, (dn.out_spec, dn.lhs_spec, dn.rhs_spec), want):
            assert np.asarray(g).dtype == dtype
            np.testing.assert_allclose(_canonical(g, spec), wnt, rtol=tol, atol=tol)


def _compiled(fn, args, backend):
    closed = fg.make_jaxpr(fn)(*args)
    if backend == "native":
        with native_mode():
            exe = pipeline.compile_jaxpr(closed, backend="cpu")
            return [np.asarray(o) for o in exe(*args)], exe.as_text()
    return [np.asarray(o) for o in pipeline.compile_jaxpr(closed, backend="numpy")(*args)], ""


def _same_bits(fn, args):
    """Eager, numpy backend and native results of `fn`, checked equal bit for bit; the
    native program's text."""
    eager = [np.asarray(o) for o in fn(*args)]
    for backend in ("numpy", "native"):
        got, text = _compiled(fn, args, backend)
        for g, e in zip(got, eager):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g.view(f"u{g.itemsize}"), e.view(f"u{e.itemsize}"))
    return text


@needs_cc
@settings(max_examples=12)
@given(problems(), st.sampled_from([np.float32, np.float64, np.float16]))
def test_eager_numpy_backend_and_native_give_the_same_bits(problem, dtype):
    x, w, perms, params, rng = problem
    fg.config.update("enable_x64", True)
    xl, wl, dn = _layout(x, w, perms, params, dtype)
    out = _conv(dn, params)(xl, wl)
    ct = rng.standard_normal(out.shape).astype(dtype)
    fn = _all_three(dn, params)
    text = _same_bits(fn, (xl, wl, ct))
    assert _routines(text) == _blas_plans(fn, (xl, wl, ct))


def _routines(text):
    """The C convolution routines of a native program."""
    return text.count("/* conv_general_dilated float")


def _blas_plans(fn, args):
    """How many convolutions of `fn` the native tier computes in C: those whose plan
    numpy runs through gemm, when numpy's BLAS is at hand."""
    count = 0
    for e in fg.make_jaxpr(fn)(*args).jaxpr.eqns:
        if e.prim is lax.conv_general_dilated_p:
            (la, ra), o = (v.aval for v in e.invars), e.outvars[0].aval
            p = conv_plan.plan_of(la.shape, ra.shape, ra.dtype, o.shape, o.dtype, **e.params)
            count += p.blas and o.size > 0
    return count if blas.functions() else 0


# Cases with large problems cut into chunks (PACK_BYTES made tiny): along m (output rows),
# along k (partial products added in order), and k one index at a time keeping B a view.
CHUNKED = [
    ((2, 5, 5, 3), (3, 3, 3, 4), ("NHWC", "HWIO", "NHWC"), (1, 1), "SAME", 1),
    ((3, 4, 6, 6), (4, 2, 3, 3), ("NCHW", "OIHW", "NCHW"), (2, 1), ((1, 0), (2, 1)), 2),
    ((4, 6, 2, 5), (3, 2, 2, 4), ("NHCW", "HIWO", "CWHN"), (1, 2), "VALID", 1),
]


@pytest.fixture
def tiny_chunks(monkeypatch):
    monkeypatch.setattr(conv_plan, "PACK_BYTES", 512)
    monkeypatch.setattr(conv_plan, "B_CHUNK_MIN_K", 2)
    conv_plan.plan.cache_clear()
    yield
    conv_plan.plan.cache_clear()


@pytest.mark.parametrize("case", CHUNKED)
def test_chunked_plans_give_the_same_numbers(case, tiny_chunks):
    xs, ws, dn, strides, padding, fgc = case
    rng = np.random.default_rng(len(xs))
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(
        np.float32)
    f = lambda a, b: lax.conv_general_dilated(a, b, strides, padding, dimension_numbers=dn,
                                              feature_group_count=fgc)
    out = f(x, w)
    ct = rng.standard_normal(out.shape).astype(np.float32)

    def run(a, b, c):
        y, vjp = fg.vjp(f, a, b)
        return (y, *vjp(c))
    chunks = set()
    closed = fg.make_jaxpr(run)(x, w, ct)
    for e in closed.jaxpr.eqns:
        if e.prim is lax.conv_general_dilated_p:
            (la, ra), o = (v.aval for v in e.invars), e.outvars[0].aval
            conv = conv_plan.plan_of(la.shape, ra.shape, ra.dtype, o.shape, o.dtype,
                                     **e.params)
            chunks.update(p.chunk for p in conv.phases)
    assert chunks & {"m", "k"}
    results = run(x, w, ct)
    conv_plan.plan.cache_clear()
    with pytest.MonkeyPatch.context() as m:  # unchunked: the same numbers within rounding
        m.setattr(conv_plan, "PACK_BYTES", 1 << 30)
        for got, want in zip(results, run(x, w, ct)):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    conv_plan.plan.cache_clear()
    if build.find_compiler() is not None:
        _same_bits(run, (x, w, ct))


@pytest.mark.parametrize("dn", [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW")])
def test_input_gradients_of_strided_convolutions_skip_the_dilation_holes(dn):
    # the input gradient convolves the cotangent dilated by the strides: it runs as one
    # dense convolution per phase (output position mod stride), a quarter of the products
    rng = np.random.default_rng(8)
    nhwc = dn[0] == "NHWC"
    x = rng.standard_normal((2, 9, 8, 3) if nhwc else (2, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 5) if nhwc else (5, 3, 3, 3)).astype(np.float32)
    f = lambda a, b: lax.conv_general_dilated(a, b, (2, 2), "SAME", dimension_numbers=dn)
    out = f(x, w)
    ct = rng.standard_normal(out.shape).astype(np.float32)
    dx = lambda a, b, c: fg.vjp(lambda v: f(v, b), a)[1](c)
    eqn = [e for e in fg.make_jaxpr(dx)(x, w, ct).jaxpr.eqns
           if e.prim is lax.conv_general_dilated_p][-1]
    (la, ra), o = (v.aval for v in eqn.invars), eqn.outvars[0].aval
    conv = conv_plan.plan_of(la.shape, ra.shape, ra.dtype, o.shape, o.dtype, **eqn.params)
    assert eqn.params["lhs_dilation"] == (2, 2) and len(conv.phases) == 4
    dilated = x.size * 9 * 5  # products of one GEMM over the dilated cotangent: 3/4 zeros
    assert 3 * sum(g * m * k * n for g, m, k, n in conv.gemms()) < dilated
    pads = lax.padtype_to_pads((9, 8), (3, 3), (2, 2), "SAME")
    want = conv_loops(np.moveaxis(x, 3, 1) if nhwc else x, np.transpose(
        w, (3, 2, 0, 1)) if nhwc else w, np.moveaxis(ct, 3, 1) if nhwc else ct, (2, 2),
        pads, (1, 1), (1, 1), 1, 1)[1]
    got = np.asarray(dx(x, w, ct)[0])
    np.testing.assert_allclose(np.moveaxis(got, 3, 1) if nhwc else got, want, rtol=1e-4,
                               atol=1e-4)
    if build.find_compiler() is not None:
        _same_bits(lambda a, b, c: dx(a, b, c), (x, w, ct))


@pytest.mark.parametrize("dn", [((0, 1), (0, 1), (0, 1)), ((1, 0), (1, 0), (1, 0)),
                                ((0, 1), (1, 0), (1, 0))])
def test_convolutions_without_spatial_axes_are_products(dn, monkeypatch):
    monkeypatch.setattr(conv_plan, "PACK_BYTES", 200)  # chunks of the batch (10 rows)
    conv_plan.plan.cache_clear()
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((37, 5)).astype(np.float32), rng.standard_normal(
        (6, 5)).astype(np.float32)
    xl, wl = (a if spec == (0, 1) else a.T.copy() for a, spec in zip((x, w), dn))
    f = lambda a, b: lax.conv_general_dilated(a, b, (), (), dimension_numbers=dn)
    got = np.asarray(f(xl, wl))
    np.testing.assert_allclose(got if dn[2] == (0, 1) else got.T, x @ w.T, rtol=1e-5,
                               atol=1e-5)
    if build.find_compiler() is not None:
        assert _routines(_same_bits(lambda a, b: [f(a, b)], (xl, wl))) == (
            1 if blas.functions() else 0)
    conv_plan.plan.cache_clear()


def test_float16_computes_in_float32_and_rounds_once():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float16)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float16)
    got = lax.conv_general_dilated(x, w, (1, 1), "SAME")
    want = lax.conv_general_dilated(x.astype(np.float32), w.astype(np.float32), (1, 1), "SAME")
    assert got.dtype == np.float16
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want).astype(np.float16))
    mixed = lax.conv_general_dilated(x, w, (1, 1), "SAME", preferred_element_type=np.float32)
    np.testing.assert_array_equal(np.asarray(mixed), np.asarray(want))


def test_bfloat16_computes_in_float32_and_rounds_once_on_every_tier():
    # as float16: packed into float32, one gemm, one rounding (ml_dtypes', to nearest even;
    # JAX's CPU convolution gives these bits too); eager, the numpy backend and the native C
    # routine give the same bits
    bf16 = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 9, 9)).astype(bf16)
    w = rng.standard_normal((4, 3, 3, 3)).astype(bf16)
    conv = lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME")
    got, want = conv(x, w), conv(x.astype(np.float32), w.astype(np.float32))
    assert got.dtype == bf16
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16),
                                  np.asarray(want).astype(bf16).view(np.uint16))
    mixed = lax.conv_general_dilated(x, w, (1, 1), "SAME", preferred_element_type=np.float32)
    np.testing.assert_array_equal(np.asarray(mixed), np.asarray(want))
    if build.find_compiler() is not None:
        ct = rng.standard_normal(got.shape).astype(bf16)
        params = {"window_strides": (1, 1), "padding": "SAME"}
        text = _same_bits(_all_three(("NCHW", "OIHW", "NCHW"), params), (x, w, ct))
        assert _routines(text) == (3 if blas.functions() else 0)


def test_integer_convolutions_are_exact():
    rng = np.random.default_rng(4)
    x = rng.integers(-9, 9, (2, 3, 5, 6)).astype(np.int32)
    w = rng.integers(-9, 9, (4, 3, 2, 3)).astype(np.int32)
    got = lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (0, 2)), rhs_dilation=(1, 2))
    want, _, _ = conv_loops(x.astype(np.float64), w.astype(np.float64),
                            np.zeros(got.shape), (2, 1), ((1, 0), (0, 2)), (1, 1), (1, 2), 1, 1)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), want.astype(np.int32))


@pytest.mark.parametrize("params", [
    dict(window_strides=(2, 1), padding=((1, 1), (0, 2)), lhs_dilation=(1, 2),
         rhs_dilation=(2, 1), dimension_numbers=("NHWC", "HWIO", "NHWC")),
    dict(window_strides=(1, 1), padding="SAME", feature_group_count=2,
         dimension_numbers=("NCHW", "OIHW", "NCHW")),
])
def test_second_order_derivatives_in_float64(params):
    rng = np.random.default_rng(5)
    nchw = params["dimension_numbers"][0] == "NCHW"
    x = rng.standard_normal((2, 4, 5, 4) if nchw else (2, 5, 4, 4))
    w = rng.standard_normal((4, 2, 3, 2) if nchw else (3, 2, 4, 3))
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, **params), (x, w), order=2)


@pytest.mark.parametrize("axes", [(0, None), (None, 0), (1, 2), (3, 3)])
def test_vmap_equals_a_loop(axes):
    rng = np.random.default_rng(6)
    dn = ("NHWC", "OHWI", "NCHW")
    x = np.moveaxis(rng.standard_normal((3, 2, 5, 4, 2)), 0, axes[0]) if axes[0] is not None \
        else rng.standard_normal((2, 5, 4, 2))
    w = np.moveaxis(rng.standard_normal((3, 3, 2, 2, 2)), 0, axes[1]) if axes[1] is not None \
        else rng.standard_normal((3, 2, 2, 2))
    f = lambda a, b: lax.conv_general_dilated(a, b, (1, 2), "SAME", dimension_numbers=dn)
    got = np.asarray(fg.vmap(f, in_axes=axes)(x, w))
    want = np.stack([np.asarray(f(x if axes[0] is None else np.take(x, i, axes[0]),
                                  w if axes[1] is None else np.take(w, i, axes[1])))
                     for i in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@needs_cc
def test_the_cnn_convolutions_are_c_routines_calling_gemm():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 8, 8, 1)).astype(np.float32)
    w1 = rng.standard_normal((3, 3, 1, 16)).astype(np.float32)
    w2 = rng.standard_normal((3, 3, 16, 8)).astype(np.float32)
    dn = ("NHWC", "HWIO", "NHWC")

    def loss(w1, w2, x):
        h = lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn)
        h = lax.conv_general_dilated(h * h, w2, (1, 1), "SAME", dimension_numbers=dn)
        return (h * h).sum()

    def step(*a):
        value, (g1, g2) = fg.value_and_grad(loss, argnums=(0, 1))(*a)
        return value, g1, g2
    text = _same_bits(step, (w1, w2, x))
    # the two forward convolutions, the input gradient of the second, both kernel gradients
    assert _routines(text) == (5 if blas.functions() else 0)
