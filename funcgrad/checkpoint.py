"""`checkpoint` (alias `remat`): recompute a block's forward in the backward pass.

Under a trace the block becomes one `checkpoint` equation holding its IR. Its jvp rule
records a single linear equation, `checkpoint_lin`, whose only residuals are the block's
inputs (plus the intermediates a `policy` chooses to save); the transpose of that equation
re-runs the block's forward and its vjp inside the backward pass. Eagerly (no trace) a
checkpointed function just runs: nothing is stored, so there is nothing to save.
Imports the core, the interpreters and `custom_derivatives`' eager helpers.
"""

import dataclasses
import functools
import inspect
import types
import weakref

import numpy as np

from funcgrad import errors
from funcgrad.batching_api import move_to
from funcgrad.core import (
    Literal,
    Primitive,
    Tracer,
    current_trace,
    get_aval,
    set_trace,
    source_context,
)
from funcgrad.custom_derivatives import _front, eval_eagerly
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters import partial_eval as pe
from funcgrad.lax.barrier import optimization_barrier_p
from funcgrad.tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = ["Offloadable", "Recompute", "Saveable", "checkpoint", "checkpoint_lin_p",
           "checkpoint_name", "checkpoint_p", "checkpoint_policies", "name_p", "remat"]


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
        outs = _bind([*consts, *leaves], dict(jaxpr=closed, prevent_cse=prevent_cse,
                                              policy=policy))
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


@dataclasses.dataclass(frozen=True)
class DotsSaveable:
    """Save the outputs of matrix products (and convolutions, unless
    `only_if_no_batch_dims`, which saves only products without batch dimensions)."""

    only_if_no_batch_dims: bool

    def __call__(self, prim, *avals, **params):
        if self.only_if_no_batch_dims:
            if prim.name != "dot_general":
                return False
            (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
            return not lhs_batch and not rhs_batch
        return prim.name in ("dot_general", "conv_general_dilated")


dots_saveable = checkpoint_dots = DotsSaveable(False)
dots_with_no_batch_dims_saveable = DotsSaveable(True)


class _Decision:
    """JAX's `Saveable` and `Recompute`, which a policy may return instead of a bool."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


Saveable, Recompute = _Decision("Saveable"), _Decision("Recompute")


@dataclasses.dataclass(frozen=True)
class Offloadable:
    """A policy's decision to keep a value in another memory (`src` -> `dst`, such as
    "device" -> "pinned_host"). funcgrad's arrays all live in one memory: it is saved."""

    src: str
    dst: str


def offload_dot_with_no_batch_dims(offload_src, offload_dst):
    """`dots_with_no_batch_dims_saveable`, the products offloaded to `offload_dst` (saved)."""
    def policy(prim, *avals, **params):
        if dots_with_no_batch_dims_saveable(prim, *avals, **params):
            return Offloadable(offload_src, offload_dst)
        return Recompute
    return policy


@dataclasses.dataclass(frozen=True)
class _SaveOnlyTheseNames:
    names: frozenset

    def __call__(self, prim, *avals, **params):
        return prim is name_p and params["name"] in self.names


@dataclasses.dataclass(frozen=True)
class _SaveAnyNamesButThese:
    names: frozenset

    def __call__(self, prim, *avals, **params):
        return prim is name_p and params["name"] not in self.names


def save_only_these_names(*names_which_can_be_saved):
    """Save the values named (`checkpoint_name`) with one of these names; recompute the rest."""
    return _SaveOnlyTheseNames(frozenset(names_which_can_be_saved))


def save_any_names_but_these(*names_not_to_save):
    """Save every named value except those with these names; recompute the rest."""
    return _SaveAnyNamesButThese(frozenset(names_not_to_save))


def save_anything_except_these_names(*names_not_to_save):
    """Save every value (JAX 0.10.2's definition: the names given are not consulted)."""
    return everything_saveable


