"""funcgrad.nn.initializers: the numbers of jax.nn.initializers, fan rules, statistics.

Reference values: computed once with JAX 0.10.2 (jaxlib 0.10.2, CPU) by calling the same
`jax.nn.initializers` on `jax.random.PRNGKey(7)`; JAX is not needed to run these tests.
"""

import math

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import random
from funcgrad.nn import initializers as I

K = random.PRNGKey(7)

CASES = {
    "zeros": lambda: I.zeros(K, (2, 3)),
    "ones": lambda: I.ones(K, (3,)),
    "constant": lambda: I.constant(-7.)(K, (2, 2)),
    "uniform": lambda: I.uniform()(K, (4,)),
    "uniform_s": lambda: I.uniform(3.0)(K, (2, 2)),
    "normal": lambda: I.normal()(K, (4,)),
    "normal_s": lambda: I.normal(2.)(K, (2, 3)),
    "truncated_normal": lambda: I.truncated_normal(1.5)(K, (5,)),
    "glorot_uniform": lambda: I.glorot_uniform()(K, (4, 3)),
    "glorot_normal": lambda: I.glorot_normal()(K, (4, 3)),
    "lecun_uniform": lambda: I.lecun_uniform()(K, (4, 3)),
    "lecun_normal": lambda: I.lecun_normal()(K, (4, 3)),
    "he_uniform": lambda: I.he_uniform()(K, (4, 3)),
    "he_normal": lambda: I.he_normal()(K, (4, 3)),
    "he_normal_conv": lambda: I.he_normal()(K, (3, 3, 2, 4)),
    "he_uniform_oihw": lambda: I.he_uniform(in_axis=1, out_axis=0)(K, (4, 2, 3, 3)),
    "vs_fan_out_normal": lambda: I.variance_scaling(0.5, "fan_out", "normal")(K, (5, 2)),
    "vs_geo": lambda: I.variance_scaling(1.0, "fan_geo_avg", "uniform")(K, (5, 2)),
    "vs_batch": lambda: I.variance_scaling(1.0, "fan_in", "uniform", batch_axis=0)(K, (2, 5, 3)),
}

