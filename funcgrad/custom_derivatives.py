"""`custom_jvp` and `custom_vjp`: user-defined derivative rules, as in JAX.

Eagerly a decorated function just runs. Under a trace it binds a primitive whose params hold
the function's IR (`custom_jvp_call`, `custom_vjp_call`): evaluating it runs the function,
its jvp rule calls the user's rule. For `custom_vjp` that rule records one linear equation,
`custom_vjp_lin`, holding fwd's residuals; its transpose calls `bwd`. (Under grad the primal
trace runs `fwd` instead of the function and hands its residuals to the rule.)
User rules run define-by-run (with the values of the primal arguments), so they may not
close over traced values: pass those as arguments. Values the *function* closes over, and
array leaves of `nondiff_argnums`, are differentiated through the function's own body.
Imports the core, the interpreters, lax and `batching_api`; nothing from the user layer.
"""

import functools
import inspect
import weakref

import numpy as np

from funcgrad import custom_by_run as by_run
from funcgrad import dtypes, errors
from funcgrad.batching_api import move_to, vmap_flat
from funcgrad.core import (
    Array,
    ArrayBase,
    Builder,
    Primitive,
    ShapedArray,
    computing_known_for,
    current_source,
    current_trace,
    eval_jaxpr,
    get_aval,
    set_trace,
    to_array,
)
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters import partial_eval as pe
from funcgrad.tree_util import (
    keystr,
    tree_flatten,
    tree_flatten_with_path,
    tree_map,
    tree_structure,
    tree_unflatten,
)

__all__ = ["custom_jvp", "custom_jvp_call_p", "custom_vjp", "custom_vjp_call_p",
           "custom_vjp_lin_p"]


# --- shared helpers (also used by checkpoint) --------------------------------------------------

def eval_eagerly(closed, *args):
    with set_trace(None):
        return eval_jaxpr(closed.jaxpr, closed.consts, *args)


def batched_aval(aval, size):
    return ShapedArray((size,) + aval.shape, aval.dtype, aval.weak_type)


def _front(args, dims):
    """Mapped operands moved to axis 0: (args, dims in {0, None}, batch size)."""
    size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    args = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    return args, [None if d is None else 0 for d in dims], size


def _zeros(aval):
    return ad.instantiate(ad.Zero(aval))


def _loc(fn):
    code = getattr(fn, "__code__", None)
    if code is None:
        return getattr(fn, "__qualname__", repr(fn))
    return f"`{fn.__qualname__}` defined at {code.co_filename}:{code.co_firstlineno}"


def _error(msg, hint=None, cls=errors.FuncgradTypeError):
    text = f"{msg}\n{errors.where(current_source())}"
    return cls(text + (f"\n  hint: {hint}" if hint else ""))


def _resolve_kwargs(fun, args, kwargs):
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        sig = None
    if sig is None:
        if kwargs:
            raise errors.FuncgradTypeError(
                f"keyword arguments to {fun!r} could not be resolved to positions\n"
                f"{errors.where()}")
        return args
    ba = sig.bind(*args, **kwargs)
    ba.apply_defaults()
    if ba.kwargs:
        raise errors.FuncgradTypeError(
            f"keyword-only arguments {sorted(ba.kwargs)} of {fun.__qualname__} are not "
            f"supported by custom_jvp/custom_vjp; make them positional\n{errors.where()}")
    return ba.args


def _is_array(x):
    return isinstance(x, (ArrayBase, np.ndarray, np.generic))


