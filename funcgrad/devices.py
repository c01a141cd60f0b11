"""Devices and placement: `device_put`, `device_get`, `devices`, `default_backend`,
`block_until_ready`.

Two backends: "cpu" (numpy arrays) and "cuda" (CuPy arrays, one `Device` per GPU). An
`Array` lives where its value lives; eager operations run where their operands are (CuPy
implements numpy's functions for its arrays). CPU arrays are uncommitted, like JAX's
default-placed arrays: combined with GPU arrays they are copied to that GPU (so constants
and gradient seeds just work); operands on two different GPUs are an error; an operation
CuPy cannot run falls back to the CPU with a `DeviceFallbackWarning` naming the operation
and the reason.

GPU access goes through a provider object (`cuda_provider()`, CuPy by default), which is
the one place that imports CuPy; tests substitute a fake one. Nothing here is imported by
the core on the CPU hot path, and nothing here imports a backend (the "cuda" backend is
registered in `funcgrad.backends`).
"""

import warnings

import numpy as np

from funcgrad import errors, tree_util
from funcgrad.core import array as _array
from funcgrad.core.array import Array
from funcgrad.errors import BackendUnavailableError

__all__ = ["BackendUnavailableError", "Device", "DeviceFallbackWarning", "block_until_ready",
           "default_backend", "device_get", "device_put", "devices"]


class DeviceFallbackWarning(UserWarning):
    """An operation on GPU arrays ran on the CPU (with a copy each way)."""


class Device:
    """One device: `platform` ("cpu" or "cuda") and `id`.

    Example:
        >>> fg.devices("cpu")
        [CpuDevice(id=0)]
    """

    __slots__ = ("platform", "id")

    def __init__(self, platform, id=0):
        self.platform, self.id = platform, id

    def __repr__(self):
        return f"{'Cpu' if self.platform == 'cpu' else 'Cuda'}Device(id={self.id})"

    def __eq__(self, other):
        return (isinstance(other, Device) and (self.platform, self.id)
                == (other.platform, other.id))

    def __hash__(self):
        return hash((self.platform, self.id))


CPU = Device("cpu", 0)


class CupyProvider:
    """GPU access through CuPy (imported on first use)."""

    name = "CuPy"

    def __init__(self):
        self._cupy = None

    @property
    def cupy(self):
        if self._cupy is None:
            import cupy
            self._cupy = cupy
            _array.register_device_type(cupy.ndarray, self)
        return self._cupy

    def problem(self):
        """Why GPUs cannot be used here (with the fix), or None."""
        try:
            cp = self.cupy
        except Exception as e:
            return (f"CuPy is not importable ({type(e).__name__}: {e}); install it with "
                    "`pip install funcgrad[cuda13]` (CUDA 13) or `funcgrad[cuda12]`")
        if not cp.is_available():
            return ("CuPy found no usable GPU (no NVIDIA driver or no device; "
                    "`python -m funcgrad doctor` says which)")
        return None

    def count(self):
        return self.cupy.cuda.runtime.getDeviceCount()

    def to_device(self, value, device_id):
        with self.cupy.cuda.Device(device_id):
            return self.cupy.asarray(value)

    def to_host(self, value):
        return value.get()

    def device_id(self, value):
        return value.device.id

    def synchronize(self):
        self.cupy.cuda.get_current_stream().synchronize()

    def asarray(self, value, dtype):
        return value.astype(dtype, copy=False)


_provider = [None]


def cuda_provider():
    """The GPU provider (CuPy unless a test set another with `set_cuda_provider`)."""
    if _provider[0] is None:
        _provider[0] = CupyProvider()
    return _provider[0]


def set_cuda_provider(provider):
    """Use `provider` for the "cuda" backend (None: back to CuPy); returns the old one."""
    old = _provider[0]
    _provider[0] = provider
    if provider is not None and getattr(provider, "array_type", None) is not None:
        _array.register_device_type(provider.array_type, provider)
    return old


# --- queries -----------------------------------------------------------------------------------

def default_backend():
    """The backend funcgrad computes on unless told otherwise: always "cpu" (new arrays and
    `jit` without `backend=` use numpy); move data with `device_put` and compile with
    `jit(..., backend="cuda")` to use a GPU."""
    return "cpu"


def devices(backend=None):
    """The devices of `backend` ("cpu", "cuda"; None: the default backend).

    Raises:
        BackendUnavailableError: "cuda" on a machine where it cannot run (says why).
        FuncgradValueError: an unknown backend name.
    """
    backend = default_backend() if backend is None else backend
    if backend == "cpu":
        return [CPU]
    if backend in ("cuda", "gpu"):
        p = cuda_provider()
        problem = p.problem()
        if problem:
            raise BackendUnavailableError(f"devices('cuda'): {problem}")
        return [Device("cuda", i) for i in range(p.count())]
    raise errors.FuncgradValueError(
        f"devices: unknown backend {backend!r}; known backends are 'cpu' and 'cuda'")


