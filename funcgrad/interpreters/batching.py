"""vmap as an IR transform: batching rules and the batch interpreter.

`batch_eval` walks a jaxpr traced for one example and binds each equation's batched
form in the current trace, using the rule table owned here:
  batch_rules[p](args, dims, **params) -> (outs, out_dims)
where each dim is an int (the mapped axis of that value) or `not_mapped` (None).
Definers cover the families: `defvectorized` (unary elementwise), `defbroadcasting`
(n-ary elementwise), `defreducer` (ops with an `axes` parameter), `defunmapped` (checks
whose outputs do not depend on the examples). `batch_jaxpr` batches a closed program: the
one home of that transform for every higher-order primitive.
Collectives (`axis_primitives`, see funcgrad.lax.parallel) that name the axis being vmapped
(`current_axis()`, bound by `batch_axis` while `vmap(..., axis_name=...)` runs `batch_eval`)
go through their rule even when no operand is mapped.
Imports core and the other interpreters only: the lax operations it needs (`transpose`,
`broadcast_in_dim`) come from the `funcgrad.core.ops` registry.
"""

import contextlib
import contextvars

from funcgrad import errors
from funcgrad.core import Literal, get_aval, ops, source_context, trace_to_jaxpr
from funcgrad.interpreters.ad import add_any_p

batch_rules = {}
not_mapped = None
axis_primitives = set()
_batch_axis = contextvars.ContextVar("funcgrad_batch_axis", default=None)


def current_axis():
    """`(name, size)` of the named axis being vmapped now, or None."""
    return _batch_axis.get()


@contextlib.contextmanager
def batch_axis(name, size):
    """Make `name` (None: an unnamed vmap) the axis being vmapped inside the block."""
    token = _batch_axis.set(None if name is None else (name, size))
    try:
        yield
    finally:
        _batch_axis.reset(token)


def _names_current_axis(eqn):
    cur = _batch_axis.get()
    return cur is not None and eqn.prim in axis_primitives and cur[0] in eqn.params["axis_name"]


def moveaxis(x, src, dst):
    """Move axis `src` of `x` to `dst` with a lax.transpose (no-op when equal)."""
    if src == dst:
        return x
    nd = get_aval(x).ndim
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return ops.transpose(x, tuple(perm))


def bdim_at_front(x, dim, size):
    """`x` with its batch axis first; an unbatched value is broadcast to `size`."""
    if dim is not_mapped:
        aval = get_aval(x)
        return ops.broadcast_in_dim(x, (size,) + aval.shape, tuple(range(1, aval.ndim + 1)))
    return moveaxis(x, dim, 0)


def defvectorized(prim):
    """Unary elementwise: the batch axis stays where it is."""
    def rule(args, dims, **params):
        return prim.bind(*args, **params), dims[0]
    batch_rules[prim] = rule


def batch_size(args, dims):
    """The size of the batch axis among `args` (at least one is batched)."""
    for x, d in zip(args, dims):
        if d is not not_mapped:
            return get_aval(x).shape[d]
    raise errors.FuncgradInternalError("batching rule called with no batched argument")


def example_shape(x, d):
    """The shape of one example of `x` (batched along `d`, or unbatched when None)."""
    s = list(get_aval(x).shape)
    if d is not not_mapped:
        del s[d]
    return tuple(s)


def defbroadcasting(prim):
    """N-ary elementwise with rank-0 operand broadcasting: batch axes are moved to the front;
    unbatched full-rank operands are broadcast; unbatched scalars stay scalars."""
    def rule(args, dims, **params):
        size = batch_size(args, dims)
        shape = max((example_shape(x, d) for x, d in zip(args, dims)), key=len)
        full = (size,) + shape
        out = []
        for x, d in zip(args, dims):
            nd = get_aval(x).ndim
            if d is not_mapped:
                out.append(x if nd == 0 else ops.broadcast_in_dim(x, full, tuple(range(1, nd + 1))))
            elif nd == 1 and shape:
                out.append(ops.broadcast_in_dim(x, full, (0,)))
            else:
                out.append(moveaxis(x, d, 0))
        return prim.bind(*out, **params), 0
    batch_rules[prim] = rule


