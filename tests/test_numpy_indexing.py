"""funcgrad.numpy indexing: x[idx] and x.at[idx] against NumPy on random index expressions,
gradients through indexing and updates, traced indices, the IR of basic indexing, errors,
and the index functions (take, sort, argsort, nonzero, searchsorted, ...)."""

import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.core import jaxpr_as_fun
from funcgrad.numpy import indexing as fi
from funcgrad.numpy import searching as fs
from funcgrad.test_util import check_grads

STEPS = [None, 1, 2, 3, -1, -2, -3]


# --- random index expressions ---------------------------------------------------------------

@st.composite
def index_cases(draw, max_ndim=4, min_dim=0):
    """(shape, idx): an index expression mixing ints, slices with steps, None, Ellipsis,
    integer arrays and lists, boolean masks and scalar bools, valid for NumPy except that
    advanced indices may fail to broadcast together."""
    ndim = draw(st.integers(0, max_ndim))
    sizes = st.sampled_from([3, 2, 4, 1] + ([0] if min_dim == 0 else []))
    shape = tuple(draw(st.lists(sizes, min_size=ndim, max_size=ndim)))
    adv_shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    items, d, ellipsis = [], 0, False
    while len(items) < 6:
        kinds = []
        if d < ndim:  # mostly entries that consume an axis
            kinds += ["slice", "slice", "mask"] + (["int", "array", "array", "list", "int"]
                                                    if shape[d] else [])
        if not ellipsis or d == ndim:
            kinds.insert(0 if d == ndim else len(kinds), "stop")
        kinds += ["none", "bool"] + ([] if ellipsis else ["ellipsis"])
        kind = draw(st.sampled_from(kinds))
        if kind == "stop":
            break
        n = shape[d] if d < ndim else 0
        if kind == "none":
            items.append(None)
        elif kind == "bool":
            items.append(draw(st.booleans()))
        elif kind == "ellipsis":
            ellipsis = True
            d += draw(st.integers(0, ndim - d))
            items.append(Ellipsis)
        elif kind == "slice":
            bound = st.none() | st.integers(-n - 2, n + 2)
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from(STEPS))))
            d += 1
        elif kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
            d += 1
        elif kind == "array":
            s = adv_shape[draw(st.integers(0, len(adv_shape))):]
            s = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else k for k in s)
            dt = draw(st.sampled_from([np.int32, np.int64, np.int8]))
            items.append(rng.integers(-n, n, size=s).astype(dt))
            d += 1
        elif kind == "list":
            items.append([int(i) for i in rng.integers(-n, n, size=draw(st.integers(1, 3)))])
            d += 1
        else:
            k = draw(st.integers(1, min(2, ndim - d)))
            items.append(rng.random(shape[d:d + k]) < 0.5)
            d += k
    if ellipsis and d < ndim:
        items += [slice(None)] * (ndim - d)
    idx = tuple(items)
    if len(items) == 1 and draw(st.booleans()):
        idx = items[0]
    return shape, idx


def _array(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _numpy_or_error(f):
    try:
        return f(), None
    except IndexError as e:
        return None, e


def _tuple(idx):
    return idx if isinstance(idx, tuple) else (idx,)


def _int_arrays(idx):
    return [i for i in _tuple(idx) if isinstance(i, np.ndarray) and i.dtype != np.bool_]


def _with_arrays(idx, arrays):
    """`idx` with its integer arrays replaced, in order, by `arrays`."""
    it = iter(arrays)
    out = tuple(next(it) if isinstance(i, np.ndarray) and i.dtype != np.bool_ else i
                for i in _tuple(idx))
    return out if isinstance(idx, tuple) else out[0]


@given(index_cases())
def test_getitem_matches_numpy(case):
    shape, idx = case
    a = _array(shape)
    want, err = _numpy_or_error(lambda: a[idx])
    if err is not None:
        with pytest.raises(IndexError):
            fnp.asarray(a)[idx]
        return
    got = fnp.asarray(a)[idx]
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)


@given(index_cases())
def test_getitem_traced_matches_numpy(case):
    """The same expressions with the integer arrays traced (make_jaxpr, then evaluated)."""
    shape, idx = case
    a = _array(shape)
    want, err = _numpy_or_error(lambda: a[idx])
    if err is not None:
        return
    arrays = _int_arrays(idx)
    closed = fg.make_jaxpr(lambda x, *arrs: x[_with_arrays(idx, arrs)])(a, *arrays)
    got = jaxpr_as_fun(closed)(fnp.asarray(a), *map(fnp.asarray, arrays))[0]
    np.testing.assert_array_equal(np.asarray(got), want)


