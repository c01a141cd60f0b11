"""Bad input to funcgrad.numpy gives a funcgrad error that names the operation, the shapes or
dtypes involved and the user's source line (this file), never a NumPy traceback.
"""

import re

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.errors import (
    ConcretizationTypeError,
    FuncgradError,
    FuncgradTypeError,
    FuncgradValueError,
)

_THIS = re.escape(__file__.rsplit("/", 1)[-1])


def _raises(cls, *fragments):
    """pytest.raises for `cls` whose message holds every fragment and this file's name."""
    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(cls)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            suppressed = self.ctx.__exit__(*exc)
            msg = str(self.info.value)
            for f in fragments:
                assert f in msg, f"{f!r} not in message:\n{msg}"
            assert re.search(_THIS + r":\d+", msg), f"no user line in message:\n{msg}"
            return suppressed
    return _Check()


def test_matmul_shape_mismatch_names_both_shapes_and_line():
    a, b = fnp.ones((3, 4)), fnp.ones((5, 6))
    with _raises(FuncgradTypeError, "matmul", "(3, 4)", "(5, 6)") as info:
        a @ b
    assert "a @ b" in str(info.value)  # the source text of the user's line
    with _raises(FuncgradTypeError, "matmul", "(2, 3, 4)", "(5,)"):
        fnp.matmul(fnp.ones((2, 3, 4)), fnp.ones(5))
    with _raises(FuncgradValueError, "matmul", "()"):
        fnp.matmul(fnp.ones(()), fnp.ones(3))
    with _raises(FuncgradTypeError, "dot", "(2, 3)", "(4,)"):
        fnp.dot(fnp.ones((2, 3)), fnp.ones(4))


def test_incompatible_broadcast_names_function_and_shapes():
    with _raises(FuncgradValueError, "add", "(2, 3)", "(4,)") as info:
        fnp.ones((2, 3)) + fnp.ones(4)
    assert "fnp.ones((2, 3)) + fnp.ones(4)" in str(info.value)
    with _raises(FuncgradValueError, "where", "(2,)", "(3,)"):
        fnp.where(fnp.ones(2) > 0, fnp.ones(3), 0.0)
    with _raises(FuncgradValueError, "maximum", "(2, 1, 3)", "(4, 2)"):
        fnp.maximum(fnp.ones((2, 1, 3)), fnp.ones((4, 2)))
    with _raises(FuncgradValueError, "broadcast_to", "(3,)", "(4,)"):
        fnp.broadcast_to(fnp.ones(3), (4,))


def test_broadcast_error_inside_a_trace_names_the_line():
    def f(x, y):
        return x * y
    with _raises(FuncgradValueError, "multiply", "(2,)", "(3,)") as info:
        fg.make_jaxpr(f)(fnp.ones(2), fnp.ones(3))
    assert "return x * y" in str(info.value)


def test_bad_axes_and_shapes():
    x = fnp.ones((2, 3))
    with _raises(FuncgradValueError, "sum", "axis 2", "dimension 2"):
        x.sum(axis=2)
    with _raises(FuncgradValueError, "mean", "repeated axis"):
        fnp.mean(x, axis=(0, -2))
    with _raises(FuncgradValueError, "reshape", "(2, 3)", "(4, -1)"):
        x.reshape(4, -1)
    with _raises(FuncgradValueError, "reshape", "(5,)"):
        fnp.reshape(x, 5)
    with _raises(FuncgradValueError, "concatenate", "(2, 3)", "(2, 4)"):
        fnp.concatenate([x, fnp.ones((2, 4))])
    with _raises(FuncgradValueError, "stack", "(2, 3)", "(3, 2)"):
        fnp.stack([x, x.T])
    with _raises(FuncgradValueError, "split", "equal division"):
        fnp.split(fnp.ones(5), 2)
    with _raises(FuncgradValueError, "squeeze", "axis 1"):
        fnp.squeeze(x, 1)
    with _raises(FuncgradValueError, "transpose", "(1, 0, 2)"):
        fnp.transpose(x, (1, 0, 2))
    with _raises(FuncgradValueError, "max", "zero-size"):
        fnp.max(fnp.ones((0, 2)))
    with _raises(FuncgradValueError, "argmax", "empty"):
        fnp.argmax(fnp.ones(0))


def test_bad_dtypes_and_arguments():
    with _raises(FuncgradTypeError, "subtract", "bool"):
        fnp.ones(2, bool) - fnp.ones(2, bool)
    with _raises(FuncgradTypeError, "bitwise_and", "float32"):
        fnp.ones(2) & fnp.ones(2)
    with _raises(FuncgradTypeError, "left_shift", "float32"):
        fnp.left_shift(fnp.ones(2), 1)
    with _raises(FuncgradTypeError, "add", "str"):
        fnp.add(fnp.ones(2), "a")
    with _raises(FuncgradTypeError, "sum", "out"):
        fnp.sum(fnp.ones(2), out=np.zeros(()))
    with _raises(FuncgradTypeError, "where", "1 or 3"):
        fnp.where(fnp.ones(2) > 0, 1.0)
    with _raises(FuncgradValueError, "pad", "mode"):
        fnp.pad(fnp.ones(2), 1, mode="median")


def test_einsum_errors():
    a, b = fnp.ones((2, 3)), fnp.ones((4, 5))
    with _raises(FuncgradValueError, "einsum", "'j'", "3", "4"):
        fnp.einsum("ij,jk->ik", a, b)
    with _raises(FuncgradValueError, "einsum", "2 operands", "1"):
        fnp.einsum("ij,jk", a)
    with _raises(FuncgradValueError, "einsum", "'z'"):
        fnp.einsum("ij->z", a)
    with _raises(FuncgradValueError, "einsum", "2 dimensions", "'ijk'"):
        fnp.einsum("ijk", a)


def test_traced_values_where_static_ones_are_needed():
    with _raises(ConcretizationTypeError, "reshape", "static"):
        fg.make_jaxpr(lambda x, n: x.reshape(n))(fnp.ones(4), 4)
    with _raises(ConcretizationTypeError, "nonzero") as info:
        fg.make_jaxpr(lambda x: fnp.where(x > 0))(fnp.ones(3))
    assert "size" in str(info.value)
    with _raises(ConcretizationTypeError, "repeat", "static"):
        fg.make_jaxpr(lambda x, r: fnp.repeat(x, r))(fnp.ones(3), fnp.array([1, 2, 0]))


def test_errors_are_funcgrad_errors_not_numpy_tracebacks():
    bad = [lambda: fnp.ones((2, 2)) @ fnp.ones(3), lambda: fnp.tile(fnp.ones(2), "x"),
           lambda: fnp.eye(2, k=fnp.ones(2)), lambda: fnp.zeros((-1, 2)),
           lambda: fnp.tensordot(fnp.ones((2, 3)), fnp.ones((4, 3)), 1),
           lambda: fnp.linalg.norm(fnp.ones((2, 2)), "bad")]
    for fn in bad:
        with pytest.raises(FuncgradError):
            fn()
