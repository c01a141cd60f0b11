"""Collectives over named axes: psum, pmean, pmax, pmin, all_gather, psum_scatter,
axis_index, axis_size, and pvary (the invariant -> varying cast that AD relies on).

An axis name is bound by an enclosing `funcgrad.distributed.shard_map` (one process per
member; the collectives communicate through MPI or NCCL) or by `vmap(..., axis_name=...)`
(one process; the batching rules reduce over the mapped axis: the single-process oracle).
`pmap` and `shard_map` over a mesh of several processes' devices bind both: the axis is a
vmap over this process's devices *linked* to a process-level axis (`extend_axis_env(...,
spans=name)`), and every collective over the name runs over both (local first).

Typing (`ShapedArray.vma`, as JAX's shard_map): inside those, every value carries the set of
axes it varies over. Inputs mapped over an axis vary over it, the rest are invariant; an
ordinary primitive's output varies over the union of its operands' axes, and an invariant
operand that meets a varying one is cast by `pvary` (a no-op at run time). `psum` goes
varying -> invariant and transposes to `pvary`; `pvary` transposes to `psum`. So reverse
mode inserts exactly one gradient allreduce where an invariant value (a parameter) meets
per-process data, a replicated loss is not over-counted and a per-process loss is not
under-counted. Untyped axes (`pmap`, `shard_map(check_vma=False)`: frames of kind
"untyped", values without `vma`, and the process-level axes `mark_untyped` names) follow
JAX's legacy rules instead: each member's cotangent is its own term, so psum transposes to
psum. Collectives are ordinary (not `effectful`) primitives: every process runs
the same program, so dead-code elimination, CSE and the compiler's deterministic schedule
drop, merge and order them identically everywhere.

Run-time communicators come from `register_communicator` (funcgrad.distributed calls it);
this module imports no MPI. Imports core, the interpreters and lax.
"""

import contextlib
import contextvars
import math
from typing import NamedTuple

import numpy as np

from funcgrad import errors
from funcgrad.core import ArrayBase, ClosedJaxpr, Primitive, ShapedArray, get_aval, register_op
from funcgrad.interpreters import ad, batching
from funcgrad.lax.elementwise import add, convert_element_type, mul
from funcgrad.lax.reductions import reduce_max, reduce_min, reduce_sum
from funcgrad.lax.shape import broadcast_in_dim, full, iota, reshape
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = [
    "UnboundAxisError", "all_gather", "all_gather_p", "axis_index", "axis_index_p", "axis_size",
    "pmax", "pmax_p", "pmean", "pmin", "pmin_p", "psum", "psum_p", "psum_scatter",
    "psum_scatter_p", "pvary", "pvary_p",
]

_EMPTY = frozenset()


class UnboundAxisError(errors.FuncgradError, NameError):
    """A collective names an axis that no enclosing shard_map or vmap binds."""


# --- the axis environment ---------------------------------------------------------------------

class AxisFrame(NamedTuple):
    """An axis bound while a function is traced: by `vmap` or by `shard_map`. A process-level
    frame that `spans` a local axis name extends that axis across processes."""

    name: str
    size: int
    kind: str
    spans: str = None


_axis_env = contextvars.ContextVar("funcgrad_axis_env", default=())


@contextlib.contextmanager
def extend_axis_env(name, size, kind, spans=None):
    """Bind axis `name` of `size` (kind "vmap" or "shard_map") inside the block; with `spans`,
    a process-level axis that extends the (inner) axis named `spans` across processes."""
    token = _axis_env.set(_axis_env.get() + (AxisFrame(name, int(size), kind, spans),))
    try:
        yield
    finally:
        _axis_env.reset(token)


def axis_frames():
    """The frames bound now, innermost last."""
    return _axis_env.get()


def bound_axes():
    """The names bound now, innermost last."""
    return tuple(f.name for f in _axis_env.get())


def axis_frame(name, op="axis_size"):
    """The innermost frame binding `name`; `UnboundAxisError` names the bound axes."""
    for f in reversed(_axis_env.get()):
        if f.name == name:
            return f
    bound = bound_axes()
    raise UnboundAxisError(
        f"{op}: unbound axis name {name!r}; no enclosing shard_map or vmap(axis_name=...) "
        f"binds it (bound axis names: {bound if bound else 'none'}).\n"
        f"{errors.where(errors.user_frame(3))}\n"
        "  hint: call collectives inside fg.distributed.shard_map(f, mesh, ...) or "
        "fg.vmap(f, axis_name=...) and spell the axis name as the mesh/vmap does.")


