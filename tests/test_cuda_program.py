"""CUDA backend host glue: `jit(backend="cuda")` programs compiled by the real pipeline and run
with the exact CUDA text of their kernels on the CPU (`emulate.EmulatedRuntime`): library
calls, split reductions, unsupported kernels, outputs and as_text. Needs a host C++
compiler; no GPU."""

import sys

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.cuda import emulate, program
from funcgrad.compiler import call
from funcgrad.devices import set_cuda_provider

pytestmark = pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")


@pytest.fixture
def runtime(monkeypatch):
    rt = emulate.EmulatedRuntime()
    old = program.set_runtime(rt)
    yield rt
    program.set_runtime(old)


def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = fg.nn.relu(x @ w1 + b1)
    logits = h @ w2 + b2
    return -(fg.nn.log_softmax(logits) * y).sum(1).mean()


def sgd_step(params, x, y):
    loss, g = fg.value_and_grad(mlp_loss)(params, x, y)
    return [p - 0.1 * gp for p, gp in zip(params, g)], loss


def test_jitted_training_step_matches_the_cpu_backend(runtime):
    rng = np.random.default_rng(0)
    params = [fnp.asarray(rng.normal(size=(64, 32)).astype(np.float32) * 0.1),
              fnp.zeros(32), fnp.asarray(rng.normal(size=(32, 10)).astype(np.float32) * 0.1),
              fnp.zeros(10)]
    x = fnp.asarray(rng.normal(size=(128, 64)).astype(np.float32))
    y = fnp.asarray(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)])
    gpu, cpu = fg.jit(sgd_step, backend="cuda"), fg.jit(sgd_step)
    for _ in range(2):  # the second call takes the jit fast path
        (pg, lg), (pc, lc) = gpu(params, x, y), cpu(params, x, y)
        np.testing.assert_allclose(float(lg), float(lc), rtol=1e-6)
        for a, b in zip(pg, pc):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)
        params = pg
    assert runtime.launches > 10
    text = gpu.lower(params, x, y).compile().as_text()
    assert "library call dot_general" in text and '__global__' in text


def test_split_reduction_and_library_calls(runtime):
    def f(x, idx):
        s = (x * x).sum(0)  # column sums over 5000 rows of 3: split on the small device
        return fnp.sort(x[idx], axis=0), s, lax.cumsum(x, 0)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5000, 3)).astype(np.float32)
    idx = rng.integers(0, 5000, 17).astype(np.int32)
    got = fg.jit(f, backend="cuda")(x, idx)
    want = f(fnp.asarray(x), fnp.asarray(idx))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)
    assert "splits" in fg.jit(f, backend="cuda").lower(x, idx).compile().as_text()


def test_unsupported_kernel_runs_as_library_calls(runtime):
    def f(x):
        return (lax.complex(x, 2.0 * x) * 3.0).real + 1.0
    x = np.arange(6, dtype=np.float32)
    got = fg.jit(f, backend="cuda")(x)
    np.testing.assert_allclose(np.asarray(got), 3 * x + 1)
    assert "as library calls" in fg.jit(f, backend="cuda").lower(x).compile().as_text()


def test_literal_and_passthrough_outputs(runtime):
    def f(x):
        return x, 2.0, x + 1.0
    x = np.ones(3, np.float32)
    a, b, c = fg.jit(f, backend="cuda")(x)
    assert np.asarray(a).tolist() == [1, 1, 1] and float(b) == 2.0
    assert np.asarray(c).tolist() == [2, 2, 2]


def test_memory_analysis_counts_temporaries(runtime):
    def f(x):
        y = fnp.tanh(x @ x)
        return (y @ y).sum()
    x = np.ones((64, 64), np.float32)
    analysis = fg.jit(f, backend="cuda").lower(x).compile().memory_analysis()
    assert analysis.argument_bytes == 64 * 64 * 4 and analysis.temp_bytes >= 64 * 64 * 4


def test_cuda_without_a_gpu_says_why(monkeypatch):

    class NoGpu:
        array_type = None

        def problem(self):
            return "CuPy found no usable GPU (no NVIDIA driver or no device)"
    old_rt, old_provider = program.set_runtime(None), set_cuda_provider(NoGpu())
    try:
        with pytest.raises(call.BackendUnavailableError, match="no usable GPU"):
            fg.jit(lambda x: x * 2, backend="cuda")(np.ones(3, np.float32))
    finally:
        program.set_runtime(old_rt)
        set_cuda_provider(old_provider)


def test_out_of_memory_reports_the_requested_size(monkeypatch):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    from funcgrad.backends.cuda.runtime import CudaOutOfMemoryError, CupyRuntime
    rt = CupyRuntime()

    def fail(shape, dtype):
        raise cupy.cuda.memory.OutOfMemoryError(2 ** 33, 2 ** 34)

    class Pool:
        def used_bytes(self):
            return 2 ** 30

        def total_bytes(self):
            return 2 ** 31
    monkeypatch.setattr(rt.cupy, "empty", fail)
    monkeypatch.setattr(rt.cupy, "get_default_memory_pool", lambda: Pool())
    monkeypatch.setattr(CupyRuntime, "device_id", property(lambda self: 0))
    with pytest.raises(CudaOutOfMemoryError, match=r"8192\.0 MiB.*float32\[1024, 2097152\]"):
        rt.empty((1024, 2 ** 21), np.float32)


def test_donation_is_accepted_and_ignored(runtime):
    def f(x):
        return x * 2.0
    x = fnp.ones(4)
    out = fg.jit(f, backend="cuda", donate_argnums=0)(x)
    assert np.asarray(out).tolist() == [2.0] * 4 and np.asarray(x).tolist() == [1.0] * 4


def test_cuda_source_renders_without_a_gpu_and_a_call_says_why(monkeypatch):
    from funcgrad.devices import CupyProvider
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` fails, as without CuPy
    old_rt, old_provider = program.set_runtime(None), set_cuda_provider(CupyProvider())
    try:
        x = np.ones((64, 33), np.float32)
        compiled = fg.jit(lambda x: fnp.tanh(x * 2.0 + 1.0).sum(1), backend="cuda").lower(
            x).compile()
        text = compiled.as_text()
        assert '__global__' in text and "tanhf(" in text and "no GPU" in text
        assert compiled.memory_analysis().argument_bytes == x.nbytes
        with pytest.raises(fg.errors.BackendUnavailableError,
                           match=r"(?s)cannot run here: CuPy.*pip install.*as_text"):
            compiled(x)
    finally:
        program.set_runtime(old_rt)
        set_cuda_provider(old_provider)