_UFUNCS = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


@given(index_cases(), st.sampled_from(["set", "add", "multiply", "min", "max"]))
def test_at_update_matches_numpy(case, op):
    shape, idx = case
    a = _array(shape)
    sel, err = _numpy_or_error(lambda: a[idx])
    if err is not None:
        with pytest.raises(IndexError):
            getattr(fnp.asarray(a).at[idx], op)(1.0)
        return
    v = _array(sel.shape, seed=1)
    want = a.copy()
    if op == "set":
        counts = np.zeros(shape, np.int32)
        np.add.at(counts, _tuple(idx), 1)
        if counts.max(initial=0) > 1:  # repeated positions: which update wins is unspecified
            v = np.float32(2.5)
        want[_tuple(idx)] = v
    else:
        _UFUNCS[op].at(want, _tuple(idx), v)
    got = getattr(fnp.asarray(a).at[idx], op)(v)
    assert got.shape == shape and got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@given(index_cases())
def test_at_add_traced_indices(case):
    shape, idx = case
    a = _array(shape)
    sel, err = _numpy_or_error(lambda: a[idx])
    if err is not None:
        return
    v = _array(sel.shape, seed=1)
    want = a.copy()
    np.add.at(want, _tuple(idx), v)
    arrays = _int_arrays(idx)
    closed = fg.make_jaxpr(lambda x, v, *arrs: x.at[_with_arrays(idx, arrs)].add(v))(
        a, v, *arrays)
    got = jaxpr_as_fun(closed)(fnp.asarray(a), fnp.asarray(v), *map(fnp.asarray, arrays))[0]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


# --- specific semantics ---------------------------------------------------------------------

def test_advanced_indices_separated_go_first():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = fnp.asarray(a)
    for idx in [(0, slice(None), [1, 2]), ([0], None, [1]), (slice(None), [0], ..., [1]),
                ([1, 0], slice(None), [[0], [3]])]:
        assert x[idx].shape == a[idx].shape
        np.testing.assert_array_equal(np.asarray(x[idx]), a[idx])


def test_out_of_bounds_static_ints_clamp_on_reads_and_drop_on_updates_like_jax():
    a = np.arange(12.0).reshape(3, 4)
    x = fnp.asarray(a)
    assert float(fnp.arange(3.0)[5]) == 2.0 and float(fnp.arange(3.0)[-5]) == 0.0
    np.testing.assert_array_equal(np.asarray(x[7]), a[2])
    np.testing.assert_array_equal(np.asarray(x[1, -9]), a[1, 0])
    np.testing.assert_array_equal(np.asarray(x[5, [0, 9]]), a[2, [0, 3]])
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: v[:, 6])(x)), a[:, 3])
    np.testing.assert_array_equal(np.asarray(x.at[3].set(1.0)), a)
    np.testing.assert_array_equal(np.asarray(x.at[0, -5].add(1.0)), a)
    np.testing.assert_array_equal(np.asarray(x.at[[0, 1], 4].set(1.0)), a)
    g = fg.grad(lambda v: v[9, 1] * 2.0)(x)  # the gradient lands on the clamped element
    want = np.zeros((3, 4))
    want[2, 1] = 2.0
    np.testing.assert_array_equal(np.asarray(g), want)


def test_out_of_bounds_index_arrays_clamp_like_jax():
    x = fnp.asarray(np.arange(5.0))
    np.testing.assert_array_equal(np.asarray(x[np.array([7, -9, -1])]), [4.0, 0.0, 4.0])
    got = x.at[np.array([7, 1])].get(mode="fill", fill_value=-1.0)
    np.testing.assert_array_equal(np.asarray(got), [-1.0, 1.0])
    assert np.isnan(np.asarray(x.at[np.array([7])].get(mode="fill"))[0])
    assert float(x.at[9].get(mode="clip")) == 4.0


def test_out_of_bounds_updates_drop_by_default_and_clip_on_request():
    x = fnp.zeros(4)
    np.testing.assert_array_equal(np.asarray(x.at[np.array([1, 9])].set(5.0)), [0, 5, 0, 0])
    np.testing.assert_array_equal(np.asarray(x.at[np.array([1, 9])].add(1.0, mode="clip")),
                                  [0, 1, 0, 1])
    np.testing.assert_array_equal(np.asarray(x.at[7].add(1.0, mode="drop")), [0, 0, 0, 0])


