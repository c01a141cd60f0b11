"""Max/min pooling over windows that tile the operand: the derivative is a mask product (no
gather, no scatter) that gives exactly what `select_and_gather_add`/`select_and_scatter_add`
give (the first extremal element of each window gets it, or the first NaN; ties, -inf, NaN,
VALID tails), and the eager forward reduction is numpy's windowed max/min.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view
from test_native_backend import HAVE_CC, native_mode

import funcgrad as fg
from funcgrad import lax
from funcgrad.test_util import check_grads

POOL = {"max": lax.reduce_window_max, "min": lax.reduce_window_min}
ARGREDUCE = {"max": np.argmax, "min": np.argmin}


def _params(window):
    nd = len(window)
    return dict(window_dimensions=window, window_strides=window, padding=((0, 0),) * nd,
                base_dilation=(1,) * nd, window_dilation=(1,) * nd)


def _windows(x, window):
    """(out shape, windows flattened on the last axis) of the tiling windows of numpy `x`."""
    v = sliding_window_view(x, window)[tuple(slice(None, None, w) for w in window)]
    out = v.shape[:x.ndim]
    return out, v.reshape(out + (-1,))


def _reference_grad(kind, x, ct, window):
    """The gradient the way select_and_scatter_add defines it: ct into the first argmax
    (numpy's argmax: the first NaN when there is one)."""
    out, v = _windows(x, window)
    pick = np.unravel_index(ARGREDUCE[kind](v, axis=-1), window)
    g = np.zeros_like(x)
    for o in np.ndindex(*out):
        g[tuple(i * w + p[o] for i, w, p in zip(o, window, pick))] += ct[o]
    return g


def _old_grad(kind, x, ct, window):
    return np.asarray(lax.select_and_scatter_add_p.bind(ct, x, select_prim=kind,
                                                        **_params(window)))


def _grad(kind, x, ct, window):
    _, vjp = fg.vjp(lambda v: POOL[kind](v, window, window), x)
    return np.asarray(vjp(ct)[0])


def _tied(rng, shape, dtype, specials=True):
    """Values from a small set (many ties), with -inf, +inf and NaN sprinkled in."""
    vals = [0.0, 1.0, -1.0, 2.0] + ([-np.inf, np.inf, np.nan] if specials else [])
    return rng.choice(np.array(vals, dtype), size=shape)


CASES = [((4, 6), (2, 2)), ((2, 3, 5, 7), (1, 1, 2, 2)), ((9,), (3,)), ((3, 4, 4), (1, 4, 2)),
         ((2, 2, 6, 6), (1, 1, 3, 3)), ((5, 5), (1, 1))]


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape,window", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradient_equals_select_and_scatter_add(kind, shape, window, dtype):
    fg.config.update("enable_x64", dtype == np.float64)
    rng = np.random.default_rng(sum(shape) + len(window))
    for specials in (False, True):
        x = _tied(rng, shape, dtype, specials)
        out_shape, _ = _windows(x, window)
        ct = rng.standard_normal(out_shape).astype(dtype)
        got = _grad(kind, x, ct, window)
        np.testing.assert_array_equal(got, _reference_grad(kind, x, ct, window))
        np.testing.assert_array_equal(got, _old_grad(kind, x, ct, window))


@pytest.mark.parametrize("kind", ["max", "min"])
def test_all_nan_all_inf_and_signed_zero_windows(kind):
    x = np.array([[np.nan, np.nan, -np.inf, -np.inf, 0.0, -0.0, np.inf, np.nan]], np.float32)
    x = np.concatenate([x, x[:, ::-1]])
    ct = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    got = _grad(kind, x, ct, (1, 2))
    np.testing.assert_array_equal(got, _old_grad(kind, x, ct, (1, 2)))
    np.testing.assert_array_equal(got, _reference_grad(kind, x, ct, (1, 2)))


@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=3),
       window=st.lists(st.integers(1, 3), min_size=3, max_size=3),
       seed=st.integers(0, 2**31), kind=st.sampled_from(["max", "min"]))
