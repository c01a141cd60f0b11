"""Sharded arrays: placing arrays with a sharding (`put`, `reshard`,
`with_sharding_constraint`), building them from pieces (`make_array_from_callback`,
`make_array_from_single_device_arrays`, `make_array_from_process_local_data`), and the
sharding methods of `Array` (`.sharding`, `.devices()`, `.addressable_shards`, ...), which
this module installs on the class (as `funcgrad.numpy` installs the array methods).

An `Array` on this process's devices holds its whole (global) value, whatever its sharding:
virtual CPU devices share the host's memory, so a sharding is a record of where each block
lives, and every computation on the array is exact. An array whose sharding spans several
processes is a `GlobalArray`: it holds this process's block, reports the global shape, and
is what `shard_map` (and `pmap`) over those processes compute with; reading its value on
one process (`numpy.asarray`) is an error, as in JAX.
Imports core, devices, errors and the sharding modules.
"""

import numpy as np

from funcgrad import errors, tree_util
from funcgrad.core import Array, Tracer, get_aval, register_op
from funcgrad.core.array import host_value, to_array
from funcgrad.devices import host_device, process_index
from funcgrad.sharding.mesh import process_layout
from funcgrad.sharding.shardings import (
    NamedSharding,
    Shard,
    Sharding,
    SingleDeviceSharding,
    as_sharding,
)

__all__ = ["GlobalArray", "make_array_from_callback", "make_array_from_process_local_data",
           "make_array_from_single_device_arrays", "reshard", "sharding_of"]


# --- the sharding of an Array -------------------------------------------------------------------

def sharding_of(x):
    """The sharding of a concrete array: the one it was placed with, else its device's."""
    if isinstance(x, GlobalArray):
        return x.sharding
    s = getattr(x, "_sharding", None)
    return s if s is not None else SingleDeviceSharding(x.device)


def with_sharding(array, sharding):
    """An Array sharing `array`'s value, recorded as placed by `sharding`."""
    out = Array(array._value, array.weak_type)
    if not (isinstance(sharding, SingleDeviceSharding) and sharding._device == host_device()):
        out._sharding = sharding
    return out


def place_on(array, device):
    """`array` on one device (`device_put(x, device)` for a CPU device)."""
    return with_sharding(array, SingleDeviceSharding(device))


def _shards(x, sharding, value, devices_filter):
    out = []
    for d, index in sharding.devices_indices_map(value.shape).items():
        if devices_filter(d):
            out.append(Shard(d, sharding, value.shape, Array(value[index], x.weak_type)))
    return out


def _install_array_methods():
    """`Array.sharding`, `.devices()`, `.addressable_shards`, ... (JAX's Array API)."""
    def addressable_shards(self):
        """This process's shards: (device, index, replica_id, data) per device."""
        rank = process_index()
        return _shards(self, sharding_of(self), host_value(self._value),
                       lambda d: d.process_index == rank)

    def global_shards(self):
        """Every device's shard (an Array holds the whole value, so all have data)."""
        return _shards(self, sharding_of(self), host_value(self._value), lambda d: True)

    def devices(self):
        """The set of devices holding a part of the array."""
        return sharding_of(self).device_set

    def addressable_data(self, index):
        """The data of shard `index` of `addressable_shards`."""
        return addressable_shards(self)[index].data

    Array.sharding = property(sharding_of, doc="The array's `Sharding`.")
    Array.devices = devices
    Array.addressable_shards = property(addressable_shards, doc=addressable_shards.__doc__)
    Array.global_shards = property(global_shards, doc=global_shards.__doc__)
    Array.addressable_data = addressable_data
    Array.is_fully_addressable = property(lambda self: sharding_of(self).is_fully_addressable,
                                          doc="True when this process's devices hold it all.")
    Array.is_fully_replicated = property(lambda self: sharding_of(self).is_fully_replicated,
                                         doc="True when every device holds the whole array.")
    Array.committed = property(lambda self: getattr(self, "_sharding", None) is not None,
                               doc="True when the array was placed explicitly.")
    Array.copy_to_host_async = lambda self: None


_install_array_methods()


# --- arrays spanning processes ------------------------------------------------------------------

