"""Derivatives where JAX 0.10.2 is wrong and the closed form is simple: hypot's second
derivative where |x| == |y| (JAX: 0), x ** 0. differentiated twice at 0 (JAX: NaN) and the
gradient of std over a length-1 axis (JAX: NaN). Checked in float64 against the closed forms
and by central differences (`check_grads`)."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.test_util import check_grads


def hypot_hessian(x, y):
    """The Hessian of sqrt(x^2 + y^2): [[y^2, -xy], [-xy, x^2]] / r^3."""
    r3 = np.hypot(x, y) ** 3
    return np.array([[y * y, -x * y], [-x * y, x * x]]) / r3


@pytest.mark.parametrize("x, y", [(2.0, 2.0), (-2.0, 2.0), (3.0, -3.0), (3.0, 4.0),
                                  (1e-3, 1e-3), (-1.5, 0.25)])
def test_hypot_second_derivatives_match_the_closed_form(x, y):
    fg.config.update("enable_x64", True)
    hess = fg.hessian(lambda v: fnp.hypot(v[0], v[1]))(np.array([x, y]))
    np.testing.assert_allclose(hess, hypot_hessian(x, y), rtol=1e-12)
    jitted = fg.jit(fg.hessian(lambda v: fnp.hypot(v[0], v[1])))(np.array([x, y]))
    np.testing.assert_allclose(jitted, hypot_hessian(x, y), rtol=1e-12)
    check_grads(fnp.hypot, (x, y), order=2, eps=1e-4 * min(1.0, abs(x)))


def test_hypot_values_batching_and_its_gradient_at_the_origin():
    x = np.array([2.0, -3.0, 0.0, np.inf, np.nan, 1e30, np.inf, 1e-30], np.float32)
    y = np.array([2.0, 4.0, 0.0, np.nan, 1.0, 1e30, -np.inf, 0.0], np.float32)
    np.testing.assert_array_equal(np.asarray(fnp.hypot(x, y)), np.hypot(x, y))
    np.testing.assert_array_equal(np.asarray(fg.jit(fnp.hypot)(x, y)), np.hypot(x, y))
    g = fg.vmap(fg.grad(fnp.hypot, argnums=(0, 1)))(x[:3], y[:3])
    want = [[2 / np.sqrt(8), -3 / 5, 0.0], [2 / np.sqrt(8), 4 / 5, 0.0]]  # 0 at (0, 0)
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6)


def test_power_zero_differentiated_twice_at_zero_is_zero():
    fg.config.update("enable_x64", True)
    f = lambda x: x ** 0.0  # noqa: E731
    for x in (0.0, -0.0, 2.0, -3.0):
        assert float(fg.grad(f)(x)) == 0.0
        assert float(fg.grad(fg.grad(f))(x)) == 0.0
        assert float(fg.jit(fg.grad(fg.grad(f)))(x)) == 0.0
    np.testing.assert_allclose(fg.grad(fg.grad(lambda x: x ** 2.0))(0.0), 2.0)
    np.testing.assert_allclose(fg.grad(fg.grad(lambda x: x ** 0.5))(4.0), -1 / 32)
    check_grads(lambda x, y: fnp.power(x, y), (1.7, 0.0), order=2)  # d2/dxdy = 1 / x there
    np.testing.assert_allclose(fg.grad(fg.grad(fnp.power), 1)(1.7, 0.0), 1 / 1.7, rtol=1e-12)
    for x in (0.0, np.inf, np.nan):  # y == 0: x ** 0 == 1 for every x, so d/dx is 0
        assert float(fg.grad(fnp.power)(x, 0.0)) == 0.0
    check_grads(lambda x, y: fnp.power(x, y), (np.array([0.5, 2.0]), np.array([3.0, -1.5])),
                order=2)


def test_std_over_a_length_one_axis_has_gradient_zero():
    fg.config.update("enable_x64", True)
    x = np.array([[1.0], [-2.0], [3.5]])
    assert np.array_equal(fg.grad(lambda v: fnp.std(v, axis=1).sum())(x), np.zeros((3, 1)))
    assert np.array_equal(fg.grad(lambda v: fnp.var(v, axis=-1, keepdims=True).sum())(x),
                          np.zeros((3, 1)))
    assert np.array_equal(fg.hessian(lambda v: fnp.std(v))(np.array([4.0])), [[0.0]])
    _, tangent = fg.jvp(lambda v: fnp.std(v, axis=1), (x,), (np.ones((3, 1)),))
    assert np.array_equal(tangent, np.zeros(3))
    assert np.array_equal(fg.jit(fg.grad(lambda v: fnp.std(v, axis=0).sum()))(x.T),
                          np.zeros((1, 3)))
    np.testing.assert_array_equal(np.asarray(fnp.std(np.array([[np.inf], [1.0]]), axis=1)),
                                  [np.nan, 0.0])  # values as before
    # a longer axis keeps the ordinary derivative: (x - mean) / (n * std)
    v = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(fg.grad(fnp.std)(v), (v - v.mean()) / (3 * v.std()), rtol=1e-12)
    check_grads(lambda a: fnp.std(a, axis=0), (np.array([[1.0, 2.0], [0.5, -1.0]]),), order=2)
