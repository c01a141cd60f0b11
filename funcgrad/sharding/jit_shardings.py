"""`jit(in_shardings=, out_shardings=)`: a jitted function whose arguments and results are
laid out as given (`with_shardings`).

On one process the layout is a record (every array holds its whole value), so the program
is the same; what the shardings add is JAX's checking and placement: each argument is
placed with its sharding (a committed array laid out otherwise is an error, as in JAX; a
spec that does not divide a shape is an error) and each result is placed with its
`out_shardings` entry. Shardings that span several processes are refused with a pointer to
`shard_map`/`pmap`, which run such programs (funcgrad compiles per-process programs; it has
no partitioner for global ones). Imports the sharding modules only.
"""

import functools
import types

from funcgrad import errors, tree_util
from funcgrad.core import Tracer, get_aval
from funcgrad.sharding.arrays import GlobalArray, is_placement, placements_for, put
from funcgrad.sharding.shardings import as_sharding

__all__ = ["with_shardings"]


def with_shardings(jitted, in_shardings, out_shardings):
    """`jitted` (a `Jitted`) with its arguments and results placed as given."""
    return _WithShardings(jitted, in_shardings, out_shardings)


class _WithShardings:
    """A jitted function with `in_shardings`/`out_shardings`; everything else (`lower`,
    `trace_count`, `cache_info()`, ...) is the jitted function's."""

    def __init__(self, jitted, in_shardings, out_shardings):
        self._jitted = jitted
        self._in, self._out = in_shardings, out_shardings
        functools.update_wrapper(self, jitted, updated=())
        for s in tree_util.tree_leaves((in_shardings, out_shardings), is_leaf=is_placement):
            if s is not None:
                _check_one_process(as_sharding(s, "jit"), jitted)

    def __getattr__(self, name):
        return getattr(self._jitted, name)

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self):
        return repr(self._jitted)

    def __call__(self, *args, **kwargs):
        if self._in is not None:
            args = self._place_args(args)
        out = self._jitted(*args, **kwargs)
        if self._out is None:
            return out
        return _place(out, self._out, "jit(out_shardings=)")

    def _place_args(self, args):
        static = set(getattr(self._jitted, "_static_nums", ()))
        dyn = [i for i in range(len(args)) if i not in static]
        specs = self._in
        if not is_placement(specs) and isinstance(specs, (tuple, list)) and \
                len(specs) == len(dyn) != len(args):
            specs = [None if i in static else specs[dyn.index(i)] for i in range(len(args))]
        if is_placement(specs):
            specs = [None if i in static else specs for i in range(len(args))]
        placed = list(args)
        for i, (a, s) in enumerate(zip(args, _per_arg(specs, args))):
            if i not in static:
                placed[i] = _place(a, s, "jit(in_shardings=)", check_committed=True)
        return tuple(placed)


def _per_arg(specs, args):
    specs = list(specs)
    if len(specs) != len(args):
        raise errors.FuncgradValueError(
            f"jit: in_shardings has {len(specs)} entries for {len(args)} positional arguments"
            f"\n{errors.where(errors.user_frame(4))}\n  hint: give one sharding (or None) per "
            "argument, or one sharding for all.")
    return specs


def _place(tree, shardings, op, check_committed=False):
    leaves, treedef = tree_util.tree_flatten(tree)
    places = [shardings] * len(leaves) if is_placement(shardings) else \
        placements_for(shardings, tree, op)
    out = []
    for x, s in zip(leaves, places):
        if s is None:
            out.append(x)
            continue
        s = as_sharding(s, op)
        if isinstance(x, GlobalArray):
            raise _spans_processes(op)
        if isinstance(x, Tracer):
            s.shard_shape(get_aval(x).shape)
            out.append(x)
            continue
        own = getattr(x, "_sharding", None)
        if check_committed and own is not None and not own.is_equivalent_to(s, x.ndim):
            raise errors.FuncgradValueError(
                f"{op}: the sharding given for an argument, {s!r}, does not match the "
                f"sharding it was placed with, {own!r} (shape {tuple(x.shape)}), as JAX "
                f"refuses too\n{errors.where(errors.user_frame(4))}\n  hint: device_put it "
                "with the jit's sharding first, or leave that in_shardings entry None.")
        out.append(put(x, s) if hasattr(x, "shape") or not isinstance(x, (bool, int, float))
                   else x)
    return tree_util.tree_unflatten(treedef, out)


def _check_one_process(sharding, jitted):
    if not sharding.is_fully_addressable:
        raise _spans_processes(f"jit({getattr(jitted, '__name__', 'fun')})")


def _spans_processes(op):
    return errors.FuncgradValueError(
        f"{op}: a sharding over several processes' devices: funcgrad compiles per-process "
        f"programs and has no partitioner for a global one\n"
        f"{errors.where(errors.user_frame(4))}\n  hint: write the per-process step with "
        "fg.shard_map(fg.jit(step), mesh=mesh, in_specs=..., out_specs=...) or fg.pmap, "
        "which run data-parallel across processes (docs/tutorials/distributed.md).")
