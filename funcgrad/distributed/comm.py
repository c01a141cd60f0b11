"""Communicators: the numpy-level collectives behind funcgrad's named axes.

`Communicator` wraps an mpi4py communicator (or, for a single process without mpi4py, a
`SelfMPI` stand-in with the same buffer API) and offers what the eager implementations, the
numpy backend and the host utilities need: `allreduce_many` (packed by dtype into one
buffer per dtype, one `Allreduce(IN_PLACE)` each), `allgather`, `reduce_scatter`, and
pickled object collectives for small host data. Only the buffer API carries arrays (the
pickling calls are several times slower even for one number). Dtypes MPI cannot reduce
portably travel as a wider type: bool as int32, float16 and bfloat16 as float32.
Imports numpy only; mpi4py is imported by `funcgrad.distributed.initialize`.
"""

import numpy as np

_NATIVE = frozenset(np.dtype(t) for t in (
    "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "complex64", "complex128"))


def wire_dtype(dtype):
    """The dtype an array of `dtype` travels as (itself when MPI reduces it natively)."""
    dtype = np.dtype(dtype)
    if dtype in _NATIVE:
        return dtype
    if dtype.kind == "b":
        return np.dtype(np.int32)
    return np.dtype(np.float32)


class _SelfOp:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"SelfMPI.{self.name}"


class SelfMPI:
    """The mpi4py buffer API for one process (used when mpi4py is not installed)."""

    IN_PLACE = object()
    SUM, MAX, MIN = _SelfOp("SUM"), _SelfOp("MAX"), _SelfOp("MIN")
    rank, size = 0, 1

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def Allreduce(self, sendbuf, recvbuf, op=None):
        if sendbuf is not self.IN_PLACE:
            np.copyto(recvbuf, sendbuf)

    def Allgather(self, sendbuf, recvbuf):
        np.copyto(recvbuf.reshape(np.shape(sendbuf)), sendbuf)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=None):
        np.copyto(recvbuf, np.reshape(sendbuf, recvbuf.shape))

    def Bcast(self, buf, root=0):
        pass

    def Barrier(self):
        pass

    def allgather(self, obj):
        return [obj]

    def bcast(self, obj, root=0):
        return obj

    def allreduce(self, obj, op=None):
        return obj

    def Abort(self, code=1):
        raise SystemExit(code)


class Communicator:
    """A process group: `rank`, `size` and the collectives on numpy arrays.

    Args:
        mpi: an mpi4py communicator (`MPI.Comm`) or a `SelfMPI`.
        MPI: the `mpi4py.MPI` module (None with `SelfMPI`).
        check: a second communicator of the same group for funcgrad's own checks (agreement
            of shapes across processes), so that they never match the program's collectives.
    """

    def __init__(self, mpi, MPI=None, check=None):
        self.mpi = mpi
        self.MPI = MPI
        self.check = check if check is not None else mpi
        self.rank, self.size = mpi.Get_rank(), mpi.Get_size()
        api = MPI if MPI is not None else mpi
        self.IN_PLACE = api.IN_PLACE
        self.ops = {"sum": api.SUM, "max": api.MAX, "min": api.MIN}
        self.nccl = None  # created on first use by the CUDA backend

    def __repr__(self):
        kind = "mpi4py" if self.MPI is not None else "single process"
        return f"<Communicator {kind}: rank {self.rank} of {self.size}>"

    # --- arrays -----------------------------------------------------------------------------
    def allreduce(self, x, op):
        """The elementwise `op` ("sum", "max", "min") of `x` over the group, as a new array."""
        return self.allreduce_many([x], op)[0]

    def allreduce_many(self, xs, op):
        """`allreduce` of several arrays: one `Allreduce` per dtype on a packed buffer."""
        xs = [np.asarray(x) for x in xs]
        outs = [None] * len(xs)
        groups = {}
        for i, x in enumerate(xs):
            groups.setdefault(wire_dtype(x.dtype), []).append(i)
        for wire, idx in groups.items():
            if len(idx) == 1:
                buf = np.array(xs[idx[0]], dtype=wire, order="C", copy=True)
                self.mpi.Allreduce(self.IN_PLACE, buf, op=self.ops[op])
                parts = [buf]
            else:
                buf = np.concatenate([xs[i].ravel().astype(wire, copy=False) for i in idx])
                self.mpi.Allreduce(self.IN_PLACE, buf, op=self.ops[op])
                parts, start = [], 0
                for i in idx:
                    n = xs[i].size
                    parts.append(buf[start:start + n].reshape(xs[i].shape))
                    start += n
            for i, p in zip(idx, parts):
                outs[i] = p if p.dtype == xs[i].dtype else p.astype(xs[i].dtype)
        return outs

    def allgather(self, x):
        """Every member's `x` stacked along a new leading axis, in rank order."""
        x = np.asarray(x)
        wire = wire_dtype(x.dtype)
        send = np.ascontiguousarray(x, dtype=wire)
        out = np.empty((self.size,) + x.shape, wire)
        self.mpi.Allgather(send, out)
        return out if wire == x.dtype else out.astype(x.dtype)

    def reduce_scatter(self, x, op):
        """`x` of shape `(size, *block)` reduced over the group; member k gets block k."""
        x = np.asarray(x)
        wire = wire_dtype(x.dtype)
        send = np.ascontiguousarray(x, dtype=wire)
        out = np.empty(x.shape[1:], wire)
        self.mpi.Reduce_scatter_block(send, out, op=self.ops[op])
        return out if wire == x.dtype else out.astype(x.dtype)

    def bcast_array(self, x, root=0):
        """Rank `root`'s array (same shape and dtype on every member required)."""
        buf = np.array(x, order="C", copy=True)
        self.mpi.Bcast(buf, root=root)
        return buf

    # --- small host objects (pickled) ---------------------------------------------------------
    def allgather_obj(self, obj, check=False):
        return (self.check if check else self.mpi).allgather(obj)

    def bcast_obj(self, obj, root=0):
        return self.mpi.bcast(obj, root=root)

    def agree(self, value):
        """True on every member when all members passed the same int64 `value` (one
        `Allreduce` of `[v, -v]` with MAX on the check communicator)."""
        v = np.array([value, -value], np.int64)
        if self.size > 1:
            self.check.Allreduce(self.IN_PLACE, v, op=self.ops["max"])
        return bool(v[0] == -v[1])

    def barrier(self):
        self.mpi.Barrier()
