"""`pure_callback`: call Python (NumPy, SciPy) code from inside transformed functions.

One primitive, `pure_callback_p`, with multiple results. Eagerly and in compiled programs
its impl calls the user's function on concrete Arrays and checks the results against the
declared shapes and dtypes. It is pure: dead-code elimination may drop an unused call, and
a transform may call it several times. Under `vmap` the call follows `vmap_method`, as in
JAX; it has no derivative (use `custom_jvp`/`custom_vjp` around it). Imports the core, the
interpreters, lax (the sequential batching loop) and the pytree utilities.
"""

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import Array, Primitive, ShapedArray, get_aval
from funcgrad.core.array import host_value
from funcgrad.interpreters import ad, batching
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = ["VmapMethodError", "pure_callback", "pure_callback_p"]

class VmapMethodError(errors.FuncgradError, NotImplementedError):
    """`vmap` of a `pure_callback` given no `vmap_method` (JAX's NotImplementedError)."""


VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized", None)


class _FlatCallback:
    """The user's callback as a function of flat leaves (a hashable primitive parameter:
    equal for the same function and argument structure)."""

    __slots__ = ("fun", "in_tree")

    def __init__(self, fun, in_tree):
        self.fun, self.in_tree = fun, in_tree

    def __eq__(self, other):
        return (type(other) is _FlatCallback and self.fun == other.fun
                and self.in_tree == other.in_tree)

    def __hash__(self):
        return hash((self.fun, self.in_tree))

    def __repr__(self):
        return getattr(self.fun, "__qualname__", type(self.fun).__name__)

    def __call__(self, *leaves):
        args, kwargs = tree_unflatten(self.in_tree, list(leaves))
        return self.fun(*args, **kwargs)


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """Call the Python function `callback(*args, **kwargs)` on concrete values, also under
    `jit`, `vmap` and inside loops; it must be pure (its result depends only on its
    arguments), since a transform may call it several times or not at all.

    Args:
        callback: a function of pytrees of Arrays returning a pytree of arrays (NumPy
            arrays are fine) shaped as `result_shape_dtypes`.
        result_shape_dtypes: a pytree of `ShapeDtypeStruct`s (or arrays) giving the
            result's structure, shapes and dtypes (no 64-bit dtype with x64 off).
        *args, **kwargs: pytrees of arrays passed to `callback`.
        sharding: where to call it; accepted and unused (one device calls it).
        vmap_method: how `vmap` calls it: "sequential" (once per example, a `lax.map`),
            "sequential_unrolled" (the same, unrolled), "expand_dims" (once, unbatched
            arguments get a leading axis of size 1), "broadcast_all" (once, every argument
            batched to the full size), "legacy_vectorized" (once, unbatched arguments as
            they are); None (the default) makes `vmap` an error, as in JAX.

    Returns:
        The callback's result as Arrays, structured as `result_shape_dtypes`.

    Raises:
        FuncgradValueError: an unknown `vmap_method`, a 64-bit result dtype with x64 off,
            differentiation (wrap it in `custom_jvp`), or a result of the wrong shape.

    Example:
        >>> out = ShapeDtypeStruct((3,), fnp.float32)
        >>> jit(lambda x: pure_callback(np.sin, out, x))(fnp.zeros(3))
        Array([0., 0., 0.], dtype=float32)
    """
    if vmap_method not in VMAP_METHODS:
        raise errors.FuncgradValueError(
            f"pure_callback: vmap_method must be one of the allowed methods "
            f"{list(VMAP_METHODS)}, but got: {vmap_method!r}\n{errors.where()}")
    if not callable(callback):
        raise errors.FuncgradTypeError(f"pure_callback: the callback must be callable, got "
                                       f"{type(callback).__name__}\n{errors.where()}")
    leaves, in_tree = tree_flatten((args, kwargs))
    results, out_tree = tree_flatten(result_shape_dtypes)
    avals = tuple(_result_aval(r) for r in results)
    outs = pure_callback_p.bind(*leaves, callback=_FlatCallback(callback, in_tree),
                                result_avals=avals, sharding=sharding, vmap_method=vmap_method)
    return tree_unflatten(out_tree, outs)


