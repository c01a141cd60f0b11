"""Tests for the reduction primitives (funcgrad/lax/reductions.py).

One table of op specs drives: eager results vs numpy, check_grads (orders 1 and 2, forward
and reverse, float64), and batching vs a Python loop through `batching.batch_eval`.
"""

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
from funcgrad import errors, lax
from funcgrad.interpreters import batching
from funcgrad.test_util import check_grads


# --- drawing helpers --------------------------------------------------------------------------
def draw_shape(data, min_rank=0, max_rank=3, min_side=0, max_side=4):
    return tuple(data.draw(st.lists(st.integers(min_side, max_side), min_size=min_rank,
                                    max_size=max_rank)))


def draw_values(data, shape, dtype=np.float32):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind in "iu":
        return rng.integers(-3, 4, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def draw_axes(data, shape):
    if not shape:
        return ()
    return tuple(data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True)))


@dataclasses.dataclass
class Spec:
    """An op under test: `draw(data, dtype, nonempty) -> (args, params)` where `nonempty`
    asks for non-empty reduced axes; `fun` (lax) and `ref` (numpy) take (*args, **params).
    `dtypes` are the operand dtypes to test eagerly; floats are also differentiated."""
    name: str
    draw: Callable
    fun: Callable
    ref: Callable
    dtypes: tuple = (np.float32, np.int32)


def _close(got, want, exact=False):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    if exact or got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


# --- op specs -----------------------------------------------------------------------------------
def draw_reduce(data, dtype=np.float32, nonempty=False):
    shape = draw_shape(data, min_side=1 if nonempty else 0)
    return [draw_values(data, shape, dtype)], dict(axes=draw_axes(data, shape))


def draw_arg(data, dtype=np.float32, nonempty=True):
    shape = draw_shape(data, min_rank=1, min_side=1)
    return [draw_values(data, shape, dtype)], dict(axis=data.draw(st.integers(0, len(shape) - 1)))


def draw_cumulative(data, dtype=np.float32, nonempty=False):
    shape = draw_shape(data, min_rank=1, min_side=1 if nonempty else 0)
    return [draw_values(data, shape, dtype)], dict(
        axis=data.draw(st.integers(0, len(shape) - 1)), reverse=data.draw(st.booleans()))


def ref_extremum(fn, ident):
    def ref(x, axes):
        fill = ident(x.dtype)
        return fn(x, axis=axes, initial=fill).astype(x.dtype)
    return ref


def lowest(dt):
    return np.iinfo(dt).min if dt.kind in "iu" else False if dt.kind == "b" else -np.inf


def highest(dt):
    return np.iinfo(dt).max if dt.kind in "iu" else True if dt.kind == "b" else np.inf


def ref_cumulative(accumulate):
    def ref(x, axis, reverse):
        if reverse:
            return np.flip(accumulate(np.flip(x, axis), axis), axis).astype(x.dtype)
        return accumulate(x, axis).astype(x.dtype)
    return ref


def ref_cumlogsumexp(x, axis, reverse):
    return ref_cumulative(lambda v, a: np.logaddexp.accumulate(v.astype(np.float64), a))(
        x, axis, reverse).astype(x.dtype)


