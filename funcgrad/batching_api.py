"""`vmap`, the public vectorizing map, and `vmap_flat`, its flat-list layer.

`vmap` resolves `in_axes`/`out_axes` (pytree prefixes of the arguments and outputs), traces
the function once per example (abstractly, with the mapped axis removed) and evaluates that
IR with `batching.batch_eval` in the current trace, so it composes with grad, jit and
itself. `vmap_flat` is also used by jacobians and the batching rules of custom derivatives.
Imports the core, the batching interpreter and lax; nothing from the user layer.
"""

import functools
import inspect

import numpy as np

from funcgrad import errors
from funcgrad.core import Array, ArrayBase, ShapedArray, get_aval, trace_to_jaxpr
from funcgrad.interpreters import batching
from funcgrad.tree_util import (
    TreeStructureError,
    keystr,
    tree_flatten,
    tree_flatten_with_path,
    tree_structure,
    tree_unflatten,
)

__all__ = ["mapped", "vmap", "vmap_flat"]

not_mapped = batching.not_mapped


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None,
         sum_match=False):
    """Vectorize `fun` over a new leading (or chosen) axis of its arguments.

    Args:
        fun: a function of positional (and keyword) pytree arguments returning a pytree.
        in_axes: an int, None, or a tuple with one entry per positional argument, each a
            pytree prefix of that argument whose leaves are ints (the mapped axis, negative
            counts from the end) or None (not mapped). Keyword arguments are mapped over
            axis 0.
        out_axes: the same for the output: where the mapped axis goes in each output leaf;
            unmapped outputs are broadcast along it (None keeps an output unmapped).
        axis_name: a name (str) for the mapped axis, so that collectives inside `fun`
            (`lax.psum`, `pmean`, `all_gather`, `axis_index`...) reduce over it: the
            single-process equivalent of `funcgrad.distributed.shard_map` over that axis.
        axis_size: the size of the mapped axis; needed only when no argument is mapped.
        spmd_axis_name: JAX's mesh axis name(s) (a str or a tuple of them) that the mapped
            axis is sharded over; a layout hint only (it never changes values), accepted and
            checked: a funcgrad array lives on one device.
        sum_match: an output that is mapped but whose `out_axes` entry is None is summed
            over the mapped axis (instead of an error), as in JAX.

    Returns:
        The vectorized function.

    Raises:
        FuncgradValueError: mapped axes of different sizes (each argument path and size is
            listed), an axis out of range, `in_axes` that does not match the arguments, or
            no mapped argument and no `axis_size`.

    Example:
        >>> vmap(lambda x, y: x * y, in_axes=(0, None))(fnp.arange(3.0), 2.0)
        Array([0., 2., 4.], dtype=float32)
    """
    if isinstance(in_axes, list):  # JAX treats a list of per-argument axes as a tuple
        in_axes = tuple(in_axes)
    _check_spec(in_axes, "in_axes", top=True)
    _check_spec(out_axes, "out_axes", top=False)
    if axis_name is not None and not isinstance(axis_name, str):
        raise errors.FuncgradTypeError(f"vmap axis_name must be a string, got {axis_name!r}"
                                       f"\n{errors.where()}")
    names = spmd_axis_name if isinstance(spmd_axis_name, tuple) else (spmd_axis_name,)
    if spmd_axis_name is not None and not all(isinstance(n, str) for n in names):
        raise errors.FuncgradTypeError(f"vmap spmd_axis_name must be a string or a tuple of "
                                       f"strings, got {spmd_axis_name!r}\n{errors.where()}")
    return mapped(fun, in_axes, out_axes, axis_size, axis_name, sum_match=sum_match)


def mapped(fun, in_axes, out_axes, axis_size, axis_name, axis_kind="vmap", sum_match=False):
    """`vmap`'s function, its arguments checked: `axis_kind` "untyped" binds the named axis
    without typing by mesh axes, with JAX's legacy collective rules (`pmap`); `sum_match` as
    `vmap`'s."""

    @functools.wraps(fun)
    def batched(*args, **kwargs):
        names = _arg_names(fun, len(args))
        leaves, in_tree = tree_flatten((args, kwargs))
        axes = _leaf_axes(in_axes, args, kwargs, names)
        paths = [_path_text(p, names) for p, _ in tree_flatten_with_path((args, kwargs))[0]]
        dims, size = _mapped_dims(leaves, axes, paths, axis_size)
        store = {}

        def flat_fun(*xs):
            a, k = tree_unflatten(in_tree, list(xs))
            out = fun(*a, **k)
            out_leaves, store["tree"] = tree_flatten(out)
            return out_leaves

        outs, out_dims = vmap_flat(flat_fun, leaves, dims, size, axis_name=axis_name,
                                   axis_kind=axis_kind)
        out_tree = store["tree"]
        o_axes = _out_leaf_axes(out_axes, out_tree)
        res = [_place_output(x, d, a, size, i, out_tree, sum_match)
               for i, (x, d, a) in enumerate(zip(outs, out_dims, o_axes))]
        return tree_unflatten(out_tree, res)
    return batched


