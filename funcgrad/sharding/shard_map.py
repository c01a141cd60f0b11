"""`shard_map` with JAX 0.10's signature: `shard_map(f, *, out_specs, in_specs=Infer,
mesh=None, axis_names=frozenset(), check_vma=True)`.

Over a `funcgrad.sharding.Mesh` of this process's devices, the body runs once per mesh
member as nested vmaps, one per mesh axis (outermost first), with the axis names bound for
the collectives: each argument is split into its blocks as its spec says, the members'
results are put back together as `out_specs` says. With `check_vma` the values are typed
by the axes they vary over (an output marked replicated over an axis must be), else the
axes are untyped, with JAX's legacy collective rules. Under `mpiexec`, over a mesh whose
first axis splits the processes, each process runs its members: the first axis is linked
to a process-level axis (`lax.parallel`), so its collectives also run over MPI, and the
results split over that axis are `GlobalArray`s. Over a `funcgrad.distributed.Mesh`
(one member per process) this is `funcgrad.distributed.shard_map`.
Imports the transforms, lax.parallel and the sharding modules.
"""

import functools
import math

from funcgrad import errors
from funcgrad.batching_api import mapped
from funcgrad.core import get_aval
from funcgrad.distributed import mesh as _process_mesh
from funcgrad.distributed import runtime
from funcgrad.distributed.mesh import P
from funcgrad.lax import parallel
from funcgrad.lax.shape import reshape, transpose
from funcgrad.lax.slicing import slice_in_dim
from funcgrad.sharding.arrays import (
    GlobalArray,
    process_box,
    reshard,
    sharding_of,
    with_sharding,
)
from funcgrad.sharding.mesh import Mesh, current_mesh, process_layout
from funcgrad.sharding.shardings import NamedSharding
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = ["Infer", "auto_axes", "explicit_axes", "shard_map", "smap"]


class _Infer:
    """`in_specs=Infer`: each argument's spec is taken from its sharding over the mesh."""

    def __repr__(self):
        return "jax.sharding.Infer"


Infer = _Infer()


def shard_map(f=None, /, *, out_specs, in_specs=Infer, mesh=None, axis_names=frozenset(),
              check_vma=True):
    """Run `f` once per member of `mesh` on that member's blocks of the arguments, as
    `jax.shard_map`.

    Args:
        f: the per-member function; collectives over the mesh's axis names communicate.
        out_specs: a pytree prefix of the output with `P(...)` leaves: how the members'
            results form the global result (an axis not named: the result is replicated over
            it, and with `check_vma` it must be).
        in_specs: the same for the positional arguments; `Infer` (default) takes each
            argument's spec from its `NamedSharding` over the mesh (`P()` otherwise).
        mesh: a `funcgrad.sharding.Mesh` (default: the one `set_mesh` set) or a
            `funcgrad.distributed.Mesh`.
        axis_names: the mesh axes the body is mapped over (default: all of them).
        check_vma: type values by the axes they vary over (JAX's default); False: JAX's
            untyped rules.

    Returns:
        The function of the global arguments (or a decorator when `f` is omitted).

    Raises:
        FuncgradValueError: specs naming other axes or not dividing the shapes, an output
            that varies over an axis its spec replicates (with `check_vma`).

    Example:
        >>> fg.config.update("cpu_device_count", 4)
        >>> mesh = fg.make_mesh((4,), ("x",))
        >>> fg.shard_map(lambda b: lax.psum(b.sum(), "x"), mesh=mesh, in_specs=P("x"),
        ...              out_specs=P())(fnp.arange(8.0))
        Array(28., dtype=float32)
    """
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma)
    if isinstance(mesh, _process_mesh.Mesh):
        if in_specs is Infer:
            raise errors.FuncgradValueError(
                f"shard_map: over a funcgrad.distributed.Mesh give in_specs explicitly\n"
                f"{errors.where()}")
        return _process_mesh.shard_map(f, mesh, in_specs, out_specs)
    mesh = current_mesh("shard_map") if mesh is None else mesh
    if not isinstance(mesh, Mesh):
        raise errors.FuncgradTypeError(f"shard_map: mesh must be a funcgrad.sharding.Mesh, got "
                                       f"{type(mesh).__name__}\n{errors.where()}")
    axes = tuple(a for a in mesh.axis_names if not axis_names or a in axis_names)
    return _ShardMapped(f, mesh, axes, in_specs, out_specs, check_vma)


