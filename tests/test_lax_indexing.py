"""gather and the scatter family: NumPy indexing patterns expressed with dimension numbers,
against numpy fancy indexing and `ufunc.at`; derivatives (repeated indices accumulate);
batching rules against a Python loop; index modes; errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
from funcgrad import lax
from funcgrad.interpreters.batching import batch_eval
from funcgrad.lax import (
    GatherDimensionNumbers,
    GatherScatterMode,
    ScatterDimensionNumbers,
    gather,
    scatter,
    scatter_add,
    scatter_max,
    scatter_min,
    scatter_mul,
)
from funcgrad.test_util import check_batching, check_grads

RNG = np.random.default_rng(0)
GDN, SDN = GatherDimensionNumbers, ScatterDimensionNumbers


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def total(x):
    return lax.reduce_sum(x, tuple(range(np.ndim(x))))




# --- NumPy indexing patterns, as funcgrad.numpy expresses them ------------------------------------
# Each pattern: (operand shape, index arrays builder, gather dnums/slice sizes, numpy reference)

def take_rows(x, idx, **kw):
    """x[idx] for an integer array idx."""
    dn = GDN(tuple(range(idx.ndim, idx.ndim + x.ndim - 1)), (0,), (0,))
    return gather(x, lax.expand_dims(idx, (np.ndim(idx),)), dn, (1,) + x.shape[1:], **kw)


def take_cols(x, idx, **kw):
    """x[:, idx] for x of rank 3."""
    dn = GDN((0, 1 + idx.ndim), (1,), (1,))
    return gather(x, lax.expand_dims(idx, (np.ndim(idx),)), dn, (x.shape[0], 1, x.shape[2]), **kw)


def point_indices(*arrays):
    arrays = np.broadcast_arrays(*arrays)
    return np.stack(arrays, axis=-1).astype(np.int32)


def take_points(x, i, j, **kw):
    """x[i, j] for a rank-2 x and broadcastable integer arrays i, j."""
    return gather(x, point_indices(i, j), GDN((), (0, 1), (0, 1)), (1, 1), **kw)


def take_along_rows(x, idx):
    """np.take_along_axis(x, idx, axis=1) for rank-2 x."""
    rows = np.broadcast_to(np.arange(x.shape[0])[:, None], idx.shape)
    return take_points(x, rows, idx)


def windows(x, starts, sizes, **kw):
    """Stack of dynamic slices x[s0:s0+k0, s1:s1+k1] (starts clamped into range)."""
    return gather(x, starts, GDN((1, 2), (), (0, 1)), sizes, **kw)


def windows_ref(x, starts, sizes):
    out = []
    for s in starts:
        s = [min(max(int(v), 0), n - k) for v, n, k in zip(s, x.shape, sizes)]
        out.append(x[s[0]:s[0] + sizes[0], s[1]:s[1] + sizes[1]])
    return np.stack(out)


IDX = np.array([[3, 0, 3], [1, 4, 1]], np.int32)
GATHER_CASES = [
    ("rows", lambda x: take_rows(x, IDX), lambda x: x[IDX], (5, 3)),
    ("rows_1d", lambda x: take_rows(x, IDX[0]), lambda x: x[IDX[0]], (5,)),
    ("cols", lambda x: take_cols(x, IDX), lambda x: x[:, IDX], (2, 5, 3)),
    ("point", lambda x: take_points(x, 2, IDX[0]), lambda x: x[2, IDX[0]], (4, 5)),
    ("points", lambda x: take_points(x, IDX[1] % 4, IDX), lambda x: x[IDX[1] % 4, IDX],
     (4, 5)),
    ("along", lambda x: take_along_rows(x, IDX), lambda x: np.take_along_axis(x, IDX, 1),
     (2, 5)),
    ("windows", lambda x: windows(x, np.array([[1, 2], [4, 0], [0, 3]]), (2, 3)),
     lambda x: windows_ref(x, np.array([[1, 2], [4, 0], [0, 3]]), (2, 3)), (6, 5)),
    ("clipped", lambda x: windows(x, np.array([[9, -2], [-1, 7]]), (2, 3)),
     lambda x: windows_ref(x, np.array([[9, -2], [-1, 7]]), (2, 3)), (6, 5)),
]


@pytest.mark.parametrize("name, fn, ref, shape", GATHER_CASES)
def test_gather_matches_numpy_indexing(name, fn, ref, shape):
    x = rand(*shape, dtype=np.float32)
    got = fn(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(got), ref(x))


@pytest.mark.parametrize("name, fn, ref, shape", GATHER_CASES)
def test_gather_grads(name, fn, ref, shape):
    check_grads(fn, (rand(*shape),), order=2)


def test_gather_index_modes():
    x = np.arange(5.0, dtype=np.float32)
    idx = np.array([-3, 0, 4, 5, 9], np.int32)
    np.testing.assert_array_equal(np.asarray(take_rows(x, idx)), [0, 0, 4, 4, 4])
    np.testing.assert_array_equal(np.asarray(take_rows(x, idx, mode="promise_in_bounds")),
                                  [0, 0, 4, 4, 4])
    filled = np.asarray(take_rows(x, idx, mode="fill"))
    np.testing.assert_array_equal(filled, [np.nan, 0, 4, np.nan, np.nan])
    np.testing.assert_array_equal(np.asarray(take_rows(x, idx, mode="fill", fill_value=-1)),
                                  [-1, 0, 4, -1, -1])
    ints = take_rows(np.arange(5, dtype=np.int32), idx, mode=GatherScatterMode.FILL_OR_DROP)
    np.testing.assert_array_equal(np.asarray(ints)[[0, 3]], np.iinfo(np.int32).min)
    # a window that sticks out is filled whole
    got = np.asarray(windows(np.ones((4, 4), np.float32), np.array([[3, 0], [2, 1]]), (2, 2),
                             mode="fill"))
    assert np.isnan(got[0]).all() and (got[1] == 1).all()
    g = fg.grad(lambda a: total(take_rows(a, idx, mode="fill", fill_value=0.0)))(x)
    np.testing.assert_array_equal(np.asarray(g), [1, 0, 0, 0, 1])
    g = fg.grad(lambda a: total(take_rows(a, idx)))(x)
    np.testing.assert_array_equal(np.asarray(g), [2, 0, 0, 0, 3])


@given(st.integers(1, 6), st.integers(0, 3), st.lists(st.integers(0, 5), max_size=8),
       st.integers(0, 2**16))
def test_embedding_gather_and_scatter_add(n, d, ids, seed):
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((n, d)).astype(np.float32)
    ids = np.array(ids, np.int32) % n
    np.testing.assert_array_equal(np.asarray(take_rows(table, ids)), table[ids])
    upd = rng.standard_normal((len(ids), d)).astype(np.float32)
    want = table.copy()
    np.add.at(want, ids, upd)
    got = scatter_add(table, ids[:, None], upd, SDN((1,), (0,), (0,)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    # the gradient of a gather accumulates over repeated ids
    g = fg.grad(lambda t: total(take_rows(t, ids)))(table)
    np.testing.assert_array_equal(np.asarray(g)[:, 0] if d else np.zeros(n),
                                  np.bincount(ids, minlength=n) if d else np.zeros(n))


# --- scatter family ------------------------------------------------------------------------------
REP = np.array([3, 0, 3, 3, 1], np.int32)  # repeated indices


def at_rows(op, x, idx, u, **kw):
    """x.at[idx].op(u) for a 1-d integer idx."""
    return op(x, lax.expand_dims(idx, (1,)), u, SDN(tuple(range(1, x.ndim)), (0,), (0,)), **kw)


def at_cols(op, x, idx, u, **kw):
    """x.at[:, idx].op(u) for a rank-3 x."""
    return op(x, lax.expand_dims(idx, (1,)), u, SDN((0, 2), (1,), (1,)), **kw)


def at_points(op, x, i, j, u, **kw):
    """x.at[i, j].op(u) for rank-2 x."""
    return op(x, point_indices(i, j), u, SDN((), (0, 1), (0, 1)), **kw)


def at_windows(op, x, starts, u, **kw):
    """Windows of u (shape (n, k0, k1)) combined into x at `starts`."""
    return op(x, starts, u, SDN((1, 2), (), (0, 1)), **kw)


UFUNCS = {scatter_add: np.add, scatter_mul: np.multiply, scatter_min: np.minimum,
          scatter_max: np.maximum}
OPS = [scatter_add, scatter_mul, scatter_min, scatter_max, scatter]


def ref_at(op, x, index, u):
    out = x.copy()
    if op is scatter:
        out[index] = u
    else:
        UFUNCS[op].at(out, index, u)
    return out


STARTS = np.array([[1, 2], [0, 0], [1, 2], [4, 1]], np.int32)


def windows_index(starts, sizes):
    rows = starts[:, 0, None, None] + np.arange(sizes[0])[None, :, None]
    cols = starts[:, 1, None, None] + np.arange(sizes[1])[None, None, :]
    return rows, cols


SCATTER_CASES = [
    ("rows", (5, 3), (5, 3), lambda op, x, u: at_rows(op, x, REP, u), lambda x: (REP,)),
    ("rows_1d", (5,), (5,), lambda op, x, u: at_rows(op, x, REP, u), lambda x: (REP,)),
    ("cols", (2, 5, 3), (2, 5, 3), lambda op, x, u: at_cols(op, x, REP, u),
     lambda x: (slice(None), REP)),
    ("points", (4, 5), (5,), lambda op, x, u: at_points(op, x, REP % 4, REP, u),
     lambda x: (REP % 4, REP)),
    ("windows", (6, 5), (4, 2, 3), lambda op, x, u: at_windows(op, x, STARTS, u),
     lambda x: windows_index(STARTS, (2, 3))),
]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name, xs, us, fn, index", SCATTER_CASES)
def test_scatter_matches_numpy(op, name, xs, us, fn, index):
    x, u = rand(*xs, dtype=np.float32), rand(*us, dtype=np.float32)
    got = fn(op, x, u)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(np.asarray(got), ref_at(op, x, index(x), u), rtol=1e-6)


def test_scatter_add_repeated_indices_accumulate_and_gradient():
    x = np.zeros(4, np.float32)
    u = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    out = at_rows(scatter_add, x, REP, u)
    np.testing.assert_array_equal(np.asarray(out), [2, 5, 0, 8])
    ct = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    gx, gu = fg.grad(lambda a, b: total(lax.mul(at_rows(scatter_add, a, REP, b), ct)),
                     argnums=(0, 1))(x, u)
    np.testing.assert_array_equal(np.asarray(gx), ct)
    np.testing.assert_array_equal(np.asarray(gu), ct[REP])


def test_scatter_set_gradient_goes_to_the_winning_update():
    x = np.zeros(4, np.float32)
    u = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    out = np.asarray(at_rows(scatter, x, REP, u))
    winners = [i for i in range(len(REP)) if out[REP[i]] == u[i]]
    assert sorted(REP[winners]) == [0, 1, 3]
    gx, gu = fg.grad(lambda a, b: total(at_rows(scatter, a, REP, b)), argnums=(0, 1))(x, u)
    np.testing.assert_array_equal(np.asarray(gx), [0, 0, 1, 0])
    np.testing.assert_array_equal(np.asarray(gu), [1 if i in winners else 0 for i in range(5)])


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name, xs, us, fn, index", SCATTER_CASES)
def test_scatter_grads(op, name, xs, us, fn, index):
    if op in (scatter_min, scatter_max):  # distinct values: no ties
        vals = RNG.permutation(int(np.prod(xs)) + int(np.prod(us))) / 7.0
        x, u = vals[:np.prod(xs)].reshape(xs), vals[np.prod(xs):].reshape(us)
    else:
        x, u = rand(*xs), rand(*us)
    order = 1 if name == "windows" else 2
    check_grads(lambda a, b: fn(op, a, b), (x, u), order=order, eps=1e-3)


def test_scatter_mul_gradient_with_zero_updates():
    x = rand(4)
    for u in (np.array([0.0, 2.0, 3.0, -1.0, 0.5]), np.array([0.0, 2.0, 0.0, -1.0, 0.5]),
              np.array([2.0, 0.0, 0.0, 0.0, 0.5])):
        check_grads(lambda a, b: at_rows(scatter_mul, a, REP, b), (x, u), order=1)
    unique = np.array([2, 0, 3], np.int32)
    check_grads(lambda a, b: at_rows(scatter_mul, a, unique, b), (x, np.array([0.0, 2.0, 0.0])),
                order=2)


def test_scatter_extremal_ties_average_tangents():
    x = np.array([1.0, 0.0], np.float32)
    u = np.array([1.0, 1.0, 0.5], np.float32)
    idx = np.array([0, 0, 1], np.int32)
    _, t = fg.jvp(lambda a, b: at_rows(scatter_max, a, idx, b), (x, u),
                  (np.array([3.0, 0.0], np.float32), np.array([6.0, 9.0, 1.0], np.float32)))
    np.testing.assert_allclose(np.asarray(t), [6.0, 1.0])


@pytest.mark.parametrize("op", OPS)
def test_scatter_index_modes(op):
    x = np.arange(1.0, 6.0, dtype=np.float32)
    idx = np.array([-1, 2, 5, 7], np.int32)
    u = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    dropped = at_rows(op, x, idx, u)
    np.testing.assert_array_equal(np.asarray(dropped), ref_at(op, x, (idx[1:2],), u[1:2]))
    np.testing.assert_array_equal(np.asarray(at_rows(op, x, idx, u, mode="drop")),
                                  np.asarray(dropped))
    clipped = at_rows(op, x, idx, u, mode="clip")
    np.testing.assert_array_equal(np.asarray(clipped), ref_at(op, x, (np.clip(idx, 0, 4),), u))
    gu = fg.grad(lambda b: total(at_rows(op, x, idx, b)))(u)
    assert np.asarray(gu)[[0, 2, 3]].tolist() == [0, 0, 0]
    # a window that sticks out is dropped whole
    got = at_windows(op, np.zeros((4, 4), np.float32), np.array([[3, 0]], np.int32),
                     np.ones((1, 2, 2), np.float32))
    np.testing.assert_array_equal(np.asarray(got), np.zeros((4, 4)))


# --- batching ------------------------------------------------------------------------------------

def stacked(a, d, make):
    """Three examples made from `a`, stacked along axis `d` (or `a` itself when d is None)."""
    return a if d is None else np.stack([make(a, k) for k in range(3)], axis=d)


BATCHED_GATHERS = [
    ("rows", lambda a, i: take_rows(a, i), (5, 3), IDX, 5),
    ("cols", lambda a, i: take_cols(a, i), (2, 5, 3), IDX, 5),
    ("windows", lambda a, i: windows(a, i, (2, 3)), (6, 5),
     np.array([[1, 2], [4, 0], [0, 3]], np.int32), 6),
    ("fill", lambda a, i: take_rows(a, i, mode="fill"), (5, 3), IDX, 5),
]


@pytest.mark.parametrize("name, f, shape, idx0, n", BATCHED_GATHERS)
@pytest.mark.parametrize("dims", [(0, None), (1, None), (None, 0), (None, 1), (1, 0)])
def test_gather_batching(name, f, shape, idx0, n, dims):
    x = stacked(rand(*shape), dims[0], lambda a, k: a + k)
    idx = stacked(idx0, dims[1], lambda a, k: (a + 2 * k) % (n + 2) - 1)
    check_batching(f, [x, idx], list(dims))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dims", [(0, None, None), (None, 0, None), (None, None, 1),
                                  (1, 0, None), (0, 1, 0), (None, 0, 2)])
def test_scatter_batching(op, dims):
    x = stacked(rand(2, 5, 3), dims[0], lambda a, k: a + k)
    idx = stacked(np.array([1, 3, 1, 0], np.int32), dims[1], lambda a, k: (a + 2 * k) % 7 - 1)
    u = stacked(rand(2, 4, 3), dims[2], lambda a, k: a * (k + 1))
    check_batching(lambda a, i, b: at_cols(op, a, i, b), [x, idx, u], list(dims))


@pytest.mark.parametrize("op", OPS)
def test_vmap_of_scatter_gradients(op):
    x, u = rand(3, 2, 5, 3), rand(3, 2, 4, 3)
    idx = np.array([1, 3, 1, 0], np.int32)
    g = fg.grad(lambda a, b: total(lax.mul(at_cols(op, a, idx, b), at_cols(op, a, idx, b))),
                argnums=(0, 1))
    check_batching(g, [x, u], [0, 0])


def test_vmap_of_gather_gradient():
    x, idx = rand(3, 5, 2), np.array([[0, 4, 0], [1, 1, 1], [3, 2, 0]], np.int32)
    g = fg.grad(lambda a, i: total(lax.mul(take_rows(a, i), take_rows(a, i))))
    check_batching(g, [x, idx], [0, 0])
    check_batching(g, [x, idx[0]], [0, None])


# --- errors and IR -------------------------------------------------------------------------------

def test_gather_scatter_errors():
    x = np.ones((5, 3), np.float32)
    with pytest.raises(TypeError) as e:
        take_rows(x, np.array([0.0, 1.0], np.float32))
    assert "gather" in str(e.value) and "f32[2,1]" in str(e.value)
    assert "test_lax_indexing.py" in str(e.value)
    with pytest.raises(TypeError, match="slice_sizes"):
        gather(x, np.zeros((2, 1), np.int32), GDN((1,), (0,), (0,)), (1, 4))
    with pytest.raises(TypeError, match="index vector"):
        gather(x, np.zeros((2, 2), np.int32), GDN((1,), (0,), (0,)), (1, 3))
    with pytest.raises(TypeError) as e:
        at_rows(scatter_add, x, np.array([0, 1], np.int32), np.ones((3, 3), np.float32))
    assert "f32[3,3]" in str(e.value) and "scatter-add" in str(e.value)
    with pytest.raises(TypeError, match="dtype"):
        at_rows(scatter_add, x, np.array([0, 1], np.int32), np.ones((2, 3), np.int32))
    with pytest.raises(ValueError, match="mode"):
        take_rows(x, np.array([0], np.int32), mode="wrap")


def test_gather_jaxpr_prints_and_checks():
    closed = fg.make_jaxpr(lambda a, i: take_rows(a, i))(np.ones((5, 3), np.float32),
                                                         np.zeros(2, np.int32))
    text = str(closed)
    assert "gather" in text and "offset_dims=(1,)" in text and "mode=clip" in text


def test_empty_index_vectors_and_scalar_operands():
    scalar, none = np.float32(2.0), np.zeros((4, 0), np.int32)
    np.testing.assert_array_equal(np.asarray(gather(scalar, none, GDN((), (), ()), ())), [2] * 4)
    np.testing.assert_array_equal(
        np.asarray(gather(np.arange(3.0), none, GDN((1,), (), ()), (3,))), [[0, 1, 2]] * 4)
    assert float(scatter_add(np.float32(0), none, np.ones(4, np.float32), SDN((), (), ()))) == 4
    got = scatter_add(np.zeros(3, np.float32), none, np.ones((4, 3), np.float32),
                      SDN((1,), (), ()))
    np.testing.assert_array_equal(np.asarray(got), [4, 4, 4])
    one = scatter(np.float32(0), np.zeros(0, np.int32), np.float32(3), SDN((), (), ()))
    assert float(one) == 3
    row = gather(rand(5, 3), np.array([3], np.int32), GDN((0,), (0,), (0,)), (1, 3))
    assert row.shape == (3,)
    check_grads(lambda a: gather(a, np.array([3], np.int32), GDN((0,), (0,), (0,)), (1, 3)),
                (rand(5, 3),), order=2)


# --- random dimension numbers against a loop over XLA's definition ---------------------------

@st.composite
def gather_problems(draw):
    """A random operand, indices (some out of bounds) and gather dimension numbers."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    rank = len(shape)
    index_map = tuple(draw(st.permutations(range(rank)))[:draw(st.integers(0, rank))])
    sizes = tuple(draw(st.integers(1, n)) for n in shape)
    collapsed = tuple(d for d in range(rank) if sizes[d] == 1 and draw(st.booleans()))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    n_window = rank - len(collapsed)
    offset_dims = tuple(sorted(draw(st.permutations(range(len(batch) + n_window)))[:n_window]))
    hi = max(shape) + 1
    indices = rng.integers(-1, hi + 1, batch + (len(index_map),)).astype(np.int32)
    operand = rng.standard_normal(shape)
    return operand, indices, GDN(offset_dims, collapsed, index_map), sizes


