"""Functions that apply a user's function over arrays: `vectorize` (NumPy's generalized
ufuncs, with `vmap` underneath, as JAX), `apply_along_axis`, `apply_over_axes`, `piecewise`,
`fromfunction`.

The user's function sees slices (scalars without a signature) as traced values; `vmap` makes
one batched program of it, never a Python loop. Imports sibling numpy modules, and
funcgrad's `vmap` and `lax.switch` when called.
"""

import functools
import re

import numpy as np

from funcgrad import errors, lax
from funcgrad.numpy._util import (
    asarray_operand,
    broadcast_shapes,
    canonical_axis,
    dtype_of,
    shape_of,
    static_shape,
)
from funcgrad.numpy.creation import arange
from funcgrad.numpy.logic import where
from funcgrad.numpy.reductions import argmax, cumsum
from funcgrad.numpy.shape import broadcast_to, expand_dims, squeeze, stack

__all__ = ["apply_along_axis", "apply_over_axes", "fromfunction", "piecewise", "vectorize"]

_DIM = r"\w+"
_ARG = rf"\((?:{_DIM}(?:,{_DIM})*)?\)"
_ARGS = f"{_ARG}(?:,{_ARG})*"
_SIGNATURE = re.compile(f"^{_ARGS}->{_ARGS}$")


def _vmap(*args, **kwargs):
    from funcgrad.batching_api import vmap
    return vmap(*args, **kwargs)


def _parse_signature(signature):
    """NumPy's gufunc signature "(m,n),(n)->(m)" as ([core dims per input], [per output])."""
    sig = signature.replace(" ", "")
    if not _SIGNATURE.match(sig):
        raise errors.op_error("vectorize", f"not a valid gufunc signature: "
                                           f"{errors.short_repr(signature)}",
                              cls=errors.FuncgradValueError)
    return tuple([tuple(re.findall(_DIM, a)) for a in re.findall(_ARG, part)]
                 for part in sig.split("->"))


def _core_sizes(sizes, shape, dims, context, is_input):
    """Record (and check) the sizes of the named core dimensions `dims` of `shape`."""
    if (len(shape) < len(dims)) if is_input else (len(shape) != len(dims)):
        what = "input" if is_input else "output"
        raise errors.op_error("vectorize", f"{what} with shape {shape} does not match the core "
                              f"dimensions {dims} {context}", cls=errors.FuncgradValueError)
    for name, size in zip(dims, shape[len(shape) - len(dims):]):
        if sizes.setdefault(name, size) != size:
            raise errors.op_error("vectorize", f"inconsistent size for core dimension "
                                  f"{errors.short_repr(name)}: {size} vs {sizes[name]} {context}",
                                  cls=errors.FuncgradValueError)


