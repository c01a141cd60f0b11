"""dot_general, conv_general_dilated and the windowed reductions: eager results against numpy
references, derivatives with `check_grads`, batching rules against a Python loop, errors."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
from funcgrad import errors, lax
from funcgrad.interpreters.batching import batch_eval
from funcgrad.lax.convolution import (
    conv_general_dilated,
    reduce_window,
    reduce_window_max,
    reduce_window_min,
    reduce_window_sum,
)
from funcgrad.lax.linalg import batch_matmul, dot, dot_general
from funcgrad.test_util import check_batching, check_grads

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def total(x):
    return lax.reduce_sum(x, tuple(range(np.ndim(x))))




# --- dot_general ------------------------------------------------------------------------------

@st.composite
def dot_problems(draw):
    """Random operands and dimension numbers with batch, contracting and free axes."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    nb, nc, nl, nr = (draw(st.integers(0, 2)) for _ in range(4))
    size = {}
    for name in [f"b{i}" for i in range(nb)] + [f"c{i}" for i in range(nc)] + [
            f"l{i}" for i in range(nl)] + [f"r{i}" for i in range(nr)]:
        size[name] = draw(st.integers(1, 3))
    batch = [f"b{i}" for i in range(nb)]
    contract = [f"c{i}" for i in range(nc)]
    lhs_axes = draw(st.permutations(batch + contract + [f"l{i}" for i in range(nl)]))
    rhs_axes = draw(st.permutations(batch + contract + [f"r{i}" for i in range(nr)]))
    batch = draw(st.permutations(batch))
    contract = draw(st.permutations(contract))
    dn = ((tuple(lhs_axes.index(c) for c in contract), tuple(rhs_axes.index(c) for c in contract)),
          (tuple(lhs_axes.index(b) for b in batch), tuple(rhs_axes.index(b) for b in batch)))
    lhs = rng.standard_normal([size[a] for a in lhs_axes]).astype(np.float32)
    rhs = rng.standard_normal([size[a] for a in rhs_axes]).astype(np.float32)
    out_axes = batch + [a for a in lhs_axes if a[0] == "l"] + [a for a in rhs_axes if a[0] == "r"]
    letters = {a: chr(ord("a") + i) for i, a in enumerate(size)}
    spec = (f"{''.join(letters[a] for a in lhs_axes)},{''.join(letters[a] for a in rhs_axes)}"
            f"->{''.join(letters[a] for a in out_axes)}")
    return lhs, rhs, dn, spec


@given(dot_problems())
def test_dot_general_matches_einsum(problem):
    lhs, rhs, dn, spec = problem
    got = dot_general(lhs, rhs, dn)
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.einsum(spec, lhs, rhs), rtol=1e-5, atol=1e-5)


@given(dot_problems(), st.sampled_from(["lhs", "rhs", "both"]), st.integers(0, 4))
def test_dot_general_batching(problem, which, pos):
    lhs, rhs, dn, _ = problem
    ld = None if which == "rhs" else min(pos, lhs.ndim)
    rd = None if which == "lhs" else min(pos, rhs.ndim)
    x = lhs if ld is None else np.stack([lhs * (i + 1) for i in range(3)], axis=ld)
    y = rhs if rd is None else np.stack([rhs - i for i in range(3)], axis=rd)
    check_batching(lambda a, b: dot_general(a, b, dn), [x, y], [ld, rd], rtol=1e-5)


DOT_CASES = [
    ((3, 4), (4, 5), (((1,), (0,)), ((), ()))),
    ((4,), (4, 5), (((0,), (0,)), ((), ()))),
    ((3, 4), (4,), (((1,), (0,)), ((), ()))),
    ((3, 4), (5, 4), (((1,), (1,)), ((), ()))),
    ((4, 3), (4, 5), (((0,), (0,)), ((), ()))),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    ((3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,)))),
    ((2, 3), (4, 5), (((), ()), ((), ()))),
    ((2, 3, 4), (3, 4), (((1, 2), (0, 1)), ((), ()))),
]


@pytest.mark.parametrize("ls, rs, dn", DOT_CASES)
def test_dot_general_grads(ls, rs, dn):
    x, y = rand(*ls), rand(*rs)
    check_grads(lambda a, b: dot_general(a, b, dn), (x, y), order=2)