SPECS = [
    Spec("reduce_sum", draw_reduce, lax.reduce_sum,
         lambda x, axes: np.sum(x, axis=axes, dtype=x.dtype)),
    Spec("reduce_max", draw_reduce, lax.reduce_max, ref_extremum(np.max, lowest)),
    Spec("reduce_min", draw_reduce, lax.reduce_min, ref_extremum(np.min, highest)),
    Spec("reduce_prod", draw_reduce, lax.reduce_prod,
         lambda x, axes: np.prod(x, axis=axes, dtype=x.dtype)),
    Spec("reduce_and", draw_reduce, lax.reduce_and, lambda x, axes: np.all(x, axis=axes),
         dtypes=(np.bool_,)),
    Spec("reduce_or", draw_reduce, lax.reduce_or, lambda x, axes: np.any(x, axis=axes),
         dtypes=(np.bool_,)),
    Spec("argmax", draw_arg, lambda x, axis: lax.argmax(x, axis, np.int32),
         lambda x, axis: np.argmax(x, axis).astype(np.int32)),
    Spec("argmin", draw_arg, lambda x, axis: lax.argmin(x, axis, np.int32),
         lambda x, axis: np.argmin(x, axis).astype(np.int32)),
    Spec("cumsum", draw_cumulative, lax.cumsum,
         ref_cumulative(lambda x, a: np.cumsum(x, a, dtype=x.dtype))),
    Spec("cumprod", draw_cumulative, lax.cumprod,
         ref_cumulative(lambda x, a: np.cumprod(x, a, dtype=x.dtype))),
    Spec("cummax", draw_cumulative, lax.cummax, ref_cumulative(np.maximum.accumulate)),
    Spec("cummin", draw_cumulative, lax.cummin, ref_cumulative(np.minimum.accumulate)),
    Spec("cumlogsumexp", draw_cumulative, lax.cumlogsumexp, ref_cumlogsumexp,
         dtypes=(np.float32,)),
]
IDS = [s.name for s in SPECS]
DIFF = [s for s in SPECS if np.float32 in s.dtypes and not s.name.startswith("arg")]


# --- the table-driven tests ---------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_eager_matches_numpy(spec, data):
    dtype = data.draw(st.sampled_from(spec.dtypes))
    args, kw = spec.draw(data, dtype)
    _close(spec.fun(*args, **kw), spec.ref(*args, **kw))


@pytest.mark.parametrize("spec", DIFF, ids=[s.name for s in DIFF])
@given(data=st.data())
def test_grads(spec, data):
    args, kw = spec.draw(data, nonempty=True)
    if spec.name in _KINKED:  # keep the order, but space values well beyond the FD step
        a = np.asarray(args[0])
        spaced = np.empty(a.size)
        spaced[np.argsort(a.ravel(), kind="stable")] = np.arange(a.size) * 0.05 - 1.0
        args[0] = spaced.reshape(a.shape).astype(a.dtype)
    check_grads(lambda *a: spec.fun(*a, **kw), args, order=2, modes=("fwd", "rev"))


# Piecewise ops: finite differences across a near-tie (closer than the FD step) are meaningless.
_KINKED = {"reduce_max", "reduce_min", "cummax", "cummin"}


def batch_check(fun, args, data, mode):
    """vmap of `fun` via batch_eval on its jaxpr vs a Python loop; `mode` picks the batch
    axis of each argument: "first", "last" or "mixed" (0, last or None at random)."""
    size = data.draw(st.integers(1, 3))
    examples = [[draw_values(data, np.shape(a), np.asarray(a).dtype) for a in args]
                for _ in range(size)]
    dims = []
    for a in args:
        choice = {"first": "first", "last": "last"}.get(mode) or data.draw(
            st.sampled_from(["first", "last", "none"]))
        dims.append(None if choice == "none" else 0 if choice == "first" else np.ndim(a))
    if all(d is None for d in dims):
        dims[0] = 0
    batched = [np.stack([ex[i] for ex in examples], d) if d is not None else examples[0][i]
               for i, d in enumerate(dims)]
    for ex in examples:
        for i, d in enumerate(dims):
            if d is None:
                ex[i] = examples[0][i]
    closed = fg.make_jaxpr(fun)(*examples[0])
    outs, out_dims = batching.batch_eval(closed.jaxpr, closed.consts, batched, dims)
    want = np.stack([np.asarray(fun(*ex)) for ex in examples])
    got = np.asarray(outs[0])
    got = (np.broadcast_to(got, (size,) + got.shape) if out_dims[0] is None
           else np.moveaxis(got, out_dims[0], 0))
    _close(got, want)


@pytest.mark.parametrize("mode", ["first", "last"])
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_batching(spec, mode, data):
    args, kw = spec.draw(data, spec.dtypes[0])
    batch_check(lambda *a: spec.fun(*a, **kw), args, data, mode)


