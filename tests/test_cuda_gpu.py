"""CUDA backend on a real GPU (skipped cleanly where `cupy.is_available()` is false): every
canonical kernel against funcgrad's eager results with poisoned outputs, eager device arrays,
and a jitted training step on backend="cuda" against backend="cpu"."""

import cuda_canonical as canonical
import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp


def _gpu():
    try:
        import cupy
        return cupy if cupy.is_available() else None
    except Exception:
        return None


cp = _gpu()
pytestmark = pytest.mark.skipif(cp is None, reason="no GPU (cupy.is_available() is false)")


@pytest.fixture(scope="module")
def runtime():
    from funcgrad.backends.cuda.runtime import CupyRuntime
    return CupyRuntime()


@pytest.mark.parametrize("name", [c.name for c in canonical.CASES])
def test_canonical_kernel_on_the_gpu(runtime, name):
    case = canonical.by_name(name)
    rng = np.random.default_rng()
    for device in dict.fromkeys([runtime.device_info(), case.device]):
        plan, inputs, expected = case.build(rng, device)
        (handle,) = runtime.prepare([plan])
        outs = [cp.full(o.shape, np.nan if np.dtype(o.dtype).kind == "f" else 0x5A, o.dtype)
                for o in plan.spec.outputs]
        runtime.launch(handle, [cp.asarray(x) for x in inputs], outs)
        for g, w in zip(outs, expected):
            assert canonical.tolerance_ok(g.get(), w, case.rtol), (name, plan.strategy)


def test_eager_device_arrays():
    x = fg.device_put(fnp.arange(6.0).reshape(2, 3), "cuda")
    y = fnp.tanh(x) * 2.0 + x.sum(0)
    assert isinstance(y._value, cp.ndarray) and y.device.platform == "cuda"
    xh = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(np.asarray(y), np.tanh(xh) * 2 + xh.sum(0), rtol=1e-6)
    g = fg.grad(lambda v: (v * v).sum())(x)
    np.testing.assert_allclose(np.asarray(g), 2 * xh)


def test_jitted_step_matches_cpu():
    def loss(w, x, y):
        return ((fg.nn.relu(x @ w) - y) ** 2).mean()

    def step(w, x, y):
        return w - 0.1 * fg.grad(loss)(w, x, y)
    rng = np.random.default_rng(0)
    w = rng.normal(size=(64, 16)).astype(np.float32)
    x = rng.normal(size=(256, 64)).astype(np.float32)
    y = rng.normal(size=(256, 16)).astype(np.float32)
    got = fg.jit(step, backend="cuda")(*(fg.device_put(v, "cuda") for v in (w, x, y)))
    assert isinstance(got._value, cp.ndarray)
    want = fg.jit(step)(w, x, y)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-6)
