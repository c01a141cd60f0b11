"""Automatic differentiation as IR transforms: jvp, linearize, transpose, vjp.

How it works (see DESIGN.md): `vjp` traces the function with a define-by-run
`Builder` (values computed as it goes, so Python control flow works); `linearize`
replays that program through the jvp rules inside a second builder whose tangent
inputs have no value, so every recorded equation with an unknown input is linear and
every other one is a known residual; `backward_pass` walks the linear equations in
reverse through the transpose rules. Each step binds primitives in the current trace,
so the same code runs eagerly, under jit, and under another grad.

Rule tables owned here:
  jvp_rules[p](primals, outs, tangents, **params) -> tangent out (list if multi-result);
      `outs` are the already-computed primal outputs, tangents may be `Zero`.
  jvp_primal_rules[p](primals, tangents, **params) -> (outs, tangent outs), optional, for
      multiple-result primitives whose jvp computes the primal outputs too (loops): used
      where those are not known yet, so the loop is bound once, not once more for them.
  transpose_rules[p](ct, *args, **params) -> list with one cotangent (or None) per arg;
      linear args arrive as `UndefinedPrimal(aval)`, ct may be `Zero` for multi-results.
Sub-program transforms, the one home for every higher-order primitive's rules:
`jvp_jaxpr` (jvp of a closed program), `transpose_jaxpr` (of a linear one) and
`MixedTranspose` / `transpose_mixed` (of a program with known and linear inputs, through
partial evaluation). Imports core and the other interpreters only: the lax operations it
needs (`full`) come from the `funcgrad.core.ops` registry.
"""

import contextvars
import functools
import weakref

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import (
    Builder,
    ClosedJaxpr,
    Eqn,
    Jaxpr,
    Literal,
    Primitive,
    ShapedArray,
    Tracer,
    Var,
    current_source,
    current_trace,
    eval_jaxpr,
    get_aval,
    new_builder,
    ops,
    source_context,
    trace_to_jaxpr,
)
from funcgrad.interpreters import partial_eval as pe

jvp_rules = {}
jvp_primal_rules = {}
transpose_rules = {}


class Zero:
    """A symbolic zero tangent/cotangent of abstract value `aval` (never materialized)."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval})"


class UndefinedPrimal:
    """A linear input of an equation being transposed (its value is not known)."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval})"


def is_undefined(x):
    return type(x) is UndefinedPrimal


def aval_of(x):
    return x.aval if type(x) in (Zero, UndefinedPrimal) else get_aval(x)


def differentiable(aval):
    return dtypes.is_inexact(aval.dtype)


def instantiate(t):
    """A real array for a tangent that may be a symbolic `Zero`."""
    if type(t) is Zero:
        return ops.full(t.aval.shape, 0, t.aval.dtype)
    return t


_instantiate = instantiate  # for the functions whose `instantiate` parameter shadows it


def add_tangents(a, b):
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    return add_any_p.bind(a, b)


# --- add_any: accumulation of tangents and cotangents ---------------------------------------

add_any_p = Primitive("add_any")


@add_any_p.def_impl
@functools.wraps(np.add)  # the backends see through it to np.add (a fusible ufunc)
def _add_any_impl(x, y):
    with np.errstate(all="ignore"):  # IEEE sums without warnings (inf - inf is nan), as add
        return np.add(x, y)


@add_any_p.def_abstract_eval
def _add_any_abstract(x, y):
    if x.shape != y.shape or x.dtype != y.dtype:
        raise errors.FuncgradInternalError(f"add_any of {x} and {y}")
    return ShapedArray(x.shape, x.dtype, x.weak_type and y.weak_type)


jvp_rules[add_any_p] = lambda primals, out, tangents: add_tangents(*tangents)
transpose_rules[add_any_p] = lambda ct, x, y: [ct, ct]


# --- definers -------------------------------------------------------------------------------

def defjvp(prim, *fns):
    """Register a jvp from one function per input: `fn(t, *primals, out=..., **params)`
    returns that input's contribution to the output tangent (None: not differentiable)."""
    def rule(primals, out, tangents, **params):
        acc = Zero(get_aval(out))
        for fn, t in zip(fns, tangents):
            if fn is not None and type(t) is not Zero:
                acc = add_tangents(acc, fn(t, *primals, out=out, **params))
        return acc
    jvp_rules[prim] = rule


