"""`funcgrad.scipy.signal`: SciPy's convolutions and detrending on funcgrad arrays, as
`jax.scipy.signal` (`convolve`, `correlate`, `convolve2d`, `correlate2d`, `fftconvolve`,
`detrend`; `stft`, `istft`, `csd` and `welch` live in `spectral.py`).

Direct convolutions are one `lax.conv_general_dilated` (any number of dimensions, complex
included); `fftconvolve` multiplies FFTs. Both are differentiable in both inputs. Beyond
JAX, `convolve2d`/`correlate2d` take every SciPy boundary ("fill" with any value, "wrap",
"symm"). Imports funcgrad.numpy and lax.

    >>> convolve(fnp.array([1.0, 2.0, 3.0]), fnp.array([0.0, 1.0]))
    Array([0., 1., 2., 3.], dtype=float32)
"""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import errors, lax

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend",
           "fftconvolve", "istft", "stft", "welch"]

_MODES = ("full", "same", "valid")


def _inputs(name, in1, in2, mode):
    if mode not in _MODES:
        raise errors.op_error(name, f"mode must be one of 'full', 'same', 'valid', got "
                              f"{errors.short_repr(mode)}", cls=errors.FuncgradValueError)
    a, b = fnp.asarray(in1), fnp.asarray(in2)
    if a.ndim != b.ndim:
        raise errors.op_error(name, f"in1 and in2 must have the same number of dimensions, got "
                              f"shapes {a.shape} and {b.shape}", cls=errors.FuncgradValueError)
    if not a.size or not b.size:
        raise errors.op_error(name, f"zero-size arrays are not supported, got shapes {a.shape} "
                              f"and {b.shape}", cls=errors.FuncgradValueError)
    dt = fnp.result_type(a, b, 1.0)
    return a.astype(dt), b.astype(dt)


def _crop(full, shape1, shape2, mode, axes=None, correlation=False):
    """The `mode` part along `axes` (default all) of a full convolution of inputs of
    `shape1` and `shape2`: SciPy's 'same' is centered on in1 (a 2-D correlation's center
    rounds the other way for an even kernel), 'valid' keeps the complete overlaps."""
    if mode == "full":
        return full
    starts, limits = [0] * full.ndim, list(full.shape)
    for i in range(full.ndim) if axes is None else axes:
        s1, s2 = shape1[i], shape2[i]
        if mode == "same":
            lo = s2 // 2 if correlation else (s2 - 1) // 2
            starts[i], limits[i] = lo, lo + s1
        else:
            starts[i] = min(s1, s2) - 1
            limits[i] = starts[i] + max(s1, s2) - min(s1, s2) + 1
    return lax.slice(full, starts, limits)


def _direct(name, a, b, mode, precision):
    """The full (then cropped) convolution of a and b, as one conv_general_dilated."""
    if mode == "valid" and not (all(x >= y for x, y in zip(a.shape, b.shape))
                                or all(x <= y for x, y in zip(a.shape, b.shape))):
        raise errors.op_error(name, f"for 'valid' mode one input must be at least as large as "
                              f"the other in every dimension, got shapes {a.shape} and "
                              f"{b.shape}", cls=errors.FuncgradValueError)
    pads = [(k - 1, k - 1) for k in b.shape]
    full = lax.conv_general_dilated(a[None, None], fnp.flip(b)[None, None], (1,) * a.ndim,
                                    pads, precision=precision)[0, 0]
    return _crop(full, a.shape, b.shape, mode)


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """The N-dimensional convolution of `in1` and `in2` (same number of dimensions).

    Args:
        mode: "full" (every overlap), "same" (in1's shape, centered) or "valid" (complete
            overlaps only).
        method: "auto" or "direct" (one convolution), "fft" (`fftconvolve`).

    Example:
        >>> convolve(fnp.array([1.0, 2.0, 3.0]), fnp.array([1.0, 1.0]), mode="same")
        Array([1., 3., 5.], dtype=float32)
    """
    a, b = _inputs("convolve", in1, in2, mode)
    if method == "fft":
        return fftconvolve(a, b, mode)
    if method not in ("auto", "direct"):
        raise errors.op_error("convolve", f"method must be 'auto', 'direct' or 'fft', got "
                              f"{errors.short_repr(method)}", cls=errors.FuncgradValueError)
    return _direct("convolve", a, b, mode, precision)


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """The N-dimensional cross-correlation: `convolve(in1, flip(conj(in2)))`.

    Example:
        >>> correlate(fnp.array([1.0, 2.0, 3.0]), fnp.array([1.0, 0.5]))
        Array([0.5, 2. , 3.5, 3. ], dtype=float32)
    """
    a, b = _inputs("correlate", in1, in2, mode)
    return convolve(a, fnp.flip(fnp.conj(b)), mode, method, precision)


def _boundary_full(name, a, b, mode, boundary, fillvalue, precision, correlation=False):
    """2-D convolution with SciPy's boundary: in1 extended by the kernel's size - 1 on each
    side (a constant, periodically, or mirrored), then the complete overlaps."""
    if a.ndim != 2 or b.ndim != 2:
        raise errors.op_error(name, f"only supports 2-dimensional inputs, got shapes {a.shape} "
                              f"and {b.shape}", cls=errors.FuncgradValueError)
    if boundary not in ("fill", "wrap", "symm"):
        raise errors.op_error(name, f"boundary must be 'fill', 'wrap' or 'symm', got "
                              f"{errors.short_repr(boundary)}", cls=errors.FuncgradValueError)
    if mode == "valid" or (boundary == "fill" and not _nonzero(fillvalue) and not correlation):
        return _direct(name, a, b, mode, precision)
    pads = [(k - 1, k - 1) for k in b.shape]
    if boundary == "fill":
        ext = fnp.pad(a, pads, constant_values=fnp.asarray(fillvalue).astype(a.dtype))
    else:
        ext = fnp.pad(a, pads, mode="wrap" if boundary == "wrap" else "symmetric")
    full = _direct(name, ext, b, "valid", precision)
    return _crop(full, a.shape, b.shape, mode, correlation=correlation)