def save_and_offload_only_these_names(*, names_which_can_be_saved, names_which_can_be_offloaded,
                                      offload_src, offload_dst):
    """`save_only_these_names` for both groups: the second is offloaded (saved here too)."""
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    both = saved & offloaded
    if both:
        raise errors.FuncgradValueError(
            "The names should be exclusive and should not intersect in "
            "`names_which_can_be_saved` and `names_which_can_be_offloaded`. Got "
            f"names_which_can_be_saved={saved}, names_which_can_be_offloaded={offloaded} and "
            f"the intersection={both}\n{errors.where()}")

    def policy(prim, *avals, **params):
        if prim is name_p and params["name"] in saved:
            return Saveable
        if prim is name_p and params["name"] in offloaded:
            return Offloadable(offload_src, offload_dst)
        return Recompute
    return policy


def save_from_both_policies(policy_1, policy_2):
    """Save a value when either policy saves it (both must return bools)."""
    def policy(prim, *avals, **params):
        out1, out2 = policy_1(prim, *avals, **params), policy_2(prim, *avals, **params)
        if not (isinstance(out1, bool) and isinstance(out2, bool)):
            raise errors.FuncgradValueError(
                "The return value of the policies should be a boolean. Got: "
                f"{out1} and {out2}. Please write a custom policy function directly, rather "
                f"than using this helper function.\n{errors.where()}")
        return out1 or out2
    return policy


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable, nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable, checkpoint_dots=checkpoint_dots,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims,
    save_anything_except_these_names=save_anything_except_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_only_these_names=save_only_these_names,
    save_from_both_policies=save_from_both_policies,
    save_and_offload_only_these_names=save_and_offload_only_these_names)


def _saves(policy, eqn):
    """Whether `policy` saves the outputs of `eqn` (a bool, `Saveable` or `Offloadable`)."""
    decision = policy(eqn.prim, *[a.aval for a in eqn.invars], **eqn.params)
    if decision is Saveable or isinstance(decision, Offloadable):
        return True
    if decision is Recompute:
        return False
    if isinstance(decision, (bool, np.bool_)):
        return bool(decision)
    raise errors.FuncgradTypeError(
        f"checkpoint: the policy {policy!r} returned {errors.short_repr(decision)} for "
        f"{eqn.prim.name}; a policy returns a bool, Saveable, Recompute or Offloadable")


# --- checkpoint_name ----------------------------------------------------------------------------

def checkpoint_name(x, name):
    """`x` (a pytree), its leaves named `name` for the policies of `checkpoint`
    (`save_only_these_names(name)` saves them); the identity otherwise.

    Example:
        >>> f = checkpoint(lambda x: fnp.cos(checkpoint_name(fnp.sin(x), "s")),
        ...                policy=checkpoint_policies.save_only_these_names("s"))
        >>> grad(f)(0.5)
        Array(-0.3898..., dtype=float32)
    """
    return tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


name_p = Primitive("name")
name_p.identity = True  # the compiler's simplifier drops it
name_p.def_impl(lambda x, *, name: x)
name_p.def_abstract_eval(lambda x, *, name: x)
ad.jvp_rules[name_p] = lambda primals, out, tangents, *, name: tangents[0]  # (tangent unnamed)
batching.batch_rules[name_p] = lambda args, dims, *, name: (name_p.bind(args[0], name=name),
                                                            dims[0])


# --- checkpoint_p -------------------------------------------------------------------------------

def _kept(jaxpr, policy):
    """Indices of the equations whose outputs `policy` saves."""
    if policy is None:
        return ()
    return tuple(i for i, e in enumerate(jaxpr.eqns) if _saves(policy, e))