def vmap_flat(fun, args, dims, size, name="vmap", axis_name=None, axis_kind="vmap"):
    """Batch a flat function: trace `fun` per example, run `batch_eval` on `args`.

    `dims` gives each argument's mapped axis (None: unmapped); returns `(outs, out_dims)`
    with the outputs as the batching rules left them. With `axis_name`, the mapped axis is
    bound for collectives and mapped arguments vary over it (see funcgrad.lax.parallel);
    `axis_kind="untyped"` (pmap) binds it without that typing, with JAX's legacy rules.
    """
    avals = [_example_aval(get_aval(x), d) for x, d in zip(args, dims)]
    if axis_name is None:
        closed = trace_to_jaxpr(fun, avals, name)
    else:
        from funcgrad.lax import parallel
        if axis_kind != "untyped":  # mapped values vary over the axis (and its process axis)
            axes = frozenset(parallel.with_linked((axis_name,)))
            avals = [a.update(vma=(a.vma or frozenset()) | (
                frozenset() if d is not_mapped else axes)) for a, d in zip(avals, dims)]
        with parallel.extend_axis_env(axis_name, size, axis_kind):
            closed = trace_to_jaxpr(fun, avals, name)
    with batching.batch_axis(axis_name, size):
        outs, out_dims = batching.batch_eval(closed.jaxpr, closed.consts, list(args),
                                             list(dims))
    return [_as_value(x, v.aval) for x, v in zip(outs, closed.jaxpr.outvars)], out_dims


def move_to(x, dim, dst, size):
    """`x` with its mapped axis at `dst`; an unmapped `x` is broadcast along `dst`."""
    from funcgrad import lax
    if dim is not_mapped:
        aval = get_aval(x)
        shape = list(aval.shape)
        shape.insert(dst, size)
        kept = tuple(i for i in range(len(shape)) if i != dst)
        return lax.broadcast_in_dim(x, tuple(shape), kept)
    return batching.moveaxis(x, dim, dst)


# --- helpers -----------------------------------------------------------------------------------

def _example_aval(aval, d):
    if d is not_mapped:
        return aval
    shape = aval.shape[:d] + aval.shape[d + 1:]
    return ShapedArray(shape, aval.dtype, aval.weak_type, aval.vma)


def _as_value(x, aval):
    if isinstance(x, ArrayBase):
        return x
    return Array(np.asarray(x, aval.dtype), aval.weak_type)


def _check_spec(spec, what, top):
    if top and not (spec is None or isinstance(spec, (int, np.integer, tuple))):
        raise errors.FuncgradTypeError(
            f"vmap {what} must be an int, None, or a tuple of entries corresponding to the "
            f"positional arguments passed to the function, but got {spec!r}.\n{errors.where()}"
            "\n  hint: use a tuple with one entry per argument, e.g. in_axes=({'w': 0},).")
    bad = [a for a in tree_flatten(spec, is_leaf=lambda x: x is None)[0]
           if a is not None and (isinstance(a, bool) or not isinstance(a, (int, np.integer)))]
    if bad:
        raise errors.FuncgradTypeError(
            f"vmap {what} must be an int, None, or a (nested) container with those types as "
            f"leaves, but got {spec!r}.\n{errors.where()}")


def _arg_names(fun, nargs):
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(nargs):
        p = params[i] if i < len(params) else None
        ok = p is not None and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        names.append(p.name if ok else f"args[{i}]")
    return names


def _path_text(path, names):
    if path[0].idx == 0:
        return names[path[1].idx] + keystr(path[2:])
    return "kwargs" + keystr(path[1:])