def gather_ref(operand, indices, dn, sizes, clip):
    offset_dims, collapsed, index_map = dn[:3]  # JAX's class has two batching fields too
    window = [d for d in range(operand.ndim) if d not in collapsed]
    out_ndim = indices.ndim - 1 + len(offset_dims)
    batch_pos = [p for p in range(out_ndim) if p not in offset_dims]
    it = iter(indices.shape[:-1])
    out_shape = [sizes[window[offset_dims.index(p)]] if p in offset_dims else next(it)
                 for p in range(out_ndim)]
    out = np.zeros(out_shape)
    for pos in np.ndindex(*out_shape):
        start = [0] * operand.ndim
        for k, d in enumerate(index_map):
            start[d] = int(indices[tuple(pos[p] for p in batch_pos)][k])
        upper = [n - s for n, s in zip(operand.shape, sizes)]
        inside = all(0 <= s <= u for s, u in zip(start, upper))
        start = [min(max(s, 0), u) for s, u in zip(start, upper)]
        for k, d in enumerate(window):
            start[d] += pos[offset_dims[k]]
        out[pos] = operand[tuple(start)] if inside or clip else np.nan
    return out


def scatter_ref(ufunc, operand, indices, updates, dn, clip):
    window_dims, inserted, index_map = dn[:3]  # JAX's class has two batching fields too
    window = [d for d in range(operand.ndim) if d not in inserted]
    sizes = [1 if d in inserted else updates.shape[window_dims[window.index(d)]]
             for d in range(operand.ndim)]
    scatter_pos = [p for p in range(updates.ndim) if p not in window_dims]
    out = operand.copy()
    for pos in np.ndindex(*updates.shape):
        start = [0] * operand.ndim
        for k, d in enumerate(index_map):
            start[d] = int(indices[tuple(pos[p] for p in scatter_pos)][k])
        upper = [n - s for n, s in zip(operand.shape, sizes)]
        if not clip and not all(0 <= s <= u for s, u in zip(start, upper)):
            continue
        start = [min(max(s, 0), u) for s, u in zip(start, upper)]
        for k, d in enumerate(window):
            start[d] += pos[window_dims[k]]
        out[tuple(start)] = ufunc(out[tuple(start)], updates[pos])
    return out