def _resolve(device):
    if device is None:
        return devices()[0]
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        platform, _, idx = device.partition(":")
        ds = devices(platform)
        i = int(idx or 0)
        if i >= len(ds):
            raise errors.FuncgradValueError(f"device {device!r} does not exist; there are "
                                            f"{len(ds)} {platform} devices: {ds}")
        return ds[i]
    raise errors.FuncgradTypeError(f"expected a Device or a name like 'cuda:0', got "
                                   f"{type(device).__name__}")


def device_of(value):
    """The `Device` a raw array value (numpy or a device array) lives on."""
    if type(value) is np.ndarray:
        return CPU
    provider = _array.device_provider(value)
    if provider is None:
        return CPU
    return Device("cuda", provider.device_id(value))


# --- placement ---------------------------------------------------------------------------------

def own_buffer(out, source):
    """`out`, an Array just converted from `source` (not a funcgrad array), with a buffer of
    its own when it may be `source`'s memory: the value itself (a NumPy or device array of a
    canonical dtype) or a view NumPy made into it. funcgrad arrays are immutable, so they
    must not change when the caller writes to `source` later (JAX copies too)."""
    v = out._value
    if v is source or (type(v) is np.ndarray and not v.flags.owndata):
        return Array(v.copy(), out.weak_type)
    return out


def _put(x, device):
    if not isinstance(x, Array):
        x = own_buffer(_array.to_array(x), x)
    here = device_of(x._value)
    if here == device:
        return x
    if device.platform == "cpu":
        return Array(_array.host_value(x._value), x.weak_type)
    value = _array.host_value(x._value) if here.platform != "cpu" else x._value
    return Array(cuda_provider().to_device(np.ascontiguousarray(value), device.id),
                 x.weak_type)


def device_put(x, device=None):
    """Place every array of pytree `x` on `device` (a `Device`, "cpu", "cuda", "cuda:1";
    None: the default device). Arrays already there are returned as they are.

    Example:
        >>> x = fg.device_put(fnp.ones(3), fg.devices("cuda")[0])   # on a GPU machine
        >>> x.device
        CudaDevice(id=0)
    """
    d = _resolve(device)
    return tree_util.tree_map(lambda v: _put(v, d), x)


def device_get(x):
    """Copy every array of pytree `x` to the host as numpy arrays (as `jax.device_get`)."""
    def get(v):
        if isinstance(v, Array):
            return _array.host_value(v._value)
        return _array.host_value(v) if _array.device_provider(v) is not None else v
    return tree_util.tree_map(get, x)


def block_until_ready(x):
    """Wait until every array of pytree `x` is computed (GPU work is asynchronous); returns
    `x`."""
    leaves = tree_util.tree_leaves(x)
    if any(isinstance(v, Array) and type(v._value) is not np.ndarray for v in leaves):
        cuda_provider().synchronize()
    return x


# --- eager operations on device arrays (called by the core when an op fails on them) ---------

_warned = set()


def run_on_devices(prim, vals, params, exc):
    """Run raw primitive `prim` on `vals` that include device arrays, after its
    implementation raised `exc` on them. Host operands (funcgrad's CPU arrays are
    uncommitted, as JAX's default-placed arrays: constants, gradient seeds) are copied to the
    device and the operation retried; if it still fails there, it runs on the CPU with a
    `DeviceFallbackWarning`. Operands on two different GPUs are an error."""
    places = [device_of(v) for v in vals]
    gpus = list(dict.fromkeys(d for d in places if d.platform != "cpu"))
    if len(gpus) > 1:
        desc = ", ".join(f"{np.shape(v)} on {d}" for v, d in zip(vals, places))
        raise errors.FuncgradValueError(
            f"{prim.name}: operands live on different devices ({desc}).\n"
            f"{errors.where(errors.user_frame(3))}\n"
            "  hint: move them to one device first with funcgrad.device_put(x, device)")
    target, provider = gpus[0], cuda_provider()
    if any(d.platform == "cpu" for d in places):
        vals = [provider.to_device(np.asarray(v), target.id) if d.platform == "cpu" else v
                for v, d in zip(vals, places)]
        try:
            return prim.impl_rule(*vals, **params)
        except Exception as e:
            exc = e
    reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if prim.name not in _warned:
        _warned.add(prim.name)
        warnings.warn(
            f"{prim.name} has no GPU implementation here ({reason}); it runs on the CPU with "
            f"a copy of its operands each way. {errors.where(errors.user_frame(3))}",
            DeviceFallbackWarning, stacklevel=4)
    host = [_array.host_value(v) for v in vals]
    out = prim.impl_rule(*host, **params)
    put = lambda o: provider.to_device(np.asarray(o), target.id)
    return [put(o) for o in out] if prim.multiple_results else put(out)
