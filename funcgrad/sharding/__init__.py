"""funcgrad.sharding: JAX's sharding vocabulary (`jax.sharding`), so that sharded programs run.

    import funcgrad as fg
    from funcgrad.sharding import NamedSharding, PartitionSpec as P

    mesh = fg.make_mesh((fg.device_count(),), ("data",))
    batch = fg.device_put(x, NamedSharding(mesh, P("data")))     # split over the devices
    step = fg.jit(train_step, in_shardings=(NamedSharding(mesh, P()), batch.sharding))

On one process every array holds its whole value and a sharding records which device
holds which block: results are exact whatever the layout (`config.cpu_device_count` gives
N virtual CPU devices to test multi-device programs). `shard_map` over a mesh runs its body
once per mesh member as a vmap over the members (the axis names bound for collectives).
Under `mpiexec`, a mesh whose first axis splits the processes means data parallelism: an
array split over that axis is a `GlobalArray` holding this process's block, and
`shard_map`/`pmap` over it run each process's block with collectives over MPI. What runs
where is listed in docs/tutorials/distributed.md.
"""

from funcgrad.distributed.mesh import P, PartitionSpec
from funcgrad.sharding.arrays import (
    GlobalArray,
    make_array_from_callback,
    make_array_from_process_local_data,
    make_array_from_single_device_arrays,
    reshard,
)
from funcgrad.sharding.mesh import (
    AbstractDevice,
    AbstractMesh,
    AxisType,
    ManualAxisType,
    Mesh,
    get_abstract_mesh,
    get_mesh,
    make_mesh,
    set_mesh,
    use_abstract_mesh,
)
from funcgrad.sharding.shard_map import Infer, auto_axes, explicit_axes, shard_map, smap
from funcgrad.sharding.shardings import (
    NamedSharding,
    Shard,
    Sharding,
    SingleDeviceSharding,
    make_single_device_sharding,
)

__all__ = [
    "AbstractDevice", "AbstractMesh", "AxisType", "GlobalArray", "Infer", "ManualAxisType",
    "Mesh", "NamedSharding", "P",
    "PartitionSpec", "Shard", "Sharding", "SingleDeviceSharding", "auto_axes", "explicit_axes",
    "get_abstract_mesh",
    "get_mesh", "make_array_from_callback", "make_array_from_process_local_data",
    "make_array_from_single_device_arrays", "make_mesh", "make_single_device_sharding",
    "reshard", "set_mesh", "shard_map", "smap", "use_abstract_mesh",
]