def defjvp_zero(prim):
    """Outputs of `prim` carry zero tangents (integer, boolean, comparison outputs)."""
    def rule(primals, out, tangents, **params):
        if prim.multiple_results:
            return [Zero(get_aval(o)) for o in out]
        return Zero(get_aval(out))
    jvp_rules[prim] = rule


def deflinear(prim, transpose_fn):
    """`prim` is linear in all its inputs: its jvp is itself applied to the tangents."""
    def rule(primals, out, tangents, **params):
        if all(type(t) is Zero for t in tangents):
            return Zero(get_aval(out))
        return prim.bind(*[instantiate(t) for t in tangents], **params)
    jvp_rules[prim] = rule
    transpose_rules[prim] = transpose_fn


# --- jvp ------------------------------------------------------------------------------------

def _missing(table, prim, transform):
    raise errors.FuncgradError(
        f"{transform} is not implemented for primitive `{prim.name}` (no rule in the "
        f"{table} table)\n{errors.where()}")


def jvp_eval(jaxpr, consts, primals, tangents, known=None, recompute=False):
    """Push tangents through `jaxpr` with the jvp rules, binding in the current trace.

    With `known` (var -> primal value, e.g. from a define-by-run trace) primal values are
    read from it instead of recomputed. With `recompute` too, a loop with nonzero tangents
    and every equation reading its outputs bind again (their primal outputs come from the
    loop's jvp), effects excepted: see `jvp_replay`. Returns (primal outs, tangent outs).
    """
    penv, tenv = {}, {}
    known = known or {}

    def read_p(a):
        if type(a) is Literal:
            return a.val
        v = penv.get(a)
        return known[a] if v is None else v

    def read_t(a):
        t = None if type(a) is Literal else tenv.get(a)
        return Zero(a.aval) if t is None else t

    for v, x in zip(jaxpr.constvars, consts):
        penv[v] = x
    for v, x, t in zip(jaxpr.invars, primals, tangents):
        penv[v], tenv[v] = x, t
    fresh = set()  # with `recompute`: outputs bound again (loops and what reads them)
    for eqn in jaxpr.eqns:
        ps = [read_p(a) for a in eqn.invars]
        ts = [read_t(a) for a in eqn.invars]
        multi = eqn.prim.multiple_results
        if not eqn.outvars and known:
            continue  # an effect already performed by the define-by-run trace
        loop = eqn.prim in jvp_primal_rules and any(type(t) is not Zero for t in ts)
        again = recompute and not eqn.prim.effectful and (loop or any(
            type(a) is not Literal and a in fresh for a in eqn.invars))
        if again:
            fresh.update(eqn.outvars)
        with source_context(eqn.source):
            t_out = None
            if eqn.outvars and eqn.outvars[0] in known and not again:
                outs = [known[v] for v in eqn.outvars]
            elif loop:
                outs, t_out = jvp_primal_rules[eqn.prim](ps, ts, **eqn.params)
            else:
                outs = eqn.prim.bind(*ps, **eqn.params)
                outs = outs if multi else [outs]
            for v, o in zip(eqn.outvars, outs):
                penv[v] = o
            if t_out is None:
                if all(type(t) is Zero for t in ts):
                    continue
                rule = jvp_rules.get(eqn.prim) or _missing("jvp_rules", eqn.prim, "jvp")
                t_out = rule(ps, outs if multi else outs[0], ts, **eqn.params)
        for v, t in zip(eqn.outvars, t_out if multi else [t_out]):
            if type(t) is not Zero:
                tenv[v] = t
    return [read_p(v) for v in jaxpr.outvars], [read_t(v) for v in jaxpr.outvars]


