"""funcgrad.numpy.fft: numpy.fft's functions (also the Array API's fft extension), all on the
one primitive `lax.fft`: `fft ifft rfft irfft hfft ihfft`, their 2-D and n-D forms,
`fftfreq rfftfreq fftshift ifftshift`.

Each transform converts its operand (complex for the complex transforms, real floating point
for `rfft*`/`ihfft`), crops or zero-pads it to `n`/`s`, moves `axes` last, binds `lax.fft` and
scales by `norm` ("backward", the default, "ortho" or "forward"). Derivatives, batching and
jit come from the primitive. Imports lax and the other funcgrad.numpy families only.
"""

import math

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Array, ArrayBase
from funcgrad.lax.fft import FftType
from funcgrad.numpy._util import (
    asarray_operand,
    canonical_axis,
    dtype_of,
    shape_of,
    static_int,
    weak_scalar,
)
from funcgrad.numpy.creation import place
from funcgrad.numpy.shape import roll

__all__ = [
    "fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn",
    "ifftshift", "ihfft", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn",
]

_NORMS = ("backward", "ortho", "forward")
_SWAPPED = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _norm(name, norm):
    if norm is None:
        return "backward"
    if not isinstance(norm, str) or norm not in _NORMS:
        raise errors.op_error(name, f"norm must be 'backward', 'ortho', 'forward' or None, got "
                              f"{errors.short_repr(norm)}", cls=errors.FuncgradValueError)
    return norm


def _operand(name, a, fft_type):
    """`a` in the dtype the transform takes: complex, or real floating point for RFFT."""
    a = asarray_operand(name, a)
    dt = dtype_of(a)
    if fft_type == FftType.RFFT and dtypes.kind(dt) == "c":
        raise errors.op_error(name, f"takes a real operand, got {dt}{list(shape_of(a))}",
                              hint="take fnp.real(x) first, or use fft for complex input")
    cdt = np.result_type(dt, np.complex64) if dtypes.kind(dt) in "fc" else dtypes.default_complex()
    want = dtypes.canonicalize(np.finfo(cdt).dtype if fft_type == FftType.RFFT else cdt)
    return a if dt == want else lax.convert_element_type(a, want)


def _axes_and_lengths(name, a, s, axes, fft_type):
    nd, shape = len(shape_of(a)), shape_of(a)
    if axes is None:
        axes = range(nd) if s is None else range(nd - len(s), nd)
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    axes = tuple(canonical_axis(name, ax, nd) for ax in axes)
    if len(set(axes)) != len(axes) or not axes:
        raise errors.op_error(name, f"axes must be distinct and not empty, got {axes}",
                              cls=errors.FuncgradValueError)
    if s is None:
        s = [shape[ax] for ax in axes]
        if fft_type == FftType.IRFFT:
            s[-1] = 2 * (s[-1] - 1)
    else:
        s = [static_int(name, n, "each entry of s (or n)") for n in np.atleast_1d(s).tolist()]
        if len(s) != len(axes):
            raise errors.op_error(name, f"s={tuple(s)} and axes={axes} differ in length",
                                  cls=errors.FuncgradValueError)
    if any(n < 1 for n in s):
        raise errors.op_error(name, f"Invalid number of FFT data points {tuple(s)} along axes "
                              f"{axes} of an operand of shape {shape}",
                              cls=errors.FuncgradValueError,
                              hint="each transform length (n, s or the axis itself) must be >= 1")
    return axes, tuple(s)


def _resize(a, ax, n):
    """`a` cropped or zero-padded to length `n` along axis `ax` (numpy's `n=`/`s=`)."""
    cur = shape_of(a)[ax]
    if cur > n:
        return lax.slice_in_dim(a, 0, n, axis=ax)
    if cur < n:
        config = [(0, n - cur, 0) if i == ax else (0, 0, 0) for i in range(len(shape_of(a)))]
        return lax.pad(a, Array(np.zeros((), dtype_of(a))), config)
    return a


