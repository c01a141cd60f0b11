"""The pytree-level transforms of autodiff: grad, value_and_grad, vjp, jvp, linearize,
make_jaxpr. Each flattens pytrees and calls the flat machinery in `interpreters.ad`.
"""

import contextlib
import functools

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import ArrayBase, Tracer, get_aval, to_array, trace_to_jaxpr
from funcgrad.interpreters import ad
from funcgrad.pullback import vjp_function
from funcgrad.tree_util import (
    keystr,
    tree_flatten,
    tree_flatten_with_path,
    tree_map,
    tree_unflatten,
)


def _flat_fun(fun, in_tree, out_store, has_aux=False):
    """Wrap a pytree function as flat-in/flat-out; the output tree goes to out_store."""
    def flat(*leaves):
        args = tree_unflatten(in_tree, list(leaves))
        out = fun(*args)
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise errors.FuncgradTypeError(
                    "has_aux=True requires the function to return a pair (output, aux), got "
                    f"{type(out).__name__}\n{errors.where()}")
            out, aux = out
        out_leaves, out_tree = tree_flatten(out)
        out_store["tree"], out_store["aux"] = out_tree, aux
        return out_leaves
    return flat


def _lower_aux(aux):
    """Aux outputs leave the finished define-by-run trace as their known values."""
    def lower(x):
        while isinstance(x, Tracer) and not x._trace.alive and x.val is not None:
            x = x.val
        return x
    return tree_map(lower, aux)


def _argnums_tuple(argnums, nargs, name):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not -nargs <= n < nargs:
            raise errors.FuncgradValueError(
                f"{name}: argnums={argnums} is out of range for {nargs} positional "
                f"argument(s)\n{errors.where()}")
    return tuple(n % nargs for n in nums)


def array_leaf(name, x, where):
    """`x` (a leaf of a differentiated argument) as an Array, tracers as they are: canonical,
    so an output that is an input comes back as every other output does (float32 without
    x64). Anything else is an error naming the transform and `where` (the leaf's path)."""
    if isinstance(x, ArrayBase):
        return x
    try:
        return to_array(x)
    except (TypeError, ValueError, OverflowError) as e:
        raise errors.FuncgradTypeError(
            f"{name}: {where} is not an array: {type(x).__name__} {errors.short_repr(x, 40)} "
            f"({e})\n{errors.where()}\n  hint: transforms take pytrees of arrays and Python "
            "numbers; pass other values through a closure or functools.partial (or leave them "
            "out of argnums).") from None


def array_leaves(name, tree, what):
    """(leaves of `tree` as `array_leaf` makes them, its structure); `what` names the tree."""
    pairs, treedef = tree_flatten_with_path(tree)
    return [array_leaf(name, x, f"{what}{keystr(path)}") for path, x in pairs], treedef


def _check_float_inputs(name, args, argnums, holomorphic=False, allow_int=False):
    for i in argnums:
        for path, leaf in tree_flatten_with_path(args[i])[0]:
            aval = get_aval(array_leaf(name, leaf, f"argument {i}{keystr(path)}"))
            if allow_int and dtypes.kind(aval.dtype) in "biu":
                continue
            if not dtypes.is_inexact(aval.dtype):
                raise errors.FuncgradTypeError(
                    f"{name} requires real- or complex-valued inputs (input dtype that is a "
                    f"sub-dtype of float), but argument {i}{keystr(path)} has dtype "
                    f"{aval.dtype} ({aval}).\n{errors.where(errors.user_frame(3))}\n"
                    "  hint: convert it with .astype(fnp.float32), differentiate with "
                    "respect to another argument via argnums, or pass allow_int=True.")
            if holomorphic and dtypes.kind(aval.dtype) != "c":
                raise errors.FuncgradTypeError(
                    f"{name} with holomorphic=True requires inputs with complex dtype, but "
                    f"argument {i}{keystr(path)} has dtype {aval.dtype} ({aval}).\n"
                    f"{errors.where(errors.user_frame(3))}\n  hint: convert it with "
                    ".astype(fnp.complex64), or drop holomorphic=True.")


def _check_output_dtype(name, aval, holomorphic, where="the output"):
    """JAX's rule for the outputs of reverse-mode derivatives (`grad`, `jacrev`): real
    floating point, or complex with `holomorphic=True`. Returns an error text or None."""
    kind, got = dtypes.kind(aval.dtype), f"but {where} has type {aval.str_short()}"
    if holomorphic and kind != "c":
        return f"{name} with holomorphic=True requires outputs with complex dtype, {got}"
    if not holomorphic and kind == "c":
        return (f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
                f"np.floating), {got}. For holomorphic differentiation, pass "
                "holomorphic=True. For differentiating non-holomorphic functions involving "
                "complex outputs, use vjp directly")
    if kind not in "fc":
        return (f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
                f"np.floating), {got}. For differentiating functions with integer outputs, "
                "use vjp directly")
    return None


