"""funcgrad.random: JAX's Threefry-2x32 streams bit for bit, sampler statistics, transforms.

The reference values below are facts computed once with JAX 0.10.2 (jaxlib 0.10.2, CPU,
default `jax_threefry_partitionable=True`) by running the same calls on `jax.random`; JAX is
not needed to run these tests.
"""

import math

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import random as r
from funcgrad.errors import FuncgradTypeError, FuncgradValueError

K0, K42 = r.PRNGKey(0), r.PRNGKey(42)
P5 = [0.1, 0.2, 0.3, 0.15, 0.25]

CASES = {
    "key0": lambda: r.PRNGKey(0),
    "key42": lambda: r.PRNGKey(42),
    "key_neg1": lambda: r.PRNGKey(-1),
    "key_big": lambda: r.PRNGKey(2**40 + 5),
    "key_i32max": lambda: r.key_data(r.key(2**31 - 1)),  # typed key: its words
    "split0": lambda: r.split(K0),
    "split42_3": lambda: r.split(K42, 3),
    "split_shape": lambda: r.split(K42, (2, 3)),
    "fold0_7": lambda: r.fold_in(K0, 7),
    "fold42_big": lambda: r.fold_in(K42, 2**31 + 3),
    "fold42_arr": lambda: r.fold_in(K42, fnp.int32(-5)),
    "bits5": lambda: r.bits(K0, (5,)),
    "bits23": lambda: r.bits(K42, (2, 3)),
    "bits_u8": lambda: r.bits(K42, (6,), fnp.uint8),
    "bits_u16": lambda: r.bits(K42, (6,), fnp.uint16),
    "bits_scalar": lambda: r.bits(K42),
    "uniform7": lambda: r.uniform(K0, (7,)),
    "uniform_scalar": lambda: r.uniform(K42),
    "uniform_range": lambda: r.uniform(K42, (2, 3), minval=-2.0, maxval=5.0),
    "uniform_arr_bounds": lambda: r.uniform(K42, (2, 3), minval=fnp.array([0., 1., 2.]),
                                            maxval=fnp.array([1., 3., 10.])),
    "uniform_f16": lambda: r.uniform(K42, (5,), fnp.float16),
    "randint": lambda: r.randint(K0, (8,), 0, 10),
    "randint_neg": lambda: r.randint(K42, (6,), -100, 100),
    "randint_full": lambda: r.randint(K42, (6,), -2**31, 2**31 - 1),
    "randint_empty": lambda: r.randint(K42, (4,), 5, 5),
    "randint_u8": lambda: r.randint(K42, (6,), 0, 256, fnp.uint8),
    "randint_i8": lambda: r.randint(K42, (6,), -128, 127, fnp.int8),
    "randint_arr": lambda: r.randint(K42, (2, 3), fnp.array([0, 10, 100]),
                                     fnp.array([5, 20, 1000])),
    "bernoulli": lambda: r.bernoulli(K0, 0.3, (10,)),
    "bernoulli_arr": lambda: r.bernoulli(K42, fnp.array([0.1, 0.5, 0.9, 0.99])),
    "perm10": lambda: r.permutation(K0, 10),
    "perm_arr": lambda: r.permutation(K42, fnp.arange(12).reshape(4, 3)),
    "perm_axis1": lambda: r.permutation(K42, fnp.arange(12).reshape(3, 4), axis=1),
    "perm_indep": lambda: r.permutation(K42, fnp.arange(12).reshape(3, 4), axis=1,
                                        independent=True),
    "perm_big": lambda: r.permutation(K42, 5000)[:20],  # two sort rounds
    "normal6": lambda: r.normal(K0, (6,)),
    "normal23": lambda: r.normal(K42, (2, 3)),
    "trunc": lambda: r.truncated_normal(K0, -1.0, 2.0, (6,)),
    "trunc_arr": lambda: r.truncated_normal(K42, fnp.array([-2., 0., 1.]), 3.0),
    "choice_r": lambda: r.choice(K0, 10, (5,)),
    "choice_nr": lambda: r.choice(K42, 10, (4,), replace=False),
    "choice_arr": lambda: r.choice(K42, fnp.arange(20).reshape(5, 4) * 10, (3,), axis=0),
    "choice_p": lambda: r.choice(K42, 5, (8,), p=fnp.array(P5)),
    "choice_p_nr": lambda: r.choice(K42, 5, (3,), replace=False, p=fnp.array(P5)),
    "categorical": lambda: r.categorical(K0, fnp.log(fnp.array([[0.1, 0.2, 0.7],
                                                               [0.5, 0.25, 0.25]]))),
    "categorical_shape": lambda: r.categorical(K42, fnp.array([0., 1., 2., 3.]), shape=(2, 5)),
    "categorical_axis0": lambda: r.categorical(K42, fnp.array([[0., 1.], [2., 0.], [1., 1.]]),
                                               axis=0),
    "gumbel": lambda: r.gumbel(K0, (5,)),
    "exponential": lambda: r.exponential(K42, (5,)),
}

