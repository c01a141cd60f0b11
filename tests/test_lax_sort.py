"""sort (single and multi-operand), sort_key_val and top_k: against numpy (NaNs last,
stability), derivatives with `check_grads`, batching against a Python loop, errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
from funcgrad import lax
from funcgrad.test_util import check_batching, check_grads

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def total(x):
    return lax.reduce_sum(x, tuple(range(np.ndim(x))))




@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.integers(-3, 2),
       st.sampled_from([np.float32, np.int32, np.bool_]), st.integers(0, 2**16))
def test_sort_matches_numpy(shape, dim, dtype, seed):
    rng = np.random.default_rng(seed)
    dim = dim % len(shape)
    x = (rng.integers(-3, 3, shape) if dtype is not np.float32
         else rng.standard_normal(shape)).astype(dtype)
    got = lax.sort(x, dimension=dim)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(got), np.sort(x, axis=dim))


def test_sort_nans_last_and_infinities():
    x = np.array([3.0, np.nan, -np.inf, 1.0, np.nan, np.inf, -0.5], np.float32)
    np.testing.assert_array_equal(np.asarray(lax.sort(x)), np.sort(x))
    keys = np.array([np.nan, 1.0, np.nan, 0.0], np.float32)
    k, v = lax.sort_key_val(keys, np.arange(4, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(v), [3, 1, 0, 2])
    np.testing.assert_array_equal(np.asarray(k), np.sort(keys))


def test_multi_operand_sort_is_stable_and_lexicographic():
    a = np.array([[2, 1, 2, 1, 0], [1, 1, 0, 0, 1]], np.int32)
    b = np.array([[5, 4, 3, 2, 1], [9, 8, 7, 6, 5]], np.int32)
    c = np.arange(10, dtype=np.float32).reshape(2, 5)
    sa, sb, sc = lax.sort((a, b, c), dimension=1, num_keys=1)
    perm = np.argsort(a, axis=1, kind="stable")
    np.testing.assert_array_equal(np.asarray(sb), np.take_along_axis(b, perm, 1))
    np.testing.assert_array_equal(np.asarray(sc), np.take_along_axis(c, perm, 1))
    _, sb2, sc2 = lax.sort([a, b, c], dimension=1, num_keys=2)
    perm2 = np.lexsort((b, a), axis=1)
    np.testing.assert_array_equal(np.asarray(sb2), np.take_along_axis(b, perm2, 1))
    np.testing.assert_array_equal(np.asarray(sc2), np.take_along_axis(c, perm2, 1))
    nan_keys = np.array([1.0, np.nan, 1.0, 0.0, np.nan], np.float32)
    order = lax.sort((nan_keys, b[0], c[0]), num_keys=2)[2]
    np.testing.assert_array_equal(np.asarray(order), c[0][np.lexsort((b[0], nan_keys))])
    k, v = lax.sort_key_val(a, c, dimension=0)
    np.testing.assert_array_equal(np.asarray(v), np.take_along_axis(
        c, np.argsort(a, axis=0, kind="stable"), 0))


@pytest.mark.parametrize("shape, dim", [((6,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), 1)])
def test_sort_grads(shape, dim):
    x = RNG.permutation(int(np.prod(shape))).reshape(shape) / 3.0 + rand(*shape) * 1e-2
    check_grads(lambda a: lax.sort(a, dimension=dim), (x,), order=2)


def test_sort_key_val_grads_follow_the_keys():
    keys, vals = rand(3, 5), rand(3, 5)
    check_grads(lambda k, v: lax.sort_key_val(k, v, dimension=1), (keys, vals), order=2)
    ints = np.array([[2, 0, 1, 0, 2]] * 3, np.int32)
    weights = np.broadcast_to(np.arange(5.0, dtype=np.float32), (3, 5))
    g = fg.grad(lambda v: total(lax.mul(lax.sort((ints, v), 1)[1], weights)))(
        vals.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(g), np.broadcast_to([3.0, 0.0, 2.0, 1.0, 4.0],
                                                                 (3, 5)))


def test_top_k():
    x = np.array([[1.0, 3.0, 2.0, 3.0, np.nan], [0.0, -1.0, 5.0, 4.0, 4.0]], np.float32)
    v, i = lax.top_k(x, 3)
    assert i.dtype == np.int32 and v.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(i), [[4, 1, 3], [2, 3, 4]])
    np.testing.assert_array_equal(np.asarray(v)[1], [5.0, 4.0, 4.0])
    ints = np.array([5, np.iinfo(np.int32).min, 7, 5], np.int32)
    v, i = lax.top_k(ints, 4)
    np.testing.assert_array_equal(np.asarray(v), [7, 5, 5, np.iinfo(np.int32).min])
    np.testing.assert_array_equal(np.asarray(i), [2, 0, 3, 1])
    x = RNG.permutation(24).reshape(2, 3, 4) / 5.0
    check_grads(lambda a: lax.top_k(a, 2)[0], (x,), order=2)


@pytest.mark.parametrize("bdim", [0, 1, 2])
def test_sort_batching(bdim):
    x = rand(*(3, 4)[:bdim], 5, *(3, 4)[bdim:])
    y = rand(3, 4)
    check_batching(lambda a: lax.sort(a, dimension=1), [x], [bdim])
    check_batching(lambda a, b: lax.sort_key_val(a, b, dimension=0), [x, y], [bdim, None])
    check_batching(lambda a: lax.top_k(a, 2), [x], [bdim])
    weights = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    check_batching(fg.grad(lambda a: total(lax.mul(lax.sort(a, 0), weights))), [x], [bdim])


def test_sort_errors():
    with pytest.raises(TypeError) as e:
        lax.sort((np.ones(3, np.float32), np.ones(4, np.float32)))
    assert "f32[3]" in str(e.value) and "f32[4]" in str(e.value)
    assert "test_lax_sort.py" in str(e.value)
    with pytest.raises(ValueError, match="dimension"):
        lax.sort(np.ones((2, 3)), dimension=2)
    with pytest.raises(ValueError, match="num_keys"):
        lax.sort((np.ones(3), np.ones(3)), num_keys=3)
    with pytest.raises(ValueError, match="k=4"):
        lax.top_k(np.ones(3), 4)