def _no_reduce_axes(name, reduce_axes):
    """JAX's deprecated `reduce_axes`: accepted empty, an error otherwise (as in JAX)."""
    if reduce_axes:
        raise errors.FuncgradNotImplementedError(
            f"{name}: the reduce_axes argument is deprecated (in JAX too) and not supported\n"
            f"{errors.where()}")


def vjp(fun, *primals, has_aux=False, reduce_axes=()):
    """Reverse mode: `(out, vjp_fn)` (plus `aux`); `vjp_fn(ct)` returns one ct per primal.

    `vjp_fn` is a pytree (a `tree_util.Partial` whose leaves are the residuals), as in JAX:
    it can be returned from `jit` and passed into it.

    Example:
        >>> out, f_vjp = vjp(fnp.sin, 0.0)
        >>> f_vjp(1.0)
        (Array(1., dtype=float32),)
    """
    _no_reduce_axes("vjp", reduce_axes)
    leaves, in_tree = array_leaves("vjp", primals, "primals")
    store = {}
    outs, _, lin = ad.vjp_flat(_flat_fun(fun, in_tree, store, has_aux), leaves)
    out_tree = store["tree"]
    in_avals = [get_aval(x) for x in leaves]
    out_avals = [get_aval(o) for o in outs]
    vjp_fn = vjp_function(fun, lin, in_tree, out_tree, in_avals, out_avals, _ct_dtype)
    out = tree_unflatten(out_tree, outs)
    return (out, vjp_fn, _lower_aux(store["aux"])) if has_aux else (out, vjp_fn)


def _ct_dtype(i, ct, aval):
    """A cotangent in its output's dtype: a real one for a complex output is converted (as a
    weak Python scalar would be); a complex one for a real output is an error, as in JAX."""
    ca = get_aval(ct)
    if ca.dtype == aval.dtype or not dtypes.is_inexact(aval.dtype):
        return ct
    if dtypes.kind(ca.dtype) == "c" and dtypes.kind(aval.dtype) != "c":
        raise errors.FuncgradTypeError(
            f"vjp function: cotangent leaf {i} has dtype {ca.dtype}, but the output is real "
            f"({aval.str_short()}); its cotangent must be real too\n{errors.where()}")
    from funcgrad import lax
    return lax.convert_element_type(ct, aval.dtype)


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False,
                   reduce_axes=()):
    """`(value, grad)` of a scalar function; with has_aux, `((value, aux), grad)`.

    With `holomorphic=True` the inputs and the output must be complex and the result is the
    complex derivative (JAX's convention, see `grad`). With `allow_int=True`, integer and
    bool inputs are allowed; their gradient is a zero NumPy array of JAX's dtype `float0`
    (it holds no data). `reduce_axes` (deprecated in JAX) must be empty.

    Example:
        >>> value_and_grad(lambda x: x ** 2)(3.0)
        (Array(9., dtype=float32), Array(6., dtype=float32))
    """
    _no_reduce_axes("grad", reduce_axes)

    @functools.wraps(fun)
    def vg(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "grad")
        _check_float_inputs("grad", args, nums, holomorphic, allow_int)

        def partial(*diff):
            full = list(args)
            for n, d in zip(nums, diff):
                full[n] = d
            return fun(*full, **kwargs)
        res = vjp(partial, *[args[n] for n in nums], has_aux=has_aux)
        out, f_vjp = res[0], res[1]
        aval = get_aval(out) if not isinstance(out, (tuple, list, dict)) else None
        if aval is None or aval.shape != ():
            what = (f"a {type(out).__name__}" if aval is None else str(aval))
            raise errors.FuncgradTypeError(
                "grad requires a scalar output (shape ()), but the function returned "
                f"{what}.\n{errors.where(errors.user_frame(2))}\n"
                "  hint: reduce the output (e.g. .sum() or .mean()), or use vjp/jacrev for "
                "non-scalar outputs.")
        bad = _check_output_dtype("grad", aval, holomorphic)
        if bad:
            raise errors.FuncgradTypeError(f"{bad}.\n{errors.where(errors.user_frame(2))}")
        from funcgrad import lax
        g = f_vjp(lax.full((), 1.0, aval.dtype))
        if allow_int:
            g = tuple(tree_map(_float0_if_int, gi, args[n]) for gi, n in zip(g, nums))
        g = g[0] if isinstance(argnums, int) else tuple(g)
        return ((out, res[2]), g) if has_aux else (out, g)
    return vg


def _float0_if_int(g, x):
    """The gradient of input leaf `x`: JAX's `float0` zeros for an integer or bool input."""
    aval = get_aval(array_leaf("grad", x, "input"))
    return np.zeros(aval.shape, dtypes.float0) if dtypes.kind(aval.dtype) in "biu" else g


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
    """The gradient of a scalar function with respect to the arguments `argnums`.

    Complex numbers follow JAX: the gradient is the vjp of the cotangent 1, so for a
    real-valued `f` of complex `z = x + iy` it is `df/dx - i df/dy` (the conjugate of the
    steepest-ascent direction); with `holomorphic=True` (complex inputs and output) it is
    the complex derivative `f'(z)`.

    Example:
        >>> grad(lambda x: x ** 3)(2.0)
        Array(12., dtype=float32)
        >>> grad(lambda z: abs(z) ** 2)(3 + 4j)
        Array(6.-8.j, dtype=complex64)
        >>> grad(fnp.sin, holomorphic=True)(0j)
        Array(1.+0.j, dtype=complex64)

    `allow_int` and `reduce_axes`: as in `value_and_grad`.
    """
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @functools.wraps(fun)
    def g(*args, **kwargs):
        res = vg(*args, **kwargs)
        return (res[1], res[0][1]) if has_aux else res[1]
    return g