def _nonzero(v):
    return not (isinstance(v, (int, float, complex)) and v == 0)


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-D convolution of `in1` and `in2`, with SciPy's `boundary` ("fill" with
    `fillvalue`, "wrap", "symm"); JAX supports only "fill" with 0.

    Example:
        >>> convolve2d(fnp.ones((2, 2)), fnp.ones((1, 2)), mode="valid")
        Array([[2.],
               [2.]], dtype=float32)
    """
    a, b = _inputs("convolve2d", in1, in2, mode)
    return _boundary_full("convolve2d", a, b, mode, boundary, fillvalue, precision)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-D cross-correlation, `convolve2d(in1, flip(conj(in2)))` with the same
    boundary handling.

    Example:
        >>> correlate2d(fnp.eye(2), fnp.array([[1.0, 2.0]]), mode="valid")
        Array([[1.],
               [2.]], dtype=float32)
    """
    a, b = _inputs("correlate2d", in1, in2, mode)
    out = _boundary_full("correlate2d", a, fnp.flip(fnp.conj(b)), mode, boundary, fillvalue,
                         precision, correlation=True)
    if mode == "valid" and a.shape != b.shape and all(x <= y for x, y in zip(a.shape, b.shape)):
        return fnp.conj(out)  # SciPy's (and JAX's) result when in2 is the larger one
    return out


def fftconvolve(in1, in2, mode="full", axes=None):
    """The convolution over `axes` (default all) by FFT: the product of the zero-padded
    transforms; along the other axes the inputs must have one shape (or size 1).

    Example:
        >>> fftconvolve(fnp.array([1.0, 2.0, 3.0]), fnp.array([0.0, 1.0])).round(5)
        Array([0., 1., 2., 3.], dtype=float32)
    """
    a, b = _inputs("fftconvolve", in1, in2, mode)
    axes = tuple(range(a.ndim)) if axes is None else tuple(
        sorted(ax % a.ndim for ax in ((axes,) if isinstance(axes, int) else axes)))
    for ax in range(a.ndim):
        if ax not in axes and a.shape[ax] != b.shape[ax] and 1 not in (a.shape[ax],
                                                                          b.shape[ax]):
            raise errors.op_error("fftconvolve", f"along axis {ax}, not convolved, the inputs "
                                  f"must have one size, got shapes {a.shape} and {b.shape}",
                                  cls=errors.FuncgradValueError)
    if mode == "valid" and not (all(a.shape[i] >= b.shape[i] for i in axes)
                                or all(a.shape[i] <= b.shape[i] for i in axes)):
        raise errors.op_error("fftconvolve", "for 'valid' mode one input must be at least as "
                              "large as the other in every convolved dimension",
                              cls=errors.FuncgradValueError)
    size = [a.shape[i] + b.shape[i] - 1 for i in axes]
    if a.dtype.kind == "c":
        full = fnp.fft.ifftn(fnp.fft.fftn(a, size, axes) * fnp.fft.fftn(b, size, axes), size,
                             axes)
    else:
        full = fnp.fft.irfftn(fnp.fft.rfftn(a, size, axes) * fnp.fft.rfftn(b, size, axes),
                              size, axes).astype(a.dtype)
    return _crop(full, a.shape, b.shape, mode, axes)


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):  # noqa: A002
    """`data` without its least-squares linear trend along `axis` (piecewise between the
    breakpoints `bp`), or without its mean (`type="constant"`).

    Example:
        >>> detrend(fnp.array([1.0, 2.0, 3.0, 5.0])).round(3)
        Array([ 0.2, -0.1, -0.4,  0.3], dtype=float32)
    """
    if overwrite_data is not None:
        raise errors.op_error("detrend", "overwrite_data is not supported (arrays are "
                              "immutable)", cls=errors.FuncgradValueError)
    if type not in ("linear", "l", "constant", "c"):
        raise errors.op_error("detrend", f"type must be 'linear' or 'constant', got "
                                         f"{errors.short_repr(type)}",
                              cls=errors.FuncgradValueError)
    x = fnp.asarray(data)
    x = x.astype(fnp.result_type(x, 1.0))
    if type in ("constant", "c"):
        return x - fnp.mean(x, axis=axis, keepdims=True)
    x = fnp.moveaxis(x, axis, 0)
    n = x.shape[0]
    bps = np.unique(np.concatenate([[0], np.atleast_1d(np.asarray(bp, int)), [n]]))
    if np.any(bps < 0) or np.any(bps > n):
        raise errors.op_error("detrend", f"breakpoints must be in [0, {n}] along the axis, got "
                              f"{bp}", cls=errors.FuncgradValueError)
    parts = []
    for lo, hi in zip(bps[:-1], bps[1:]):
        seg = x[lo:hi]
        t = fnp.arange(1, hi - lo + 1, dtype=x.dtype) / (hi - lo)
        design = fnp.stack([t, fnp.ones_like(t)], axis=1)
        flat = seg.reshape(hi - lo, -1)
        coef = fnp.linalg.lstsq(design, flat)[0]
        parts.append((flat - design @ coef).reshape(seg.shape))
    return fnp.moveaxis(fnp.concatenate(parts, 0), 0, axis)


from funcgrad.scipy.spectral import csd, istft, stft, welch  # noqa: E402  (they use detrend)
