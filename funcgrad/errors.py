"""funcgrad's exception types and the helper that finds the user's source line.

Every error raised for bad user input is a `FuncgradError` (or a subclass that also
derives from the matching builtin, e.g. `TypeError`), and names the operation, the
shapes involved and the user's line. This module imports nothing from funcgrad.
"""

import functools
import os
import sys
import sysconfig

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_internal_code = {}


def _is_internal(code):
    r = _internal_code.get(code)
    if r is None:
        fn = code.co_filename
        r = fn.startswith(_PKG_DIR) and os.sep + "tests" + os.sep not in fn
        r = r or fn.startswith("<funcgrad")
        _internal_code[code] = r
    return r


def user_frame(skip=1, outside=()):
    """The first stack frame outside funcgrad (and outside the folders `outside`, a tuple of
    path prefixes) as `(filename, lineno, function)`, or None."""
    f = sys._getframe(skip)
    while f is not None:
        if not _is_internal(f.f_code) and not (
                outside and f.f_code.co_filename.startswith(outside)):
            return (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
        f = f.f_back
    return None


def format_frame(frame):
    if frame is None:
        return "<unknown location>"
    filename, lineno, fn = frame
    return f"{filename}:{lineno} ({fn})"


def user_line_text(frame):
    """The source text of a `user_frame()` result, or '' when it cannot be read."""
    if frame is None:
        return ""
    import linecache

    return linecache.getline(frame[0], frame[1]).strip()


def where(frame=None):
    """'  at FILE:LINE (fn)\n    source' for error messages."""
    frame = frame if frame is not None else user_frame(2)
    text = user_line_text(frame)
    s = f"  at {format_frame(frame)}"
    return s + (f"\n    {text}" if text else "")


class FuncgradError(Exception):
    """Base class of funcgrad's errors."""


class FuncgradTypeError(FuncgradError, TypeError):
    """A wrong dtype, shape or structure given to a funcgrad operation."""


class FuncgradValueError(FuncgradError, ValueError):
    """A wrong value given to a funcgrad operation (an out-of-range axis, ...)."""


class FuncgradIndexError(FuncgradError, IndexError):
    """An index out of range, too many indices, or a malformed index expression."""


class FuncgradAxisError(FuncgradValueError, IndexError):
    """An axis out of range for an array's rank (both errors, as NumPy's AxisError)."""


class ConcretizationTypeError(FuncgradTypeError):
    """A traced value was used where Python needs a concrete value (bool, int, if)."""


class TracerArrayConversionError(FuncgradTypeError):
    """NumPy was given a traced value (`numpy.sin(x)`, `numpy.asarray(x)` inside grad, jvp,
    vjp, vmap or jit): it would compute on a constant `numpy.ndarray`, so the result would not
    depend on the traced input. Use `funcgrad.numpy` instead (as JAX's error of that name)."""


class BackendUnavailableError(FuncgradError, RuntimeError):
    """A known backend that cannot run on this machine (e.g. "cuda" without CuPy)."""


class TracerLeakError(FuncgradError):
    """A traced value was used after the transformation that made it had finished."""


class FuncgradOverflowError(FuncgradError, OverflowError):
    """A Python number too large for the dtype it must become."""


class FuncgradMemoryError(FuncgradError, MemoryError):
    """An operation needed more memory than could be allocated."""


class FuncgradNotImplementedError(FuncgradError, NotImplementedError):
    """A documented option funcgrad does not implement (JAX raises NotImplementedError too)."""


class FuncgradInternalError(FuncgradError):
    """A bug in funcgrad itself (please report it with the message)."""


def short_repr(x, limit=60):
    """`repr(x)` cut to `limit` characters for a message; never raises (an object whose
    `__repr__` fails is shown by its type)."""
    aval = getattr(x, "aval", None)  # funcgrad arrays and tracers: their type, f32[2,3]
    if aval is not None and hasattr(aval, "str_short"):
        return aval.str_short()
    try:
        r = " ".join(repr(x).split())
    except Exception:
        return f"<{type(x).__name__} object>"
    return r if len(r) < limit else r[:limit - 3] + "..."


def op_error(op, message, cls=FuncgradTypeError, hint=None):
    """Build an error for operation `op` that ends with the user's line and a hint."""
    text = f"{op}: {message}\n{where(user_frame(2))}"
    if hint:
        text += f"\n  hint: {hint}"
    return cls(text)


def _nbytes(avals):
    total = 0
    for a in avals:
        shape, dtype = (a.shape, a.dtype) if hasattr(a, "shape") else a
        n = 1
        for d in shape:
            n *= d
        total += n * dtype.itemsize
    return total


def out_of_memory(exc, avals):
    """True when `exc` says that arrays `avals` cannot be allocated: a MemoryError, or numpy's
    ValueError for a size beyond the address space."""
    return isinstance(exc, MemoryError) or isinstance(exc, ValueError) and (
        _nbytes(avals) > sys.maxsize)


def memory_error(op, avals, frame=None):
    """A `FuncgradMemoryError` for operation `op` whose outputs `avals` (ShapedArrays or
    `(shape, dtype)` pairs) could not be allocated: 'out of memory: needed N bytes ...'."""
    total = _nbytes(avals)
    parts = [f"{a.dtype}{list(a.shape)}" if hasattr(a, "shape") else f"{a[1]}{list(a[0])}"
             for a in avals]
    frame = frame if frame is not None else user_frame(2)
    need = (f"needed {total} bytes ({total / 2**30:.1f} GiB) for {', '.join(parts)}" if parts
            else "an allocation failed")
    return FuncgradMemoryError(
        f"{op}: out of memory: {need}\n{where(frame)}\n"
        "  hint: make the arrays smaller, process the data in chunks (lax.map, lax.scan), "
        "or free arrays that are no longer needed")


# What a user calls the transform behind a trace's name (eager grad and vjp run `linearize`).
_TRANSFORM_NAMES = {"linearize": "grad/vjp/linearize", "jvp": "jvp", "jacfwd": "jacfwd"}


def transform_name(trace_name):
    """The transform a user called, from the name of its trace: "linearize" -> "grad/vjp/
    linearize"; other names are their own."""
    return _TRANSFORM_NAMES.get(trace_name, trace_name)


def array_conversion_error(function, value, transform, frame):
    """A `TracerArrayConversionError`: NumPy's `function` ("numpy.sin") was given `value` (a
    description, "f32[3]") traced by `transform`; `frame` is the user's line."""
    return TracerArrayConversionError(
        f"{function}: NumPy was given a value traced by `{transform_name(transform)}` "
        f"({value}); NumPy "
        "computes on constant numpy.ndarrays only, and a result computed from a constant would "
        "not depend on the traced input (under grad its derivative would be silently zero)"
        f"\n{where(frame)}\n"
        "  hint: use funcgrad.numpy (e.g. fnp.sin) or funcgrad.lax on traced values; to look "
        "at one, use funcgrad.debug.print")


_USER_ERROR = "__funcgrad_user_error__"


def mark_user_error(exc, note=None):
    """Mark `exc`, raised by user code that funcgrad called (a debug.callback), so that
    funcgrad re-raises it unchanged instead of reporting a funcgrad bug; returns `exc`."""
    try:
        setattr(exc, _USER_ERROR, True)
    except AttributeError:  # an exception type with __slots__: it still propagates
        pass
    if note and hasattr(exc, "add_note") and note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
    return exc


def is_user_error(exc):
    """True for an exception marked by `mark_user_error` (re-raise it as it is)."""
    return getattr(exc, _USER_ERROR, False) is True


# --- the public API boundary ----------------------------------------------------------------
_BOUNDARY = {TypeError: FuncgradTypeError, ValueError: FuncgradValueError,
             IndexError: FuncgradIndexError, KeyError: FuncgradIndexError,
             AttributeError: FuncgradTypeError, OverflowError: FuncgradOverflowError}


_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")})


def _raised_in_user_code(exc):
    """True when `exc` passed through user code (a loop body or callback funcgrad called):
    a frame of its traceback outside funcgrad, the standard library and installed packages."""
    tb = exc.__traceback__.tb_next  # skip the boundary's own frame
    while tb is not None:
        code = tb.tb_frame.f_code
        if not _is_internal(code) and not code.co_filename.startswith(_LIBRARY_DIRS):
            return True
        tb = tb.tb_next
    return False


def api_boundary(fn, qualname):
    """`fn` whose raw Python/numpy exceptions on bad arguments (a TypeError, ValueError, ...
    raised inside funcgrad, which its own checks missed) become funcgrad errors naming
    `qualname`, the arguments and the user's line. Funcgrad errors and exceptions raised by
    user code that `fn` calls (a loop body, a callback) pass through unchanged."""
    @functools.wraps(fn)
    def boundary(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except FuncgradError as e:
            _name_in(e, qualname)
            raise
        except tuple(_BOUNDARY) as e:
            if is_user_error(e) or _raised_in_user_code(e):
                raise
            raise _boundary_error(qualname, e, args, kwargs) from e
    # pickle (and repr) find the function where it is exported: funcgrad.numpy.sum
    package, _, boundary.__qualname__ = qualname.rpartition(".")
    boundary.__module__ = f"funcgrad.{package}"
    return boundary


def _name_in(exc, qualname):
    """Make the message of `exc` name the public function the user called (a delegated
    operation's error, e.g. `max: ...` from `numpy.amax`, gets `in funcgrad.numpy.amax`)."""
    if len(exc.args) == 1 and isinstance(exc.args[0], str) and (
            qualname.rsplit(".", 1)[-1] not in exc.args[0]):
        exc.args = (f"{exc.args[0]}\n  in funcgrad.{qualname}",)


def _boundary_error(qualname, exc, args, kwargs):
    cls = next(c for base, c in _BOUNDARY.items() if isinstance(exc, base))
    shown = [short_repr(a, 40) for a in args] + [f"{k}={short_repr(v, 40)}"
                                                 for k, v in kwargs.items()]
    return cls(f"{qualname}: invalid arguments ({', '.join(shown)}): "
               f"{type(exc).__name__}: {exc}\n{where(user_frame(3))}\n"
               f"  hint: see help(funcgrad.{qualname}) for the arguments it takes")