# name: (dtype, shape, values) from jax.random (see the module docstring)
JAX = {
    "key0": ("uint32", (2,), [0, 0]),
    "key42": ("uint32", (2,), [0, 42]),
    "key_neg1": ("uint32", (2,), [0, 4294967295]),
    "key_big": ("uint32", (2,), [0, 5]),
    "key_i32max": ("uint32", (2,), [0, 2147483647]),
    "split0": ("uint32", (2, 2), [1797259609, 2579123966, 928981903, 3453687069]),
    "split42_3": ("uint32", (3, 2),
        [1832780943, 270669613, 64467757, 2916123636, 2465931498, 255383827]),
    "split_shape": ("uint32", (2, 3, 2),
        [1832780943, 270669613, 64467757, 2916123636, 2465931498, 255383827, 3134548294, 894150801,
        2954079971, 3276725750, 2765691542, 824333390]),
    "fold0_7": ("uint32", (2,), [2716826189, 292468403]),
    "fold42_big": ("uint32", (2,), [1418384349, 3440491138]),
    "fold42_arr": ("uint32", (2,), [1987571745, 631152681]),
    "bits5": ("uint32", (5,), [4070199207, 4202968722, 1427181096, 2012915765, 2447653815]),
    "bits23": ("uint32", (2, 3),
        [2098992034, 2919706841, 2646866425, 2409546199, 1935504149, 2516274904]),
    "bits_u8": ("uint8", (6,), [162, 217, 249, 215, 21, 216]),
    "bits_u16": ("uint16", (6,), [5026, 12505, 63993, 49623, 29461, 20184]),
    "bits_scalar": ("uint32", (), [2098992034]),
    "uniform7": ("float32", (7,),
        [0.947667, 0.9785799, 0.33229148, 0.46866846, 0.5698887, 0.16550303, 0.3101946]),
    "uniform_scalar": ("float32", (), [0.48870957]),
    "uniform_range": ("float32", (2, 3),
        [1.420967, 2.7585802, 2.3139005, 1.9271126, 1.1545123, 2.1010609]),
    "uniform_arr_bounds": ("float32", (2, 3),
        [0.48870957, 2.3595943, 6.930172, 0.5610161, 1.9012892, 6.686927]),
    "uniform_f16": ("float16", (5,), [0.0762, 0.1904, 0.9756, 0.757, 0.4492]),
    "randint": ("int32", (8,), [9, 0, 2, 3, 1, 7, 2, 3]),
    "randint_neg": ("int32", (6,), [-56, 14, -29, 69, 9, -81]),
    "randint_full": ("int32", (6,),
        [977810628, 1236381714, -1367112521, -1019495231, -1671904627, -1277190805]),
    "randint_empty": ("int32", (4,), [5, 5, 5, 5]),
    "randint_u8": ("uint8", (6,), [196, 18, 183, 193, 141, 107]),
    "randint_i8": ("int8", (6,), [61, -119, -122, -109, 66, 31]),
    "randint_arr": ("int32", (2, 3), [4, 14, 271, 4, 19, 619]),
    "bernoulli": ("bool", (10,), [0, 0, 0, 0, 0, 1, 0, 0, 0, 1]),
    "bernoulli_arr": ("bool", (4,), [0, 0, 1, 1]),
    "perm10": ("int32", (10,), [0, 1, 8, 5, 6, 4, 3, 2, 7, 9]),
    "perm_arr": ("int32", (4, 3), [6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5]),
    "perm_axis1": ("int32", (3, 4), [2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9]),
    "perm_indep": ("int32", (3, 4), [2, 3, 0, 1, 7, 4, 5, 6, 10, 11, 8, 9]),
    "perm_big": ("int32", (20,),
        [3825, 3150, 2972, 2921, 1203, 2981, 4024, 2362, 790, 2430, 240, 4329, 4849, 1838, 4538,
        3998, 3149, 2423, 1971, 3369]),
    "normal6": ("float32", (6,),
        [1.6226422, 2.0252647, -0.43359444, -0.07861735, 0.1760909, -0.97208923]),
    "normal23": ("float32", (2, 3),
        [-0.028304616, 0.46713185, 0.29570296, 0.15354592, -0.12403282, 0.21692315]),
    "trunc": ("float32", (6,),
        [1.5094677, 1.747393, -0.17467561, 0.10624172, 0.31906945, -0.5413444]),
    "trunc_arr": ("float32", (3,), [-0.00079767, 0.9902782, 1.540556]),
    "choice_r": ("int32", (5,), [9, 0, 2, 3, 1]),
    "choice_nr": ("int32", (4,), [7, 4, 2, 5]),
    "choice_arr": ("int32", (3, 4), [160, 170, 180, 190, 160, 170, 180, 190, 40, 50, 60, 70]),
    "choice_p": ("int32", (8,), [2, 2, 2, 2, 2, 2, 4, 1]),
    "choice_p_nr": ("int32", (3,), [2, 1, 4]),
    "categorical": ("int32", (2,), [1, 0]),
    "categorical_shape": ("int32", (2, 5), [3, 3, 3, 3, 3, 3, 1, 1, 3, 3]),
    "categorical_axis0": ("int32", (2,), [1, 0]),
    "gumbel": ("float32", (5,), [2.9233725, 3.8326178, -0.09689324, 0.27725708, 0.57569456]),
    "exponential": ("float32", (5,), [0.6708175, 1.1388006, 0.95782, 0.8232925, 0.5990097]),
}

