"""The calls whose results `tools/record_random_golden.py` records from jax.random and
`tests/test_random_golden.py` replays on funcgrad.random: one table, run on both libraries.

Each case is `name: (function of a namespace, tolerance)`; the namespace `ns` holds `r` (the
random module), `xp` (the numpy module), `grad`, `vmap`, `jit` and `key(seed)` (a raw key) of
the library under test. A tolerance of 0 means bit for bit; otherwise it is the relative
tolerance (values near zero compare with the same number as absolute tolerance), for results
that go through transcendental functions, which XLA and NumPy round differently in the last
bit. This module imports neither JAX nor funcgrad.
"""


def _tri(ns, k):
    return ns.r.triangular(k, ns.xp.array([0.0, -1.0, 2.0]), ns.xp.array([0.5, 0.0, 2.5]),
                           ns.xp.array([1.0, 3.0, 4.0]), (4, 3))


def _mvn(method):
    def case(ns):
        cov = ns.xp.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
        return ns.r.multivariate_normal(ns.key(7), ns.xp.array([1.0, -1.0, 0.0]), cov, (4,),
                                        method=method)
    return case


def _grad_sum(sampler):
    def case(ns):
        return ns.grad(lambda a: sampler(ns, a).sum())(ns.xp.array([0.05, 0.7, 1.0, 2.5, 30.0]))
    return case


A5 = [0.01, 0.3, 1.0, 2.5, 100.0]

