"""`Mesh`, `P` (PartitionSpec) and `shard_map`: one function, one process per mesh member.

Multi-controller semantics, as in JAX multi-process: every process calls the function on
its *local* arrays. `P("data")` marks an argument as this process's shard (varying over
the axis), `P()` as replicated (invariant). `shard_map` is a tracing context, not a
primitive: it binds the axis (name, size), types the inputs and traces the body inline with
a define-by-run builder, so eagerly the collectives run as they are reached, under `jit`
they are recorded into the compiled program, and under `grad` they are differentiated.
Before the body, one small collective checks that every process passed arguments of the
same shapes (and, with `check_rep`, the same replicated values), so a mismatch is an error
on every process instead of a hang. Imports core, lax.parallel and the distributed runtime.
"""

import functools
import hashlib

import numpy as np

from funcgrad import errors
from funcgrad.core import (
    Array,
    Primitive,
    ShapedArray,
    Tracer,
    get_aval,
    is_concrete,
    new_builder,
    to_array,
)
from funcgrad.core.array import host_value
from funcgrad.distributed import runtime
from funcgrad.interpreters import ad, batching
from funcgrad.lax import parallel
from funcgrad.tree_util import (
    TreeStructureError,
    keystr,
    tree_flatten,
    tree_flatten_with_path,
    tree_structure,
    tree_unflatten,
)

__all__ = ["Mesh", "P", "PartitionSpec", "shard_map"]


class Mesh:
    """A 1-D mesh over all processes: one member per process, along axis `axis_names[0]`.

    Args:
        axis_names: the axis name, e.g. `("data",)` (a plain string works too).

    Example:
        >>> mesh = fg.distributed.Mesh(("data",))
        >>> mesh.shape
        {'data': 2}
    """

    def __init__(self, axis_names=("data",)):
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if len(names) != 1 or not isinstance(names[0], str):
            raise errors.FuncgradValueError(
                f"Mesh: funcgrad's meshes are 1-D over processes; give one axis name, got "
                f"{axis_names!r}\n{errors.where()}")
        self.comm = runtime.world()
        self.axis_names = names
        self.size = self.comm.size
        parallel.register_communicator(names[0], self.comm)

    @property
    def shape(self):
        return {self.axis_names[0]: self.size}

    def __repr__(self):
        return f"Mesh({self.axis_names[0]!r}: {self.size} processes)"


class _Unconstrained:
    """`P.UNCONSTRAINED`: the dimension's layout is left to the compiler (as JAX's)."""

    def __repr__(self):
        return "UNCONSTRAINED"

    def __reduce__(self):
        return (_unconstrained, ())


def _unconstrained():
    return P.UNCONSTRAINED


class P:
    """A PartitionSpec, as JAX's: one entry per leading dimension of an array, each None (not
    split), a mesh axis name (split over that axis) or a tuple of names (split over their
    product). `P()` is replicated: every member holds the same value. It indexes, iterates
    and compares as the tuple of its entries.

    Example:
        >>> P("data"), P(), P(None, "data"), len(P("a", None))
        (P('data',), P(), P(None, 'data'), 2)
    """

    __slots__ = ("dims",)
    UNCONSTRAINED = _Unconstrained()

    def __init__(self, *partitions, unreduced=frozenset(), reduced=frozenset()):
        dims = partitions
        for d in dims:
            ok = d is None or isinstance(d, str) or d is P.UNCONSTRAINED or (
                isinstance(d, tuple) and all(isinstance(x, str) for x in d))
            if not ok:
                raise errors.FuncgradTypeError(
                    f"P: each entry must be None, an axis name or a tuple of axis names, got "
                    f"{d!r}\n{errors.where()}")
        if unreduced or reduced:
            raise errors.FuncgradValueError(
                f"P: unreduced/reduced axes (JAX's explicit-sharding reductions) are not "
                f"supported by funcgrad\n{errors.where()}")
        self.dims = dims

    @property
    def axes(self):
        """The axis names this spec splits over."""
        out = []
        for d in self.dims:
            for n in (d,) if isinstance(d, str) else (d if isinstance(d, tuple) else ()):
                out.append(n)
        return tuple(out)

    def __len__(self):
        return len(self.dims)

    def __iter__(self):
        return iter(self.dims)

    def __getitem__(self, i):
        return self.dims[i]

    def index(self, value):
        return self.dims.index(value)

    def count(self, value):
        return self.dims.count(value)

    def __eq__(self, other):
        return isinstance(other, P) and self.dims == other.dims

    def __hash__(self):
        return hash(("P", self.dims))

    def __repr__(self):
        return f"P{self.dims!r}" if self.dims else "P()"

    def __reduce__(self):
        return (P, self.dims)


PartitionSpec = P