def _without(func, positions, args, kwargs, excluded):
    """`func` with the arguments at `positions` (and keywords in `excluded`) bound."""
    static = [(i, args[i]) for i in sorted(p for p in positions if isinstance(p, int))
              if i < len(args)]
    static_kw = {k: v for k, v in kwargs.items() if k in excluded}
    dynamic = [a for i, a in enumerate(args) if i not in positions]
    dynamic_kw = {k: v for k, v in kwargs.items() if k not in excluded}

    def bound(*a, **kw):
        a = list(a)
        for i, v in static:
            a.insert(i, v)
        return func(*a, **kw, **static_kw)
    return bound, dynamic, dynamic_kw


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """`pyfunc` (written for scalars, or for the core shapes of `signature`) made to take
    arrays with any leading axes, broadcast as NumPy does, through `vmap`.

    Args:
        pyfunc: the function to vectorize.
        excluded: positions or names of arguments passed through unchanged.
        signature: a gufunc signature such as "(n),(n)->()"; without one, `pyfunc` gets
            scalars (and may return any shape).

    Example:
        >>> norm = fnp.vectorize(lambda v: fnp.sqrt(v @ v), signature="(n)->()")
        >>> norm(fnp.ones((2, 4)))
        Array([2., 2.], dtype=float32)
    """
    if any(not isinstance(e, (str, int)) for e in excluded):
        raise errors.op_error("vectorize", f"can only exclude integer or string arguments, "
                              f"got excluded="
                              f"{errors.short_repr(excluded)}", cls=errors.FuncgradTypeError)
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise errors.op_error("vectorize", f"excluded={errors.short_repr(excluded)} contains "
                              "negative numbers",
                              cls=errors.FuncgradValueError)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        context = (f"(vectorized function with excluded={errors.short_repr(excluded)}, "
                   f"signature={errors.short_repr(signature)})")
        func, args, kwargs = _without(pyfunc, set(excluded), args, kwargs, excluded)
        if signature is not None:
            in_dims, out_dims = _parse_signature(signature)
        else:
            in_dims, out_dims = [()] * len(args), None
        nones = {i for i, a in enumerate(args) if a is None}
        if nones:
            func, args, _ = _without(func, nones, args, {}, ())
            in_dims = [d for i, d in enumerate(in_dims) if i not in nones]
        if len(args) != len(in_dims):
            raise errors.op_error("vectorize", f"wrong number of positional arguments: "
                                  f"expected {len(in_dims)}, got {len(args)} {context}",
                                  cls=errors.FuncgradTypeError)
        args = [asarray_operand("vectorize", a) for a in args]
        sizes = {}
        loops = []
        for a, dims in zip(args, in_dims):
            _core_sizes(sizes, shape_of(a), dims, context, True)
            loops.append(shape_of(a)[:len(shape_of(a)) - len(dims)])
        bshape = broadcast_shapes("vectorize", *loops) if loops else ()
        if out_dims is not None:
            func = _checked(func, sizes, out_dims, context)
        return _broadcast_call(func, args, loops, bshape, kwargs)
    return wrapped


