"""funcgrad.nn's long-tail names (issue 28): identity, mish, squareplus, sparse_plus,
sparse_sigmoid, log1mexp, logmeanexp, initializers.Initializer and delta_orthogonal, against
NumPy formulas (float64 references), with derivatives, vmap and jit."""

import numpy as np
import pytest
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.random as random

X = np.array([-3.0, -1.0, -0.4, 0.0, 0.3, 1.0, 2.5], np.float32)
SMOOTH = np.array([-2.7, -0.6, 0.3, 1.7, 4.0], np.float32)  # away from kinks


def _softplus(x):
    return np.logaddexp(x, 0)


@pytest.mark.parametrize("name,ref,smooth", [
    ("identity", lambda x: x, SMOOTH),
    ("mish", lambda x: x * np.tanh(_softplus(x)), SMOOTH),
    ("squareplus", lambda x: (x + np.sqrt(x * x + 4)) / 2, SMOOTH),
    ("sparse_plus", lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
     np.array([-2.5, -0.6, 0.3, 0.9, 4.0], np.float32)),
    ("sparse_sigmoid", lambda x: np.clip((x + 1) / 2, 0, 1),
     np.array([-2.5, -0.6, 0.3, 0.9, 4.0], np.float32)),
])
def test_activations(name, ref, smooth):
    f = getattr(nn, name)
    close(f(X), ref(X.astype(np.float64)).astype(np.float32), 1e-6, 1e-6)
    check_all(f, (smooth,), ref(smooth.astype(np.float64)), grad=(0,), order=2)


def test_squareplus_b_and_log1mexp():
    close(nn.squareplus(X, 1.0), (X + np.sqrt(X * X + 1.0)) / 2, 1e-6)
    x = np.array([1e-10, 1e-4, 0.3, np.log(2.0), 2.0, 50.0], np.float64)
    fg.config.update("enable_x64", True)
    close(nn.log1mexp(x), np.log(-np.expm1(-x)), 1e-14)
    fg.config.update("enable_x64", False)
    g = fg.grad(lambda v: nn.log1mexp(v).sum())(np.float32([1e-6, 0.3, 40.0]))
    close(g, 1 / np.expm1(np.float64([1e-6, 0.3, 40.0])), 1e-5)  # finite everywhere
    check_all(nn.log1mexp, (np.array([0.1, 0.6, 0.7, 3.0], np.float32),), grad=(0,), order=2)


def test_logmeanexp():
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32) * 30
    ref = lambda x, axis: np.log(np.mean(np.exp(x.astype(np.float64)), axis=axis))
    close(nn.logmeanexp(x, axis=1), ref(x, 1), 1e-5)
    close(nn.logmeanexp(x), ref(x, None), 1e-5)
    mask = np.array([True, False, True, True])
    close(nn.logmeanexp(x, axis=1, where=mask), ref(x[:, mask], 1), 1e-5)
    assert nn.logmeanexp(x, axis=0, keepdims=True).shape == (1, 4)
    check_all(lambda x: nn.logmeanexp(x, axis=-1), (x / 30,), grad=(0,), order=2)


def test_delta_orthogonal():
    init = nn.initializers.delta_orthogonal(scale=2.0)
    assert isinstance(nn.initializers.Initializer, type)
    for shape in ((3, 4, 4), (3, 3, 2, 5), (3, 3, 3, 4, 4)):
        w = np.asarray(init(random.PRNGKey(1), shape))
        center = tuple((k - 1) // 2 for k in shape[:-2])
        c = w[center]
        close(c @ c.T, 4.0 * np.eye(shape[-2]), 0, 1e-5)  # orthogonal rows times the scale
        assert np.abs(w).sum() == pytest.approx(np.abs(c).sum())
    with pytest.raises(ValueError, match="3-D, 4-D or 5-D"):
        init(random.PRNGKey(0), (4, 4))
    with pytest.raises(ValueError, match="fan_in"):
        init(random.PRNGKey(0), (3, 5, 4))