@given(data=st.data())
def test_batching_with_unbatched_operand(data):
    x, y = draw_values(data, (3, 2)), draw_values(data, (3, 2))
    f = lambda x, y: lax.cumprod(lax.mul(x, lax.reduce_max(y, (0, 1))), 1, reverse=True)
    batch_check(f, [x, y], data, "mixed")


def grad_of(fun):
    """The gradient w.r.t. the first argument of sum(sin(fun(...)))."""
    def loss(*args):
        y = lax.sin(fun(*args))
        return lax.reduce_sum(y, tuple(range(y.ndim)))
    return fg.grad(loss)


@pytest.mark.parametrize("spec", DIFF, ids=[s.name for s in DIFF])
@given(data=st.data())
def test_batching_of_gradients(spec, data):
    args, kw = spec.draw(data, nonempty=True)
    batch_check(grad_of(lambda *a: spec.fun(*a, **kw)), args, data, "mixed")


# --- conventions and edge cases -----------------------------------------------------------------
def test_reduce_max_min_average_tied_tangents():
    x = np.array([[1.0, 3.0, 3.0, 2.0], [0.0, 0.0, 0.0, -1.0]], np.float32)
    g = fg.grad(lambda x: lax.reduce_sum(lax.reduce_max(x, (1,)), (0,)))(x)
    np.testing.assert_allclose(g, [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3, 0]], rtol=1e-6)
    g = fg.grad(lambda x: lax.reduce_min(x, (0, 1)))(x)
    np.testing.assert_array_equal(g, [[0, 0, 0, 0], [0, 0, 0, 1]])
    _, t = fg.jvp(lambda x: lax.reduce_max(x, (0,)), (x[0],), (np.ones(4, np.float32),))
    assert float(t) == 1.0


def test_cummax_tangent_averages_ties_in_the_prefix():
    x = np.array([3.0, 1.0, 3.0, 4.0], np.float32)
    g = fg.grad(lambda x: lax.reduce_sum(lax.cummax(x), (0,)))(x)
    # outputs: x0, x0, mean(x0, x2), x3
    np.testing.assert_allclose(g, [2.5, 0.0, 0.5, 1.0])
    g = fg.grad(lambda x: lax.reduce_sum(lax.cummin(x, reverse=True), (0,)))(x)
    # reversed running minimum: 1, 1, 3, 4 -> x1, x1, x2, x3
    np.testing.assert_allclose(g, [0.0, 2.0, 1.0, 1.0])


def test_cumsum_reverse_and_its_transpose():
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    np.testing.assert_array_equal(lax.cumsum(x, 1, reverse=True), [[6, 5, 3], [15, 11, 6]])
    np.testing.assert_array_equal(lax.cumsum(x, 0), [[1, 2, 3], [5, 7, 9]])
    w = np.array([1.0, 10.0, 100.0], np.float32)
    g = fg.grad(lambda x: lax.reduce_sum(lax.mul(lax.cumsum(x, 0, reverse=True), w), (0,)))
    np.testing.assert_array_equal(g(x[0]), [1, 11, 111])


@pytest.mark.parametrize("x", [[2.0, 0.0, 3.0, -1.5], [0.0, 1.5, 0.0, 2.0], [0.0] * 3])
def test_products_with_zeros_have_exact_grads(x):
    x = np.array(x)
    check_grads(lambda x: lax.reduce_prod(x, (0,)), (x,), order=2)
    check_grads(lambda x: lax.cumprod(x, reverse=True), (x,), order=2)
    g = fg.grad(lambda x: lax.reduce_prod(x, (0,)))(x.astype(np.float32))
    want = [np.prod(np.delete(x, i)) for i in range(len(x))]
    np.testing.assert_allclose(g, want)


def test_cumlogsumexp_is_stable_and_handles_minus_inf():
    x = np.array([-np.inf, 1000.0, 1000.0, -np.inf], np.float32)
    np.testing.assert_allclose(lax.cumlogsumexp(x), [-np.inf, 1000, 1000 + np.log(2),
                                                    1000 + np.log(2)])
    with np.errstate(invalid="ignore"):  # the finite differences compute -inf - -inf
        check_grads(lax.cumlogsumexp, (np.array([-np.inf, 0.5, -np.inf, 2.0]),), order=2)
    g = fg.grad(lambda x: lax.reduce_sum(lax.cumlogsumexp(x), (0,)))(x)
    np.testing.assert_allclose(g, [0, 2.0, 1.0, 0], rtol=1e-4)  # out1 + (out2 + out3) / 2