def jvp_replay(jaxpr, known, outs, tangents):
    """(primal outs, tangent outs) of a `trace_known` trace: `jaxpr`, its `known` values
    and primal `outs`, for input `tangents`.

    Eagerly (or define-by-run) the primal values are read from `known`, and a loop's jvp
    rule binds the loop once more for its tangents: forward mode keeps no residuals, so
    its memory does not grow with the loop's length. Where the bindings are only recorded
    for a compiler (anywhere under jit, `Builder.compiled`), a loop and what reads it are
    bound again instead: the loop's jvp gives its primal outputs too, the trace's own loop
    is dead code the compiler drops, and the loop runs once.
    """
    trace, recompute = current_trace(), False
    while isinstance(trace, Builder) and not recompute:  # below a jit, every value is abstract
        recompute, trace = trace.compiled, trace.parent
    primals = [known[v] for v in jaxpr.invars]
    again, t_outs = jvp_eval(jaxpr, [], primals, tangents, known, recompute=recompute)
    if recompute:  # a literal output is the trace's value (an Array), not the literal's
        outs = [o if type(v) is Literal else a for v, o, a in zip(jaxpr.outvars, outs, again)]
    return outs, t_outs


def jvp_jaxpr(closed, nonzeros, instantiate):
    """IR -> IR: the jvp of `closed` for the tangent inputs marked in `nonzeros`.

    Args:
        closed: a ClosedJaxpr (consts allowed).
        nonzeros: one bool per input: whether it has a tangent input (else a symbolic zero).
        instantiate: a bool or one per output: give that output a tangent output even when
            it is symbolically zero (then it is zeros).

    Returns:
        `(jvp, out_nonzeros)`: `jvp` (a ClosedJaxpr, possibly with consts; see
        `partial_eval.closure_convert`) maps (primals..., nonzero tangents...) to
        (outs..., nonzero tangent outs...); `out_nonzeros` marks the outputs with one.

    Example:
        For `{ lambda ; a. let b = sin a in (b,) }` and `nonzeros=[True]`, `jvp` is
        `{ lambda ; a b. let c = sin a; d = cos a; e = mul b d in (c, e) }`.
    """
    n, n_out = len(closed.in_avals), len(closed.out_avals)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    out_nonzeros = []

    def fun(*args):
        it = iter(args[n:])
        ts = [next(it) if nz else Zero(a) for nz, a in zip(nonzeros, closed.in_avals)]
        outs, t_outs = jvp_eval(closed.jaxpr, closed.consts, list(args[:n]), ts)
        out_nonzeros[:] = [type(t) is not Zero or i for t, i in zip(t_outs, inst)]
        return list(outs) + [_instantiate(t) for t, nz in zip(t_outs, out_nonzeros) if nz]
    avals = list(closed.in_avals) + [tangent_aval(a)
                                     for a, nz in zip(closed.in_avals, nonzeros) if nz]
    return trace_to_jaxpr(fun, avals, "jvp"), out_nonzeros


def tangent_aval(aval):
    return ShapedArray(aval.shape, aval.dtype, aval.weak_type, aval.vma)


# --- linearize and transpose -----------------------------------------------------------------

def trace_known(fun, primals, name, kept=None):
    """Trace `fun` (flat) define-by-run at `primals`: (jaxpr, known values, primal outs).

    With `kept` (a dict), the trace is one that `linearizing` recognizes: higher-order
    primitives bound in it may keep residuals there for their jvp rules (`keep_residuals`).
    """
    with new_builder(name, compute_known=True) as b:
        if kept is not None:
            _linearizing[b] = kept
        ins = [b.new_input(get_aval(p), p) for p in primals]
        outs = fun(*ins)
        outs = [b.lift(o) for o in outs]
        jaxpr, _ = b.to_jaxpr(outs)
    return jaxpr, b.known, [o.val for o in outs]


def linearize_flat(fun, primals):
    """(primal outs, linear jaxpr, its known values, tangent-out mask) at `primals`."""
    parent = current_trace()
    kept = {}
    jaxpr, known, outs = trace_known(fun, primals, "linearize", kept)
    with new_builder("linearize", compute_known=True, parent=parent) as b:
        t_ins = [b.new_input(tangent_aval(v.aval)) if differentiable(v.aval) else Zero(v.aval)
                 for v in jaxpr.invars]
        token = _replaying.set(_replaying.get() + (kept,))
        try:
            _, t_outs = jvp_eval(jaxpr, [], [known[v] for v in jaxpr.invars], t_ins, known)
        finally:
            _replaying.reset(token)
            kept.clear()  # residuals no jvp rule took (their outputs had zero tangents)
        nonzero = [type(t) is not Zero for t in t_outs]
        lin, _ = b.to_jaxpr([b.lift(t) for t, nz in zip(t_outs, nonzero) if nz])
        lin_invars = [t.atom if type(t) is Tracer else None for t in t_ins]
    return outs, Linearized(lin, b.known, lin_invars, nonzero, [v.aval for v in jaxpr.outvars])


