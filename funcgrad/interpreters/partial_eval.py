"""Partial evaluation, dead-code elimination and closure conversion as IR -> IR functions.

`closure_convert` turns the values a program closes over (its consts) into its leading
inputs: every higher-order primitive (jit, cond, while, scan, custom_jvp/vjp, checkpoint)
holds its sub-programs in that const-free form and passes the values as operands.
`partial_eval_jaxpr` splits a program whose inputs are partly known into a *known* program
(computable now, from the known inputs) and an *unknown* program that finishes the job
later from the unknown inputs plus *residuals*, the known values it needs. This is how a
`jit` call is differentiated in reverse mode: the known part of its jvp program computes
the residuals, the unknown part is linear in the tangents and gets transposed.
`dce_jaxpr` drops equations whose outputs are not needed.

Rule table owned here:
  partial_eval_rules[p](eqn, in_unknowns) -> (known_eqn or None, unknown_eqn or None,
      out_unknowns) for primitives (calls) that split themselves instead of going wholly
      to the unknown side.
Equations of primitives marked `effectful = True` (debug printing) are kept by DCE unless
the caller asks to drop them. This module imports only funcgrad.core.
"""

import contextvars

from funcgrad.core import ClosedJaxpr, Jaxpr, Literal, Var, trace_to_jaxpr
from funcgrad.core.nesting import nests

partial_eval_rules = {}


def closure_convert(fun_or_jaxpr, consts_or_avals=None, name="closure"):
    """A const-free program and the values it closed over, to pass as its leading operands.

    Args:
        fun_or_jaxpr: a `ClosedJaxpr`; or a `Jaxpr` with `constvars` (then
            `consts_or_avals` are their values, as `Builder.to_jaxpr` returns them); or a
            flat function of tracers (then `consts_or_avals` are the input avals and it is
            traced under the builder name `name`).

    Returns:
        `(program, consts)`: a `ClosedJaxpr` without consts whose inputs are the constvars
        followed by the original inputs, and the list of the constvars' values. A program
        without constvars is returned as it is.

    Example:
        `{ lambda a:f32[3] ; b:f32[3]. let c = mul a b in (c,) }` becomes
        `{ lambda ; a:f32[3] b:f32[3]. let c = mul a b in (c,) }` and `[value of a]`.
    """
    if type(fun_or_jaxpr) is Jaxpr:
        j, consts = fun_or_jaxpr, consts_or_avals or []
    else:
        closed = fun_or_jaxpr if type(fun_or_jaxpr) is ClosedJaxpr else \
            trace_to_jaxpr(fun_or_jaxpr, consts_or_avals, name)
        if not closed.jaxpr.constvars:
            return closed, []
        j, consts = closed.jaxpr, closed.consts
    return (ClosedJaxpr(Jaxpr([], list(j.constvars) + list(j.invars), j.outvars, j.eqns), []),
            list(consts))


def is_effectful(eqn):
    """True when `eqn` has a side effect (its primitive sets `effectful = True`)."""
    return getattr(eqn.prim, "effectful", False)


# The splits made during one outermost `partial_eval_jaxpr` call, by (program, unknowns,
# instantiate): a rule that splits a sub-program twice (cond: once to learn which outputs
# are unknown, once to split) finds the inner splits made the first time, so nested
# sub-programs cost linear time, not 2^depth.
_splits = contextvars.ContextVar("partial_eval_splits", default=None)


def partial_eval_jaxpr(closed, in_unknowns, instantiate):
    """Split `closed` into a known and an unknown program.

    Args:
        closed: a ClosedJaxpr; its consts count as known.
        in_unknowns: one bool per input, True where the input is unknown.
        instantiate: a bool or one bool per output: force that output to come from the
            unknown program even when it is known (it then travels as a residual).

    Returns:
        `(known, unknown, out_unknowns, num_res)`: `known` maps the known inputs to the
        known outputs followed by `num_res` residuals; `unknown` maps the residuals
        followed by the unknown inputs to the unknown outputs; `out_unknowns` says which
        outputs `unknown` produces. An equation goes to the unknown side when one of its
        inputs is unknown (unless a `partial_eval_rules` entry splits it).

    Example:
        For `{ lambda ; a b. let c = sin a; d = mul c b in (d,) }` with `b` unknown:
        known is `{ lambda ; a. let c = sin a in (c,) }` (residual `c`), unknown is
        `{ lambda ; c b. let d = mul c b in (d,) }`.
    """
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(closed.jaxpr.outvars)
    key = (id(closed), tuple(in_unknowns), tuple(instantiate))
    splits = _splits.get()
    if splits is None:
        token = _splits.set({})
        try:
            return partial_eval_jaxpr(closed, in_unknowns, instantiate)
        finally:
            _splits.reset(token)
    hit = splits.get(key)
    if hit is None:  # (the entry keeps `closed` alive, so its id stays its own)
        hit = splits[key] = (closed, _partial_eval(closed, in_unknowns, instantiate))
    return hit[1]


