"""`select_and_scatter_add` (the gradient of max/min pooling whose windows overlap or pad) as
a C routine of the native backend (`backends/native/windows.py`): bit for bit the numpy
implementation's result (the first extremal element per window, a NaN winning, padding
never selected into the result, repeated selections added in its order), at top level and
in a C loop, for strides, padding, base and window dilation, float and integer operands.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.native import build
from funcgrad.compiler import pipeline
from funcgrad.lax.convolution import select_and_scatter_add_p
from tests.test_native_backend import native_mode

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler (checked "
                              "by test_native_backend.test_a_compiler_means_...)")


def _both(fn, *args):
    """(native results, numpy backend results, the native program's text)."""
    fg.config.update("enable_x64", True)  # float64 stays float64 (reset by conftest)
    closed = fg.make_jaxpr(fn)(*args)
    with native_mode():
        exe = pipeline.compile_jaxpr(closed, backend="cpu")
        got = exe(*args)
    want = pipeline.compile_jaxpr(closed, backend="numpy")(*args)
    return [np.asarray(g) for g in got], [np.asarray(w) for w in want], exe.as_text()


def _sas(s, x, kind, window, strides, padding, base, wdil):
    return select_and_scatter_add_p.bind(
        s, x, select_prim=kind, window_dimensions=window, window_strides=strides,
        padding=padding, base_dilation=base, window_dilation=wdil)


def _out_shape(shape, window, strides, padding, base, wdil):
    padded = [(n - 1) * b + 1 + lo + hi for n, b, (lo, hi) in zip(shape, base, padding)]
    return tuple((p - ((w - 1) * d + 1)) // s + 1
                 for p, w, d, s in zip(padded, window, wdil, strides))


CASES = [  # window, strides, padding, base dilation, window dilation
    ((3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), (1, 1)),  # a ResNet stem's pooling
    ((2, 3), (1, 1), ((0, 0), (2, 1)), (1, 1), (1, 1)),
    ((2, 2), (1, 2), ((1, 0), (0, 1)), (2, 1), (1, 2)),  # base and window dilation
    ((3, 1), (2, 1), ((-1, 1), (0, 0)), (1, 1), (1, 1)),  # negative padding crops
]


@needs_cc
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_select_and_scatter_add_is_the_numpy_result_bit_for_bit(kind, case, dtype):
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, size=(7, 6)).astype(dtype)  # many ties
    if dtype != np.int32:
        x[1, 2] = x[4, 4] = np.nan  # a NaN is selected first
        x[0, 0] = -np.inf if kind == "max" else np.inf  # ties with the padding's identity
    s = rng.normal(size=_out_shape(x.shape, *case)).astype(np.float32)
    got, want, text = _both(lambda s, x: _sas(s, x, kind, *case), s, x)
    assert "/* select_and_scatter_add" in text
    assert got[0].dtype == want[0].dtype and got[0].shape == x.shape
    np.testing.assert_array_equal(got[0], want[0])


@needs_cc
@settings(max_examples=25, deadline=None)
@given(st.data())
def test_select_and_scatter_add_random_windows(data):
    nd = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=nd, max_size=nd)))
    window = tuple(data.draw(st.integers(1, 3)) for _ in shape)
    strides = tuple(data.draw(st.integers(1, 3)) for _ in shape)
    base = tuple(data.draw(st.integers(1, 2)) for _ in shape)
    wdil = tuple(data.draw(st.integers(1, 2)) for _ in shape)
    padding = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in shape)
    out = _out_shape(shape, window, strides, padding, base, wdil)
    if min(out) < 1:
        return
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = rng.integers(-2, 3, size=shape).astype(np.float64)
    s = rng.normal(size=out)
    kind = data.draw(st.sampled_from(["max", "min"]))
    got, want, _ = _both(lambda s, x: _sas(s, x, kind, window, strides, padding, base, wdil),
                         s, x)
    np.testing.assert_array_equal(got[0], want[0])


@needs_cc
def test_overlapping_max_pool_gradient_is_c_at_top_level_and_in_a_loop():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 9, 9, 3)).astype(np.float32)

    def pool(x):
        return lax.reduce_window(x, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")

    grad = fg.grad(lambda x: fnp.sum(pool(x) ** 2))
    got, want, text = _both(grad, x)
    assert "/* select_and_scatter_add max window (1, 3, 3, 1)" in text
    np.testing.assert_array_equal(got[0], want[0])

    def loop(x):  # the routine inside a C loop: a few steps of gradient ascent
        return lax.fori_loop(0, 3, lambda i, x: x + 0.1 * fg.grad(
            lambda x: fnp.sum(lax.reduce_window(x, -np.inf, lax.max, (3, 3), (2, 2),
                                                "SAME")))(x), x)
    got, want, text = _both(loop, x[0, :, :, 0])
    assert "/* scan loop */" in text and "/* select_and_scatter_add max" in text
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
