"""`checkpoint` (alias `remat`): recompute a block's forward in the backward pass.

Under a trace the block becomes one `checkpoint` equation holding its IR. Its jvp rule
records a single linear equation, `checkpoint_lin`, whose only residuals are the block's
inputs (plus the intermediates a `policy` chooses to save); the transpose of that equation
re-runs the block's forward and its vjp inside the backward pass. Eagerly (no trace) a
checkpointed function just runs: nothing is stored, so there is nothing to save.
Imports the core, the interpreters and `custom_derivatives`' eager helpers.
"""

import functools
import inspect
import types

from funcgrad import errors
from funcgrad.batching_api import move_to
from funcgrad.core import (
    Literal,
    Primitive,
    Tracer,
    current_trace,
    get_aval,
    new_builder,
    set_trace,
)
from funcgrad.custom_derivatives import _front, eval_eagerly
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters import partial_eval as pe
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = ["checkpoint", "checkpoint_lin_p", "checkpoint_p", "checkpoint_policies", "remat"]


_DEPRECATED = object()  # JAX's `concrete=`, removed: any value given is an error


def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=(), static_argnames=(),
               concrete=_DEPRECATED):
    """Make `fun` save only its inputs for the backward pass and recompute the rest.

    Args:
        fun: a function of pytree arguments returning a pytree of arrays.
        prevent_cse: kept in the IR for the compiler: the recomputation must not be merged
            with the forward computation (on by default, as in JAX).
        policy: None (save nothing but the inputs) or a function
            `policy(prim, *avals, **params) -> bool` marking the equations whose outputs
            are saved instead of recomputed; see `checkpoint_policies`.
        static_argnums: positions of arguments that are static Python values;
            `static_argnames` the same by name (keyword arguments, or positional ones named
            in `fun`'s signature).
        concrete: JAX's removed option; giving it is an error, as in JAX.

    Returns:
        A function with the same values and derivatives as `fun`.

    Example:
        >>> f = checkpoint(lambda x: fnp.sin(fnp.sin(x)))
        >>> print(make_jaxpr(f)(1.0))
        { lambda ; a:f32[]. let
            b:f32[] = checkpoint[jaxpr={ lambda ; c:f32[]. let
                d:f32[] = sin c
                e:f32[] = sin d
              in (e,) } policy=None prevent_cse=True] a
          in (b,) }
    """
    if concrete is not _DEPRECATED:
        raise errors.FuncgradNotImplementedError(
            "checkpoint: the `concrete` option was removed (in JAX too); use static_argnums or "
            f"lax.cond/lax.while_loop instead\n{errors.where()}")
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    static += _positions_of(fun, names)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        if current_trace() is None:
            return fun(*args, **kwargs)
        stat = {i % len(args) for i in static if -len(args) <= i < len(args)}
        static_kw = {k: v for k, v in kwargs.items() if k in names}
        leaves, in_tree = tree_flatten(([a for i, a in enumerate(args) if i not in stat],
                                        {k: v for k, v in kwargs.items() if k not in names}))
        store = {}

        def flat(*xs):
            dyn, kw = tree_unflatten(in_tree, list(xs))
            it = iter(dyn)
            out = fun(*[args[i] if i in stat else next(it) for i in range(len(args))], **kw,
                      **static_kw)
            out_leaves, store["tree"] = tree_flatten(out)
            return out_leaves
        closed, consts = pe.closure_convert(flat, [get_aval(x) for x in leaves], "checkpoint")
        outs = checkpoint_p.bind(*consts, *leaves, jaxpr=closed, prevent_cse=prevent_cse,
                                 policy=policy)
        return tree_unflatten(store["tree"], outs)
    return wrapped


remat = checkpoint