class GlobalArray:
    """An array whose sharding spans several processes (under `mpiexec`): this process's
    block (`local`, the union of its devices' blocks) and the global `shape`.

    Compute with it inside `shard_map`/`pmap` over its mesh (each process then works on its
    block); `addressable_shards` gives this process's shards. Reading the whole value on one
    process is an error, as in JAX.
    """

    __slots__ = ("shape", "dtype", "sharding", "local", "box")

    def __init__(self, shape, sharding, local, box):
        self.shape, self.sharding, self.local, self.box = tuple(shape), sharding, local, box
        self.dtype = local.dtype

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))
    weak_type = property(lambda self: self.local.weak_type)
    is_fully_addressable = False
    is_fully_replicated = property(lambda self: self.sharding.is_fully_replicated)
    committed = True

    def devices(self):
        return self.sharding.device_set

    @property
    def aval(self):
        return get_aval(self.local).update(shape=self.shape)

    @property
    def addressable_shards(self):
        value, rank = self.local._value, process_index()
        out = []
        for d, index in self.sharding.devices_indices_map(self.shape).items():
            if d.process_index == rank:
                local = tuple(_shift(s, b) for s, b in zip(index, self.box))
                out.append(Shard(d, self.sharding, self.shape,
                                 Array(value[local], self.local.weak_type)))
        return out

    @property
    def global_shards(self):
        mine = {s.device: s for s in self.addressable_shards}
        return [mine.get(d) or Shard(d, self.sharding, self.shape)
                for d in self.sharding.devices_indices_map(self.shape)]

    def addressable_data(self, index):
        return self.addressable_shards[index].data

    def __array__(self, dtype=None, copy=None):
        raise self._whole()

    def _whole(self, *args):
        return errors.FuncgradValueError(
            f"this array of shape {self.shape} is sharded over several processes "
            f"({self.sharding!r}); one process holds only its block, so it cannot be used as "
            "a whole\n  hint: compute with it inside shard_map over its mesh (fg.shard_map("
            "fg.jit(step), ...)), or read this process's part with .addressable_data(0).")

    def __repr__(self):
        return (f"GlobalArray(shape={self.shape}, dtype={self.dtype}, sharding={self.sharding!r},"
                f" local block {self.box})")


def _refuse(name):
    def op(self, *args):
        raise self._whole()
    op.__name__ = name
    return op


for _op in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "matmul",
            "rmatmul", "pow", "neg", "getitem", "lt", "le", "gt", "ge", "bool", "float", "int"):
    setattr(GlobalArray, f"__{_op}__", _refuse(f"__{_op}__"))


def _shift(s, box):
    start = 0 if box.start is None else box.start
    return slice(None) if s.start is None else slice(s.start - start, s.stop - start)


def process_box(sharding, shape):
    """This process's block (a tuple of slices) of a global array of `shape`, or None when
    `sharding` is all this process's. Raises when the block is not one box."""
    indices = sharding.addressable_devices_indices_map(shape)
    if len(indices) == sharding.num_devices:
        return None
    if isinstance(sharding, NamedSharding):
        process_layout(sharding.mesh)  # the layouts funcgrad runs
    box = []
    for d in range(len(shape)):
        starts = sorted({(s[d].start or 0, shape[d] if s[d].stop is None else s[d].stop)
                         for s in indices.values()})
        lo, hi = starts[0][0], starts[-1][1]
        covered = sum(b - a for a, b in starts)
        if covered != hi - lo:
            raise errors.FuncgradValueError(
                f"{sharding!r}: this process's devices hold blocks of dimension {d} that are "
                f"not contiguous, a layout funcgrad does not run across processes\n"
                f"{errors.where(errors.user_frame(4))}\n  hint: split over the first mesh axis "
                "first, e.g. P(('data', 'model')) rather than P(('model', 'data')).")
        box.append(slice(lo, hi) if (lo, hi) != (0, shape[d]) else slice(None))
    return tuple(box)


# --- placing ------------------------------------------------------------------------------------