def _names(axis_name, op):
    """`axis_name` (a str or a tuple of them) as a checked tuple of bound names."""
    names = (axis_name,) if isinstance(axis_name, str) else tuple(axis_name)
    if not names or not all(isinstance(n, str) for n in names):
        raise errors.op_error(op, f"axis_name must be a string or a tuple of strings, got "
                                  f"{axis_name!r}")
    for n in names:
        axis_frame(n, op)
    return names


_untyped_names = set()  # process-level axes of untyped programs (pmap across processes)


def mark_untyped(name):
    """Axis `name` (a process-level axis of a `pmap`) follows JAX's untyped rules."""
    _untyped_names.add(name)


def _untyped(axis_name):
    """True when the collectives over `axis_name` follow JAX's untyped (legacy) rules."""
    env = _axis_env.get()
    for name in axis_name:
        if name in _untyped_names:
            return True
        frames = [f for f in env if f.name == name]
        if frames and frames[-1].kind == "untyped":
            return True
    return False


def linked_axis(name):
    """The process-level axis that extends local axis `name` across processes, or None."""
    for f in reversed(_axis_env.get()):
        if f.spans == name:
            return f.name
    return None


def with_linked(names):
    """`names` followed by the process-level axes linked to them."""
    out = list(names)
    for n in names:
        link = linked_axis(n)
        if link is not None and link not in out:
            out.append(link)
    return tuple(out)


def axis_size(axis_name):
    """The number of members of the named axis (a product for a tuple of names).

    Example:
        >>> fg.vmap(lambda x: x * lax.axis_size("i"), axis_name="i")(fnp.ones(3))
        Array([3., 3., 3.], dtype=float32)
    """
    names = with_linked(_names(axis_name, "axis_size"))
    return math.prod(axis_frame(n, "axis_size").size for n in names)


# --- run-time communicators -------------------------------------------------------------------

_communicators = {}  # axis name -> communicator (see funcgrad.distributed.comm.Communicator)


def register_communicator(name, comm):
    """Make `comm` carry the collectives over axis `name` when programs run."""
    _communicators[name] = comm


def communicator(name, op="collective"):
    """The communicator of axis `name` at run time."""
    comm = _communicators.get(name)
    if comm is None:
        raise UnboundAxisError(
            f"{op}: no process mesh binds axis {name!r} at run time (meshes bind "
            f"{tuple(_communicators) or 'none'}).\n"
            "  hint: create the mesh with fg.distributed.Mesh((name,)) and run the function "
            "under fg.distributed.shard_map.")
    return comm


# --- typing -----------------------------------------------------------------------------------

# Builders type each equation by the default rule in funcgrad.core.trace (`_vma_typing`): the
# outputs vary over the operands' axes, invariant operands are cast by `pvary` (registered as
# `ops.pvary` in its block below). Loops register `loop_carry_vma` in their blocks.

def _with_vma(aval, vma):
    return ShapedArray(aval.shape, aval.dtype, aval.weak_type, vma)


def loop_carry_vma(op, body, start, n, avals):
    """The outputs' vma of a loop over `avals` (the union of their axes) whose `body` takes its
    `n` carries (None: all outputs) from input `start` on. A carry that enters invariant and
    leaves varying would be typed wrongly from the second iteration on (and transposed
    wrongly): an error, as in JAX."""
    j = body.jaxpr if isinstance(body, ClosedJaxpr) else body
    n = len(j.outvars) if n is None else n
    for i, (a, b) in enumerate(zip(j.invars[start:start + n], j.outvars[:n])):
        va, vb = a.aval.vma or _EMPTY, b.aval.vma
        if vb is not None and not vb <= va:
            raise errors.op_error(
                op, f"carry {i} ({a.aval.str_short()}) is the same on every member when "
                    f"the loop starts but varies over {tuple(sorted(vb - va))} after an "
                    "iteration",
                hint=f"cast the initial value first: lax.pvary(init, {tuple(sorted(vb - va))}).")
    return _EMPTY.union(*[a.vma or _EMPTY for a in avals])