# --- one forward pass for value and residuals ----------------------------------------------------
# A loop bound in the define-by-run trace of `linearize_flat` would run twice: once for its value
# there, once more when its transpose recomputes the residuals. Instead it runs the known half
# of its own jvp now (values and residuals in one pass, as JAX's linearize does by partial
# evaluation), records itself with `record_known` and keeps the linear half's inputs with
# `keep_residuals`; its jvp rule then takes them (`take_residuals`) and binds only the linear
# half. Entries live while `linearize_flat` replays the trace.
_linearizing = weakref.WeakKeyDictionary()  # builder -> {id(first output): (output, kept)}
_replaying = contextvars.ContextVar("funcgrad_replaying", default=())  # those dicts, while
# `linearize_flat` replays their traces (innermost last)


def linearizing(trace):
    """Whether `trace` is the define-by-run trace of `linearize_flat` (grad, vjp, linearize,
    jacrev) with known values, where a loop may keep residuals (see `keep_residuals`)."""
    return trace is not None and trace in _linearizing and not trace.typed


def record_known(b, prim, args, params, out_vals):
    """Record in the define-by-run trace `b` one `prim` equation of `args` whose outputs were
    already computed one level up (`out_vals`); returns its output tracers."""
    atoms = [b.lift(a).atom for a in args]
    out_avals = prim.abstract_eval(*[get_aval(a) for a in args], **params)
    outvars = [Var(a) for a in (out_avals if prim.multiple_results else [out_avals])]
    b.eqns.append(Eqn(prim, atoms, outvars, params, current_source()))
    outs = []
    for v, val in zip(outvars, out_vals):
        b.known[v] = val
        outs.append(Tracer(b, v.aval, v, val))
    return outs if prim.multiple_results else outs[0]


def keep_residuals(b, out, kept):
    """Keep `kept` for the jvp rule that will see `out` (an output value) under `linearize`."""
    _linearizing[b][id(out)] = (out, kept)


def take_residuals(out):
    """What `keep_residuals` kept for the output value `out`, removed (None if nothing)."""
    for store in reversed(_replaying.get()):
        hit = store.pop(id(out), None)
        if hit is not None and hit[0] is out:
            return hit[1]
    return None


class Linearized:
    """A linear program in tangents plus the known residual values it reads."""

    def __init__(self, jaxpr, known, in_vars, out_nonzero, out_avals):
        self.jaxpr, self.known, self.in_vars = jaxpr, known, in_vars
        self.out_nonzero, self.out_avals = out_nonzero, out_avals

    def transpose(self, cts):
        """Cotangents of the tangent inputs for output cotangents `cts` (flat list)."""
        cts = [ct for ct, nz in zip(cts, self.out_nonzero) if nz]
        got = backward_pass(self.jaxpr, self.known, cts)
        env = dict(zip(self.jaxpr.invars, got))
        return [env.get(v, Zero(v.aval)) if v is not None else None for v in self.in_vars]

    def apply(self, tangents):
        """Tangent outputs for tangent inputs (forward evaluation of the linear program)."""
        env = {v: t for v, t in zip(self.in_vars, tangents) if v is not None}
        outs = _eval_with_known(self.jaxpr, self.known, env)
        it = iter(outs)
        return [next(it) if nz else Zero(a) for nz, a in zip(self.out_nonzero, self.out_avals)]


def _eval_with_known(jaxpr, known, env):
    env = dict(env)

    def read(a):
        if type(a) is Literal:
            return a.val
        v = env.get(a)
        if v is None:
            v = known.get(a)
        if v is None:
            return Zero(a.aval)
        return v

    for eqn in jaxpr.eqns:
        if not eqn.outvars or eqn.outvars[0] in known:
            continue
        args = [instantiate(read(a)) for a in eqn.invars]
        with source_context(eqn.source):
            outs = eqn.prim.bind(*args, **eqn.params)
        for v, o in zip(eqn.outvars, outs if eqn.prim.multiple_results else [outs]):
            env[v] = o
    return [read(v) for v in jaxpr.outvars]


