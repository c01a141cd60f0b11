"""Meshes: `Mesh`, `AbstractMesh`, `AxisType`, `make_mesh` and the current mesh (`set_mesh`,
`get_mesh`, `get_abstract_mesh`, `use_abstract_mesh`), as in `jax.sharding`.

A mesh is an n-d array of devices with a name per axis. On one process its devices are
this process's (virtual) CPU devices; under `mpiexec` a mesh may hold every process's
devices, and `process_layout` says how the processes split it: funcgrad runs such a mesh
when its first axis is split into equal blocks of whole processes (the data-parallel
layout `make_mesh` builds), each process holding its block.
Imports devices and errors only.
"""

import collections
import contextvars
import enum
import math

import numpy as np

from funcgrad import errors
from funcgrad.devices import Device, process_index
from funcgrad.devices import devices as all_devices

__all__ = ["AbstractDevice", "AbstractMesh", "AxisType", "ManualAxisType", "Mesh",
           "get_abstract_mesh", "get_mesh", "make_mesh", "set_mesh", "use_abstract_mesh"]


class AxisType(enum.Enum):
    """How a mesh axis is sharded (JAX's `Auto`, `Explicit`, `Manual`). funcgrad computes
    with every value whole on one process, so the three behave the same here; they are kept,
    printed and compared as JAX does."""

    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self):
        return self.name


def _axis_types(axis_types, n, default, op):
    if axis_types is None:
        return (default,) * n
    if isinstance(axis_types, AxisType):
        axis_types = (axis_types,) * n
    axis_types = tuple(axis_types)
    if len(axis_types) != n or not all(isinstance(t, AxisType) for t in axis_types):
        raise errors.FuncgradValueError(
            f"{op}: axis_types must be {n} AxisType values, got {axis_types!r}\n"
            f"{errors.where(errors.user_frame(3))}")
    return axis_types


def _axis_names(axis_names, op):
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise errors.FuncgradValueError(
            f"{op}: axis_names must be distinct strings, got {axis_names!r}\n"
            f"{errors.where(errors.user_frame(3))}")
    return names


class AbstractDevice:
    """The kind of the devices of an `AbstractMesh` (JAX's `AbstractDevice`)."""

    def __init__(self, device_kind, num_cores, platform):
        self.device_kind, self.num_cores, self.platform = device_kind, num_cores, platform

    def __repr__(self):
        return (f"AbstractDevice(device_kind={self.device_kind!r}, num_cores={self.num_cores},"
                f" platform={self.platform!r})")


class AbstractMesh:
    """A mesh's axis names, sizes and types without its devices (as `jax.sharding.AbstractMesh`).

    Example:
        >>> AbstractMesh((2, 2), ("a", "b"))
        AbstractMesh('a': 2, 'b': 2, axis_types=(Auto, Auto))
    """

    def __init__(self, axis_sizes, axis_names, axis_types=None, *, abstract_device=None):
        self.axis_names = _axis_names(axis_names, "AbstractMesh")
        self.axis_sizes = tuple(int(s) for s in axis_sizes)
        if len(self.axis_sizes) != len(self.axis_names):
            raise errors.FuncgradValueError(
                f"AbstractMesh: {len(self.axis_sizes)} axis sizes for {len(self.axis_names)} "
                f"names\n{errors.where()}")
        self.axis_types = _axis_types(axis_types, len(self.axis_names), AxisType.Auto,
                                      "AbstractMesh")
        self.abstract_device = abstract_device

    shape = property(lambda self: collections.OrderedDict(zip(self.axis_names,
                                                               self.axis_sizes)))
    shape_tuple = property(lambda self: tuple(zip(self.axis_names, self.axis_sizes)))
    size = property(lambda self: math.prod(self.axis_sizes))
    empty = property(lambda self: not self.axis_names)

    def __repr__(self):
        axes = ", ".join(f"{n!r}: {s}" for n, s in self.shape_tuple)
        return f"AbstractMesh({axes or '()'}, axis_types={self.axis_types!r})"

    def __eq__(self, other):
        return isinstance(other, AbstractMesh) and self.shape_tuple == other.shape_tuple and \
            self.axis_types == other.axis_types

    def __hash__(self):
        return hash((self.shape_tuple, self.axis_types))