def test_at_values_cast_and_broadcast():
    x = fnp.asarray(np.zeros((2, 3), np.int32))
    out = x.at[:, 1].set(fnp.asarray(np.array([2.7, -1.2], np.float32)))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), [[0, 2, 0], [0, -1, 0]])
    out = fnp.zeros((2, 3)).at[0].add(np.ones((1, 3)))  # leading size-1 axis dropped
    np.testing.assert_array_equal(np.asarray(out), [[1, 1, 1], [0, 0, 0]])
    with pytest.raises(ValueError, match=r"cannot broadcast values of shape \(4,\)"):
        fnp.zeros((2, 3)).at[0].set(np.ones(4))


def test_at_divide_power_subtract_apply_get():
    a = np.arange(1.0, 7.0).reshape(2, 3).astype(np.float32)
    x = fnp.asarray(a)
    idx = (slice(None), np.array([0, 2, 2]))
    want = a.copy()
    np.divide.at(want, idx, np.float32(2.0))
    np.testing.assert_allclose(np.asarray(x.at[idx].divide(2.0)), want, rtol=1e-6)
    want = a.copy()
    np.power.at(want, (0, 1), 3.0)
    np.testing.assert_allclose(np.asarray(x.at[0, 1].power(3.0)), want, rtol=1e-6)
    want = a.copy()
    np.subtract.at(want, idx, 1.0)
    np.testing.assert_allclose(np.asarray(x.at[idx].subtract(1.0)), want)
    want = a.copy()
    want[1] = np.sqrt(want[1])
    np.testing.assert_allclose(np.asarray(x.at[1].apply(fnp.sqrt)), want, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(x.at[::-1, 1].get()), a[::-1, 1])


def test_repeated_indices_accumulate():
    x = fnp.zeros(3)
    np.testing.assert_array_equal(np.asarray(x.at[np.array([0, 0, 2, 0])].add(1.0)),
                                  [3.0, 0.0, 1.0])
    np.testing.assert_array_equal(
        np.asarray(fnp.ones(2).at[np.array([1, 1])].multiply(np.array([2.0, 3.0]))), [1, 6])


# --- gradients ------------------------------------------------------------------------------

GRAD_INDICES = [
    (1,), (slice(None, None, -2),), (Ellipsis, None, 1), (np.array([0, 2, 2]),),
    (slice(None), np.array([1, -1, 1])), (np.array([[0], [2]]), slice(1, 3), np.array([0, 0])),
    (np.array([True, False, True]), 1), (slice(1, None), None, np.array([1, 0]), 0),
]


@pytest.mark.parametrize("idx", GRAD_INDICES, ids=str)
def test_grads_through_indexing(idx):
    a = _array((3, 4, 2))
    v = _array(a[idx].shape, seed=1)
    check_grads(lambda x: x[idx], (a,), order=2)
    check_grads(lambda x, v: x.at[idx].add(v), (a, v), order=2)
    check_grads(lambda x, v: x.at[idx].set(v), (a, v), order=1)
    check_grads(lambda x, v: x.at[idx].multiply(v), (a, v), order=1)


def test_grads_with_traced_indices():
    a = _array((4, 3))
    check_grads(lambda x, i: x[i], (a, fnp.asarray(-1)), order=2)
    check_grads(lambda x, i: x[:, i], (a, fnp.asarray(np.array([2, 0, 2]))), order=2)
    check_grads(lambda x, i, v: x.at[i].add(v), (a, fnp.asarray(np.array([1, 1])),
                                                   _array((2, 3), 1)), order=1)


def test_grad_of_repeated_index_is_scatter_add():
    g = fg.grad(lambda x: x[np.array([0, 0, 2])].sum())(fnp.zeros(3))
    np.testing.assert_array_equal(np.asarray(g), [2.0, 0.0, 1.0])
    g = fg.grad(lambda v: fnp.zeros(3).at[np.array([0, 0])].add(v).sum())(fnp.ones(2))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 1.0])


