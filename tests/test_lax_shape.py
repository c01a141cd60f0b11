"""Tests for the shape and slicing primitives (funcgrad/lax/shape.py, lax/slicing.py).

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
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-5, 6, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@dataclasses.dataclass
class Spec:
    """An op under test: `draw(data) -> (args, params)`, `fun(*args, **params)` (lax) and
    `ref(*args, **params)` (numpy). `diff` lists the differentiable (float) arg positions."""
    name: str
    draw: Callable
    fun: Callable
    ref: Callable
    diff: tuple = (0,)


def _same(got, want):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# --- reference implementations ----------------------------------------------------------------
def ref_pad(x, pv, padding_config):
    for ax, (lo, hi, interior) in enumerate(padding_config):
        n = x.shape[ax]
        if interior and n > 1:
            x = np.insert(x, np.repeat(np.arange(1, n), interior), pv, axis=ax)
        widths = [(0, 0)] * x.ndim
        widths[ax] = (max(lo, 0), max(hi, 0))
        x = np.pad(x, widths, constant_values=pv)
        x = np.take(x, np.arange(max(-lo, 0), x.shape[ax] - max(-hi, 0)), axis=ax)
    return x


def ref_start(i, n, k):
    i = int(i) + n if i < 0 else int(i)
    return min(max(i, 0), n - k)


def ref_dynamic_slice(x, *idx, slice_sizes):
    starts = [ref_start(i, n, k) for i, n, k in zip(idx, x.shape, slice_sizes)]
    return x[tuple(slice(s, s + k) for s, k in zip(starts, slice_sizes))]


def ref_dynamic_update_slice(x, u, *idx):
    starts = [ref_start(i, n, k) for i, n, k in zip(idx, x.shape, u.shape)]
    out = np.array(x)
    out[tuple(slice(s, s + k) for s, k in zip(starts, u.shape))] = u
    return out


# --- op specs -----------------------------------------------------------------------------------
def draw_broadcast_in_dim(data):
    shape = draw_shape(data)
    out, dims = [], []
    for s in shape:
        while len(out) < 5 and data.draw(st.booleans()):
            out.append(data.draw(st.integers(0, 3)))
        dims.append(len(out))
        out.append(data.draw(st.integers(0, 3)) if s == 1 else s)
    if data.draw(st.booleans()):
        out.append(data.draw(st.integers(0, 3)))
    return [draw_values(data, shape)], dict(shape=tuple(out), broadcast_dimensions=tuple(dims))


def ref_broadcast_in_dim(x, shape, broadcast_dimensions):
    new = [i for i in range(len(shape)) if i not in broadcast_dimensions]
    return np.broadcast_to(np.expand_dims(x, new), shape)


def draw_reshape(data):
    shape = draw_shape(data)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    size = int(np.prod(shape))
    choices = [(size,), shape[::-1], shape + (1,), (1,) + shape]
    if size and size % 2 == 0:
        choices.append((2, size // 2))
    new = data.draw(st.sampled_from(choices))
    dims = data.draw(st.sampled_from([None, perm]))
    return [draw_values(data, shape)], dict(new_sizes=new, dimensions=dims)


def ref_reshape(x, new_sizes, dimensions):
    return np.reshape(x if dimensions is None else np.transpose(x, dimensions), new_sizes)


def draw_transpose(data):
    shape = draw_shape(data)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    return [draw_values(data, shape)], dict(permutation=perm)


def draw_squeeze(data):
    shape = draw_shape(data, max_rank=4, max_side=2)
    ones = [i for i, s in enumerate(shape) if s == 1]
    dims = data.draw(st.lists(st.sampled_from(ones), unique=True) if ones else st.just([]))
    dims = tuple(d - len(shape) if data.draw(st.booleans()) else d for d in dims)
    return [draw_values(data, shape)], dict(dimensions=dims)


def draw_expand_dims(data):
    shape = draw_shape(data)
    k = data.draw(st.integers(0, 2))
    nd = len(shape) + k
    dims = data.draw(st.lists(st.integers(0, nd - 1), min_size=k, max_size=k, unique=True)
                     if k else st.just([]))
    dims = tuple(d - nd if data.draw(st.booleans()) else d for d in dims)
    return [draw_values(data, shape)], dict(dimensions=dims)


def draw_rev(data):
    shape = draw_shape(data)
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True)
                     if shape else st.just([]))
    return [draw_values(data, shape)], dict(dimensions=tuple(dims))


def draw_pad(data):
    shape = draw_shape(data)
    config = []
    for n in shape:
        interior = data.draw(st.integers(0, 2))
        core = 0 if n == 0 else n + (n - 1) * interior
        lo = data.draw(st.integers(-min(core, 3), 3))
        hi = data.draw(st.integers(-min(core + lo, 3), 3))
        config.append((lo, hi, interior))
    pv = draw_values(data, ())
    return [draw_values(data, shape), pv], dict(padding_config=tuple(config))


def draw_concatenate(data):
    shape = draw_shape(data, min_rank=1)
    dim = data.draw(st.integers(0, len(shape) - 1))
    xs = []
    for _ in range(data.draw(st.integers(1, 3))):
        s = list(shape)
        s[dim] = data.draw(st.integers(0, 3))
        xs.append(draw_values(data, tuple(s)))
    return xs, dict(dimension=dim)


def draw_slice(data):
    shape = draw_shape(data)
    starts, limits, strides = [], [], []
    for n in shape:
        s = data.draw(st.integers(0, n))
        starts.append(s)
        limits.append(data.draw(st.integers(s, n)))
        strides.append(data.draw(st.integers(1, 3)))
    strides = data.draw(st.sampled_from([None, tuple(strides)]))
    return [draw_values(data, shape)], dict(start_indices=tuple(starts),
                                            limit_indices=tuple(limits), strides=strides)


def ref_slice(x, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(*t) for t in zip(start_indices, limit_indices, strides))]


def draw_indices(data, shape):
    return [np.int32(data.draw(st.integers(-n - 2, n + 2))) for n in shape]


def draw_dynamic_slice(data):
    shape = draw_shape(data)
    sizes = tuple(data.draw(st.integers(0, n)) for n in shape)
    return ([draw_values(data, shape)] + draw_indices(data, shape)), dict(slice_sizes=sizes)


def draw_dynamic_update_slice(data):
    shape = draw_shape(data)
    ushape = tuple(data.draw(st.integers(0, n)) for n in shape)
    return ([draw_values(data, shape), draw_values(data, ushape)]
            + draw_indices(data, shape)), {}


SPECS = [
    Spec("broadcast_in_dim", draw_broadcast_in_dim, lax.broadcast_in_dim, ref_broadcast_in_dim),
    Spec("reshape", draw_reshape, lax.reshape, ref_reshape),
    Spec("transpose", draw_transpose, lax.transpose,
         lambda x, permutation: x.transpose(permutation)),
    Spec("squeeze", draw_squeeze, lax.squeeze, lambda x, dimensions: np.squeeze(x, dimensions)),
    Spec("expand_dims", draw_expand_dims, lax.expand_dims,
         lambda x, dimensions: np.expand_dims(x, dimensions)),
    Spec("rev", draw_rev, lax.rev, lambda x, dimensions: np.flip(x, dimensions)),
    Spec("pad", draw_pad, lax.pad, ref_pad, diff=(0, 1)),
    Spec("concatenate", draw_concatenate, lambda *xs, dimension: lax.concatenate(xs, dimension),
         lambda *xs, dimension: np.concatenate(xs, dimension), diff=(0, 1, 2)),
    Spec("slice", draw_slice, lax.slice, ref_slice),
    Spec("dynamic_slice", draw_dynamic_slice,
         lambda x, *idx, slice_sizes: lax.dynamic_slice(x, idx, slice_sizes), ref_dynamic_slice),
    Spec("dynamic_update_slice", draw_dynamic_update_slice,
         lambda x, u, *idx: lax.dynamic_update_slice(x, u, idx), ref_dynamic_update_slice,
         diff=(0, 1)),
]
IDS = [s.name for s in SPECS]


# --- the table-driven tests ---------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_eager_matches_numpy(spec, data):
    args, kw = spec.draw(data)
    _same(spec.fun(*args, **kw), spec.ref(*args, **kw))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_jit_matches_eager(spec, data):
    # the numpy backend prints some of these as expressions (views, pads): same results
    args, kw = spec.draw(data)
    got, want = fg.jit(lambda *a: spec.fun(*a, **kw), backend="numpy")(*args), spec.fun(*args, **kw)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    _same(got, want)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_eager_integer_dtype(spec, data):
    args, kw = spec.draw(data)
    args = [a.astype(np.int32) if i in spec.diff else a for i, a in enumerate(args)]
    got = spec.fun(*args, **kw)
    assert np.asarray(got).dtype == np.int32
    np.testing.assert_array_equal(got, spec.ref(*args, **kw))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_grads(spec, data):
    args, kw = spec.draw(data)
    check_grads(lambda *a: spec.fun(*a, **kw), args, order=2, modes=("fwd", "rev"))


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
    _same(got, want)


@pytest.mark.parametrize("mode", ["first", "last", "mixed"])
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_batching(spec, mode, data):
    args, kw = spec.draw(data)
    batch_check(lambda *a: spec.fun(*a, **kw), args, data, mode)


def grad_of(fun):
    """The gradient w.r.t. the first argument of sum(sin(fun(...)))."""
    def loss(*args):
        y = lax.sin(fun(*args))
        return lax.reduce_sum(y, tuple(range(y.ndim)))
    return fg.grad(loss)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_batching_of_gradients(spec, data):
    args, kw = spec.draw(data)
    batch_check(grad_of(lambda *a: spec.fun(*a, **kw)), args, data, "mixed")


# --- targeted tests -------------------------------------------------------------------------------
def test_pad_negative_and_interior():
    x = np.arange(1.0, 5.0, dtype=np.float32)
    got = lax.pad(x, -1.0, [(-1, 2, 1)])
    np.testing.assert_array_equal(got, [-1, 2, -1, 3, -1, 4, -1, -1])
    assert lax.pad(x, 0.0, [(-3, -4, 1)]).shape == (0,)


def test_pad_grad_of_padding_value_counts_padded_entries():
    x = np.ones((2, 3), np.float32)
    g = fg.grad(lambda pv: lax.reduce_sum(lax.pad(x, pv, [(1, -1, 1), (0, 2, 0)]), (0, 1)))
    # rows [pv, x0, pv] (x1 cropped by hi=-1) x 5 columns; 3 operand entries survive
    assert float(g(np.float32(0.0))) == 3 * 5 - 3


def test_dynamic_slice_clamps_and_wraps():
    x = np.arange(10.0, dtype=np.float32)
    np.testing.assert_array_equal(lax.dynamic_slice(x, (8,), (4,)), [6, 7, 8, 9])
    np.testing.assert_array_equal(lax.dynamic_slice(x, (-3,), (2,)), [7, 8])
    np.testing.assert_array_equal(
        lax.dynamic_slice(x, (-3,), (2,), allow_negative_indices=False), [0, 1])
    np.testing.assert_array_equal(lax.dynamic_slice_in_dim(x, 9, 2), [8, 9])


def test_dynamic_update_slice_grads_under_traced_index():
    x = np.arange(6.0, dtype=np.float32)
    u = np.array([10.0, 20.0], np.float32)

    def f(x, u, i):
        return lax.reduce_sum(lax.mul(lax.dynamic_update_slice(x, u, (i,)), x), (0,))
    gx, gu = fg.grad(f, argnums=(0, 1))(x, u, np.int32(5))
    np.testing.assert_array_equal(gx, [0, 2, 4, 6, 10, 20])  # start clamped to 4
    np.testing.assert_array_equal(gu, [4, 5])


@pytest.mark.parametrize("dims", [(None, 0, None), (0, 0, 0), (1, None, 0)])
def test_batched_start_indices(dims):
    full = [np.arange(24.0, dtype=np.float32).reshape(2, 3, 4), np.array([2, -1], np.int32),
            np.array([-9, 1], np.int32)]
    args = [a[0] if d is None else np.moveaxis(a, 0, d) for a, d in zip(full, dims)]
    example = lambda b: [a[0] if d is None else a[b] for a, d in zip(full, dims)]
    u = -np.ones((2, 2), np.float32)
    cases = [(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)), "gather"),
             (lambda x, i, j: lax.dynamic_update_slice(x, u, (i, j)), "scatter")]
    for f, prim in cases:
        closed = fg.make_jaxpr(f)(*example(0))
        run = lambda *a, closed=closed: batching.batch_eval(closed.jaxpr, closed.consts, a,
                                                            list(dims))
        (out,), (d,) = run(*args)
        want = np.stack([f(*example(b)) for b in range(2)])
        _same(np.moveaxis(np.asarray(out), d, 0), want)
        assert prim in str(fg.make_jaxpr(lambda *a, run=run: run(*a)[0][0])(*args))


def test_in_dim_wrappers():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    one = np.ones((2, 1), np.float32)
    np.testing.assert_array_equal(lax.dynamic_update_slice_in_dim(x, one, -1, 1),
                                  [[0, 1, 1], [3, 4, 1]])
    np.testing.assert_array_equal(
        lax.dynamic_slice_in_dim(x, -1, 2, 1, allow_negative_indices=False), x[:, :2])


def test_iota_and_full_like():
    np.testing.assert_array_equal(lax.iota(np.int32, 4), np.arange(4))
    np.testing.assert_array_equal(lax.broadcasted_iota(np.float32, (2, 3), 0),
                                  [[0, 0, 0], [1, 1, 1]])
    assert lax.iota(np.int32, 0).shape == (0,)
    y = lax.full_like(np.zeros((2,), np.int32), 3)
    assert y.dtype == np.int32 and np.asarray(y).tolist() == [3, 3]
    z = lax.zeros_like_array(np.ones((2, 1), np.float32))
    assert z.dtype == np.float32 and z.shape == (2, 1) and not np.asarray(z).any()
    assert lax.full_like(1.0, 2).weak_type
    assert lax.full_like(np.ones(2, np.float32), 2, np.int32, (3,)).shape == (3,)


def test_slice_in_dim_python_semantics():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(lax.slice_in_dim(x, -3, None, 2, axis=-1), x[:, -3::2])
    np.testing.assert_array_equal(lax.slice_in_dim(x, 1, -1), x[1:-1])


def test_concatenate_grad_to_each_operand():
    a, b = np.ones((2, 1), np.float32), np.ones((2, 3), np.float32)
    w = np.arange(8.0, dtype=np.float32).reshape(2, 4)
    f = lambda a, b: lax.reduce_sum(lax.mul(lax.concatenate([a, b], 1), w), (0, 1))
    ga, gb = fg.grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, w[:, :1])
    np.testing.assert_array_equal(gb, w[:, 1:])


# --- errors -------------------------------------------------------------------------------------
def raises(fun, op, *fragments):
    with pytest.raises(errors.FuncgradError) as info:
        fun()
    msg = str(info.value)
    assert msg.startswith(op + ":"), msg
    assert "test_lax_shape.py" in msg, msg
    for f in fragments:
        assert f in msg, msg


X = np.zeros((2, 3), np.float32)


def test_error_reshape_size():
    raises(lambda: lax.reshape(X, (4,)), "reshape", "f32[2,3]", "(4,)")


def test_error_axes_out_of_range():
    raises(lambda: lax.squeeze(X, (2,)), "squeeze", "axis 2")
    raises(lambda: lax.squeeze(X, (0,)), "squeeze", "f32[2,3]", "size 1")
    raises(lambda: lax.rev(X, (2,)), "rev", "f32[2,3]")
    raises(lambda: lax.transpose(X, (0, 0)), "transpose", "f32[2,3]")
    raises(lambda: lax.expand_dims(X, (3, 4)), "expand_dims", "axis 4")
    raises(lambda: lax.broadcast_in_dim(X, (2, 4), (0, 1)), "broadcast_in_dim", "f32[2,3]")
    raises(lambda: lax.broadcasted_iota(np.int32, (2,), 1), "iota", "(2,)")


def test_error_bad_padding_config():
    raises(lambda: lax.pad(X, 0.0, [(0, 0, 0)]), "pad", "f32[2,3]")
    raises(lambda: lax.pad(X, 0.0, [(0, 0, -1), (0, 0, 0)]), "pad", "f32[2,3]")
    raises(lambda: lax.pad(X, 0.0, [(-2, -1, 0), (0, 0, 0)]), "pad", "f32[2,3]", "negative")
    raises(lambda: lax.pad(X, np.zeros(2, np.float32), [(0, 0, 0)] * 2), "pad", "f32[2]")


def test_error_slicing():
    raises(lambda: lax.slice(X, (0, 0), (3, 3)), "slice", "f32[2,3]")
    raises(lambda: lax.slice(X, (0, 0), (2, 3), (1, 0)), "slice", "f32[2,3]")
    raises(lambda: lax.concatenate([X, np.zeros((3, 3), np.float32)], 1), "concatenate",
           "f32[3,3]")
    raises(lambda: lax.concatenate([X, X], 2), "concatenate", "dimension 2")
    raises(lambda: lax.dynamic_slice(X, (0, 0), (3, 1)), "dynamic_slice", "f32[2,3]")
    raises(lambda: lax.dynamic_slice(X, (0,), (1, 1)), "dynamic_slice", "f32[2,3]")
    raises(lambda: lax.dynamic_slice(X, (0, np.float32(0)), (1, 1)), "dynamic_slice", "f32[]")
    raises(lambda: lax.dynamic_update_slice(X, np.zeros((3, 1), np.float32), (0, 0)),
           "dynamic_update_slice", "f32[3,1]")


def test_error_under_trace_names_op():
    f = lambda x: lax.reshape(x, (5,))
    raises(lambda: fg.make_jaxpr(f)(X), "reshape", "f32[2,3]")
