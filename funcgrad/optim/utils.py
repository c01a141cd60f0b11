"""optax's small utilities: `scale_gradient` (identity forward, scaled gradient backward) and
`multi_normal` (a diagonal Gaussian parameterized by its log-scale, for Monte Carlo
gradient estimators).

Imports `funcgrad.numpy`, `funcgrad.lax`, `funcgrad.random`, `funcgrad.scipy.stats`,
`funcgrad.custom_derivatives` and `funcgrad.tree_util`.
"""

from collections.abc import Sequence

import funcgrad.numpy as fnp
from funcgrad import lax, random
from funcgrad.custom_derivatives import custom_vjp
from funcgrad.scipy.stats import norm
from funcgrad.tree_util import tree_map

__all__ = ["MultiNormalDiagFromLogScale", "multi_normal", "scale_gradient"]


@custom_vjp
def _scale_gradient(inputs, scale):
    return inputs


def _scale_gradient_fwd(inputs, scale):
    return inputs, scale


def _scale_gradient_bwd(scale, g):
    return tree_map(lambda x: x * scale, g), None


_scale_gradient.defvjp(_scale_gradient_fwd, _scale_gradient_bwd)


def scale_gradient(inputs, scale):
    """`inputs` unchanged, but gradients flowing back through it are multiplied by `scale`
    (0: `stop_gradient`).

    Example:
        >>> float(funcgrad.grad(lambda x: scale_gradient(x, 0.5) ** 2)(3.0))
        3.0
    """
    if isinstance(scale, (int, float)) and scale == 1.0:
        return inputs
    if isinstance(scale, (int, float)) and scale == 0.0:
        return lax.stop_gradient(inputs)
    return _scale_gradient(inputs, scale)


class MultiNormalDiagFromLogScale:
    """A Gaussian with diagonal covariance `exp(log_scale)**2`: `sample`, `log_prob`."""

    def __init__(self, loc, log_scale):
        self._log_scale = fnp.asarray(log_scale)
        self._scale = fnp.exp(log_scale)
        self._mean = fnp.asarray(loc)
        self._param_shape = tuple(fnp.broadcast_shapes(self._mean.shape, self._scale.shape))

    def sample(self, shape: Sequence[int], key):
        """`shape + param_shape` samples drawn with `key`."""
        sample_shape = tuple(shape) + self._param_shape
        return random.normal(key, shape=sample_shape) * self._scale + self._mean

    def log_prob(self, x):
        """The log-density of `x`, summed over the parameter axes."""
        log_prob = norm.logpdf(x, loc=self._mean, scale=self._scale)
        return fnp.sum(log_prob, axis=tuple(-(i + 1) for i in range(len(self._param_shape))))

    @property
    def log_scale(self):
        """The log of the standard deviations."""
        return self._log_scale

    @property
    def params(self):
        """`[mean, log_scale]`."""
        return [self._mean, self._log_scale]


def multi_normal(loc, log_scale) -> MultiNormalDiagFromLogScale:
    """A diagonal Gaussian with mean `loc` and standard deviations `exp(log_scale)`.

    Example:
        >>> dist = multi_normal(fnp.zeros(3), fnp.zeros(3))
        >>> samples = dist.sample((10,), random.PRNGKey(0))
    """
    return MultiNormalDiagFromLogScale(loc=loc, log_scale=log_scale)
