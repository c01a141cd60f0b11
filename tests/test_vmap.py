"""vmap: in_axes/out_axes variants against a Python loop, per-example gradients, nesting with
itself and with grad/jacobians, and the error messages."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.tree_util import tree_flatten, tree_map, tree_unflatten


def _take(x, axis, i):
    return fnp.asarray(np.take(np.asarray(x), i, axis=axis))


def _slice_args(args, in_axes, i):
    spec = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    out = []
    for a, ax in zip(args, spec):
        if isinstance(ax, (int, type(None))):
            out.append(a if ax is None else tree_map(lambda x, ax=ax: _take(x, ax, i), a))
        else:
            out.append(tree_map(lambda s, x: x if s is None else _take(x, s, i), ax, a,
                                is_leaf=lambda s: s is None))
    return out


def _stack(outs, out_axes):
    leaves0, tree = tree_flatten(outs[0])
    per = [tree_flatten(o)[0] for o in outs]
    axes = tree_flatten(out_axes, is_leaf=lambda s: s is None)[0]
    axes = axes * len(leaves0) if len(axes) == 1 else axes
    return tree_unflatten(tree, [np.stack([np.asarray(p[k]) for p in per], axis=ax)
                                 for k, ax in enumerate(axes)])


def check_batching(f, args, in_axes=0, out_axes=0, size=None, rtol=1e-5, atol=1e-6):
    """vmap(f) against a Python loop over the mapped axis, stacked along out_axes."""
    got = fg.vmap(f, in_axes=in_axes, out_axes=out_axes)(*args)
    n = size
    if n is None:
        spec = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        for a, ax in zip(args, spec):
            pairs = (tree_flatten(a)[0], tree_flatten(ax, is_leaf=lambda s: s is None)[0])
            for leaf, lax_ in zip(pairs[0], pairs[1] * len(pairs[0])):
                if lax_ is not None:
                    n = np.shape(leaf)[lax_]
    want = _stack([f(*_slice_args(args, in_axes, i)) for i in range(n)], out_axes)
    for g, w in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol)
    return got


def rng_array(*shape, seed=0):
    return fnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


# --- in_axes / out_axes ---------------------------------------------------------------------

def test_default_axes_match_loop():
    x, y = rng_array(4, 3), rng_array(4, 3, seed=1)
    check_batching(lambda a, b: fnp.sin(a) * b + a.sum(), (x, y))


@pytest.mark.parametrize("in_axes", [(1, 0), (-1, None), (None, -2), (0, 1)])
def test_in_axes_variants(in_axes):
    x = rng_array(3, 3)
    y = rng_array(3, 3, seed=1)
    check_batching(lambda a, b: fnp.tanh(a) @ b + b[0] * a.sum(), (x, y), in_axes=in_axes)


@pytest.mark.parametrize("out_axes", [0, 1, -1, (0, None), (1, 0)])
def test_out_axes_variants(out_axes):
    x = rng_array(4, 3)

    def f(a):
        return fnp.exp(a), a[::-1] * fnp.sum(a ** 2)
    if out_axes == (0, None):
        with pytest.raises(errors.FuncgradValueError, match="mapped output"):
            fg.vmap(f, out_axes=out_axes)(x)
        return
    check_batching(f, (x,), out_axes=out_axes)


def test_unbatched_output_is_broadcast_along_out_axes():
    x = rng_array(5, 2)
    c = rng_array(2, 3, seed=2)
    out = fg.vmap(lambda a: (a * 2.0, c), out_axes=(0, 1))(x)
    assert out[1].shape == (2, 5, 3)
    want = np.broadcast_to(np.asarray(c)[:, None], (2, 5, 3))
    np.testing.assert_allclose(np.asarray(out[1]), want)
    unmapped = fg.vmap(lambda a: c, out_axes=None)(x)
    assert unmapped.shape == (2, 3)


def test_pytree_in_axes_prefix_and_kwargs():
    params = {"w": rng_array(3, 2), "b": rng_array(2, seed=1)}
    xs = rng_array(5, 3, seed=2)

    def f(p, x, scale=1.0):
        return fnp.tanh(x @ p["w"] + p["b"]) * scale
    check_batching(f, (params, xs), in_axes=(None, 0))
    check_batching(f, (params, xs), in_axes=({"w": None, "b": None}, 0))
    per_b = {"w": rng_array(3, 2), "b": rng_array(5, 2, seed=3)}
    check_batching(f, (per_b, xs), in_axes=({"w": None, "b": 0}, 0))
    scales = rng_array(5, seed=4)
    got = fg.vmap(f, in_axes=(None, 0))(params, xs, scale=scales)
    want = np.stack([np.asarray(f(params, xs[i], scale=scales[i])) for i in range(5)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_list_in_axes_act_as_a_tuple():
    x, y = rng_array(2, 3), rng_array(3, 2, seed=1)
    check_batching(lambda a, b: a * b, (x, y), in_axes=(0, 1))
    got = fg.vmap(lambda a, b: a * b, in_axes=[0, 1])(x, y)
    np.testing.assert_allclose(np.asarray(got), np.asarray(x) * np.asarray(y).T, rtol=1e-6)


def test_axis_size_without_mapped_arguments():
    out = fg.vmap(lambda x: x * 2.0, in_axes=None, axis_size=3)(fnp.ones(2))
    assert out.shape == (3, 2)
    np.testing.assert_allclose(np.asarray(out), 2.0)


def test_python_scalars_and_integer_arguments():
    idx = fnp.arange(4)
    x = rng_array(4, 3)
    check_batching(lambda i, a: a * i.astype(fnp.float32) + 1.0, (idx, x))
    check_batching(lambda a, s: a * s, (x, 2.0), in_axes=(0, None))


@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_random_axes_match_loop(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    out_axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = rng_array(*shape, seed=len(shape))
    check_batching(lambda a: fnp.cos(a) * a + fnp.sum(a), (x,), in_axes=axis, out_axes=out_axis)


# --- composition ------------------------------------------------------------------------------

def _mlp_loss(params, x, y):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    logp = logits - fnp.log(fnp.sum(fnp.exp(logits - logits.max()), axis=-1, keepdims=True)) \
        - logits.max()
    return -fnp.sum(logp * y)


def _params(seed=0):
    return {"w1": rng_array(3, 4, seed=seed), "b1": rng_array(4, seed=seed + 1),
            "w2": rng_array(4, 2, seed=seed + 2), "b2": rng_array(2, seed=seed + 3)}


def test_per_example_gradients_equal_a_loop():
    params = _params()
    xs = rng_array(6, 3, seed=9)
    ys = fnp.asarray(np.eye(2, dtype=np.float32)[[0, 1, 1, 0, 1, 0]])
    got = fg.vmap(fg.grad(_mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    for i in range(6):
        want = fg.grad(_mlp_loss)(params, xs[i], ys[i])
        for k in params:
            np.testing.assert_allclose(np.asarray(got[k][i]), np.asarray(want[k]), rtol=1e-5,
                                       atol=1e-6)


def test_grad_of_vmap_equals_sum_of_grads():
    params = _params(1)
    xs = rng_array(5, 3, seed=7)
    ys = fnp.asarray(np.eye(2, dtype=np.float32)[[0, 1, 1, 0, 1]])
    batched = lambda p: fnp.sum(fg.vmap(_mlp_loss, in_axes=(None, 0, 0))(p, xs, ys))
    got = fg.grad(batched)(params)
    want = fg.grad(lambda p: sum(_mlp_loss(p, xs[i], ys[i]) for i in range(5)))(params)
    for k in params:
        np.testing.assert_allclose(np.asarray(got[k]), np.asarray(want[k]), rtol=1e-4,
                                   atol=1e-5)


def test_vmap_of_vmap():
    x = rng_array(3, 4, 5)
    y = rng_array(4, 5, seed=1)
    f = lambda a, b: fnp.sum(fnp.sin(a) * b)
    got = fg.vmap(fg.vmap(f, in_axes=(0, 0)), in_axes=(0, None))(x, y)
    want = np.array([[np.sum(np.sin(np.asarray(x)[i, j]) * np.asarray(y)[j]) for j in range(4)]
                     for i in range(3)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    inner_out1 = fg.vmap(fg.vmap(lambda a: a * 2.0, out_axes=0), in_axes=1, out_axes=1)(x)
    np.testing.assert_allclose(np.asarray(inner_out1), 2 * np.asarray(x), rtol=1e-6)


def test_vmap_of_jacobian_and_jacobian_of_vmap():
    x = rng_array(3, 2)
    f = lambda a: fnp.sin(a) * a[::-1]
    got = fg.vmap(fg.jacrev(f))(x)
    want = np.stack([np.asarray(fg.jacfwd(f)(x[i])) for i in range(3)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    j = fg.jacfwd(fg.vmap(f))(x)
    assert j.shape == (3, 2, 3, 2)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(j[i, :, i, :]), want[i], rtol=1e-5, atol=1e-6)


def test_vmap_closure_over_grad_tracer():
    xs = rng_array(4, seed=3)

    def f(w):
        return fnp.sum(fg.vmap(lambda x: fnp.sin(w * x))(xs))
    got = fg.grad(f)(0.7)
    want = np.sum(np.cos(0.7 * np.asarray(xs)) * np.asarray(xs))
    np.testing.assert_allclose(float(got), want, rtol=1e-5)


def test_vmap_under_make_jaxpr_prints_batched_ir():
    text = str(fg.make_jaxpr(fg.vmap(lambda x: fnp.sin(x) * 2.0))(fnp.ones((2, 3))))
    assert "sin" in text and "f32[2,3]" in text


# --- errors ------------------------------------------------------------------------------------

def test_inconsistent_sizes_name_every_argument():
    def f(x, y):
        return x + y

    with pytest.raises(errors.FuncgradValueError) as e:
        fg.vmap(f)({"a": fnp.ones(3)}, fnp.ones((2, 3)))
    msg = str(e.value)
    assert "inconsistent sizes" in msg
    assert "argument x['a']" in msg and "size 3" in msg
    assert "argument y" in msg and "size 2" in msg
    assert "test_vmap.py" in msg


def test_in_axes_must_match_argument_structure():
    with pytest.raises(errors.FuncgradValueError, match="tree prefix"):
        fg.vmap(lambda p: p["a"], in_axes=({"b": 0},))({"a": fnp.ones(3)})
    with pytest.raises(errors.FuncgradValueError, match="len\\(in_axes\\)=2, len\\(args\\)=1"):
        fg.vmap(lambda x: x, in_axes=(0, 0))(fnp.ones(3))
    with pytest.raises(errors.FuncgradTypeError, match="tuple of entries"):
        fg.vmap(lambda p: p["a"], in_axes={"a": 0})
    with pytest.raises(errors.FuncgradTypeError, match="int, None"):
        fg.vmap(lambda x: x, in_axes=(0.5,))


def test_out_of_range_axis():
    with pytest.raises(errors.FuncgradValueError, match="axis 2.*rank should be at least 3.*"
                                                        "\\(2, 3\\)"):
        fg.vmap(lambda x: x, in_axes=2)(fnp.ones((2, 3)))
    with pytest.raises(errors.FuncgradValueError, match="rank should be at least 1"):
        fg.vmap(lambda x: x)(1.0)
    with pytest.raises(errors.FuncgradValueError, match="out_axes=3 is out of range"):
        fg.vmap(lambda x: x, out_axes=3)(fnp.ones((2, 3)))


def test_no_mapped_argument_and_no_axis_size():
    with pytest.raises(errors.FuncgradValueError, match="at least one non-None value"):
        fg.vmap(lambda x: x, in_axes=None)(fnp.ones(3))


def test_axis_size_disagreeing_with_arguments():
    with pytest.raises(errors.FuncgradValueError, match="axis_size=4"):
        fg.vmap(lambda x: x, axis_size=4)(fnp.ones(3))