def _check_varying(op, avals, names):
    for a in avals:
        if a.vma is None:
            continue
        missing = [n for n in names if n not in a.vma]
        if missing:
            raise errors.op_error(
                op, f"the operand {a.str_short()} is invariant over axis {missing[0]!r} (the "
                    f"same on every member), so {op} over it would count it once per member",
                hint="did you reduce twice (e.g. pmean of gradients that AD already "
                     "reduced)? Inside shard_map the gradient of a pmean'd loss with respect "
                     "to replicated parameters is already the mean; use x * lax.axis_size("
                     "name) if you mean it.")


def _cast_varying(x, names):
    """`x` cast to vary over `names` (only the axes it does not vary over yet)."""
    vma = get_aval(x).vma
    if vma is None:
        return x
    missing = tuple(n for n in names if n not in vma)
    return pvary_p.bind(x, axis_name=missing)[0] if missing else x


# --- pvary ------------------------------------------------------------------------------------

def pvary(x, axis_name):
    """Cast invariant values to vary over `axis_name` (a run-time no-op; AD transposes it to
    `psum`). Inserted automatically where an invariant operand meets a varying one.

    Example:
        >>> fg.vmap(lambda x, w: x * lax.pvary(w, "i"), in_axes=(0, None), axis_name="i")
    """
    names = with_linked(_names(axis_name, "pvary"))
    leaves, tree = tree_flatten(x)
    outs = pvary_p.bind(*leaves, axis_name=names) if leaves else []
    return tree_unflatten(tree, outs)


def _pvary_abstract(*avals, axis_name):
    return [_with_vma(a, (a.vma or _EMPTY) | frozenset(axis_name)) for a in avals]


def _pvary_jvp(primals, outs, tangents, *, axis_name):
    return _bind_nonzero(pvary_p, tangents, axis_name=axis_name)


def _pvary_transpose(cts, *args, axis_name):
    return [None if not ad.is_undefined(x) else
            ct if type(ct) is ad.Zero else
            psum_p.bind(_cast_varying(ct, axis_name), axis_name=axis_name)[0]
            for ct, x in zip(cts, args)]


def _pvary_batch(args, dims, *, axis_name):
    rest = _other_axes(axis_name)
    if not rest:
        return list(args), list(dims)
    return pvary_p.bind(*args, axis_name=rest), list(dims)


pvary_p = Primitive("pvary", multiple_results=True)
pvary_p.types_vma = True
pvary_p.def_impl(lambda *xs, axis_name: list(xs))
pvary_p.def_abstract_eval(_pvary_abstract)
ad.jvp_rules[pvary_p] = _pvary_jvp
ad.transpose_rules[pvary_p] = _pvary_transpose
batching.batch_rules[pvary_p] = _pvary_batch
batching.axis_primitives.add(pvary_p)
register_op("pvary", pvary_p)


# --- shared helpers for the reductions --------------------------------------------------------

def _bind_nonzero(prim, tangents, **params):
    """`prim` applied to the nonzero tangents (one equation), Zero for the others."""
    nz = [t for t in tangents if type(t) is not ad.Zero]
    if not nz:
        return [ad.Zero(t.aval) for t in tangents]
    outs = iter(prim.bind(*nz, **params))
    return [t if type(t) is ad.Zero else next(outs) for t in tangents]


def _current_axis(axis_name):
    """(name, size) of the vmapped axis when `axis_name` names it, else None."""
    cur = batching.current_axis()
    return cur if cur is not None and cur[0] in axis_name else None


def _other_axes(axis_name):
    cur = batching.current_axis()
    return tuple(n for n in axis_name if cur is None or n != cur[0])


def _reduction_abstract(op):
    def abstract(*avals, axis_name):
        _check_varying(op, avals, axis_name)
        return [_with_vma(a, None if a.vma is None else a.vma - frozenset(axis_name))
                for a in avals]
    return abstract


def _reduction_batch(prim, reduce, unbatched):
    def rule(args, dims, *, axis_name):
        cur = _current_axis(axis_name)
        if cur is None:
            return prim.bind(*args, axis_name=axis_name), list(dims)
        outs = [unbatched(x, cur[1]) if d is batching.not_mapped else reduce(x, (d,))
                for x, d in zip(args, dims)]
        rest = _other_axes(axis_name)
        if rest:
            outs = prim.bind(*outs, axis_name=rest)
        return list(outs), [batching.not_mapped] * len(outs)
    return rule


def _scaled(x, n):
    return mul(x, full((), n, get_aval(x).dtype))