def _positions_of(fun, names):
    """The positions of the positional parameters of `fun` named in `names`."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return ()
    return tuple(i for i, p in enumerate(params) if p.name in names
                 and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


# --- policies -----------------------------------------------------------------------------------

def everything_saveable(prim, *avals, **params):
    return True


def nothing_saveable(prim, *avals, **params):
    return False


def dots_saveable(prim, *avals, **params):
    return prim.name == "dot_general"


def dots_with_no_batch_dims_saveable(prim, *avals, **params):
    if prim.name != "dot_general":
        return False
    dn = params.get("dimension_numbers")
    try:
        return not dn[1][0] and not dn[1][1]
    except (TypeError, IndexError):
        return False


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable, nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable)


# --- checkpoint_p -------------------------------------------------------------------------------

def _saved_values(jaxpr, primals, policy):
    """(indices of the equations the policy saves, their output values), computed now."""
    if policy is None:
        return (), []
    keep = [i for i, e in enumerate(jaxpr.eqns)
            if policy(e.prim, *[a.aval for a in e.invars], **e.params)]
    if not keep:
        return (), []
    env = dict(zip(jaxpr.jaxpr.invars, primals))
    for e in jaxpr.eqns[:keep[-1] + 1]:
        outs = e.prim.bind(*[a.val if type(a) is Literal else env[a] for a in e.invars],
                           **e.params)
        env.update(zip(e.outvars, outs if e.prim.multiple_results else [outs]))
    return tuple(keep), [env[v] for i in keep for v in jaxpr.eqns[i].outvars]


def _checkpoint_jvp(primals, outs, tangents, *, jaxpr, prevent_cse, policy):
    nz = tuple(type(t) is not ad.Zero for t in tangents)
    saved, saved_vals = _saved_values(jaxpr, primals, policy)
    lin = checkpoint_lin_p.bind(*primals, *saved_vals, *[t for t, z in zip(tangents, nz) if z],
                                jaxpr=jaxpr, nz_in=nz, saved=saved)
    it = iter(lin)
    return [next(it) if ad.differentiable(a) else ad.Zero(a) for a in jaxpr.out_avals]


def _checkpoint_batch(args, dims, *, jaxpr, prevent_cse, policy):
    args, dims, size = _front(args, dims)
    bj, consts = pe.closure_convert(batching.batch_jaxpr(jaxpr, dims, size, True)[0])
    outs = checkpoint_p.bind(*consts, *args, jaxpr=bj, prevent_cse=prevent_cse, policy=policy)
    return outs, [0] * len(outs)


checkpoint_p = Primitive("checkpoint", multiple_results=True)
checkpoint_p.calls_body = True  # outside of differentiation, a plain call of its body
checkpoint_p.def_impl(lambda *args, jaxpr, **_: eval_eagerly(jaxpr, *args), raw=False)
checkpoint_p.def_abstract_eval(lambda *avals, jaxpr, **_: list(jaxpr.out_avals))
ad.jvp_rules[checkpoint_p] = _checkpoint_jvp
batching.batch_rules[checkpoint_p] = _checkpoint_batch


# --- checkpoint_lin_p: operands are (block inputs, saved values, nonzero input tangents) ---------

def _split(args, jaxpr, saved):
    n = len(jaxpr.in_avals)
    ns = sum(len(jaxpr.eqns[i].outvars) for i in saved)
    return args[:n], args[n:n + ns], args[n + ns:]


def _lin_apply(args, jaxpr, nz_in, saved):
    """Forward mode through the block: tangents of its differentiable outputs."""
    primals, _, tangents = _split(args, jaxpr, saved)
    it = iter(tangents)
    ts = [next(it) if z else ad.Zero(a) for a, z in zip(jaxpr.in_avals, nz_in)]
    _, t_outs = ad.jvp_eval(jaxpr.jaxpr, [], list(primals), ts)
    return [ad.instantiate(t) for t, a in zip(t_outs, jaxpr.out_avals) if ad.differentiable(a)]


def _checkpoint_lin_impl(*args, jaxpr, nz_in, saved):
    with set_trace(None):
        return _lin_apply(args, jaxpr, nz_in, saved)


def _checkpoint_lin_abstract(*avals, jaxpr, nz_in, saved):
    return [ad.tangent_aval(a) for a in jaxpr.out_avals if ad.differentiable(a)]


def _checkpoint_lin_jvp(primals, outs, tangents, *, jaxpr, nz_in, saved):
    # The linear map is itself a checkpointed block of its inputs.
    fn = lambda *a: _lin_apply(a, jaxpr, nz_in, saved)
    lj, consts = pe.closure_convert(fn, [get_aval(x) for x in primals], "checkpoint")
    ts = [ad.Zero(get_aval(c)) for c in consts] + list(tangents)
    return _checkpoint_jvp(consts + list(primals), None, ts, jaxpr=lj, prevent_cse=True,
                           policy=None)


def _checkpoint_lin_transpose(cts, *args, jaxpr, nz_in, saved):
    primals, saved_vals, _ = _split(args, jaxpr, saved)
    known = dict(zip([v for i in saved for v in jaxpr.eqns[i].outvars], saved_vals))
    it = iter(cts)
    cts = [next(it) if ad.differentiable(a) else ad.Zero(a) for a in jaxpr.out_avals]
    with new_builder("checkpoint", compute_known=True) as b:
        t_ins = [b.new_input(ad.tangent_aval(a)) if z else ad.Zero(a)
                 for a, z in zip(jaxpr.in_avals, nz_in)]
        _, t_outs = ad.jvp_eval(jaxpr.jaxpr, [], list(primals), t_ins, known)
        nonzero = [type(t) is not ad.Zero for t in t_outs]
        lin, _ = b.to_jaxpr([b.lift(t) for t, k in zip(t_outs, nonzero) if k])
    in_vars = [t.atom if type(t) is Tracer else None for t in t_ins]
    got = ad.Linearized(lin, b.known, in_vars, nonzero, jaxpr.out_avals).transpose(cts)
    return [None] * (len(primals) + len(saved_vals)) + [g for g, z in zip(got, nz_in) if z]


def _checkpoint_lin_batch(args, dims, *, jaxpr, nz_in, saved):
    size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    primals, _, tangents = _split(list(zip(args, dims)), jaxpr, saved)
    primals = [move_to(x, d, 0, size) for x, d in primals]
    tangents = [move_to(x, d, 0, size) for x, d in tangents]
    bj, consts = pe.closure_convert(batching.batch_jaxpr(jaxpr, [0] * len(primals), size,
                                                         True)[0])
    outs = checkpoint_lin_p.bind(*consts, *primals, *tangents, jaxpr=bj,
                                 nz_in=(False,) * len(consts) + nz_in, saved=())
    return outs, [0] * len(outs)


checkpoint_lin_p = Primitive("checkpoint_lin", multiple_results=True)
checkpoint_lin_p.def_impl(_checkpoint_lin_impl, raw=False)
checkpoint_lin_p.def_abstract_eval(_checkpoint_lin_abstract)
ad.jvp_rules[checkpoint_lin_p] = _checkpoint_lin_jvp
ad.transpose_rules[checkpoint_lin_p] = _checkpoint_lin_transpose
batching.batch_rules[checkpoint_lin_p] = _checkpoint_lin_batch
