"""Abstract evaluation: `ShapeDtypeStruct`, `eval_shape` and `typeof`.

`eval_shape` traces a function with abstract inputs (a `Builder` that computes nothing) and
reports the shapes and dtypes of its outputs, as JAX's does: no array of the function is
ever allocated, so it answers for programs far larger than memory. A `ShapeDtypeStruct` is
an abstract array description that `eval_shape` and `jit(f).lower` take in place of an
array. Imports the core, dtypes, errors and tree_util.
"""

import operator

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import ArrayBase, ShapedArray, get_aval, new_builder
from funcgrad.tree_util import keystr, tree_flatten_with_path, tree_unflatten

__all__ = ["ShapeDtypeStruct", "eval_shape", "typeof"]


class ShapeDtypeStruct:
    """An abstract array: a shape, a dtype, a sharding and a weak-type bit, and no data.

    Args:
        shape: a tuple of non-negative ints.
        dtype: anything `numpy.dtype` takes (kept as given: `float64` stays `float64`; it
            is narrowed only where it is traced with x64 off, as in JAX).
        sharding: where such an array would live (kept, not interpreted here).
        weak_type: whether it stands for a weakly typed value (a Python scalar's type).
        manual_axis_type, is_ref: JAX's; only their defaults are supported.

    Example:
        >>> ShapeDtypeStruct((2, 3), fnp.float32)
        ShapeDtypeStruct(shape=(2, 3), dtype=float32)
    """

    __slots__ = ("shape", "dtype", "sharding", "weak_type")

    def __init__(self, shape, dtype, *, sharding=None, weak_type=False, manual_axis_type=None,
                 is_ref=False):
        if manual_axis_type is not None or is_ref:
            raise errors.FuncgradValueError(
                "ShapeDtypeStruct: manual_axis_type and is_ref (JAX's mutable references) are "
                f"not supported by funcgrad\n{errors.where()}")
        self.shape = _shape("ShapeDtypeStruct", shape)
        self.dtype = _dtype("ShapeDtypeStruct", dtype)
        self.sharding = sharding
        self.weak_type = bool(weak_type)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self):
        sharding = "" if self.sharding is None else f", sharding={self.sharding!r}"
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype}{sharding}{weak})"

    def __eq__(self, other):
        return (type(other) is ShapeDtypeStruct and self.shape == other.shape
                and self.dtype == other.dtype and self.sharding == other.sharding
                and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.sharding, self.weak_type))

    def update(self, **kwargs):
        """A copy with the fields named in `kwargs` (shape, dtype, sharding, weak_type)
        replaced.

        Example:
            >>> ShapeDtypeStruct((2,), fnp.int32).update(shape=(4,))
            ShapeDtypeStruct(shape=(4,), dtype=int32)
        """
        unknown = sorted(set(kwargs) - set(self.__slots__))
        if unknown:
            raise errors.FuncgradTypeError(f"ShapeDtypeStruct.update: unknown field(s) "
                                           f"{unknown}; fields are {list(self.__slots__)}")
        fields = {k: getattr(self, k) for k in self.__slots__}
        fields.update(kwargs)
        return ShapeDtypeStruct(fields.pop("shape"), fields.pop("dtype"), **fields)

    @property
    def aval(self):
        """The abstract value it stands for when traced: its dtype canonicalized (float64
        becomes float32 with x64 off)."""
        return ShapedArray(self.shape, dtypes.canonicalize(self.dtype), self.weak_type)


def _shape(name, shape):
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise errors.FuncgradTypeError(
            f"{name}: the shape must be a sequence of ints, got {errors.short_repr(shape)}"
            f"\n{errors.where(errors.user_frame(3))}") from None
    if any(d < 0 for d in dims):
        raise errors.FuncgradValueError(f"{name}: negative dimension in shape {dims}"
                                        f"\n{errors.where(errors.user_frame(3))}")
    return dims


def _dtype(name, dtype):
    if dtypes.is_extended(dtype):  # a typed PRNG key's dtype is no NumPy dtype
        return dtype
    try:
        return dtypes.as_dtype(dtype)
    except TypeError as e:
        raise errors.FuncgradTypeError(f"{name}: {e}\n{errors.where(errors.user_frame(3))}"
                                       ) from None


def abstractify(name, x, where):
    """The `ShapedArray` a leaf stands for when traced abstractly: a `ShapeDtypeStruct`'s, an
    array's or tracer's own, a Python scalar's (weakly typed); anything else is an error
    naming `name` and the leaf's path `where`."""
    if type(x) is ShapeDtypeStruct:
        return x.aval
    if isinstance(x, ArrayBase):
        return x.aval
    try:
        return get_aval(x)
    except (TypeError, ValueError, OverflowError) as e:
        raise errors.FuncgradTypeError(
            f"{name}: {where} is a {type(x).__name__} ({errors.short_repr(x, 40)}), which is "
            f"not an array or a ShapeDtypeStruct ({e})\n{errors.where(errors.user_frame(3))}"
            "\n  hint: pass non-array values through a closure or functools.partial."
        ) from None


def eval_shape(fun, *args, **kwargs):
    """The shapes and dtypes of `fun(*args, **kwargs)`, computed without running it.

    `fun` is traced once with abstract values: no operation runs and no array is allocated,
    so a program that would need more memory than the machine has is fine.

    Args:
        fun: a function of pytrees of arrays.
        *args, **kwargs: pytrees whose leaves are arrays, Python scalars or
            `ShapeDtypeStruct`s. Pass other (static) values with `functools.partial`.

    Returns:
        A pytree like `fun`'s output with a `ShapeDtypeStruct` per leaf (weak types kept).

    Raises:
        FuncgradTypeError: a leaf that is neither an array nor a `ShapeDtypeStruct`.

    Example:
        >>> eval_shape(lambda x, y: x @ y, ShapeDtypeStruct((2, 3), fnp.float32), fnp.ones(3))
        ShapeDtypeStruct(shape=(2,), dtype=float32)
    """
    pairs, in_tree = tree_flatten_with_path((args, kwargs))
    name = f"eval_shape({getattr(fun, '__name__', type(fun).__name__)})"
    avals = [abstractify(name, x, f"argument {('args', 'kwargs')[p[0].idx]}{keystr(p[1:])}")
             for p, x in pairs]
    with new_builder(name) as b:
        ins = [b.new_input(a) for a in avals]
        a, kw = tree_unflatten(in_tree, ins)
        out = fun(*a, **kw)
        out_pairs, out_tree = tree_flatten_with_path(out)
        outs = [_out_struct(name, x, p) for p, x in out_pairs]
    return tree_unflatten(out_tree, outs)


def _out_struct(name, x, path):
    aval = abstractify(name, x, f"output {keystr(path) or '(the whole output)'}")
    return ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def typeof(x):
    """The abstract value (`ShapedArray`: shape, dtype, weak type) of an array, a traced
    value, a Python scalar or a `ShapeDtypeStruct`.

    Example:
        >>> typeof(fnp.ones(3)), typeof(1.0)
        (f32[3], f32[])
        >>> typeof(1.0).weak_type
        True
    """
    return abstractify("typeof", x, "the argument")
