"""`gaussian_kde`: kernel density estimation with Gaussian kernels, as
`jax.scipy.stats.gaussian_kde` (a pytree, so it goes through jit; differentiable in the
data, the weights and the evaluation points).

    >>> kde = gaussian_kde(fnp.array([0.0, 1.0, 2.0]))
    >>> kde(fnp.array([1.0])).shape
    (1,)
"""

import math

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.tree_util import register_pytree_node

__all__ = ["gaussian_kde"]


class gaussian_kde:  # noqa: N801  (SciPy's name)
    """A Gaussian kernel density estimate of the points `dataset` ((d, n), or (n,) for d = 1)
    with optional `weights`; `bw_method` sets the bandwidth factor: "scott" (default),
    "silverman", a scalar or a function of the estimator.

    Example:
        >>> gaussian_kde(fnp.array([0.0, 2.0]), bw_method=1.0).evaluate(fnp.array([1.0]))
        Array([0.21969567], dtype=float32)
    """

    def __init__(self, dataset, bw_method=None, weights=None):
        data = fnp.atleast_2d(fnp.asarray(dataset))
        data = data.astype(fnp.result_type(data, 1.0))
        d, n = data.shape
        if n <= 1:
            raise errors.op_error("gaussian_kde", "dataset needs more than one point",
                                  cls=errors.FuncgradValueError)
        if weights is not None:
            w = fnp.atleast_1d(fnp.asarray(weights)).astype(data.dtype)
            w = w / fnp.sum(w)
            neff = 1.0 / fnp.sum(w ** 2)
        else:  # equal weights: the effective size is n
            w = fnp.asarray(np.full((n,), 1.0 / n)).astype(data.dtype)
            neff = float(n)
        self.dataset, self.weights, self.neff = data, w, neff
        bw = "scott" if bw_method is None else bw_method
        if bw == "scott":
            factor = neff ** (-1.0 / (d + 4))
        elif bw == "silverman":
            factor = (neff * (d + 2) / 4.0) ** (-1.0 / (d + 4))
        elif callable(bw):
            factor = bw(self)
        elif isinstance(bw, (int, float)) or getattr(bw, "ndim", None) == 0:
            factor = fnp.asarray(bw, data.dtype)
        else:
            raise errors.op_error("gaussian_kde", "bw_method should be 'scott', 'silverman', "
                                  "a scalar or a callable", cls=errors.FuncgradValueError)
        cov = fnp.atleast_2d(fnp.cov(data, rowvar=True, bias=False, aweights=w))
        self.factor = factor
        self.covariance = cov * factor ** 2
        self.inv_cov = fnp.linalg.inv(cov) / factor ** 2

    @property
    def d(self):
        return self.dataset.shape[0]

    @property
    def n(self):
        return self.dataset.shape[1]

    def _points(self, points):
        p = fnp.atleast_2d(fnp.asarray(points)).astype(self.dataset.dtype)
        if p.shape[0] != self.d:
            if p.shape == (1, self.d):  # one point given as a row
                p = p.T
            else:
                raise errors.op_error("gaussian_kde", f"points have dimension {p.shape[0]}, "
                                      f"the data {self.d}", cls=errors.FuncgradValueError)
        return p

    def _log_kernels(self, points):
        """log of each data point's weighted kernel at each point: (n, m)."""
        p = self._points(points)
        diff = self.dataset[:, :, None] - p[:, None, :]
        maha = fnp.einsum("inm,ij,jnm->nm", diff, self.inv_cov, diff)
        _, logdet = fnp.linalg.slogdet(2 * math.pi * self.covariance)
        return fnp.log(self.weights)[:, None] - 0.5 * maha - 0.5 * logdet

    def evaluate(self, points):
        """The density at `points` ((d, m), or (m,) for d = 1)."""
        return fnp.sum(fnp.exp(self._log_kernels(points)), axis=0)

    __call__ = pdf = evaluate

    def logpdf(self, x):
        """The log density at `x`, from a log-sum-exp of the kernels."""
        from funcgrad.nn.functions import logsumexp
        return logsumexp(self._log_kernels(x), axis=0)

    def integrate_gaussian(self, mean, cov):
        """The integral of the density times the Gaussian N(mean, cov)."""
        mean = fnp.atleast_1d(fnp.asarray(mean)).astype(self.dataset.dtype)
        cov = fnp.atleast_2d(fnp.asarray(cov)).astype(self.dataset.dtype)
        total = self.covariance + cov
        diff = self.dataset - mean[:, None]
        sol = fnp.linalg.solve(total, diff)
        _, logdet = fnp.linalg.slogdet(2 * math.pi * total)
        return fnp.sum(self.weights * fnp.exp(-0.5 * fnp.sum(diff * sol, axis=0)
                                              - 0.5 * logdet))

    def integrate_box_1d(self, low, high):
        """The probability of [low, high] (one-dimensional data only)."""
        if self.d != 1:
            raise errors.op_error("gaussian_kde.integrate_box_1d", "needs one-dimensional "
                                  "data", cls=errors.FuncgradValueError)
        from funcgrad.scipy.special import ndtr
        sd = fnp.sqrt(self.covariance[0, 0])
        lo = (low - self.dataset[0]) / sd
        hi = (high - self.dataset[0]) / sd
        return fnp.sum(self.weights * (ndtr(hi) - ndtr(lo)))

    def integrate_kde(self, other):
        """The integral of the product of two densities of one dimension."""
        if other.d != self.d:
            raise errors.op_error("gaussian_kde.integrate_kde", "the estimators must have "
                                  "one dimension", cls=errors.FuncgradValueError)
        total = self.covariance + other.covariance
        diff = self.dataset[:, :, None] - other.dataset[:, None, :]
        sol = fnp.einsum("ij,jnm->inm", fnp.linalg.inv(total), diff)
        _, logdet = fnp.linalg.slogdet(2 * math.pi * total)
        k = fnp.exp(-0.5 * fnp.sum(diff * sol, axis=0) - 0.5 * logdet)
        return fnp.sum(self.weights[:, None] * other.weights[None, :] * k)

    def resample(self, key, shape=()):
        """Samples of the density: (d,) + shape draws from a random data point plus
        Gaussian noise of the kernel's covariance."""
        from funcgrad import random
        shape = tuple(shape)
        k1, k2 = random.split(key)
        idx = random.categorical(k1, fnp.log(self.weights), shape=shape)
        z = random.normal(k2, shape + (self.d,), self.dataset.dtype)
        noise = z @ fnp.linalg.cholesky(self.covariance).T
        return self.dataset[:, idx] + fnp.moveaxis(noise, -1, 0)

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        """Not implemented (as in JAX)."""
        raise errors.op_error("gaussian_kde.integrate_box", "is not implemented (as in JAX)",
                              cls=errors.FuncgradValueError)

    def set_bandwidth(self, bw_method=None):
        """Not implemented (as in JAX: the estimator is immutable)."""
        raise errors.op_error("gaussian_kde.set_bandwidth", "is not implemented (as in JAX: "
                              "make a new estimator)", cls=errors.FuncgradValueError)


def _flatten(k):
    return (k.dataset, k.weights, k.neff, k.factor, k.covariance, k.inv_cov), None


def _unflatten(_, children):
    k = object.__new__(gaussian_kde)
    (k.dataset, k.weights, k.neff, k.factor, k.covariance, k.inv_cov) = children
    return k


register_pytree_node(gaussian_kde, _flatten, _unflatten)