def _checked(func, sizes, out_dims, context):
    def run(*args, **kwargs):
        out = func(*args, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        if len(out_dims) > 1 and not isinstance(out, tuple):
            raise errors.op_error("vectorize", f"the function must return a tuple of "
                                  f"{len(out_dims)} outputs {context}",
                                  cls=errors.FuncgradTypeError)
        if len(outs) != len(out_dims):
            raise errors.op_error("vectorize", f"wrong number of outputs: expected "
                                  f"{len(out_dims)}, got {len(outs)} {context}",
                                  cls=errors.FuncgradTypeError)
        seen = dict(sizes)
        for o, dims in zip(outs, out_dims):
            _core_sizes(seen, shape_of(asarray_operand("vectorize", o)), dims, context, False)
        return out
    return run


def _broadcast_call(func, args, loops, bshape, kwargs):
    """`func` vmapped once per broadcast axis, each argument mapped only along the axes where
    it has more than one entry (its size-1 axes are squeezed: no broadcast copies)."""
    squeezed, rev_shapes = [], []
    for a, loop in zip(args, loops):
        filled = (1,) * (len(bshape) - len(loop)) + loop
        rev_shapes.append(filled[::-1])
        ones = tuple(i for i, s in enumerate(loop) if s == 1)
        squeezed.append(squeeze(a, ones) if ones else a)
    fn = functools.partial(func, **kwargs) if kwargs else func
    expand = []
    for neg, axis_sizes in enumerate(zip(*rev_shapes)):
        in_axes = tuple(None if s == 1 else 0 for s in axis_sizes)
        if all(a is None for a in in_axes):
            expand.append(len(bshape) - 1 - neg)
        else:
            fn = _vmap(fn, in_axes=in_axes)
    out = fn(*squeezed)
    if not expand:
        return out
    if isinstance(out, tuple):
        return tuple(expand_dims(o, tuple(expand)) for o in out)
    return expand_dims(out, tuple(expand))


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """`func1d` applied to every 1-D slice of `arr` along `axis` (through `vmap`); the
    slice's axis is replaced by the axes of `func1d`'s result.

    Example:
        >>> fnp.apply_along_axis(lambda v: v[0] + v[-1], 1, fnp.arange(6.0).reshape(2, 3))
        Array([2., 8.], dtype=float32)
    """
    arr = asarray_operand("apply_along_axis", arr)
    nd = len(shape_of(arr))
    axis = canonical_axis("apply_along_axis", axis, nd)
    func = lambda a: func1d(a, *args, **kwargs)
    for i in range(1, nd - axis):
        func = _vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = _vmap(func, in_axes=0, out_axes=0)
    return func(arr)


def apply_over_axes(func, a, axes):
    """`func(a, axis)` applied for each axis in turn; a result that lost the axis gets it
    back with size 1.

    Example:
        >>> fnp.apply_over_axes(fnp.sum, fnp.ones((2, 3)), [0, 1])
        Array([[6.]], dtype=float32)
    """
    a = asarray_operand("apply_over_axes", a)
    for axis in ([axes] if isinstance(axes, int) else axes):
        b = asarray_operand("apply_over_axes", func(a, axis))
        if len(shape_of(b)) == len(shape_of(a)):
            a = b
        elif len(shape_of(b)) == len(shape_of(a)) - 1:
            a = expand_dims(b, axis)
        else:
            raise errors.op_error("apply_over_axes", "the function must keep the array's rank "
                                  "or remove one axis", cls=errors.FuncgradValueError)
    return a


def piecewise(x, condlist, funclist, *args, **kw):
    """`x` mapped piece by piece: where `condlist[i]` holds (the last holding one wins),
    `funclist[i](x, *args, **kw)` (or the constant `funclist[i]`); elsewhere the extra last
    entry of `funclist`, or 0. Each function runs on the whole array (`lax.switch` per
    element, as JAX).

    Example:
        >>> x = fnp.array([-1.0, 2.0])
        >>> fnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * 10])
        Array([ 1., 20.], dtype=float32)
    """
    x = asarray_operand("piecewise", x)
    if isinstance(condlist, (list, tuple)):
        conds = [asarray_operand("piecewise", c) for c in condlist]
    else:
        c = asarray_operand("piecewise", condlist)
        stacked_conds = len(shape_of(c)) == len(shape_of(x)) + 1
        conds = [c[i] for i in range(shape_of(c)[0])] if stacked_conds else [c]
    nc, nf = len(conds), len(funclist)
    if nf == nc + 1:
        funclist = list(funclist[-1:]) + list(funclist[:-1])
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise errors.op_error("piecewise", f"with {nc} condition(s), funclist must have "
                              f"{nc} or {nc + 1} entries, got {nf}",
                              cls=errors.FuncgradValueError)
    dt = dtype_of(x)
    ints = [broadcast_to(where(c, 1, 0), shape_of(x)) for c in conds]
    zero = lax.full(shape_of(x), 0, dtype_of(ints[0]) if ints else np.dtype(np.int32))
    # the last condition that holds (0: none): where the running count of hits last grows
    index = argmax(cumsum(stack([zero] + ints), axis=0), axis=0)
    branches = [_as_branch(f, dt, args, kw) for f in funclist]
    switch = vectorize(lambda i, v: lax.switch(i, branches, v))
    return switch(index, x)


def _as_branch(f, dt, args, kw):
    if callable(f):
        return lambda v: lax.convert_element_type(asarray_operand("piecewise", f(v, *args,
                                                                                 **kw)), dt)
    return lambda v: lax.full((), f, dt)


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """The array whose entry at index (i, j, ...) is `function(i, j, ...)`, the function
    called on scalar indices (of `dtype`) under `vmap`, as JAX.

    Example:
        >>> fnp.fromfunction(lambda i, j: i + 10 * j, (2, 3), dtype=int)
        Array([[ 0, 10, 20],
               [ 1, 11, 21]], dtype=int32)
    """
    shape = static_shape("fromfunction", shape)
    if not callable(function):
        raise errors.op_error("fromfunction", f"function must be callable, got "
                              f"{errors.short_repr(function)}", cls=errors.FuncgradTypeError)
    fn = function
    for i in range(len(shape)):
        in_axes = [0 if i == j else None for j in range(len(shape))]
        fn = _vmap(fn, in_axes=tuple(in_axes[::-1]))
    return fn(*(arange(s, dtype=dtype) for s in shape), **kwargs)