class _Call:
    """One call of a decorated function: splits its arguments into nondiff arguments
    (array leaves become operands, the rest stays static) and differentiable leaves."""

    def __init__(self, fun, args, nondiff_argnums, kind):
        for i in nondiff_argnums:
            if not -len(args) <= i < len(args):
                raise errors.FuncgradValueError(
                    f"{kind} function {fun.__qualname__}: nondiff_argnums={nondiff_argnums} "
                    f"is out of range for {len(args)} argument(s)\n{errors.where()}")
        self.fun, self.nargs = fun, len(args)
        self.nd_pos = tuple(sorted(i % len(args) for i in nondiff_argnums))
        nd_args = tuple(args[i] for i in self.nd_pos)
        diff_args = tuple(a for i, a in enumerate(args) if i not in self.nd_pos)
        nd_leaves, self.nd_tree = tree_flatten(nd_args)
        self.nd_static = [None if _is_array(x) else x for x in nd_leaves]
        self.nd_vals = [x for x in nd_leaves if _is_array(x)]
        self.diff_leaves, self.diff_tree = tree_flatten(diff_args)
        self.diff_names = self._names([i for i in range(self.nargs) if i not in self.nd_pos])
        self.diff_paths = [self.diff_names[p[0].idx] + keystr(p[1:])
                           for p, _ in tree_flatten_with_path(diff_args)[0]]
        self.diff_avals = [get_aval(x) for x in self.diff_leaves]
        self.out_tree = None

    def _names(self, positions):
        try:
            names = list(inspect.signature(self.fun).parameters)
        except (TypeError, ValueError):
            names = []
        return [names[i] if i < len(names) else f"args[{i}]" for i in positions]

    def nondiff(self, nd_vals):
        it = iter(nd_vals)
        leaves = [next(it) if s is None else s for s in self.nd_static]
        return tuple(tree_unflatten(self.nd_tree, leaves))

    def full_args(self, nd_vals, diff_vals):
        nd, diff = iter(self.nondiff(nd_vals)), iter(tree_unflatten(self.diff_tree, diff_vals))
        return tuple(next(nd) if i in self.nd_pos else next(diff) for i in range(self.nargs))

    def flat_fun(self, *xs):
        n = len(self.nd_vals)
        out = self.fun(*self.full_args(xs[:n], xs[n:]))
        leaves, self.out_tree = tree_flatten(out)
        return leaves

    def trace(self, kind):
        try:
            closed, consts = pe.closure_convert(
                self.flat_fun, [get_aval(x) for x in self.nd_vals + self.diff_leaves], kind)
        except errors.ConcretizationTypeError as e:
            raise by_run.abstract_body_error(kind, self.fun, e) from None
        self.out_avals = closed.out_avals
        return closed, consts


def _body_tangents(jaxpr, primals, tangents, num_consts):
    """Tangents from closed-over values and nondiff arrays, through the function body."""
    extra = tangents[:num_consts]
    if all(type(t) is ad.Zero for t in extra):
        return None
    ts = list(extra) + [ad.Zero(a) for a in jaxpr.in_avals[num_consts:]]
    return ad.jvp_eval(jaxpr.jaxpr, [], list(primals), ts)[1]


def _add_body(t_outs, body):
    return t_outs if body is None else [ad.add_tangents(a, b) for a, b in zip(t_outs, body)]


def _check_out_leaves(kind, rule, what, leaves, out_avals, out_paths, tangent):
    """Shape/dtype checks of a rule's output leaves against the function's output avals."""
    res = []
    for x, aval, path in zip(leaves, out_avals, out_paths):
        got = get_aval(x)
        if got.shape != aval.shape:
            raise _error(
                f"{kind} rule {_loc(rule)} produced a {what} of shape {got.str_short()} at "
                f"output{path}, but the function's output there has shape {aval.str_short()}")
        if not tangent or not ad.differentiable(aval):
            res.append(ad.Zero(aval) if tangent else x)
        elif not dtypes.is_inexact(got.dtype):
            raise _error(f"{kind} rule {_loc(rule)} produced a {what} of dtype {got.dtype} at "
                         f"output{path} for a {aval.str_short()} output")
        else:
            res.append(x if got.dtype == aval.dtype else _convert(x, aval.dtype))
    return res


def _convert(x, dtype):
    from funcgrad import lax
    return lax.convert_element_type(x, dtype)


def _out_paths(out_tree):
    dummy = tree_unflatten(out_tree, [0] * out_tree.num_leaves)
    return [keystr(p) for p, _ in tree_flatten_with_path(dummy)[0]]


