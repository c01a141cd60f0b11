"""The CUDA backend's collectives: NCCL through CuPy (`cupy.cuda.nccl`) on a stream.

Registered as library calls (`runtime.LIBRARY`, called `fn(xp, *device_arrays, **params)`):

    psum/pmax/pmin   ncclAllReduce per operand; the operands of a bucket are enqueued
                     between groupStart()/groupEnd() (no packing copy)
    all_gather       ncclAllGather into (n, *shape), then the gathered axis moved in place
    psum_scatter     ncclReduceScatter of the blocks along `scatter_dimension`
    pvary            the operands themselves; axis_index: the rank

Ordering: NCCL runs on one communication stream per axis. Before a collective, that stream
waits for an event recorded on the current (compute) stream, so it reads finished operands;
after it, the compute stream waits for the collective's event, so no consumer reads a
result early, while the host returns at once. Results are allocated on the compute stream
from CuPy's pool before the collective is enqueued.

The NCCL communicator is made on first use from the axis's MPI communicator (process 0
calls `get_unique_id()`, MPI broadcasts it). Without NCCL (not installed, or several
processes sharing one GPU, which NCCL refuses) the collectives go through host memory:
device -> numpy -> MPI -> device (the PyPI MPI wheels are not CUDA-aware, so device pointers
are never handed to MPI). Importing this module does not import CuPy.
"""

import numpy as np

from funcgrad.backends.cuda import runtime
from funcgrad.distributed import runtime as dist_runtime
from funcgrad.lax import parallel

# ncclDataType_t and ncclRedOp_t (nccl.h; the values are part of NCCL's ABI). CuPy's own
# table has no bfloat16.
NCCL_DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
               "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
NCCL_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


def _pointer(x):
    data = x.data
    return data.ptr if hasattr(data, "ptr") else x.ctypes.data


class NcclAxis:
    """An NCCL communicator for one axis and its communication stream.

    Args:
        comm: the axis's `Communicator` (MPI), used to share NCCL's unique id.
        cupy: the CuPy module (or a stand-in with `cuda.Stream`, `cuda.get_current_stream`).
        nccl: `cupy.cuda.nccl` (or a stand-in with `get_unique_id`, `NcclCommunicator`,
            `groupStart`, `groupEnd`).
    """

    def __init__(self, comm, cupy, nccl):
        self.cupy, self.nccl = cupy, nccl
        self.size, self.rank = comm.size, comm.rank
        uid = comm.bcast_obj(nccl.get_unique_id() if comm.rank == 0 else None, 0)
        self.nc = nccl.NcclCommunicator(comm.size, uid, comm.rank)
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def _enqueue(self, launch):
        """Run `launch(stream_ptr)` on the communication stream, ordered after the work
        already on the current stream and before the work enqueued on it later."""
        compute = self.cupy.cuda.get_current_stream()
        self.stream.wait_event(compute.record())
        launch(self.stream.ptr)
        compute.wait_event(self.stream.record())

    def all_reduce(self, xs, op):
        xp = self.cupy
        xs = [xp.ascontiguousarray(x) for x in xs]
        outs = [xp.empty_like(x) for x in xs]

        def launch(stream):
            if len(xs) > 1:
                self.nccl.groupStart()
            for x, o in zip(xs, outs):
                self.nc.allReduce(_pointer(x), _pointer(o), x.size, _dtype(x), NCCL_OPS[op],
                                  stream)
            if len(xs) > 1:
                self.nccl.groupEnd()
        self._enqueue(launch)
        return outs

    def all_gather(self, x):
        xp = self.cupy
        x = xp.ascontiguousarray(x)
        out = xp.empty((self.size,) + x.shape, x.dtype)
        self._enqueue(lambda s: self.nc.allGather(_pointer(x), _pointer(out), x.size,
                                                  _dtype(x), s))
        return out

    def reduce_scatter(self, blocks, op):
        """`blocks` of shape `(size, *block)` reduced; this rank gets its block."""
        xp = self.cupy
        blocks = xp.ascontiguousarray(blocks)
        out = xp.empty(blocks.shape[1:], blocks.dtype)
        self._enqueue(lambda s: self.nc.reduceScatter(_pointer(blocks), _pointer(out), out.size,
                                                      _dtype(blocks), NCCL_OPS[op], s))
        return out


def _dtype(x):
    return NCCL_DTYPES[np.dtype(x.dtype).name]


# --- choosing NCCL or host staging ------------------------------------------------------------

_nccl_axes = {}  # id(communicator) -> NcclAxis, or None when NCCL cannot serve it


def nccl_axis(comm, xp):
    """The NcclAxis of `comm` for arrays of module `xp`, or None: go through host memory."""
    key = id(comm)
    if key not in _nccl_axes:
        _nccl_axes[key] = _make_nccl_axis(comm, xp)
    return _nccl_axes[key]


def _make_nccl_axis(comm, xp):
    if xp is np or dist_runtime.backend() == "mpi":
        return None
    try:
        from cupy.cuda import nccl
    except ImportError:
        return None
    if not getattr(nccl, "available", False):
        return None
    # NCCL refuses two ranks on one GPU: with more processes than GPUs here, stage on host.
    ok = dist_runtime.local_process_count() <= xp.cuda.runtime.getDeviceCount()
    if not comm.agree(int(ok)) or not ok:
        return None
    return NcclAxis(comm, xp, nccl)


def _to_host(xp, x):
    return x if xp is np else xp.asnumpy(x)


def _to_device(xp, x):
    return x if xp is np else xp.asarray(x)


# --- the library calls ------------------------------------------------------------------------

def _allreduce(op):
    def call(xp, *xs, axis_name):
        for name in axis_name:
            comm = parallel.communicator(name, op)
            axis = nccl_axis(comm, xp)
            if axis is not None:
                xs = axis.all_reduce(xs, op)
            else:
                xs = [_to_device(xp, o) for o in
                      comm.allreduce_many([_to_host(xp, x) for x in xs], op)]
        return list(xs)
    return call


def _all_gather(xp, x, *, axis_name, axis, tiled, axis_size):
    comm = parallel.communicator(axis_name[0], "all_gather")
    nc = nccl_axis(comm, xp)
    stacked = nc.all_gather(x) if nc is not None else _to_device(
        xp, comm.allgather(_to_host(xp, x)))
    return parallel._place_gathered(xp, stacked, axis, tiled)


def _psum_scatter(xp, x, *, axis_name, scatter_dimension, tiled, axis_size):
    comm = parallel.communicator(axis_name[0], "psum_scatter")
    blocks = parallel._blocks_first(xp, x, scatter_dimension, axis_size)
    nc = nccl_axis(comm, xp)
    block = nc.reduce_scatter(blocks, "sum") if nc is not None else _to_device(
        xp, comm.reduce_scatter(_to_host(xp, blocks), "sum"))
    out = xp.moveaxis(block, 0, scatter_dimension) if block.ndim else block
    shape = parallel._scattered_shape(x.shape, scatter_dimension, tiled, axis_size)
    return xp.ascontiguousarray(out).reshape(shape)


def _axis_index(xp, *, axis_name):
    return xp.asarray(np.int32(parallel.communicator(axis_name[0], "axis_index").rank))


LIBRARY = {
    "psum": _allreduce("sum"), "pmax": _allreduce("max"), "pmin": _allreduce("min"),
    "all_gather": _all_gather, "psum_scatter": _psum_scatter,
    "pvary": lambda xp, *xs, axis_name: list(xs), "axis_index": _axis_index,
}
runtime.LIBRARY.update(LIBRARY)