def defreducer(prim):
    """Ops with an `axes` parameter over an operand: axes shift past the batch axis (moved
    to the front)."""
    def rule(args, dims, *, axes, **params):
        x = moveaxis(args[0], dims[0], 0)
        rest = [bdim_at_front(a, d, get_aval(x).shape[0]) for a, d in zip(args[1:], dims[1:])]
        out = prim.bind(x, *rest, axes=tuple(a + 1 for a in axes), **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    batch_rules[prim] = rule


def defunmapped(prim):
    """`prim` takes batched operands as they are and its outputs are not mapped (a check or
    an effect whose result does not depend on the examples)."""
    def rule(args, dims, **params):
        out = prim.bind(*args, **params)
        return out, ([not_mapped] * len(out) if prim.multiple_results else not_mapped)
    batch_rules[prim] = rule


def _add_any_batch(args, dims):
    size = batch_size(args, dims)
    return add_any_p.bind(*[bdim_at_front(x, d, size) for x, d in zip(args, dims)]), 0


batch_rules[add_any_p] = _add_any_batch


def batch_eval(jaxpr, consts, args, dims):
    """Evaluate `jaxpr` on batched `args` (mapped along `dims`): (outs, out_dims)."""
    env = {}

    def read(a):
        return (a.val, not_mapped) if type(a) is Literal else env[a]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = (c, not_mapped)
    for v, x, d in zip(jaxpr.invars, args, dims):
        env[v] = (x, d)
    for eqn in jaxpr.eqns:
        xs, ds = zip(*[read(a) for a in eqn.invars]) if eqn.invars else ((), ())
        with source_context(eqn.source):
            if all(d is not_mapped for d in ds) and not _names_current_axis(eqn):
                outs = eqn.prim.bind(*xs, **eqn.params)
                o_dims = ([not_mapped] * len(outs) if eqn.prim.multiple_results
                          else not_mapped)
            else:
                rule = batch_rules.get(eqn.prim)
                if rule is None:
                    raise errors.FuncgradError(
                        f"vmap is not implemented for primitive `{eqn.prim.name}` (no rule in "
                        f"batch_rules)\n{errors.where(eqn.source)}")
                outs, o_dims = rule(list(xs), list(ds), **eqn.params)
        if eqn.prim.multiple_results:
            for v, o, d in zip(eqn.outvars, outs, o_dims):
                env[v] = (o, d)
        else:
            env[eqn.outvars[0]] = (outs, o_dims)
    res = [read(v) for v in jaxpr.outvars]
    return [r[0] for r in res], [r[1] for r in res]


def batch_jaxpr(closed, in_dims, size, instantiate=False):
    """IR -> IR: `closed` batched along the input axes `in_dims` (ints or `not_mapped`).

    Args:
        closed: a ClosedJaxpr (consts allowed) traced for one example.
        in_dims: one per input: its batch axis, or `not_mapped`.
        size: the batch size.
        instantiate: a bool or one per output: map that output even when it does not depend
            on the batch (it is broadcast).

    Returns:
        `(batched, out_dims)`: `batched` (a ClosedJaxpr, possibly with consts; see
        `partial_eval.closure_convert`) takes the batched inputs; each output is batched along
        axis 0 (`out_dims` 0) or not mapped (`not_mapped`).

    Example:
        For `{ lambda ; a:f32[3]. let b = sin a in (b,) }`, `in_dims=[1]` and `size=2`:
        `{ lambda ; a:f32[3,2]. let b = sin a; c = transpose[permutation=(1, 0)] b in (c,) }`
        and `out_dims=[0]`.
    """
    n_out = len(closed.out_avals)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    out_dims = []

    def fun(*args):
        outs, o_dims = batch_eval(closed.jaxpr, closed.consts, list(args), list(in_dims))
        out_dims[:] = [0 if d is not not_mapped or i else not_mapped for d, i in zip(o_dims, inst)]
        return [o if d is not_mapped else bdim_at_front(o, od, size)
                for o, od, d in zip(outs, o_dims, out_dims)]
    avals = [a if d is not_mapped else a.update(shape=a.shape[:d] + (size,) + a.shape[d:])
             for a, d in zip(closed.in_avals, in_dims)]
    return trace_to_jaxpr(fun, avals, "vmap"), out_dims