# name: (dtype, shape, values) from jax.nn.initializers (see the module docstring)
JAX = {
    "zeros": ("float32", (2, 3), [0, 0, 0, 0, 0, 0]),
    "ones": ("float32", (3,), [1, 1, 1]),
    "constant": ("float32", (2, 2), [-7, -7, -7, -7]),
    "uniform": ("float32", (4,), [0.006740899, 0.009746169, 0.0030284356, 0.004439585]),
    "uniform_s": ("float32", (2, 2), [2.0222697, 2.9238505, 0.9085307, 1.3318756]),
    "normal": ("float32", (4,), [0.0045123515, 0.01953451, -0.0051623946, -0.0014094029]),
    "normal_s": ("float32", (2, 3),
        [0.9024703, 3.9069018, -1.0324789, -0.2818806, 1.2309934, 0.668633]),
    "truncated_normal": ("float32", (5,),
        [0.64403754, 2.5123286, -0.7360716, -0.20173171, 0.87596136]),
    "glorot_uniform": ("float32", (4, 3),
        [0.32235187, 0.8788197, -0.36506277, -0.103768654, 0.42751887, 0.24243449, -0.09526625,
        -0.16390508, -0.79664224, -0.7596684, -0.2385028, 0.6318743]),
    "glorot_normal": ("float32", (4, 3),
        [0.26090837, 1.0177784, -0.2981926, -0.08172426, 0.35486385, 0.19358324, -0.07499244,
        -0.12967485, -0.8172141, -0.7505244, -0.19033816, 0.5696314]),
    "lecun_uniform": ("float32", (4, 3),
        [0.30153257, 0.8220605, -0.34148493, -0.097066686, 0.3999073, 0.2267767, -0.089113414,
        -0.15331915, -0.74519056, -0.7106047, -0.22309893, 0.5910643]),
    "lecun_normal": ("float32", (4, 3),
        [0.24405743, 0.9520446, -0.27893367, -0.07644605, 0.33194476, 0.18108055, -0.07014901,
        -0.12129973, -0.76443386, -0.70205134, -0.17804506, 0.53284144]),
    "he_uniform": ("float32", (4, 3),
        [0.42643145, 1.1625693, -0.48293266, -0.13727303, 0.5655543, 0.3207107, -0.12602541,
        -0.21682604, -1.0538586, -1.0049468, -0.31550956, 0.8358912]),
    "he_normal": ("float32", (4, 3),
        [0.3451493, 1.3463943, -0.39447173, -0.10811103, 0.46944076, 0.25608656, -0.09920568,
        -0.1715437, -1.0810727, -0.9928505, -0.25179374, 0.75355154]),
    "he_normal_conv": ("float32", (3, 3, 2, 4),
        [0.16270496, 0.6346964, -0.18595576, -0.05096403, 0.2212965, 0.12072037, -0.046766005,
        -0.08086648, -0.5096226, -0.46803424, -0.11869671, 0.35522762, 0.19020471, -0.58511394,
        0.50855434, -0.013641376, -0.09205668, 0.2623785, -0.123706974, 0.63418764, 0.52075183,
        -0.09442616, -0.13878201, 0.1678981, 0.24792999, -0.42074338, 0.28423604, -0.13112144,
        0.022513269, -0.1951603, 0.57776165, -0.61831933, 0.4819092, -0.21289778, -0.6280205,
        0.55953175, -0.48631436, 0.018544901, 0.07854553, -0.13704018, -0.34527212, 0.35151803,
        -0.3183493, -0.040310156, 0.053755093, 0.3102471, -0.14152573, 0.20225047, -0.09551983,
        -0.2112463, -0.07249206, -0.0087128915, -0.31077263, 0.18424833, 0.10803751, 0.10530606,
        -0.23032846, 0.20165178, 0.017124955, -0.059627023, -0.21050939, 0.6059275, -0.576575,
        -0.10774959, -0.33173975, 0.31359836, -0.07199313, 0.209626, -0.06536291, -0.0935248,
        0.37635857, 0.5270591]),
    "he_uniform_oihw": ("float32", (4, 2, 3, 3),
        [0.2010217, 0.5480404, -0.22765663, -0.06471112, 0.26660484, 0.15118447, -0.059408944,
        -0.10221277, -0.49679372, -0.47373646, -0.14873262, 0.39404285, 0.23244083, -0.5307283,
        0.49624187, -0.017369496, -0.11609763, 0.30927363, -0.15479532, 0.5478808, 0.5024191,
        -0.11902533, -0.17287579, 0.20703527, 0.29460514, -0.44344747, 0.33073425, -0.1637191,
        0.028655365, -0.23798679, 0.5278426, -0.5427219, 0.48179263, -0.25752744, -0.5459182,
        0.5203108, -0.48427352, 0.023608804, 0.09932155, -0.1707996, -0.38577142, 0.39098427,
        -0.36240253, -0.051241145, 0.06823196, 0.35508692, -0.17613909, 0.24585672, -0.120375134,
        -0.25572905, -0.09176368, -0.011095499, -0.3555654, 0.22572662, 0.13575186, 0.13240832,
        -0.2762363, 0.24519517, 0.021802409, -0.07562699, -0.25492516, 0.53844047, -0.5273688,
        -0.13539974, -0.37420708, 0.3581286, -0.09113971, 0.25396037, -0.0828333, -0.11791214,
        0.41093194, 0.5055081]),
    "vs_fan_out_normal": ("float32", (5, 2),
        [0.22561757, 0.97672546, -0.25811973, -0.07047015, 0.30774835, 0.16715825, -0.06466234,
        -0.11186825, -0.7387753, -0.6712031]),
    "vs_geo": ("float32", (5, 2),
        [0.33912843, 0.9245572, -0.3840622, -0.10916922, 0.44976878, 0.25505182, -0.100224316,
        -0.1724354, -0.8381029, -0.79920477]),
    "vs_batch": ("float32", (2, 5, 3),
        [0.26969895, 0.73527336, -0.30543342, -0.08681909, 0.35768795, 0.20283525, -0.07970547,
        -0.13713282, -0.66651875, -0.63558424, -0.19954577, 0.528664, 0.31185213, -0.71204674,
        0.66577834, -0.023303624, -0.15576132, 0.41493416, -0.20767973, 0.7350593, 0.674066,
        -0.15968925, -0.23193721, 0.27776697, 0.39525428, -0.5949472, 0.4437266, -0.21965224,
        0.03844521, -0.3192928]),
}