@given(gather_problems(), st.booleans())
def test_gather_random_dimension_numbers(problem, clip):
    operand, indices, dn, sizes = problem
    mode = "clip" if clip else "fill"
    got = gather(operand, indices, dn, sizes, mode=mode)
    np.testing.assert_allclose(np.asarray(got), gather_ref(operand, indices, dn, sizes, clip),
                               rtol=1e-6)
    operands = np.stack([operand, operand + 1.0])
    check_batching(lambda a, i: gather(a, i, dn, sizes, mode=mode),
                   [operands, np.stack([indices, indices[::-1]])], [0, 0])
    check_batching(lambda a, i: gather(a, i, dn, sizes, mode=mode), [operands, indices],
                   [0, None])
    check_grads(lambda a: gather(a, indices, dn, sizes, mode=mode, fill_value=0.0), (operand,),
                order=1)


@given(gather_problems(), st.booleans(), st.sampled_from(list(UFUNCS)))
def test_scatter_random_dimension_numbers(problem, clip, op):
    operand, indices, gdn, sizes = problem
    dn = SDN(*gdn)
    updates_shape = np.shape(gather_ref(operand, indices, gdn, sizes, True))
    updates = np.random.default_rng(1).standard_normal(updates_shape)
    mode = "clip" if clip else "drop"
    got = op(operand, indices, updates, dn, mode=mode)
    want = scatter_ref(UFUNCS[op], operand.astype(np.float32), indices,
                       updates.astype(np.float32), dn, clip)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    check_batching(lambda a, i, u: op(a, i, u, dn, mode=mode),
                   [np.stack([operand, -operand]), np.stack([indices, indices[::-1]]),
                    np.stack([updates, 2 * updates])], [0, 0, 0])
    if op is scatter_add:
        check_grads(lambda a, u: op(a, indices, u, dn, mode=mode), (operand, updates), order=1)


def test_batching_over_an_empty_batch():
    x, idx, u = np.zeros((0, 5, 3)), np.zeros((0, 2), np.int32), np.zeros((0, 2, 3))
    closed = fg.make_jaxpr(lambda a, i, b: (take_rows(a, i), at_rows(scatter_add, a, i, b)))(
        np.zeros((5, 3)), np.zeros(2, np.int32), np.zeros((2, 3)))
    outs, dims = batch_eval(closed.jaxpr, closed.consts, [x, idx, u], [0, 0, 0])
    assert [np.asarray(o).shape for o in outs] == [(0, 2, 3), (0, 5, 3)] and dims == [0, 0]
