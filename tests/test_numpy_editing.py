"""funcgrad.numpy's editing, index tricks and function application (issue 28's long tail:
numpy/editing.py, index_tricks.py, functional.py) against NumPy (JAX's values where JAX
differs), with derivatives, vmap against a loop and jit against eager."""

import numpy as np
import pytest
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.numpy as fnp

R = np.random.default_rng(5)
A = np.arange(12).reshape(3, 4)
M34 = R.normal(size=(3, 4)).astype(np.float32)


# --- index tricks -----------------------------------------------------------------------------
def test_mgrid_ogrid():
    close(fnp.mgrid[0:3, 0:2], np.mgrid[0:3, 0:2])
    close(fnp.mgrid[-1:1:5j], np.mgrid[-1:1:5j].astype(np.float32))
    close(fnp.mgrid[0:1:3j, 0:4:2], np.mgrid[0:1:3j, 0:4:2].astype(np.float32))
    close(fnp.ogrid[0:3, 1:2:3j], [g.astype(np.float32) for g in np.ogrid[0:3, 1:2:3j]])
    assert fnp.mgrid[0:3].dtype == np.int32


@pytest.mark.parametrize("key", [(slice(1, 4), 0, [7, 8]), ("0,2", [1, 2], [3, 4]),
                                 ("-1,2,0", [1, 2], [3, 4]), (slice(-1, 1, 5j),),
                                 ("1", np.ones((2, 2)), np.zeros((2, 1)))])
def test_r_matches_numpy(key):
    close(fnp.r_[key], np.r_[key].astype(np.asarray(fnp.r_[key]).dtype))


def test_c_and_traced_entries():
    close(fnp.c_[np.array([1, 2]), np.array([3, 4])], np.c_[[1, 2], [3, 4]])
    close(fnp.c_[np.ones((2, 2)), [5, 6]], np.c_[np.ones((2, 2)), [5, 6]].astype(np.float32))
    v = R.normal(size=3).astype(np.float32)
    check_all(lambda x: fnp.r_[x, 0.0, x * 2], (v,), np.r_[v, 0.0, v * 2], grad=(0,))
    check_all(lambda x: fnp.c_[x, x[::-1]], (v,), np.c_[v, v[::-1]], grad=(0,))
    with pytest.raises(ValueError, match="matrix"):
        fnp.r_["r", [1, 2]]
    assert fnp.s_[1:2] == np.s_[1:2] and fnp.index_exp[1:2] == np.index_exp[1:2]


def test_fill_diagonal_and_mask_indices():
    for shape, wrap in [((3, 4), False), ((7, 3), True), ((7, 3), False), ((3, 3, 3), False)]:
        want = np.zeros(shape)
        np.fill_diagonal(want, [1, 2], wrap=wrap)
        close(fnp.fill_diagonal(fnp.zeros(shape), fnp.array([1.0, 2.0]), wrap=wrap,
                                inplace=False), want.astype(np.float32))
    check_all(lambda a, v: fnp.fill_diagonal(a, v, inplace=False), (M34, np.float32(2.5)),
              grad=(0, 1))
    with pytest.raises(ValueError, match="immutable"):
        fnp.fill_diagonal(M34, 1.0)
    close(fnp.mask_indices(4, fnp.triu, 1), np.mask_indices(4, np.triu, 1))


# --- vectorize and friends --------------------------------------------------------------------
def test_vectorize_scalar_and_signature():
    f = fnp.vectorize(lambda a, b: a * 2 + b)
    check_all(f, (M34[:, :1], M34[0]), M34[:, :1] * 2 + M34[0], grad=(0, 1))
    norm = fnp.vectorize(lambda v: fnp.sqrt(v @ v), signature="(n)->()")
    x = R.normal(size=(2, 3, 4)).astype(np.float32)
    check_all(norm, (x,), np.linalg.norm(x, axis=-1), grad=(0,))
    mv = fnp.vectorize(lambda m, v: m @ v, signature="(n,k),(k)->(n)")
    close(mv(np.ones((5, 2, 3)), np.ones(3)), np.full((5, 2), 3.0))
    assert mv(np.ones((2, 3)), np.ones((4, 3))).shape == (4, 2)
    two = fnp.vectorize(lambda v: (v.sum(), v * 2), signature="(n)->(),(n)")
    s, d = two(x)
    close((s, d), (x.sum(-1), x * 2), 1e-5, 1e-5)
    ex = fnp.vectorize(lambda x, k: x ** k, excluded={1})
    close(ex(M34, 3), M34 ** 3, 1e-5, 1e-5)
    with pytest.raises(ValueError, match="core dimension"):
        mv(np.ones((2, 3)), np.ones(4))
    with pytest.raises(ValueError, match="gufunc signature"):
        fnp.vectorize(lambda v: v, signature="(n->()")(x)


