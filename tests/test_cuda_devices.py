"""Devices and placement (`device_put`, `device_get`, `devices`, `default_backend`,
`block_until_ready`), device-aware `Array`s and eager dispatch on device arrays.

Without a GPU, a fake "cuda" provider stands in for CuPy: its arrays keep a numpy array
inside, implement numpy's dispatch protocols like `cupy.ndarray` does, and refuse implicit
conversion to numpy (as CuPy does), so the core's dispatch, mixing errors and CPU fallback
are exercised exactly as they would be with CuPy arrays.
"""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.devices import CPU, Device, DeviceFallbackWarning, set_cuda_provider


class FakeDeviceArray:
    """A 'GPU' array: numpy inside, no implicit conversion to numpy."""

    __array_priority__ = 200

    def __init__(self, a, dev=0):
        self.a, self.dev = np.asarray(a), dev

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)
    ndim = property(lambda self: self.a.ndim)
    size = property(lambda self: self.a.size)
    T = property(lambda self: FakeDeviceArray(self.a.T))

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed")

    def astype(self, dtype, copy=True):
        return FakeDeviceArray(self.a.astype(dtype, copy=copy))

    def reshape(self, *shape):
        return FakeDeviceArray(self.a.reshape(*shape))

    def transpose(self, *perm):
        return FakeDeviceArray(self.a.transpose(*perm))

    def copy(self):
        return FakeDeviceArray(self.a.copy())

    def __getitem__(self, idx):
        return FakeDeviceArray(self.a[_unwrap(idx)])

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if len({x.dev for x in inputs if isinstance(x, FakeDeviceArray)}) > 1:
            raise ValueError("the arrays reside on different devices")  # as CuPy says
        out = getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs))
        return _wrap(out)

    def __array_function__(self, func, types, args, kwargs):
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))


def _unwrap(x):
    if isinstance(x, FakeDeviceArray):
        return x.a
    if isinstance(x, np.ndarray):
        raise TypeError("Unsupported type <class 'numpy.ndarray'>")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _wrap(x):
    if isinstance(x, (np.ndarray, np.generic)):
        return FakeDeviceArray(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_wrap(v) for v in x)
    return x


class FakeProvider:
    name = "fake"
    array_type = FakeDeviceArray

    def __init__(self):
        self.syncs = 0

    def problem(self):
        return None

    def count(self):
        return 2

    def to_device(self, value, device_id):
        return FakeDeviceArray(np.array(value), device_id)

    def to_host(self, value):
        return value.a.copy()

    def device_id(self, value):
        return value.dev

    def synchronize(self):
        self.syncs += 1

    def asarray(self, value, dtype):
        return value.astype(dtype, copy=False)


@pytest.fixture
def gpu():
    provider = FakeProvider()
    old = set_cuda_provider(provider)
    yield provider
    set_cuda_provider(old)


# --- the CPU backend -------------------------------------------------------------------------

def test_cpu_devices_and_default_backend():
    assert fg.devices("cpu") == [CPU] and fg.devices() == [CPU]
    assert fg.default_backend() == "cpu"
    x = fnp.ones(3)
    assert x.device == CPU and repr(CPU) == "CpuDevice(id=0)"
    assert fg.device_put(x) is x and fg.device_put(x, "cpu") is x


def test_device_get_and_block_until_ready_take_pytrees():
    tree = {"a": fnp.ones(2), "b": (fnp.zeros(1), 3)}
    got = fg.device_get(tree)
    assert type(got["a"]) is np.ndarray and got["b"][1] == 3
    assert fg.block_until_ready(tree) is tree


def test_device_put_converts_host_values():
    x = fg.device_put(np.arange(3.0))
    assert isinstance(x, fg.Array) and x.dtype == np.float32


def test_unknown_backend_and_device_are_clear_errors():
    with pytest.raises(errors.FuncgradValueError, match="unknown backend 'tpu'"):
        fg.devices("tpu")
    with pytest.raises(errors.FuncgradTypeError, match="Device or a name"):
        fg.device_put(fnp.ones(1), 3.5)