def backward_pass(jaxpr, known, cts_out, consts=(), args=None):
    """Transpose the linear part of `jaxpr`: cotangents of its inputs.

    A variable is linear when it is not in `known` (var -> value). With `args` (a list with
    `UndefinedPrimal` for linear inputs) the non-linear equations are evaluated first.
    """
    known = dict(known)
    for v, c in zip(jaxpr.constvars, consts):
        known[v] = c
    if args is not None:
        for v, a in zip(jaxpr.invars, args):
            if not is_undefined(a):
                known[v] = a
        _forward_known(jaxpr, known)
    ct_env = {}

    def write_ct(v, ct):
        if type(v) is Literal or v in known or ct is None or type(ct) is Zero:
            return
        prev = ct_env.get(v)
        ct_env[v] = ct if prev is None else add_any_p.bind(prev, ct)

    def read(a):
        if type(a) is Literal:
            return a.val
        return known[a] if a in known else UndefinedPrimal(a.aval)

    for v, ct in zip(jaxpr.outvars, cts_out):
        write_ct(v, ct)
    for eqn in reversed(jaxpr.eqns):
        if not eqn.outvars or eqn.outvars[0] in known:
            continue
        cts = [_or_zero(ct_env.pop(v, None), v) for v in eqn.outvars]
        if all(type(c) is Zero for c in cts):
            continue
        rule = transpose_rules.get(eqn.prim) or _missing("transpose_rules", eqn.prim,
                                                         "reverse-mode differentiation")
        with source_context(eqn.source):
            cts_in = rule(cts if eqn.prim.multiple_results else cts[0],
                          *[read(a) for a in eqn.invars], **eqn.params)
        for a, ct in zip(eqn.invars, cts_in):
            write_ct(a, ct)
    return [_or_zero(ct_env.get(v), v) for v in jaxpr.invars]


def _or_zero(x, v):
    return Zero(v.aval) if x is None else x


def _forward_known(jaxpr, known):
    for eqn in jaxpr.eqns:
        if all(type(a) is Literal or a in known for a in eqn.invars):
            args = [a.val if type(a) is Literal else known[a] for a in eqn.invars]
            with source_context(eqn.source):
                outs = eqn.prim.bind(*args, **eqn.params)
            for v, o in zip(eqn.outvars, outs if eqn.prim.multiple_results else [outs]):
                known[v] = o


def transpose_jaxpr(closed, linear_mask):
    """IR -> IR: (non-linear inputs..., output cts...) -> cotangents of the linear inputs."""
    jaxpr = closed.jaxpr
    nonlin_avals = [v.aval for v, lin in zip(jaxpr.invars, linear_mask) if not lin]
    lin_avals = [v.aval for v, lin in zip(jaxpr.invars, linear_mask) if lin]

    def fun(*args):
        it = iter(args[:len(nonlin_avals)])
        prim_args = [UndefinedPrimal(v.aval) if lin else next(it)
                     for v, lin in zip(jaxpr.invars, linear_mask)]
        cts = list(args[len(nonlin_avals):])
        got = backward_pass(jaxpr, {}, cts, closed.consts, prim_args)
        return [instantiate(c) for c, lin in zip(got, linear_mask) if lin]
    out = trace_to_jaxpr(fun, nonlin_avals + [v.aval for v in jaxpr.outvars], "transpose")
    assert [a.shape for a in out.out_avals] == [a.shape for a in lin_avals]
    return out


# --- transposing a program with known and linear inputs ------------------------------------------

