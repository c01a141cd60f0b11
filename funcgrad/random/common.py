"""What every sampler shares: argument checks (shapes, dtypes, parameters that broadcast) and
`compiled`, which runs a sampler's lax-level body as one jitted program.

An eager sampler call is one compiled program, not dozens of eager operations: the public
function checks its arguments in Python and calls its body through `compiled`, which keeps a
`jit` of the body per static configuration (shape, dtype, mode... and the signature of the
array arguments). Under another transform the same call records one `jit` equation, which
an outer jit inlines. This module imports only the public array, lax and jit layers.
"""

import functools
import math
import operator
import os

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, lax
from funcgrad.compiler import jit
from funcgrad.core import concrete_value, get_aval
from funcgrad.errors import (
    FuncgradTypeError,
    FuncgradValueError,
    memory_error,
    op_error,
    short_repr,
)

_MAX_PROGRAMS = 64  # per sampler, as jit_cache_size per jitted function: the oldest go first


class compiled:  # noqa: N801  (used as a decorator, like jit)
    """Run a sampler body `body(*arrays, **statics)` as a jitted program.

    Each static configuration and signature of the array arguments gets its own `jit`, so a
    program is traced once and never re-traced (no re-trace warning for shapes that users
    choose); at most `_MAX_PROGRAMS` are kept per body.
    """

    def __init__(self, body):
        self._body = body
        self._name = body.__name__.lstrip("_")
        self._jits = {}

    def __call__(self, *args, **statics):
        key = (tuple(statics.items()), tuple(_signature(a) for a in args))
        fn = self._jits.get(key)
        if fn is None:
            fn = self._jits[key] = self._jit(statics)
            if len(self._jits) > _MAX_PROGRAMS:
                del self._jits[next(iter(self._jits))]
        return fn(*args)

    def _jit(self, statics):
        body = self._body

        def program(*args):
            return body(*args, **statics)
        program.__name__ = program.__qualname__ = self._name
        return jit(program)


def _signature(x):
    if x is None:  # an absent optional argument
        return None
    if isinstance(x, tuple):  # a key given by its words
        return tuple(_signature(e) for e in x)
    a = get_aval(x)
    return a.shape, a.dtype, a.weak_type


def select(pred, on_true, on_false):
    """JAX's `lax.select`: `on_true` where `pred`, else `on_false` (equal shapes, or a
    rank-0 `pred`)."""
    return lax.select_n(pred, on_false, on_true)


def any_true(x):
    """`x.any()` for a loop's condition, as the max of 0/1 integers: a reduction that fuses
    on every tier (a bool `reduce_or` is a library call on the native one, which would send
    the whole loop back to Python)."""
    return lax.reduce_max(lax.convert_element_type(x, np.dtype(np.int32)),
                          tuple(range(x.ndim))) > 0


# --- checks ---------------------------------------------------------------------------------
GUMBEL_MODES = ("highest", "high", "low")


def check_mode(op, mode, allowed):
    """`mode` if it is one of `allowed`, else a clear error."""
    if mode not in allowed:
        raise op_error(f"random.{op}", f"mode must be one of {', '.join(map(repr, allowed))}; "
                       f"got {mode!r}", cls=FuncgradValueError)
    return mode


def check_shape(op, shape):
    """`shape` as a tuple of non-negative ints (an int means a 1-D shape)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise op_error(f"random.{op}", f"shape must be a sequence of ints, got "
                       f"{short_repr(shape)}", cls=FuncgradTypeError) from None
    if any(d < 0 for d in shape):
        raise op_error(f"random.{op}", f"negative dimensions are not allowed: {shape}",
                       cls=FuncgradValueError)
    # The draw needs at least its uint32 counters; beyond the machine's memory it cannot run.
    if math.prod(shape) * 4 > _physical_memory():
        raise memory_error(f"random.{op}", [(shape, np.dtype(np.uint32))])
    return shape


@functools.cache
def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # not a POSIX system: numpy will tell
        return float("inf")


def sample_shape(op, shape, *params):
    """JAX's rule for samplers with parameters: `shape` (checked: broadcasting the
    parameters' shapes against it must give it back), or the parameters' broadcast shape.
    A parameter may be given by its shape (a tuple)."""
    shapes = [tuple(p) if isinstance(p, tuple) else tuple(p.shape) for p in params]
    if shape is None:
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise op_error(f"random.{op}", f"parameter shapes {shapes} do not broadcast",
                           cls=FuncgradValueError) from None
    shape = check_shape(op, shape)
    try:
        joined = tuple(np.broadcast_shapes(shape, *shapes))
    except ValueError:
        joined = None
    if joined != shape:
        raise op_error(f"random.{op}", f"parameter shapes {shapes} must broadcast to the "
                       f"shape argument {shape}", cls=FuncgradValueError)
    return shape


def float_dtype(op, dtype, kinds="f"):
    """The canonical float dtype a sampler returns (default float32, float64 with x64)."""
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.default_float()
    if dtypes.kind(dtype) not in kinds:
        kind = {"f": "floating", "fc": "floating or complex"}.get(kinds, "numeric")
        raise op_error(f"random.{op}", f"dtype must be a {kind} type, got {dtype}")
    return dtypes.canonicalize(dtype)


def int_dtype(op, dtype):
    """The canonical integer dtype a sampler returns (default int32, int64 with x64)."""
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.default_int()
    if dtypes.kind(dtype) not in "iu":
        raise op_error(f"random.{op}", f"dtype must be an integer type, got {dtype}")
    return dtypes.canonicalize(dtype)


def param(op, name, x, kinds="biuf"):
    """A sampler parameter as a funcgrad array or tracer (Python scalars stay weakly typed),
    of a dtype kind in `kinds` (default: real)."""
    try:
        x = fnp.asarray(x)
    except (TypeError, ValueError) as e:
        raise op_error(f"random.{op}", f"{name} must be an array or a number, got "
                       f"{short_repr(x)} ({e})") from None
    if dtypes.kind(x.dtype) not in kinds:
        raise op_error(f"random.{op}", f"{name} must be real, got {x.dtype}")
    return x


def concrete_int(op, name, x):
    """A Python int from an int-like argument that must be known now (not traced)."""
    try:
        return operator.index(x)
    except TypeError:
        pass
    v = concrete_value(x) if hasattr(x, "aval") else np.asarray(x)
    if v is None or np.ndim(v) or dtypes.kind(np.asarray(v).dtype) not in "iu":
        raise op_error(f"random.{op}", f"{name} must be a concrete integer (not traced), got "
                       f"{short_repr(x)}", hint="pass a Python int")
    return int(v)
