"""Typed keys (`random.key`, dtype `key<fry>`) and the functions on keys: they behave as
JAX's key arrays where funcgrad can (shape, dtype, indexing, equality, split/fold_in, every
sampler, jit/vmap/scan), carry the same words as raw keys, and refuse what JAX refuses."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad import random as r
from funcgrad.errors import FuncgradTypeError, FuncgradValueError


def _data(k):
    return np.asarray(r.key_data(k))


def test_a_typed_key_is_a_scalar_of_dtype_key_fry_over_the_raw_words():
    k = r.key(42)
    assert (k.shape, k.ndim, k.size, str(k.dtype)) == ((), 0, 1, "key<fry>")
    assert k.dtype == r.key_dtype() == r.key_dtype("threefry2x32")
    np.testing.assert_array_equal(_data(k), np.asarray(r.PRNGKey(42)))
    assert repr(k) == "Array((), dtype=key<fry>) overlaying:\n[ 0 42]"
    assert r.key_impl(k) == r.key_impl(r.PRNGKey(0)) == "threefry2x32"
    assert r.clone(k) is k


def test_split_and_fold_in_return_the_kind_they_were_given():
    raw, typed = r.PRNGKey(3), r.key(3)
    for fn in (lambda k: r.split(k), lambda k: r.split(k, (2, 3)), lambda k: r.fold_in(k, 7)):
        out_raw, out_typed = fn(raw), fn(typed)
        assert isinstance(out_typed, r.PRNGKeyArray) and not isinstance(out_raw,
                                                                         r.PRNGKeyArray)
        assert out_typed.shape == tuple(out_raw.shape[:-1])
        np.testing.assert_array_equal(_data(out_typed), np.asarray(out_raw))


def test_wrap_key_data_round_trips_and_samplers_take_both_kinds():
    raw = r.split(r.PRNGKey(5), 6).reshape(2, 3, 2)
    keys = r.wrap_key_data(raw)
    assert keys.shape == (2, 3)
    np.testing.assert_array_equal(_data(keys), np.asarray(raw))
    np.testing.assert_array_equal(_data(r.wrap_key_data(r.key_data(keys), impl="threefry2x32")),
                                  np.asarray(raw))
    for sample in (lambda k: r.normal(k, (3,)), lambda k: r.gamma(k, 2.0, (3,)),
                   lambda k: r.randint(k, (4,), 0, 9), lambda k: r.permutation(k, 5),
                   lambda k: r.categorical(k, fnp.zeros(4), shape=(3,))):
        np.testing.assert_array_equal(np.asarray(sample(keys[1, 2])),
                                      np.asarray(sample(raw[1, 2])))


def test_indexing_iteration_reshape_and_equality():
    keys = r.split(r.key(0), (2, 3))
    raw = np.asarray(r.key_data(keys))
    assert keys[1].shape == (3,) and keys[..., 0].shape == (2,) and keys[None].shape == (1, 2, 3)
    np.testing.assert_array_equal(_data(keys[1, ::2]), raw[1, ::2])
    np.testing.assert_array_equal(_data(keys[fnp.array([1, 0])]), raw[[1, 0]])
    assert [k.shape for k in keys] == [(3,), (3,)] and len(keys) == 2
    np.testing.assert_array_equal(_data(keys.reshape(-1)), raw.reshape(6, 2))
    np.testing.assert_array_equal(_data(keys.T), raw.transpose(1, 0, 2))
    eq = keys == keys.reshape(2, 3)
    assert eq.shape == (2, 3) and bool(eq.all())
    assert not bool((keys[0] != keys[0]).any()) and bool((keys[0] != keys[1]).all())


def test_typed_keys_pass_through_jit_vmap_scan_and_cond():
    keys = r.split(r.key(1), 4)
    draw = lambda k: r.uniform(k, (3,))  # noqa: E731
    eager = np.stack([np.asarray(draw(k)) for k in keys])
    np.testing.assert_array_equal(np.asarray(fg.vmap(draw)(keys)), eager)
    np.testing.assert_array_equal(np.asarray(fg.jit(fg.vmap(draw))(keys)), eager)
    split_jit = fg.jit(lambda k: r.split(k, 3))(keys[0])
    assert isinstance(split_jit, r.PRNGKeyArray) and split_jit.shape == (3,)
    np.testing.assert_array_equal(_data(split_jit), _data(r.split(keys[0], 3)))
    # the pytree's leaves are the keys' words, of the key array's shape: any axes map
    grid = r.split(r.key(4), (2, 3))
    by_col = fg.vmap(fg.vmap(draw), in_axes=-1, out_axes=-1)(grid)
    assert by_col.shape == (2, 3, 3)
    np.testing.assert_array_equal(np.asarray(by_col[1, :, 2]), np.asarray(draw(grid[1, 2])))
    firsts = fg.tree_util.tree_map(lambda w: w[0], grid)
    np.testing.assert_array_equal(_data(firsts), _data(grid[0]))
    made = fg.vmap(r.key)(fnp.arange(3))
    assert made.shape == (3,)
    np.testing.assert_array_equal(_data(made), np.stack([_data(r.key(i)) for i in range(3)]))

    def step(k, _):
        k, sub = r.split(k)
        return k, r.normal(sub)
    k_end, xs = lax.scan(step, r.key(2), None, length=4)
    assert isinstance(k_end, r.PRNGKeyArray) and xs.shape == (4,)
    k, want = r.key(2), []
    for _ in range(4):
        k, sub = r.split(k)
        want.append(float(r.normal(sub)))
    np.testing.assert_allclose(np.asarray(xs), want, rtol=1e-6)
    np.testing.assert_array_equal(_data(k_end), _data(k))
    chosen = lax.cond(True, lambda a, b: a, lambda a, b: b, keys[0], keys[1])
    np.testing.assert_array_equal(_data(chosen), _data(keys[0]))


def test_keys_inside_grad_are_constants():
    k = r.key(3)
    g = fg.grad(lambda s: (s * r.normal(k, (4,))).sum())(2.0)
    np.testing.assert_allclose(float(g), float(np.asarray(r.normal(k, (4,))).sum()), rtol=1e-6)


def test_what_jax_refuses_is_refused():
    k = r.key(0)
    with pytest.raises(TypeError, match="key_data"):
        np.asarray(k)
    with pytest.raises(FuncgradValueError, match=r"random.normal: expected a single key.*\(3,\)"):
        r.normal(r.split(k, 3))
    with pytest.raises(FuncgradValueError, match="not both"):
        r.key(0, impl="threefry2x32", dtype=r.key_dtype())
    with pytest.raises(FuncgradValueError, match="'rbg' is not available"):
        r.key(0, impl="rbg")
    with pytest.raises(FuncgradValueError, match="unrecognized PRNG implementation"):
        r.PRNGKey(0, impl="mersenne")
    with pytest.raises(FuncgradTypeError, match="expected a scalar seed"):
        r.key(k)
    with pytest.raises(FuncgradTypeError, match="integer scalar"):
        r.key(fnp.arange(3))
    with pytest.raises(FuncgradTypeError, match="typed keys"):
        r.wrap_key_data(k)
    with pytest.raises(FuncgradTypeError, match="uint32"):
        r.wrap_key_data(fnp.zeros((3, 2)))
    with pytest.raises(FuncgradTypeError, match="expected a PRNG key"):
        r.uniform("not a key")
    with pytest.raises(TypeError, match="0-d"):
        len(k)


def test_split_with_an_empty_shape_is_a_new_key_as_in_jax():
    k = r.PRNGKey(46)
    new = np.asarray(r.split(k, ()))
    assert new.shape == (2,) and not np.array_equal(new, np.asarray(k))
    np.testing.assert_array_equal(new, np.asarray(r.split(k, 1))[0])
