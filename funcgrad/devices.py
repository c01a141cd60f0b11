"""Devices, processes and placement: `devices`, `local_devices`, `device_count`,
`local_device_count`, `process_index`, `process_count`, `default_device`, `device_put`,
`device_get`, `default_backend`, `block_until_ready`.

JAX's model and meaning. A process owns its local devices: the CPU (or, with the option
`cpu_device_count` = N, N virtual CPU devices for testing multi-device code, as XLA's
`--xla_force_host_platform_device_count`) and each GPU. Under `mpiexec` every process
contributes its local CPU devices to one global list, ordered by process (global id =
process index x local count + local id), as JAX's multi-process runtime does; the
processes are those of `funcgrad.distributed` (MPI is the engine, no other transport).
Virtual CPU devices share the host's memory: an `Array` placed on one (or sharded over
several, see `funcgrad.sharding`) holds a numpy value and records where it lives.

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

import contextlib
import warnings

import numpy as np

from funcgrad import errors, tree_util
from funcgrad.config import config
from funcgrad.core import array as _array
from funcgrad.core.array import Array
from funcgrad.core.ops import register_op
from funcgrad.core.trace import Tracer
from funcgrad.errors import BackendUnavailableError

__all__ = ["BackendUnavailableError", "Device", "DeviceFallbackWarning", "block_until_ready",
           "default_backend", "default_device", "device_count", "device_get", "device_put",
           "devices", "local_device_count", "local_devices", "process_count", "process_index",
           "process_indices"]


class DeviceFallbackWarning(UserWarning):
    """An operation on GPU arrays ran on the CPU (with a copy each way)."""


class Device:
    """One device, as JAX's: `platform` ("cpu" or "cuda"), its global `id`, the
    `process_index` of the process that owns it and its `local_hardware_id` there.

    Example:
        >>> fg.devices("cpu")
        [CpuDevice(id=0)]
        >>> str(fg.devices()[0]), fg.devices()[0].process_index
        ('cpu:0', 0)
    """

    __slots__ = ("platform", "id", "process_index", "local_hardware_id")

    def __init__(self, platform, id=0, process_index=0, local_hardware_id=None):
        self.platform, self.id, self.process_index = platform, id, process_index
        self.local_hardware_id = id if local_hardware_id is None else local_hardware_id

    device_kind = property(lambda self: self.platform, doc="'cpu' or 'cuda'.")
    host_id = property(lambda self: self.process_index, doc="JAX's old name of process_index.")
    task_id = host_id

    def memory_stats(self):
        """None: funcgrad keeps no per-device memory statistics (as JAX on the CPU)."""
        return None

    def __repr__(self):
        return f"{'Cpu' if self.platform == 'cpu' else 'Cuda'}Device(id={self.id})"

    def __str__(self):
        return f"{self.platform}:{self.id}"

    def __eq__(self, other):
        return (isinstance(other, Device) and (self.platform, self.id)
                == (other.platform, other.id))

    def __hash__(self):
        return hash((self.platform, self.id))

    def __reduce__(self):
        return (Device, (self.platform, self.id, self.process_index, self.local_hardware_id))


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


_launched = []  # the launcher's process count, read once: a process's launch never changes


def _processes():
    """(this process's index, the number of processes). MPI is joined only when the process
    was launched as one of several (or `funcgrad.distributed.initialize` already ran)."""
    from funcgrad.distributed import runtime
    if not _launched:
        _launched.append(runtime.launched_size())
    if runtime.is_initialized() or _launched[0] > 1:
        world = runtime.world()
        return world.rank, world.size
    return 0, 1


def cpu_device_count():
    """The number of CPU devices each process has (`config.cpu_device_count`, default 1)."""
    n = config.cpu_device_count
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise errors.FuncgradValueError(
            f"config cpu_device_count must be a positive int, got {n!r}\n{errors.where()}")
    return int(n)


def _cpu_devices(process=None):
    """Every process's CPU devices in process order, or those of `process`."""
    n = cpu_device_count()
    rank, size = _processes()
    procs = range(size) if process is None else [process]
    return [Device("cpu", p * n + k, p, k) for p in procs for k in range(n)]


def _cuda_devices():
    p = cuda_provider()
    problem = p.problem()
    if problem:
        raise BackendUnavailableError(f"devices('cuda'): {problem}")
    rank = _processes()[0]
    return [Device("cuda", i, rank) for i in range(p.count())]


def _platform(backend, op):
    backend = default_backend() if backend is None else backend
    if backend in ("cpu", "cuda", "gpu"):
        return "cuda" if backend == "gpu" else backend
    raise errors.FuncgradValueError(
        f"{op}: unknown backend {backend!r}; known backends are 'cpu' and 'cuda'")


def devices(backend=None):
    """Every device of `backend` ("cpu", "cuda"; None: the default backend), across all
    processes, ordered by process and then by local id, as `jax.devices()`.

    One process has one CPU device (`config.update("cpu_device_count", N)`, the environment
    variable `FUNCGRAD_CPU_DEVICE_COUNT=N` or `XLA_FLAGS=--xla_force_host_platform_device_count=N`
    read at import give N virtual ones). Under `mpiexec` each process adds its own. GPUs are
    listed per process: `devices("cuda")` is this process's GPUs.

    Raises:
        BackendUnavailableError: "cuda" on a machine where it cannot run (says why).
        FuncgradValueError: an unknown backend name.

    Example:
        >>> fg.config.update("cpu_device_count", 4)
        >>> fg.devices()
        [CpuDevice(id=0), CpuDevice(id=1), CpuDevice(id=2), CpuDevice(id=3)]
    """
    if _platform(backend, "devices") == "cpu":
        return _cpu_devices()
    return _cuda_devices()


def local_devices(process_index=None, backend=None, host_id=None):
    """The devices of one process (None: this one), as `jax.local_devices`.

    Example:
        >>> fg.local_devices()
        [CpuDevice(id=0)]
    """
    process = process_index if process_index is not None else host_id
    rank, size = _processes()
    process = rank if process is None else process
    if not (isinstance(process, (int, np.integer)) and 0 <= process < size):
        raise errors.FuncgradValueError(
            f"local_devices: process_index {process!r} does not exist; there are {size} "
            f"processes\n{errors.where()}")
    if _platform(backend, "local_devices") == "cpu":
        return _cpu_devices(int(process))
    if process != rank:
        raise errors.FuncgradValueError(
            f"local_devices: the GPUs of process {process} are not known here (each process "
            f"lists its own)\n{errors.where()}")
    return _cuda_devices()


def device_count(backend=None):
    """The number of devices of every process together (`len(devices(backend))`).

    Example:
        >>> fg.device_count()
        1
    """
    return len(devices(backend))


def local_device_count(backend=None):
    """The number of this process's devices (`len(local_devices(backend=backend))`)."""
    return len(local_devices(backend=backend))


def process_index(backend=None):
    """This process's index (0 unless launched by `mpiexec`), as `jax.process_index`.

    Example:
        >>> fg.process_index(), fg.process_count()
        (0, 1)
    """
    _platform(backend, "process_index")
    return _processes()[0]


def process_count(backend=None):
    """The number of processes (1 unless launched by `mpiexec`), as `jax.process_count`."""
    _platform(backend, "process_count")
    return _processes()[1]


def process_indices(backend=None):
    """Every process's index: `list(range(process_count()))`."""
    return list(range(process_count(backend)))


def host_device():
    """This process's first CPU device: where host (numpy) values live."""
    rank, _ = _processes()
    return Device("cpu", rank * cpu_device_count(), rank, 0) if rank else CPU


_NO_VALUE = object()


def default_device(new_val=_NO_VALUE):
    """Within the block, `device_put(x)` with no device places arrays on `new_val` (a
    `Device`, a name such as "cpu:1" or "cuda", or None for the usual default), as
    `jax.default_device`; also settable with `config.update("jax_default_device", device)`.

    Computations run where their operands live (the GPU for GPU arrays, the host for the
    rest), and new arrays from `funcgrad.numpy` are made on the host: on the CPU, where all
    devices share the memory, this only changes the device arrays report.

    Example:
        >>> with fg.default_device(fg.devices()[-1]):
        ...     x = fg.device_put(fnp.ones(3))
        >>> x.devices() == {fg.devices()[-1]}
        True
    """
    if new_val is _NO_VALUE:
        raise errors.FuncgradTypeError(
            f"default_device: give the device, e.g. `with fg.default_device(fg.devices()[0]):`"
            f"\n{errors.where()}")
    if new_val is not None:
        _resolve(new_val)
    return _DefaultDevice(new_val)


class _DefaultDevice(contextlib.ContextDecorator):
    """The context manager `default_device` returns."""

    def __init__(self, device):
        self.device, self._saved = device, []

    def __enter__(self):
        self._saved.append(config.default_device)
        config.update("default_device", self.device)
        return self.device

    def __exit__(self, *exc):
        config.update("default_device", self._saved.pop())
        return False


def _resolve(device):
    if device is None:
        default = config.default_device
        return host_device() if default is None else _resolve(default)
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        platform, _, idx = device.partition(":")
        ds = local_devices(backend=platform) if platform != "cpu" else devices("cpu")
        if not ds or not (idx or "0").isdigit():
            raise errors.FuncgradValueError(f"device {device!r} is not a device name such as "
                                            "'cpu', 'cpu:1' or 'cuda:0'")
        i = int(idx or ds[0].id)
        found = [d for d in ds if d.id == i]
        if not found:
            raise errors.FuncgradValueError(f"device {device!r} does not exist; there are "
                                            f"{len(ds)} {platform} devices: {ds}")
        return found[0]
    raise errors.FuncgradTypeError(f"expected a Device or a name like 'cuda:0', got "
                                   f"{type(device).__name__}")


def device_of(value):
    """The `Device` a raw array value (numpy or a device array) lives on."""
    if type(value) is np.ndarray:
        return host_device()
    provider = _array.device_provider(value)
    if provider is None:
        return host_device()
    return Device("cuda", provider.device_id(value), _processes()[0])


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


def _put(x, device, copy):
    if not isinstance(x, Array):
        x = own_buffer(_array.to_array(x), x)
    here = device_of(x._value)
    if device.platform == "cpu":
        value = _array.host_value(x._value)
        if copy and value is x._value:
            value = value.copy()
        if device == here and getattr(x, "_sharding", None) is None and value is x._value:
            return x
        from funcgrad.sharding import arrays
        return arrays.place_on(Array(value, x.weak_type), device)
    if here == device and not copy:
        return x
    value = _array.host_value(x._value) if here.platform != "cpu" else x._value
    return Array(cuda_provider().to_device(np.array(value, order="C"), device.local_hardware_id),
                 x.weak_type)


def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
    """Place every array of pytree `x` on `device`, as `jax.device_put`.

    Args:
        x: a pytree of arrays (funcgrad, NumPy, CuPy) and Python scalars.
        device: where: None (the default device), a `Device`, a name ("cpu", "cpu:1",
            "cuda", "cuda:1"), a `funcgrad.sharding.Sharding` (`NamedSharding`,
            `SingleDeviceSharding`), a `PartitionSpec` (over the mesh of `set_mesh`), or a
            pytree prefix of `x` with such leaves.
        src: accepted as in JAX (where `x` is now); funcgrad reads the place from `x`.
        donate: a hint, as in JAX: funcgrad may reuse `x`'s memory (it never needs to on the
            CPU, where a placed array shares its value).
        may_alias: None or True: an array already in place is returned as it is; False:
            always a copy.

    Returns:
        `x` with every array placed (funcgrad Arrays).

    Example:
        >>> fg.device_put(fnp.ones(2)).devices()
        {CpuDevice(id=0)}
    """
    for name, flag in (("donate", donate), ("may_alias", may_alias)):
        if not (flag is None or isinstance(flag, (bool, np.bool_))):
            raise errors.FuncgradTypeError(f"device_put: {name} must be a bool, got {flag!r}"
                                           f"\n{errors.where()}")
    copy = may_alias is False
    from funcgrad.sharding import arrays
    if arrays.is_placement(device):
        return tree_util.tree_map(lambda v: _put_one(v, device, copy), x)
    places = arrays.placements_for(device, x, "device_put")
    leaves, tree = tree_util.tree_flatten(x)
    return tree_util.tree_unflatten(tree, [_put_one(v, d, copy) for v, d in zip(leaves, places)])


def _put_one(x, where, copy):
    from funcgrad.sharding import arrays
    if isinstance(x, Tracer):  # under jit/grad/vmap: placement is a property of concrete arrays
        if where is not None and not isinstance(where, (Device, str)):
            arrays.as_sharding(where, "device_put").shard_shape(x.aval.shape)
        return x
    if where is None or isinstance(where, (Device, str)):
        return _put(x, _resolve(where), copy)
    return arrays.put(x, where, copy)


register_op("Device", Device)  # for core.placement (out_sharding=)
register_op("device_put", device_put)


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
