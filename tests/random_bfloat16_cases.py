"""jax.random samplers in bfloat16, run by JAX (`tools/record_jax_bfloat16_random.py`) and by
funcgrad.random (`tests/test_bfloat16.py`) on the same key: `CASES[name](random, jnp, key)`.
"""


def _bf16(jnp):
    return jnp.bfloat16


CASES = {
    "uniform": lambda r, jnp, k: r.uniform(k, (64,), _bf16(jnp)),
    "uniform_bounds": lambda r, jnp, k: r.uniform(k, (16,), _bf16(jnp), -2.0, 3.0),
    "normal": lambda r, jnp, k: r.normal(k, (64,), _bf16(jnp)),
    "exponential": lambda r, jnp, k: r.exponential(k, (64,), _bf16(jnp)),
    "gumbel": lambda r, jnp, k: r.gumbel(k, (64,), _bf16(jnp)),
    "laplace": lambda r, jnp, k: r.laplace(k, (64,), _bf16(jnp)),
    "logistic": lambda r, jnp, k: r.logistic(k, (64,), _bf16(jnp)),
    "cauchy": lambda r, jnp, k: r.cauchy(k, (64,), _bf16(jnp)),
    "truncated_normal": lambda r, jnp, k: r.truncated_normal(k, -1.0, 2.0, (64,), _bf16(jnp)),
    "rademacher": lambda r, jnp, k: r.rademacher(k, (64,), _bf16(jnp)),
    "gamma": lambda r, jnp, k: r.gamma(k, 2.0, (64,), _bf16(jnp)),
    "loggamma": lambda r, jnp, k: r.loggamma(k, 2.0, (64,), _bf16(jnp)),
    "beta": lambda r, jnp, k: r.beta(k, 2.0, 3.0, (64,), _bf16(jnp)),
    "dirichlet": lambda r, jnp, k: r.dirichlet(k, jnp.array([1.0, 2.0, 3.0]), (8,),
                                               _bf16(jnp)),
    "chisquare": lambda r, jnp, k: r.chisquare(k, 3.0, (64,), _bf16(jnp)),
    "t": lambda r, jnp, k: r.t(k, 3.0, (64,), _bf16(jnp)),
    "ball": lambda r, jnp, k: r.ball(k, 3, shape=(8,), dtype=_bf16(jnp)),
    "rayleigh": lambda r, jnp, k: r.rayleigh(k, 1.0, (64,), _bf16(jnp)),
    "weibull_min": lambda r, jnp, k: r.weibull_min(k, 1.0, 2.0, (64,), _bf16(jnp)),
    "pareto": lambda r, jnp, k: r.pareto(k, 2.0, (64,), _bf16(jnp)),
    "generalized_normal": lambda r, jnp, k: r.generalized_normal(k, 1.5, (64,), _bf16(jnp)),
    "maxwell": lambda r, jnp, k: r.maxwell(k, (64,), _bf16(jnp)),
    "double_sided_maxwell": lambda r, jnp, k: r.double_sided_maxwell(k, 0.0, 1.0, (64,),
                                                                     _bf16(jnp)),
    "triangular": lambda r, jnp, k: r.triangular(k, 0.0, 0.5, 1.0, (64,), _bf16(jnp)),
    "lognormal": lambda r, jnp, k: r.lognormal(k, 0.5, (64,), _bf16(jnp)),
    "wald": lambda r, jnp, k: r.wald(k, 1.0, (64,), _bf16(jnp)),
}
