"""ml_dtypes (bfloat16, the float8s, int4...) is imported on first need, never by `import
funcgrad`: it costs ~0.66 s and ~8 MB. Each check runs in a fresh interpreter, where nothing
else has imported it yet."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(body):
    """Run `body` after `import funcgrad` & co. in a fresh interpreter; its stdout."""
    src = ("import sys\nimport numpy as np\nimport funcgrad as fg\nimport funcgrad.numpy as fnp\n"
           "import funcgrad.nn, funcgrad.optim, funcgrad.random, funcgrad.lax, funcgrad.scipy\n"
           "assert 'ml_dtypes' not in sys.modules, 'imported by import funcgrad'\n" + body)
    done = subprocess.run([sys.executable, "-c", src], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_program_without_narrow_types_never_imports_ml_dtypes():
    _run("""
def loss(w, x):
    return fnp.sum(fnp.tanh(x @ w) ** 2)

w, x = fnp.ones((3, 2), fnp.float32), fnp.arange(12.0).reshape(4, 3) / 10
g = fg.jit(fg.grad(loss), backend="numpy")(w, x)
assert np.allclose(g, fg.grad(loss)(w, x), rtol=1e-5)
assert fg.vmap(lambda r: loss(w, r))(x).shape == (4,)
assert fg.jit(lambda a: a * 2)(np.ones(3, np.float32)).dtype == fnp.float32
for dt in (fnp.float16, fnp.int32, fnp.bool_, fnp.complex64, "float32", "int8"):
    y = fnp.asarray([1, 0, 1], dt) + fnp.ones(3, dt)
    assert fnp.dtype(dt) == y.dtype
assert fnp.sum(fnp.ones(4, fnp.float16)) == 4 and fnp.finfo(fnp.float32).bits == 32
assert fnp.iinfo("int8").max == 127 and fnp.promote_types("uint8", int) == np.uint8
assert fnp.issubdtype(fnp.float32, fnp.floating) and isinstance(y.dtype, fnp.dtype)
k = fg.random.normal(fg.random.PRNGKey(0), (2, 3))
opt = fg.optim.adam(0.1)
fg.optim.apply_updates(k, opt.update(k, opt.init(k), k)[0])
fg.nn.relu(k), fg.lax.exp(k), fg.scipy.special.erf(k)
str(fg.make_jaxpr(loss)(w, x)), dir(fnp), dir(fg.dtypes)
try:
    fnp.zeros(2, "U3")  # the error lists the narrow types by name
except TypeError as e:
    assert "bfloat16" in str(e)
assert "ml_dtypes" not in sys.modules, "imported by a program without narrow types"
""")


def _same(y, want):
    return f"""
y = np.asarray({y})
assert "ml_dtypes" in sys.modules, "not imported by the first narrow name"
import ml_dtypes
want = np.asarray({want})
assert y.dtype == want.dtype and np.array_equal(y, want), (y, want)
"""


@pytest.mark.parametrize("body", [
    _same("fnp.asarray([1.5], fnp.bfloat16) + 1", "np.asarray([2.5], ml_dtypes.bfloat16)"),
    _same("fnp.asarray([1.5], 'bfloat16') * 2", "np.asarray([3], ml_dtypes.bfloat16)"),
    _same("fnp.ones(2).astype(fg.dtypes.float8_e4m3fn)", "np.ones(2, ml_dtypes.float8_e4m3fn)"),
    _same("fnp.zeros(3, fnp.dtype('int4')) - 8", "np.full(3, -8, ml_dtypes.int4)"),
    _same("fnp.finfo(fnp.bfloat16).eps", "float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)"),
    "assert fnp.promote_types('bfloat16', fnp.float16) == np.float32\n"
    "assert 'ml_dtypes' in sys.modules",
], ids=["scalar_type", "name", "dtypes_attr", "fnp_dtype", "finfo", "promote_types"])
def test_the_first_narrow_name_imports_ml_dtypes(body):
    _run(body)


def test_a_users_ml_dtypes_array_and_a_checkpoint_work_without_a_narrow_name(tmp_path):
    _run(f"""
import ml_dtypes  # the user's: funcgrad's tables have no narrow type yet
jit_module = sys.modules["funcgrad.compiler.jit"]
x = np.asarray([1.5, -2], ml_dtypes.bfloat16)
y = fg.jit(lambda a: fnp.sum(a * 3))(x)
assert y.dtype == x.dtype and float(y) == -1.5
assert x.dtype in jit_module._CANONICAL  # the hot path's dtypes were refreshed
fg.io.save({str(tmp_path / "c")!r}, {{"w": fnp.asarray(x)}})
""")
    out = _run(f"""
w = fg.io.load({str(tmp_path / "c")!r})["w"]
print(w.dtype, w.tolist())
""")
    assert out.split() == ["bfloat16", "[1.5,", "-2.0]"]
