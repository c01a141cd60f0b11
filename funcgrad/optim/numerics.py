"""Numerically safe helpers of optax: norms that stay differentiable at zero, a step counter
that saturates instead of wrapping.

Imports only `funcgrad.numpy` and `funcgrad.errors`.
"""


import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradTypeError, FuncgradValueError

__all__ = ["abs_sq", "safe_increment", "safe_int32_increment", "safe_norm",
           "safe_root_mean_squares"]


def abs_sq(x):
    """`|x|**2` elementwise, real for complex `x`: `(conj(x) * x).real`.

    Example:
        >>> abs_sq(fnp.array([3 + 4j])).tolist()
        [25.0]
    """
    if not hasattr(x, "dtype") or not hasattr(x, "shape"):
        raise FuncgradTypeError(f"abs_sq: expected an array, got {type(x).__name__}")
    return fnp.real(fnp.conj(x) * x)


def safe_norm(x, min_norm, ord=None, axis=None, keepdims: bool = False):  # noqa: A002
    """`max(norm(x), min_norm)`, with a gradient that is finite where `norm(x) <= min_norm`.

    Args:
        x: the array.
        min_norm: the lower bound.
        ord, axis, keepdims: as `funcgrad.numpy.linalg.norm`.

    Example:
        >>> float(safe_norm(fnp.zeros(3), 1e-3))
        0.001
    """
    norm = fnp.linalg.norm(x, ord=ord, axis=axis, keepdims=True)
    x = fnp.where(norm <= min_norm, fnp.ones_like(x), x)
    norm = fnp.squeeze(norm, axis=axis) if not keepdims else norm
    masked_norm = fnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    return fnp.where(norm <= min_norm, min_norm, masked_norm)


def safe_root_mean_squares(x, min_rms):
    """`max(sqrt(mean(|x|**2)), min_rms)` with a finite gradient below `min_rms`.

    Example:
        >>> float(safe_root_mean_squares(fnp.array([3.0, 4.0]), 1.0))
        3.5355...
    """
    rms = fnp.sqrt(fnp.mean(abs_sq(x)))
    x = fnp.where(rms <= min_rms, fnp.ones_like(x), x)
    return fnp.where(rms <= min_rms, min_rms, fnp.sqrt(fnp.mean(abs_sq(x))))


def safe_increment(count):
    """`count + 1`, staying at the dtype's largest value instead of overflowing.

    Example:
        >>> int(safe_increment(fnp.array(2**31 - 1, fnp.int32)))
        2147483647
    """
    count = fnp.asarray(count)
    dtype = count.dtype
    if fnp.issubdtype(dtype, fnp.integer):
        max_value = fnp.iinfo(dtype).max
    elif fnp.issubdtype(dtype, fnp.floating):
        max_value = fnp.finfo(dtype).max
    else:
        raise FuncgradValueError(
            f"safe_increment: cannot increment a count of dtype {dtype}; use an integer or "
            "floating dtype")
    max_value = fnp.asarray(max_value, dtype)
    return fnp.where(count < max_value, count + fnp.asarray(1, dtype), max_value)


safe_int32_increment = safe_increment
