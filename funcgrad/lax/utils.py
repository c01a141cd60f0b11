"""Family factories for primitives: a new elementwise op is a few lines.

`unop` and `binop` register the shape/dtype rule, the eager implementation and the
batching rule, and declare the primitive fusible elementwise over its dtype kinds
(`Primitive.declare`); the caller adds the derivative rules next to the primitive.
`unit_axes_view` is the `view_axes` rule of the reshapes that only add or drop unit axes.
"""

import functools
import operator

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import Array, Primitive, ShapedArray, get_aval
from funcgrad.interpreters import batching

_KIND_NAMES = {"b": "bool", "i": "signed int", "u": "unsigned int", "f": "float",
               "c": "complex"}


def check_kind(name, aval, kinds):
    if dtypes.kind(aval.dtype) not in kinds:
        allowed = ", ".join(_KIND_NAMES[k] for k in kinds)
        raise errors.op_error(name, f"does not accept dtype {aval.dtype} (operand {aval}); "
                                    f"it takes {allowed} operands")


def unop(name, impl, kinds="fc", out_dtype=None, fusible=True):
    """An elementwise unary primitive `name_p` over dtype kinds `kinds` (that kernels may
    compute unless `fusible` is False)."""
    p = Primitive(name)
    p.def_impl(impl)

    def abstract(x, **params):
        check_kind(name, x, kinds)
        dt = out_dtype(x.dtype) if out_dtype else x.dtype
        return ShapedArray(x.shape, dt, x.weak_type and dtypes.kind(dt) != "b")
    p.def_abstract_eval(abstract)
    batching.defvectorized(p)
    return p.declare("elementwise", dtype_kinds=kinds, fusible=fusible)


def accurate(name, x, accuracy):
    """`x`, after checking JAX's `accuracy=` of a transcendental function: None, or a
    `Tolerance`/`AccuracyMode` (JAX uses them to choose an implementation on TPUs only; on
    the CPU and GPU, as in funcgrad, the one implementation runs). Anything else is an error,
    as in JAX."""
    if accuracy is not None and type(accuracy).__name__ not in ("Tolerance", "AccuracyMode"):
        raise errors.op_error(name, f"accuracy {errors.short_repr(accuracy)} is not "
                              "supported", cls=errors.FuncgradValueError,
                              hint="pass None, a lax.Tolerance or a lax.AccuracyMode")
    return x


def binary_shape(name, *avals):
    """Operands must share a shape, except rank-0 operands, which broadcast."""
    shape = None
    for a in avals:
        if a.shape:
            if shape is None:
                shape = a.shape
            elif a.shape != shape:
                raise errors.op_error(name, "operands must have equal shapes (or be rank-0), "
                                      f"got {', '.join(map(str, avals))}",
                                      hint="funcgrad.numpy functions broadcast; lax does not")
    return shape or ()


def binop(name, impl, kinds="iufc", out_dtype=None, nargs=2, fusible=True):
    """An elementwise n-ary primitive whose operands share one dtype (rank-0 operands
    broadcast; kernels may compute it unless `fusible` is False)."""
    p = Primitive(name)
    p.def_impl(impl)

    def abstract(*avals, **params):
        for a in avals:
            check_kind(name, a, kinds)
        if any(a.dtype != avals[0].dtype for a in avals[1:]):
            raise errors.op_error(name, "operands must have the same dtype, got "
                                  f"{', '.join(map(str, avals))}",
                                  hint="convert with .astype() or use funcgrad.numpy, which "
                                       "promotes dtypes")
        shape = binary_shape(name, *avals)
        dt = out_dtype(avals[0].dtype) if out_dtype else avals[0].dtype
        weak = all(a.weak_type for a in avals) and dtypes.kind(dt) != "b"
        return ShapedArray(shape, dt, weak)
    p.def_abstract_eval(abstract)
    batching.defbroadcasting(p)
    return p.declare("elementwise", dtype_kinds=kinds, fusible=fusible, rank0_operands=True)