class MixedTranspose:
    """The transpose of a program some of whose inputs are linear (undefined) and the others
    known (a jvp program recorded under linearize), through partial evaluation: a known
    program computes the residuals, a linear program (transposed once, here) maps the
    residuals and the cotangents to the cotangents of the linear inputs. Higher-order
    primitives build it once per (program, undefined, ct_nonzero) and `apply` it: jit binds
    a compiled call of each part, cond evaluates them inside its branches.

    Attributes:
        known, known_consts: a const-free program from the known inputs it reads
            (`known_used`) to the residuals that are not such inputs, and its consts.
        res_from_input: per residual, its index among those inputs, or None (computed).
        ct_used: one bool per output: whether its cotangent is an input of `transposed`.
        transposed, t_consts: a const-free program from (residuals, used cotangents) to the
            cotangents of the undefined inputs, and its consts.
    """

    def __init__(self, closed, undefined, ct_nonzero):
        known, unknown, out_unknowns, num_res = pe.partial_eval_jaxpr(closed, undefined, False)
        n_known_outs = len(known.jaxpr.outvars) - num_res
        # Cotangents of known outputs cannot reach linear inputs: only residuals are needed.
        kj, self.known_used = pe.dce_jaxpr(known.jaxpr, [False] * n_known_outs + [True] * num_res,
                                           prune_inputs=True, drop_effects=True)
        self.res_from_input = [kj.invars.index(r) if r in kj.invars else None for r in kj.outvars]
        computed = [r for r, i in zip(kj.outvars, self.res_from_input) if i is None]
        kj, _ = pe.dce_jaxpr(Jaxpr(kj.constvars, kj.invars, computed, kj.eqns),
                             [True] * len(computed))
        self.known, self.known_consts = pe.closure_convert(ClosedJaxpr(kj, known.consts))
        self.ct_used = [u and nz for u, nz in zip(out_unknowns, ct_nonzero)]
        lin, _ = pe.dce_jaxpr(unknown.jaxpr, [nz for u, nz in zip(out_unknowns, ct_nonzero) if u])
        mask = [False] * num_res + [True] * sum(undefined)
        transposed = transpose_jaxpr(ClosedJaxpr(lin, []), mask)
        self.transposed, self.t_consts = pe.closure_convert(transposed)

    def apply(self, args, cts, run=None):
        """Cotangents of the undefined inputs (in order) for output cotangents `cts`.

        Args:
            args: one per input: a value, or `UndefinedPrimal` for a linear input.
            cts: one per output (`Zero` allowed).
            run: `run(program, consts, operands, part)` evaluates part "residuals" or
                "transpose" (a list of outputs); by default inline, in the current trace.
        """
        run = run or _run_inline
        if not any(self.ct_used):
            return [Zero(a.aval) for a in args if is_undefined(a)]
        ins = [a for a, u in zip([a for a in args if not is_undefined(a)], self.known_used) if u]
        computed = iter(run(self.known, self.known_consts, ins, "residuals"))
        res = [next(computed) if i is None else ins[i] for i in self.res_from_input]
        used_cts = [c for c, u in zip(cts, self.ct_used) if u]
        return list(run(self.transposed, self.t_consts, res + used_cts, "transpose"))


def _run_inline(program, consts, operands, part):
    return eval_jaxpr(program.jaxpr, [], *consts, *operands)


def transpose_mixed(closed, args, cts):
    """`MixedTranspose(closed, ...).apply(args, cts)`: both parts evaluated in the current
    trace. Returns one cotangent per undefined input of `args`, in order."""
    plan = MixedTranspose(closed, [is_undefined(a) for a in args],
                          [type(c) is not Zero for c in cts])
    return plan.apply(args, cts)


def vjp_flat(fun, primals):
    """(outs, vjp_fn) for a flat function; vjp_fn maps output cts to input cts."""
    outs, lin = linearize_flat(fun, primals)

    def vjp_fn(cts):
        return lin.transpose(cts)
    return outs, vjp_fn, lin


__all__ = [
    "ClosedJaxpr", "MixedTranspose", "UndefinedPrimal", "Zero", "add_any_p", "add_tangents",
    "backward_pass", "defjvp", "defjvp_zero", "deflinear", "instantiate", "is_undefined",
    "jvp_eval", "jvp_jaxpr", "jvp_replay", "jvp_primal_rules", "jvp_rules", "keep_residuals",
    "linearize_flat", "linearizing", "record_known", "take_residuals", "transpose_jaxpr",
    "transpose_mixed", "transpose_rules", "vjp_flat",
]