def test_apply_along_and_over_axes():
    f = lambda v: fnp.stack([v.sum(), (v * v).max()])
    check_all(lambda a: fnp.apply_along_axis(f, 0, a), (M34,),
              np.apply_along_axis(lambda v: np.stack([v.sum(), (v * v).max()]), 0, M34),
              grad=(0,))
    x = R.normal(size=(2, 3, 4)).astype(np.float32)
    close(fnp.apply_along_axis(lambda v, s: v.sum() * s, 1, x, 2.0), x.sum(1) * 2, 1e-5, 1e-5)
    close(fnp.apply_over_axes(fnp.sum, x, [0, 2]), np.apply_over_axes(np.sum, x, [0, 2]),
          1e-5, 1e-5)


def test_piecewise_and_fromfunction():
    x = np.array([-1.0, 0.0, 1.0, 2.0], np.float32)
    conds = [np.array([True, False, True, False]), np.array([True, True, False, False])]
    funcs = [lambda v: v * 10, lambda v: v * 100, -1.0]
    close(fnp.piecewise(x, conds, funcs), np.piecewise(x, conds, funcs))
    check_all(lambda x: fnp.piecewise(x, [x < 0, x > 1], [lambda v: v * v, fnp.sin, 3.0]),
              (np.array([-1.5, 0.5, 1.5, -0.2], np.float32),), grad=(0,))
    close(fnp.fromfunction(lambda i, j: i + 10 * j, (2, 3), dtype=int),
          np.fromfunction(lambda i, j: i + 10 * j, (2, 3), dtype=int))


# --- deleting, inserting, choosing ------------------------------------------------------------
@pytest.mark.parametrize("obj,axis", [([0, -1], 1), (slice(1, None, 2), None),
                                      ([True, False, True], 0), (2, 0)])
def test_delete_matches_numpy(obj, axis):
    close(fnp.delete(A, obj, axis=axis), np.delete(A, obj, axis=axis))


def test_delete_traced_unique_indices_and_transforms():
    f = fg.jit(lambda x, i: fnp.delete(x, i, assume_unique_indices=True))
    close(f(np.arange(6.0), np.array([1, 4])), np.delete(np.arange(6.0), [1, 4]))
    check_all(lambda x: fnp.delete(x, [1, 2], axis=1), (M34,), np.delete(M34, [1, 2], 1),
              grad=(0,))


@pytest.mark.parametrize("obj,vals,axis", [
    (1, [10, 20, 30, 40], 0), (1, [[10], [20], [30]], 1), (1, [10, 20, 30], 1),
    ([1, 1, 3], [7, 8, 9], 1), (2, 9, None), ([0, 4], [5, 6], 1), (slice(1, 3), 0, 1),
    (-1, [1, 2, 3], 1), ([2], [[1], [2], [3]], 1), ([1, 2], [[1, 2], [3, 4], [5, 6]], 1)])
def test_insert_matches_numpy(obj, vals, axis):
    close(fnp.insert(A, obj, vals, axis=axis), np.insert(A, obj, vals, axis=axis))