def unit_axes_view(in_shape, out_shape, **params):
    """Operand axis -> output axis of a reshape that only adds or drops size-1 axes (-1: a
    dropped one); None for any other reshape."""
    if [s for s in in_shape if s != 1] != [s for s in out_shape if s != 1]:
        return None
    big_out = iter(i for i, s in enumerate(out_shape) if s != 1)
    return tuple(-1 if s == 1 else next(big_out) for s in in_shape)


def static_int(name, x, what):
    """A static int parameter (a Python/numpy int or concrete integer array) of `name`: a
    float, None or a traced value is an error, as in JAX (`int(1.5)` would truncate)."""
    try:
        return operator.index(x)
    except TypeError:
        raise errors.op_error(name, f"{what} must be an int, got {type(x).__name__} "
                              f"{errors.short_repr(x)}") from None


def static_ints(name, xs, what):
    """A static sequence of ints (a shape, axes, a permutation) of `name` as a tuple."""
    try:
        items = None if isinstance(xs, (str, bytes, dict)) else tuple(xs)
    except TypeError:  # not iterable (None, an int, a 0-d array)
        items = None
    if items is None:
        raise errors.op_error(name, f"{what} must be a sequence of ints, got "
                              f"{type(xs).__name__} {errors.short_repr(xs)}",
                              hint="lax takes explicit axes and shapes; funcgrad.numpy's "
                                   "axis=None means all axes")
    return tuple(static_int(name, x, f"each entry of {what}") for x in items)


def to_bool(dt):
    return dtypes.bool_


def np_operands(*args):
    """Impl operands as numpy values. Rank-0 operands may arrive as numpy scalars or Python
    scalars (a compiled program's literals); Python scalars take the dtype of the first other
    operand, which a same-dtype primitive shares."""
    ref = next((a for a in args if type(a) not in _SCALAR_KIND), None)
    dt = None if ref is None else np.asarray(ref).dtype
    return [np.asarray(a, dt) if type(a) in _SCALAR_KIND else np.asarray(a) for a in args]


_SCALAR_KIND = {bool: "b", int: "i", float: "f", complex: "c"}
_KIND_ORDER = "biufc"


def match_scalars(*args):
    """Convert Python scalars among `args` to the dtype of the first array argument (weakly).

    A scalar of a higher kind than that dtype (a float with an int array) is an error, as
    converting it would silently truncate.
    """
    ref = next((a for a in args if type(a) not in _SCALAR_KIND), None)
    if ref is None or len(args) == 1:
        return args
    try:
        dt = get_aval(ref).dtype
    except (TypeError, ValueError, OverflowError):  # not an array: bind names the primitive
        return args
    out = []
    for a in args:
        kind = _SCALAR_KIND.get(type(a))
        if kind is None:
            out.append(a)
            continue
        if _KIND_ORDER.index(kind) > _KIND_ORDER.index(dtypes.kind(dt)) and not (
                kind == "i" and dtypes.kind(dt) == "u"):
            raise errors.op_error("lax", f"a Python {type(a).__name__} ({errors.short_repr(a)}) "
                                         f"cannot be "
                                  f"combined with a {dt} operand without changing its value",
                                  hint="convert the array first (x.astype(...)) or use "
                                       "funcgrad.numpy, which promotes")
        out.append(Array(np.asarray(a, dt), True))
    return tuple(out)


def quiet(fn):
    """`fn` with numpy's floating-point warnings off: results follow IEEE, as in XLA
    (`inf - inf` is nan without a RuntimeWarning, and without an error under `-W error`).
    The eager implementations that compute floats are wrapped in it (linalg and special
    functions hold an `errstate` of their own; `add_any` too, below lax).

        >>> quiet(np.add)(np.float32(np.inf), np.float32(-np.inf))
        np.float32(nan)
    """
    @functools.wraps(fn)
    def impl(*args, **params):
        with np.errstate(all="ignore"):
            return fn(*args, **params)
    return impl
