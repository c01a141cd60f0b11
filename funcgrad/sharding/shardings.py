"""Shardings: `Sharding`, `SingleDeviceSharding`, `NamedSharding`, `Shard`, as in
`jax.sharding`. A sharding maps each device to the block (`index`, a tuple of slices) of a
global array it holds; `NamedSharding(mesh, P(...))` splits dimension d over the mesh axes
named by the spec's entry d (in order: the first name varies slowest), and replicates over
the other axes. Imports devices, the mesh module and errors.
"""

import math

import numpy as np

from funcgrad import errors
from funcgrad.core.ops import register_op
from funcgrad.devices import Device, process_index
from funcgrad.distributed.mesh import P, PartitionSpec
from funcgrad.sharding.mesh import Mesh, current_mesh

__all__ = ["NamedSharding", "PartitionSpec", "Shard", "Sharding", "SingleDeviceSharding",
           "make_single_device_sharding"]


class Sharding:
    """The base class of shardings (JAX's `jax.sharding.Sharding` interface): a set of
    devices and the block of a global array each holds."""

    memory_kind = "device"

    @property
    def device_set(self):
        """The devices holding a part of the array."""
        return set(self._device_assignment)

    @property
    def num_devices(self):
        return len(self._device_assignment)

    @property
    def addressable_devices(self):
        """This process's devices of the sharding."""
        rank = process_index()
        return {d for d in self._device_assignment if d.process_index == rank}

    @property
    def is_fully_addressable(self):
        rank = process_index()
        return all(d.process_index == rank for d in self._device_assignment)

    @property
    def is_fully_replicated(self):
        """True when every device holds the whole array."""
        return self.shard_shape((1 << 20,) * 8) == (1 << 20,) * 8

    def devices_indices_map(self, global_shape):
        """{device: the index (a tuple of slices) of the block it holds}."""
        raise NotImplementedError(f"{type(self).__name__} must define devices_indices_map "
                                  "(Sharding is an abstract base, as JAX's)")

    def addressable_devices_indices_map(self, global_shape):
        rank = process_index()
        return {d: i for d, i in self.devices_indices_map(global_shape).items()
                if d.process_index == rank}

    def shard_shape(self, global_shape):
        """The shape of each device's block of an array of `global_shape`."""
        raise NotImplementedError(f"{type(self).__name__} must define shard_shape "
                                  "(Sharding is an abstract base, as JAX's)")

    def with_memory_kind(self, kind):
        if kind not in (None, "device"):
            raise errors.FuncgradValueError(f"{type(self).__name__}: funcgrad has one memory "
                                            f"kind, 'device'; got {kind!r}\n{errors.where()}")
        return self

    def is_equivalent_to(self, other, ndim):
        """True when both put the same blocks on the same devices for rank-`ndim` arrays."""
        shape = (2 * 3 * 5 * 7 * 16,) * ndim
        return isinstance(other, Sharding) and \
            self.devices_indices_map(shape) == other.devices_indices_map(shape)

    def replica_ids(self, global_shape):
        """{device: its replica id: the rank among the devices holding the same block}."""
        seen, out = {}, {}
        for d, index in self.devices_indices_map(global_shape).items():
            key = _index_key(index)
            out[d] = seen.get(key, 0)
            seen[key] = out[d] + 1
        return out


def _index_key(index):
    return tuple((s.start, s.stop) for s in index)


class SingleDeviceSharding(Sharding):
    """The whole array on one device.

    Example:
        >>> SingleDeviceSharding(fg.devices()[0])
        SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)
    """

    def __init__(self, device, *, memory_kind=None):
        if not isinstance(device, Device):
            raise errors.FuncgradTypeError(f"SingleDeviceSharding: expected a Device, got "
                                           f"{type(device).__name__}\n{errors.where()}")
        self.with_memory_kind(memory_kind)
        self._device = device

    _device_assignment = property(lambda self: (self._device,))

    def devices_indices_map(self, global_shape):
        return {self._device: tuple(slice(None) for _ in global_shape)}

    def shard_shape(self, global_shape):
        return tuple(global_shape)

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind=device)"

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and self._device == other._device

    def __hash__(self):
        return hash(("single", self._device))


def make_single_device_sharding(device, *, memory_kind=None):
    """`SingleDeviceSharding(device)`."""
    return SingleDeviceSharding(device, memory_kind=memory_kind)


