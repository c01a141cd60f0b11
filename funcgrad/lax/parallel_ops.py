"""Collectives built from `all_gather` and `axis_index`: `ppermute`, `pshuffle`, `all_to_all`,
`pswapaxes`, and every collective's `axis_index_groups=` (the reductions, `all_gather`,
`psum_scatter`, `all_to_all`); and `with_sharding_constraint` (funcgrad.sharding's, through
the `core.ops` registry).

Each gathers the members' values (`members`: every member's, or those of this member's
group, in the group's order) and picks what this member receives with `axis_index` and
static tables, so they run wherever `all_gather` does: under `vmap(axis_name=)` and `pmap`
on one process, and over MPI between processes (no point-to-point transport is needed).
Their derivatives and batching rules are those of the primitives they are made of. The cost
is one all_gather: every member briefly holds every member's operand.
Imports core and lax only.
"""

import numpy as np

from funcgrad import errors
from funcgrad.core import get_aval, ops
from funcgrad.lax.elementwise import convert_element_type, mul
from funcgrad.lax.logic import ge, select_n
from funcgrad.lax.parallel import _names, all_gather, axis_index, axis_size, pvary
from funcgrad.lax.reductions import reduce_max, reduce_min, reduce_sum
from funcgrad.lax.shape import broadcast_in_dim, full, reshape, transpose
from funcgrad.lax.slicing import concatenate, dynamic_slice
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = ["all_to_all", "pbroadcast", "pcast", "ppermute", "pshuffle", "pswapaxes",
           "with_sharding_constraint"]

_I32 = np.dtype(np.int32)


# --- shared pieces ----------------------------------------------------------------------------

def _one_name(axis_name, op):
    names = _names(axis_name, op)
    if len(names) != 1:
        raise errors.op_error(op, f"takes one axis name, got {names}",
                              cls=errors.FuncgradValueError)
    return names[0]


def _pick(table, index):
    """`table[index]` for a static numpy table and a traced int32 scalar `index`."""
    table = np.asarray(table)
    starts = (index,) + (np.int32(0),) * (table.ndim - 1)
    row = dynamic_slice(table, starts, (1,) + table.shape[1:])
    return reshape(row, table.shape[1:])


def _row(values, i):
    """`values[i]` (leading axis) for a traced int32 scalar `i`."""
    shape = get_aval(values).shape
    starts = (i,) + (np.int32(0),) * (len(shape) - 1)
    return reshape(dynamic_slice(values, starts, (1,) + shape[1:]), shape[1:])


def _moveaxis(x, src, dst):
    nd = get_aval(x).ndim
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return x if src == dst else transpose(x, tuple(perm))


def check_groups(groups, n, op):
    """`axis_index_groups` as a tuple of equal-size tuples partitioning range(n)."""
    try:
        groups = tuple(tuple(int(i) for i in g) for g in groups)
    except TypeError:
        groups = None
    if not groups or len({len(g) for g in groups}) != 1 or \
            sorted(i for g in groups for i in g) != list(range(n)):
        raise errors.op_error(
            op, f"axis_index_groups must split the axis' {n} indices into groups of equal "
                f"size, each index once; got {errors.short_repr(groups)}",
            cls=errors.FuncgradValueError, hint="e.g. [[0, 1], [2, 3]] for an axis of size 4")
    return groups


def members(x, name, groups, op):
    """(the values of this member's group, stacked on a new leading axis, in group order; this
    member's position among them). Without groups: every member, and `axis_index`."""
    gathered = all_gather(x, name)
    index = axis_index(name)
    if groups is None:
        return gathered, index
    groups = check_groups(groups, axis_size(name), op)
    table = np.zeros((axis_size(name), len(groups[0])), _I32)
    position = np.zeros(axis_size(name), _I32)
    for g in groups:
        for k, i in enumerate(g):
            table[i], position[i] = g, k
    rows = _pick(table, index)
    picked = []
    for k in range(table.shape[1]):  # the group's size (static): one slice per member of it
        value = _row(gathered, _row(rows, np.int32(k)))
        picked.append(reshape(value, (1,) + get_aval(value).shape))
    return concatenate(picked, 0), _pick(position, index)


