"""Backends registered by users run: a toy backend written outside the package
(`tests/toy_backend.py`) is registered with `funcgrad.backends.register_backend` and `jit`
compiles for it, derived programs (grad of jit) included; what a backend can do beyond the
contract it declares (`capabilities`), so jit treats no backend by its name."""

import numpy as np
import pytest
import toy_backend

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import backends, errors
from funcgrad.compiler import jit_cache


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(backends, "_BACKENDS", dict(backends._BACKENDS))  # restored after
    backends.register_backend("toy", toy_backend)
    del toy_backend.compiled[:]
    return toy_backend


def loss(w, x):
    h = fnp.tanh(x @ w)
    return fg.lax.cond(h.sum() > 0, lambda h: (h * h).sum(), lambda h: -h.max(), h)


def test_jit_runs_a_registered_backend(toy):
    rng = np.random.default_rng(0)
    w, x = (rng.normal(size=s).astype(np.float32) for s in ((4, 3), (5, 4)))
    f = fg.jit(loss, backend="toy")
    np.testing.assert_allclose(np.asarray(f(w, x)), np.asarray(loss(w, x)), rtol=1e-6)
    assert len(toy.compiled) == 1 and toy.compiled[0].calls == 1
    assert toy.compiled[0].program.kernels, "the backend gets the fused program"
    f(w, x)
    assert len(toy.compiled) == 1 and toy.compiled[0].calls == 2  # cached
    compiled = f.lower(w, x).compile()
    assert compiled.as_text().startswith("toy program")
    assert compiled.memory_analysis().argument_bytes == w.nbytes + x.nbytes
    g = fg.grad(fg.jit(loss, backend="toy"))(w, x)  # derived programs: the same backend
    np.testing.assert_allclose(np.asarray(g), np.asarray(fg.grad(loss)(w, x)), rtol=1e-5)
    assert len(toy.compiled) >= 3


def test_a_backend_without_the_capability_gets_no_donated_buffers(toy):
    # the toy declares no TAKES_DONATED_BUFFERS: jit checks the donation but never hands the
    # executable a buffer (`owned=True` would be a TypeError) and the Array stays, as on CUDA
    x = fnp.arange(4.0)
    out = fg.jit(lambda x: x * 2.0, backend="toy", donate_argnums=0)(x)
    np.testing.assert_array_equal(np.asarray(out), [0.0, 2.0, 4.0, 6.0])
    assert not jit_cache.is_deleted(x) and np.asarray(x).tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(errors.FuncgradValueError, match="donated"):  # still checked
        fg.jit(lambda a, b: (a + b, a - b), backend="toy", donate_argnums=(0, 1))(x, x)
    assert backends.capabilities("toy") == backends.Capabilities(takes_donated_buffers=False)


def test_capabilities_replace_the_backends_names():
    assert backends.capabilities("cpu").takes_donated_buffers
    assert backends.capabilities("numpy").takes_donated_buffers
    assert not backends.capabilities("cuda").takes_donated_buffers  # CuPy's pool reuses


def test_unknown_and_bad_registrations_are_clear_errors(toy):
    with pytest.raises(errors.FuncgradValueError, match=r"'tpu'.*'cpu', 'cuda', 'numpy', 'toy'"):
        fg.jit(lambda x: x, backend="tpu")
    with pytest.raises(errors.FuncgradValueError, match="no compile_program"):
        backends.register_backend("broken", np)
    with pytest.raises(errors.FuncgradTypeError, match="expected a module"):
        backends.register_backend("broken", 3)
    backends.register_backend("by_name", "toy_backend")  # imported when first asked for
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda x: x + 1, backend="by_name")(
        fnp.ones(2))), [2.0, 2.0])