def _leaf_axes(in_axes, args, kwargs, names):
    """One axis (int or None) per leaf of `(args, kwargs)`; kwargs leaves get 0."""
    if isinstance(in_axes, tuple):
        if len(in_axes) != len(args):
            raise errors.FuncgradValueError(
                "vmap in_axes must be an int, None, or a tuple of entries corresponding to "
                f"the positional arguments passed to the function, but got "
                f"len(in_axes)={len(in_axes)}, len(args)={len(args)}.\n"
                f"{errors.where()}")
        spec = in_axes
    else:
        spec = (in_axes,) * len(args)
    axes = []
    for i, (a, arg) in enumerate(zip(spec, args)):
        axes_leaves, axes_tree = tree_flatten(a, is_leaf=lambda x: x is None)
        try:
            subtrees = axes_tree.flatten_up_to(arg)
        except TreeStructureError as e:
            raise errors.FuncgradValueError(
                f"vmap in_axes specification must be a tree prefix of the corresponding "
                f"value, got specification {a!r} for argument {names[i]} with structure "
                f"{tree_structure(arg)}: {e}\n{errors.where()}") from None
        for ax, sub in zip(axes_leaves, subtrees):
            axes += [ax] * len(tree_flatten(sub)[0])
    return axes + [0] * len(tree_flatten(kwargs)[0])


def _mapped_dims(leaves, axes, paths, axis_size):
    dims, sizes = [], []
    for x, ax, path in zip(leaves, axes, paths):
        if ax is None:
            dims.append(not_mapped)
            continue
        aval = get_aval(x)
        if aval.ndim == 0 or not -aval.ndim <= ax < aval.ndim:
            raise errors.FuncgradValueError(
                f"vmap was requested to map its argument {path} along axis {ax}, which "
                f"implies that its rank should be at least {ax + 1 if ax >= 0 else -ax}, but "
                f"is only {aval.ndim} (its shape is {aval.shape}).\n"
                f"{errors.where()}")
        d = int(ax) % aval.ndim
        dims.append(d)
        sizes.append((path, d, aval))
    if not sizes and axis_size is None:
        raise errors.FuncgradValueError(
            "vmap must have at least one non-None value in in_axes (or be given axis_size)."
            f"\n{errors.where()}")
    distinct = {a.shape[d] for _, d, a in sizes} | ({axis_size} if axis_size is not None
                                                    else set())
    if len(distinct) > 1:
        lines = [f"  * axis {d} of argument {p} of type {a.str_short()} has size {a.shape[d]}"
                 for p, d, a in sizes]
        if axis_size is not None:
            lines.insert(0, f"  * axis_size={axis_size} was given")
        raise errors.FuncgradValueError(
            "vmap got inconsistent sizes for array axes to be mapped:\n" + "\n".join(lines)
            + f"\n{errors.where()}")
    size = axis_size if axis_size is not None else sizes[0][2].shape[sizes[0][1]]
    return dims, int(size)


def _out_leaf_axes(out_axes, out_tree):
    axes_leaves, axes_tree = tree_flatten(out_axes, is_leaf=lambda x: x is None)
    dummy = tree_unflatten(out_tree, [0] * out_tree.num_leaves)
    try:
        subtrees = axes_tree.flatten_up_to(dummy)
    except TreeStructureError as e:
        raise errors.FuncgradValueError(
            f"vmap out_axes specification must be a tree prefix of the corresponding value, "
            f"got specification {out_axes!r} for output structure {out_tree}: {e}\n"
            f"{errors.where()}") from None
    axes = []
    for ax, sub in zip(axes_leaves, subtrees):
        axes += [ax] * len(tree_flatten(sub)[0])
    return axes


def _place_output(x, d, ax, size, i, out_tree, sum_match=False):
    if ax is None:
        if d is not not_mapped and sum_match:
            from funcgrad import lax
            return lax.reduce_sum(x, (d,))
        if d is not not_mapped:
            raise errors.FuncgradValueError(
                f"vmap has mapped output (output leaf {i} of {out_tree}) but out_axes is None"
                f"\n{errors.where()}")
        return x
    nd = get_aval(x).ndim + (1 if d is not_mapped else 0)
    if not -nd <= ax < nd:
        raise errors.FuncgradValueError(
            f"vmap out_axes={ax} is out of range for output leaf {i} of rank {nd} (with the "
            f"mapped axis)\n{errors.where()}")
    return move_to(x, d, ax % nd, size)
