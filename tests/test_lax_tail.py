"""The lax names of issue 28's long tail: the conveniences of lax/composites.py, the generic
`reduce` and `associative_scan` (lax/associative_scan.py) and the bit primitives of
lax/bit_ops.py, against NumPy and plain Python, with derivatives (check_grads in float64),
vmap against a loop and jit against eager."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.numpy as fnp

R = np.random.default_rng(1)
M34 = R.normal(size=(3, 4)).astype(np.float32)
V6 = R.normal(size=6).astype(np.float32)
DN = lax.ScatterDimensionNumbers((), (0,), (0,))


# --- composites -------------------------------------------------------------------------------
def test_select_broadcast_and_shapes():
    pred = M34 > 0
    check_all(lambda a, b: lax.select(pred, a, b), (M34, -M34), np.where(pred, M34, -M34),
              grad=(0, 1))
    check_all(lambda x: lax.broadcast(x, (2, 1)), (V6,), np.broadcast_to(V6, (2, 1, 6)),
              grad=(0,))
    assert lax.broadcast_shapes((2, 1), (3,), ()) == (2, 3)
    with pytest.raises(ValueError, match="incompatible"):
        lax.broadcast_shapes((2,), (3,))
    assert lax.broadcast_to_rank(V6, 3).shape == (1, 1, 6)
    close(lax.broadcast_like(V6[:4], M34), np.broadcast_to(V6[:4], (3, 4)))
    x = np.zeros((2, 3, 4, 5))
    assert lax.collapse(x, 1).shape == (2, 60) and lax.collapse(x, 0, 2).shape == (6, 4, 5)
    assert lax.collapse(x, -2, -1).shape == x.shape
    assert lax.empty((2, 3), np.float32).shape == (2, 3)
    assert lax.dtype(1.0) == np.float32 and lax.dtype(np.ones(2, np.int8)) == np.int8
    np.testing.assert_array_equal(lax.shape_as_value((2, 3)), [2, 3])


def test_index_in_dim_family():
    check_all(lambda x: lax.index_in_dim(x, -1, 1, keepdims=False), (M34,), M34[:, -1],
              grad=(0,))
    check_all(lambda x: lax.index_in_dim(x, 1), (M34,), M34[1:2], grad=(0,))
    with pytest.raises(IndexError, match="out of bounds"):
        lax.index_in_dim(M34, 3)
    check_all(lambda x, i: lax.dynamic_index_in_dim(x, i, 1, False), (M34, np.int32(-2)),
              M34[:, -2], grad=(0,))
    # the index batched too
    got = fg.vmap(lambda i: lax.dynamic_index_in_dim(M34, i, 0, False))(np.array([0, 2, -1]))
    close(got, M34[[0, 2, -1]])
    want = M34.copy()
    want[:, 2] = V6[:3]
    check_all(lambda x, u: lax.dynamic_update_index_in_dim(x, u, 2, 1), (M34, V6[:3]), want,
              grad=(0, 1))


def test_index_take_wraps_indices():
    x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    i0, i2 = np.array([0, 1, -1]), np.array([5, 2, 3])
    want = np.stack([x[a % 2, :, b % 4] for a, b in zip(i0, i2)])
    check_all(lambda x: lax.index_take(x, (i0, i2), (0, 2)), (x,), want, grad=(0,))


def test_split_tile_stack_unstack():
    check_all(lambda x: lax.split(x, (1, 0, 3), axis=1), (M34,), np.split(M34, [1, 1], 1),
              grad=(0,))
    with pytest.raises(ValueError, match="sum to"):
        lax.split(M34, (1, 2), axis=1)
    check_all(lambda x: lax.tile(x, (2, 3)), (M34,), np.tile(M34, (2, 3)), grad=(0,))
    check_all(lambda a, b: lax.stack([a, b], axis=-1), (M34, M34 * 2), np.stack(
        [M34, M34 * 2], -1), grad=(0, 1))
    check_all(lambda x: lax.unstack(x, axis=1), (M34,), tuple(M34.T), grad=(0,))


def test_scatter_sub_and_apply_follow_jax():
    idx = np.array([[1], [3], [1]])
    want = M34[0].copy()
    np.subtract.at(want, [1, 3, 1], V6[:3])
    check_all(lambda x, u: lax.scatter_sub(x, idx, u, DN), (M34[0], V6[:3]), want,
              grad=(0, 1))
    # applied once per index vector: twice at 1 (JAX's values)
    sq = M34[0].copy()
    sq[1], sq[3] = sq[1] ** 4, sq[3] ** 2
    check_all(lambda x: lax.scatter_apply(x, idx, lambda v: v * v, DN, update_shape=(3,)),
              (M34[0],), sq, grad=(0,), order=2)
    got = lax.scatter_apply(M34[0], idx, lambda v: v + 1, DN, update_shape=(3,),
                            unique_indices=True)
    close(got, M34[0] + np.array([0, 1, 0, 1], np.float32))  # one pass, as promised


# --- reduce and the bitwise reductions --------------------------------------------------------
@pytest.mark.parametrize("op,init,np_fn", [
    (lax.add, 0.0, np.sum), (lax.mul, 1.0, np.prod), (lax.max, -np.inf, np.max),
    (lax.min, np.inf, np.min)])
def test_reduce_monoids_become_reduce_primitives(op, init, np_fn):
    f = lambda x: lax.reduce(x, np.float32(init), op, (1,))
    check_all(f, (M34,), np_fn(M34, axis=1), grad=(0,))
    assert len(fg.make_jaxpr(f)(M34).jaxpr.eqns) == 1
    # an init that is no identity is combined once, as XLA's CPU reduction does
    close(lax.reduce(M34, np.float32(2.0), lax.add, (0, 1)), M34.sum() + 2, 1e-5, 1e-5)


def test_reduce_any_computation_as_a_tree():
    def argmax_pair(a, b):
        take = a[0] >= b[0]
        return (lax.select(take, a[0], b[0]), lax.select(take, a[1], b[1]))
    x = R.normal(size=(3, 7)).astype(np.float32)
    ids = np.broadcast_to(np.arange(7, dtype=np.int32), (3, 7))
    vals, args = lax.reduce((x, ids), (np.float32(-np.inf), np.int32(0)), argmax_pair, (1,))
    close(vals, x.max(1))
    close(args, x.argmax(1))
    soft = lambda a, b: fnp.logaddexp(a, b)  # not a single primitive: the tree path
    f = lambda x: lax.reduce(x, np.float32(-np.inf), soft, (0, 1))
    want = np.logaddexp.reduce(M34.ravel())
    check_all(f, (M34,), want, grad=(0,), order=2)
    check_all(lambda x: lax.reduce(x, np.float32(-np.inf), soft, (0,)), (M34,),
              np.logaddexp.reduce(M34, 0), grad=(0,))
    close(lax.reduce(np.zeros((2, 0), np.float32), np.float32(3.0), soft, (1,)),
          np.array([3.0, 3.0], np.float32))


@given(st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), min_size=0, max_size=9))
def test_bitwise_reductions_on_integers(vals):
    x = np.asarray(vals, np.int32)
    for name, ufunc in (("reduce_and", np.bitwise_and), ("reduce_or", np.bitwise_or),
                        ("reduce_xor", np.bitwise_xor)):
        assert int(getattr(lax, name)(x, (0,))) == int(ufunc.reduce(x))
    b = x % 2 == 1
    assert bool(lax.reduce_xor(b, (0,))) == bool(np.sum(b) % 2)


def test_reduce_xor_transforms():
    x = R.integers(0, 100, (4, 5)).astype(np.int32)
    check_all(lambda x: lax.reduce_xor(x, (1,)), (x,), np.bitwise_xor.reduce(x, 1),
              batch=(0,))


# --- associative_scan -------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
def test_associative_scan_matches_cumulative_ops(n):
    x = R.normal(size=(n, 3)).astype(np.float32)
    check_all(lambda x: lax.associative_scan(lax.add, x), (x,), np.cumsum(x, 0), grad=(0,))
    close(lax.associative_scan(lax.max, x, reverse=True, axis=0),
          np.maximum.accumulate(x[::-1], 0)[::-1])
    y = x.T.copy()
    check_all(lambda y: lax.associative_scan(lax.mul, y, axis=1), (y,), np.cumprod(y, 1),
              grad=(0,), rtol=1e-4)


def test_associative_scan_non_commutative_pytree():
    # 2x2 matrix products (associative, not commutative), as a pytree of four arrays
    ms = R.normal(size=(7, 2, 2)).astype(np.float32) * 0.7
    elems = {k: ms[:, i, j] for k, (i, j) in zip("abcd", [(0, 0), (0, 1), (1, 0), (1, 1)])}

    def matmul(x, y):
        return {"a": x["a"] * y["a"] + x["b"] * y["c"], "b": x["a"] * y["b"] + x["b"] * y["d"],
                "c": x["c"] * y["a"] + x["d"] * y["c"], "d": x["c"] * y["b"] + x["d"] * y["d"]}
    want, acc = [], np.eye(2, dtype=np.float32)
    for m in ms:
        acc = acc @ m
        want.append(acc)
    want = np.stack(want)
    got = lax.associative_scan(matmul, elems)
    close([got[k] for k in "abcd"], [want[:, 0, 0], want[:, 0, 1], want[:, 1, 0],
                                     want[:, 1, 1]], 1e-5, 1e-5)
    check_all(lambda a, b, c, d: lax.associative_scan(matmul, dict(a=a, b=b, c=c, d=d),
                                                      reverse=True),
              tuple(elems[k] for k in "abcd"), grad=(0, 1, 2, 3))


def test_associative_scan_depth_is_logarithmic_and_errors():
    jaxpr = fg.make_jaxpr(lambda x: lax.associative_scan(lax.add, x))(np.ones(64, np.float32))
    adds = sum(e.prim is lax.add_p for e in jaxpr.jaxpr.eqns)
    assert adds <= 2 * 6 + 2 * 6  # two combines per level (+ the interleaves), 6 levels
    with pytest.raises(Exception, match="one size along"):
        lax.associative_scan(lax.add, (np.ones(3), np.ones(4)))


# --- bit primitives ---------------------------------------------------------------------------
@given(st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), min_size=1, max_size=6),
       st.sampled_from(["int8", "uint8", "int32", "uint32", "int64", "uint64"]))
def test_clz_and_mulhi_match_python_integers(vals, dt):
    dt = np.dtype(dt)
    bits = 8 * dt.itemsize
    x = np.asarray([v % 2 ** bits for v in vals], np.uint64).astype(np.dtype(f"u{dt.itemsize}"))
    x = x.view(dt)
    y = x[::-1].copy()
    fg.config.update("enable_x64", bits == 64)
    got = np.asarray(lax.clz(x))
    hi = np.asarray(lax.mulhi(x, y))
    want = [bits - (int(v) % 2 ** bits).bit_length() for v in x]
    np.testing.assert_array_equal(got, want)
    wanthi = [(int(a) * int(b)) >> bits for a, b in zip(x, y)]
    assert [int(h) % 2 ** bits for h in hi] == [w % 2 ** bits for w in wanthi]


def test_clz_mulhi_batch_and_jit():
    x = R.integers(-1000, 1000, (3, 4)).astype(np.int32)
    check_all(lax.clz, (x,), batch=(0,))
    check_all(lax.mulhi, (x, x * 7919), batch=(0, 1))


def test_reduce_precision_rounds_like_float16():
    x = np.concatenate([R.normal(size=50) * 10.0 ** R.integers(-4, 5, 50),
                        [1 + 2 ** -11, 1 + 3 * 2 ** -11, 65504.0, 65520.0, 1e6, -1e6, 1e-7,
                         -1e-7, 0.0, np.inf, np.nan]]).astype(np.float32)
    got = np.asarray(lax.reduce_precision(x, 5, 10))
    with np.errstate(over="ignore"):
        h = x.astype(np.float16).astype(np.float32)
    normal = np.abs(h) >= 2.0 ** -14
    np.testing.assert_array_equal(got[normal], h[normal])  # ties to even included
    assert np.all(got[~normal & np.isfinite(x)] == 0)  # below float16's normals: zero
    assert np.isnan(got[-1]) and got[-2] == np.inf
    # with the source format itself it is the identity; the tangent is rounded too
    np.testing.assert_array_equal(lax.reduce_precision(x, 8, 23), x)
    t = fg.jvp(lambda v: lax.reduce_precision(v, 5, 2), (np.float32(1.0),),
               (np.float32(1.3),))[1]
    assert float(t) == 1.25
    check_all(lambda v: lax.reduce_precision(v, 5, 10), (M34,))


# --- convolution patches, local convolutions, ragged products ---------------------------------
def test_conv_patches_gather_every_window():
    x = R.normal(size=(2, 3, 5, 6)).astype(np.float32)
    p = np.asarray(lax.conv_general_dilated_patches(x, (2, 3), (1, 1), "VALID"))
    assert p.shape == (2, 3 * 6, 4, 4)
    for c in range(3):  # feature c * 6 + (i * 3 + j) reads x[:, c, h + i, w + j]
        for i in range(2):
            for j in range(3):
                np.testing.assert_array_equal(p[:, c * 6 + i * 3 + j], x[:, c, i:i + 4, j:j + 4])
    check_all(lambda x: lax.conv_general_dilated_patches(x, (2, 2), (2, 1), "SAME"), (x,),
              grad=(0,))


def test_conv_local_transforms():
    x = R.normal(size=(2, 3, 5, 6)).astype(np.float32)
    w = R.normal(size=(4, 3 * 6, 5, 6)).astype(np.float32)
    check_all(lambda x, w: lax.conv_general_dilated_local(x, w, (1, 1), "SAME", (2, 3)),
              (x, w), grad=(0, 1), rtol=1e-4, atol=1e-5)


def test_ragged_dot_against_a_loop_and_transforms():
    lhs = R.normal(size=(7, 3)).astype(np.float32)
    rhs = R.normal(size=(3, 3, 2)).astype(np.float32)
    sizes = np.array([2, 0, 5], np.int32)
    want = np.concatenate([lhs[:2] @ rhs[0], lhs[2:] @ rhs[2]])
    check_all(lambda a, b: lax.ragged_dot(a, b, sizes), (lhs, rhs), want, grad=(0, 1),
              rtol=1e-5, atol=1e-5)
    dn = lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [1], [])
    a, b = R.normal(size=(2, 7)).astype(np.float32), R.normal(size=(7, 4)).astype(np.float32)
    groups = np.array([3, 1, 3], np.int32)
    want = np.stack([a[:, s:e] @ b[s:e] for s, e in ((0, 3), (3, 4), (4, 7))])
    check_all(lambda a, b: lax.ragged_dot_general(a, b, groups, dn), (a, b), want, grad=(0, 1),
              rtol=1e-5, atol=1e-5)


# --- random bits, precision vocabulary --------------------------------------------------------
def test_rng_bit_generator_is_philox_and_pure():
    from funcgrad.lax.rng import _philox
    zero = [np.zeros(1, np.uint32)] * 4  # Random123's known answer for Philox-4x32-10
    assert [int(v[0]) for v in _philox(zero, zero[:2])] == [0x6627E8D5, 0xE169C58D,
                                                            0xBC57AC4C, 0x9B00DBD8]
    key = np.array([1, 2, 3, 4], np.uint32)
    new, bits = lax.rng_bit_generator(key, (2, 3))
    close(new, np.array([1, 2, 5, 4], np.uint32))
    close(fg.jit(lambda k: lax.rng_bit_generator(k, (2, 3))[1])(key), bits)
    b8 = np.asarray(lax.rng_bit_generator(key, (24,), np.uint8)[1])
    np.testing.assert_array_equal(b8, np.asarray(bits).ravel().view(np.uint8))
    keys = np.stack([key, key + 1])
    close(fg.vmap(lambda k: lax.rng_bit_generator(k, (3,))[1])(keys),
          np.stack([lax.rng_bit_generator(k, (3,))[1] for k in keys]))


def test_rng_uniform_draws_afresh_in_range():
    f = fg.jit(lambda a: lax.rng_uniform(a, a + 2.0, (2000,)))
    u1, u2 = np.asarray(f(np.float32(1.0))), np.asarray(f(np.float32(1.0)))
    assert not np.array_equal(u1, u2) and u1.min() >= 1.0 and u1.max() < 3.0
    assert abs(u1.mean() - 2.0) < 0.1
    b = np.asarray(fg.vmap(lambda a: lax.rng_uniform(a, a + 1.0, (500,)))(
        np.array([0.0, 10.0], np.float32)))
    assert b[0].max() < 1.0 and b[1].min() >= 10.0
    ints = np.asarray(lax.rng_uniform(np.int32(2), np.int32(5), (200,)))
    assert set(ints.tolist()) <= {2, 3, 4}
    t = fg.jvp(lambda a: lax.rng_uniform(a, np.float32(4.0), (3,)), (np.float32(1.0),),
               (np.float32(1.0),))
    close(t[1], (4.0 - np.asarray(t[0])) / 3.0, 1e-5, 1e-6)  # d/da of a + (b - a) u


def test_precision_vocabulary_is_accepted():
    x = np.ones((2, 2), np.float32)
    close(lax.dot(x, x, precision=lax.DotAlgorithmPreset.F32_F32_F32), x * 2)
    close(lax.dot(x, x, precision=lax.DotAlgorithm("float32", "float32", "float32")), x * 2)
    close(lax.exp(x, accuracy=lax.Tolerance(atol=1e-6)), np.exp(x))
    close(lax.exp(x, accuracy=lax.AccuracyMode.HIGHEST), np.exp(x))
    with pytest.raises(ValueError, match="at least one"):
        lax.Tolerance()
    assert lax.PrecisionLike is not None and lax.DotDimensionNumbers is not None
    assert lax.ConvGeneralDilatedDimensionNumbers is not None