def _nondiff_positions(fun, nums, names):
    """`nondiff_argnums` with the positions of the parameters `nondiff_argnames` names (through
    `fun`'s signature, as JAX infers them), sorted."""
    names = (names,) if isinstance(names, str) else tuple(names)
    positions = set(nums)
    if names:
        params = [p for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        by_name = {p.name: i for i, p in enumerate(params)}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise errors.FuncgradValueError(
                f"nondiff_argnames={names}: {unknown} are not positional parameters of "
                f"{getattr(fun, '__qualname__', fun)}\n{errors.where()}")
        positions |= {by_name[n] for n in names}
    return tuple(sorted(positions))


# --- custom_jvp ---------------------------------------------------------------------------------

class custom_jvp:
    """A function with a custom forward-mode rule (reverse mode follows by transposition).

    Args:
        fun: the function; its positional arguments are pytrees of arrays.
        nondiff_argnums: positions of arguments that are not differentiated by the rule
            (static values such as ints or functions); the rule receives them first.
            `nondiff_argnames`: the same by parameter name (JAX's).

    Example:
        >>> @custom_jvp
        ... def f(x):
        ...     return fnp.sin(x)
        >>> @f.defjvp
        ... def f_jvp(primals, tangents):
        ...     (x,), (t,) = primals, tangents
        ...     return f(x), 2.0 * t
        >>> grad(f)(0.0)
        Array(2., dtype=float32)
    """

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions(fun, nondiff_argnums, nondiff_argnames)
        self.jvp = None

    def defjvp(self, jvp, symbolic_zeros=False):
        """Set the rule `jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)`;
        returns `jvp`, so it works as a decorator. Zero tangents reach the rule as zero
        arrays (JAX's default, `symbolic_zeros=False`; True is not supported)."""
        _no_symbolic_zeros(symbolic_zeros, "custom_jvp.defjvp")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, `jvp_i(t_i, primal_out, *primals)` returning that
        argument's tangent contribution (None: the argument has none)."""
        if self.nondiff_argnums:
            raise errors.FuncgradTypeError("custom_jvp.defjvps is not supported together "
                                           f"with nondiff_argnums\n{errors.where()}")

        def jvp(primals, tangents):
            out = self(*primals)
            acc = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                part = rule(t, out, *primals)
                acc = part if acc is None else _tree_add(acc, part)
            if acc is None:
                leaves, tree = tree_flatten(out)
                acc = tree_unflatten(tree, [_zeros(get_aval(x)) for x in leaves])
            return out, acc
        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {self.__name__} "
                                 "using defjvp.")
        args = _resolve_kwargs(self.fun, args, kwargs)
        trace = current_trace()
        if trace is None:
            return self.fun(*args)
        call = _Call(self.fun, args, self.nondiff_argnums, "custom_jvp")
        mode = by_run.by_run_mode(trace, call)
        if mode == "below":
            args = tree_map(lambda x: by_run.value_in(trace, x), args)
            with set_trace(trace.parent):
                return self(*args)
        if mode == "rule":
            return _jvp_by_run(self, call, trace)
        closed, consts = call.trace("custom_jvp")
        rule = _JvpRule(self, call, len(consts))
        outs = custom_jvp_call_p.bind(*consts, *call.nd_vals, *call.diff_leaves, jaxpr=closed,
                                      num_consts=len(consts) + len(call.nd_vals),
                                      name=self.__name__, _rule=rule)
        return tree_unflatten(call.out_tree, outs)


def _no_symbolic_zeros(symbolic_zeros, what):
    if symbolic_zeros:
        raise errors.FuncgradValueError(
            f"{what}: symbolic_zeros=True is not supported; zero tangents and cotangents reach "
            f"the rules as zero arrays (JAX's default)\n{errors.where()}")


def _tree_add(a, b):
    from funcgrad import lax
    la, ta = tree_flatten(a)
    lb, tb = tree_flatten(b)
    if ta != tb:
        raise _error(f"custom_jvp defjvps: the rules' tangents have different structures {ta} "
                     f"and {tb}")
    return tree_unflatten(ta, [lax.add(x, y) for x, y in zip(la, lb)])


class _JvpRule:
    """The user's jvp rule on flat lists: (extra values, primals, tangents) -> tangents."""

    def __init__(self, cj, call, n_closure):
        self.cj, self.call, self.n_closure = cj, call, n_closure
        self.out_avals = call.out_avals

    def __call__(self, extra, primals, tangents):
        nd = self.call.nondiff(extra[self.n_closure:])
        ts = [ad.instantiate(t) for t in tangents]
        return _run_jvp_rule(self.cj, self.call, nd, primals, ts, self.out_avals)[1]


def _run_jvp_rule(cj, call, nd, primals, tangents, out_avals=None):
    """The user's rule on flat primals and tangents: checked (primal leaves, tangent leaves).
    Without `out_avals` (the function was not traced) the rule's primal output sets them."""
    rule = cj.jvp
    p_tree = tree_unflatten(call.diff_tree, list(primals))
    t_tree = tree_unflatten(call.diff_tree, list(tangents))
    try:
        res = rule(*nd, p_tree, t_tree)
    except errors.TracerLeakError as e:
        raise errors.TracerLeakError(
            f"custom_jvp rule {_loc(rule)} used a traced value that it closes over, "
            f"from a transformation that has finished.\n{e}\n  hint: pass every array the "
            "rule needs as an argument of the custom_jvp function") from None
    if not (isinstance(res, (tuple, list)) and len(res) == 2):
        raise _error(f"custom_jvp rule {_loc(rule)} must produce a pair (list or tuple of "
                     "length two) representing primal and tangent outputs, but got "
                     f"{type(res).__name__}")
    p_leaves, p_tree_out = tree_flatten(res[0])
    t_leaves, t_tree_out = tree_flatten(res[1])
    if call.out_tree is None:
        call.out_tree = p_tree_out
    if p_tree_out != call.out_tree:
        raise _error(f"custom_jvp rule {_loc(rule)} must produce primal outputs with the "
                     "same container (pytree) structure as the function's output, but got "
                     f"{p_tree_out} and {call.out_tree}")
    if t_tree_out != call.out_tree:
        raise _error(f"custom_jvp rule {_loc(rule)} must produce primal and tangent "
                     "outputs with equal container (pytree) structures, but got "
                     f"{p_tree_out} and {t_tree_out} respectively")
    out_avals = out_avals or [get_aval(x) for x in p_leaves]
    paths = _out_paths(call.out_tree)
    p_leaves = _check_out_leaves("custom_jvp", rule, "primal output", p_leaves, out_avals,
                                 paths, tangent=False)
    return p_leaves, _check_out_leaves("custom_jvp", rule, "tangent", t_leaves, out_avals,
                                       paths, tangent=True)