def shard_map(fun=None, mesh=None, in_specs=None, out_specs=None, *, check_rep=False):
    """Run `fun` once per process of `mesh`, on each process's local arguments.

    Args:
        fun: the per-process function; collectives over the mesh axis (`lax.psum`,
            `pmean`, `all_gather`, `psum_scatter`, `axis_index`) communicate.
        mesh: a `Mesh`.
        in_specs: a pytree prefix of the argument tuple with `P` leaves: `P()` for
            replicated arguments (parameters), `P(axis)` for this process's shard (data).
        out_specs: the same for the output: `P()` requires a value that is the same on
            every process (reduced with psum/pmean, or computed only from replicated
            values), `P(axis)` returns this process's value.
        check_rep: also check, on every call, that the arguments marked `P()` hold the same
            values on every process (an error names the leaf that differs).

    Returns:
        The function of local arrays; usable with `jit`, `grad` and `vmap` around it.

    Raises:
        FuncgradValueError: specs that do not match the arguments or outputs, a varying
            output marked `P()`, shapes that differ across processes, replicated values
            that differ (with `check_rep`).

    Example:
        >>> step = fg.jit(shard_map(lambda w, x: lax.pmean(x @ w, "data"), mesh,
        ...                         in_specs=(P(), P("data")), out_specs=P()))
    """
    if fun is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_rep=check_rep)
    if not isinstance(mesh, Mesh):
        raise errors.FuncgradTypeError(f"shard_map: mesh must be a funcgrad.distributed.Mesh, "
                                       f"got {mesh!r}\n{errors.where()}")
    name = mesh.axis_names[0]
    fname = getattr(fun, "__name__", "fun")
    _check_spec_names(in_specs, mesh, "in_specs", fname)
    _check_spec_names(out_specs, mesh, "out_specs", fname)

    @functools.wraps(fun)
    def wrapped(*args):
        leaves, in_tree = tree_flatten(args)
        specs = _leaf_specs(in_specs, args, "in_specs", "argument tuple", fname)
        paths = [_path_text(p) for p, _ in tree_flatten_with_path(args)[0]]
        vals = [x if isinstance(x, (Array, Tracer)) else to_array(x) for x in leaves]
        varying = [name in s.axes for s in specs]
        for v, s, path, var in zip(vals, specs, paths, varying):
            if var and get_aval(v).ndim < len(s.dims):
                raise errors.FuncgradValueError(
                    f"shard_map({fname}): in_specs gives argument {path} the spec {s!r}, but it "
                    f"has shape {get_aval(v).shape}\n{errors.where()}")
        check = _Check(fname, name, in_tree, vals, paths, varying, check_rep)
        rep = [v for v, var in zip(vals, varying) if not var] if check_rep else []
        if all(is_concrete(v) for v in vals):
            check.run([host_value(_concrete(v)) for v in rep])
            check = None
        with parallel.extend_axis_env(name, mesh.size, "shard_map"):
            with new_builder(f"shard_map({fname})", compute_known=True) as b:
                ins = [b.new_input(_typed(get_aval(v), var, name), v)
                       for v, var in zip(vals, varying)]
                if check is not None:
                    shard_map_check_p.bind(*[t for t, var in zip(ins, varying) if not var
                                             and check_rep], **check.params())
                out = fun(*tree_unflatten(in_tree, ins))
                out_leaves, out_tree = tree_flatten(out)
                outs = [b.lift(o) for o in out_leaves]
        out_specs_leaves = _leaf_specs(out_specs, out, "out_specs", "output", fname)
        out_paths = [_path_text(p, "output") for p, _ in tree_flatten_with_path(out)[0]]
        for o, s, path in zip(outs, out_specs_leaves, out_paths):
            vma = o.aval.vma or frozenset()
            if name in vma and name not in s.axes:
                raise errors.FuncgradValueError(
                    f"shard_map({fname}): output {path} varies over mesh axis {name!r} (it can "
                    f"differ between processes), but out_specs gives it {s!r} (replicated)\n"
                    f"{errors.where()}\n  hint: reduce it with lax.psum/lax.pmean over "
                    f"{name!r}, or return it with P({name!r}).")
        return tree_unflatten(out_tree, [o.val for o in outs])
    return wrapped


def _concrete(v):
    while isinstance(v, Tracer):
        v = v.val
    return v._value


def _typed(aval, varying, name):
    vma = (aval.vma or frozenset()) | (frozenset((name,)) if varying else frozenset())
    return ShapedArray(aval.shape, aval.dtype, aval.weak_type, vma)


def _path_text(path, what="args"):
    """`args[0]['w']` for the leaf at `(SequenceKey(0), DictKey('w'))` of the argument tuple."""
    return f"{what}{keystr(path)}"


def _is_spec(x):
    return isinstance(x, P)


def _check_spec_names(specs, mesh, what, fname):
    leaves = tree_flatten(specs, is_leaf=_is_spec)[0]
    for s in leaves:
        if not isinstance(s, P):
            raise errors.FuncgradTypeError(
                f"shard_map({fname}): {what} must be a pytree with P(...) leaves, got a leaf "
                f"{s!r} in {specs!r}\n{errors.where()}")
        bad = [a for a in s.axes if a not in mesh.axis_names]
        if bad:
            raise errors.FuncgradValueError(
                f"shard_map({fname}): {what} names axis {bad[0]!r}, which the mesh does not "
                f"have (its axes: {mesh.axis_names})\n{errors.where()}")