def test_cuda_devices_without_a_gpu_say_why():
    from funcgrad.compiler.call import BackendUnavailableError
    with pytest.raises(BackendUnavailableError, match=r"devices\('cuda'\):.*(GPU|CuPy)"):
        fg.devices("cuda")


# --- device arrays (fake provider) -------------------------------------------------------------

def test_device_put_places_arrays_and_numpy_copies_back(gpu):
    x = fg.device_put(fnp.arange(6.0).reshape(2, 3), "cuda:1")
    assert type(x._value) is FakeDeviceArray and x.device == Device("cuda", 1)
    assert np.asarray(x).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert "3., 4., 5." in repr(x) and float(x[1, 2]) == 5.0
    assert fg.device_get(x).dtype == np.float32
    back = fg.device_put(x, "cpu")
    assert type(back._value) is np.ndarray and back.device == CPU
    with pytest.raises(errors.FuncgradValueError, match="does not exist"):
        fg.device_put(x, "cuda:5")


def test_eager_ops_run_on_the_device(gpu):
    x = fg.device_put(fnp.arange(6.0).reshape(2, 3), "cuda")
    y = fnp.tanh(x) * 2.0 + 1.0  # weak Python scalars join device arrays
    s = (x @ x.T).sum(0)
    assert type(y._value) is FakeDeviceArray and type(s._value) is FakeDeviceArray
    np.testing.assert_allclose(np.asarray(y), np.tanh(np.arange(6.0).reshape(2, 3)) * 2 + 1,
                               rtol=1e-6)
    xh = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(np.asarray(s), (xh @ xh.T).sum(0))
    g = fg.grad(lambda v: (v * v).sum())(x)
    assert type(g._value) is FakeDeviceArray
    np.testing.assert_allclose(np.asarray(g), 2 * xh)


def test_host_arrays_join_device_operands_but_two_gpus_do_not_mix(gpu):
    x = fg.device_put(fnp.ones((2, 3)), "cuda:0")
    y = x + fnp.ones((2, 3))  # uncommitted host array: copied to the GPU
    assert type(y._value) is FakeDeviceArray and np.asarray(y).tolist() == [[2.0] * 3] * 2
    z = fg.device_put(fnp.ones((2, 3)), "cuda:1")
    with pytest.raises(errors.FuncgradValueError, match="(?s)different devices.*device_put"):
        x + z


def test_an_op_without_a_device_implementation_warns_and_falls_back(gpu):
    from funcgrad import devices as _  # noqa: F401  (the function; the module is below)
    sys.modules["funcgrad.devices"]._warned.discard("erf")
    x = fg.device_put(fnp.linspace(-1.0, 1.0, 5), "cuda")
    with pytest.warns(DeviceFallbackWarning, match="erf has no GPU implementation"):
        y = lax.erf(x)
    assert type(y._value) is FakeDeviceArray
    from math import erf
    np.testing.assert_allclose(np.asarray(y), [erf(v) for v in np.linspace(-1, 1, 5)],
                               rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per primitive
        lax.erf(x)


def test_block_until_ready_synchronizes_device_work(gpu):
    x = fg.device_put(fnp.ones(3), "cuda")
    assert x.block_until_ready() is x and gpu.syncs == 1
    fg.block_until_ready({"x": x, "y": [x]})
    assert gpu.syncs == 2


def test_device_arrays_convert_with_asarray(gpu):
    x = fnp.asarray(FakeDeviceArray(np.arange(4, dtype=np.float64)))
    assert type(x._value) is FakeDeviceArray and x.dtype == np.float32


def test_cpu_arrays_stay_numpy():
    assert type((fnp.ones(3) * 2.0)._value) is np.ndarray


# --- doctor ------------------------------------------------------------------------------------

def test_doctor_reports_cleanly_without_a_gpu():
    res = subprocess.run([sys.executable, "-m", "funcgrad", "doctor"], capture_output=True,
                         text=True, timeout=120)
    out = res.stdout + res.stderr
    assert "Traceback" not in out, out
    assert "funcgrad" in out and "GPU" in out
    assert res.returncode in (0, 1)