def _jvp_by_run(cj, call, b):
    """custom_jvp under the define-by-run trace `b`: the rule runs once, on the primal values
    (see `custom_by_run`); its tangent operations become a program of the tangent inputs."""
    mine = [by_run.is_mine(b, x) for x in call.diff_leaves]
    vals = [by_run.value_in(b, x) for x in call.diff_leaves]
    t = by_run.rule_builder(b, f"custom_jvp({cj.__name__})")
    try:
        with set_trace(t):
            t_ins = [t.new_input(ad.tangent_aval(a)) if m and ad.differentiable(a) else None
                     for a, m in zip(call.diff_avals, mine)]
            ts = [_zeros(a) if x is None else x for x, a in zip(t_ins, call.diff_avals)]
            p_leaves, t_leaves = _run_jvp_rule(cj, call, call.nondiff(call.nd_vals), vals, ts)
            p_outs = [t.lift(p) for p in p_leaves]
            nz = [type(x) is not ad.Zero for x in t_leaves]
            lin, _ = t.to_jaxpr([t.lift(x) for x, n in zip(t_leaves, nz) if n])
    finally:
        t.alive = False
    if any(p.val is None for p in p_outs):
        raise _error(f"custom_jvp rule {_loc(cj.jvp)} computed a primal output from the "
                     "tangents; the primal output must depend on the primals only")
    out_avals = [p.aval for p in p_outs]
    in_vars = [None if x is None else x.atom for x, m in zip(t_ins, mine) if m]
    linear = ad.Linearized(lin, t.known, in_vars, nz, out_avals)
    outs = by_run.record_known(b, [x for x, m in zip(call.diff_leaves, mine) if m],
                               [p.val for p in p_outs], out_avals, cj.__name__, linear.apply,
                               _primal_fun(cj.fun, call, mine, vals))
    return tree_unflatten(call.out_tree, outs)


def _primal_fun(fun, call, mine, vals):
    """The function of the traced leaves (the others fixed at `vals`), on flat lists."""
    def primal(*xs):
        it = iter(xs)
        diff = [next(it) if m else v for m, v in zip(mine, vals)]
        return tree_flatten(fun(*call.full_args(call.nd_vals, diff)))[0]
    return primal


class _BatchedJvpRule:
    """A jvp rule of a batched custom_jvp_call: the per-example rule under vmap."""

    def __init__(self, rule, n_new, dims, size, out_avals):
        self.rule, self.n_new, self.dims, self.size = rule, n_new, dims, size
        self.out_avals = out_avals

    def __call__(self, extra, primals, tangents):
        extra = list(extra[self.n_new:])
        ne, nd = len(extra), len(primals)
        d_dims = self.dims[ne:]

        def per_example(*a):
            return [ad.instantiate(t) for t in self.rule(a[:ne], a[ne:ne + nd], a[ne + nd:])]
        xs = extra + list(primals) + [ad.instantiate(t) for t in tangents]
        outs, o_dims = vmap_flat(per_example, xs, list(self.dims) + list(d_dims), self.size)
        return [move_to(o, d, 0, self.size) if ad.differentiable(a) else ad.Zero(a)
                for o, d, a in zip(outs, o_dims, self.out_avals)]


def _custom_jvp_call_jvp(primals, outs, tangents, *, jaxpr, num_consts, name, _rule):
    t_outs = [ad.Zero(a) for a in jaxpr.out_avals]
    if any(type(t) is not ad.Zero for t in tangents[num_consts:]):
        t_outs = _rule(primals[:num_consts], primals[num_consts:], tangents[num_consts:])
    return _add_body(t_outs, _body_tangents(jaxpr, primals, tangents, num_consts))