def _forward(jaxpr, primals, keep, upto=None):
    """Bind the block's equations (up to `upto`) in the current trace: (env, saved values)."""
    env = dict(zip(jaxpr.jaxpr.invars, primals))
    for e in jaxpr.eqns[:upto]:
        with source_context(e.source):
            outs = e.prim.bind(*[a.val if type(a) is Literal else env[a] for a in e.invars],
                               **e.params)
        env.update(zip(e.outvars, outs if e.prim.multiple_results else [outs]))
    return env, [env[v] for i in keep for v in jaxpr.eqns[i].outvars]


def _bind(args, params):
    """Bind `checkpoint_p`. In linearize's define-by-run trace (grad, vjp) with a policy that
    saves values, the block runs once one level up and gives its outputs and the saved values
    together (as JAX's partial evaluation does); the jvp rule takes them. Of the values the
    policy allows, only those the backward pass reads are kept."""
    trace, closed = current_trace(), params["jaxpr"]
    keep = _kept(closed, params["policy"])
    if not (keep and closed.out_avals and ad.linearizing(trace)):
        return checkpoint_p.bind(*args, **params)
    mine = [isinstance(a, Tracer) and a._trace is trace for a in args]
    vals = [a.val if m else a for a, m in zip(args, mine)]
    nz = tuple(m and ad.differentiable(get_aval(a)) for a, m in zip(args, mine))
    if any(v is None for v in vals) or not any(nz):
        return checkpoint_p.bind(*args, **params)
    keep = _read_by_backward(closed, nz, keep)
    with set_trace(trace.parent):
        env, saved = _forward(closed, vals, keep)
        outs = [v.val if type(v) is Literal else env[v] for v in closed.jaxpr.outvars]
    tracers = ad.record_known(trace, checkpoint_p, args, params, outs)
    ad.keep_residuals(trace, outs[0], (keep, saved))
    return tracers


def _read_by_backward(jaxpr, nz_in, keep):
    """The equations of `keep` with an output that the backward pass reads."""
    ct_nz = tuple(True for a in jaxpr.out_avals if ad.differentiable(a))
    plan, consts = _transpose_plan(jaxpr, nz_in, keep, ct_nz)
    flags, read, k = plan.known_used[len(consts) + len(jaxpr.in_avals):], [], 0
    for i in keep:
        n = len(jaxpr.eqns[i].outvars)
        if any(flags[k:k + n]):
            read.append(i)
        k += n
    return tuple(read)


def _checkpoint_jvp(primals, outs, tangents, *, jaxpr, prevent_cse, policy):
    nz = tuple(type(t) is not ad.Zero for t in tangents)
    kept = ad.take_residuals(outs[0]) if outs else None
    if kept is not None:
        saved, saved_vals = kept
    else:  # (forward mode, or outside linearize: the values are computed again)
        saved = _kept(jaxpr, policy)
        saved_vals = _forward(jaxpr, primals, saved, saved[-1] + 1)[1] if saved else []
    lin = checkpoint_lin_p.bind(*primals, *saved_vals, *[t for t, z in zip(tangents, nz) if z],
                                jaxpr=jaxpr, nz_in=nz, saved=saved, prevent_cse=prevent_cse)
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


def _checkpoint_lin_impl(*args, jaxpr, nz_in, saved, prevent_cse):
    with set_trace(None):
        return _lin_apply(args, jaxpr, nz_in, saved)


def _checkpoint_lin_abstract(*avals, jaxpr, nz_in, saved, prevent_cse):
    return [ad.tangent_aval(a) for a in jaxpr.out_avals if ad.differentiable(a)]


def _checkpoint_lin_jvp(primals, outs, tangents, *, jaxpr, nz_in, saved, prevent_cse):
    # The linear map is itself a checkpointed block of its inputs.
    fn = lambda *a: _lin_apply(a, jaxpr, nz_in, saved)
    lj, consts = pe.closure_convert(fn, [get_aval(x) for x in primals], "checkpoint")
    ts = [ad.Zero(get_aval(c)) for c in consts] + list(tangents)
    return _checkpoint_jvp(consts + list(primals), None, ts, jaxpr=lj, prevent_cse=True,
                           policy=None)


