"""Every funcgrad.random sampler under the transforms: jit equals eager, vmap over keys and
over parameters equals a Python loop, jit(vmap) too, the native C tier gives the numbers of
the numpy tier, and an eager call is one compiled program, traced once per configuration."""

import numpy as np
import pytest
from test_native_backend import HAVE_CC, native_mode

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import random as r
from funcgrad.compiler import call

K = r.PRNGKey(11)

# name: (sample(key, param), params to vmap over (first is used alone)); integers compare
# exactly, floats to 1e-6 (a batched program may round a transcendental function differently)
SAMPLERS = {
    "uniform": (lambda k, hi: r.uniform(k, (3,), maxval=hi), [1.0, 2.0, 5.0]),
    "normal": (lambda k, s: s * r.normal(k, (3,)), [1.0, 2.0]),
    "truncated_normal": (lambda k, lo: r.truncated_normal(k, lo, 2.0, (3,)), [-1.0, 0.5]),
    "bernoulli": (lambda k, p: r.bernoulli(k, p, (5,)), [0.2, 0.7]),
    "bernoulli_high": (lambda k, p: r.bernoulli(k, p, (5,), mode="high"), [0.2, 0.7]),
    "randint": (lambda k, hi: r.randint(k, (4,), 0, hi), [3, 1000]),
    "categorical": (lambda k, lg: r.categorical(k, lg, shape=(4, 2)),
                    [[[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]], [[1.0, 1.0, 1.0], [0.0, 5.0, 0.0]]]),
    "categorical_noreplace": (lambda k, lg: r.categorical(k, lg, replace=False, shape=(2,)),
                              [[0.0, 1.0, 2.0, 3.0], [3.0, 2.0, 1.0, 0.0]]),
    "choice_p": (lambda k, p: r.choice(k, 4, (3,), replace=False, p=p),
                 [[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]]),
    "gamma": (lambda k, a: r.gamma(k, a, (3,)), [0.3, 1.0, 8.0]),
    "loggamma": (lambda k, a: r.loggamma(k, a, (3,)), [0.3, 8.0]),
    "beta": (lambda k, a: r.beta(k, a, 2.0, (3,)), [0.5, 3.0]),
    "dirichlet": (lambda k, al: r.dirichlet(k, al), [[0.5, 1.0, 2.0], [3.0, 3.0, 0.2]]),
    "chisquare": (lambda k, df: r.chisquare(k, df, (3,)), [1.0, 7.0]),
    "f": (lambda k, d: r.f(k, d, 4.0, (3,)), [2.0, 9.0]),
    "t": (lambda k, df: r.t(k, df, (3,)), [1.5, 10.0]),
    "generalized_normal": (lambda k, p: r.generalized_normal(k, p, (3,)), [1.0, 2.5]),
    "ball": (lambda k, p: r.ball(k, 3, p, (2,)), [1.0, 2.0]),
    "lognormal": (lambda k, s: r.lognormal(k, s, (3,)), [0.5, 1.5]),
    "pareto": (lambda k, b: r.pareto(k, b, (3,)), [1.0, 4.0]),
    "rayleigh": (lambda k, s: r.rayleigh(k, s, (3,)), [1.0, 3.0]),
    "wald": (lambda k, m: r.wald(k, m, (3,)), [0.5, 2.0]),
    "weibull_min": (lambda k, c: r.weibull_min(k, 2.0, c, (3,)), [0.5, 3.0]),
    "triangular": (lambda k, m: r.triangular(k, 0.0, m, 2.0, (3,)), [0.5, 1.5]),
    "double_sided_maxwell": (lambda k, s: r.double_sided_maxwell(k, 1.0, s, (3,)), [1.0, 2.0]),
    "multivariate_normal": (lambda k, m: r.multivariate_normal(k, m, fnp.eye(2) * 2.0, (3,)),
                            [[0.0, 1.0], [5.0, -5.0]]),
    "geometric": (lambda k, p: r.geometric(k, p, (4,)), [0.1, 0.6]),
    "poisson": (lambda k, lam: r.poisson(k, lam, (4,)), [2.0, 40.0]),
    "binomial": (lambda k, p: r.binomial(k, 30.0, p, (4,)), [0.1, 0.5, 0.9]),
    "multinomial": (lambda k, n: r.multinomial(k, n, fnp.array([0.2, 0.5, 0.3])),
                    [5.0, 300.0]),
    "cauchy": (lambda k, s: s * r.cauchy(k, (3,)), [1.0]),
    "laplace": (lambda k, s: s * r.laplace(k, (3,)), [1.0]),
    "logistic": (lambda k, s: s * r.logistic(k, (3,)), [1.0]),
    "maxwell": (lambda k, s: s * r.maxwell(k, (3,)), [1.0]),
    "rademacher": (lambda k, s: s * r.rademacher(k, (6,)), [1]),
    "exponential": (lambda k, s: s * r.exponential(k, (3,)), [1.0]),
    "gumbel_highest": (lambda k, s: s * r.gumbel(k, (3,), mode="highest"), [1.0]),
    "orthogonal": (lambda k, s: s * r.orthogonal(k, 3), [1.0]),
}


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


