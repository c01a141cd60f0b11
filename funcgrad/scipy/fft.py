"""`funcgrad.scipy.fft`: the discrete cosine transform of type 2 and its inverse, as
`jax.scipy.fft` (`dct`, `idct`, `dctn`, `idctn`; only type 2, as JAX).

Computed with one complex FFT of the even-odd interleaved input (Makhoul's algorithm), so
they are differentiable and batch like `funcgrad.numpy.fft`. Imports funcgrad.numpy.

    >>> dct(fnp.array([1.0, 0.0]))
    Array([2.       , 1.4142135], dtype=float32)
"""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import errors

__all__ = ["dct", "dctn", "idct", "idctn"]


def _check(name, type, norm):  # noqa: A002  (SciPy's name)
    if type != 2:
        raise errors.op_error(name, f"only DCT type 2 is implemented (as in JAX), got type="
                              f"{type}", cls=errors.FuncgradValueError)
    if norm not in (None, "backward", "ortho"):
        raise errors.op_error(name, f"norm must be None, 'backward' or 'ortho', got "
                                    f"{errors.short_repr(norm)}",
                              cls=errors.FuncgradValueError)


def _resized(x, n, axis):
    """`x` cut or zero-padded to length `n` along `axis`."""
    if n is None or n == x.shape[axis]:
        return x
    if n < x.shape[axis]:
        return fnp.take(x, fnp.arange(n), axis=axis)
    pads = [(0, 0)] * x.ndim
    pads[axis] = (0, n - x.shape[axis])
    return fnp.pad(x, pads)


def _float(x):
    x = fnp.asarray(x)
    return x.astype(fnp.result_type(x, 1.0))


def _twiddle(n, dt, sign):
    k = np.arange(n)
    ct = fnp.complex64 if np.dtype(dt).itemsize <= 4 else fnp.complex128
    return fnp.asarray(np.exp(sign * 1j * np.pi * k / (2 * n))).astype(ct)


def _ortho_scale(n, dt):
    s = np.full(n, np.sqrt(1.0 / (2 * n)))
    s[0] = np.sqrt(1.0 / (4 * n))
    return fnp.asarray(s).astype(dt)


def _along(x, axis, fn):
    x = fnp.moveaxis(x, axis, -1)
    return fnp.moveaxis(fn(x), -1, axis)


def _interleave(n):
    """The order of Makhoul's sequence: the even entries, then the odd ones reversed."""
    return np.concatenate([np.arange(0, n, 2), np.arange(1, n, 2)[::-1]])


def _dct2_last(x, norm):
    n = x.shape[-1]
    v = fnp.take(x, _interleave(n), axis=-1)
    y = 2 * fnp.real(fnp.fft.fft(v) * _twiddle(n, x.dtype, -1)).astype(x.dtype)
    return y * _ortho_scale(n, x.dtype) if norm == "ortho" else y


def _idct2_last(y, norm):
    n = y.shape[-1]
    if norm == "ortho":
        y = y / _ortho_scale(n, y.dtype)
    # V[k] = (y[k] - i y[n - k]) e^(i pi k / 2n) / 2, y[n] = 0; v = ifft(V); deinterleave
    rev = fnp.concatenate([fnp.zeros_like(y[..., :1]), fnp.flip(y[..., 1:], -1)], axis=-1)
    big = (y - 1j * rev) * _twiddle(n, y.dtype, 1) / 2
    v = fnp.real(fnp.fft.ifft(big)).astype(y.dtype)
    return fnp.take(v, np.argsort(_interleave(n)), axis=-1)


def dct(x, type=2, n=None, axis=-1, norm=None):  # noqa: A002
    """The DCT-II along `axis`: y[k] = 2 sum_n x[n] cos(pi k (2n + 1) / 2N) (`norm="ortho"`:
    scaled to an orthogonal transform); `n` cuts or zero-pads the input first.

    Example:
        >>> dct(fnp.array([1.0, 2.0, 3.0])).round(4)
        Array([12.    , -3.4641,  0.    ], dtype=float32)
    """
    _check("dct", type, norm)
    x = _float(x)
    axis = axis % x.ndim
    return _along(_resized(x, n, axis), axis, lambda v: _dct2_last(v, norm))


def idct(x, type=2, n=None, axis=-1, norm=None):  # noqa: A002
    """The inverse of `dct` (a DCT-III, divided by 2N unless `norm="ortho"`).

    Example:
        >>> idct(dct(fnp.array([1.0, 2.0, 3.0]))).round(4)
        Array([1., 2., 3.], dtype=float32)
    """
    _check("idct", type, norm)
    x = _float(x)
    axis = axis % x.ndim
    return _along(_resized(x, n, axis), axis, lambda v: _idct2_last(v, norm))


def _axes_sizes(name, x, s, axes):
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = tuple(a % x.ndim for a in axes)
    if s is not None and len(s) != len(axes):
        raise errors.op_error(name, f"s and axes must have the same length, got {s} and "
                              f"{axes}", cls=errors.FuncgradValueError)
    return axes, (None,) * len(axes) if s is None else tuple(s)


def dctn(x, type=2, s=None, axes=None, norm=None):  # noqa: A002
    """The DCT-II over several `axes` (default all; the last len(s) with `s`).

    Example:
        >>> dctn(fnp.ones((2, 2)))
        Array([[16.,  0.],
               [ 0.,  0.]], dtype=float32)
    """
    _check("dctn", type, norm)
    x = _float(x)
    axes, sizes = _axes_sizes("dctn", x, s, axes)
    for ax, n in zip(axes, sizes):
        x = dct(x, 2, n, ax, norm)
    return x


def idctn(x, type=2, s=None, axes=None, norm=None):  # noqa: A002
    """The inverse of `dctn`.

    Example:
        >>> idctn(dctn(fnp.eye(2))).round(5)
        Array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    _check("idctn", type, norm)
    x = _float(x)
    axes, sizes = _axes_sizes("idctn", x, s, axes)
    for ax, n in zip(axes, sizes):
        x = idct(x, 2, n, ax, norm)
    return x