def _leaf_specs(specs, tree, what, of, fname):
    """One `P` per leaf of `tree`: `specs` is a pytree prefix of it."""
    spec_leaves, spec_tree = tree_flatten(specs, is_leaf=_is_spec)
    try:
        subtrees = spec_tree.flatten_up_to(tree)
    except (TreeStructureError, ValueError) as e:
        raise errors.FuncgradValueError(
            f"shard_map({fname}): {what} must be a pytree prefix of the {of}, but {what} has "
            f"structure {spec_tree} and the {of} has structure {tree_structure(tree)} ({e})\n"
            f"{errors.where()}\n  hint: give one P(...) per argument, e.g. in_specs=(P(), "
            f"P('data')) for f(params, batch); a single P applies to everything below it.") \
            from None
    out = []
    for s, sub in zip(spec_leaves, subtrees):
        out += [s] * len(tree_flatten(sub)[0])
    return out


# --- the per-call check -----------------------------------------------------------------------

def _digest(text):
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 2


def _value_digest(v):
    v = np.ascontiguousarray(v)
    h = hashlib.blake2b(v.view(np.uint8).reshape(-1) if v.size else b"", digest_size=8)
    h.update(f"{v.shape}{v.dtype}".encode())
    return int.from_bytes(h.digest(), "little") >> 2


class _Check:
    """The arguments' signature (tree, shapes, dtypes) and, with `check_rep`, the replicated
    values: checked across processes before the body runs."""

    def __init__(self, fname, name, in_tree, vals, paths, varying, check_rep):
        self.fname, self.name, self.check_rep = fname, name, check_rep
        self.leaves = tuple(f"{p}: {get_aval(v).str_short()}{' (sharded)' if var else ''}"
                            for v, p, var in zip(vals, paths, varying))
        self.signature = _digest(f"{fname}|{in_tree}|{'|'.join(self.leaves)}")
        self.rep_paths = tuple(p for p, var in zip(paths, varying) if not var) if check_rep \
            else ()

    def params(self):
        return dict(axis_name=(self.name,), signature=self.signature, fname=self.fname,
                    _leaves=self.leaves, _rep_paths=self.rep_paths)

    def run(self, rep_vals):
        _run_check(rep_vals, **self.params())


def _run_check(rep_vals, *, axis_name, signature, fname, _leaves, _rep_paths):
    comm = parallel.communicator(axis_name[0], "shard_map")
    if comm.size == 1:
        return
    if not comm.agree(signature):
        everyone = comm.allgather_obj(_leaves, check=True)
        raise errors.FuncgradValueError(
            f"shard_map({fname}): the processes called it with different argument shapes or "
            f"structures:\n{_first_difference(everyone)}\n  hint: every process must pass "
            "arrays of the same shapes (e.g. the same per-process batch size; drop or pad a "
            "short last batch).")
    if _rep_paths:
        digests = [_value_digest(v) for v in rep_vals]
        if not comm.agree(_digest(" ".join(map(str, digests)))):
            everyone = comm.allgather_obj(digests, check=True)
            raise errors.FuncgradValueError(
                f"shard_map({fname}): arguments marked replicated (P()) differ between "
                f"processes:\n{_differing_leaves(everyone, _rep_paths)}\n  hint: broadcast "
                "them from one process first (fg.distributed.broadcast(params)), or mark "
                "per-process values P(axis).")


def _first_difference(everyone):
    n = max(len(x) for x in everyone)
    for i in range(n):
        seen = [x[i] if i < len(x) else "(missing)" for x in everyone]
        if len(set(seen)) > 1:
            return "\n".join(f"    rank {r}: {s}" for r, s in enumerate(seen))
    return "\n".join(f"    rank {r}: {len(x)} leaves" for r, x in enumerate(everyone))


def _differing_leaves(everyone, paths):
    lines = []
    for i, path in enumerate(paths):
        ref = everyone[0][i]
        other = [r for r, d in enumerate(everyone) if i >= len(d) or d[i] != ref]
        if other:
            lines.append(f"    {path}: ranks {other} hold a different value than rank 0")
    return "\n".join(lines)


def _check_impl(*rep_vals, **params):
    _run_check([host_value(v) for v in rep_vals], **params)
    return np.zeros((), np.bool_)


shard_map_check_p = Primitive("shard_map_check")
shard_map_check_p.effectful = True
shard_map_check_p.types_vma = True
shard_map_check_p.def_impl(_check_impl)
shard_map_check_p.def_abstract_eval(lambda *avals, **params: ShapedArray((), np.dtype(np.bool_)))
ad.defjvp_zero(shard_map_check_p)
batching.defunmapped(shard_map_check_p)