def _checkpoint_lin_transpose(cts, *args, jaxpr, nz_in, saved, prevent_cse):
    primals, saved_vals, _ = _split(args, jaxpr, saved)
    ct_nz = tuple(type(c) is not ad.Zero for c in cts)
    plan, consts = _transpose_plan(jaxpr, nz_in, saved, ct_nz)
    tangents = [ad.UndefinedPrimal(ad.tangent_aval(a))
                for a, z in zip(jaxpr.in_avals, nz_in) if z]
    known = [*primals, *saved_vals]
    if prevent_cse and known:  # the compiler must not merge the recomputation with the forward
        known = optimization_barrier_p.bind(*known)
    got = plan.apply([*consts, *known, *tangents], list(cts))
    return [None] * (len(primals) + len(saved_vals)) + got


_plans = weakref.WeakKeyDictionary()  # block -> {(nz_in, saved, ct_nz): (plan, consts)}


def _transpose_plan(jaxpr, nz_in, saved, ct_nz):
    """The transpose of the block's linearization, built once: a known program recomputes
    only the primal values the linear part reads and that were not saved, and the
    transposed linear program maps them and the cotangents to the input cotangents
    (`ad.MixedTranspose`: partial evaluation, dead code dropped)."""
    cache = _plans.setdefault(jaxpr, {})
    hit = cache.get((nz_in, saved, ct_nz))
    if hit is not None:
        return hit
    saved_vars = [v for i in saved for v in jaxpr.eqns[i].outvars]
    n, ns = len(jaxpr.in_avals), len(saved_vars)

    def linear(*args):
        it = iter(args[n + ns:])
        ts = [next(it) if z else ad.Zero(a) for a, z in zip(jaxpr.in_avals, nz_in)]
        known = dict(zip(saved_vars, args[n:n + ns]))
        _, t_outs = ad.jvp_eval(jaxpr.jaxpr, [], list(args[:n]), ts, known)
        return [ad.instantiate(t) for t, a in zip(t_outs, jaxpr.out_avals)
                if ad.differentiable(a)]
    avals = (list(jaxpr.in_avals) + [v.aval for v in saved_vars]
             + [ad.tangent_aval(a) for a, z in zip(jaxpr.in_avals, nz_in) if z])
    program, consts = pe.closure_convert(linear, avals, "checkpoint")
    undefined = [False] * (len(consts) + n + ns) + [True] * sum(nz_in)
    cache[(nz_in, saved, ct_nz)] = hit = (ad.MixedTranspose(program, undefined, ct_nz), consts)
    return hit


def _checkpoint_lin_batch(args, dims, *, jaxpr, nz_in, saved, prevent_cse):
    size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    primals, _, tangents = _split(list(zip(args, dims)), jaxpr, saved)
    primals = [move_to(x, d, 0, size) for x, d in primals]
    tangents = [move_to(x, d, 0, size) for x, d in tangents]
    bj, consts = pe.closure_convert(batching.batch_jaxpr(jaxpr, [0] * len(primals), size,
                                                         True)[0])
    outs = checkpoint_lin_p.bind(*consts, *primals, *tangents, jaxpr=bj,
                                 nz_in=(False,) * len(consts) + nz_in, saved=(),
                                 prevent_cse=prevent_cse)
    return outs, [0] * len(outs)


checkpoint_lin_p = Primitive("checkpoint_lin", multiple_results=True)
checkpoint_lin_p.def_impl(_checkpoint_lin_impl, raw=False)
checkpoint_lin_p.def_abstract_eval(_checkpoint_lin_abstract)
ad.jvp_rules[checkpoint_lin_p] = _checkpoint_lin_jvp
ad.transpose_rules[checkpoint_lin_p] = _checkpoint_lin_transpose
batching.batch_rules[checkpoint_lin_p] = _checkpoint_lin_batch