def _leaves(x):
    leaves, tree = tree_flatten(x)
    return leaves, tree


# --- reductions over groups -------------------------------------------------------------------

_REDUCE = {"psum": reduce_sum, "pmax": reduce_max, "pmin": reduce_min}


def grouped_reduction(op, x, axis_name, groups):
    """psum/pmax/pmin of `x` (a pytree) over each member's group of `axis_index_groups`."""
    name = _one_name(axis_name, op)
    size = len(check_groups(groups, axis_size(name), op)[0])
    leaves, tree = _leaves(x)
    outs = []
    for leaf in leaves:
        if type(leaf) in (bool, int, float, complex):  # the same on every member
            outs.append(leaf * size if op == "psum" else leaf)
            continue
        if get_aval(leaf).dtype == bool:
            leaf = convert_element_type(leaf, _I32)
        values, _ = members(leaf, name, groups, op)
        outs.append(_REDUCE[op](values, (0,)))
    return tree_unflatten(tree, outs)


def grouped_all_gather(x, axis_name, groups, axis, tiled):
    """all_gather of `x` (a pytree) over this member's group (JAX's `axis_index_groups`)."""
    name = _one_name(axis_name, "all_gather")
    leaves, tree = _leaves(x)
    outs = []
    for leaf in leaves:
        nd = get_aval(leaf).ndim
        if not (0 <= axis <= nd - (1 if tiled else 0)) or (tiled and nd == 0):
            raise errors.op_error("all_gather", f"axis {axis} is out of range for an operand "
                                                f"{get_aval(leaf).str_short()} (tiled={tiled})",
                                  cls=errors.FuncgradValueError)
        values, _ = members(leaf, name, groups, "all_gather")
        outs.append(_place(values, axis, tiled))
    return tree_unflatten(tree, outs)


def _place(values, axis, tiled):
    """Stacked `(k, *shape)` values as all_gather's result: axis `axis`, merged when tiled."""
    out = _moveaxis(values, 0, axis)
    if tiled:
        s = get_aval(out).shape
        out = reshape(out, s[:axis] + (s[axis] * s[axis + 1],) + s[axis + 2:])
    return out


def grouped_psum_scatter(x, axis_name, groups, d, tiled):
    """psum_scatter of `x` (a pytree) within each member's group."""
    name = _one_name(axis_name, "psum_scatter")
    size = len(check_groups(groups, axis_size(name), "psum_scatter")[0])
    leaves, tree = _leaves(x)
    outs = []
    for leaf in leaves:
        shape = get_aval(leaf).shape
        ok = 0 <= d < len(shape) and (shape[d] % size == 0 if tiled else shape[d] == size)
        if not ok:
            raise errors.op_error(
                "psum_scatter", f"scatter_dimension {d} of an operand "
                                f"{get_aval(leaf).str_short()} must exist and be "
                                f"{'a multiple of ' if tiled else ''}the group size {size}",
                cls=errors.FuncgradValueError)
        values, position = members(leaf, name, groups, "psum_scatter")
        total = reduce_sum(values, (0,))
        block = shape[d] // size
        starts = tuple(mul(position, np.int32(block)) if i == d else np.int32(0)
                       for i in range(len(shape)))
        out = dynamic_slice(total, starts, shape[:d] + (block,) + shape[d + 1:])
        outs.append(out if tiled else reshape(out, shape[:d] + shape[d + 1:]))
    return tree_unflatten(tree, outs)


# --- ppermute, pshuffle -----------------------------------------------------------------------