def test_grad_with_concrete_boolean_mask():
    a = np.array([-1.0, 2.0, 3.0, -4.0], np.float32)
    g = fg.grad(lambda x: (x[x > 0] ** 2).sum())(fnp.asarray(a))
    np.testing.assert_allclose(np.asarray(g), [0.0, 4.0, 6.0, 0.0])


# --- tracing: traced indices, IR, errors ----------------------------------------------------

def test_traced_scalar_index_uses_dynamic_slice():
    a = _array((3, 4))
    closed = fg.make_jaxpr(lambda x, i: x[i, 1:])(a, 1)
    text = str(closed)
    assert "dynamic_slice" in text and "gather" not in text
    for i in (0, 2, -1, -3):
        np.testing.assert_array_equal(np.asarray(jaxpr_as_fun(closed)(a, i)[0]), a[i, 1:])


def test_traced_index_update():
    a = _array((3, 4))
    closed = fg.make_jaxpr(lambda x, i: x.at[i].set(0.0))(a, 1)
    want = a.copy()
    want[-1] = 0.0
    np.testing.assert_array_equal(np.asarray(jaxpr_as_fun(closed)(a, -1)[0]), want)


@pytest.mark.parametrize("idx", [(1,), (slice(None, None, -1), None, 2), (Ellipsis, 0),
                                 (slice(1, 3), slice(None, None, 2)), (None,), (-1, -2)],
                         ids=str)
def test_basic_indexing_is_slices_not_gather(idx):
    a = _array((3, 4))
    text = str(fg.make_jaxpr(lambda x: x[idx])(a))
    assert "gather" not in text and "dynamic" not in text
    if all(not isinstance(i, slice) or i.step in (None, 1, -1) for i in idx):
        text = str(fg.make_jaxpr(lambda x: x.at[idx].add(1.0))(a))
        assert "scatter" not in text and "gather" not in text


def test_vmap_of_indexing_matches_a_loop():
    xs = _array((5, 3, 4))
    rows = np.array([0, 2, -1, 1, 0])
    cols = np.random.default_rng(0).integers(-4, 4, size=(5, 2))
    cases = [
        (lambda x, i, j: x[i, 1:], lambda k: xs[k][rows[k], 1:]),
        (lambda x, i, j: x[:, j], lambda k: xs[k][:, cols[k]]),
        (lambda x, i, j: x.at[i, j].add(1.0), None),
        (lambda x, i, j: fs.argsort(x[0]), lambda k: np.argsort(xs[k][0], kind="stable")),
    ]
    for f, ref in cases:
        got = np.asarray(fg.vmap(f)(xs, rows, cols))
        for k in range(5):
            want = np.asarray(f(fnp.asarray(xs[k]), rows[k], cols[k])) if ref is None else ref(k)
            np.testing.assert_allclose(got[k], want)


def test_jit_matches_eager():
    def f(x, i, j):
        return (x[i, ::-1], x[:, j], x.at[j, i].add(1.0), x.at[::2, j].set(0.0),
                fs.argsort(x, 1), fs.nonzero(x > 0, size=5), fi.take(x, j, axis=1))
    args = (fnp.asarray(_array((3, 4, 2))), -1, np.array([0, 3, 3, -1]))
    for got, want in zip(fg.tree_util.tree_leaves(fg.jit(f)(*args)),
                         fg.tree_util.tree_leaves(f(*args))):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_traced_boolean_mask_is_a_clear_error():
    a = _array((3,))
    with pytest.raises(errors.ConcretizationTypeError) as e:
        fg.make_jaxpr(lambda x: x[x > 0])(a)
    msg = str(e.value)
    assert "(3,)" in msg and "fnp.where(mask, x, 0)" in msg and "size=" in msg
    assert "test_numpy_indexing.py" in msg


def test_nonzero_with_size_traces():
    m = np.array([[0, 1, 0], [2, 0, 3]], np.int32)
    closed = fg.make_jaxpr(lambda m: fs.nonzero(m, size=4, fill_value=-1))(m)
    got = [np.asarray(r) for r in jaxpr_as_fun(closed)(m)]
    np.testing.assert_array_equal(got, [[0, 1, 1, -1], [1, 0, 2, -1]])
    with pytest.raises(errors.ConcretizationTypeError, match="size="):
        fg.make_jaxpr(fs.nonzero)(m)