def _reduction_wrapper(prim, op, x, axis_name, scalar_rule, groups=None):
    if groups is not None:
        from funcgrad.lax import parallel_ops
        return parallel_ops.grouped_reduction(op, x, axis_name, groups)
    names = with_linked(_names(axis_name, op))
    leaves, tree = tree_flatten(x)
    n = math.prod(axis_frame(a, op).size for a in names)
    outs = [None] * len(leaves)
    arrays = []
    for i, leaf in enumerate(leaves):
        if type(leaf) in (bool, int, float, complex):  # a Python constant: same everywhere
            outs[i] = scalar_rule(leaf, n)
            continue
        if isinstance(leaf, (ArrayBase, np.ndarray, np.generic)) and get_aval(leaf).dtype == bool:
            leaf = convert_element_type(leaf, np.dtype(np.int32))
        arrays.append((i, leaf))
    if arrays:
        for (i, _), o in zip(arrays, prim.bind(*[a for _, a in arrays], axis_name=names)):
            outs[i] = o
    return tree_unflatten(tree, outs)


def _allreduce_impl(op):
    def impl(*xs, axis_name):
        for name in axis_name:
            xs = communicator(name, op).allreduce_many(list(xs), op)
        return list(xs)
    return impl


def _not_differentiable(op):
    def rule(primals, outs, tangents, **params):
        raise errors.op_error(op, "is not differentiable (as in JAX)",
                              hint="wrap its operand in lax.stop_gradient (e.g. for metrics "
                                   "or clipping thresholds).")
    return rule


# --- psum -------------------------------------------------------------------------------------

def psum(x, axis_name, *, axis_index_groups=None):
    """Sum of `x` (a pytree) over the members of the named axis (or axes).

    Inside shard_map this is an allreduce; under vmap(axis_name=...) a sum over the mapped
    axis. A Python number gives `x * axis_size`. The operand must vary over the axis; the
    result is invariant (the same on every member).

    Args:
        x: an array or a pytree of arrays (booleans are summed as int32).
        axis_name: a bound axis name, or a tuple of them.
        axis_index_groups: None, or a partition of the axis' indices into groups of equal
            size (e.g. `[[0, 1], [2, 3]]`): each member sums over its group only.

    Returns:
        The sum, with the structure of `x`.

    Raises:
        UnboundAxisError: no enclosing shard_map/vmap binds the axis.
        FuncgradTypeError: an operand is already invariant over the axis.

    Example:
        >>> fg.vmap(lambda x: lax.psum(x, "i"), axis_name="i")(fnp.arange(3.0))
        Array([3., 3., 3.], dtype=float32)
    """
    return _reduction_wrapper(psum_p, "psum", x, axis_name, lambda v, n: v * n,
                              axis_index_groups)


def _psum_jvp(primals, outs, tangents, *, axis_name):
    return _bind_nonzero(psum_p, tangents, axis_name=axis_name)


def _psum_transpose(cts, *args, axis_name):
    # typed: psum goes varying -> invariant and transposes to pvary (a value without vma
    # outside a shard_map is its one replicated result: the identity); untyped axes (pmap,
    # check_vma=False): each member's cotangent is its own term, so psum again.
    again = _untyped(axis_name)
    return [None if not ad.is_undefined(x) else ct if type(ct) is ad.Zero else
            psum_p.bind(ct, axis_name=axis_name)[0] if again and x.aval.vma is None else
            _cast_varying(ct, axis_name) for ct, x in zip(cts, args)]


psum_p = Primitive("psum", multiple_results=True)
psum_p.types_vma = True
psum_p.def_impl(_allreduce_impl("sum"))
psum_p.def_abstract_eval(_reduction_abstract("psum"))
ad.jvp_rules[psum_p] = _psum_jvp
ad.transpose_rules[psum_p] = _psum_transpose
batching.batch_rules[psum_p] = _reduction_batch(psum_p, reduce_sum, _scaled)
batching.axis_primitives.add(psum_p)


def pmean(x, axis_name, *, axis_index_groups=None):
    """Mean of `x` (a pytree) over the named axis: `psum(x) / axis_size` (or over each
    member's group of `axis_index_groups`).

    Example:
        >>> fg.vmap(lambda x: lax.pmean(x, "i"), axis_name="i")(fnp.arange(3.0))
        Array([1., 1., 1.], dtype=float32)
    """
    if axis_index_groups is not None:
        n = len(axis_index_groups[0]) if len(axis_index_groups) else 1
    else:
        n = axis_size(axis_name)
    leaves, tree = tree_flatten(psum(x, axis_name, axis_index_groups=axis_index_groups))
    return tree_unflatten(tree, [v / n for v in leaves])