class _ShardMapped:
    """The function `shard_map` returns."""

    def __init__(self, f, mesh, axes, in_specs, out_specs, check_vma):
        self.f, self.mesh, self.axes, self.check_vma = f, mesh, axes, check_vma
        self.in_specs, self.out_specs = in_specs, out_specs
        self.name = getattr(f, "__name__", "f")
        self.layout = process_layout(mesh)
        if self.layout is not None and mesh.axis_names[0] not in axes:
            raise errors.FuncgradValueError(
                f"shard_map({self.name}): across processes the body must be mapped over the "
                f"first mesh axis {mesh.axis_names[0]!r}, which splits the processes\n"
                f"{errors.where(errors.user_frame(3))}")
        functools.update_wrapper(self, f, updated=())

    def sizes(self):
        """Each mapped axis' number of members on this process."""
        sizes = dict(self.mesh.shape)
        if self.layout is not None:
            sizes[self.mesh.axis_names[0]] //= self.layout[0]
        return sizes

    def __call__(self, *args):
        leaves, in_tree = tree_flatten(args)
        specs = self._leaf_specs(self.in_specs, args, leaves, "in_specs")
        locals_ = [self._local(x, s) for x, s in zip(leaves, specs)]
        sizes = self.sizes()
        split = [_split_members(x, s, self.axes, sizes) for x, s in zip(locals_, specs)]
        store = {}

        def body(*blocks):
            out = self.f(*tree_unflatten(in_tree, list(blocks)))
            out_leaves, store["tree"] = tree_flatten(out)
            store["specs"] = self._leaf_specs(self.out_specs, out, out_leaves, "out_specs")
            if self.check_vma:
                self._check_replicated(out_leaves, store["specs"])
            return out_leaves

        fun, kind = body, "vmap" if self.check_vma else "untyped"
        for axis in reversed(self.axes):  # the innermost vmap first
            in_axes = tuple(0 if axis in s.axes else None for s in specs)
            fun = mapped(_flat(fun), in_axes, 0, sizes[axis], axis, kind)
        outs = self._run(fun, split)
        merged = [_merge_members(o, s, self.axes, sizes, self.name)
                  for o, s in zip(outs, store["specs"])]
        return tree_unflatten(store["tree"], [self._result(o, s) for o, s in
                                              zip(merged, store["specs"])])

    def _run(self, fun, xs):
        if self.layout is None:
            return fun(*xs)
        first = self.mesh.axis_names[0]
        link = f"{first}@processes"
        parallel.register_communicator(link, runtime.world())
        if not self.check_vma:
            parallel.mark_untyped(link)
        with parallel.extend_axis_env(link, self.layout[0], "shard_map", spans=first):
            return fun(*xs)

    def _leaf_specs(self, specs, tree, leaves, what):
        if specs is Infer:
            return [_inferred(x, self.mesh) for x in leaves]
        out = _process_mesh._leaf_specs(specs, tree, what, "argument tuple" if what ==
                                        "in_specs" else "output", f"shard_map({self.name})")
        for s, x in zip(out, leaves):
            bad = [a for a in s.axes if a not in self.axes]
            if bad:
                raise errors.FuncgradValueError(
                    f"shard_map({self.name}): {what} {s!r} names axis {bad[0]!r}, which is "
                    f"not one of the mapped mesh axes {self.axes}\n{errors.where()}")
            if len(s) > (x.ndim if isinstance(x, GlobalArray) else get_aval(x).ndim):
                raise errors.FuncgradValueError(
                    f"shard_map({self.name}): {what} {s!r} has more entries than the rank of "
                    f"its value {getattr(x, 'shape', ())}\n{errors.where()}")
        return out

    def _local(self, x, spec):
        """This process's block of argument `x` (a GlobalArray's, or a slice of a value)."""
        if isinstance(x, GlobalArray):
            if not (isinstance(x.sharding, NamedSharding) and x.sharding.mesh == self.mesh
                    and x.sharding.spec == spec):
                raise errors.FuncgradValueError(
                    f"shard_map({self.name}): an argument sharded over processes as "
                    f"{x.sharding!r} is passed with the in_spec {spec!r} over {self.mesh!r}; "
                    f"funcgrad does not move data between processes here\n{errors.where()}")
            return x.local
        if self.layout is None:
            return x
        box = process_box(NamedSharding(self.mesh, spec), get_aval(x).shape)
        return x if box is None else x[box]

    def _check_replicated(self, outs, specs):
        for i, (o, s) in enumerate(zip(outs, specs)):
            vma = get_aval(o).vma or frozenset()
            bad = [a for a in self.axes if a in vma and a not in s.axes]
            if bad:
                raise errors.FuncgradValueError(
                    f"shard_map({self.name}): output {i} varies over mesh axis {bad[0]!r} (it "
                    f"can differ between members), but out_specs gives it {s!r}, replicated "
                    f"over that axis\n{errors.where()}\n  hint: reduce it with lax.psum/pmean "
                    f"over {bad[0]!r}, name the axis in its out_spec, or pass check_vma=False.")

    def _result(self, value, spec):
        sharding = NamedSharding(self.mesh, spec)
        if self.layout is not None and self.mesh.axis_names[0] in spec.axes:
            shape = list(get_aval(value).shape)
            for d, entry in enumerate(spec):
                names = entry if isinstance(entry, tuple) else (entry,)
                if self.mesh.axis_names[0] in names:
                    shape[d] *= self.layout[0]
            if not hasattr(value, "_value"):
                raise errors.FuncgradValueError(
                    f"shard_map({self.name}): across processes, a result split over the "
                    f"processes cannot be returned into a trace (jit/grad around shard_map)\n"
                    f"{errors.where()}\n  hint: reduce it in the body (out_specs=P()), or "
                    "compile the body instead: shard_map(fg.jit(f), ...).")
            return GlobalArray(tuple(shape), sharding, value,
                               process_box(sharding, tuple(shape)))
        return with_sharding(value, sharding) if hasattr(value, "_value") else value