class Mesh:
    """Devices laid out on named axes, as `jax.sharding.Mesh`.

    Args:
        devices: an array (or nested sequence) of `Device`s, one dimension per axis name; a
            flat list with one axis name is a 1-d mesh.
        axis_names: one name per dimension of `devices`.
        axis_types: an `AxisType` per axis (default `Auto`).

    Raises:
        FuncgradValueError: names that are not distinct strings, a devices array of another
            rank, a device listed twice.

    Example:
        >>> fg.config.update("cpu_device_count", 4)
        >>> Mesh(np.array(fg.devices()).reshape(2, 2), ("data", "model"))
        Mesh('data': 2, 'model': 2, axis_types=(Auto, Auto))
    """

    def __init__(self, devices, axis_names, axis_types=None):
        self.axis_names = _axis_names(axis_names, "Mesh")
        arr = np.empty(np.shape(devices), dtype=object) if not isinstance(devices, np.ndarray) \
            else None
        if arr is not None:
            for idx in np.ndindex(arr.shape):
                item = devices
                for i in idx:
                    item = item[i]
                arr[idx] = item
        else:
            arr = devices.astype(object)
        flat = list(arr.flat)
        if arr.ndim != len(self.axis_names) or not all(
                isinstance(d, Device) for d in flat) or len(set(flat)) != len(flat):
            raise errors.FuncgradValueError(
                f"Mesh: devices must be an array of distinct Devices with one dimension per "
                f"axis name; got shape {arr.shape} for axis names {self.axis_names}\n"
                f"{errors.where()}\n  hint: fg.make_mesh((2, 2), ('data', 'model')) lays "
                "out fg.devices() for you.")
        arr.flags.writeable = False
        self.devices = arr
        self.axis_types = _axis_types(axis_types, len(self.axis_names), AxisType.Auto, "Mesh")
        self._token = []

    shape = property(lambda self: collections.OrderedDict(zip(self.axis_names,
                                                               self.devices.shape)))
    shape_tuple = property(lambda self: tuple(zip(self.axis_names, self.devices.shape)))
    axis_sizes = property(lambda self: tuple(self.devices.shape))
    size = property(lambda self: self.devices.size)
    empty = property(lambda self: self.devices.size == 0)
    device_ids = property(lambda self: np.vectorize(lambda d: d.id, otypes=[int])(self.devices))
    abstract_mesh = property(lambda self: AbstractMesh(self.axis_sizes, self.axis_names,
                                                       self.axis_types))

    @property
    def local_devices(self):
        """This process's devices of the mesh, in mesh order."""
        rank = process_index()
        return [d for d in self.devices.flat if d.process_index == rank]

    @property
    def is_multi_process(self):
        return len({d.process_index for d in self.devices.flat}) > 1

    def __enter__(self):
        self._token.append(_current.set(self))
        return self

    def __exit__(self, *exc):
        _current.reset(self._token.pop())
        return False

    def __repr__(self):
        axes = ", ".join(f"{n!r}: {s}" for n, s in self.shape_tuple)
        return f"Mesh({axes}, axis_types={self.axis_types!r})"

    def _key(self):
        return (tuple(d.id for d in self.devices.flat), self.devices.shape, self.axis_names,
                self.axis_types)

    def __eq__(self, other):
        return isinstance(other, Mesh) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None):
    """A mesh of `axis_shapes` over `devices` (default: every device), as `jax.make_mesh`:
    devices are laid out in order, so under `mpiexec` the first axis splits the processes.
    Its axes are `Explicit` by default, as in JAX 0.10.

    Example:
        >>> fg.config.update("cpu_device_count", 4)
        >>> fg.make_mesh((2, 2), ("data", "model"))
        Mesh('data': 2, 'model': 2, axis_types=(Explicit, Explicit))
    """
    names = _axis_names(axis_names, "make_mesh")
    shape = tuple(int(s) for s in axis_shapes)
    devs = list(all_devices() if devices is None else devices)
    if len(shape) != len(names) or math.prod(shape) != len(devs):
        raise errors.FuncgradValueError(
            f"make_mesh: axis_shapes {shape} for axis names {names} must have one size per "
            f"name and multiply to the number of devices, {len(devs)}\n{errors.where()}\n"
            "  hint: fg.config.update('cpu_device_count', N) (or XLA_FLAGS="
            "--xla_force_host_platform_device_count=N) gives N CPU devices.")
    arr = np.empty(len(devs), dtype=object)
    arr[:] = devs
    return Mesh(arr.reshape(shape), names,
                _axis_types(axis_types, len(names), AxisType.Explicit, "make_mesh"))


# --- the current mesh -------------------------------------------------------------------------

_current = contextvars.ContextVar("funcgrad_mesh", default=None)
_current_abstract = contextvars.ContextVar("funcgrad_abstract_mesh", default=None)


