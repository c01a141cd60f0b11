"""Transforms built from the others, as JAX has them: `linear_transpose`,
`closure_convert`, `custom_gradient`.

Imports the core, the interpreters, tree_util, `api` and `custom_derivatives`.
"""

from funcgrad import dtypes, errors
from funcgrad.api import _flat_fun, array_leaves
from funcgrad.core import Tracer, eval_jaxpr, get_aval, trace_to_jaxpr
from funcgrad.custom_derivatives import custom_vjp
from funcgrad.interpreters import ad
from funcgrad.interpreters import partial_eval as pe
from funcgrad.tree_util import Partial, tree_flatten, tree_unflatten, treedef_is_leaf

__all__ = ["closure_convert", "custom_gradient", "linear_transpose"]


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function `fun`, traced at arguments shaped as `primals`:
    `transposed(ct)` (one cotangent shaped as `fun`'s output) returns a tuple with one entry
    per primal.

    Raises:
        FuncgradTypeError: `fun` is not linear in its inputs (a primitive without a transpose
            rule is applied to them), or a cotangent of the wrong structure or shape.

    Example:
        >>> t = linear_transpose(lambda x: 3.0 * x.sum(), fnp.ones(2))
        >>> t(1.0)
        (Array([3., 3.], dtype=float32),)
    """
    if reduce_axes:
        raise errors.FuncgradValueError("linear_transpose: reduce_axes is deprecated (in JAX "
                                        f"too) and not supported\n{errors.where()}")
    leaves, in_tree = array_leaves("linear_transpose", primals, "primals")
    in_avals = [get_aval(x) for x in leaves]
    for a in in_avals:
        if dtypes.kind(a.dtype) not in "fc":
            raise errors.FuncgradTypeError(
                f"linear_transpose only supports [float or complex] -> [float or complex], "
                f"got an input of type {a.str_short()}\n{errors.where()}")
    store = {}
    closed = trace_to_jaxpr(_flat_fun(fun, in_tree, store), in_avals, "linear_transpose")
    out_tree, out_avals = store["tree"], closed.out_avals

    def transposed(ct, consts):
        ct_leaves, ct_tree = array_leaves("linear_transpose", ct, "cotangent")
        if ct_tree != out_tree or any(get_aval(c).shape != a.shape
                                      for c, a in zip(ct_leaves, out_avals)):
            raise errors.FuncgradTypeError(
                f"linear_transpose: the cotangent must be structured and shaped as the "
                f"function's output, {tree_unflatten(out_tree, out_avals)}, got "
                f"{tree_unflatten(ct_tree, [get_aval(c) for c in ct_leaves])}"
                f"\n{errors.where()}")
        undefined = [ad.UndefinedPrimal(a) for a in in_avals]
        cts = ad.backward_pass(closed.jaxpr, {}, ct_leaves, consts, undefined)
        return tuple(tree_unflatten(in_tree, [ad.instantiate(c) for c in cts]))
    return Partial(lambda consts, ct: transposed(ct, consts), list(closed.consts))


def closure_convert(fun, *example_args):
    """`(converted, consts)`: `converted(*args, *consts)` computes `fun(*args)` with the
    values `fun` closes over that are traced and inexact (those a derivative may depend on)
    passed explicitly as `consts`, as `custom_vjp` needs its residual functions (JAX's
    `closure_convert`). Other closed-over values stay inside `converted`.

    Example:
        >>> conv, consts = closure_convert(lambda x: x * 2, 1.0)
        >>> conv(3.0), consts
        (Array(6., dtype=float32, weak_type=True), [])
    """
    leaves, in_tree = array_leaves("closure_convert", example_args, "example_args")
    store = {}
    closed = trace_to_jaxpr(_flat_fun(fun, in_tree, store), [get_aval(x) for x in leaves],
                            "closure_convert")
    jaxpr, out_tree = closed.jaxpr, store["tree"]
    hoist = [isinstance(c, Tracer) and dtypes.kind(get_aval(c).dtype) in "fc"
             for c in closed.consts]
    kept = [c for c, h in zip(closed.consts, hoist) if not h]
    hoisted = [c for c, h in zip(closed.consts, hoist) if h]

    def converted(*args_and_consts):
        n = len(args_and_consts) - len(hoisted)
        args, given = args_and_consts[:n], iter(args_and_consts[n:])
        flat, tree = tree_flatten(tuple(args))
        if tree != in_tree:
            raise errors.FuncgradTypeError(
                f"closure_convert: the converted function takes arguments structured as "
                f"{in_tree}, got {tree}\n{errors.where()}")
        kept_it = iter(kept)
        consts = [next(given) if h else next(kept_it) for h in hoist]
        return tree_unflatten(out_tree, eval_jaxpr(jaxpr, consts, *flat))
    return converted, hoisted


class _Rule:
    """A `custom_gradient` rule traced into a program (static) applied to its closed-over
    values (the leaves of the residual `Partial`)."""

    def __init__(self, program, in_tree, out_tree):
        self.program, self.in_tree, self.out_tree = program, in_tree, out_tree

    def __call__(self, *args):
        *consts, ct = args
        ct_flat, ct_tree = tree_flatten((ct,))
        if ct_tree != self.out_tree:
            raise errors.FuncgradTypeError(
                f"custom_gradient: the cotangent is structured as {ct_tree}, the output as "
                f"{self.out_tree}\n{errors.where()}")
        out = tree_unflatten(self.in_tree, eval_jaxpr(self.program.jaxpr, [], *consts,
                                                      *ct_flat))
        return (out,) if treedef_is_leaf(self.in_tree) else out


def custom_gradient(fun):
    """A function with a gradient written by hand: `fun(*args)` returns `(out, rule)` where
    `rule(ct)` gives the cotangents of `args` (a tuple, or one value for one argument); the
    rule may close over values computed in `fun`. Built on `custom_vjp`, as JAX's.

    Example:
        >>> @custom_gradient
        ... def f(x):
        ...     return fnp.sin(x), lambda g: g * 10.0
        >>> grad(f)(0.0)
        Array(10., dtype=float32, weak_type=True)
    """
    @custom_vjp
    def wrapped(*args):
        return fun(*args)[0]

    def fwd(*args):
        out, rule = fun(*args)
        out_flat, out_tree = tree_flatten((out,))
        in_store = {}

        def flat_rule(*cts):
            res = rule(*tree_unflatten(out_tree, list(cts)))
            flat, in_store["tree"] = tree_flatten(res)
            return flat
        avals = [ad.tangent_aval(get_aval(o)) for o in out_flat]
        program, consts = pe.closure_convert(flat_rule, avals, "custom_gradient")
        return out, Partial(_Rule(program, in_store["tree"], out_tree), *consts)

    wrapped.defvjp(fwd, lambda res, ct: res(ct))
    return wrapped