# Not bit-exact by contract: normal/truncated_normal (inverse-erf implementations differ in the
# last bits) and floats scaled into a range (XLA contracts `u * (max - min) + min` into one
# fused multiply-add; funcgrad rounds twice). They agree to float32 rounding.
APPROX = {"normal6", "normal23", "trunc", "trunc_arr", "uniform_range", "gumbel"}


def _ref(name, table=None):
    dtype, shape, values = (table or JAX)[name]
    return np.array(values, dtype).reshape(shape)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    got, want = np.asarray(CASES[name]()), _ref(name)
    assert got.dtype == want.dtype and got.shape == want.shape
    if name in APPROX:
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(got, want)


CASES64 = {
    "key_big64": lambda: r.PRNGKey(2**40 + 5),
    "key_neg64": lambda: r.PRNGKey(-3),
    "key_arr64": lambda: r.PRNGKey(fnp.asarray(np.int64(-2**40 - 1))),
    "uniform64": lambda: r.uniform(K42, (5,), fnp.float64),
    "normal64": lambda: r.normal(K42, (5,), fnp.float64),
    "randint64": lambda: r.randint(K42, (6,), -10**12, 10**12, fnp.int64),
    "bits64": lambda: r.bits(K42, (3,), fnp.uint64),
    "fold64": lambda: r.fold_in(K42, fnp.asarray(np.int64(-7))),
}

JAX64 = {  # with jax_enable_x64
    "key_big64": ("uint32", (2,), [256, 5]),
    "key_neg64": ("uint32", (2,), [4294967295, 4294967293]),
    "key_arr64": ("uint32", (2,), [4294967039, 4294967295]),
    "uniform64": ("float64", (5,),
        [0.4267275666499091, 0.015010069515314584, 0.5741444178995352, 0.7298188969046309,
        0.687800341230566]),
    "normal64": ("float64", (5,),
        [-0.18471174528191162, -2.169824560397754, 0.18693555179382582, 0.6122653570510959,
        0.4896249504757018]),
    "randint64": ("int64", (6,),
        [464050701877, -395020523842, 848944880791, -449936457681, 100519646113, -313326917694]),
    "bits64": ("uint64", (3,), [7871734211187709741, 276886910877598708, 10591095138341673235]),
    "fold64": ("uint32", (2,), [3700960996, 557747671]),
}


@pytest.mark.parametrize("name", sorted(CASES64))
def test_matches_jax_x64(name):
    fg.config.update("enable_x64", True)
    got, want = np.asarray(CASES64[name]()), _ref(name, JAX64)
    assert got.dtype == want.dtype and got.shape == want.shape
    if name == "normal64":
        np.testing.assert_allclose(got, want, rtol=1e-14)
    else:
        np.testing.assert_array_equal(got, want)


def test_threefry_known_answer():
    # Random123's known-answer vectors for Threefry-2x32, 20 rounds
    y = r.threefry2x32(np.uint32(0x13198a2e), np.uint32(0x03707344),
                       np.uint32(0x243f6a88), np.uint32(0x85a308d3))
    assert [int(v) for v in y] == [0xc4923a9c, 0x483df7a0]
    y = r.threefry2x32(*(np.uint32(0xFFFFFFFF),) * 4)
    assert [int(v) for v in y] == [0x1cb996fc, 0xbb002be7]


