"""Helpers shared by the control-flow primitives: tracing user functions into closure-converted
sub-programs, reordering their inputs and outputs, joining the consts of several branches and
hoisting loop invariants. The sub-program transforms themselves (closure conversion, jvp,
batching, transposition through partial evaluation) live in the interpreters.

A sub-program is a `ClosedJaxpr` without consts: the values a traced function closes over
become its leading inputs and are passed as explicit operands of the equation.
Imports the core, the interpreters and lax; nothing from compiler or backends.
"""

import numpy as np

from funcgrad import errors
from funcgrad.core import (
    Array,
    ArrayBase,
    ClosedJaxpr,
    Jaxpr,
    Var,
    eval_jaxpr,
    get_aval,
    set_trace,
    to_array,
)
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters import partial_eval as pe
from funcgrad.tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten

# --- values and avals ----------------------------------------------------------------------------


def as_operand(x):
    """A funcgrad value for a pytree leaf (Python scalars and numpy arrays become Arrays)."""
    if isinstance(x, ArrayBase):
        return x
    try:
        return to_array(x)
    except TypeError as e:
        raise errors.FuncgradTypeError(f"{e}\n{errors.where()}") from None


def as_array(v, aval):
    """An eagerly computed value (Array or numpy scalar from a literal) as an Array."""
    if type(v) is Array and v.dtype == aval.dtype:
        return v
    return Array(np.asarray(getattr(v, "_value", v), aval.dtype), aval.weak_type)


def batched_aval(aval, size):
    return aval.update(shape=(size,) + tuple(aval.shape))


def same_type(a, b):
    return a.shape == b.shape and a.dtype == b.dtype


def split(xs, *sizes):
    """`xs` cut into consecutive pieces of `sizes` plus the rest."""
    out, i = [], 0
    for n in sizes:
        out.append(list(xs[i:i + n]))
        i += n
    out.append(list(xs[i:]))
    return out


def path_text(prefix, path):
    return prefix + keystr(path)


# --- tracing user functions ---------------------------------------------------------------------


def trace_tree_fun(fun, in_tree, in_avals, name):
    """Trace a pytree function of flat inputs `in_avals` (structure `in_tree`, a tuple of
    arguments). Returns (program, consts, output pytree, output tree structure)."""
    store = {}

    def flat(*leaves):
        out = fun(*tree_unflatten(in_tree, list(leaves)))
        store["out"] = out
        out_leaves, store["tree"] = tree_flatten(out)
        return [as_operand(o) for o in out_leaves]
    program, consts = pe.closure_convert(flat, in_avals, name)
    return program, consts, store["out"], store["tree"]


def eval_eagerly(closed, args):
    """Evaluate a const-free program op by op with no current trace; Arrays out."""
    with set_trace(None):
        outs = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    return [as_array(o, a) for o, a in zip(outs, closed.out_avals)]


def leaf_paths(tree, prefix):
    """The path text of each leaf of a tree structure, e.g. `carry['h']`."""
    dummy = tree_unflatten(tree, list(range(tree.num_leaves)))
    return [path_text(prefix, p) for p, _ in tree_flatten_with_path(dummy)[0]]


# --- reordering programs --------------------------------------------------------------------------


def permute(closed, in_order, out_order=None):
    """`closed` with its inputs (and outputs) listed in the order of the index lists."""
    j = closed.jaxpr
    outs = j.outvars if out_order is None else [j.outvars[i] for i in out_order]
    return ClosedJaxpr(Jaxpr([], [j.invars[i] for i in in_order], list(outs), j.eqns),
                       closed.consts)


def dce_outputs(closed, used):
    """`closed` keeping only the outputs marked in `used` (inputs unchanged)."""
    jaxpr, _ = pe.dce_jaxpr(closed.jaxpr, list(used), drop_effects=True)
    return ClosedJaxpr(jaxpr, closed.consts)


def join_consts(programs):
    """Programs `(program_i, consts_i)` whose leading inputs are their own consts become
    programs that all take the same consts first (each value once, by identity), then their
    other inputs: `(programs, consts)`."""
    unique, slot_of = [], {}
    for _, consts in programs:
        for c in consts:
            if id(c) not in slot_of:
                slot_of[id(c)] = len(unique)
                unique.append(c)
    out = []
    for program, consts in programs:
        j = program.jaxpr
        slots = [None] * len(unique)
        for v, c in zip(j.invars, consts):
            slots[slot_of[id(c)]] = v
        invars = [v if v is not None else Var(get_aval(c)) for v, c in zip(slots, unique)]
        out.append(ClosedJaxpr(Jaxpr([], invars + list(j.invars[len(consts):]), j.outvars,
                                     j.eqns), []))
    return out, unique


def hoist_invariants(program, consts, num_consts):
    """Loop-invariant code motion for a loop body whose first `num_consts` inputs are the
    loop's consts (values `consts`): equations that read only consts, literals and each
    other run once, now, in the current trace, and their results become consts.

    Returns `(program, consts)` with the consts the new body reads (unused ones dropped).
    """
    j = program.jaxpr
    invariant = set(j.invars[:num_consts])
    hoisted, kept = [], []
    for e in j.eqns:
        if not pe.is_effectful(e) and all(type(a) is not Var or a in invariant
                                          for a in e.invars):
            hoisted.append(e)
            invariant.update(e.outvars)
        else:
            kept.append(e)
    if not hoisted:
        return program, list(consts)
    read = {a for e in kept for a in e.invars} | set(j.outvars)
    computed = [v for e in hoisted for v in e.outvars if v in read]
    values = eval_jaxpr(Jaxpr([], j.invars[:num_consts], computed, hoisted), [], *consts)
    pairs = [(v, c) for v, c in zip(j.invars[:num_consts], consts) if v in read]
    pairs += list(zip(computed, values))
    body = Jaxpr([], [v for v, _ in pairs] + list(j.invars[num_consts:]), j.outvars, kept)
    return ClosedJaxpr(body, []), [c for _, c in pairs]


# --- tangents and batch axes of operands -------------------------------------------------------


def tangent_operands(tangents, mask):
    """The tangents marked in `mask`, symbolic zeros instantiated."""
    return [ad.instantiate(t) for t, m in zip(tangents, mask) if m]


def nonzero_mask(tangents):
    return [type(t) is not ad.Zero for t in tangents]


def tangents_out(values, mask, avals):
    """Tangent outputs: the next of `values` where `mask` is set, else a symbolic zero."""
    it = iter(values)
    return [next(it) if m else ad.Zero(a) for m, a in zip(mask, avals)]


def mapped(dims):
    """One bool per batch dim: whether it is mapped."""
    return [d is not batching.not_mapped for d in dims]


def front_dims(batched):
    """Batch dims for values batched along axis 0 where `batched` is set."""
    return [0 if b else batching.not_mapped for b in batched]


def to_front(x, d):
    return x if d is batching.not_mapped else batching.moveaxis(x, d, 0)


def zeros(aval):
    return ad.instantiate(ad.Zero(aval))