def _custom_jvp_call_batch(args, dims, *, jaxpr, num_consts, name, _rule):
    args, dims, size = _front(args, dims)
    bj, consts = pe.closure_convert(batching.batch_jaxpr(jaxpr, dims, size, True)[0])
    rule = _BatchedJvpRule(_rule, len(consts), dims, size, bj.out_avals)
    outs = custom_jvp_call_p.bind(*consts, *args, jaxpr=bj, num_consts=len(consts) + num_consts,
                                  name=name, _rule=rule)
    return outs, [0] * len(outs)


custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)
custom_jvp_call_p.calls_body = True  # once differentiated, a plain call of its function
custom_jvp_call_p.def_impl(lambda *args, jaxpr, **_: eval_eagerly(jaxpr, *args), raw=False)
custom_jvp_call_p.def_abstract_eval(lambda *avals, jaxpr, **_: list(jaxpr.out_avals))
ad.jvp_rules[custom_jvp_call_p] = _custom_jvp_call_jvp
batching.batch_rules[custom_jvp_call_p] = _custom_jvp_call_batch


# --- custom_vjp ---------------------------------------------------------------------------------

class custom_vjp:
    """A function with a custom reverse-mode rule given by `defvjp(fwd, bwd)`.

    `fwd(*args)` returns `(output, residuals)`; `bwd(*nondiff_args, residuals, ct)` returns
    a tuple with one cotangent (or None for zero) per differentiable argument. Forward mode
    (jvp, jacfwd) is not defined for such a function and raises a clear error, as in JAX.

    Args:
        fun: the function; its positional arguments are pytrees of arrays.
        nondiff_argnums: positions of arguments that are not differentiated (static values);
            `bwd` receives them first. `nondiff_argnames`: the same by parameter name.

    Example:
        >>> @custom_vjp
        ... def clip_grad(x):
        ...     return x
        >>> clip_grad.defvjp(lambda x: (x, None), lambda _, g: (fnp.clip(g, -1, 1),))
        >>> grad(lambda x: 5.0 * clip_grad(x))(1.0)
        Array(1., dtype=float32)
    """

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions(fun, nondiff_argnums, nondiff_argnames)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd, symbolic_zeros=False, optimize_remat=False):
        """Set the forward rule `fwd(*args) -> (out, residuals)` and the backward rule
        `bwd(*nondiff_args, residuals, ct) -> tuple of cotangents` (JAX's keyword options
        are accepted at their defaults)."""
        _no_symbolic_zeros(symbolic_zeros, "custom_vjp.defvjp")
        if optimize_remat:
            raise errors.FuncgradValueError("custom_vjp.defvjp: optimize_remat=True is not "
                                            f"supported\n{errors.where()}")
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {self.__name__} "
                                 "using defvjp.")
        args = _resolve_kwargs(self.fun, args, kwargs)
        trace = current_trace()
        if trace is None:
            return self.fun(*args)
        call = _Call(self.fun, args, self.nondiff_argnums, "custom_vjp")
        mode = by_run.by_run_mode(trace, call)
        if mode == "below":
            args = tree_map(lambda x: by_run.value_in(trace, x), args)
            with set_trace(trace.parent):
                return self(*args)
        if mode == "rule":
            return _vjp_by_run(self, call, trace)
        closed, consts = call.trace("custom_vjp")
        fwd = _Fwd(self, call, len(consts))
        outs = custom_vjp_call_p.bind(*consts, *call.nd_vals, *call.diff_leaves, jaxpr=closed,
                                      num_consts=len(consts) + len(call.nd_vals),
                                      name=self.__name__, _fwd=fwd)
        return tree_unflatten(call.out_tree, outs)


