"""optax.perturbations: smoothing a (possibly piecewise constant) function by random
perturbations of its input, with a Monte Carlo gradient estimator (Berthet et al. 2020).

    smoothed = make_perturbed_fun(argmax_one_hot, num_samples=100, sigma=0.5)
    y = smoothed(random.PRNGKey(0), x)         # differentiable in x

Imports `funcgrad.numpy`, `funcgrad.lax`, `funcgrad.random`, `funcgrad.batching_api`,
`funcgrad.tree_util` and `optim.tree_utils`.
"""

from collections.abc import Callable
from typing import Any

import funcgrad.numpy as fnp
from funcgrad import lax, random
from funcgrad.batching_api import vmap
from funcgrad.optim import tree_utils as tu
from funcgrad.tree_util import tree_map

__all__ = ["Gumbel", "Normal", "make_perturbed_fun"]


class Normal:
    """Standard normal noise: `sample(key, shape, dtype)`, `log_prob(x) = -x**2 / 2`."""

    def sample(self, key, sample_shape=(), dtype=float):
        """Standard normal draws."""
        return random.normal(key, sample_shape, dtype)

    def log_prob(self, inputs):
        """The log-density up to a constant."""
        return -0.5 * inputs ** 2


class Gumbel:
    """Standard Gumbel noise: `sample(key, shape, dtype)`, `log_prob(x) = -x - exp(-x)`."""

    def sample(self, key, sample_shape=(), dtype=float):
        """Standard Gumbel draws."""
        return random.gumbel(key, sample_shape, dtype)

    def log_prob(self, inputs):
        """The log-density."""
        return -inputs - fnp.exp(-inputs)


def _magicbox(x):
    # 1 in value, with the gradient of x: the score-function estimator's "magic box".
    return fnp.exp(x - lax.stop_gradient(x))


def make_perturbed_fun(fun: Callable[[Any], Any], num_samples: int = 1000, sigma=0.1,
                       noise=Gumbel(), use_baseline=True) -> Callable[[Any, Any], Any]:
    """`E[fun(x + sigma Z)]` over `num_samples` draws of the noise `Z`, as a function
    `(key, x)` whose gradient in `x` is the score-function (REINFORCE) estimate (with
    `fun(x)` as a control variate when `use_baseline`).

    Example:
        >>> smoothed_relu = make_perturbed_fun(lambda x: fnp.maximum(x, 0), 500, 0.5)
        >>> y = smoothed_relu(random.PRNGKey(0), fnp.array([0.0]))
    """
    def estimate(key, x, baseline):
        sample = tu.tree_random_like(key, x, sampler=noise.sample)
        shifted = lax.stop_gradient(tree_map(lambda a, z: a + sigma * z, x, sample))
        sample = tree_map(lambda a, y: (y - a) / sigma, x, shifted)
        box = _magicbox(tu.tree_sum(tree_map(noise.log_prob, sample)))
        out = tu.tree_scale(box, fun(shifted))
        return tu.tree_add_scale(out, 1 - box, baseline) if use_baseline else out

    def mc_estimator(key, x):
        baseline = fun(lax.stop_gradient(x)) if use_baseline else None
        keys = random.split(key, num_samples)
        out = vmap(estimate, in_axes=(0, None, None))(keys, x, baseline)
        return tree_map(lambda a: fnp.mean(a, axis=0), out)

    return mc_estimator