class NamedSharding(Sharding):
    """An array split over the axes of `mesh` as `spec` (a `PartitionSpec`) says, as
    `jax.sharding.NamedSharding`.

    Args:
        mesh: a `Mesh`.
        spec: a `PartitionSpec`: entry d names the mesh axis (or tuple of axes) that splits
            dimension d; dimensions past the spec and None entries are not split. The array
            is replicated over the mesh axes the spec does not name.

    Raises:
        FuncgradValueError: an axis the mesh lacks, or one named twice.

    Example:
        >>> fg.config.update("cpu_device_count", 4)
        >>> s = NamedSharding(fg.make_mesh((2, 2), ("a", "b")), P("a"))
        >>> s.shard_shape((4, 6)), s.is_fully_replicated
        ((2, 6), False)
    """

    def __init__(self, mesh, spec=P(), *, memory_kind=None):
        if not isinstance(mesh, Mesh):
            raise errors.FuncgradTypeError(f"NamedSharding: expected a funcgrad.sharding.Mesh, "
                                           f"got {type(mesh).__name__}\n{errors.where()}")
        if not isinstance(spec, P):
            spec = P(*spec) if isinstance(spec, (tuple, list)) else P(spec)
        self.with_memory_kind(memory_kind)
        names = spec.axes
        unknown = [n for n in names if n not in mesh.axis_names]
        twice = [n for n in names if names.count(n) > 1]
        if unknown or twice:
            what = (f"names axis {unknown[0]!r}, which the mesh does not have (its axes: "
                    f"{mesh.axis_names})" if unknown else f"names axis {twice[0]!r} twice")
            raise errors.FuncgradValueError(f"NamedSharding: the spec {spec!r} {what}\n"
                                            f"{errors.where()}")
        self.mesh, self.spec = mesh, spec

    _device_assignment = property(lambda self: tuple(self.mesh.devices.flat))

    def _splits(self, ndim):
        """Per dimension: the mesh axes splitting it (a tuple, maybe empty)."""
        if len(self.spec) > ndim:
            raise errors.FuncgradValueError(
                f"NamedSharding: the spec {self.spec!r} has {len(self.spec)} entries, more "
                f"than the array's {ndim} dimensions\n{errors.where(errors.user_frame(4))}")
        out = []
        for d in range(ndim):
            entry = self.spec[d] if d < len(self.spec) else None
            out.append((entry,) if isinstance(entry, str) else
                       tuple(entry) if isinstance(entry, tuple) else ())
        return out

    def shard_shape(self, global_shape):
        sizes = self.mesh.shape
        out = []
        for d, axes in enumerate(self._splits(len(global_shape))):
            parts = math.prod(sizes[a] for a in axes)
            if global_shape[d] % parts:
                raise errors.FuncgradValueError(
                    f"NamedSharding: the spec {self.spec!r} splits dimension {d} of an array "
                    f"of shape {tuple(global_shape)} into {parts} parts, which does not divide "
                    f"its size {global_shape[d]}\n{errors.where(errors.user_frame(4))}")
            out.append(global_shape[d] // parts)
        return tuple(out)

    def devices_indices_map(self, global_shape):
        block = self.shard_shape(global_shape)
        splits = self._splits(len(global_shape))
        names = self.mesh.axis_names
        sizes = self.mesh.shape
        out = {}
        for pos in np.ndindex(self.mesh.devices.shape):
            coord = dict(zip(names, pos))
            index = []
            for d, axes in enumerate(splits):
                k = 0
                for a in axes:  # the first name varies slowest
                    k = k * sizes[a] + coord[a]
                index.append(slice(k * block[d], (k + 1) * block[d]) if axes else slice(None))
            out[self.mesh.devices[pos]] = tuple(index)
        return out

    @property
    def is_fully_replicated(self):
        return all(self.mesh.shape[a] == 1 for a in self.spec.axes)

    def __repr__(self):
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r}, memory_kind=device)"

    def __eq__(self, other):
        return isinstance(other, NamedSharding) and self.mesh == other.mesh and \
            _trimmed(self.spec) == _trimmed(other.spec)

    def __hash__(self):
        return hash((self.mesh, _trimmed(self.spec)))


def _trimmed(spec):
    dims = list(spec)
    while dims and dims[-1] is None:
        dims.pop()
    return tuple(dims)


def as_sharding(s, op):
    """`s` as a Sharding: a `PartitionSpec` names axes of the current mesh (`set_mesh`)."""
    if isinstance(s, Sharding):
        return s
    if isinstance(s, P):
        return NamedSharding(current_mesh(op), s)
    if isinstance(s, Device):
        return SingleDeviceSharding(s)
    raise errors.FuncgradTypeError(
        f"{op}: expected a Device or a name like 'cuda:0', a Sharding (NamedSharding, "
        f"SingleDeviceSharding) or a PartitionSpec, got {type(s).__name__} "
        f"{errors.short_repr(s)}\n"
        f"{errors.where(errors.user_frame(3))}")


register_op("Sharding", Sharding)  # for core.placement (out_sharding=)


class Shard:
    """One device's block of an array, as JAX's `Shard(device, sharding, global_shape,
    data=None)`: `index` (a tuple of slices into the global array) and `replica_id` follow
    from the sharding; `data` is the block (an Array), None where another process holds it."""

    __slots__ = ("device", "sharding", "global_shape", "data")

    def __init__(self, device, sharding, global_shape, data=None):
        self.device, self.sharding, self.data = device, sharding, data
        self.global_shape = tuple(global_shape)

    @property
    def index(self):
        return self.sharding.devices_indices_map(self.global_shape)[self.device]

    @property
    def replica_id(self):
        return self.sharding.replica_ids(self.global_shape)[self.device]

    def __repr__(self):
        return (f"Shard(device={self.device!r}, index={self.index}, replica_id="
                f"{self.replica_id}, data={self.data!r})")
