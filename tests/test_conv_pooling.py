"""Pooling in one pass each (`lax/convolution.py`'s `fold_windows`, `lax/pooling.py`'s
`window_choice_mask`, `backends/native/windows.py`): windowed sums, maxima and minima against
loops over the windows for any strides, padding, base and window dilation; the numpy
implementation folds one window axis at a time and the native tier's C routine gives its bits
(float16/32/64, integers, NaN, -0.0), at top level and in a C loop; the tiling max-pool
derivative's mask is the first extremal element of each window; average and max pooling
gradients are single C passes.
"""

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.native import build
from funcgrad.compiler import pipeline
from funcgrad.lax import pooling
from tests.test_native_backend import native_mode

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler (checked "
                              "by test_native_backend.test_a_compiler_means_...)")
REDUCE = {"sum": lax.reduce_window_sum, "max": lax.reduce_window_max,
          "min": lax.reduce_window_min}


def windows_loop(x, kind, window, strides, padding, base, wdil):
    """The windowed reduction by a loop over the output positions, in float64 (NaN
    propagates; padding and base-dilation holes hold the identity)."""
    ident = {"sum": 0.0, "max": -np.inf, "min": np.inf}[kind]
    nd = x.ndim
    dil = np.full([(n - 1) * b + 1 for n, b in zip(x.shape, base)], ident)
    dil[tuple(slice(None, None, b) for b in base)] = x
    pad = np.pad(dil, [(max(lo, 0), max(hi, 0)) for lo, hi in padding], constant_values=ident)
    pad = pad[tuple(slice(max(-lo, 0), pad.shape[d] - max(-hi, 0))
                    for d, (lo, hi) in enumerate(padding))]
    out_shape = [(p - ((w - 1) * r + 1)) // s + 1
                 for p, w, r, s in zip(pad.shape, window, wdil, strides)]
    out = np.empty(out_shape)
    for o in itertools.product(*map(range, out_shape)):
        vals = [pad[tuple(o[d] * strides[d] + j[d] * wdil[d] for d in range(nd))]
                for j in itertools.product(*map(range, window))]
        out[o] = {"sum": np.sum, "max": np.max, "min": np.min}[kind](vals)
    return out


@st.composite
def window_problems(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(nd))
    window = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    base = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    wdil = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    padding = tuple((draw(st.integers(-1, 2)), draw(st.integers(0, 2))) for _ in range(nd))
    if draw(st.booleans()):  # NHWC-like: a plain innermost axis, run as lanes in C
        window, strides = window[:-1] + (1,), strides[:-1] + (1,)
        padding, base = padding[:-1] + ((0, 0),), base[:-1] + (1,)
    padding = tuple((lo, max(hi, (w - 1) * r + 1 - ((n - 1) * b + 1) - lo))
                    for (lo, hi), w, r, n, b in zip(padding, window, wdil, shape, base))
    return shape, window, strides, padding, base, wdil, draw(st.integers(0, 2**31))


def _values(rng, shape, dtype):
    """Few distinct values (ties), with NaN, infinities and -0.0 for floats."""
    x = rng.integers(-3, 4, shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x = (x * rng.uniform(0.5, 1.5, shape)).astype(dtype)
        specials = np.array([np.nan, -0.0, np.inf, -np.inf], dtype)
        hits = rng.random(shape) < 0.15
        x[hits] = rng.choice(specials, int(hits.sum()))
    return x


@given(window_problems(), st.sampled_from(["sum", "max", "min"]))
def test_window_reductions_match_loops(problem, kind):
    shape, window, strides, padding, base, wdil, seed = problem
    fg.config.update("enable_x64", True)
    x = np.random.default_rng(seed).standard_normal(shape)
    got = REDUCE[kind](x, window, strides, padding, base, wdil)
    np.testing.assert_allclose(np.asarray(got), windows_loop(x, kind, window, strides, padding,
                                                             base, wdil), rtol=1e-12)


def _both(fn, *args):
    """(native results, numpy backend results, eager results, the native program's text)."""
    closed = fg.make_jaxpr(fn)(*args)
    with native_mode():
        exe = pipeline.compile_jaxpr(closed, backend="cpu")
        got = [np.asarray(o) for o in exe(*args)]
    numpy = [np.asarray(o) for o in pipeline.compile_jaxpr(closed, backend="numpy")(*args)]
    eager = fn(*args)
    eager = [np.asarray(o) for o in (eager if isinstance(eager, (list, tuple)) else [eager])]
    return got, numpy, eager, exe.as_text()


def _bits(a):
    return a.view(f"u{a.itemsize}") if a.dtype.kind == "f" else a


@needs_cc
@settings(max_examples=8)  # each compiles a C module
@given(window_problems(), st.sampled_from(["sum", "max", "min"]),
       st.sampled_from([np.float32, np.float64, np.float16, np.int32, np.int8]))
# gcc 12.2 at -O3 -march=native gave 0.4288 for a window holding -inf here (build.py's flags)
@example(((3, 6, 2), (2, 2, 1), (1, 3, 1), ((0, 0), (1, 2), (0, 0)), (2, 1, 1), (1, 2, 1), 0),
         "sum", np.float32)
def test_native_window_reductions_have_the_numpy_bits(problem, kind, dtype):
    shape, window, strides, padding, base, wdil, seed = problem
    fg.config.update("enable_x64", True)
    x = _values(np.random.default_rng(seed), shape, dtype)
    got, numpy, eager, text = _both(
        lambda v: REDUCE[kind](v, window, strides, padding, base, wdil), x)
    assert f"/* reduce_window_{kind} window" in text
    for g in (got[0], numpy[0]):
        assert g.dtype == eager[0].dtype
        np.testing.assert_array_equal(_bits(g), _bits(eager[0]))


def test_the_fold_goes_one_window_axis_at_a_time():
    # [[a, b], [c, d]] in float32 (spacing 8 at 1e8): the rows first, (a + b) + (c + d) =
    # 1e8 + -1e8 = 0; row-major order ((a + b) + c) + d would give 3, columns first 6
    x = np.array([[1e8, 3.0], [-1e8, 3.0]], np.float32)
    assert np.asarray(lax.reduce_window_sum(x, (2, 2), (1, 1)))[0, 0] == 0.0


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape,window", [((4, 6), (2, 3)), ((2, 5, 7, 3), (1, 2, 2, 1)),
                                          ((3, 4, 4), (3, 1, 2))])