# --- pmax, pmin -------------------------------------------------------------------------------

def pmax(x, axis_name, *, axis_index_groups=None):
    """Elementwise maximum of `x` (a pytree) over the named axis (or each member's group of
    `axis_index_groups`); not differentiable.

    Example:
        >>> fg.vmap(lambda x: lax.pmax(x, "i"), axis_name="i")(fnp.arange(3.0))
        Array([2., 2., 2.], dtype=float32)
    """
    return _reduction_wrapper(pmax_p, "pmax", x, axis_name, lambda v, n: v, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
    """Elementwise minimum of `x` (a pytree) over the named axis (or each member's group of
    `axis_index_groups`); not differentiable.

    Example:
        >>> fg.vmap(lambda x: lax.pmin(x, "i"), axis_name="i")(fnp.arange(3.0))
        Array([0., 0., 0.], dtype=float32)
    """
    return _reduction_wrapper(pmin_p, "pmin", x, axis_name, lambda v, n: v, axis_index_groups)


def _extremum_primitive(name, reduce):
    p = Primitive(name, multiple_results=True)
    p.types_vma = True
    p.def_impl(_allreduce_impl(name[1:]))
    p.def_abstract_eval(_reduction_abstract(name))
    ad.jvp_rules[p] = _not_differentiable(name)
    batching.batch_rules[p] = _reduction_batch(p, reduce, lambda x, n: x)
    batching.axis_primitives.add(p)
    return p


pmax_p = _extremum_primitive("pmax", reduce_max)
pmin_p = _extremum_primitive("pmin", reduce_min)


# --- all_gather -------------------------------------------------------------------------------

def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False, to="varying"):
    """Every member's `x` (a pytree), stacked along a new axis `axis` (or concatenated along
    it when `tiled`), in member order (with `axis_index_groups`: the members of its group).

    Example:
        >>> fg.vmap(lambda x: lax.all_gather(x, "i"), axis_name="i")(fnp.arange(2.0))
        Array([[0., 1.], [0., 1.]], dtype=float32)
    """
    if to != "varying":
        raise errors.op_error("all_gather", f"to={errors.short_repr(to)} is not supported "
                                            "(only 'varying')",
                              cls=errors.FuncgradValueError)
    if axis_index_groups is not None:
        from funcgrad.lax import parallel_ops
        return parallel_ops.grouped_all_gather(x, axis_name, axis_index_groups, axis, tiled)
    (name,) = _single_name(axis_name, "all_gather")
    n = axis_frame(name, "all_gather").size
    link = linked_axis(name)
    leaves, tree = tree_flatten(x)
    outs = []
    for leaf in leaves:
        nd = get_aval(leaf).ndim
        if not (0 <= axis <= nd - (1 if tiled else 0)) or (tiled and nd == 0):
            raise errors.op_error("all_gather", f"axis {axis} is out of range for an operand "
                                                f"{get_aval(leaf).str_short()} (tiled={tiled})",
                                  cls=errors.FuncgradValueError)
        leaf = _cast_varying(leaf, with_linked((name,)))
        out = all_gather_p.bind(leaf, axis_name=(name,), axis=int(axis), tiled=bool(tiled),
                                axis_size=n)
        if link is not None:  # then the processes' blocks, in process order
            out = all_gather_p.bind(out, axis_name=(link,), axis=int(axis), tiled=True,
                                    axis_size=axis_frame(link).size)
        outs.append(out)
    return tree_unflatten(tree, outs)


def _single_name(axis_name, op):
    names = _names(axis_name, op)
    if len(names) != 1:
        raise errors.op_error(op, f"takes one axis name, got {names}",
                              cls=errors.FuncgradValueError)
    return names


def _gathered_shape(shape, axis, tiled, n):
    if tiled:
        return shape[:axis] + (shape[axis] * n,) + shape[axis + 1:]
    return shape[:axis] + (n,) + shape[axis:]


def _all_gather_abstract(x, *, axis_name, axis, tiled, axis_size):
    _check_varying("all_gather", [x], axis_name)
    return ShapedArray(_gathered_shape(x.shape, axis, tiled, axis_size), x.dtype, x.weak_type,
                       x.vma)