def test_argmax_first_occurrence_and_nan():
    x = np.array([1.0, 3.0, 3.0, np.nan, 0.0, np.nan], np.float32)
    assert int(lax.argmax(x[:3], 0, np.int32)) == 1
    assert int(lax.argmax(x, 0, np.int32)) == 3 and int(lax.argmin(x, 0, np.int32)) == 3
    y = lax.argmin(np.array([[2, 1, 1], [0, 5, 0]], np.int32), 1, np.int32)
    np.testing.assert_array_equal(y, [1, 0])
    assert y.dtype == np.int32
    i = lambda x: lax.convert_element_type(lax.argmax(x, 0, np.int32), np.float32)
    g = fg.grad(lambda x: lax.mul(i(x), lax.reduce_sum(x, (0,))))(x[:3])
    np.testing.assert_array_equal(g, [1, 1, 1])  # the index itself has a zero derivative


def test_empty_reductions_give_identities():
    e = np.zeros((2, 0), np.float32)
    np.testing.assert_array_equal(lax.reduce_max(e, (1,)), [-np.inf, -np.inf])
    np.testing.assert_array_equal(lax.reduce_min(e.astype(np.int32), (1,)),
                                  [np.iinfo(np.int32).max] * 2)
    np.testing.assert_array_equal(lax.reduce_prod(e, (1,)), [1, 1])
    np.testing.assert_array_equal(lax.reduce_and(e.astype(bool), (1,)), [True, True])
    assert lax.cumsum(e, 1).shape == (2, 0)


def test_integer_reductions_keep_dtype():
    x = np.array([[1, 2], [3, 4]], np.int32)
    for f in (lax.reduce_sum, lax.reduce_max, lax.reduce_min, lax.reduce_prod):
        assert f(x, (0,)).dtype == np.int32
    for f in (lax.cumsum, lax.cumprod, lax.cummax, lax.cummin):
        assert f(x, 1).dtype == np.int32


# --- errors -------------------------------------------------------------------------------------
def raises(fun, op, *fragments):
    with pytest.raises(errors.FuncgradError) as info:
        fun()
    msg = str(info.value)
    assert msg.startswith(op + ":"), msg
    assert "test_lax_reductions.py" in msg, msg
    for f in fragments:
        assert f in msg, msg


X = np.zeros((2, 3), np.float32)


def test_error_axes_out_of_range():
    raises(lambda: lax.reduce_max(X, (2,)), "reduce_max", "f32[2,3]", "(2,)")
    raises(lambda: lax.reduce_sum(X, (0, 0)), "reduce_sum", "f32[2,3]")
    raises(lambda: lax.reduce_prod(X, (-1,)), "reduce_prod", "f32[2,3]")
    raises(lambda: lax.cumsum(X, 2), "cumsum", "axis 2", "f32[2,3]")
    raises(lambda: lax.argmax(X, 2, np.int32), "argmax", "f32[2,3]")


def test_error_dtypes():
    raises(lambda: lax.reduce_sum(X.astype(bool), (0,)), "reduce_sum", "bool")
    raises(lambda: lax.reduce_and(X, (0,)), "reduce_and", "float32")
    raises(lambda: lax.cumlogsumexp(X.astype(np.int32)), "cumlogsumexp", "int32")
    raises(lambda: lax.argmax(X, 0, np.float32), "argmax", "float32")


def test_error_argmax_of_empty_axis():
    raises(lambda: lax.argmin(np.zeros((2, 0), np.float32), 1, np.int32), "argmin",
           "f32[2,0]")


def test_error_under_trace_names_op():
    raises(lambda: fg.make_jaxpr(lambda x: lax.cummax(x, 3))(X), "cummax", "f32[2,3]")
