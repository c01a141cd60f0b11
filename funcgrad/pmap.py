"""`pmap`: map a function over devices, as `jax.pmap`, with JAX's signature and meaning.

How it runs. The devices of one process share its memory (they are the CPU, or N virtual
CPU devices: `config.cpu_device_count`), so a pmap over n of them is a compiled `vmap` over
the mapped axis, with the axis name bound for the collectives (`lax.psum`, `pmean`,
`all_gather`, `ppermute`, `axis_index`...): the per-device programs run as one batched
program, which computes exactly what n separate devices would. Under `mpiexec`, pmap maps
over this process's devices (the mapped axis has at most `local_device_count()` members, as
in JAX's multi-process pmap) and the axis spans every process: each collective runs over
this process's members first, then over the processes through `funcgrad.distributed`'s MPI
communicator (`lax.parallel` links the two axes). So data-parallel training with pmap runs
across processes with the same code as on one.

As in JAX, pmap is compiled (`jit` with `static_argnums`/`donate_argnums` taken from
`static_broadcasted_argnums`/`donate_argnums`), its collectives follow JAX's untyped (legacy)
rules (a psum of an unmapped value counts it once per member; psum transposes to psum),
and its results are Arrays sharded over the devices (`x.sharding`, `x.devices()`).
Imports the transforms, the compiler's jit, devices, the sharding vocabulary and the
distributed runtime.
"""

import functools
import hashlib
import itertools
import math

import numpy as np

from funcgrad import errors
from funcgrad.batching_api import mapped
from funcgrad.compiler import jit
from funcgrad.core import Tracer, current_trace
from funcgrad.devices import Device, local_devices, process_count, process_index
from funcgrad.lax import parallel
from funcgrad.sharding.arrays import with_sharding
from funcgrad.sharding.mesh import Mesh
from funcgrad.sharding.shardings import NamedSharding, P
from funcgrad.tree_util import (
    TreeStructureError,
    tree_flatten,
    tree_unflatten,
)

__all__ = ["pmap"]

_counter = itertools.count()