def _all_gather_impl(x, *, axis_name, axis, tiled, axis_size):
    stacked = communicator(axis_name[0], "all_gather").allgather(x)
    return _place_gathered(np, stacked, axis, tiled)


def _place_gathered(xp, stacked, axis, tiled):
    """`(n, *shape)` gathered blocks as all_gather's result."""
    out = xp.moveaxis(stacked, 0, axis)
    if tiled:
        shape = out.shape
        out = out.reshape(shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:])
    return xp.ascontiguousarray(out)


def _all_gather_transpose(ct, x, *, axis_name, axis, tiled, axis_size):
    return [psum_scatter_p.bind(_cast_varying(ct, axis_name), axis_name=axis_name,
                                scatter_dimension=axis, tiled=tiled, axis_size=axis_size)]


def _all_gather_batch(args, dims, *, axis_name, axis, tiled, axis_size):
    (x,), (d,) = args, dims
    if _current_axis(axis_name) is None:
        x = batching.moveaxis(x, d, 0)
        return all_gather_p.bind(x, axis_name=axis_name, axis=axis + 1, tiled=tiled,
                                 axis_size=axis_size), 0
    if d is batching.not_mapped:
        shape = get_aval(x).shape
        out_shape = shape[:axis] + (axis_size,) + shape[axis:]
        x = broadcast_in_dim(x, out_shape, tuple(i for i in range(len(out_shape)) if i != axis))
    else:
        x = batching.moveaxis(x, d, axis)
    if tiled:
        s = get_aval(x).shape
        x = reshape(x, s[:axis] + (s[axis] * s[axis + 1],) + s[axis + 2:])
    return x, batching.not_mapped


all_gather_p = Primitive("all_gather")
all_gather_p.types_vma = True
all_gather_p.def_impl(_all_gather_impl)
all_gather_p.def_abstract_eval(_all_gather_abstract)
ad.deflinear(all_gather_p, _all_gather_transpose)
batching.batch_rules[all_gather_p] = _all_gather_batch
batching.axis_primitives.add(all_gather_p)


# --- psum_scatter -----------------------------------------------------------------------------

def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """Sum `x` (a pytree) over the named axis and give member `k` the `k`-th block of the sum
    along `scatter_dimension` (that dimension must be the axis size, and is removed, unless
    `tiled`, where it must be a multiple of it and is divided by it).

    Example:
        >>> fg.vmap(lambda x: lax.psum_scatter(x, "i"), axis_name="i")(fnp.ones((2, 2)))
        Array([2., 2.], dtype=float32)
    """
    if axis_index_groups is not None:
        from funcgrad.lax import parallel_ops
        return parallel_ops.grouped_psum_scatter(x, axis_name, axis_index_groups,
                                                 scatter_dimension, tiled)
    (name,) = _single_name(axis_name, "psum_scatter")
    n = axis_size(name)
    leaves, tree = tree_flatten(x)
    outs = []
    for leaf in leaves:
        shape = get_aval(leaf).shape
        d = scatter_dimension
        ok = 0 <= d < len(shape) and (shape[d] % n == 0 if tiled else shape[d] == n)
        if not ok:
            need = f"a multiple of the axis size {n}" if tiled else f"the axis size {n}"
            raise errors.op_error(
                "psum_scatter", f"scatter_dimension {d} of an operand "
                                f"{get_aval(leaf).str_short()} must exist and be {need}",
                cls=errors.FuncgradValueError)
        outs.append(_psum_scatter_linked(leaf, name, int(d), bool(tiled), n))
    return tree_unflatten(tree, outs)


