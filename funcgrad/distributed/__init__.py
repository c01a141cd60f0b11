"""funcgrad.distributed: data-parallel training over processes.

    mpiexec -n 2 python train.py          # pip install funcgrad[distributed]

    import funcgrad as fg
    from funcgrad import lax
    from funcgrad.distributed import Mesh, P, shard_map

    mesh = Mesh(("data",))                             # one member per process
    params = fg.distributed.broadcast(params)          # the same start on every process

    @fg.jit
    @shard_map(mesh=mesh, in_specs=(P(), P("data")), out_specs=(P(), P()))
    def step(params, batch):                           # batch: this process's shard
        loss_fn = lambda p: lax.pmean(local_loss(p, batch), "data")
        loss, grads = fg.value_and_grad(loss_fn)(params)   # grads: the mean, allreduced
        return update(params, grads), loss

MPI through mpi4py carries the collectives on the CPU (`Allreduce`, `Allgather`,
`Reduce_scatter_block` on the program's own buffers); programs compiled for the GPU call
NCCL through CuPy. Without `mpiexec` everything runs as one process (size 1), and
`fg.vmap(f, axis_name="data")` runs the same body for n simulated processes in one.
The gradient of a `pmean`'d loss with respect to replicated (`P()`) parameters is the mean
of the per-process gradients; the gradient of an un-reduced per-process loss is their sum.
JAX's spellings run on the same engine: `fg.pmap` (over each process's devices, its axis
spanning the processes) and `fg.shard_map` over a `funcgrad.sharding.Mesh` whose first axis
splits the processes.
"""

from funcgrad.distributed.host import barrier, broadcast, check_replicated
from funcgrad.distributed.mesh import Mesh, P, PartitionSpec, shard_map
from funcgrad.distributed.runtime import (
    DistributedSetupError,
    initialize,
    is_initialized,
    local_process_count,
    local_process_index,
    process_count,
    process_index,
)

__all__ = [
    "DistributedSetupError", "Mesh", "P", "PartitionSpec", "barrier", "broadcast",
    "check_replicated", "initialize", "is_initialized", "local_process_count",
    "local_process_index", "process_count", "process_index", "shard_map",
]