def _inferred(x, mesh):
    s = sharding_of(x) if hasattr(x, "_value") or isinstance(x, GlobalArray) else None
    return s.spec if isinstance(s, NamedSharding) and s.mesh == mesh else P()


def _flat(fun):
    """A function of flat leaves returning a flat list (what `mapped` is given)."""
    def flat(*xs):
        return list(fun(*xs))
    return flat


def _split_members(x, spec, axes, sizes):
    """`x` with one leading dimension per mapped axis its spec names (in `axes` order),
    holding that axis' members' blocks."""
    shape = tuple(get_aval(x).shape)
    new_shape, member_dims, pos = [], {}, 0
    for d, n in enumerate(shape):
        entry = spec[d] if d < len(spec) else None
        names = (entry,) if isinstance(entry, str) else tuple(entry or ())
        parts = math.prod(sizes[a] for a in names)
        if n % parts:
            raise errors.FuncgradValueError(
                f"shard_map: the spec {spec!r} splits dimension {d} of an argument of shape "
                f"{shape} into {parts} blocks, which does not divide {n}\n{errors.where()}")
        for a in names:
            member_dims[a] = pos
            new_shape.append(sizes[a])
            pos += 1
        new_shape.append(n // parts)
        pos += 1
    if not member_dims:
        return x
    x = reshape(x, tuple(new_shape))
    order = [member_dims[a] for a in axes if a in member_dims]
    rest = [i for i in range(len(new_shape)) if i not in order]
    return transpose(x, tuple(order + rest))


def _merge_members(out, spec, axes, sizes, name):
    """The inverse of `_split_members` for a result stacked over every mapped axis (in `axes`
    order): replicated axes take member 0, split ones are merged into their dimension."""
    kept = []
    for a in reversed(axes):  # drop the axes the spec replicates over (from the back)
        k = axes.index(a)
        if a not in spec.axes:
            out = reshape(slice_in_dim(out, 0, 1, axis=k),
                          tuple(s for i, s in enumerate(get_aval(out).shape) if i != k))
        else:
            kept.insert(0, a)
    shape = get_aval(out).shape
    block = shape[len(kept):]
    if len(spec) > len(block):
        raise errors.FuncgradValueError(
            f"shard_map({name}): out_specs {spec!r} has more entries than the rank of the "
            f"result, {len(block)}\n{errors.where()}")
    perm, final = [], []
    for d, n in enumerate(block):
        entry = spec[d] if d < len(spec) else None
        names = (entry,) if isinstance(entry, str) else tuple(entry or ())
        perm += [kept.index(a) for a in names] + [len(kept) + d]
        final.append(n * math.prod(sizes[a] for a in names))
    if kept:
        out = transpose(out, tuple(perm))
    return reshape(out, tuple(final))


# --- smap, auto_axes, explicit_axes -----------------------------------------------------------

def smap(f=None, /, *, in_axes=Infer, out_axes, axis_name):
    """`shard_map` over one axis of the current mesh (`set_mesh`), with vmap-style axes: each
    argument is split along its `in_axes` entry (None: replicated), each result put back
    along its `out_axes` entry, as `jax.smap`.

    Example:
        >>> with fg.sharding.set_mesh(fg.make_mesh((1,), ("x",))):
        ...     fg.sharding.smap(lambda b: b * 2, in_axes=0, out_axes=0, axis_name="x")(
        ...         fnp.ones(2))
        Array([2., 2.], dtype=float32)
    """
    if f is None:
        return functools.partial(smap, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)

    @functools.wraps(f)
    def run(*args):
        if in_axes is Infer:
            specs = Infer
        else:
            axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
            specs = tuple(_axis_spec(a, get_aval(x).ndim if a is not None and a < 0 else 0,
                                     axis_name) for a, x in zip(axes, args))
        out_specs = _out_axis_specs(out_axes, axis_name)
        return shard_map(f, mesh=current_mesh("smap"), in_specs=specs, out_specs=out_specs,
                         axis_names={axis_name})(*args)
    return run


def _axis_spec(axis, ndim, name):
    if axis is None:
        return P()
    axis = axis % ndim if axis < 0 else axis
    return P(*([None] * axis + [name]))


def _out_axis_specs(out_axes, name):
    if isinstance(out_axes, (tuple, list)):
        return type(out_axes)(_out_axis_specs(a, name) for a in out_axes)
    if isinstance(out_axes, dict):
        return {k: _out_axis_specs(a, name) for k, a in out_axes.items()}
    if out_axes is not None and out_axes < 0:
        raise errors.FuncgradValueError(f"smap: out_axes must be non-negative here, got "
                                        f"{out_axes}\n{errors.where(errors.user_frame(3))}")
    return _axis_spec(out_axes, 0, name)


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    """Run `f` with mesh `axes` in `Auto` mode and lay its results out as `out_sharding`, as
    `jax.sharding.auto_axes`. funcgrad keeps every value whole on one process, so the mode
    changes nothing; the results are placed (`reshard`)."""
    if f is None:
        return functools.partial(auto_axes, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def run(*args, **kwargs):
        out = f(*args, **kwargs)
        return out if out_sharding is None else reshard(out, out_sharding)
    return run


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    """Run `f` with mesh `axes` in `Explicit` mode on its arguments laid out as `in_sharding`,
    as `jax.sharding.explicit_axes` (the mode changes nothing here; see `auto_axes`)."""
    if f is None:
        return functools.partial(explicit_axes, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    def run(*args, **kwargs):
        if in_sharding is not None:
            args = reshard(args, in_sharding if isinstance(in_sharding, tuple) else
                           (in_sharding,) * len(args))
        return f(*args, **kwargs)
    return run
