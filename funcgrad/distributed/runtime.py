"""Process setup: `initialize()`, the process index and count, the world communicator.

`mpiexec` (PMI) has already put the processes together, so MPI is the bootstrap: there is
no coordination service. mpi4py is imported here, lazily, and only when `initialize` runs.
Without mpi4py a single process still works (size 1); a multi-process launch without it is
an error that says how to install it.
"""

import os
import sys
import time
import traceback
import warnings

from funcgrad import errors
from funcgrad.distributed.comm import Communicator, SelfMPI

__all__ = ["DistributedSetupError", "initialize", "is_initialized", "local_process_count",
           "local_process_index", "process_count", "process_index", "world"]

# Variables a launcher gives its processes: MPICH hydra/gforker, Intel MPI, Open MPI 5, PMIx.
_LAUNCH_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE")
_INSTALL_HINT = ("pip install funcgrad[distributed]   (mpi4py and the MPICH wheel; no system "
                 "MPI needed)")

_state = {"world": None, "backend": None, "local": (0, 1), "blas_limit": None}


class DistributedSetupError(errors.FuncgradError, RuntimeError):
    """funcgrad.distributed cannot set up the process group."""


def launched_size():
    """The number of processes the launcher says it started (1 when not under mpiexec)."""
    for var in _LAUNCH_SIZE_VARS:
        value = os.environ.get(var)
        if value and value.isdigit() and int(value) > 1:
            return int(value)
    return 1


def initialize(backend="auto"):
    """Join the processes started by `mpiexec` (idempotent; later calls return the same world).

    Args:
        backend: "auto" (MPI through mpi4py when it is installed, else a single process),
            "mpi" (require mpi4py), "nccl" (MPI on the host, NCCL for programs compiled for
            the GPU), or "self" (a single process, no MPI even when installed).

    Returns:
        The world `Communicator` (`.rank`, `.size`).

    Raises:
        DistributedSetupError: a multi-process launch (or backend "mpi"/"nccl") without
            mpi4py, or backend "self" under a multi-process launch.

    Example:
        >>> fg.distributed.initialize()          # under `mpiexec -n 2 python train.py`
        <Communicator mpi4py: rank 0 of 2>
    """
    if _state["world"] is not None:
        return _state["world"]
    if backend not in ("auto", "mpi", "nccl", "self"):
        raise errors.FuncgradValueError(
            f"initialize: unknown backend {backend!r}; use 'auto', 'mpi', 'nccl' or 'self'")
    size = launched_size()
    if backend == "self":
        if size > 1:
            raise DistributedSetupError(
                f"initialize(backend='self'): this process was launched as one of {size} "
                "processes; use backend='auto' or 'mpi'.")
        world = Communicator(SelfMPI())
    else:
        MPI = _import_mpi(size, required=backend in ("mpi", "nccl"))
        if MPI is None:
            world = Communicator(SelfMPI())
        else:
            base = MPI.COMM_WORLD
            world = Communicator(base.Clone(), MPI, check=base.Clone())
            local = base.Split_type(MPI.COMM_TYPE_SHARED)
            _state["local"] = (local.Get_rank(), local.Get_size())
            local.Free()
            if world.size > 1:
                _abort_on_uncaught_exceptions(MPI, world.rank, world.size)
                _limit_blas_threads(_state["local"][1])
            if backend == "nccl":
                _use_local_gpu(_state["local"][0])
    _state["world"], _state["backend"] = world, backend
    return world


def _import_mpi(size, required):
    try:
        from mpi4py import MPI
    except ImportError as e:
        if size > 1 or required:
            why = (f"this process was launched as one of {size} processes" if size > 1 else
                   "backend 'mpi'/'nccl' was requested")
            raise DistributedSetupError(
                f"funcgrad.distributed needs mpi4py: {why}, but importing mpi4py failed "
                f"({e}).\n  hint: {_INSTALL_HINT}") from None
        return None
    return MPI


def _abort_on_uncaught_exceptions(MPI, rank, size):
    """An uncaught exception on one process aborts the whole job (instead of leaving the
    others waiting forever in their next collective)."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        try:
            head = (f"[funcgrad.distributed rank {rank}/{size}] uncaught {kind.__name__}; "
                    f"aborting all {size} processes\n")
            if previous is sys.__excepthook__:  # one write: the launcher forwards it whole
                sys.stderr.write(head + "".join(traceback.format_exception(kind, value, tb)))
            else:
                sys.stderr.write(head)
                previous(kind, value, tb)
            sys.stderr.flush()
            time.sleep(0.2)  # the launcher's output forwarding, before Abort kills the job
        finally:
            MPI.COMM_WORLD.Abort(1)
    sys.excepthook = hook


def _limit_blas_threads(local_size):
    """With several processes per machine, give each 1/local_size of the cores for BLAS
    (unless the user chose a thread count): oversubscribed BLAS threads cost more than
    they give."""
    chosen = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    if local_size <= 1 or any(v in os.environ for v in chosen):
        return
    threads = max(1, (os.cpu_count() or 1) // local_size)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        warnings.warn(f"funcgrad.distributed: {local_size} processes share this machine; set "
                      f"OPENBLAS_NUM_THREADS={threads} (or install threadpoolctl) so that "
                      "their BLAS threads do not oversubscribe the cores", stacklevel=3)
        return
    _state["blas_limit"] = threadpool_limits(threads, user_api="blas")


def _use_local_gpu(local_rank):
    """One GPU per process on a machine (NCCL refuses two ranks on one GPU)."""
    import cupy
    count = cupy.cuda.runtime.getDeviceCount()
    cupy.cuda.Device(local_rank % count).use()


def is_initialized():
    return _state["world"] is not None


def world():
    """The world communicator (initializing with backend "auto" on first use)."""
    return _state["world"] if _state["world"] is not None else initialize()


def backend():
    """The backend `initialize` was called with."""
    world()
    return _state["backend"]


def process_index():
    """This process's index among all processes (0 when not launched by mpiexec)."""
    return world().rank


def process_count():
    """The number of processes (1 when not launched by mpiexec)."""
    return world().size


def local_process_index():
    """This process's index among the processes on its machine."""
    world()
    return _state["local"][0]


def local_process_count():
    """The number of processes on this machine."""
    world()
    return _state["local"][1]