def test_dot_wrappers_and_dtypes():
    a, b = rand(3, 4, dtype=np.float32), rand(4, 5, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(dot(a, b)), a @ b, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(dot(a[0], b)), a[0] @ b, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(dot(a[0], a[0])), a[0] @ a[0], rtol=1e-5)
    p, q = rand(5, 2, 3, dtype=np.float32), rand(5, 3, 4, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(batch_matmul(p, q)), p @ q, rtol=1e-5)
    i, j = np.arange(12, dtype=np.int32).reshape(3, 4), np.arange(8, dtype=np.int32).reshape(4, 2)
    got = dot(i, j)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), i @ j)
    wide = dot(i.astype(np.int8), j.astype(np.int8), preferred_element_type=np.int32)
    assert wide.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(wide), i @ j)


def test_dot_preferred_element_type_grad():
    a, b = rand(3, 4, dtype=np.float16), rand(4, 2, dtype=np.float16)
    g = fg.grad(lambda x: total(dot(x, b, preferred_element_type=np.float32)))(a)
    assert g.dtype == np.float16
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(b.sum(1), (3, 4)), rtol=1e-2)


def test_dot_errors_name_both_shapes():
    a, b = np.ones((3, 4), np.float32), np.ones((5, 6), np.float32)
    with pytest.raises(TypeError) as e:
        dot(a, b)
    msg = str(e.value)
    assert "f32[3,4]" in msg and "f32[5,6]" in msg and "test_lax_linalg_conv.py" in msg
    with pytest.raises(errors.FuncgradTypeError) as e:
        dot_general(a, b, (((1,), (0,)), ((), ())))
    assert "f32[3,4]" in str(e.value) and "f32[5,6]" in str(e.value)
    with pytest.raises(errors.FuncgradValueError):
        dot_general(a, b, (((2,), (0,)), ((), ())))
    with pytest.raises(TypeError, match="same dtype"):
        dot(a, np.ones((4, 2), np.int32))