# truncated normals go through erf_inv and a scaled uniform: equal to float32 rounding
APPROX = {"truncated_normal", "glorot_normal", "lecun_normal", "he_normal", "he_normal_conv"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    dtype, shape, values = JAX[name]
    got, want = np.asarray(CASES[name]()), np.array(values, dtype).reshape(shape)
    assert got.dtype == want.dtype and got.shape == want.shape
    if name in APPROX:
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


def test_fan_rules():
    assert I.compute_fans((64, 32)) == (64, 32)
    assert I.compute_fans((3, 3, 16, 32)) == (144, 288)  # HWIO: receptive field 9
    assert I.compute_fans((32, 16, 3, 3), in_axis=1, out_axis=0) == (144, 288)  # OIHW
    assert I.compute_fans((5, 4, 6), batch_axis=0) == (4, 6)
    assert I.compute_fans((2, 3, 4), in_axis=(0, 1), out_axis=2) == (6, 4)
    with pytest.raises(ValueError, match="at least 2-D"):
        I.compute_fans((7,))
    with pytest.raises(ValueError, match="invalid mode"):
        I.variance_scaling(1.0, "fan_sideways", "normal")
    with pytest.raises(ValueError, match="invalid distribution"):
        I.variance_scaling(1.0, "fan_in", "cauchy")


STATS = [  # (initializer, shape, fan used, scale, distribution)
    (I.he_normal(), (400, 300), 400, 2.0, "truncated_normal"),
    (I.he_uniform(), (400, 300), 400, 2.0, "uniform"),
    (I.kaiming_normal(in_axis=1, out_axis=0), (64, 50, 3, 3), 450, 2.0, "truncated_normal"),
    (I.glorot_uniform(), (300, 500), 400, 1.0, "uniform"),
    (I.xavier_normal(), (300, 500), 400, 1.0, "truncated_normal"),
    (I.lecun_normal(), (3, 3, 40, 64), 360, 1.0, "truncated_normal"),
    (I.lecun_uniform(), (250, 100), 250, 1.0, "uniform"),
    (I.variance_scaling(1.0, "fan_out", "normal"), (100, 250), 250, 1.0, "normal"),
]


@pytest.mark.parametrize("init, shape, fan, scale, dist", STATS)
def test_statistics(init, shape, fan, scale, dist):
    w32 = init(random.PRNGKey(1), shape)
    assert w32.shape == shape and w32.dtype == np.float32
    w, std = np.asarray(w32, np.float64), math.sqrt(scale / fan)
    assert abs(w.mean()) < 0.02 * std
    assert abs(w.std() / std - 1) < 0.02
    if dist == "uniform":
        assert np.abs(w).max() <= math.sqrt(3) * std
    if dist == "truncated_normal":
        assert np.abs(w).max() < 2 * std / .87962566103423978


def test_dtypes_and_transforms():
    assert I.he_normal()(K, (3, 2), fnp.float16).dtype == np.float16
    assert I.zeros(None, (2,)).dtype == np.float32
    assert I.constant(3, dtype=fnp.int32)(None, (2,)).dtype == np.int32
    init = I.glorot_uniform()
    np.testing.assert_array_equal(fg.jit(lambda k: init(k, (4, 3)))(K), init(K, (4, 3)))
    keys = random.split(K, 3)
    batched = fg.vmap(lambda k: init(k, (4, 3)))(keys)
    np.testing.assert_array_equal(batched[2], init(keys[2], (4, 3)))
    fg.config.update("enable_x64", True)
    assert I.normal()(K, (2,)).dtype == np.float64