JIT_OF_VMAP = {"normal", "categorical", "poisson", "gamma", "choice_p", "multinomial"}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_jit_and_vmap_agree_with_eager(name):
    sample, params = SAMPLERS[name]
    params = [fnp.asarray(p) for p in params]
    keys = r.split(K, 3)
    by_key = np.stack([np.asarray(sample(k, params[0])) for k in keys])
    _same(fg.jit(sample)(keys[0], params[0]), by_key[0])
    _same(fg.vmap(sample, (0, None))(keys, params[0]), by_key)
    if name in JIT_OF_VMAP:  # the batched program compiled whole (a few: compiles are slow)
        _same(fg.jit(fg.vmap(sample, (0, None)))(keys, params[0]), by_key)
    if len(params) > 1:
        by_param = np.stack([np.asarray(sample(K, p)) for p in params])
        _same(fg.vmap(sample, (None, 0))(K, fnp.stack(params)), by_param)


def test_an_eager_call_is_one_compiled_program_traced_once():
    from funcgrad.random import samplers
    before = call.stats["compile", "normal"]
    first = r.normal(r.PRNGKey(1), (3, 7, 2))
    for seed in range(2, 7):  # new keys, the same shape and dtype: the same program
        r.normal(r.PRNGKey(seed), (3, 7, 2))
    assert call.stats["compile", "normal"] == before + 1
    jitted = [j for sig, j in samplers._normal._jits.items() if (("shape", (3, 7, 2)),
                                                                  ("dtype", first.dtype)) ==
              sig[0]]
    assert len(jitted) == 1 and jitted[0].trace_count == 1
    # under another trace the call is one `jit` equation
    jaxpr = fg.make_jaxpr(lambda k: r.gamma(k, 2.0, (5,)))(K)
    assert [e.prim.name for e in jaxpr.jaxpr.eqns] == ["jit"]


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler (test_native_backend fails then)")
@pytest.mark.parametrize("name", ["gamma", "poisson", "binomial", "multinomial", "dirichlet",
                                  "categorical", "orthogonal", "gumbel_highest", "ball"])
def test_native_tier_gives_the_numpy_tiers_numbers(name):
    sample, params = SAMPLERS[name]
    p = fnp.asarray(params[0])
    want = fg.jit(sample, backend="numpy")(K, p)
    with native_mode():
        _same(fg.jit(sample)(K, p), want)


def test_bad_arguments_are_errors_naming_the_sampler():
    from funcgrad.errors import FuncgradTypeError, FuncgradValueError
    bad = [
        (lambda: r.gamma(K, "a"), FuncgradTypeError, "random.gamma: a must be an array"),
        (lambda: r.gamma(K, fnp.ones(3), (2,)), FuncgradValueError, "must broadcast"),
        (lambda: r.dirichlet(K, 1.0), FuncgradValueError, "at least one axis"),
        (lambda: r.multivariate_normal(K, fnp.zeros(2), fnp.eye(3)), FuncgradValueError,
         r"\(2,\) and \(3, 3\)"),
        (lambda: r.multivariate_normal(K, fnp.zeros(2), fnp.eye(2), method="qr"),
         FuncgradValueError, "method must be"),
        (lambda: r.poisson(K, 3.0, dtype=fnp.float32), FuncgradTypeError, "integer type"),
        (lambda: r.binomial(K, 10.0, 0.5, dtype=fnp.int32), FuncgradTypeError, "floating"),
        (lambda: r.categorical(K, fnp.zeros(3), shape=(4,), replace=False),
         FuncgradValueError, r"\(4\) cannot exceed the number of categories \(3\)"),
        (lambda: r.gumbel(K, mode="x"), FuncgradValueError, "mode must be one of"),
        (lambda: fg.jit(lambda n: r.ball(K, n))(3), FuncgradTypeError, "concrete integer"),
    ]
    for fn, cls, match in bad:
        with pytest.raises(cls, match=match):
            fn()