def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=()):
    """Map `fun` over devices: member k of the mapped axis runs on device k (as `jax.pmap`).

    Args:
        fun: the per-device function.
        axis_name: the name collectives inside `fun` use for the mapped axis.
        in_axes: as `vmap`'s: an int, None, or a tuple (one entry per positional argument)
            of pytree prefixes with int/None leaves. Keyword arguments are mapped over axis 0.
        out_axes: as `vmap`'s, for the outputs.
        static_broadcasted_argnums: positional arguments passed as Python values to every
            device (hashable; each new value compiles again).
        devices: the devices to map over (default `local_devices()`); the mapped axis may be
            shorter than the list (its first devices are used), not longer.
        backend: "cpu" (default) or "cuda"/"gpu": what the program is compiled for.
        axis_size: the size of the mapped axis when no argument is mapped.
        donate_argnums: positional arguments whose buffers the compiled program may reuse.

    Returns:
        The mapped function. Its results are Arrays laid out over the devices
        (`NamedSharding(Mesh(devices, (axis_name,)), P(axis_name))` for `out_axes=0`).

    Raises:
        FuncgradValueError: a mapped axis larger than the number of devices (this process's,
            under `mpiexec`), or arguments that `in_axes` does not match.

    Example:
        >>> fg.config.update("cpu_device_count", 4)
        >>> fg.pmap(lambda x: lax.psum(x, "i"), axis_name="i")(fnp.arange(4.0))
        Array([6., 6., 6., 6.], dtype=float32)
    """
    if not callable(fun):
        raise errors.FuncgradTypeError(f"pmap: expected a function, got {type(fun).__name__}"
                                       f"\n{errors.where()}")
    if axis_name is not None and not isinstance(axis_name, str):
        raise errors.FuncgradTypeError(f"pmap: axis_name must be a string, got {axis_name!r}"
                                       f"\n{errors.where()}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    statics = _positions(static_broadcasted_argnums, "static_broadcasted_argnums")
    donated = _positions(donate_argnums, "donate_argnums")
    devs = None if devices is None else _check_devices(devices)
    name = axis_name if axis_name is not None else f"_pmap_axis_{next(_counter)}"
    program = _Program(fun, name, in_axes, out_axes, statics, axis_size)
    compiled = jit(program, static_argnums=statics, donate_argnums=donated,
                   backend=_backend(backend))

    shardings = {}

    @functools.wraps(fun)
    def run(*args, **kwargs):
        size = _mapped_size(args, kwargs, in_axes, statics, axis_size)
        available = devs if devs is not None else local_devices()
        outer = _enclosing_pmap_size()  # a pmap inside a pmap uses outer * size devices
        if size * outer > len(available):
            raise errors.FuncgradValueError(
                f"pmap({getattr(fun, '__name__', 'fun')}): the mapped axis has size {size}"
                f"{f' (times {outer} for the enclosing pmaps)' if outer > 1 else ''}, but "
                f"only {len(available)} devices are available: {available}\n{errors.where()}\n"
                "  hint: fg.config.update('cpu_device_count', N) (or the environment variable "
                "XLA_FLAGS=--xla_force_host_platform_device_count=N) gives N CPU devices.")
        program.check_processes(size, args, kwargs)
        out = compiled(*args, **kwargs)
        leaves, tree = tree_flatten(out)
        if any(isinstance(x, Tracer) for x in leaves):
            return out
        return tree_unflatten(tree, _placed(out, leaves, out_axes, name, available[:size],
                                            shardings))
    return run


class _Program:
    """The compiled body of a pmap: a vmap over this process's members with the axis bound
    untyped, inside a process-level axis when several processes take part."""

    def __init__(self, fun, name, in_axes, out_axes, statics, axis_size):
        self.fun, self.name, self.in_axes, self.out_axes = fun, name, in_axes, out_axes
        self.statics, self.axis_size = statics, axis_size
        self.__name__ = f"pmap({getattr(fun, '__name__', 'fun')})"
        self.__wrapped__ = fun

    def __call__(self, *args, **kwargs):
        dyn = [i for i in range(len(args)) if i not in self.statics]

        def per_device(*dyn_args, **kw):
            full = list(args)
            for i, v in zip(dyn, dyn_args):
                full[i] = v
            return self.fun(*full, **kw)
        axes = self.in_axes
        if isinstance(axes, tuple):
            if len(axes) != len(args):
                raise errors.FuncgradValueError(
                    f"{self.__name__}: in_axes must have one entry per positional argument, "
                    f"got {len(axes)} for {len(args)} arguments\n{errors.where()}")
            axes = tuple(axes[i] for i in dyn)
        body = mapped(per_device, axes, self.out_axes, self.axis_size, self.name, "untyped")
        world, link = _process_axis(self.name)
        if link is None:
            out = body(*[args[i] for i in dyn], **kwargs)
        else:
            with parallel.extend_axis_env(link, world.size, "shard_map", spans=self.name):
                out = body(*[args[i] for i in dyn], **kwargs)
        return out

    def check_processes(self, size, args, kwargs):
        """Under `mpiexec`: every process must map the same shapes (else a collective would
        hang); one small allreduce per call turns a mismatch into an error everywhere."""
        world, link = _process_axis(self.name)
        if link is None or current_trace() is not None:
            return
        leaves = tree_flatten((args, kwargs))[0]
        text = f"{size}|" + "|".join(str(np.shape(x)) for x in leaves)
        if not world.agree(_digest(text)):
            everyone = world.allgather_obj(text, check=True)
            lines = "\n".join(f"    process {r}: {t}" for r, t in enumerate(everyone))
            raise errors.FuncgradValueError(
                f"{self.__name__}: the processes called it with different mapped sizes or "
                f"argument shapes:\n{lines}\n{errors.where()}")


def _digest(text):
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=7).digest(), "little")


def _process_axis(name):
    """(the world communicator, the process-level axis name) when several processes take
    part, else (None, None). The process axis carries the collectives between processes."""
    if process_count() == 1:
        return None, None
    from funcgrad.distributed import runtime
    world = runtime.world()
    link = f"{name}@processes"
    parallel.register_communicator(link, world)
    parallel.mark_untyped(link)
    return world, link


def _enclosing_pmap_size():
    return math.prod(f.size for f in parallel.axis_frames() if f.kind == "untyped")