class _Fwd:
    """The user's fwd on flat lists: (extra values, primals) -> (outs, residuals, bwd)."""

    def __init__(self, cv, call, n_closure):
        self.cv, self.call, self.n_closure = cv, call, n_closure

    def __call__(self, extra, primals):
        call, fwd = self.call, self.cv.fwd
        nd_vals = list(extra[self.n_closure:])
        try:
            res = fwd(*call.full_args(nd_vals, list(primals)))
        except errors.TracerLeakError as e:
            raise errors.TracerLeakError(
                f"custom_vjp fwd rule {_loc(fwd)} used a traced value that it closes over, "
                f"from a transformation that has finished.\n{e}\n  hint: pass every array "
                "the rule needs as an argument of the custom_vjp function") from None
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise _error(f"custom_vjp fwd rule {_loc(fwd)} must produce a pair (list or tuple "
                         "of length two) where the first element is the primal output and the "
                         f"second the residuals, but got {type(res).__name__}")
        out_leaves, out_tree = tree_flatten(res[0])
        if call.out_tree is None:  # the function was not traced (see `_vjp_by_run`)
            call.out_tree, call.out_avals = out_tree, [get_aval(x) for x in out_leaves]
        if out_tree != call.out_tree:
            raise _error(f"custom_vjp fwd rule {_loc(fwd)} produced a primal output with "
                         f"structure {out_tree}, but the function's output has structure "
                         f"{call.out_tree}")
        _check_out_leaves("custom_vjp fwd", fwd, "primal output", out_leaves, call.out_avals,
                          _out_paths(out_tree), tangent=False)
        res_paths, res_tree = tree_flatten_with_path(res[1])
        for path, r in res_paths:
            if not (_is_array(r) or isinstance(r, (bool, int, float, complex))):
                raise _error(f"custom_vjp fwd rule {_loc(fwd)} returned a residual of type "
                             f"{type(r).__name__} at residuals{keystr(path)}; residuals must "
                             "be arrays (pass static values with nondiff_argnums)")
        bwd = _Bwd(self.cv, call, res_tree, len(nd_vals))
        return out_leaves, nd_vals + [r for _, r in res_paths], bwd


class _Bwd:
    """The user's bwd on flat lists: (residuals, output cts) -> one ct (or None) per input."""

    def __init__(self, cv, call, res_tree, n_nd):
        self.cv, self.call, self.res_tree, self.n_nd = cv, call, res_tree, n_nd
        self.in_avals = call.diff_avals

    def __call__(self, res, cts):
        call, bwd = self.call, self.cv.bwd
        res = [_as_array(x) for x in res]  # a rank-0 residual may come back as a literal
        nd = call.nondiff(res[:self.n_nd])
        r = tree_unflatten(self.res_tree, res[self.n_nd:])
        ct = tree_unflatten(call.out_tree, [_as_array(ad.instantiate(c)) for c in cts])
        try:
            got = bwd(*nd, r, ct)
        except errors.TracerLeakError as e:
            raise errors.TracerLeakError(
                f"custom_vjp bwd rule {_loc(bwd)} used a traced value that it closes over, "
                f"from a transformation that has finished.\n{e}\n  hint: pass what bwd needs "
                "through the residuals returned by fwd") from None
        return self._check(got)

    def _check(self, got):
        call, bwd = self.call, self.cv.bwd
        args = tree_unflatten(call.diff_tree, call.diff_avals)
        if isinstance(got, list) and len(got) == len(args):
            got = tuple(got)
        if not isinstance(got, tuple) or len(got) != len(args):
            what = (f"a tuple of length {len(got)}" if isinstance(got, tuple)
                    else f"a value of type {type(got).__name__}")
            raise _error(f"custom_vjp bwd rule {_loc(bwd)} must produce a tuple with one "
                         f"cotangent per differentiable argument ({len(args)}: "
                         f"{', '.join(call.diff_names)}), but got {what}",
                         hint="return a 1-tuple `(ct,)` for a function of one argument; use "
                              "None for an argument without a cotangent")
        cts = []
        for i, (g, arg) in enumerate(zip(got, args)):
            n = len(tree_flatten(arg)[0])
            if g is None:
                cts += [None] * n
                continue
            leaves, tree = tree_flatten(g)
            if tree != tree_structure(arg):
                leaves, tree = tree_flatten(g, is_leaf=lambda x: x is None)
            if tree != tree_structure(arg):
                raise _error(f"custom_vjp bwd rule {_loc(bwd)} produced a cotangent with "
                             f"structure {tree} for argument {call.diff_names[i]}, which has "
                             f"structure {tree_structure(arg)}")
            cts += leaves
        return [self._leaf(c, aval, path) for c, aval, path
                in zip(cts, call.diff_avals, call.diff_paths)]

    def _leaf(self, c, aval, path):
        if c is None or not ad.differentiable(aval):
            return None
        got = get_aval(c)
        if got.shape != aval.shape:
            raise _error(f"custom_vjp bwd rule {_loc(self.cv.bwd)} produced a cotangent of "
                         f"shape {got.str_short()} for argument {path}, but that argument has "
                         f"shape {aval.str_short()} (expected a cotangent of shape "
                         f"{aval.shape}, got {got.shape})")
        if not dtypes.is_inexact(got.dtype):
            raise _error(f"custom_vjp bwd rule {_loc(self.cv.bwd)} produced a cotangent of "
                         f"dtype {got.dtype} for argument {path} of type {aval.str_short()}")
        return c if got.dtype == aval.dtype else _convert(c, aval.dtype)