def jvp(fun, primals, tangents, has_aux=False):
    """Forward mode: `(out, tangent_out)` (plus `aux`) of `fun` at `primals`."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise errors.FuncgradTypeError("jvp: primals and tangents must be tuples or lists, got "
                                       f"{type(primals).__name__} and "
                                       f"{type(tangents).__name__}\n{errors.where()}")
    p_leaves, in_tree = array_leaves("jvp", tuple(primals), "primals")
    t_leaves, t_tree = array_leaves("jvp", tuple(tangents), "tangents")
    if t_tree != in_tree:
        raise errors.FuncgradTypeError(f"jvp: tangents have structure {t_tree} but primals "
                                       f"have structure {in_tree}\n{errors.where()}")
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        pa, ta = get_aval(p), get_aval(t)
        if pa.shape != ta.shape:
            raise errors.FuncgradTypeError(
                f"jvp: tangent leaf {i} has shape {ta.shape} but its primal has shape "
                f"{pa.shape}\n{errors.where()}")
    store = {}
    jaxpr, known, outs = ad.trace_known(_flat_fun(fun, in_tree, store, has_aux), p_leaves,
                                        "jvp")
    ts = [t if dtypes.is_inexact(get_aval(p).dtype) else ad.Zero(get_aval(p))
          for p, t in zip(p_leaves, t_leaves)]
    outs, t_outs = ad.jvp_replay(jaxpr, known, outs, ts)
    t_outs = [ad.instantiate(t) for t in t_outs]
    out_tree = store["tree"]
    res = (tree_unflatten(out_tree, outs), tree_unflatten(out_tree, t_outs))
    return res + (_lower_aux(store["aux"]),) if has_aux else res


def linearize(fun, *primals, has_aux=False):
    """`(out, f_jvp)`: `f_jvp(*tangents)` evaluates the linearized function (no re-trace);
    with `has_aux` (`fun` returns `(out, aux)`), `(out, f_jvp, aux)`, as in JAX."""
    leaves, in_tree = array_leaves("linearize", primals, "primals")
    store = {}
    outs, lin = ad.linearize_flat(_flat_fun(fun, in_tree, store, has_aux), leaves)
    out_tree = store["tree"]

    def f_jvp(*tangents):
        t_leaves, t_tree = array_leaves("linearize", tangents, "tangents")
        if t_tree != in_tree:
            raise errors.FuncgradTypeError(f"linearize: tangents have structure {t_tree}, "
                                           f"expected {in_tree}\n{errors.where()}")
        t_outs = lin.apply(t_leaves)
        return tree_unflatten(out_tree, [ad.instantiate(t) for t in t_outs])
    out = tree_unflatten(out_tree, outs)
    return (out, f_jvp, _lower_aux(store["aux"])) if has_aux else (out, f_jvp)


def make_jaxpr(fun, static_argnums=(), axis_env=None, return_shape=False):
    """A function returning the traced IR (a ClosedJaxpr) of `fun` at example arguments.

    `axis_env`: `(name, size)` pairs binding axis names for the collectives `fun` calls
    (`lax.psum(x, "i")`), as under `vmap(axis_name=...)`. With `return_shape`, the function
    returns `(jaxpr, out)`, `out` the output's pytree of `ShapeDtypeStruct`s, as in JAX.

    Example:
        >>> print(make_jaxpr(fnp.sin)(fnp.zeros(3)))
        { lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }
    """
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    axis_env = list(axis_env or ())

    @functools.wraps(fun)
    def make(*args, **kwargs):
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_flatten(dyn)
        store = {}

        def with_static(*dyn_args):
            it = iter(dyn_args)
            full = [a if i in static else next(it) for i, a in enumerate(args)]
            return fun(*full, **kwargs)
        flat = _flat_fun(with_static, in_tree, store)
        avals = [get_aval(x) for x in leaves]
        with contextlib.ExitStack() as stack:
            if axis_env:
                from funcgrad.lax import parallel
                names = frozenset(name for name, _ in axis_env)
                avals = [a.update(vma=(a.vma or frozenset()) | names) for a in avals]
                for name, size in axis_env:
                    stack.enter_context(parallel.extend_axis_env(name, size, "vmap"))
            closed = trace_to_jaxpr(flat, avals)
        if not return_shape:
            return closed
        from funcgrad.abstract_eval import ShapeDtypeStruct
        shapes = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                  for a in closed.out_avals]
        return closed, tree_unflatten(store["tree"], shapes)
    return make
