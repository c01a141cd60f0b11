"""funcgrad.nn functions: values vs float64 NumPy, derivatives, extreme float32 inputs, masks."""

import math

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import nn
from funcgrad.test_util import check_grads

X = np.array([-30.0, -3.0, -1.0, -0.25, 0.3, 1.0, 2.5, 7.0, 40.0], np.float32)


def _np_sigmoid(x):
    return np.exp(-np.logaddexp(0, -x))


NUMPY = {  # float64 references
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.clip(x, 0, 6),
    "sigmoid": _np_sigmoid,
    "log_sigmoid": lambda x: -np.logaddexp(0, -x),
    "softplus": lambda x: np.logaddexp(0, x),
    "soft_sign": lambda x: x / (np.abs(x) + 1),
    "silu": lambda x: x * _np_sigmoid(x),
    "swish": lambda x: x * _np_sigmoid(x),
    "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "tanh": np.tanh,
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "celu": lambda x: np.maximum(x, 0) + np.minimum(np.expm1(x), 0),
    "selu": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772
                                                    * np.expm1(np.minimum(x, 0))),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
}


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_elementwise_values(name):
    got = np.asarray(getattr(nn, name)(fnp.asarray(X)))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, NUMPY[name](X.astype(np.float64)), rtol=2e-6, atol=1e-6)


def test_gelu_exact():
    from math import erf
    want = [x * (1 + erf(x / math.sqrt(2))) / 2 for x in X.astype(np.float64)]
    np.testing.assert_allclose(nn.gelu(fnp.asarray(X), approximate=False), want, rtol=1e-5,
                               atol=1e-6)


SMOOTH = ["sigmoid", "log_sigmoid", "softplus", "silu", "tanh", "gelu", "soft_sign", "selu"]


@pytest.mark.parametrize("name", SMOOTH)
def test_elementwise_derivatives(name):
    check_grads(getattr(nn, name), (np.array([-2.0, -0.5, 0.7, 3.0]),), order=2)


def test_derivatives_at_kinks_follow_jax():
    d = lambda f, x: np.asarray(fg.grad(lambda v: f(v).sum())(fnp.asarray(x, fnp.float32)))
    np.testing.assert_array_equal(d(nn.relu, [-1.0, 0.0, 2.0]), [0, 0, 1])
    np.testing.assert_array_equal(d(nn.relu6, [0.0, 3.0, 6.0, 7.0]), [0, 1, 0, 0])
    np.testing.assert_allclose(d(nn.softplus, [-100.0, 0.0, 100.0]), [0, 0.5, 1], atol=1e-30)
    np.testing.assert_allclose(d(nn.log_sigmoid, [-100.0, 0.0, 100.0]), [1, 0.5, 0],
                               atol=1e-30)
    np.testing.assert_allclose(d(nn.elu, [-1000.0, 0.5]), [0, 1])
    np.testing.assert_allclose(d(nn.hard_tanh, [-2.0, 0.5, 2.0]), [0, 1, 0])


def test_extreme_inputs_are_finite_in_float32():
    x = fnp.array([-1000.0, -100.0, 0.0, 100.0, 1000.0])
    for f in (nn.sigmoid, nn.log_sigmoid, nn.softplus, nn.silu, nn.elu, nn.gelu, nn.tanh,
              nn.celu, nn.selu):
        y = f(x)
        g = fg.grad(lambda v, f=f: f(v).sum())(x)
        assert np.isfinite(np.asarray(y)).all() and np.isfinite(np.asarray(g)).all(), f
    np.testing.assert_allclose(nn.softplus(x), [0, 0, np.log(2), 100, 1000], rtol=1e-6,
                               atol=1e-30)
    np.testing.assert_allclose(nn.log_sigmoid(x), [-1000, -100, -np.log(2), 0, 0],
                               rtol=1e-6, atol=1e-30)


def _np_log_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


