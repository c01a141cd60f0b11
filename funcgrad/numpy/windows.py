"""NumPy's window functions: `bartlett`, `blackman`, `hamming`, `hanning`, `kaiser` (M
samples of the default float dtype; a traced `beta` of `kaiser` is differentiable).

    >>> fnp.hanning(3)
    Array([0., 1., 0.], dtype=float32)
"""

import numpy as np

import funcgrad.numpy.float_ops as _float_ops
from funcgrad import dtypes
from funcgrad.numpy._util import asarray_operand, convert, static_int
from funcgrad.numpy.creation import arange, ones
from funcgrad.numpy.math import abs as abs_
from funcgrad.numpy.math import cos, multiply, sqrt, subtract, true_divide

__all__ = ["bartlett", "blackman", "hamming", "hanning", "kaiser"]


def _n(name, m):
    return static_int(name, m, "M")


def _ones_or_empty(m):
    return ones(max(m, 0), dtypes.default_float())


def _cosine_window(name, m, coeffs):
    m = _n(name, m)
    if m < 2:
        return _ones_or_empty(m)
    k = multiply(arange(m, dtype=dtypes.default_float()), 2 * np.pi / (m - 1))
    out = coeffs[0]
    for j, c in enumerate(coeffs[1:], 1):  # sum_j c_j cos(j k)
        out = out + multiply(c, cos(multiply(k, float(j))))
    return out


def hanning(M):  # noqa: N803  (NumPy's name)
    """The Hann window 0.5 - 0.5 cos(2 pi n / (M - 1)).

    Example:
        >>> fnp.hanning(5)
        Array([0. , 0.5, 1. , 0.5, 0. ], dtype=float32)
    """
    return _cosine_window("hanning", M, (0.5, -0.5))


def hamming(M):  # noqa: N803
    """The Hamming window 0.54 - 0.46 cos(2 pi n / (M - 1)).

    Example:
        >>> fnp.hamming(3)
        Array([0.08000001, 1.        , 0.08000001], dtype=float32)
    """
    return _cosine_window("hamming", M, (0.54, -0.46))


def blackman(M):  # noqa: N803
    """The Blackman window 0.42 - 0.5 cos(2 pi n / (M - 1)) + 0.08 cos(4 pi n / (M - 1)).

    Example:
        >>> fnp.blackman(3).round(6)
        Array([-0.,  1., -0.], dtype=float32)
    """
    return _cosine_window("blackman", M, (0.42, -0.5, 0.08))


def bartlett(M):  # noqa: N803
    """The triangular Bartlett window 1 - |2n / (M - 1) - 1|.

    Example:
        >>> fnp.bartlett(5)
        Array([0. , 0.5, 1. , 0.5, 0. ], dtype=float32)
    """
    m = _n("bartlett", M)
    if m < 2:
        return _ones_or_empty(m)
    n = arange(m, dtype=dtypes.default_float())
    return subtract(1.0, abs_(subtract(true_divide(multiply(n, 2.0), m - 1), 1.0)))


def kaiser(M, beta):  # noqa: N803
    """The Kaiser window I0(beta sqrt(1 - (2n / (M - 1) - 1)**2)) / I0(beta).

    Example:
        >>> fnp.kaiser(3, 0.0)
        Array([1., 1., 1.], dtype=float32)
    """
    m = _n("kaiser", M)
    beta = asarray_operand("kaiser", beta)
    beta = convert(beta, dtypes.default_float()) if beta.dtype.kind != "f" else beta
    if m < 2:
        return _ones_or_empty(m).astype(beta.dtype)
    n = arange(m, dtype=beta.dtype)
    r = subtract(true_divide(multiply(n, 2.0), m - 1), 1.0)
    return true_divide(_float_ops.i0(multiply(beta, sqrt(subtract(1.0, r * r)))),
                       _float_ops.i0(beta))