def put(x, sharding, copy=False):
    """`x` (one leaf) placed as `sharding` says: an Array recording it, or, when it spans
    processes, this process's block of `x` (the global value) as a GlobalArray."""
    sharding = as_sharding(sharding, "device_put")
    if isinstance(x, GlobalArray):
        if x.sharding == sharding:
            return x
        raise errors.FuncgradValueError(
            f"device_put: an array sharded over processes ({x.sharding!r}) cannot be moved to "
            f"{sharding!r}: funcgrad does not move data between processes outside collectives"
            f"\n{errors.where(errors.user_frame(3))}\n  hint: compute the new layout inside "
            "shard_map (lax.all_gather, lax.psum_scatter).")
    arr = x if isinstance(x, Array) else to_array(x)
    value = host_value(arr._value)
    sharding.shard_shape(value.shape)  # checks rank and divisibility
    if copy:
        value = value.copy()
    box = process_box(sharding, value.shape)
    if box is not None:
        return GlobalArray(value.shape, sharding, Array(np.ascontiguousarray(value[box]),
                                                         arr.weak_type), box)
    if value is not arr._value:
        arr = Array(value, arr.weak_type)
    return with_sharding(arr, sharding)


def is_placement(where):
    """True when `where` places a whole pytree (not a pytree prefix of placements)."""
    from funcgrad.devices import Device
    from funcgrad.distributed.mesh import P
    return where is None or isinstance(where, (Device, str, Sharding, P))


def placements_for(where, tree, op):
    """One placement per leaf of `tree`: `where` is a pytree prefix of it."""
    is_leaf = lambda v: v is None or is_placement(v)  # noqa: E731
    leaves, spec_tree = tree_util.tree_flatten(where, is_leaf=is_leaf)
    try:
        subtrees = spec_tree.flatten_up_to(tree)
    except (tree_util.TreeStructureError, ValueError) as e:
        raise errors.FuncgradValueError(
            f"{op}: the shardings must be one sharding or a pytree prefix of the value, but "
            f"they have structure {spec_tree} and the value {tree_util.tree_structure(tree)} "
            f"({e})\n{errors.where(errors.user_frame(3))}") from None
    out = []
    for s, sub in zip(leaves, subtrees):
        out += [s] * len(tree_util.tree_leaves(sub))
    return out


def reshard(xs, out_shardings):
    """`xs` (a pytree) laid out as `out_shardings` (a sharding, a `PartitionSpec` over the
    current mesh, or a pytree prefix of them), as `jax.sharding.reshard`. Traced values keep
    their value: under `jit` the layout is the compiler's (checked for divisibility here).

    Example:
        >>> fg.config.update("cpu_device_count", 2)
        >>> with set_mesh(fg.make_mesh((2,), ("x",))):
        ...     reshard(fnp.ones((4, 2)), P("x")).sharding.spec
        P('x',)
    """
    return _constrain(xs, out_shardings, "reshard")


def _constrain(xs, shardings, op):
    leaves, tree = tree_util.tree_flatten(xs)
    places = placements_for(shardings, xs, op) if not is_placement(shardings) else \
        [shardings] * len(leaves)
    out = []
    for x, s in zip(leaves, places):
        if s is None:
            out.append(x)
            continue
        s = as_sharding(s, op)
        if isinstance(x, Tracer):
            s.shard_shape(get_aval(x).shape)
            out.append(x)
        else:
            out.append(put(x, s))
    return tree_util.tree_unflatten(tree, out)


register_op("with_sharding_constraint", lambda x, s: _constrain(x, s, "with_sharding_constraint"))


# --- building arrays from pieces ----------------------------------------------------------------

def make_array_from_callback(shape, sharding, data_callback, dtype=None):
    """An array of global `shape` laid out as `sharding`, whose block on each of this
    process's devices is `data_callback(index)` (`index`: a tuple of slices), as
    `jax.make_array_from_callback`.

    Example:
        >>> data = np.arange(8.0).reshape(4, 2)
        >>> make_array_from_callback((4, 2), SingleDeviceSharding(fg.devices()[0]),
        ...                          lambda index: data[index])
        Array([[0., 1.],
               [2., 3.],
               [4., 5.],
               [6., 7.]], dtype=float32)
    """
    sharding = as_sharding(sharding, "make_array_from_callback")
    shape = tuple(int(s) for s in shape)
    indices = sharding.addressable_devices_indices_map(shape)
    blocks = {d: np.asarray(host_value(_value_of(data_callback(index))))
              for d, index in indices.items()}
    return _assemble(shape, sharding, indices, blocks, dtype, "make_array_from_callback")