def _fftn(name, a, s, axes, norm, fft_type):
    norm = _norm(name, norm)
    a = _operand(name, a, fft_type)
    axes, lengths = _axes_and_lengths(name, a, s, axes, fft_type)
    for i, (ax, n) in enumerate(zip(axes, lengths)):
        last_of_irfft = fft_type == FftType.IRFFT and i == len(axes) - 1
        a = _resize(a, ax, n // 2 + 1 if last_of_irfft else n)
    nd = len(shape_of(a))
    perm = tuple(i for i in range(nd) if i not in axes) + axes
    out = lax.fft(lax.transpose(a, perm), fft_type, lengths)
    out = lax.transpose(out, tuple(int(i) for i in np.argsort(perm)))
    size = math.prod(lengths)
    inverse = fft_type in (FftType.IFFT, FftType.IRFFT)
    scale = {"backward": 1.0, "ortho": math.sqrt(size) if inverse else 1 / math.sqrt(size),
             "forward": size if inverse else 1 / size}[norm]
    return out if scale == 1.0 else lax.mul(out, weak_scalar(scale, dtype_of(out)))


def _one(n):
    return None if n is None else (n,)


# --- 1-D ----------------------------------------------------------------------------------------

def fft(a, n=None, axis=-1, norm=None):
    """The discrete Fourier transform along `axis`, as `numpy.fft.fft`.

    Args:
        a: the input (real inputs are converted to complex).
        n: the transform length: `a` is cropped or zero-padded to it along `axis`.
        axis: the axis to transform.
        norm: "backward" (default: no scaling), "ortho" (1/sqrt(n)) or "forward" (1/n).

    Example:
        >>> fnp.fft.fft(fnp.array([1., 2., 3., 4.]))
        Array([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j], dtype=complex64)
    """
    return _fftn("fft", a, _one(n), (axis,), norm, FftType.FFT)


def ifft(a, n=None, axis=-1, norm=None):
    """The inverse discrete Fourier transform along `axis` (1/n by default), as numpy's.

    Example:
        >>> fnp.fft.ifft(fnp.array([4., 0., 0., 0.]))
        Array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
    """
    return _fftn("ifft", a, _one(n), (axis,), norm, FftType.IFFT)


def rfft(a, n=None, axis=-1, norm=None):
    """The transform of a real input: the `n // 2 + 1` non-negative frequencies.

    Example:
        >>> fnp.fft.rfft(fnp.array([1., 2., 3., 4.]))
        Array([10.+0.j, -2.+2.j, -2.+0.j], dtype=complex64)
    """
    return _fftn("rfft", a, _one(n), (axis,), norm, FftType.RFFT)


def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of `rfft`: a real output of length `n` (default `2 * (m - 1)`).

    Example:
        >>> fnp.fft.irfft(fnp.array([10., -2. + 2j, -2.]))
        Array([1., 2., 3., 4.], dtype=float32)
    """
    return _fftn("irfft", a, _one(n), (axis,), norm, FftType.IRFFT)


def hfft(a, n=None, axis=-1, norm=None):
    """The transform of a Hermitian-symmetric signal given by its first half: a real output
    of length `n` (default `2 * (m - 1)`), as `numpy.fft.hfft` (`irfft(conj(a)) * n`).

    Example:
        >>> fnp.fft.hfft(fnp.array([1., 2., 3.]))
        Array([ 8., -2.,  0., -2.], dtype=float32)
    """
    a = lax.conj(_operand("hfft", a, FftType.FFT))
    return _fftn("hfft", a, _one(n), (axis,), _SWAPPED[_norm("hfft", norm)], FftType.IRFFT)


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of `hfft` for a real input: `conj(rfft(a)) / n`, as numpy's.

    Example:
        >>> fnp.fft.ihfft(fnp.array([8., -2., 0., -2.]))
        Array([1.-0.j, 2.-0.j, 3.-0.j], dtype=complex64)
    """
    norm = _SWAPPED[_norm("ihfft", norm)]
    return lax.conj(_fftn("ihfft", a, _one(n), (axis,), norm, FftType.RFFT))


# --- 2-D and n-D --------------------------------------------------------------------------------

def fftn(a, s=None, axes=None, norm=None):
    """The n-D transform over `axes` (default: the last `len(s)` axes, or all), with lengths
    `s`, as `numpy.fft.fftn`.

    Example:
        >>> fnp.fft.fftn(fnp.ones((2, 2)))
        Array([[4.+0.j, 0.+0.j],
               [0.+0.j, 0.+0.j]], dtype=complex64)
    """
    return _fftn("fftn", a, s, axes, norm, FftType.FFT)


def ifftn(a, s=None, axes=None, norm=None):
    """The n-D inverse transform, as `numpy.fft.ifftn`."""
    return _fftn("ifftn", a, s, axes, norm, FftType.IFFT)


def rfftn(a, s=None, axes=None, norm=None):
    """The n-D transform of a real input (the last axis halved), as `numpy.fft.rfftn`."""
    return _fftn("rfftn", a, s, axes, norm, FftType.RFFT)


def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of `rfftn` (`s[-1]` is the real output's last length), as numpy's."""
    return _fftn("irfftn", a, s, axes, norm, FftType.IRFFT)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """The 2-D transform over `axes` (default the last two), as `numpy.fft.fft2`."""
    return _fftn("fft2", a, s, axes, norm, FftType.FFT)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """The 2-D inverse transform, as `numpy.fft.ifft2`."""
    return _fftn("ifft2", a, s, axes, norm, FftType.IFFT)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """The 2-D transform of a real input, as `numpy.fft.rfft2`."""
    return _fftn("rfft2", a, s, axes, norm, FftType.RFFT)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """The inverse of `rfft2`, as `numpy.fft.irfft2`."""
    return _fftn("irfft2", a, s, axes, norm, FftType.IRFFT)


# --- frequencies and shifts ---------------------------------------------------------------------

def _freqs(name, k, n, d, dtype, device):
    dt = dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype)
    if dtypes.kind(dt) != "f":
        raise errors.op_error(name, f"dtype must be a real floating-point dtype, got {dt}",
                              cls=errors.FuncgradValueError)
    if isinstance(d, ArrayBase):  # a traced spacing: computed in funcgrad
        out = lax.div(Array(k.astype(dt)), lax.convert_element_type(d * n, dt))
    else:
        out = Array((k / (n * float(d))).astype(dt))
    return place(name, out, device)


def _positive(name, n):
    n = static_int(name, n, "n")
    if n < 1:
        raise errors.op_error(name, f"n must be a positive int, got {n}",
                              cls=errors.FuncgradValueError)
    return n


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an `n`-point transform with spacing `d`:
    `[0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (n * d)`.

    Example:
        >>> fnp.fft.fftfreq(4)
        Array([ 0.  ,  0.25, -0.5 , -0.25], dtype=float32)
    """
    n = _positive("fftfreq", n)
    k = np.concatenate([np.arange((n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return _freqs("fftfreq", k, n, d, dtype, device)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The non-negative sample frequencies of `rfft`: `[0, 1, ..., n//2] / (n * d)`.

    Example:
        >>> fnp.fft.rfftfreq(4)
        Array([0.  , 0.25, 0.5 ], dtype=float32)
    """
    n = _positive("rfftfreq", n)
    return _freqs("rfftfreq", np.arange(n // 2 + 1), n, d, dtype, device)


def _shift(name, x, axes, sign):
    x = asarray_operand(name, x)
    shape = shape_of(x)
    if axes is None:
        axes = tuple(range(len(shape)))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    axes = tuple(canonical_axis(name, ax, len(shape)) for ax in axes)
    if not axes:
        return x
    return roll(x, tuple(sign * (shape[ax] // 2) for ax in axes), axes)


def fftshift(x, axes=None):
    """Move the zero frequency to the centre (roll by `n // 2` along `axes`, default all).

    Example:
        >>> fnp.fft.fftshift(fnp.fft.fftfreq(4))
        Array([-0.5 , -0.25,  0.  ,  0.25], dtype=float32)
    """
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    """The inverse of `fftshift` (roll by `-(n // 2)`)."""
    return _shift("ifftshift", x, axes, -1)


for _name in __all__:
    globals()[_name] = errors.api_boundary(globals()[_name], f"numpy.fft.{_name}")