def _as_array(x):
    return x if isinstance(x, ArrayBase) else to_array(x)


class _BatchedFwd:
    """fwd of a batched custom_vjp_call: the per-example fwd under vmap; its bwd likewise."""

    def __init__(self, fwd, n_new, dims, size):
        self.fwd, self.n_new, self.dims, self.size = fwd, n_new, dims, size

    def __call__(self, extra, primals):
        extra = list(extra[self.n_new:])
        ne, store = len(extra), {}

        def per_example(*a):
            outs, res, bwd = self.fwd(a[:ne], a[ne:])
            store["bwd"], store["n"] = bwd, len(outs)
            return list(outs) + list(res)
        vals, dims = vmap_flat(per_example, extra + list(primals), self.dims, self.size)
        vals = [move_to(v, d, 0, self.size) for v, d in zip(vals, dims)]
        n = store["n"]
        return vals[:n], vals[n:], _BatchedBwd(store["bwd"], self.dims[ne:], self.size)


class _BatchedBwd:
    """bwd under vmap: residuals and cts mapped along 0; cts of unmapped inputs are summed."""

    def __init__(self, bwd, in_dims, size):
        self.bwd, self.in_dims, self.size = bwd, in_dims, size
        self.in_avals = [a if d is None else batched_aval(a, size)
                         for a, d in zip(bwd.in_avals, in_dims)]

    def __call__(self, res, cts):
        from funcgrad import lax
        nr = len(res)

        def per_example(*a):
            got = self.bwd(a[:nr], a[nr:])
            return [_zeros(av) if c is None else c for c, av in zip(got, self.bwd.in_avals)]
        xs = list(res) + [ad.instantiate(c) for c in cts]
        outs, dims = vmap_flat(per_example, xs, [0] * len(xs), self.size)
        outs = [move_to(o, d, 0, self.size) for o, d in zip(outs, dims)]
        return [lax.reduce_sum(o, (0,)) if d is None else o for o, d in zip(outs, self.in_dims)]


# fwd's residuals computed by the eager impl under a define-by-run trace, keyed by the id of
# the first output; the jvp rule takes them (so grad runs fwd once, as JAX does, not fun + fwd).
# An entry leaves when the rule takes it or when that output array dies.
_saved_residuals = {}


def _custom_vjp_call_impl(*args, jaxpr, num_consts, name, _fwd):
    trace = computing_known_for()
    if not (isinstance(trace, Builder) and trace.compute_known and jaxpr.out_avals):
        return eval_eagerly(jaxpr, *args)
    with set_trace(None):
        outs, res, bwd = _fwd(args[:num_consts], args[num_consts:])
    outs = [_as_out(o, a) for o, a in zip(outs, jaxpr.out_avals)]
    key = id(outs[0])
    _saved_residuals[key] = (weakref.ref(outs[0], lambda _, k=key: _saved_residuals.pop(k, None)),
                             res, bwd)
    return outs


def _as_out(x, aval):
    x = to_array(x)
    return x if x.dtype == aval.dtype else Array(np.asarray(x._value, aval.dtype), aval.weak_type)


def _fwd_results(_fwd, primals, outs, num_consts):
    saved = _saved_residuals.pop(id(outs[0]), None) if outs else None
    if saved is not None and saved[0]() is outs[0]:
        return saved[1], saved[2]
    return _fwd(primals[:num_consts], primals[num_consts:])[1:]


def _custom_vjp_call_jvp(primals, outs, tangents, *, jaxpr, num_consts, name, _fwd):
    t_outs = [ad.Zero(a) for a in jaxpr.out_avals]
    diff_t = tangents[num_consts:]
    if any(type(t) is not ad.Zero for t in diff_t):
        res, bwd = _fwd_results(_fwd, primals, outs, num_consts)
        t_outs = _lin_tangents(res, bwd, diff_t, jaxpr.out_avals, name)
    return _add_body(t_outs, _body_tangents(jaxpr, primals, tangents, num_consts))


def _lin_tangents(res, bwd, diff_t, avals, name):
    """The tangent outputs: one `custom_vjp_lin` equation of the nonzero tangents `diff_t`."""
    nz = tuple(type(t) is not ad.Zero for t in diff_t)
    if not any(nz):
        return [ad.Zero(a) for a in avals]
    diff_out = tuple(ad.differentiable(a) for a in avals)
    lin = custom_vjp_lin_p.bind(*res, *[t for t, n in zip(diff_t, nz) if n], num_res=len(res),
                                nz=nz, out_avals=tuple(avals), diff_out=diff_out, name=name,
                                _bwd=bwd)
    it = iter(lin)
    return [next(it) if d else ad.Zero(a) for a, d in zip(avals, diff_out)]