def test_index_errors():
    x = fnp.zeros((2, 3))
    # a static int out of range clamps (reads) or is dropped (updates), as in JAX (issue 13);
    # only an axis of size 0 has nothing to clamp to
    with pytest.raises(IndexError, match=r"index 0 is out of bounds for axis 1 with size 0") as e:
        fnp.zeros((2, 0))[0, 0]
    assert isinstance(e.value, errors.FuncgradError) and "(2, 0)" in str(e.value)
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(TypeError, match="integer or boolean"):
        x[1.0]
    with pytest.raises(TypeError, match="integer or boolean"):
        x[np.array([0.0, 1.0])]
    with pytest.raises(IndexError, match="boolean index"):
        x[np.array([True, False, True])]
    with pytest.raises(IndexError, match="broadcast"):
        x[np.array([0, 1]), np.array([0, 1, 2])]
    with pytest.raises(IndexError, match="static"):
        fg.make_jaxpr(lambda x, i: x[i:])(x, 1)


# --- index functions ------------------------------------------------------------------------

@st.composite
def take_cases(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    axis = draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    n = int(np.prod(shape)) if axis is None else shape[axis]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    ishape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    return shape, axis, rng.integers(-n - 2, n + 2, size=ishape)


@given(take_cases())
def test_take_matches_numpy(case):
    shape, axis, idx = case
    a = _array(shape)
    n = a.size if axis is None else shape[axis]
    np.testing.assert_array_equal(np.asarray(fi.take(a, idx, axis=axis, mode="wrap")),
                                  np.take(a, idx, axis=axis, mode="wrap"))
    np.testing.assert_array_equal(np.asarray(fi.take(a, idx, axis=axis, mode="clip")),
                                  np.take(a, idx, axis=axis, mode="clip"))
    got = np.asarray(fi.take(a, idx, axis=axis))
    valid = (idx >= -n) & (idx < n)
    want = np.take(a, np.where(valid, idx, 0), axis=axis)
    ax = 0 if axis is None else axis % len(shape)
    mask = valid.reshape((1,) * (0 if axis is None else ax) + idx.shape
                         + (1,) * (want.ndim - idx.ndim - (0 if axis is None else ax)))
    np.testing.assert_array_equal(got, np.where(mask, want, np.nan))


@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_take_along_axis_and_put_along_axis(shape, data):
    a = _array(tuple(shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    ishape = [data.draw(st.sampled_from([1, s])) for s in shape]
    ishape[axis] = data.draw(st.integers(1, 3))
    idx = rng.integers(-shape[axis], shape[axis], size=ishape)
    np.testing.assert_array_equal(np.asarray(fi.take_along_axis(a, idx, axis)),
                                  np.take_along_axis(a, idx, axis))
    want = a.copy()
    np.put_along_axis(want, idx, 7.0, axis)
    np.testing.assert_array_equal(
        np.asarray(fi.put_along_axis(a, idx, 7.0, axis, inplace=False)), want)


@given(st.lists(st.integers(0, 4), min_size=1, max_size=3), st.data())
def test_sort_and_argsort_match_numpy(shape, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    a = rng.integers(-2, 3, size=shape).astype(np.float32)  # many ties
    if data.draw(st.booleans()) and a.size:
        a.flat[0] = np.nan
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    np.testing.assert_array_equal(np.asarray(fs.sort(a, axis)), np.sort(a, axis))
    np.testing.assert_array_equal(np.asarray(fs.argsort(a, axis)),
                                  np.argsort(a, axis, kind="stable"))
    b = np.nan_to_num(a)
    np.testing.assert_array_equal(np.asarray(fs.argsort(b, axis, descending=True)),
                                  np.argsort(-b, axis, kind="stable"))
    np.testing.assert_array_equal(np.asarray(fs.sort(b, axis, descending=True)),
                                  -np.sort(-b, axis))


def test_sort_gradient():
    check_grads(lambda x: fs.sort(x, axis=0), (_array((4, 3)),), order=2)
    check_grads(lambda x: fi.take_along_axis(x, fs.argsort(x, 1), 1), (_array((2, 5)),))


@given(st.lists(st.integers(0, 4), min_size=1, max_size=3), st.integers(0, 8), st.data())
def test_nonzero_family_matches_numpy(shape, size, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    a = rng.integers(0, 2, size=shape) * rng.integers(1, 5, size=shape)
    want = np.nonzero(a)
    for got, w in zip(fs.nonzero(a), want):
        np.testing.assert_array_equal(np.asarray(got), w)
    k = min(size, len(want[0]))
    for got, w in zip(fs.nonzero(a, size=size, fill_value=-1), want):
        np.testing.assert_array_equal(np.asarray(got), np.r_[w[:k], [-1] * (size - k)])
    np.testing.assert_array_equal(np.asarray(fs.argwhere(a)), np.argwhere(a))
    np.testing.assert_array_equal(np.asarray(fs.flatnonzero(a)), np.flatnonzero(a))
    assert fs.argwhere(a, size=size).shape == (size, len(shape))


@given(st.lists(st.integers(-3, 3), max_size=6), st.lists(st.integers(-4, 4), max_size=5),
       st.sampled_from(["left", "right"]))
def test_searchsorted_matches_numpy(a, v, side):
    a = np.sort(np.asarray(a, np.float32))
    v = np.asarray(v, np.float32)
    np.testing.assert_array_equal(np.asarray(fs.searchsorted(a, v, side)),
                                  np.searchsorted(a, v, side))
    a, v = np.r_[a, np.nan], np.r_[v, np.nan]
    np.testing.assert_array_equal(np.asarray(fs.searchsorted(a, v, side)),
                                  np.searchsorted(a, v, side))


@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_unravel_and_ravel_multi_index(shape, data):
    n = int(np.prod(shape))
    flat = np.asarray(data.draw(st.lists(st.integers(0, n - 1), max_size=5)), np.int32)
    coords = fs.unravel_index(flat, tuple(shape))
    for got, w in zip(coords, np.unravel_index(flat, shape)):
        np.testing.assert_array_equal(np.asarray(got), w)
    for order in "CF":
        np.testing.assert_array_equal(
            np.asarray(fs.ravel_multi_index(coords, shape, order=order)),
            np.ravel_multi_index(np.unravel_index(flat, shape), shape, order=order))


def test_unravel_clamps_and_ravel_modes():
    got = fs.unravel_index(np.array([-1, 100]), (2, 3))
    np.testing.assert_array_equal([np.asarray(g) for g in got], [[1, 1], [2, 2]])
    idx = (np.array([3, -1]), np.array([1, 4]))
    np.testing.assert_array_equal(np.asarray(fs.ravel_multi_index(idx, (2, 3), mode="wrap")),
                                  np.ravel_multi_index(idx, (2, 3), mode="wrap"))
    np.testing.assert_array_equal(np.asarray(fs.ravel_multi_index(idx, (2, 3), mode="clip")),
                                  np.ravel_multi_index(idx, (2, 3), mode="clip"))
    with pytest.raises(ValueError, match="invalid entry"):
        fs.ravel_multi_index(idx, (2, 3))


def test_static_index_helpers():
    for got, want in [(fs.tril_indices(4, -1, 3), np.tril_indices(4, -1, 3)),
                      (fs.triu_indices(3, 1), np.triu_indices(3, 1)),
                      (fs.diag_indices(3, 3), np.diag_indices(3, 3)),
                      (fs.tril_indices_from(np.zeros((2, 5)), 1), np.tril_indices(2, 1, 5)),
                      (fs.triu_indices_from(np.zeros((3, 3))), np.triu_indices(3)),
                      (fs.diag_indices_from(np.zeros((2, 2))), np.diag_indices(2))]:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == np.int32
            np.testing.assert_array_equal(np.asarray(g), w)
    a = _array((3, 4))
    ix = fs.ix_(np.array([2, 0]), [True, False, True, True])
    np.testing.assert_array_equal(np.asarray(fnp.asarray(a)[ix]),
                                  a[np.ix_([2, 0], [True, False, True, True])])


def test_public_names_are_exported_by_funcgrad_numpy():
    for mod in (fi, fs):
        for name in mod.__all__:
            # the package exports each function behind its API boundary (errors.api_boundary)
            assert inspect.unwrap(getattr(fnp, name)) is getattr(mod, name), name
    assert "getitem" not in fi.__all__


def test_take_fill_value_must_fit_the_dtype():
    x = fnp.arange(4.0)
    np.testing.assert_array_equal(np.asarray(fnp.take(x, fnp.array([1, 9]), fill_value=-1.0)),
                                  [1.0, -1.0])
    for bad in (1j, "a"):
        with pytest.raises(errors.FuncgradTypeError, match="take: fill_value"):
            fnp.take(x, fnp.array([1, 9]), fill_value=bad)