@nests
def _partial_eval(closed, in_unknowns, instantiate):
    jaxpr = closed.jaxpr
    unknown = {v for v, u in zip(jaxpr.invars, in_unknowns) if u}
    known_eqns, unknown_eqns = [], []
    for eqn in jaxpr.eqns:
        ins_unknown = [type(a) is not Literal and a in unknown for a in eqn.invars]
        if not any(ins_unknown):
            known_eqns.append(eqn)
            continue
        rule = partial_eval_rules.get(eqn.prim)
        if rule is None:
            unknown_eqns.append(eqn)
            unknown.update(eqn.outvars)
            continue
        known_eqn, unknown_eqn, out_unknowns = rule(eqn, ins_unknown)
        known_eqns += [known_eqn] if known_eqn is not None else []
        unknown_eqns += [unknown_eqn] if unknown_eqn is not None else []
        unknown.update(v for v, u in zip(eqn.outvars, out_unknowns) if u)
    out_unknowns = [inst or (type(v) is not Literal and v in unknown)
                    for v, inst in zip(jaxpr.outvars, instantiate)]
    residuals = _residuals(unknown_eqns, jaxpr.outvars, out_unknowns, unknown)
    known = Jaxpr(jaxpr.constvars, [v for v, u in zip(jaxpr.invars, in_unknowns) if not u],
                  [v for v, u in zip(jaxpr.outvars, out_unknowns) if not u] + residuals,
                  known_eqns)
    fresh = {r: Var(r.aval) for r in residuals}
    rename = lambda a: fresh.get(a, a) if type(a) is Var else a
    unknown_jaxpr = Jaxpr(
        [], [fresh[r] for r in residuals] + [v for v, u in zip(jaxpr.invars, in_unknowns) if u],
        [rename(v) for v, u in zip(jaxpr.outvars, out_unknowns) if u],
        [e._replace(invars=[rename(a) for a in e.invars]) for e in unknown_eqns])
    return (ClosedJaxpr(known, list(closed.consts)), ClosedJaxpr(unknown_jaxpr, []),
            out_unknowns, len(residuals))


def _residuals(unknown_eqns, outvars, out_unknowns, unknown):
    """Known variables that the unknown side reads, in order of first use."""
    residuals, seen = [], set()

    def need(a):
        if type(a) is Var and a not in unknown and a not in seen:
            seen.add(a)
            residuals.append(a)
    for eqn in unknown_eqns:
        for a in eqn.invars:
            need(a)
    for v, u in zip(outvars, out_unknowns):
        if u:
            need(v)
    return residuals


def dce_jaxpr(jaxpr, used_outputs, prune_inputs=False, drop_effects=False):
    """Drop the equations that no kept output needs.

    Args:
        jaxpr: a Jaxpr.
        used_outputs: one bool per output; the outputs marked False are removed.
        prune_inputs: also remove the inputs nothing reads (constvars are kept).
        drop_effects: drop effectful equations too when nothing reads their outputs
            (used for derivative programs, whose forward pass already ran the effects).

    Returns:
        `(new_jaxpr, used_inputs)` with one bool per original input.

    Example:
        >>> new, used = dce_jaxpr(jaxpr, [True, False])  # keep only the first output
    """
    live = {v for v, u in zip(jaxpr.outvars, used_outputs) if u and type(v) is Var}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in live for v in eqn.outvars) or (is_effectful(eqn) and not drop_effects):
            kept.append(eqn)
            live.update(a for a in eqn.invars if type(a) is Var)
    used_inputs = [v in live for v in jaxpr.invars]
    invars = [v for v, u in zip(jaxpr.invars, used_inputs) if u] if prune_inputs \
        else list(jaxpr.invars)
    outvars = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    return Jaxpr(list(jaxpr.constvars), invars, outvars, kept[::-1]), used_inputs


__all__ = ["closure_convert", "dce_jaxpr", "is_effectful", "partial_eval_jaxpr",
           "partial_eval_rules"]
