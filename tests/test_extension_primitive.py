"""A new elementwise primitive defined outside the package, following docs/internals.md
("Adding a primitive") alone: one block gives its shape rule, impl, batching (the `unop`
factory, which declares it fusible), its jvp and its kernel expressions (numpy and the
shared C-like table). It then works eagerly, under grad, vmap and jit, and jit fuses it with
its neighbours into one kernel on the numpy backend and in the rendered CUDA source (and,
with a host C++ compiler, runs it under the emulated CUDA runtime).
"""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax, make_jaxpr
from funcgrad.backends import cstyle
from funcgrad.backends.cuda import emulate, program, renderer
from funcgrad.backends.cuda.plan import H200, plan_kernel
from funcgrad.backends.numpy import ops as numpy_ops
from funcgrad.compiler.fusion import fuse
from funcgrad.compiler.pipeline import optimize
from funcgrad.core import Primitive
from funcgrad.interpreters import ad
from funcgrad.lax.utils import unop
from funcgrad.test_util import check_grads


# --- the block ---------------------------------------------------------------------------------
def softsign(x):
    """Elementwise x / (1 + |x|).

    Example:
        >>> softsign(fnp.array([1.0, -3.0]))
        Array([ 0.5 , -0.75], dtype=float32)
    """
    return softsign_p.bind(x)


def _softsign_impl(x):
    return np.divide(x, np.add(np.absolute(x), 1))


def _softsign_c(a, d, p):
    one = cstyle.literal(1, d[0])
    return f"({a[0]} / ({cstyle.math('fabs')(a, d, p)} + {one}))"


softsign_p = unop("ext_softsign", _softsign_impl, kinds="f")
# d/dx x / (1 + |x|) = 1 / (1 + |x|)^2
ad.defjvp(softsign_p, lambda t, x, out: lax.div(t, lax.integer_pow(lax.add(lax.abs(x), 1.0), 2)))
numpy_ops.def_expression(softsign_p, lambda a, d, p, c=None: (
    f"np.divide({a[0]}, np.add(np.absolute({a[0]}), 1){{out}})", "ufunc"))
cstyle.def_expression(softsign_p, _softsign_c)


# --- the checks --------------------------------------------------------------------------------
def neighbours(x, b):
    return fnp.tanh(softsign(x * 2.0 + b)) * 3.0


def _inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((64, 33)).astype(np.float32),
            rng.standard_normal(33).astype(np.float32))


def _reference(x):
    return x / (1 + np.abs(x))


def test_it_is_declared_as_the_factory_says():
    assert (softsign_p.kind, softsign_p.dtype_kinds, softsign_p.fusible) == (
        "elementwise", "f", True)
    assert Primitive.fusible_named("ext_softsign") is softsign_p


def test_eager_matches_numpy():
    x, _ = _inputs()
    np.testing.assert_allclose(np.asarray(softsign(fnp.asarray(x))), _reference(x), rtol=1e-6)
    with pytest.raises(TypeError, match="ext_softsign"):
        softsign(fnp.arange(3))  # integers are not among its dtype kinds


def test_grad_matches_finite_differences():
    prev = fg.config.enable_x64
    fg.config.update("enable_x64", True)  # check_grads works in float64
    try:
        check_grads(softsign, (np.linspace(-2, 2, 8),), order=2)  # |x| has a kink at 0
    finally:
        fg.config.update("enable_x64", prev)
    g = fg.grad(lambda x: softsign(x).sum())(fnp.asarray([0.5, -2.0]))
    np.testing.assert_allclose(np.asarray(g), 1 / (1 + np.abs([0.5, -2.0])) ** 2, rtol=1e-6)


def test_vmap_matches_a_loop():
    x, _ = _inputs()
    got = fg.vmap(softsign, in_axes=1)(fnp.asarray(x))
    want = np.stack([_reference(x[:, j]) for j in range(x.shape[1])])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_jit_fuses_it_with_its_neighbours_on_numpy():
    x, b = _inputs()
    f = fg.jit(neighbours)
    np.testing.assert_array_equal(np.asarray(f(x, b)), np.asarray(neighbours(fnp.asarray(x),
                                                                               fnp.asarray(b))))
    text = f.lower(x, b).compile().as_text()
    assert "1 kernels, 0 calls" in text and "np.divide(" in text
    assert "_ext_softsign_(" not in text  # not a library call


def test_jit_of_grad_fuses_it_too():
    x, b = _inputs()
    g = fg.jit(fg.grad(lambda x, b: neighbours(x, b).sum()))
    want = fg.grad(lambda x, b: neighbours(x, b).sum())(fnp.asarray(x), fnp.asarray(b))
    np.testing.assert_allclose(np.asarray(g(x, b)), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_the_cuda_kernel_renders_with_its_expression():
    x, b = _inputs()
    prog = fuse(optimize(make_jaxpr(neighbours)(x, b)))
    assert len(prog.nodes) == 1 and len(prog.kernels) == 1, prog.summary()
    spec = prog.kernels[0].spec
    assert [i.op for i in spec.body] == ["mul", "add", "ext_softsign", "tanh", "mul"]
    src = renderer.render(plan_kernel(spec, H200))
    assert "fabsf(v_t1) + 1.0f" in src and src.count("__global__") == 1


@pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")
def test_it_runs_in_the_emulated_cuda_runtime(monkeypatch):
    rt = emulate.EmulatedRuntime()
    old = program.set_runtime(rt)
    try:
        x, b = _inputs()
        got = fg.jit(neighbours, backend="cuda")(x, b)
        np.testing.assert_allclose(np.asarray(got), np.asarray(fg.jit(neighbours)(x, b)),
                                   rtol=1e-6, atol=1e-6)
        assert rt.launches == 1
    finally:
        program.set_runtime(old)
