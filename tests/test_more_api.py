"""The rest of issue 28's API: tree_util's class decorators and Partial, linear_transpose,
closure_convert, custom_gradient, clear_caches, live_arrays, print_environment_info,
funcgrad.typing, jax.dtypes' extended categories and ravel_pytree under transforms."""

import functools

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import dtypes, errors
from funcgrad.flatten_util import ravel_pytree
from funcgrad.test_util import check_grads
from funcgrad.tree_util import (
    GetAttrKey,
    Partial,
    keystr,
    register_pytree_node_class,
    register_pytree_with_keys_class,
    register_static,
    tree_flatten_with_path,
    tree_leaves,
    tree_structure,
)


@register_pytree_node_class
class Affine:
    def __init__(self, w, b, name="affine"):
        self.w, self.b, self.name = w, b, name

    def tree_flatten(self):
        return (self.w, self.b), self.name

    @classmethod
    def tree_unflatten(cls, name, children):
        return cls(*children, name=name)

    def __call__(self, x):
        return x @ self.w + self.b


@register_pytree_with_keys_class
class Keyed:
    def __init__(self, a):
        self.a = a

    def tree_flatten_with_keys(self):
        return ((GetAttrKey("a"), self.a),), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


@register_static
class Mode(str):
    pass


def test_class_decorators_with_transforms():
    layer = Affine(fnp.ones((3, 2)), fnp.zeros(2))
    x = fnp.ones((4, 3))
    g = fg.grad(lambda m: m(x).sum())(layer)
    assert isinstance(g, Affine) and g.name == "affine"
    np.testing.assert_allclose(g.w, 4 * np.ones((3, 2)))
    np.testing.assert_allclose(fg.jit(lambda m, x: m(x))(layer, x), 3 * np.ones((4, 2)))
    assert keystr(tree_flatten_with_path(Keyed(1))[0][0][0]) == ".a"
    f = fg.jit(lambda x, mode: x + 1 if mode == "add" else x - 1)
    np.testing.assert_allclose(f(1.0, Mode("add")), 2.0)
    np.testing.assert_allclose(f(1.0, Mode("sub")), 0.0)
    assert f.trace_count == 2 and tree_leaves([1, Mode("x")]) == [1]


def test_partial_is_a_pytree_of_its_arguments():
    add_one = Partial(fnp.add, 1.0)
    assert tree_leaves(add_one) == [1.0]
    call = fg.jit(lambda f, x: f(x))
    np.testing.assert_allclose(call(add_one, 2.0), 3.0)
    np.testing.assert_allclose(call(Partial(fnp.add, 5.0), 2.0), 7.0)
    assert call.trace_count == 1  # same function, new bound values: no new trace
    inner = functools.partial(fnp.multiply, 2.0)
    p = Partial(inner, 3.0)
    assert tree_leaves(p) == [3.0]  # the functools.partial's own arguments stay static
    np.testing.assert_allclose(p(), 6.0)
    assert tree_structure(Partial(inner)) == tree_structure(Partial(inner))
    np.testing.assert_allclose(fg.grad(lambda s: Partial(fnp.multiply, s)(3.0))(2.0), 3.0)


def test_linear_transpose():
    a = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    t = fg.linear_transpose(lambda x: fnp.asarray(a) @ x, fnp.ones(2))
    (ct,) = t(fnp.array([1.0, 0.0, 2.0]))
    np.testing.assert_allclose(ct, a.T @ np.array([1.0, 0.0, 2.0]))
    np.testing.assert_allclose(fg.jit(lambda c: t(c)[0])(fnp.ones(3)), a.T @ np.ones(3))
    t2 = fg.linear_transpose(lambda d: {"s": d["x"] + 2 * d["y"]},
                             {"x": fnp.ones(2), "y": fnp.ones(2)})
    (back,) = t2({"s": fnp.array([1.0, 2.0])})
    np.testing.assert_allclose(back["y"], [2.0, 4.0])
    with pytest.raises(errors.FuncgradTypeError, match="float or complex"):
        fg.linear_transpose(lambda i: i * 2, fnp.ones(2, fnp.int32))
    with pytest.raises(errors.FuncgradTypeError, match="structured and shaped"):
        t(fnp.ones(4))