def _positions(nums, what):
    nums = (nums,) if isinstance(nums, (int, np.integer)) else tuple(nums)
    if not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in nums):
        raise errors.FuncgradTypeError(f"pmap: {what} must be ints, got {nums!r}"
                                       f"\n{errors.where(errors.user_frame(3))}")
    return tuple(int(i) for i in nums)


def _check_devices(devices):
    devs = list(devices)
    if not devs or not all(isinstance(d, Device) for d in devs) or \
            len(set(devs)) != len(devs):
        raise errors.FuncgradValueError(f"pmap: devices must be distinct Devices, got "
                                        f"{devices!r}\n{errors.where(errors.user_frame(3))}")
    rank = process_index()
    if any(d.process_index != rank for d in devs):
        raise errors.FuncgradValueError(
            f"pmap: devices must be this process's (pmap maps over local devices; the axis "
            f"spans every process under mpiexec), got {devs}\n"
            f"{errors.where(errors.user_frame(3))}")
    return devs


def _backend(backend):
    if backend in (None, "cpu", "cuda"):
        return backend
    if backend == "gpu":
        return "cuda"
    raise errors.FuncgradValueError(f"pmap: unknown backend {backend!r}; use 'cpu' or 'cuda'"
                                    f"\n{errors.where(errors.user_frame(3))}")


def _mapped_size(args, kwargs, in_axes, statics, axis_size):
    """The size of the mapped axis (checked against devices before compiling)."""
    dyn = [a for i, a in enumerate(args) if i not in statics] if statics else args
    if isinstance(in_axes, int) and not isinstance(in_axes, bool):  # the common case
        for x in tree_flatten((dyn, kwargs))[0]:
            shape = getattr(x, "shape", None)
            shape = np.shape(x) if shape is None else shape
            if shape and -len(shape) <= in_axes < len(shape):
                return int(shape[in_axes])
        return int(axis_size) if axis_size is not None else 0
    if isinstance(in_axes, tuple):
        if len(in_axes) != len(args):
            raise errors.FuncgradValueError(
                f"pmap in_axes must have one entry per positional argument, got "
                f"{len(in_axes)} for {len(args)} arguments\n{errors.where(errors.user_frame(3))}")
        spec = [in_axes[i] for i in range(len(args)) if i not in statics]
    else:
        spec = [in_axes] * len(dyn)
    pairs = [(x, 0) for x in tree_flatten(kwargs)[0]]
    for a, arg in zip(spec, dyn):
        axes, axes_tree = tree_flatten(a, is_leaf=lambda v: v is None)
        try:
            subtrees = axes_tree.flatten_up_to(arg)
        except TreeStructureError:
            continue  # vmap reports the mismatch with the argument's name
        pairs += [(x, ax) for ax, sub in zip(axes, subtrees) for x in tree_flatten(sub)[0]]
    for x, ax in pairs:
        shape = np.shape(x) if not hasattr(x, "shape") else tuple(x.shape)
        if ax is not None and shape and -len(shape) <= ax < len(shape):
            return int(shape[ax])
    return int(axis_size) if axis_size is not None else 0


def _placed(out, leaves, out_axes, name, devs, cache):
    """The result leaves laid out over `devs` as `out_axes` says (concrete Arrays only);
    `cache` keeps the shardings of earlier calls (one mesh per device list)."""
    axes, axes_tree = tree_flatten(out_axes, is_leaf=lambda v: v is None)
    try:
        per_leaf = [ax for ax, sub in zip(axes, axes_tree.flatten_up_to(out))
                    for _ in tree_flatten(sub)[0]] if len(axes) > 1 else axes * len(leaves)
    except (TreeStructureError, ValueError):
        per_leaf = [0] * len(leaves)
    ids = tuple(d.id for d in devs)

    def sharding(ax):
        key = (ids, ax)
        if key not in cache:
            arr = np.empty(len(devs), dtype=object)
            arr[:] = devs
            mesh = Mesh(arr, (name,))
            cache[key] = NamedSharding(mesh, P() if ax is None else P(*([None] * ax + [name])))
        return cache[key]

    return [with_sharding(x, sharding(None if ax is None else ax % x.ndim))
            if hasattr(x, "_value") else x for x, ax in zip(leaves, per_leaf)]
