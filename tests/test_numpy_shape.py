"""funcgrad.numpy shape functions against NumPy on hypothesis-drawn shapes (size-0 and size-1
axes included): reshape, transposes, axis moves, broadcasting, joining, splitting, tiling,
repeating, padding, flips, rolls, rotations and diagonals.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy_strategies import (
    BOOL,
    DTYPES,
    F32,
    I32,
    assert_matches,
    make_array,
    nonempty_shapes,
    seeds,
    shapes,
)

import funcgrad.numpy as fnp

arrays = st.builds(lambda s, d, seed: make_array(seed, s, d), shapes, st.sampled_from(DTYPES),
                   seeds)


def _same(got, want):
    assert_matches(got, want, want.dtype if want.dtype != np.int64 else I32)


@given(x=arrays, data=st.data())
def test_reshape_ravel_with_inferred_axis(x, data):
    a = fnp.asarray(x)
    _same(fnp.ravel(a), np.ravel(x))
    _same(a.flatten(), x.flatten())
    _same(fnp.ravel(a, order="F"), np.ravel(x, order="F"))
    if x.size:
        sizes = [d for d in range(1, x.size + 1) if x.size % d == 0]
        d = data.draw(st.sampled_from(sizes))
        _same(fnp.reshape(a, (d, -1)), x.reshape(d, -1))
        _same(a.reshape(-1, d), x.reshape(-1, d))
        _same(a.reshape((d, x.size // d), order="F"), x.reshape((d, x.size // d), order="F"))
    _same(a.reshape(x.shape[::-1]), x.reshape(x.shape[::-1]))


@given(x=arrays, data=st.data())
def test_transpose_swapaxes_moveaxis(x, data):
    a = fnp.asarray(x)
    _same(fnp.transpose(a), x.T)
    _same(a.T, x.T)
    perm = data.draw(st.permutations(range(x.ndim)))
    _same(fnp.transpose(a, perm), np.transpose(x, perm))
    _same(a.transpose(*perm) if perm else a.transpose(), x.transpose(*perm))
    if x.ndim:
        i, j = data.draw(st.integers(-x.ndim, x.ndim - 1)), data.draw(
            st.integers(-x.ndim, x.ndim - 1))
        _same(fnp.swapaxes(a, i, j), np.swapaxes(x, i, j))
        _same(fnp.moveaxis(a, i, j), np.moveaxis(x, i, j))
        k = data.draw(st.integers(1, x.ndim))
        src = data.draw(st.permutations(range(x.ndim)))[:k]
        dst = data.draw(st.permutations(range(x.ndim)))[:k]
        _same(fnp.moveaxis(a, src, dst), np.moveaxis(x, src, dst))
    if x.ndim >= 2:
        _same(a.mT, np.swapaxes(x, -1, -2))
        _same(fnp.matrix_transpose(a), np.swapaxes(x, -1, -2))


@given(x=arrays, data=st.data())
def test_expand_dims_squeeze(x, data):
    a = fnp.asarray(x)
    ax = data.draw(st.integers(-x.ndim - 1, x.ndim))
    _same(fnp.expand_dims(a, ax), np.expand_dims(x, ax))
    _same(fnp.expand_dims(a, (0, -1)), np.expand_dims(x, (0, -1)))
    _same(fnp.squeeze(a), np.squeeze(x))
    ones = tuple(i for i, d in enumerate(x.shape) if d == 1)
    if ones:
        _same(fnp.squeeze(a, ones[0]), np.squeeze(x, ones[0]))
        _same(a.squeeze(ones), x.squeeze(ones))
    for f in ("atleast_1d", "atleast_2d", "atleast_3d"):
        _same(getattr(fnp, f)(a), getattr(np, f)(x))


@given(shape=shapes, seed=seeds, data=st.data())
def test_broadcast_to_and_arrays(shape, seed, data):
    target = data.draw(st.lists(st.integers(1, 3), max_size=2)).copy() + list(shape)
    small = tuple(1 if data.draw(st.booleans()) else d for d in shape)
    x = make_array(seed, small, F32)
    _same(fnp.broadcast_to(fnp.asarray(x), target), np.broadcast_to(x, target))
    y = make_array(seed, tuple(target), I32)
    got = fnp.broadcast_arrays(fnp.asarray(x), fnp.asarray(y))
    for g, w in zip(got, np.broadcast_arrays(x, y)):
        _same(g, w)
    assert fnp.broadcast_shapes(small, target) == np.broadcast_shapes(small, target)


@given(shape=shapes, seed=seeds, n=st.integers(1, 3), data=st.data())
def test_concatenate_stack(shape, seed, n, data):
    xs = [make_array(seed + i, shape, F32 if i % 2 else I32) for i in range(n)]
    fs = [fnp.asarray(x) for x in xs]
    ax = data.draw(st.integers(-len(shape) - 1, len(shape)))
    _same(fnp.stack(fs, ax), np.stack(xs, ax).astype(np.result_type(*xs)).astype(
        F32 if n > 1 else xs[0].dtype))
    if shape:
        cax = data.draw(st.integers(-len(shape), len(shape) - 1))
        want = np.concatenate(xs, cax)
        _same(fnp.concatenate(fs, cax), want.astype(F32 if n > 1 else I32))
        _same(fnp.concatenate(fs, axis=None), np.concatenate(xs, axis=None).astype(
            F32 if n > 1 else I32))
        for f in ("hstack", "vstack", "dstack", "column_stack") if len(shape) < 3 else ():
            if f == "column_stack" and len(shape) == 0:
                continue
            _same(getattr(fnp, f)(fs), getattr(np, f)(xs).astype(F32 if n > 1 else I32))


@given(shape=nonempty_shapes.filter(lambda s: len(s) > 0), seed=seeds, data=st.data())
def test_split_array_split(shape, seed, data):
    x = make_array(seed, shape, F32)
    ax = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[ax]
    k = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    for g, w in zip(fnp.split(fnp.asarray(x), k, ax), np.split(x, k, ax)):
        _same(g, w)
    k2 = data.draw(st.integers(1, n + 2))
    got = fnp.array_split(fnp.asarray(x), k2, ax)
    want = np.array_split(x, k2, ax)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w)
    idx = sorted(data.draw(st.lists(st.integers(-n - 1, n + 1), max_size=3)))
    for g, w in zip(fnp.split(fnp.asarray(x), idx, ax), np.split(x, idx, ax)):
        _same(g, w)


def test_hsplit_vsplit_dsplit_unstack():
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    for f, k in (("hsplit", 2), ("vsplit", 2), ("dsplit", 3)):
        for g, w in zip(getattr(fnp, f)(fnp.asarray(x), k), getattr(np, f)(x, k)):
            _same(g, w)
    for g, w in zip(fnp.unstack(fnp.asarray(x), axis=1), np.moveaxis(x, 1, 0)):
        _same(g, w)


@given(x=arrays, reps=st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=4)))
def test_tile(x, reps):
    _same(fnp.tile(fnp.asarray(x), reps), np.tile(x, reps))


@given(x=arrays, data=st.data())
def test_repeat(x, data):
    r = data.draw(st.integers(0, 3))
    _same(fnp.repeat(fnp.asarray(x), r), np.repeat(x, r))
    if x.ndim:
        ax = data.draw(st.integers(-x.ndim, x.ndim - 1))
        _same(fnp.repeat(fnp.asarray(x), r, axis=ax), np.repeat(x, r, axis=ax))
        reps = data.draw(st.lists(st.integers(0, 3), min_size=x.shape[ax],
                                  max_size=x.shape[ax]))
        _same(fnp.repeat(fnp.asarray(x), reps, axis=ax), np.repeat(x, reps, axis=ax))
        _same(fnp.asarray(x).repeat(2, ax), np.repeat(x, 2, ax))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
@given(shape=nonempty_shapes, seed=seeds, data=st.data())
def test_pad(mode, shape, seed, data):
    x = make_array(seed, shape, I32)
    per_axis = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=len(shape),
                        max_size=len(shape))
    width = data.draw(st.one_of(st.integers(0, 3), st.tuples(st.integers(0, 3), st.integers(0, 3)),
                                *([per_axis] if shape else [])))
    _same(fnp.pad(fnp.asarray(x), width, mode=mode), np.pad(x, width, mode=mode))


def test_pad_constant_values():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _same(fnp.pad(fnp.asarray(x), 1, constant_values=-1.5), np.pad(x, 1, constant_values=-1.5))
    _same(fnp.pad(fnp.asarray(x), ((1, 0), (0, 2)), constant_values=((7, 8), (9, 10))),
          np.pad(x, ((1, 0), (0, 2)), constant_values=((7, 8), (9, 10))))


@given(x=arrays, data=st.data())
def test_flip_roll_rot90(x, data):
    a = fnp.asarray(x)
    _same(fnp.flip(a), np.flip(x))
    shift = data.draw(st.integers(-7, 7))
    _same(fnp.roll(a, shift), np.roll(x, shift))
    if x.ndim:
        ax = data.draw(st.integers(-x.ndim, x.ndim - 1))
        _same(fnp.flip(a, ax), np.flip(x, ax))
        _same(fnp.roll(a, shift, ax), np.roll(x, shift, ax))
        _same(fnp.roll(a, fnp.asarray(np.int32(shift)), ax), np.roll(x, shift, ax))
    if x.ndim >= 2:
        _same(fnp.fliplr(a), np.fliplr(x))
        _same(fnp.flipud(a), np.flipud(x))
        _same(fnp.roll(a, (1, -2), (0, 1)), np.roll(x, (1, -2), (0, 1)))
        k = data.draw(st.integers(-5, 5))
        _same(fnp.rot90(a, k), np.rot90(x, k))
        _same(fnp.rot90(a, k, (1, 0)), np.rot90(x, k, (1, 0)))


@given(shape=shapes.filter(lambda s: len(s) >= 2), seed=seeds, offset=st.integers(-4, 4),
       data=st.data())
def test_diagonal_trace(shape, seed, offset, data):
    x = make_array(seed, shape, I32)
    i, j = data.draw(st.permutations(range(len(shape))))[:2]
    _same(fnp.diagonal(fnp.asarray(x), offset, i, j), np.diagonal(x, offset, i, j))
    _same(fnp.trace(fnp.asarray(x), offset, i, j), np.trace(x, offset, i, j).astype(I32))


@given(n=st.integers(0, 4), m=st.integers(0, 4), k=st.integers(-4, 4), seed=seeds)
def test_diag_tril_triu(n, m, k, seed):
    v = make_array(seed, (n,), F32)
    _same(fnp.diag(fnp.asarray(v), k), np.diag(v, k))
    _same(fnp.diagflat(fnp.asarray(v), k), np.diagflat(v, k))
    x = make_array(seed, (2, n, m), I32)
    _same(fnp.diag(fnp.asarray(x[0]), k), np.diag(x[0], k))
    _same(fnp.tril(fnp.asarray(x), k), np.tril(x, k))
    _same(fnp.triu(fnp.asarray(x), k), np.triu(x, k))


def test_metadata_astype_copy_append():
    x = fnp.ones((2, 3), fnp.int32)
    assert fnp.shape(x) == (2, 3) and fnp.ndim(x) == 2 and fnp.size(x) == 6
    assert fnp.size(x, 1) == 3 and fnp.shape(1.0) == ()
    assert_matches(fnp.astype(x, fnp.float32), np.ones((2, 3)), F32)
    assert_matches(x.astype(bool), np.ones((2, 3), bool), BOOL)
    assert_matches(fnp.copy(x), np.ones((2, 3)), I32)
    assert_matches(fnp.append(x, fnp.zeros((1, 3), fnp.int32), axis=0),
                   np.append(np.ones((2, 3)), np.zeros((1, 3)), axis=0), I32)
    assert_matches(fnp.append(x, 5), np.append(np.ones((2, 3)), 5), I32)