LOGITS = [[100.0, 100.0, 101.0], [0.0, -1000.0, 5.0], [1000.0, 1000.0, -1000.0],
          [-3.0, 0.5, 2.0]]


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_family_values(axis):
    x = fnp.array(LOGITS)
    ls = _np_log_softmax(LOGITS, axis)
    np.testing.assert_allclose(nn.log_softmax(x, axis=axis), ls, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(nn.softmax(x, axis=axis), np.exp(ls), rtol=1e-6, atol=1e-7)
    x64 = np.asarray(LOGITS, np.float64)
    lse = np.log(np.exp(x64 - x64.max(axis, keepdims=True)).sum(axis)) + x64.max(axis)
    np.testing.assert_allclose(nn.logsumexp(x, axis=axis), lse, rtol=1e-6)
    np.testing.assert_allclose(nn.logsumexp(x, axis=axis, keepdims=True),
                               np.expand_dims(lse, axis), rtol=1e-6)


def test_softmax_family_gradients_are_finite_and_right():
    x = fnp.array(LOGITS)
    for f in (lambda x: nn.log_softmax(x)[:, 0].sum(), lambda x: nn.softmax(x)[:, 2].sum(),
              lambda x: nn.logsumexp(x, axis=1).sum()):
        g = np.asarray(fg.grad(f)(x))
        assert np.isfinite(g).all()
    g = np.asarray(fg.grad(lambda x: nn.logsumexp(x, axis=1).sum())(x))
    np.testing.assert_allclose(g, np.exp(_np_log_softmax(LOGITS)), atol=1e-6)
    small = (np.array([[0.3, -1.2, 2.0], [1.0, 0.1, -0.4]]),)
    check_grads(lambda x: nn.log_softmax(x), small, order=2)
    check_grads(lambda x: nn.softmax(x, axis=0), small, order=2)
    check_grads(lambda x: nn.logsumexp(x, axis=1), small, order=2)
    check_grads(lambda x: nn.standardize(x), small, order=1)


def test_masks_and_scales():
    x = fnp.array([1.0, 2.0, 3.0])
    m = fnp.array([True, False, True])
    ref = _np_log_softmax([1.0, 3.0])
    np.testing.assert_allclose(nn.log_softmax(x, where=m), [ref[0], -np.inf, ref[1]],
                               rtol=1e-6)
    np.testing.assert_allclose(nn.softmax(x, where=m), [np.exp(ref[0]), 0, np.exp(ref[1])],
                               rtol=1e-6)
    np.testing.assert_allclose(nn.logsumexp(x, where=m), np.log(np.e + np.e ** 3), rtol=1e-6)
    g = np.asarray(fg.grad(lambda x: nn.softmax(x, where=m)[0])(x))
    assert np.isfinite(g).all() and g[1] == 0
    b = fnp.array([2.0, 0.0, 0.5])
    np.testing.assert_allclose(nn.logsumexp(x, b=b), np.log(2 * np.e + 0.5 * np.e ** 3),
                               rtol=1e-6)
    out, sign = nn.logsumexp(x, b=fnp.array([1.0, 0.0, -1.0]), return_sign=True)
    np.testing.assert_allclose([out, sign], [np.log(np.e ** 3 - np.e), -1], rtol=1e-6)
    assert np.isnan(nn.logsumexp(x, b=fnp.array([1.0, 0.0, -1.0])))
    assert float(nn.logsumexp(fnp.array([-np.inf, -np.inf]))) == -np.inf


def test_one_hot_and_standardize():
    np.testing.assert_array_equal(nn.one_hot(fnp.array([0, 2, 3, -1]), 3),
                                  [[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]])
    oh = nn.one_hot(fnp.array([[0, 1]]), 3, axis=0)
    assert oh.shape == (3, 1, 2) and oh.dtype == np.float32
    assert nn.one_hot(fnp.array([1]), 2, dtype=fnp.int32).dtype == np.int32
    x = np.array([[1.0, 2.0, 4.0], [0.0, 0.0, 3.0]], np.float32)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(nn.standardize(fnp.asarray(x)), want, rtol=1e-5)
    np.testing.assert_allclose(nn.glu(fnp.array([2.0, 0.0])), [1.0])


def test_functions_under_jit_and_vmap():
    x = fnp.asarray(np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32))
    for f in (nn.softmax, nn.log_softmax, lambda v: nn.logsumexp(v, axis=-1), nn.gelu,
              nn.softplus, nn.standardize, lambda v: nn.one_hot(fnp.argmax(v, -1), 5)):
        eager = np.asarray(f(x))
        np.testing.assert_allclose(fg.jit(f)(x), eager, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(fg.vmap(f)(x), eager, rtol=1e-6, atol=1e-7)