def test_insert_select_choose_transforms():
    v = R.normal(size=3).astype(np.float32)
    check_all(lambda x, v: fnp.insert(x, [1, 1, 3], v, axis=1), (M34, v),
              np.insert(M34, [1, 1, 3], v, axis=1), grad=(0, 1))
    check_all(lambda x: fnp.select([x < 0, x > 1], [x * x, fnp.sin(x)], default=2.0), (M34,),
              np.select([M34 < 0, M34 > 1], [M34 * M34, np.sin(M34)], 2.0), grad=(0,))
    c = np.array([[0, 1, 2, 0], [1, 2, 0, 1], [2, 0, 1, 2]])
    ch = [np.array([1, 2, 3, 4]), 99, np.array([[10], [20], [30]])]
    close(fnp.choose(c, ch), np.choose(c, ch))
    close(fnp.choose(c + 2, ch, mode="wrap"), np.choose(c + 2, ch, mode="wrap"))
    close(fnp.choose(c - 1, ch, mode="clip"), np.choose(c - 1, ch, mode="clip"))
    with pytest.raises(ValueError, match="invalid entry"):
        fnp.choose(c + 1, ch)
    check_all(lambda a, b: fnp.choose(c[0], [a, b], mode="clip"), (M34[0], M34[1]),
              np.choose(c[0], [M34[0], M34[1]], mode="clip"), grad=(0, 1))


def test_compress_extract_place_put():
    close(fnp.compress([True, False, True], A, axis=1), np.compress([True, False, True], A, 1))
    close(fnp.compress([True, False], A, axis=0), np.compress([True, False], A, 0))
    with pytest.raises(IndexError, match="out of bounds"):
        fnp.compress([True, False, True, True], np.arange(3))
    f = fg.jit(lambda c, x: fnp.compress(c, x, size=4, fill_value=-1.0))
    close(f(np.array([1, 0, 1]), np.arange(3.0)), np.array([0.0, 2.0, -1.0, -1.0]))
    close(fnp.extract(A % 3 == 0, A), np.extract(A % 3 == 0, A))
    want = np.zeros(5)
    np.place(want, [1, 0, 1, 1, 1], [5.0, 6.0])
    close(fnp.place(np.zeros(5), np.array([1, 0, 1, 1, 1]), np.array([5.0, 6.0]),
                    inplace=False), want)
    want = np.zeros(5)
    np.put(want, [0, 7], [1.0, 2.0], mode="wrap")
    close(fnp.put(np.zeros(5), np.array([0, 7]), np.array([1.0, 2.0]), mode="wrap",
                  inplace=False), want)
    # mode=None: JAX's, the index clamps into range
    close(fnp.put(np.zeros(5), np.array([0, 7]), np.array([1.0, 2.0]), inplace=False),
          np.array([1.0, 0, 0, 0, 2.0]))
    check_all(lambda x, v: fnp.put(x, np.array([1, 5]), v, mode="clip", inplace=False),
              (M34, M34[0, :2]), grad=(0, 1))
    check_all(lambda x, v: fnp.place(x, M34 > 0, v, inplace=False), (M34, M34[1]),
              grad=(0, 1))


# --- shapes and sorting -----------------------------------------------------------------------
def test_resize_rollaxis_block():
    close(fnp.resize(np.arange(3), (2, 4)), np.resize(np.arange(3), (2, 4)))
    x = np.ones((2, 3, 4, 5))
    for axis, start in [(3, 1), (0, 3), (2, 0), (-1, -2)]:
        assert fnp.rollaxis(x, axis, start).shape == np.rollaxis(x, axis, start).shape
    b = [[np.eye(2), np.zeros((2, 1))], [np.ones((1, 3))]]
    close(fnp.block(b), np.block(b))
    close(fnp.block([np.array([1, 2]), 3]), np.block([np.array([1, 2]), 3]))
    check_all(lambda a, b: fnp.block([[a, b], [b, a]]), (M34, M34 * 2),
              np.block([[M34, M34 * 2], [M34 * 2, M34]]), grad=(0, 1))
    with pytest.raises(ValueError, match="depths"):
        fnp.block([[1, 2], 3])


def test_partition_and_argpartition_partition():
    x = R.normal(size=(4, 9)).astype(np.float32)
    for k in (0, 4, -1):
        p = np.asarray(fnp.partition(x, k, axis=1))
        ref = np.sort(x, 1)[:, k]
        np.testing.assert_array_equal(p[:, k], ref)
        assert np.all(p[:, :k % 9] <= ref[:, None]) and np.all(p[:, k % 9:] >= ref[:, None])
        i = np.asarray(fnp.argpartition(x, k, axis=1))
        np.testing.assert_array_equal(np.take_along_axis(x, i, 1)[:, k], ref)
    check_all(lambda x: fnp.partition(x, 2), (x,), grad=(0,))