def _psum_scatter_linked(x, name, d, tiled, n):
    """psum_scatter over `name` and, when it spans processes, its process axis first: process
    p sums block p, then its local member k takes sub-block k (global member p*L + k)."""
    link = linked_axis(name)
    if link is None:
        return psum_scatter_p.bind(x, axis_name=(name,), scatter_dimension=d, tiled=tiled,
                                   axis_size=n)
    outer = axis_frame(link).size
    out = psum_scatter_p.bind(x, axis_name=(link,), scatter_dimension=d, tiled=True,
                              axis_size=outer)
    out = psum_scatter_p.bind(out, axis_name=(name,), scatter_dimension=d, tiled=True,
                              axis_size=n // outer)
    if not tiled:  # blocks of one along `d`: drop it
        shape = get_aval(out).shape
        out = reshape(out, shape[:d] + shape[d + 1:])
    return out


def _scattered_shape(shape, d, tiled, n):
    if tiled:
        return shape[:d] + (shape[d] // n,) + shape[d + 1:]
    return shape[:d] + shape[d + 1:]


def _psum_scatter_abstract(x, *, axis_name, scatter_dimension, tiled, axis_size):
    _check_varying("psum_scatter", [x], axis_name)
    return ShapedArray(_scattered_shape(x.shape, scatter_dimension, tiled, axis_size), x.dtype,
                       x.weak_type, x.vma)


def _blocks_first(xp, x, d, n):
    """`x` with dimension `d` split into (n, rest) and the n blocks moved first."""
    shape = x.shape
    x = x.reshape(shape[:d] + (n, shape[d] // n) + shape[d + 1:])
    return xp.ascontiguousarray(xp.moveaxis(x, d, 0))


def _psum_scatter_impl(x, *, axis_name, scatter_dimension, tiled, axis_size):
    comm = communicator(axis_name[0], "psum_scatter")
    block = comm.reduce_scatter(_blocks_first(np, x, scatter_dimension, axis_size), "sum")
    out = np.moveaxis(block, 0, scatter_dimension) if block.ndim else block
    shape = _scattered_shape(x.shape, scatter_dimension, tiled, axis_size)
    return np.ascontiguousarray(out).reshape(shape)


def _psum_scatter_transpose(ct, x, *, axis_name, scatter_dimension, tiled, axis_size):
    return [all_gather_p.bind(_cast_varying(ct, axis_name), axis_name=axis_name,
                              axis=scatter_dimension, tiled=tiled, axis_size=axis_size)]


def _psum_scatter_batch(args, dims, *, axis_name, scatter_dimension, tiled, axis_size):
    (x,), (d,) = args, dims
    sd = scatter_dimension
    if _current_axis(axis_name) is None:
        x = batching.moveaxis(x, d, 0)
        return psum_scatter_p.bind(x, axis_name=axis_name, scatter_dimension=sd + 1,
                                   tiled=tiled, axis_size=axis_size), 0
    s = _scaled(x, axis_size) if d is batching.not_mapped else reduce_sum(x, (d,))
    shape = get_aval(s).shape
    if tiled:
        s = reshape(s, shape[:sd] + (axis_size, shape[sd] // axis_size) + shape[sd + 1:])
    return batching.moveaxis(s, sd, 0), 0


psum_scatter_p = Primitive("psum_scatter")
psum_scatter_p.types_vma = True
psum_scatter_p.def_impl(_psum_scatter_impl)
psum_scatter_p.def_abstract_eval(_psum_scatter_abstract)
ad.deflinear(psum_scatter_p, _psum_scatter_transpose)
batching.batch_rules[psum_scatter_p] = _psum_scatter_batch
batching.axis_primitives.add(psum_scatter_p)


# --- axis_index -------------------------------------------------------------------------------

def axis_index(axis_name):
    """This member's index along the named axis (for a tuple of names, the row-major index
    over them): an int32 scalar that varies over it.

    Example:
        >>> fg.vmap(lambda x: x * lax.axis_index("i"), axis_name="i")(fnp.ones(3))
        Array([0., 1., 2.], dtype=float32)
    """
    index = None
    for name in _names(axis_name, "axis_index"):  # the process axis of a linked name first
        for n in (linked_axis(name), name):
            if n is None:
                continue
            i = axis_index_p.bind(axis_name=(n,))
            size = full((), axis_frame(n).size, np.dtype(np.int32))
            index = i if index is None else add(mul(index, size), i)
    return index


def _axis_index_batch(args, dims, *, axis_name):
    cur = _current_axis(axis_name)
    if cur is None:
        return axis_index_p.bind(axis_name=axis_name), batching.not_mapped
    return iota(np.dtype(np.int32), cur[1]), 0


axis_index_p = Primitive("axis_index")
axis_index_p.types_vma = True
axis_index_p.def_impl(
    lambda *, axis_name: np.asarray(communicator(axis_name[0], "axis_index").rank, np.int32))
axis_index_p.def_abstract_eval(
    lambda *, axis_name: ShapedArray((), np.dtype(np.int32), False, frozenset(axis_name)))
ad.defjvp_zero(axis_index_p)
batching.batch_rules[axis_index_p] = _axis_index_batch
batching.axis_primitives.add(axis_index_p)
