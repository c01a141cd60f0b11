"""eval_shape, ShapeDtypeStruct and typeof: JAX's behaviour (weak types, pytrees, static
arguments through functools.partial), no computation run, and ShapeDtypeStructs as `jit`
lowering arguments."""

import functools
import tracemalloc

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.core import ShapedArray

S = fg.ShapeDtypeStruct


def test_shape_dtype_struct_is_jaxs():
    a = S((3,), np.float64)
    assert (a.shape, a.dtype, a.ndim, a.size, a.sharding, a.weak_type) == (
        (3,), np.dtype("float64"), 1, 3, None, False)  # kept as given, as in JAX
    assert repr(a) == "ShapeDtypeStruct(shape=(3,), dtype=float64)"
    assert repr(S((), "float32", weak_type=True)) == \
        "ShapeDtypeStruct(shape=(), dtype=float32, weak_type=True)"
    assert a == S([3], "float64") and hash(a) == hash(S([3], "float64"))
    assert a != S((3,), np.float64, weak_type=True)
    assert len(S((4, 2), np.int32)) == 4
    with pytest.raises(TypeError):
        len(S((), np.int32))
    assert a.update(shape=(5,), dtype=np.int8) == S((5,), np.int8)
    assert fg.tree_util.tree_leaves([a]) == [a]  # a leaf, as in JAX
    with pytest.raises(errors.FuncgradTypeError, match="ints"):
        S((2.5,), np.float32)
    with pytest.raises(errors.FuncgradTypeError, match="not understood"):
        S((2,), "no-such-dtype")
    with pytest.raises(errors.FuncgradValueError, match="negative"):
        S((-1,), np.float32)


def test_eval_shape_of_pytrees_partials_and_weak_types():
    out = fg.eval_shape(lambda x, y: {"a": x @ y, "b": (x.sum(), x > 0)},
                        S((2, 3), np.float32), fnp.ones((3, 4)))
    assert out == {"a": S((2, 4), np.float32),
                   "b": (S((), np.float32), S((2, 3), np.bool_))}
    reshape = functools.partial(lambda n, x: x.reshape(n, -1), 2)  # a static argument
    assert fg.eval_shape(reshape, S((6,), np.int32)) == S((2, 3), np.int32)
    assert fg.eval_shape(lambda x: x * 2, 1.0) == S((), np.float32, weak_type=True)
    assert fg.eval_shape(lambda x: x * 2, S((2,), np.float32, weak_type=True)).weak_type
    assert fg.eval_shape(lambda x: x, S((3,), np.float64)).dtype == np.float32  # x64 off
    assert fg.eval_shape(lambda: 3) == S((), np.int32, weak_type=True)
    assert fg.eval_shape(lambda x, k=1.0: x * k, fnp.ones(2), k=fnp.ones(2, fnp.int32)) == \
        S((2,), np.float32)
    with fg.enable_x64(True):
        assert fg.eval_shape(lambda x: x, S((3,), np.float64)).dtype == np.float64


def test_eval_shape_runs_nothing():
    """A program of 32 GiB (one product of a 2**33-element matrix) is only traced."""
    tracemalloc.start()
    out = fg.eval_shape(lambda x: fnp.tanh(fnp.ones((1 << 15, 1 << 15, 8)) @ x) * 2,
                        S((8,), np.float32))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert out == S((1 << 15, 1 << 15), np.float32)
    assert peak < 16 << 20
    calls = []
    fg.eval_shape(lambda x: fg.debug.callback(calls.append, x) or x, S((2,), np.float32))
    assert calls == []  # the effect is traced, not run


def test_eval_shape_composes_with_transforms_and_jit():
    f = fg.jit(lambda x: fnp.sin(x) @ x)
    assert fg.eval_shape(f, S((3, 3), np.float32)) == S((3, 3), np.float32)
    assert fg.eval_shape(fg.grad(lambda x: (x ** 2).sum()), S((5,), np.float32)) == \
        S((5,), np.float32)
    assert fg.eval_shape(fg.vmap(lambda x: x.sum()), S((4, 3), np.float32)) == \
        S((4,), np.float32)

    def inside(x):  # under jit, on traced arguments
        s = fg.eval_shape(lambda y: y[:, None] * y, x)
        assert s == S((3, 3), np.float32)
        return x
    fg.jit(inside)(fnp.ones(3))


def test_eval_shape_errors_name_the_argument():
    with pytest.raises(errors.FuncgradTypeError, match=r"args\[1\]"):
        fg.eval_shape(lambda x, s: x, fnp.ones(2), "text")
    with pytest.raises(errors.FuncgradTypeError, match=r"kwargs\['s'\]"):
        fg.eval_shape(lambda x, s: x, fnp.ones(2), s=object())


def test_jit_lower_takes_shape_dtype_structs():
    f = fg.jit(lambda x, y: x @ y + 1)
    low = f.lower(S((2, 3), np.float32), S((3,), np.float64))
    assert "f32[2,3]" in low.as_text() and "f32[3]" in low.as_text()
    np.testing.assert_allclose(low.compile()(fnp.ones((2, 3)), fnp.ones(3)), [4.0, 4.0])
    assert f.lower(S((2, 3), np.float32), fnp.ones(3)).as_text() == low.as_text()
    weak = fg.jit(lambda x: x * 2).lower(S((), np.float32, weak_type=True))
    assert "a:f32[]" in weak.as_text()
    with pytest.raises(errors.FuncgradTypeError, match="`x` is a ShapeDtypeStruct"):
        f(S((2, 3), np.float32), fnp.ones(3))


def test_typeof():
    assert fg.typeof(fnp.ones((2, 3))) == ShapedArray((2, 3), np.dtype("float32"))
    assert fg.typeof(1.0).weak_type and fg.typeof(np.ones(2)).dtype == np.float32
    assert fg.typeof(S((4,), np.int8)) == ShapedArray((4,), np.dtype("int8"))
    seen = []
    fg.jit(lambda x: seen.append(fg.typeof(x)) or x)(fnp.ones(3, fnp.int32))
    assert seen == [ShapedArray((3,), np.dtype("int32"))]