def _value_of(x):
    return x._value if isinstance(x, Array) else x


def _assemble(shape, sharding, indices, blocks, dtype, op):
    block_shape = sharding.shard_shape(shape)
    for d, b in blocks.items():
        if b.shape != block_shape:
            raise errors.FuncgradValueError(
                f"{op}: the block for {d!r} (index {indices[d]}) has shape {b.shape}, but "
                f"{sharding!r} gives each device a block of shape {block_shape}\n"
                f"{errors.where(errors.user_frame(3))}")
    first = next(iter(blocks.values()))
    box = process_box(sharding, shape) or tuple(slice(None) for _ in shape)
    local_shape = tuple(len(range(*b.indices(n))) for b, n in zip(box, shape))
    out = np.empty(local_shape, dtype or first.dtype)
    for d, index in indices.items():
        out[tuple(_shift(s, b) for s, b in zip(index, box))] = blocks[d]
    arr = to_array(out)
    if process_box(sharding, shape) is not None:
        return GlobalArray(shape, sharding, arr, box)
    return with_sharding(arr, sharding)


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None):
    """An array of global `shape` laid out as `sharding` from one array per device of this
    process (each holding that device's block), as `jax.make_array_from_single_device_arrays`.
    Arrays placed on a device (`device_put(x, device)`) are matched by device; unplaced ones
    by position, in the order of `sharding.addressable_devices_indices_map(shape)`.
    """
    sharding = as_sharding(sharding, "make_array_from_single_device_arrays")
    shape = tuple(int(s) for s in shape)
    indices = sharding.addressable_devices_indices_map(shape)
    arrays = list(arrays)
    if len(arrays) != len(indices):
        raise errors.FuncgradValueError(
            f"make_array_from_single_device_arrays: {len(arrays)} arrays for the "
            f"{len(indices)} devices of this process in {sharding!r}\n{errors.where()}")
    placed = [sharding_of(a) if isinstance(a, Array) else None for a in arrays]
    if all(isinstance(p, SingleDeviceSharding) for p in placed) and \
            {p._device for p in placed} == set(indices):
        blocks = {p._device: host_value(a._value) for p, a in zip(placed, arrays)}
    else:
        blocks = {d: np.asarray(host_value(_value_of(a))) for d, a in zip(indices, arrays)}
    return _assemble(shape, sharding, indices, blocks, dtype,
                     "make_array_from_single_device_arrays")


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """The global array whose block on this process is `local_data`, as
    `jax.make_array_from_process_local_data`: on one process the array itself; under
    `mpiexec`, with a sharding whose first mesh axis splits the processes, each process
    passes its block (for example its part of the global batch).
    """
    sharding = as_sharding(sharding, "make_array_from_process_local_data")
    local = local_data if isinstance(local_data, Array) else to_array(local_data)
    lshape = tuple(local.shape)
    if isinstance(sharding, NamedSharding) and process_layout(sharding.mesh) is not None:
        n, _ = process_layout(sharding.mesh)
        first = sharding.mesh.axis_names[0]
        split = [d for d in range(len(lshape)) if d < len(sharding.spec)
                 and first in (sharding.spec[d] if isinstance(sharding.spec[d], tuple)
                               else (sharding.spec[d],))]
        full = tuple(s * n if d in split else s for d, s in enumerate(lshape))
        shape = tuple(global_shape) if global_shape is not None else full
        if shape != full:
            raise errors.FuncgradValueError(
                f"make_array_from_process_local_data: global_shape {shape} does not match "
                f"{n} processes' blocks of shape {lshape} laid out as {sharding!r}\n"
                f"{errors.where()}")
        sharding.shard_shape(shape)
        return GlobalArray(shape, sharding, local, process_box(sharding, shape))
    if global_shape is not None and tuple(global_shape) != lshape:
        raise errors.FuncgradValueError(
            f"make_array_from_process_local_data: on one process the local data is the whole "
            f"array, but global_shape {tuple(global_shape)} differs from its shape {lshape}\n"
            f"{errors.where()}")
    return put(local, sharding)


def local_value(x):
    """What a process computes with for `x`: a GlobalArray's block, else `x`."""
    return x.local if isinstance(x, GlobalArray) else x