def _vjp_by_run(cv, call, b):
    """custom_vjp under the define-by-run trace `b`: `fwd` runs once, on the primal values
    (see `custom_by_run`); the function itself is not run."""
    mine = [by_run.is_mine(b, x) for x in call.diff_leaves]
    vals = [by_run.value_in(b, x) for x in call.diff_leaves]
    with set_trace(b.parent):
        outs, res, bwd = _Fwd(cv, call, 0)(list(call.nd_vals), vals)
    avals = list(call.out_avals)
    outs = [_as_out(o, a) if isinstance(o, (Array, np.ndarray, np.generic, int, float)) else o
            for o, a in zip(outs, avals)]

    def jvp(tangents):
        it = iter(tangents)
        diff_t = [next(it) if m else ad.Zero(a) for m, a in zip(mine, call.diff_avals)]
        return _lin_tangents(res, bwd, diff_t, avals, cv.__name__)
    outs = by_run.record_known(b, [x for x, m in zip(call.diff_leaves, mine) if m], outs, avals,
                               cv.__name__, jvp, _primal_fun(cv.fun, call, mine, vals))
    return tree_unflatten(call.out_tree, outs)


def _custom_vjp_call_batch(args, dims, *, jaxpr, num_consts, name, _fwd):
    args, dims, size = _front(args, dims)
    bj, consts = pe.closure_convert(batching.batch_jaxpr(jaxpr, dims, size, True)[0])
    fwd = _BatchedFwd(_fwd, len(consts), dims, size)
    outs = custom_vjp_call_p.bind(*consts, *args, jaxpr=bj, num_consts=len(consts) + num_consts,
                                  name=name, _fwd=fwd)
    return outs, [0] * len(outs)


custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True)
custom_vjp_call_p.calls_body = True
custom_vjp_call_p.def_impl(_custom_vjp_call_impl, raw=False)
custom_vjp_call_p.def_abstract_eval(lambda *avals, jaxpr, **_: list(jaxpr.out_avals))
ad.jvp_rules[custom_vjp_call_p] = _custom_vjp_call_jvp
batching.batch_rules[custom_vjp_call_p] = _custom_vjp_call_batch


# --- custom_vjp_lin: the linear equation holding fwd's residuals --------------------------------

def _custom_vjp_lin_abstract(*avals, out_avals, diff_out, **_):
    return [ad.tangent_aval(a) for a, d in zip(out_avals, diff_out) if d]


def _custom_vjp_lin_impl(*args, name, **_):
    raise _error(f"can't apply forward-mode autodiff (jvp) to a custom_vjp function `{name}`: "
                 "it only defines reverse mode (grad, vjp, jacrev)",
                 hint="use custom_jvp to define a rule that serves both modes, or use "
                      "jacrev/vjp instead of jvp/jacfwd/hessian")


def _custom_vjp_lin_transpose(cts, *args, num_res, nz, out_avals, diff_out, name, _bwd):
    it = iter(cts)
    full = [ad.instantiate(next(it)) if d else _zeros(a) for a, d in zip(out_avals, diff_out)]
    got = _bwd(args[:num_res], full)
    return [None] * num_res + [c for c, n in zip(got, nz) if n]


def _custom_vjp_lin_batch(args, dims, *, num_res, nz, out_avals, diff_out, name, _bwd):
    size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    args = [move_to(x, d, 0, size) for x, d in zip(args, dims)]
    b_avals = tuple(batched_aval(a, size) for a in out_avals)
    bwd = _BatchedBwd(_bwd, [0] * len(_bwd.in_avals), size)
    outs = custom_vjp_lin_p.bind(*args, num_res=num_res, nz=nz, out_avals=b_avals,
                                 diff_out=diff_out, name=name, _bwd=bwd)
    return outs, [0] * len(outs)


custom_vjp_lin_p = Primitive("custom_vjp_lin", multiple_results=True)
custom_vjp_lin_p.def_impl(_custom_vjp_lin_impl, raw=False)
custom_vjp_lin_p.def_abstract_eval(_custom_vjp_lin_abstract)
ad.jvp_rules[custom_vjp_lin_p] = lambda primals, outs, tangents, name, **_: _custom_vjp_lin_impl(
    name=name)
ad.transpose_rules[custom_vjp_lin_p] = _custom_vjp_lin_transpose
batching.batch_rules[custom_vjp_lin_p] = _custom_vjp_lin_batch