def test_dot_under_jaxpr_and_grad_of_jit_free_trace():
    a, b = rand(3, 4, dtype=np.float32), rand(4, 2, dtype=np.float32)
    closed = fg.make_jaxpr(lambda x, y: dot(x, y))(a, b)
    assert "dot_general" in str(closed)
    ga, gb = fg.grad(lambda x, y: total(dot(x, y)), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(np.asarray(ga), np.broadcast_to(b.sum(1), (3, 4)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(gb), np.broadcast_to(a.sum(0)[:, None], (4, 2)),
                               rtol=1e-5)


# --- conv_general_dilated: a naive reference ----------------------------------------------

def dilate_pad_ref(x, padding, dilation, axes, value=0.0):
    for ax, (lo, hi), d in zip(axes, padding, dilation):
        n = x.shape[ax]
        shape = list(x.shape)
        shape[ax] = 0 if n == 0 else (n - 1) * d + 1
        y = np.full(shape, value, x.dtype)
        index = [slice(None)] * x.ndim
        index[ax] = slice(None, None, d)
        y[tuple(index)] = x
        pad = [(0, 0)] * x.ndim
        pad[ax] = (max(lo, 0), max(hi, 0))
        y = np.pad(y, pad, constant_values=value)
        index[ax] = slice(max(-lo, 0), y.shape[ax] - max(-hi, 0))
        x = y[tuple(index)]
    return x


def conv_ref(x, w, strides, padding, lhs_dil, rhs_dil, fgc=1, bgc=1):
    """Loop over kernel offsets and groups; x is (N, C, S...), w is (O, I, K...)."""
    nsp = x.ndim - 2
    x = dilate_pad_ref(x, padding, lhs_dil, range(2, 2 + nsp))
    kernel = w.shape[2:]
    out_sp = [(p - ((k - 1) * r + 1)) // s + 1
              for p, k, r, s in zip(x.shape[2:], kernel, rhs_dil, strides)]
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    groups = fgc * bgc
    out = np.zeros([n // bgc, o] + out_sp)
    for k in itertools.product(*[range(kk) for kk in kernel]):
        window = tuple(slice(ki * r, ki * r + (oi - 1) * s + 1, s)
                       for ki, r, oi, s in zip(k, rhs_dil, out_sp, strides))
        patch = x[(slice(None), slice(None)) + window]
        for g in range(groups):
            og = slice(g * (o // groups), (g + 1) * (o // groups))
            if fgc > 1:
                xg = patch[:, g * (c // fgc):(g + 1) * (c // fgc)]
            else:
                xg = patch[g * (n // bgc):(g + 1) * (n // bgc)]
            out[:, og] += np.einsum("nc...,oc->no...", xg, w[(og, slice(None)) + k])
    return out


# (lhs shape NC..., rhs shape OI..., strides, padding, lhs_dilation, rhs_dilation, fgc, bgc)
CONV_CASES = [
    ((2, 3, 7, 6), (4, 3, 3, 2), (1, 1), "VALID", (1, 1), (1, 1), 1, 1),
    ((2, 3, 7, 6), (4, 3, 3, 2), (2, 1), "SAME", (1, 1), (1, 1), 1, 1),
    ((1, 2, 6, 6), (3, 2, 2, 3), (1, 2), ((1, 2), (0, 1)), (1, 1), (2, 1), 1, 1),
    ((1, 2, 4, 3), (2, 2, 3, 2), (1, 2), ((1, 1), (2, 0)), (2, 2), (1, 1), 1, 1),
    ((2, 3, 5, 5), (6, 1, 3, 3), (1, 1), "SAME", (1, 1), (1, 1), 3, 1),
    ((1, 4, 5, 4), (4, 2, 2, 2), (2, 1), ((0, 1), (1, 0)), (1, 1), (1, 2), 2, 1),
    ((4, 3, 5, 4), (4, 3, 2, 2), (1, 1), "VALID", (1, 1), (1, 1), 1, 2),
    ((2, 3, 9), (4, 3, 3), (2,), "SAME_LOWER", (1,), (1,), 1, 1),
    ((2, 2, 6, 5), (3, 2, 2, 2), (1, 1), ((-1, 1), (0, -1)), (1, 1), (1, 1), 1, 1),
    ((1, 2, 3, 3, 3), (2, 2, 2, 1, 2), (1, 2, 1), "SAME", (1, 1, 1), (1, 1, 1), 1, 1),
]


def _conv(case, x, w):
    _, _, strides, padding, ld, rd, fgc, bgc = case
    return conv_general_dilated(x, w, strides, padding, ld, rd, feature_group_count=fgc,
                                batch_group_count=bgc)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_matches_reference(case):
    ls, rs, strides, padding, ld, rd, fgc, bgc = case
    x, w = rand(*ls, dtype=np.float32), rand(*rs, dtype=np.float32)
    got = _conv(case, x, w)
    if isinstance(padding, str):
        from funcgrad.lax.convolution import padtype_to_pads
        k = [(kk - 1) * r + 1 for kk, r in zip(rs[2:], rd)]
        padding = padtype_to_pads(ls[2:], k, strides, padding)
    want = conv_ref(x.astype(np.float64), w.astype(np.float64), strides, padding, ld, rd,
                    fgc, bgc)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


@st.composite
def conv_problems(draw):
    """Random 1-d/2-d convolutions with strides, padding, dilations and groups."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    nsp = draw(st.integers(1, 2))
    fgc, bgc = draw(st.sampled_from([(1, 1), (2, 1), (1, 2), (3, 1)]))
    n, cg, og = bgc * draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    groups = fgc * bgc
    kernel = [draw(st.integers(1, 3)) for _ in range(nsp)]
    rhs_dil = [draw(st.integers(1, 2)) for _ in range(nsp)]
    lhs_dil = [draw(st.integers(1, 2)) for _ in range(nsp)]
    strides = [draw(st.integers(1, 3)) for _ in range(nsp)]
    spatial = [draw(st.integers(1, 6)) for _ in range(nsp)]
    padding = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(nsp)]
    for i in range(nsp):  # keep the padded input at least as large as the dilated kernel
        need = (kernel[i] - 1) * rhs_dil[i] + 1 - ((spatial[i] - 1) * lhs_dil[i] + 1)
        padding[i] = (padding[i][0], max(padding[i][1], need - padding[i][0]))
    x = rng.standard_normal([n, cg * fgc] + spatial)
    w = rng.standard_normal([og * groups, cg] + kernel)
    return x, w, tuple(strides), tuple(padding), tuple(lhs_dil), tuple(rhs_dil), fgc, bgc


@given(conv_problems())
def test_conv_random_configurations(problem):
    x, w, strides, padding, ld, rd, fgc, bgc = problem
    got = conv_general_dilated(x, w, strides, padding, ld, rd, feature_group_count=fgc,
                               batch_group_count=bgc)
    want = conv_ref(x.astype(np.float32).astype(np.float64), w.astype(np.float32),
                    strides, padding, ld, rd, fgc, bgc)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)

    def f(a, b):
        return conv_general_dilated(a, b, strides, padding, ld, rd, feature_group_count=fgc,
                                    batch_group_count=bgc)
    check_grads(f, (x, w), order=1)
    check_batching(f, [np.stack([x, -x]), np.stack([w, 2 * w], axis=1)], [0, 1], rtol=1e-5)


def test_conv_same_padding_keeps_size_and_layouts_agree():
    x, w = rand(2, 3, 8, 7, dtype=np.float32), rand(5, 3, 3, 3, dtype=np.float32)
    out = conv_general_dilated(x, w, (1, 1), "SAME")
    assert out.shape == (2, 5, 8, 7)
    nhwc = conv_general_dilated(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), (1, 1),
                                "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(np.asarray(nhwc), np.asarray(out).transpose(0, 2, 3, 1),
                               rtol=1e-5, atol=1e-5)
    mixed = conv_general_dilated(x, w.transpose(2, 3, 1, 0), (1, 1), "SAME",
                                 dimension_numbers=("NCHW", "HWIO", "NHWC"))
    np.testing.assert_allclose(np.asarray(mixed), np.asarray(out).transpose(0, 2, 3, 1),
                               rtol=1e-5, atol=1e-5)
    wide = lax.conv(x.astype(np.int32), w.astype(np.int32), (1, 1), "VALID")
    assert wide.dtype == np.int32


@pytest.mark.parametrize("case", CONV_CASES[:9])
def test_conv_grads(case):
    ls, rs = case[:2]
    x, w = rand(*ls), rand(*rs)
    check_grads(lambda a, b: _conv(case, a, b), (x, w), order=1)


@pytest.mark.parametrize("case", [CONV_CASES[2], CONV_CASES[4]])
def test_conv_second_order(case):
    ls, rs = case[:2]
    check_grads(lambda a, b: _conv(case, a, b), (rand(*ls), rand(*rs)), order=2)


def test_conv_nhwc_grads_and_depthwise_training_step():
    x, w = rand(2, 5, 5, 4), rand(3, 3, 1, 4)

    def f(a, b):
        return conv_general_dilated(a, b, (2, 2), "SAME", dimension_numbers=(
            "NHWC", "HWIO", "NHWC"), feature_group_count=4)
    check_grads(f, (x, w), order=1)


@pytest.mark.parametrize("case", [CONV_CASES[0], CONV_CASES[4], CONV_CASES[5], CONV_CASES[6],
                                  CONV_CASES[7]])
@pytest.mark.parametrize("dims", [(0, None), (2, None), (None, 1), (None, 3), (1, 0)])
def test_conv_batching(case, dims):
    ls, rs = case[:2]
    x = rand(*ls[:dims[0]], 3, *ls[dims[0]:]) if dims[0] is not None else rand(*ls)
    w = rand(*rs[:dims[1]], 3, *rs[dims[1]:]) if dims[1] is not None else rand(*rs)
    check_batching(lambda a, b: _conv(case, a, b), [x, w], list(dims))


def test_vmap_of_conv_gradients():
    case = CONV_CASES[4]
    x, w = rand(3, *case[0]), rand(*case[1])

    def g(a, b):
        return fg.grad(lambda p, q: total(lax.mul(_conv(case, p, q), _conv(case, p, q))),
                       argnums=(0, 1))(a, b)
    check_batching(g, [x, w], [0, None])
    check_batching(g, [x[0], rand(2, *case[1])], [None, 0])


def test_conv_errors():
    x, w = np.ones((1, 3, 5, 5), np.float32), np.ones((2, 4, 3, 3), np.float32)
    with pytest.raises(TypeError) as e:
        conv_general_dilated(x, w, (1, 1), "VALID")
    msg = str(e.value)
    assert "f32[1,3,5,5]" in msg and "f32[2,4,3,3]" in msg and "feature" in msg
    with pytest.raises(ValueError, match="window_strides"):
        conv_general_dilated(x, np.ones((2, 3, 3, 3), np.float32), (1,), ((0, 0), (0, 0)))
    with pytest.raises(ValueError, match="padding"):
        conv_general_dilated(x, np.ones((2, 3, 3, 3), np.float32), (1, 1), "FULL")
    with pytest.raises(TypeError):
        conv_general_dilated(x, np.ones((2, 3, 3), np.float32), (1,), "VALID")


# --- reduce_window --------------------------------------------------------------------------

def reduce_window_ref(x, kind, window, strides, padding, base_dil, window_dil):
    ident = {"sum": 0.0, "max": -np.inf, "min": np.inf}[kind]
    xp = dilate_pad_ref(x.astype(np.float64), padding, base_dil, range(x.ndim), ident)
    out_sp = [(p - ((w - 1) * d + 1)) // s + 1
              for p, w, d, s in zip(xp.shape, window, window_dil, strides)]
    parts = []
    for k in itertools.product(*[range(w) for w in window]):
        parts.append(xp[tuple(slice(ki * d, ki * d + (o - 1) * s + 1, s)
                              for ki, d, o, s in zip(k, window_dil, out_sp, strides))])
    fn = {"sum": np.sum, "max": np.max, "min": np.min}[kind]
    return fn(np.stack(parts), axis=0)


WINDOW_CASES = [
    ((6, 5), (2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1), (1, 1)),
    ((6, 5), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1)),
    ((2, 7, 6), (1, 3, 2), (1, 2, 2), ((0, 0), (1, 2), (0, 1)), (1, 1, 1), (1, 2, 1)),
    ((5, 4), (2, 2), (1, 2), ((1, 0), (-1, 1)), (1, 1), (1, 1)),
    ((4, 5), (2, 3), (1, 1), ((0, 0), (1, 1)), (2, 1), (1, 1)),
]


@pytest.mark.parametrize("case", WINDOW_CASES)
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_reduce_window_matches_reference(case, kind):
    shape, window, strides, padding, bd, wd = case
    x = rand(*shape, dtype=np.float32)
    fn = {"sum": reduce_window_sum, "max": reduce_window_max, "min": reduce_window_min}[kind]
    got = fn(x, window, strides, padding, bd, wd)
    np.testing.assert_allclose(np.asarray(got), reduce_window_ref(x, kind, *case[1:]),
                               rtol=1e-5, atol=1e-5)


def test_reduce_window_generic_entry_point():
    x = rand(4, 6, dtype=np.float32)
    np.testing.assert_allclose(
        np.asarray(reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "SAME")),
        reduce_window_ref(x, "sum", (2, 2), (1, 1), ((0, 1), (0, 1)), (1, 1), (1, 1)),
        rtol=1e-5)
    got = reduce_window(x, 0.5, lax.max, (2, 3), (2, 3), "VALID")
    want = np.maximum(reduce_window_ref(x, "max", (2, 3), (2, 3), ((0, 0),) * 2, (1, 1),
                                        (1, 1)), 0.5)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = reduce_window(i, np.iinfo(np.int32).min, lax.max, (2, 2), (1, 1), "VALID")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), i[1:, 1:])
    with pytest.raises(TypeError, match="unsupported computation"):
        reduce_window(x, 0.0, lax.mul, (2, 2), (1, 1), "VALID")
    with pytest.raises(ValueError, match="init_value 0"):
        reduce_window(x, 1.0, lax.add, (2, 2), (1, 1), "VALID")
    with pytest.raises(ValueError, match="window_dimensions"):
        reduce_window_sum(x, (2,), (1,))


@pytest.mark.parametrize("case", WINDOW_CASES)
def test_reduce_window_sum_grads(case):
    x = rand(*case[0])
    check_grads(lambda a: reduce_window_sum(a, *case[1:]), (x,), order=2)


@pytest.mark.parametrize("case", [c for c in WINDOW_CASES if c[4] == (1,) * len(c[0])])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_reduce_window_max_min_grads(case, kind):
    x = RNG.permutation(np.prod(case[0])).reshape(case[0]).astype(np.float64) / 3
    fn = reduce_window_max if kind == "max" else reduce_window_min
    check_grads(lambda a: fn(a, *case[1:]), (x,), order=2, eps=1e-3)


def test_max_pool_gradient_goes_to_first_maximum():
    x = np.array([[1.0, 5.0, 5.0], [0.0, 2.0, 5.0]], np.float32)
    g = fg.grad(lambda a: total(reduce_window_max(a, (2, 2), (1, 1))))(x)
    np.testing.assert_array_equal(np.asarray(g), [[0, 2, 0], [0, 0, 0]])


@pytest.mark.parametrize("kind", ["sum", "max"])
@pytest.mark.parametrize("bdim", [0, 1, 2])
def test_reduce_window_batching_and_vmap_of_grad(kind, bdim):
    case = WINDOW_CASES[1]
    fn = reduce_window_sum if kind == "sum" else reduce_window_max
    x = rand(*case[0][:bdim], 4, *case[0][bdim:])

    def f(a):
        return fn(a, *case[1:])
    check_batching(f, [x], [bdim])
    check_batching(fg.grad(lambda a: total(lax.mul(f(a), f(a)))), [x], [bdim])


def test_conv_batching_over_an_empty_batch():
    x, w = np.zeros((0, 1, 2, 5, 5)), np.zeros((3, 2, 3, 3))
    closed = fg.make_jaxpr(lambda a, b: conv_general_dilated(a, b, (1, 1), "SAME"))(
        np.zeros((1, 2, 5, 5)), w)
    outs, dims = batch_eval(closed.jaxpr, closed.consts, [x, w], [0, None])
    assert np.asarray(outs[0]).shape == (0, 1, 3, 5, 5) and dims == [0]