CASES = {
    # continuous families built from uniforms and normals
    "cauchy": (lambda ns: ns.r.cauchy(ns.key(1), (6,)), 2e-6),
    "laplace": (lambda ns: ns.r.laplace(ns.key(1), (6,)), 2e-6),
    "logistic": (lambda ns: ns.r.logistic(ns.key(1), (6,)), 2e-6),
    "maxwell": (lambda ns: ns.r.maxwell(ns.key(2), (2, 3)), 2e-6),
    "double_sided_maxwell": (lambda ns: ns.r.double_sided_maxwell(ns.key(2), 1.0, 2.0, (5,)),
                             2e-6),
    "double_sided_maxwell_arr": (lambda ns: ns.r.double_sided_maxwell(
        ns.key(2), ns.xp.zeros(3), ns.xp.array([1.0, 2.0, 3.0])), 2e-6),
    "lognormal": (lambda ns: ns.r.lognormal(ns.key(3), 0.5, (6,)), 2e-6),
    "lognormal_default": (lambda ns: ns.r.lognormal(ns.key(3)), 2e-6),
    "pareto": (lambda ns: ns.r.pareto(ns.key(4), ns.xp.array([0.5, 1.0, 3.0]), (2, 3)), 2e-6),
    "rayleigh": (lambda ns: ns.r.rayleigh(ns.key(5), 2.0, (6,)), 2e-6),
    "wald": (lambda ns: ns.r.wald(ns.key(6), ns.xp.array([0.5, 1.0, 4.0]), (2, 3)), 1e-5),
    "weibull_min": (lambda ns: ns.r.weibull_min(ns.key(7), 2.0, 1.5, (6,)), 2e-6),
    "triangular": (lambda ns: _tri(ns, ns.key(8)), 2e-6),
    "rademacher": (lambda ns: ns.r.rademacher(ns.key(9), (10,)), 0),
    "rademacher_f32": (lambda ns: ns.r.rademacher(ns.key(9), (4,), ns.xp.float32), 0),
    "geometric": (lambda ns: ns.r.geometric(ns.key(10), ns.xp.array([0.05, 0.3, 0.9]), (4, 3)),
                  0),
    "exponential_f16": (lambda ns: ns.r.exponential(ns.key(11), (5,), ns.xp.float16), 2e-3),
    "normal_c64": (lambda ns: ns.r.normal(ns.key(12), (4,), ns.xp.complex64), 2e-6),
    "mvn_cholesky": (_mvn("cholesky"), 1e-5),
    "mvn_svd": (_mvn("svd"), 1e-5),
    "mvn_eigh": (_mvn("eigh"), 1e-5),
    "orthogonal": (lambda ns: ns.r.orthogonal(ns.key(13), 4), 1e-5),
    "orthogonal_wide": (lambda ns: ns.r.orthogonal(ns.key(13), 2, (2,), m=4), 1e-5),
    "orthogonal_tall": (lambda ns: ns.r.orthogonal(ns.key(13), 4, m=3), 1e-5),
    # the gamma family
    "gamma": (lambda ns: ns.r.gamma(ns.key(20), ns.xp.array(A5)), 1e-5),
    "gamma_shape": (lambda ns: ns.r.gamma(ns.key(21), 0.7, (3, 4)), 1e-5),
    "loggamma": (lambda ns: ns.r.loggamma(ns.key(20), ns.xp.array(A5)), 1e-5),
    "beta": (lambda ns: ns.r.beta(ns.key(22), ns.xp.array([0.2, 1.0, 5.0]), 2.0, (2, 3)), 1e-5),
    "dirichlet": (lambda ns: ns.r.dirichlet(ns.key(23), ns.xp.array([0.1, 1.0, 4.0])), 1e-5),
    "dirichlet_batch": (lambda ns: ns.r.dirichlet(ns.key(23), ns.xp.array([[0.5, 0.5],
                                                                           [3.0, 1.0]]),
                                                  (3, 2)), 1e-5),
    "chisquare": (lambda ns: ns.r.chisquare(ns.key(24), ns.xp.array([1.0, 3.0, 10.0])), 1e-5),
    "f": (lambda ns: ns.r.f(ns.key(25), 3.0, ns.xp.array([2.0, 5.0, 50.0])), 1e-5),
    "t": (lambda ns: ns.r.t(ns.key(26), ns.xp.array([1.0, 4.0, 30.0])), 1e-5),
    "generalized_normal": (lambda ns: ns.r.generalized_normal(ns.key(27), 0.7, (6,)), 1e-5),
    "generalized_normal_3": (lambda ns: ns.r.generalized_normal(ns.key(27), 3.0, (6,)), 1e-5),
    "ball": (lambda ns: ns.r.ball(ns.key(28), 3, shape=(2,)), 1e-5),
    "ball_p1": (lambda ns: ns.r.ball(ns.key(28), 4, 1.0), 1e-5),
    # counts
    "poisson": (lambda ns: ns.r.poisson(ns.key(30), ns.xp.array([0.0, 0.5, 3.0, 9.9, 10.0,
                                                                 45.0, 1e4])), 0),
    "poisson_shape": (lambda ns: ns.r.poisson(ns.key(31), 2.0, (3, 4)), 0),
    "binomial": (lambda ns: ns.r.binomial(ns.key(32), ns.xp.array([0.0, 5.0, 20.0, 100.0,
                                                                   1000.0, 50.0]),
                                          ns.xp.array([0.3, 0.5, 0.2, 0.7, 0.01, 0.95])), 0),
    "binomial_invalid": (lambda ns: ns.r.binomial(ns.key(33), ns.xp.array([-1.0, 5.0, 5.0]),
                                                  ns.xp.array([0.5, -0.1, 1.5])), 0),
    "multinomial": (lambda ns: ns.r.multinomial(ns.key(34), ns.xp.array([10.0, 100.0]),
                                                ns.xp.array([0.2, 0.3, 0.5]), shape=(2, 3)), 0),
    # modes and the other new arguments
    "gumbel_high": (lambda ns: ns.r.gumbel(ns.key(40), (6,), mode="high"), 2e-6),
    "gumbel_highest": (lambda ns: ns.r.gumbel(ns.key(40), (6,), mode="highest"), 2e-6),
    "bernoulli_high": (lambda ns: ns.r.bernoulli(ns.key(41), ns.xp.array([1e-9, 0.3, 0.9]),
                                                 (4, 3), mode="high"), 0),
    "categorical_noreplace": (lambda ns: ns.r.categorical(
        ns.key(42), ns.xp.array([[0.0, 1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0, 0.0]]),
        shape=(3, 2), replace=False), 0),
    "categorical_high": (lambda ns: ns.r.categorical(ns.key(43), ns.xp.zeros((2, 6)),
                                                     mode="high"), 0),
    "choice_p_high": (lambda ns: ns.r.choice(ns.key(44), 6, (3,), replace=False,
                                             p=ns.xp.array([0.1, 0.1, 0.2, 0.2, 0.3, 0.1]),
                                             mode="high"), 0),
    "choice_arr_noreplace": (lambda ns: ns.r.choice(ns.key(45), ns.xp.arange(12).reshape(3, 4),
                                                    (2,), replace=False, axis=1), 0),
    "split_empty_shape": (lambda ns: ns.r.split(ns.key(46), ()), 0),
    # typed keys
    "typed_key": (lambda ns: ns.r.key_data(ns.r.key(47)), 0),
    "typed_split": (lambda ns: ns.r.key_data(ns.r.split(ns.r.key(47), (2, 2))), 0),
    "typed_fold_in": (lambda ns: ns.r.key_data(ns.r.fold_in(ns.r.key(47), 3)), 0),
    "typed_normal": (lambda ns: ns.r.normal(ns.r.split(ns.r.key(48))[1], (3,)), 2e-6),
    "typed_wrap": (lambda ns: ns.r.uniform(ns.r.wrap_key_data(ns.key(49)), (3,)), 0),
    "typed_vmap": (lambda ns: ns.vmap(lambda k: ns.r.uniform(k, (2,)))(
        ns.r.split(ns.r.key(50), 3)), 0),
    # transforms: vmap over keys and parameters, jit
    "gamma_vmap_keys": (lambda ns: ns.vmap(lambda k: ns.r.gamma(k, 1.5, (2,)))(
        ns.r.split(ns.key(51), 3)), 1e-5),
    "gamma_vmap_a": (lambda ns: ns.vmap(lambda a: ns.r.gamma(ns.key(52), a, (2,)))(
        ns.xp.array([0.5, 2.0, 9.0])), 1e-5),
    "poisson_jit": (lambda ns: ns.jit(lambda k: ns.r.poisson(k, 4.0, (5,)))(ns.key(53)), 0),
    # implicit reparameterization gradients
    "grad_gamma": (_grad_sum(lambda ns, a: ns.r.gamma(ns.key(60), a)), 1e-4),
    "grad_loggamma": (_grad_sum(lambda ns, a: ns.r.loggamma(ns.key(60), a)), 1e-4),
    "grad_beta": (_grad_sum(lambda ns, a: ns.r.beta(ns.key(61), a, 2.0)), 1e-4),
    "grad_t": (_grad_sum(lambda ns, a: ns.r.t(ns.key(63), a + 1.0)), 1e-4),
    "grad_dirichlet": (lambda ns: ns.grad(lambda a: (ns.r.dirichlet(ns.key(64), a) *
                                                     ns.xp.arange(1.0, 5.0)).sum())(
        ns.xp.array([0.3, 1.0, 2.0, 6.0])), 1e-4),
}

# Run with 64-bit types on (jax_enable_x64 / funcgrad's enable_x64).
CASES_X64 = {
    "gamma64": (lambda ns: ns.r.gamma(ns.key(70), ns.xp.array(A5)), 1e-12),
    "beta64": (lambda ns: ns.r.beta(ns.key(71), 0.5, ns.xp.array([0.5, 2.0, 8.0])), 1e-12),
    "cauchy64": (lambda ns: ns.r.cauchy(ns.key(72), (4,)), 1e-13),
    "poisson64": (lambda ns: ns.r.poisson(ns.key(73), ns.xp.array([2.0, 30.0])), 0),
    "binomial64": (lambda ns: ns.r.binomial(ns.key(74), 40.0, ns.xp.array([0.1, 0.6])), 0),
    "rademacher64": (lambda ns: ns.r.rademacher(ns.key(75), (6,)), 0),
    "grad_gamma64": (_grad_sum(lambda ns, a: ns.r.gamma(ns.key(76), a)), 1e-10),
    "grad_dirichlet64": (lambda ns: ns.grad(lambda a: ns.r.dirichlet(ns.key(77), a)[0])(
        ns.xp.array([0.5, 1.5, 3.0])), 1e-10),
}