# --- the same numbers eagerly, under jit and under vmap ----------------------------------------
SAMPLERS = {
    "uniform": lambda k: r.uniform(k, (5,), minval=-1.0, maxval=3.0),
    "normal": lambda k: r.normal(k, (2, 3)),
    "truncated_normal": lambda k: r.truncated_normal(k, -1.0, 1.5, (4,)),
    "randint": lambda k: r.randint(k, (5,), -3, 9),
    "bernoulli": lambda k: r.bernoulli(k, 0.4, (6,)),
    "permutation": lambda k: r.permutation(k, 7),
    "permutation_rows": lambda k: r.permutation(k, fnp.arange(12.0).reshape(4, 3)),
    "split": lambda k: r.split(k, 3),
    "fold_in": lambda k: r.fold_in(k, 11),
    "bits": lambda k: r.bits(k, (3,)),
    "choice": lambda k: r.choice(k, 10, (3,), replace=False),
    "choice_p": lambda k: r.choice(k, 4, (3,), p=fnp.array([0.1, 0.2, 0.3, 0.4])),
    "categorical": lambda k: r.categorical(k, fnp.array([[0., 1., 2.], [2., 1., 0.]])),
    "gumbel": lambda k: r.gumbel(k, (3,)),
    "exponential": lambda k: r.exponential(k, (3,)),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_eager_jit_vmap_agree(name):
    f = SAMPLERS[name]
    keys = r.split(r.PRNGKey(3), 4)
    eager = np.stack([np.asarray(f(k)) for k in keys])
    np.testing.assert_array_equal(np.asarray(fg.jit(f)(keys[1])), eager[1])
    np.testing.assert_array_equal(np.asarray(fg.vmap(f)(keys)), eager)
    np.testing.assert_array_equal(np.asarray(fg.jit(fg.vmap(f))(keys)), eager)


def test_vmap_over_fold_in_data_and_seeds():
    data = fnp.arange(5)
    want = np.stack([np.asarray(r.fold_in(K42, i)) for i in range(5)])
    np.testing.assert_array_equal(np.asarray(fg.vmap(lambda d: r.fold_in(K42, d))(data)), want)
    seeds = np.stack([np.asarray(r.PRNGKey(i)) for i in range(5)])
    np.testing.assert_array_equal(np.asarray(fg.vmap(r.PRNGKey)(data)), seeds)
    np.testing.assert_array_equal(np.asarray(fg.jit(r.PRNGKey)(fnp.int32(7))), [0, 7])


def test_large_draw_under_jit():
    f = fg.jit(lambda k: r.uniform(k, (300, 400)))
    np.testing.assert_array_equal(np.asarray(f(K42)), np.asarray(r.uniform(K42, (300, 400))))


def test_keys_are_constants_inside_grad():
    def loss(scale, x, key):
        noise = r.normal(key, x.shape)
        keep = r.bernoulli(r.fold_in(key, 1), 0.5, x.shape)
        return fnp.sum(fnp.where(keep, scale * x * noise, 0.0))
    x = fnp.arange(1.0, 5.0)
    g = fg.grad(loss)(2.0, x, K42)
    noise, keep = np.asarray(r.normal(K42, (4,))), np.asarray(r.bernoulli(r.fold_in(K42, 1),
                                                                          0.5, (4,)))
    np.testing.assert_allclose(g, np.sum(np.where(keep, np.arange(1.0, 5.0) * noise, 0)),
                               rtol=1e-6)
    np.testing.assert_allclose(fg.jit(fg.grad(loss))(2.0, x, K42), g, rtol=1e-6)
    # gradients flow into the bounds of uniform: d/dmax of (u * (max - min) + min) is u
    u = np.asarray(r.uniform(K42, (3,)))
    gmax = fg.grad(lambda m: r.uniform(K42, (3,), minval=0.0, maxval=m).sum())(2.0)
    np.testing.assert_allclose(gmax, u.sum(), rtol=1e-6)


# --- statistics -----------------------------------------------------------------------------------
N = 20000


def _check_moments(x, mean, std, tol=0.03):
    x = np.asarray(x, np.float64)
    assert abs(x.mean() - mean) < tol * max(std, 1.0)
    assert abs(x.std() - std) < tol * max(std, 1.0)


def test_uniform_statistics():
    u = np.asarray(r.uniform(r.PRNGKey(1), (N,), minval=-2.0, maxval=4.0))
    assert u.min() >= -2.0 and u.max() < 4.0
    _check_moments(u, 1.0, 6 / math.sqrt(12))
    assert np.histogram(u, bins=10, range=(-2, 4))[0].min() > 0.9 * N / 10


def test_normal_and_truncated_normal_statistics():
    _check_moments(r.normal(r.PRNGKey(2), (N,)), 0.0, 1.0)
    t = np.asarray(r.truncated_normal(r.PRNGKey(3), -2.0, 2.0, (N,)))
    assert -2.0 < t.min() and t.max() < 2.0
    _check_moments(t, 0.0, 0.87962566103423978)
    t = np.asarray(r.truncated_normal(r.PRNGKey(3), 1.0, 1.5, (1000,)))
    assert 1.0 < t.min() and t.max() < 1.5


def test_discrete_statistics():
    b = np.asarray(r.bernoulli(r.PRNGKey(4), 0.3, (N,)))
    assert b.dtype == bool and abs(b.mean() - 0.3) < 0.015
    i = np.asarray(r.randint(r.PRNGKey(5), (N,), -3, 7))
    assert i.dtype == np.int32 and i.min() == -3 and i.max() == 6
    assert np.bincount(i + 3).min() > 0.9 * N / 10
    p = np.array([0.1, 0.2, 0.3, 0.4])
    c = np.asarray(r.choice(r.PRNGKey(6), 4, (N,), p=fnp.array(p)))
    np.testing.assert_allclose(np.bincount(c) / N, p, atol=0.015)
    cat = np.asarray(r.categorical(r.PRNGKey(7), fnp.log(fnp.array(p)), shape=(N,)))
    np.testing.assert_allclose(np.bincount(cat) / N, p, atol=0.015)


def test_gumbel_and_exponential_statistics():
    _check_moments(r.gumbel(r.PRNGKey(8), (N,)), np.euler_gamma, np.pi / math.sqrt(6))
    e = np.asarray(r.exponential(r.PRNGKey(9), (N,)))
    assert e.min() >= 0
    _check_moments(e, 1.0, 1.0)


def test_permutations_and_choice_without_replacement():
    p = np.asarray(r.permutation(r.PRNGKey(10), 100))
    assert sorted(p.tolist()) == list(range(100)) and not np.array_equal(p, np.arange(100))
    x = fnp.arange(20).reshape(4, 5)
    rows = np.asarray(r.permutation(r.PRNGKey(11), x))
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, np.asarray(x).tolist()))
    ind = np.asarray(r.permutation(r.PRNGKey(12), x, axis=1, independent=True))
    assert all(sorted(row) == sorted(orig) for row, orig in zip(ind.tolist(), x.tolist()))
    c = np.asarray(r.choice(r.PRNGKey(13), 10, (10,), replace=False))
    assert sorted(c.tolist()) == list(range(10))
    # first-position frequencies of a shuffle are uniform
    firsts = np.asarray(fg.vmap(lambda k: r.permutation(k, 4)[0])(r.split(r.PRNGKey(14),
                                                                          4000)))
    np.testing.assert_allclose(np.bincount(firsts) / 4000, 0.25, atol=0.03)