def _result_aval(x):
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None or dtype is None:
        raise errors.FuncgradTypeError(
            f"pure_callback: each leaf of result_shape_dtypes must have a shape and a dtype "
            f"(a ShapeDtypeStruct), got {type(x).__name__} {errors.short_repr(x)}"
            f"\n{errors.where(errors.user_frame(3))}")
    dt = dtypes.as_dtype(dtype)
    if dtypes.canonicalize_dtype(dt) != dt:
        raise errors.FuncgradValueError(
            "pure_callback: result_shape_dtypes cannot specify 64-bit types when "
            f"`jax_enable_x64` is disabled (got {dt})\n{errors.where(errors.user_frame(3))}")
    return ShapedArray(tuple(shape), dt)


def _impl(*vals, callback, result_avals, sharding, vmap_method):
    # copies on the host: a compiled program reuses its buffers (and a GPU's are not NumPy's)
    args = [Array(np.array(host_value(v))) for v in vals]
    try:  # the callback's exceptions, and ours about its results, are the user's
        got, _ = tree_flatten(callback(*args))
        if len(got) != len(result_avals):
            raise errors.op_error("pure_callback", f"the callback {callback!r} returned "
                                  f"{len(got)} array(s), but result_shape_dtypes declares "
                                  f"{len(result_avals)}", cls=errors.FuncgradValueError)
        return [_checked(callback, i, g, a) for i, (g, a) in enumerate(zip(got, result_avals))]
    except Exception as e:
        errors.mark_user_error(e, f"raised in the pure_callback {callback!r}")
        raise


def _checked(callback, i, value, aval):
    v = np.asarray(value)
    if v.shape != aval.shape or not np.can_cast(v.dtype, aval.dtype, "same_kind"):
        raise errors.op_error(
            "pure_callback", f"result {i} of the callback {callback!r} is {v.dtype}"
            f"{list(v.shape)}, but result_shape_dtypes declares {aval.str_short()}",
            cls=errors.FuncgradValueError, hint="return arrays of the declared shapes and "
            "dtypes (under vmap: with the batch axis that vmap_method gives)")
    return v.astype(aval.dtype, copy=False)


def _jvp(primals, outs, tangents, **params):
    raise errors.op_error("pure_callback", "Pure callbacks do not support JVP. Please use "
                          "`custom_jvp` to use callbacks while taking gradients.",
                          cls=errors.FuncgradValueError)


def _batch(args, dims, *, callback, result_avals, sharding, vmap_method):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    args = [a if d is None else batching.moveaxis(a, d, 0) for a, d in zip(args, dims)]
    batched = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in result_avals)
    params = dict(callback=callback, sharding=sharding, vmap_method=vmap_method)
    if vmap_method in ("sequential", "sequential_unrolled"):
        from funcgrad import lax
        mapped = [d is not None for d in dims]

        def one(_, xs):
            it = iter(xs)
            full = [next(it) if m else a for a, m in zip(args, mapped)]
            return (), pure_callback_p.bind(*full, result_avals=result_avals, **params)
        unroll = size if vmap_method == "sequential_unrolled" else 1
        _, outs = lax.scan(one, (), [a for a, m in zip(args, mapped) if m], unroll=unroll)
    elif vmap_method in ("expand_dims", "broadcast_all"):
        from funcgrad import lax
        n = size if vmap_method == "broadcast_all" else 1
        args = [a if d is not None else _leading(lax, a, n) for a, d in zip(args, dims)]
        outs = pure_callback_p.bind(*args, result_avals=batched, **params)
    elif vmap_method == "legacy_vectorized":
        outs = pure_callback_p.bind(*args, result_avals=batched, **params)
    else:
        raise errors.op_error(
            "pure_callback", "vmap is only supported for the pure_callback primitive when "
            "vmap_method is one of 'sequential', 'sequential_unrolled', 'expand_dims', "
            f"'broadcast_all', or 'legacy_vectorized'. Got vmap_method={vmap_method!r}.",
            cls=VmapMethodError, hint="pass vmap_method= to pure_callback")
    return list(outs), [0] * len(outs)


def _leading(lax, x, n):
    """`x` with a new leading axis of size `n`."""
    shape = get_aval(x).shape
    return lax.broadcast_in_dim(x, (n,) + shape, tuple(range(1, len(shape) + 1)))


pure_callback_p = Primitive("pure_callback", multiple_results=True)
pure_callback_p.def_impl(_impl)
pure_callback_p.def_abstract_eval(lambda *avals, result_avals, **_: list(result_avals))
ad.jvp_rules[pure_callback_p] = _jvp
batching.batch_rules[pure_callback_p] = _batch