class _MeshSetting:
    """What `set_mesh` returns: the mesh is set now; as a context manager, until exit."""

    def __init__(self, var, value):
        self._var, self._token = var, var.set(value)

    def __enter__(self):
        return self._var.get()

    def __exit__(self, *exc):
        self._var.reset(self._token)
        return False


def set_mesh(mesh):
    """Make `mesh` the current mesh (for `P` shardings, `reshard`, `shard_map` without a
    mesh): for the rest of the program, or inside `with fg.sharding.set_mesh(mesh):`.

    Example:
        >>> with set_mesh(fg.make_mesh((1,), ("data",))):
        ...     get_abstract_mesh()
        AbstractMesh('data': 1, axis_types=(Explicit,))
    """
    if mesh is not None and not isinstance(mesh, Mesh):
        raise errors.FuncgradTypeError(f"set_mesh: expected a Mesh or None, got "
                                       f"{type(mesh).__name__}\n{errors.where()}")
    return _MeshSetting(_current, mesh)


def get_mesh():
    """The current mesh (set by `set_mesh`), or an empty one."""
    mesh = _current.get()
    return mesh if mesh is not None else Mesh(np.empty((0,), dtype=object), ("_",))


def get_abstract_mesh():
    """The current mesh's `AbstractMesh` (an empty one when none is set)."""
    abstract = _current_abstract.get()
    if abstract is not None:
        return abstract
    mesh = _current.get()
    return mesh.abstract_mesh if mesh is not None else AbstractMesh((), ())


def use_abstract_mesh(mesh):
    """Make `mesh` (an `AbstractMesh`) the current abstract mesh inside the block."""
    if not isinstance(mesh, AbstractMesh):
        raise errors.FuncgradTypeError(f"use_abstract_mesh: expected an AbstractMesh, got "
                                       f"{type(mesh).__name__}\n{errors.where()}")
    return _MeshSetting(_current_abstract, mesh)


def current_mesh(op):
    """The mesh set by `set_mesh`; an error naming `op` when there is none."""
    mesh = _current.get()
    if mesh is None:
        raise errors.FuncgradValueError(
            f"{op}: a PartitionSpec needs a mesh, and none is set\n"
            f"{errors.where(errors.user_frame(3))}\n  hint: pass NamedSharding(mesh, spec), or "
            "call fg.sharding.set_mesh(mesh) first.")
    return mesh


def process_layout(mesh):
    """How the processes split `mesh`: None when all its devices are this process's, else
    (number of processes, this process's block of the first axis as a slice). Raises for
    layouts funcgrad does not run (a process's devices not one block of the first axis)."""
    procs = np.vectorize(lambda d: d.process_index, otypes=[int])(mesh.devices)
    rank = process_index()
    if (procs == rank).all():
        return None
    n = len(np.unique(procs))
    first = mesh.devices.shape[0] if mesh.devices.ndim else 0
    block = first // n if n and first % n == 0 else 0
    ok = block > 0 and all((procs[i * block:(i + 1) * block] == procs[i * block].flat[0]).all()
                           for i in range(n)) and len(np.unique(procs[::block].flat)) == n
    if not ok or not (procs == rank).any():
        raise errors.FuncgradValueError(
            f"mesh {mesh!r} spreads {n} processes' devices in a layout funcgrad does not run: "
            "across processes, each process must hold an equal block of the first mesh axis "
            f"(and this process must hold one)\n{errors.where(errors.user_frame(3))}\n"
            "  hint: fg.make_mesh((fg.device_count(),), ('data',)) or a first axis that is a "
            "multiple of fg.process_count() lays the processes out so.")
    start = int(np.argmax(procs.reshape(first, -1)[:, 0] == rank))
    return n, slice(start, start + block)


class ManualAxisType:
    """How a value varies over the manual axes of a `shard_map` (JAX's `ManualAxisType`):
    the axes it is `varying` over (funcgrad's `vma`); `unreduced`/`reduced` must be empty."""

    def __init__(self, *, varying=frozenset(), unreduced=frozenset(), reduced=frozenset()):
        if unreduced or reduced:
            raise errors.FuncgradValueError(
                f"ManualAxisType: unreduced/reduced axes are not supported by funcgrad\n"
                f"{errors.where()}")
        self.varying = frozenset(varying)
        self.unreduced, self.reduced = frozenset(), frozenset()

    def __repr__(self):
        return f"ManualAxisType(varying={set(self.varying) or '{}'})"

    def __eq__(self, other):
        return isinstance(other, ManualAxisType) and self.varying == other.varying

    def __hash__(self):
        return hash(("manual", self.varying))
