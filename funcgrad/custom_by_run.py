"""custom_jvp/custom_vjp under a define-by-run trace (eager grad, vjp, jvp, jacfwd), as in JAX.

When the current trace computes known values and the differentiated arguments have them, the
user's rule runs once on the primal values, one level up, so Python control flow on them
works: a custom_jvp calls only its rule (which computes the primal output; a `f(x)` inside it
runs `f` on values), a custom_vjp calls only `fwd`. The trace records one `custom_known_call`
equation whose outputs are those known values and whose jvp applies what the rule left: the
rule's tangent program (custom_jvp) or a `custom_vjp_lin` equation holding fwd's residuals.
Imports the core and the interpreters only; `custom_derivatives` calls it.
"""

import functools

from funcgrad import errors
from funcgrad.core import (
    Builder,
    Eqn,
    Primitive,
    Tracer,
    Var,
    current_source,
    current_trace,
    set_trace,
)
from funcgrad.interpreters import ad, batching
from funcgrad.tree_util import tree_leaves

__all__ = ["abstract_body_error", "by_run_mode", "custom_known_call_p", "is_mine",
           "record_known", "rule_builder", "value_in"]


def is_mine(b, x):
    return isinstance(x, Tracer) and x._trace is b


def _closes_over(fun, b, depth=3):
    """Whether `fun` closes over a tracer of `b` (then its body must be traced): its closure
    cells, a `functools.partial`'s arguments, and the same in the functions found there, a
    few levels deep (a value reached otherwise, e.g. through an object's attribute, is not
    seen: its derivative is then not taken, as JAX refuses to take it)."""
    values = [_cell(c) for c in getattr(fun, "__closure__", None) or ()]
    if isinstance(fun, functools.partial):
        values += [fun.func, *fun.args, *fun.keywords.values()]
    for v in values:
        try:
            leaves = tree_leaves(v)
        except (ValueError, TypeError):  # a container funcgrad can't walk
            continue
        for x in leaves:
            if is_mine(b, x) or (depth and callable(x) and _closes_over(x, b, depth - 1)):
                return True
    return False


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:  # an empty cell
        return None


def by_run_mode(trace, call):
    """How a custom function called with `call` runs under `trace`: "below" (no argument is
    traced here, or only by a rule's builder with known values: evaluate it one level up on the
    values, `value_in`), "rule" (run the rule on the values) or None
    (trace the function's body: jit/vmap/make_jaxpr, or a traced nondiff array or closure)."""
    if not (isinstance(trace, Builder) and trace.compute_known) or trace.typed:
        return None
    if any(is_mine(trace, x) for x in call.nd_vals) or _closes_over(call.fun, trace):
        return None
    mine = [x for x in call.diff_leaves if is_mine(trace, x)]
    if not mine:
        return "below"
    if any(x.val is None for x in mine):
        return None
    # A rule calling the function again on primal values (`f(a + 1, x)` in f's own jvp rule):
    # they are known one level up, where the function runs (its rule again here would recur).
    return "below" if getattr(trace, "is_rule", False) else "rule"


def value_in(b, x):
    """The value of `x` one level above `b` (a tracer of `b` gives its known value)."""
    return x.val if is_mine(b, x) else x


def rule_builder(b, name):
    """A define-by-run builder beside `b` (same parent): the rule's primal operations run one
    level up, its tangent operations are recorded as a program of the tangent inputs."""
    t = Builder(b.parent, True, name)
    t.is_rule = True
    return t


def abstract_body_error(kind, fun, e):
    """A concretization error inside a traced custom function, naming the transform."""
    trace = current_trace()
    where_, _, _ = str(e).partition("\n  hint:")
    if isinstance(trace, Builder) and trace.compute_known:
        name = errors.transform_name(trace.name)
        why = (f"under {name} its body is traced abstractly (without values) because it "
               "closes over a value being differentiated, or a nondiff_argnums argument is one")
        hint = ("pass that value as a (differentiable) argument, so the rule runs on concrete "
                "values as in JAX; or use lax.cond/lax.while_loop/fnp.where")
    else:
        name = trace.name if trace is not None else "a trace"
        why = f"under `{name}` values are abstract"
        hint = "use lax.cond / lax.switch / lax.while_loop / fnp.where for control flow"
    return errors.ConcretizationTypeError(
        f"{kind} function {fun.__qualname__}: {why}.\n{where_}\n  hint: {hint}")


def record_known(b, args, out_vals, out_avals, name, jvp, fun):
    """Record in `b` one equation from the tracers `args` to outputs already computed one
    level up (`out_vals`); `jvp(tangents)` gives its tangent outputs, `fun(*values)`
    recomputes the outputs should the equation ever be evaluated again."""
    atoms = [b.lift(a).atom for a in args]
    outvars = [Var(a) for a in out_avals]
    params = dict(out_avals=tuple(out_avals), name=name, _jvp=jvp, _fun=fun)
    b.eqns.append(Eqn(custom_known_call_p, atoms, outvars, params, current_source()))
    outs = []
    for v, val in zip(outvars, out_vals):
        b.known[v] = val
        outs.append(Tracer(b, v.aval, v, val))
    return outs


def _known_impl(*args, out_avals, name, _jvp, _fun):
    with set_trace(None):
        return list(_fun(*args))


def _known_batch(args, dims, *, name, **_):
    raise errors.FuncgradInternalError(
        f"custom_known_call of `{name}` belongs to a define-by-run trace and is never batched; "
        "this is a funcgrad bug")


custom_known_call_p = Primitive("custom_known_call", multiple_results=True)
custom_known_call_p.def_impl(_known_impl, raw=False)
custom_known_call_p.def_abstract_eval(lambda *avals, out_avals, **_: list(out_avals))
ad.jvp_rules[custom_known_call_p] = lambda primals, outs, tangents, *, _jvp, **_: _jvp(tangents)
batching.batch_rules[custom_known_call_p] = _known_batch