def ppermute(x, axis_name, perm):
    """Send each member's `x` (a pytree) along `perm`, a list of `(source, destination)`
    member pairs: a member receives its source's value, or zeros when no pair names it as a
    destination (as `jax.lax.ppermute`).

    Example:
        >>> fg.vmap(lambda x: lax.ppermute(x, "i", [(0, 1), (1, 2), (2, 0)]),
        ...         axis_name="i")(fnp.arange(3.0))
        Array([2., 0., 1.], dtype=float32)
    """
    name = _one_name(axis_name, "ppermute")
    n = axis_size(name)
    try:
        pairs = tuple((int(s), int(t)) for s, t in perm)
    except (TypeError, ValueError):
        pairs = None
    bad = pairs is None or any(not (0 <= i < n) for p in pairs for i in p)
    if bad or len({s for s, _ in pairs}) != len(pairs) or len({t for _, t in pairs}) != len(pairs):
        raise errors.op_error(
            "ppermute", f"perm must be (source, destination) pairs of member indices in "
                        f"[0, {n}), each source and each destination at most once; got "
                        f"{errors.short_repr(perm)}", cls=errors.FuncgradValueError)
    source = np.full(n, -1, _I32)
    for s, t in pairs:
        source[t] = s
    leaves, tree = _leaves(x)
    outs = []
    for leaf in leaves:
        values, index = members(leaf, name, None, "ppermute")
        src = _pick(source, index)
        got = _row(values, select_n(ge(src, np.int32(0)), np.int32(0), src))
        if (source >= 0).all():
            outs.append(got)
        else:
            aval = get_aval(got)
            zeros = full(aval.shape, 0, aval.dtype)
            has = broadcast_in_dim(ge(src, np.int32(0)), aval.shape, ())
            outs.append(select_n(has, zeros, got))
    return tree_unflatten(tree, outs)


def pbroadcast(x, axis_name, source):
    """Every member receives member `source`'s `x` (a pytree), as `jax.lax.pbroadcast`.

    Example:
        >>> fg.vmap(lambda x: lax.pbroadcast(x, "i", 2), axis_name="i")(fnp.arange(3.0))
        Array([2., 2., 2.], dtype=float32)
    """
    name = _one_name(axis_name, "pbroadcast")
    n = axis_size(name)
    if not isinstance(source, (int, np.integer)) or not 0 <= source < n:
        raise errors.op_error("pbroadcast", f"source must be a member index in [0, {n}), got "
                                            f"{errors.short_repr(source)}",
                              cls=errors.FuncgradValueError)
    leaves, tree = _leaves(x)
    outs = [_row(members(leaf, name, None, "pbroadcast")[0], np.int32(source))
            for leaf in leaves]
    return tree_unflatten(tree, outs)


def pcast(x, axis_name, *, to):
    """JAX's cast between value types over named axes: `to="varying"` is `lax.pvary` (the
    invariant -> varying cast AD relies on); funcgrad has no other kinds.

    Example:
        >>> fg.vmap(lambda x, w: x * lax.pcast(w, "i", to="varying"), in_axes=(0, None),
        ...         axis_name="i")(fnp.ones(2), 3.0)
        Array([3., 3.], dtype=float32)
    """
    if to != "varying":
        raise errors.op_error("pcast", f"to={errors.short_repr(to)} is not supported "
                                       "(only 'varying': "
                                       "funcgrad has no unreduced/reduced values)",
                              cls=errors.FuncgradValueError)
    return pvary(x, axis_name)


def pshuffle(x, axis_name, perm):
    """Member `i` receives member `perm[i]`'s `x`: `ppermute` with the pairs
    `(perm[i], i)`; `perm` must be a permutation of the member indices.

    Example:
        >>> fg.vmap(lambda x: lax.pshuffle(x, "i", [1, 2, 0]), axis_name="i")(fnp.arange(3.0))
        Array([1., 2., 0.], dtype=float32)
    """
    name = _one_name(axis_name, "pshuffle")
    perm = list(perm)
    if sorted(perm) != list(range(axis_size(name))):
        raise errors.op_error("pshuffle", f"perm must be a permutation of range("
                                          f"{axis_size(name)}), got {errors.short_repr(perm)}",
                              cls=errors.FuncgradValueError)
    return ppermute(x, name, [(s, i) for i, s in enumerate(perm)])


