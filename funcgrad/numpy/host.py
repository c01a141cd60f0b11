"""Host-side helpers of funcgrad.numpy, as JAX's: files and buffers (`save`, `savez`,
`load`, `frombuffer`, `fromfile`, `fromiter`, `fromstring`), printing (`array_repr`,
`array_str`, `printoptions`, `get_printoptions`, `set_printoptions`: NumPy's options, which
funcgrad arrays print with), `einsum_path` and `iterable`.

They read concrete values (under jit, a traced argument is an error naming the function) and
return funcgrad arrays where NumPy returns arrays. Imports numpy and the sibling _util.
"""

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import ArrayBase, concrete_value
from funcgrad.core.array import host_value
from funcgrad.numpy._util import asarray_operand, user_dtype

__all__ = [
    "array_repr", "array_str", "einsum_path", "frombuffer", "fromfile", "fromiter",
    "fromstring", "get_printoptions", "iterable", "load", "printoptions", "save", "savez",
    "set_printoptions",
]

printoptions = np.printoptions
get_printoptions = np.get_printoptions
iterable = np.iterable


def set_printoptions(*args, **kwargs):
    """NumPy's `set_printoptions` (funcgrad arrays print with NumPy's options).

    Example:
        >>> fnp.set_printoptions(precision=4)
        >>> fnp.set_printoptions(precision=8)  # NumPy's default again
    """
    return np.set_printoptions(*args, **kwargs)


def _host(name, x):
    """The NumPy value of `x` (an array-like or a concrete funcgrad array)."""
    if isinstance(x, ArrayBase):
        v = concrete_value(x)
        if v is None:
            raise errors.op_error(name, f"needs a concrete array, got a traced {x.aval}",
                                  cls=errors.ConcretizationTypeError,
                                  hint="call it outside jit/vmap (it works on host values)")
        return host_value(v)
    return np.asarray(x)


class _FuncgradOSError(errors.FuncgradError, OSError):
    """A file or buffer NumPy could not read or write."""


def _call(name, fn, *args, **kwargs):
    """`fn(*args, **kwargs)` (NumPy's host function) with its errors as funcgrad errors
    naming `name`."""
    try:
        return fn(*args, **kwargs)
    except errors.FuncgradError:
        raise
    except OSError as e:
        raise errors.op_error(name, str(e), cls=_FuncgradOSError) from e
    except Exception as e:  # noqa: BLE001  (NumPy's own checks, reported as funcgrad's)
        try:
            text = str(e)
        except Exception:  # noqa: BLE001
            text = type(e).__name__
        cls = errors.FuncgradValueError if isinstance(e, ValueError) else \
            errors.FuncgradTypeError
        raise errors.op_error(name, f"invalid arguments: {text[:200]}", cls=cls) from e


def _wrap(x):
    from funcgrad.numpy.creation import asarray
    return asarray(x)


def save(file, arr, allow_pickle=True):
    """`numpy.save` of the array's values.

    Example:
        >>> import io
        >>> fnp.save(io.BytesIO(), fnp.ones(2))
    """
    _call("save", np.save, file, _host("save", arr), allow_pickle=allow_pickle)


def savez(file, *args, allow_pickle=True, **kwds):
    """`numpy.savez` of the arrays' values (positional ones as arr_0, arr_1, ...).

    Example:
        >>> import io
        >>> fnp.savez(io.BytesIO(), w=fnp.ones(2))
    """
    _call("savez", np.savez, file, *[_host("savez", a) for a in args],
          allow_pickle=allow_pickle, **{k: _host("savez", v) for k, v in kwds.items()})


def load(file, *args, **kwargs):
    """`numpy.load`: an .npy file gives a funcgrad array, an .npz archive NumPy's mapping.

    Example:
        >>> import io
        >>> b = io.BytesIO(); fnp.save(b, fnp.ones(2)); _ = b.seek(0); fnp.load(b)
        Array([1., 1.], dtype=float32)
    """
    out = _call("load", np.load, file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == object:
            raise errors.op_error("load", "object arrays cannot become funcgrad arrays",
                                  cls=errors.FuncgradValueError)
        return _wrap(out)
    return out


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """The buffer's bytes read as a 1-D array of `dtype`.

    Example:
        >>> fnp.frombuffer(b"\\x01\\x02", dtype=fnp.uint8)
        Array([1, 2], dtype=uint8)
    """
    return _wrap(_call("frombuffer", lambda: np.frombuffer(buffer, dtype=dtypes.as_dtype(dtype),
                                                         count=count, offset=offset))
                 .astype(user_dtype(dtype)))


def fromfile(*args, **kwargs):
    """`numpy.fromfile`, as a funcgrad array (a host read: JAX refuses it, as impure).

    Example:
        >>> fnp.fromfile(path, dtype=fnp.float32)  # doctest: +SKIP
    """
    return _wrap(_call("fromfile", np.fromfile, *args, **kwargs))


def fromiter(*args, **kwargs):
    """`numpy.fromiter`, as a funcgrad array.

    Example:
        >>> fnp.fromiter(range(3), dtype=int)
        Array([0, 1, 2], dtype=int32)
    """
    return _wrap(_call("fromiter", np.fromiter, *args, **kwargs))


def fromstring(string, dtype=float, count=-1, *, sep):
    """The numbers in the text `string` separated by `sep`, as a 1-D array.

    Example:
        >>> fnp.fromstring("1 2 3", sep=" ")
        Array([1., 2., 3.], dtype=float32)
    """
    return _wrap(_call("fromstring", lambda: np.fromstring(string, dtype=dtypes.as_dtype(dtype),
                                                             count=count, sep=sep))
                 .astype(user_dtype(dtype)))


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    """NumPy's `array_repr` of the array's values.

    Example:
        >>> fnp.array_repr(fnp.ones(2))
        'array([1., 1.], dtype=float32)'
    """
    return _call("array_repr", np.array_repr, _host("array_repr", arr), max_line_width,
                 precision, suppress_small)


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    """NumPy's `array_str` of the array's values.

    Example:
        >>> fnp.array_str(fnp.ones(2))
        '[1. 1.]'
    """
    return _call("array_str", np.array_str, _host("array_str", a), max_line_width, precision,
                 suppress_small)


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """NumPy's `einsum_path` (the contraction order and its report) for the operands'
    shapes (traced operands included: only shapes are read).

    Example:
        >>> fnp.einsum_path("ij,jk->ik", fnp.ones((2, 3)), fnp.ones((3, 4)))[0]
        ['einsum_path', (0, 1)]
    """
    shapes = [np.empty(asarray_operand("einsum_path", x).shape) for x in operands]
    opt = "greedy" if optimize == "auto" else optimize
    return np.einsum_path(subscripts, *shapes, optimize=opt)
