"""pure_callback: NumPy code inside jit/vmap/loops, JAX's vmap methods (their shapes are in
test_jax_api_golden.py), no derivative (custom_jvp gives one), clear errors."""

import functools

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.callbacks import VmapMethodError
from funcgrad.test_util import check_grads

S = fg.ShapeDtypeStruct


def np_sin(x):
    return np.sin(np.asarray(x))


def sin_cb(x, vmap_method="expand_dims"):
    return fg.pure_callback(np_sin, S(x.shape, x.dtype), x, vmap_method=vmap_method)


def test_values_eager_jit_and_pytrees():
    x = fnp.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(sin_cb(x), np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(fg.jit(sin_cb)(x), np.sin(x), rtol=1e-6)

    def stats(d, scale=1.0):
        v = np.asarray(d["v"])
        return {"mean": np.float32(v.mean() * scale), "sorted": np.sort(v)}
    out = fg.jit(lambda v: fg.pure_callback(
        stats, {"mean": S((), np.float32), "sorted": S(v.shape, v.dtype)}, {"v": v},
        scale=2.0))(fnp.array([3.0, 1.0, 2.0]))
    np.testing.assert_allclose(out["mean"], 4.0)
    np.testing.assert_allclose(out["sorted"], [1.0, 2.0, 3.0])


def test_inside_loops_and_vmap_methods_against_a_loop():
    xs = fnp.arange(6.0).reshape(3, 2)
    want = np.stack([np.sin(np.asarray(x)) for x in xs])
    for method in ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                   "legacy_vectorized"):
        got = fg.jit(fg.vmap(functools.partial(sin_cb, vmap_method=method)))(xs)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=method)
    carry = lax.fori_loop(0, 3, lambda i, c: sin_cb(c) + 1.0, fnp.zeros(2))
    c = np.zeros(2)
    for _ in range(3):
        c = np.sin(c) + 1.0
    np.testing.assert_allclose(carry, c, rtol=1e-6)
    # nested vmaps: the inner batch axis is an operand axis for the outer one
    got = fg.vmap(fg.vmap(functools.partial(sin_cb, vmap_method="sequential")))(
        fnp.ones((2, 3, 4)))
    np.testing.assert_allclose(got, np.sin(np.ones((2, 3, 4))), rtol=1e-6)


def test_vmap_without_a_method_is_jaxs_error():
    with pytest.raises(VmapMethodError, match="vmap_method"):
        fg.vmap(lambda x: fg.pure_callback(np_sin, S((), np.float32), x))(fnp.ones(3))
    with pytest.raises(NotImplementedError):  # (as JAX's)
        fg.vmap(lambda x: fg.pure_callback(np_sin, S((), np.float32), x))(fnp.ones(3))


def test_no_derivative_but_custom_jvp_gives_one():
    with pytest.raises(errors.FuncgradValueError, match="custom_jvp"):
        fg.grad(lambda x: sin_cb(x).sum())(fnp.ones(2))

    @fg.custom_jvp
    def f(x):
        return sin_cb(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        cos = fg.pure_callback(lambda v: np.cos(np.asarray(v)), S(x.shape, x.dtype), x,
                               vmap_method="expand_dims")
        return f(x), cos * t
    fg.config.update("enable_x64", True)
    try:
        x = np.array([0.3, -1.2])
        check_grads(f, (x,), order=1, modes=["fwd", "rev"])
        np.testing.assert_allclose(fg.jit(fg.vmap(fg.grad(lambda v: f(v).sum())))(
            x.reshape(2, 1)), np.cos(x).reshape(2, 1), rtol=1e-12)
    finally:
        fg.config.update("enable_x64", False)


def test_errors():
    x = fnp.ones(3)
    with pytest.raises(errors.FuncgradValueError, match="allowed methods"):
        fg.pure_callback(np_sin, S((3,), np.float32), x, vmap_method="bogus")
    with pytest.raises(errors.FuncgradValueError, match="64-bit"):
        fg.pure_callback(np_sin, S((3,), np.float64), x)
    with pytest.raises(errors.FuncgradValueError, match=r"f32\[3\]"):
        fg.jit(lambda x: fg.pure_callback(lambda v: np.zeros(2), S((3,), np.float32), x))(x)
    with pytest.raises(errors.FuncgradValueError, match="returned 2"):
        fg.pure_callback(lambda v: (v, v), S((3,), np.float32), x)
    with pytest.raises(errors.FuncgradTypeError, match="shape and a dtype"):
        fg.pure_callback(np_sin, 3, x)
    with pytest.raises(ZeroDivisionError):  # the user's exception, as itself
        fg.jit(lambda x: fg.pure_callback(lambda v: 1 / 0, S((3,), np.float32), x))(x)