# --- all_to_all, pswapaxes --------------------------------------------------------------------

def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
    """Member `i` splits `x` along `split_axis` into one chunk per member and sends chunk `j`
    to member `j`; each member concatenates what it receives along `concat_axis`, in member
    order. Without `tiled`, `split_axis` must have the axis size and is removed, and the
    received chunks form a new axis at `concat_axis` (as `jax.lax.all_to_all`).

    Example:
        >>> fg.vmap(lambda x: lax.all_to_all(x, "i", 0, 0), axis_name="i")(
        ...     fnp.arange(4.0).reshape(2, 2))
        Array([[0., 2.],
               [1., 3.]], dtype=float32)
    """
    name = _one_name(axis_name, "all_to_all")
    n = axis_size(name) if axis_index_groups is None else \
        len(check_groups(axis_index_groups, axis_size(name), "all_to_all")[0])
    leaves, tree = _leaves(x)
    outs = []
    for leaf in leaves:
        shape = get_aval(leaf).shape
        nd = len(shape)
        ok = 0 <= split_axis < nd and 0 <= concat_axis < nd and \
            (shape[split_axis] % n == 0 if tiled else shape[split_axis] == n)
        if not ok:
            raise errors.op_error(
                "all_to_all", f"split_axis {split_axis} and concat_axis {concat_axis} of an "
                              f"operand {get_aval(leaf).str_short()}: split_axis must exist "
                              f"and be {'a multiple of ' if tiled else ''}the axis size {n}",
                cls=errors.FuncgradValueError)
        values, index = members(leaf, name, axis_index_groups, "all_to_all")
        outs.append(_exchange(values, index, n, split_axis, concat_axis, tiled))
    return tree_unflatten(tree, outs)


def _exchange(values, index, n, split, concat, tiled):
    """From every member's operand (`values`: `(n, *shape)`), this member's chunks."""
    s = get_aval(values).shape[1:]
    chunk = s[split] // n
    blocks = reshape(values, (n,) + s[:split] + (n, chunk) + s[split + 1:])
    starts = tuple(index if i == split + 1 else np.int32(0) for i in range(len(s) + 2))
    sizes = (n,) + s[:split] + (1, chunk) + s[split + 1:]
    mine = reshape(dynamic_slice(blocks, starts, sizes), (n,) + s[:split] + (chunk,)
                   + s[split + 1:])  # (n, ...) with chunk at split + 1
    if not tiled:  # drop the unit chunk axis; the members' axis goes to concat_axis
        mine = reshape(mine, (n,) + s[:split] + s[split + 1:])
        return _moveaxis(mine, 0, concat)
    out = _moveaxis(mine, 0, concat)
    o = get_aval(out).shape
    return reshape(out, o[:concat] + (o[concat] * o[concat + 1],) + o[concat + 2:])


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """Swap the named (mapped) axis with positional axis `axis` of `x`, whose size must be
    the axis size: `all_to_all(x, axis_name, axis, axis)`.

    Example:
        >>> fg.vmap(lambda x: lax.pswapaxes(x, "i", 0), axis_name="i")(
        ...     fnp.arange(4.0).reshape(2, 2))
        Array([[0., 2.],
               [1., 3.]], dtype=float32)
    """
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)



def with_sharding_constraint(x, shardings):
    """`x` (a pytree) laid out as `shardings` (a sharding, a `PartitionSpec` over the mesh of
    `set_mesh`, or a pytree prefix of them), as `jax.lax.with_sharding_constraint`. A concrete
    array is placed (`device_put`); a traced one keeps its value (under `jit` the layout is
    the compiler's), after the spec is checked against its shape.

    Example:
        >>> lax.with_sharding_constraint(fnp.ones(4), fg.sharding.SingleDeviceSharding(
        ...     fg.devices()[0])).shape
        (4,)
    """
    return ops.with_sharding_constraint(x, shardings)