def test_split_keys_are_independent_streams():
    keys = r.split(r.PRNGKey(15), 64)
    assert len({tuple(k) for k in np.asarray(keys).tolist()}) == 64
    draws = np.asarray(fg.vmap(lambda k: r.uniform(k, (256,)))(keys))
    corr = np.corrcoef(draws)
    assert np.abs(corr[np.triu_indices(64, 1)]).max() < 0.3


# --- errors -----------------------------------------------------------------------------------
def test_bad_keys_and_arguments():
    with pytest.raises(FuncgradTypeError, match=r"random.uniform: expected a single key"):
        r.uniform(fnp.zeros(2), (3,))
    with pytest.raises(FuncgradTypeError, match=r"vmap over them"):
        r.normal(r.split(K0, 4), (3,))
    with pytest.raises(FuncgradTypeError, match="dtype must be a floating type"):
        r.uniform(K0, (2,), fnp.int32)
    with pytest.raises(FuncgradTypeError, match="integer type"):
        r.randint(K0, (2,), 0, 3, fnp.float32)
    with pytest.raises(FuncgradTypeError, match="seed must be an integer"):
        r.PRNGKey(1.5)
    with pytest.raises(FuncgradValueError, match="does not broadcast"):
        r.uniform(K0, (2,), minval=fnp.zeros(3))
    with pytest.raises(FuncgradValueError, match="larger sample"):
        r.choice(K0, 3, (5,), replace=False)
    with pytest.raises(FuncgradTypeError, match="concrete"):
        fg.jit(lambda n: r.permutation(K0, n))(5)