def test_lexsort_and_sort_complex():
    k1, k2 = R.integers(0, 3, 10), R.integers(0, 3, 10)
    close(fnp.lexsort((k1, k2)), np.lexsort((k1, k2)))
    ks = R.integers(0, 3, (2, 3, 5))
    close(fnp.lexsort(ks, axis=1), np.lexsort(ks, axis=1))
    z = np.array([1 + 2j, 1 - 1j, 0 + 5j, 1 + 0j], np.complex64)
    close(fnp.sort_complex(z), np.sort_complex(z))
    close(fnp.sort_complex(np.array([3.0, 1.0])), np.array([1, 3], np.complex64))


def test_trim_zeros_packbits_unpackbits():
    for trim in ("fb", "f", "b"):
        close(fnp.trim_zeros(np.array([0, 0, 1, 2, 0]), trim),
              np.trim_zeros(np.array([0, 0, 1, 2, 0]), trim))
    close(fnp.trim_zeros(np.zeros(3)), np.trim_zeros(np.zeros(3)))
    z = np.array([[0, 0, 0], [0, 1, 0]])
    close(fnp.trim_zeros(z, axis=None), np.trim_zeros(z, axis=None))
    with pytest.raises(Exception, match="traced"):
        fg.jit(fnp.trim_zeros)(np.array([0, 1]))
    bits = R.integers(0, 2, (3, 11))
    for axis in (None, 0, 1):
        for order in ("big", "little"):
            p = np.packbits(bits, axis=axis, bitorder=order)
            close(fnp.packbits(bits, axis=axis, bitorder=order), p)
            close(fnp.unpackbits(p, axis=axis, bitorder=order),
                  np.unpackbits(p, axis=axis, bitorder=order))
            close(fnp.unpackbits(p, axis=axis, count=-3, bitorder=order),
                  np.unpackbits(p, axis=axis, count=-3, bitorder=order))
    check_all(lambda b: fnp.unpackbits(fnp.packbits(b, axis=1), axis=1, count=11),
              (bits.astype(np.uint8),), batch=(0,))


def test_matvec_vecmat_geomspace_nancumulative():
    m = (R.normal(size=(2, 3, 4)) + 1j * R.normal(size=(2, 3, 4))).astype(np.complex64)
    v = (R.normal(size=4) - 1j).astype(np.complex64)
    close(fnp.matvec(m, v), np.matvec(m, v), 1e-5, 1e-5)
    close(fnp.vecmat(v[:3], m), np.vecmat(v[:3], m), 1e-5, 1e-5)
    check_all(fnp.matvec, (M34, M34[0]), M34 @ M34[0], grad=(0, 1))
    check_all(fnp.vecmat, (M34[:, 0], M34), M34[:, 0] @ M34, grad=(0, 1))
    close(fnp.geomspace(1.0, 1000.0, 4), np.geomspace(1, 1000, 4).astype(np.float32), 1e-5)
    close(fnp.geomspace(-1.0, -1000.0, 5, endpoint=False),
          np.geomspace(-1, -1000, 5, endpoint=False).astype(np.float32), 1e-5)
    close(fnp.geomspace(1 + 1j, 10 + 10j, 5), np.geomspace(1 + 1j, 10 + 10j, 5), 1e-5)
    check_all(lambda a, b: fnp.geomspace(a, b, 6), (np.float32(2.0), np.float32(50.0)),
              np.geomspace(2, 50, 6), grad=(0, 1), rtol=1e-5)
    x = np.array([[1.0, np.nan], [2.0, 3.0], [np.nan, 4.0]], np.float32)
    close(fnp.nancumsum(x, axis=0), np.nancumsum(x, axis=0))
    close(fnp.nancumprod(x), np.nancumprod(x))
    check_all(lambda x: fnp.nancumprod(x, axis=1), (M34,), np.nancumprod(M34, 1), grad=(0,))