def test_closure_convert_hoists_traced_inexact_values():
    conv, consts = fg.closure_convert(lambda x: x * 2 + fnp.ones(3), fnp.ones(3))
    assert consts == []  # nothing traced is closed over
    np.testing.assert_allclose(conv(fnp.arange(3.0)), [1.0, 3.0, 5.0])

    def outer(s):
        conv, consts = fg.closure_convert(lambda x: fnp.sin(x * s), 1.0)
        assert len(consts) == 1
        return conv(0.5, *consts)
    np.testing.assert_allclose(fg.grad(outer)(2.0), 0.5 * np.cos(1.0), rtol=1e-6)
    np.testing.assert_allclose(fg.jit(outer)(2.0), np.sin(1.0), rtol=1e-6)


def test_custom_gradient():
    @fg.custom_gradient
    def clip_grad(x):
        return x, lambda g: fnp.clip(g, -1.0, 1.0)
    np.testing.assert_allclose(fg.grad(lambda x: 5 * clip_grad(x))(2.0), 1.0)

    @fg.custom_gradient
    def mul(x, y):
        return x * y, lambda g: (g * y, g * x)
    np.testing.assert_allclose(fg.grad(mul, (0, 1))(2.0, 3.0), (3.0, 2.0))
    np.testing.assert_allclose(fg.jit(fg.vmap(fg.grad(mul)))(fnp.ones(3), fnp.arange(3.0)),
                               [0.0, 1.0, 2.0])
    with fg.enable_x64(True):
        check_grads(mul, (np.array(1.5), np.array(-0.5)), order=1, modes=["rev"])


def test_clear_caches_and_live_arrays():
    f = fg.jit(lambda x: fnp.cos(x) * 2)
    f(fnp.ones(2))
    assert f.cache_info().size == 1
    fg.clear_caches()
    assert f.cache_info().size == 0
    np.testing.assert_allclose(f(fnp.zeros(2)), [2.0, 2.0])
    assert f.trace_count == 2
    x = fnp.arange(5.0)
    assert any(a is x for a in fg.live_arrays()) and any(a is x for a in
                                                          fg.live_arrays("cpu"))
    fg.effects_barrier()


def test_print_environment_info(capsys):
    text = fg.print_environment_info(return_string=True)
    assert text.startswith("funcgrad:") and f"numpy:      {np.__version__}" in text
    assert fg.print_environment_info() is None and capsys.readouterr().out == text


def test_typing_and_extended_dtypes():
    from funcgrad import typing as ft

    def scale(x: ft.ArrayLike, dtype: ft.DTypeLike = None) -> ft.Array:
        return fnp.asarray(x, dtype) * 2
    assert isinstance(scale(1), ft.Array) and isinstance(fnp.ones(1), ft.ArrayLike)
    assert isinstance(fnp.float32, ft.SupportsDType)

    class KeyDtype:  # as funcgrad.random's typed keys describe their dtype
        impl = "threefry2x32"
    assert dtypes.issubdtype(KeyDtype(), dtypes.prng_key)
    assert dtypes.issubdtype(KeyDtype(), dtypes.extended)
    assert not dtypes.issubdtype(KeyDtype(), np.floating)
    assert not dtypes.issubdtype(np.float32, dtypes.prng_key)
    with pytest.raises(ValueError, match="extended"):
        dtypes.canonicalize_dtype(KeyDtype())
    assert isinstance(dtypes.canonicalize_dtype(KeyDtype(), allow_extended_dtype=True),
                      KeyDtype)
    assert fg.float0 is dtypes.float0 and fg.float0.itemsize == 0
    assert dtypes.finfo(fnp.float32).eps == np.finfo(np.float32).eps
    assert dtypes.iinfo("int8").max == 127


def test_ravel_pytree_under_transforms():
    tree = {"w": fnp.ones((2, 2)), "b": fnp.arange(2.0)}
    flat, unravel = ravel_pytree(tree)
    np.testing.assert_allclose(fg.jit(lambda t: ravel_pytree(t)[0])(tree), flat)
    g = fg.grad(lambda t: fnp.sum(ravel_pytree(t)[0] ** 2))(tree)
    np.testing.assert_allclose(g["b"], [0.0, 2.0])
    np.testing.assert_allclose(fg.grad(lambda v: unravel(v)["w"].sum())(flat),
                               [0, 0, 1, 1, 1, 1])
    assert fg.vmap(unravel)(fnp.stack([flat, flat]))["w"].shape == (2, 2, 2)
    with pytest.raises(errors.FuncgradValueError, match="6 elements"):
        unravel(fnp.ones(5))
    _, unravel_mixed = ravel_pytree([fnp.ones(2), fnp.arange(2)])
    with pytest.raises(errors.FuncgradTypeError, match="expected dtype float32"):
        unravel_mixed(fnp.ones(4, fnp.int32))