def test_forward_and_gradient_agree_with_numpy_on_random_shapes(shape, window, seed, kind):
    window = tuple(min(w, n) for w, n in zip(window, shape))
    rng = np.random.default_rng(seed)
    x = _tied(rng, tuple(shape), np.float32)
    out_shape, v = _windows(x, window)
    want = np.max(v, axis=-1) if kind == "max" else np.min(v, axis=-1)
    np.testing.assert_array_equal(np.asarray(POOL[kind](x, window, window)), want)
    ct = rng.standard_normal(out_shape).astype(np.float32)
    np.testing.assert_array_equal(_grad(kind, x, ct, window),
                                  _reference_grad(kind, x, ct, window))


def test_jvp_equals_select_and_gather_add():
    rng = np.random.default_rng(1)
    x, t = _tied(rng, (2, 4, 6), np.float32), rng.standard_normal((2, 4, 6)).astype(np.float32)
    _, got = fg.jvp(lambda v: lax.reduce_window_max(v, (1, 2, 3), (1, 2, 3)), (x,), (t,))
    want = lax.select_and_gather_add_p.bind(t, x, select_prim="max", **_params((1, 2, 3)))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_check_grads_both_modes_order_two():
    x = np.random.default_rng(2).permutation(48).reshape(2, 4, 6) / 7.0  # no ties
    check_grads(lambda v: lax.reduce_window_max(v, (1, 2, 2), (1, 2, 2)) ** 2, (x,), order=2)
    check_grads(lambda v: lax.reduce_window_min(v, (2, 3, 1), (2, 3, 1)), (x,), order=2)


def test_no_scatter_when_windows_tile_and_the_old_path_otherwise():
    x = np.ones((2, 3, 8, 8), np.float32)

    def loss(v, stride):
        return lax.reduce_window_max(v, (1, 1, 2, 2), (1, 1, stride, stride)).sum()

    tiled = str(fg.make_jaxpr(fg.grad(lambda v: loss(v, 2)))(x))
    assert "select_and_scatter_add" not in tiled and "select_and_gather_add" not in tiled
    overlapping = str(fg.make_jaxpr(fg.grad(lambda v: loss(v, 1)))(x))
    assert "select_and_scatter_add" in overlapping


def _pool_loss(v):
    y = lax.reduce_window_max(v, (1, 2, 2), (1, 2, 2))
    return (y * y).sum()


def test_vmap_of_grad_equals_a_loop():
    xs = _tied(np.random.default_rng(3), (3, 2, 4, 5), np.float32, specials=False)
    got = fg.vmap(fg.grad(_pool_loss))(xs)
    want = np.stack([np.asarray(fg.grad(_pool_loss)(x)) for x in xs])
    np.testing.assert_array_equal(np.asarray(got), want)


def test_jit_equals_eager_on_every_tier():
    x = _tied(np.random.default_rng(4), (2, 6, 7), np.float32)
    want = np.asarray(fg.grad(_pool_loss)(x))
    np.testing.assert_array_equal(np.asarray(fg.jit(fg.grad(_pool_loss), backend="numpy")(x)),
                                  want)
    if HAVE_CC:  # the native tier is checked when a C compiler exists (test_native_backend)
        with native_mode():
            np.testing.assert_array_equal(np.asarray(fg.jit(fg.grad(_pool_loss))(x)), want)


def test_inf_and_nan_cotangents_and_tangents_stay_in_their_window_element():
    # scatter/gather semantics: an unselected element gets exactly 0 (never inf * 0 = NaN);
    # the sign of a zero is not compared (see pooling.chooser_jvp)
    x = np.array([[3.0, 1.0, 2.0, 5.0], [0.0, 4.0, 6.0, 1.0]], np.float32)
    ct = np.array([[np.inf], [np.nan]], np.float32) * np.ones((1, 2), np.float32)
    got = _grad("max", x, ct, (1, 2))
    np.testing.assert_array_equal(got, _old_grad("max", x, ct, (1, 2)))
    t = np.array([[-0.0, np.inf, np.nan, -0.0], [np.inf, -0.0, 1.0, np.nan]], np.float32)
    _, tan = fg.jvp(lambda v: lax.reduce_window_max(v, (1, 2), (1, 2)), (x,), (t,))
    want = lax.select_and_gather_add_p.bind(t, x, select_prim="max", **_params((1, 2)))
    np.testing.assert_array_equal(np.asarray(tan), np.asarray(want))