def test_choice_mask_is_each_windows_first_extremum(kind, shape, window):
    x = _values(np.random.default_rng(len(shape)), shape, np.float32)
    mask = np.asarray(pooling.choice_mask_p.bind(x, window_dimensions=window, select_prim=kind))
    layout = pooling.tiling(shape, window)
    assert mask.shape == layout.block and mask.dtype == np.bool_
    flat = mask.reshape(layout.crop)
    arg = {"max": np.argmax, "min": np.argmin}[kind]
    outs = [c // w for c, w in zip(layout.crop, window)]
    for o in itertools.product(*map(range, outs)):
        block = tuple(slice(i * w, (i + 1) * w) for i, w in zip(o, window))
        want = np.zeros(window, bool)
        want[np.unravel_index(arg(x[block]), window)] = True
        np.testing.assert_array_equal(flat[block], want)
    batched = fg.vmap(lambda v: pooling.choice_mask_p.bind(
        v, window_dimensions=window, select_prim=kind))(np.stack([x, -x]))
    np.testing.assert_array_equal(np.asarray(batched)[0], mask)


def _pool_net(x, w):
    """A small NHWC net: max pool (tiling), average pool (overlapping), max pool
    (overlapping, SAME), each followed by a product so that every derivative is used."""
    h = lax.reduce_window(x * w, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = lax.reduce_window_sum(h * h, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0
    h = lax.reduce_window(h, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    return fnp.sum(h * h)


@needs_cc
def test_pooling_gradients_are_single_c_passes_with_the_numpy_bits():
    rng = np.random.default_rng(3)
    x = _values(rng, (2, 9, 9, 5), np.float32)
    x[np.isnan(x)] = 1.0
    w = rng.standard_normal((5,)).astype(np.float32)
    grad = fg.grad(_pool_net, argnums=(0, 1))
    got, numpy, eager, text = _both(lambda x, w: grad(x, w), x, w)
    for g, n, e in zip(got, numpy, eager):
        np.testing.assert_array_equal(_bits(g), _bits(e))
        np.testing.assert_array_equal(_bits(n), _bits(e))
    for routine in ("window_choice_mask max", "reduce_window_max", "reduce_window_sum",
                    "select_and_scatter_add max"):
        assert f"/* {routine} window" in text
    python = text.split("# ---- C module")[0]
    assert "np.add.at" not in python and "scatter" not in python.replace(
        "select_and_scatter_add", "")


@needs_cc
def test_window_routines_run_inside_a_c_loop():
    x = _values(np.random.default_rng(4), (6, 8, 3), np.float32)
    x[np.isnan(x)] = 0.5

    def body(i, v):
        g = fg.grad(lambda u: fnp.sum(lax.reduce_window_max(u, (2, 2, 1), (2, 2, 1)) ** 2))(v)
        return v - 0.1 * g + lax.reduce_window_sum(v, (1, 1, 3), (1, 1, 1), "SAME") * 0.01
    loop = lambda v: lax.fori_loop(0, 3, body, v)
    got, numpy, eager, text = _both(loop, x)
    assert "/* scan loop */" in text and "/* window_choice_mask max" in text
    np.testing.assert_array_equal(_bits(got[0]), _bits(numpy[0]))
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-6)
