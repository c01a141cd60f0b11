"""The fast Fourier transform primitive `fft_p`, as JAX's `lax.fft`: a complex FFT or IFFT,
or a real RFFT or IRFFT, over the trailing `len(fft_lengths)` axes (numpy.fft computes it).

The inverse transforms carry numpy's 1/n; `funcgrad.numpy.fft` builds numpy's functions (axes,
`n=`/`s=`, `norm=`) on this one primitive. Complex derivatives follow JAX: the transpose is
the linear one (FFT^T = FFT, IFFT^T = IFFT; RFFT and IRFFT through a padding and a mask).
Imports core, the interpreters and the other lax families only.
"""

import enum
import math

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import Array, Primitive, ShapedArray, get_aval
from funcgrad.interpreters import ad, batching
from funcgrad.lax.elementwise import conj, mul, real
from funcgrad.lax.shape import broadcast_in_dim
from funcgrad.lax.slicing import pad
from funcgrad.lax.utils import static_ints

__all__ = ["FftType", "fft", "fft_p"]


class FftType(enum.IntEnum):
    """The kind of transform, as `jax.lax.FftType`."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3

    def __str__(self):  # printed in the IR as `fft_type=RFFT`
        return self.name


def fft(x, fft_type, fft_lengths):
    """The FFT of `x` over its last `len(fft_lengths)` axes.

    Args:
        x: complex for FFT/IFFT/IRFFT, real floating point for RFFT.
        fft_type: an `FftType` or its name ("fft", "ifft", "rfft", "irfft").
        fft_lengths: the transform's lengths: the trailing axes of `x`, except for IRFFT,
            where they are the output's (the input's last axis is `fft_lengths[-1] // 2 + 1`).

    Returns:
        FFT/IFFT: the shape and dtype of `x`; RFFT: complex, last axis `n // 2 + 1`; IRFFT:
        real, trailing axes `fft_lengths`. IFFT and IRFFT divide by the transform's size.

    Example:
        >>> fft(fnp.array([1., 2., 3., 4.]), "rfft", (4,))
        Array([10.+0.j, -2.+2.j, -2.+0.j], dtype=complex64)
    """
    return fft_p.bind(x, fft_type=_fft_type(fft_type),
                      fft_lengths=static_ints("fft", fft_lengths, "fft_lengths"))


def _fft_type(t):
    if isinstance(t, str) and t.upper() in FftType.__members__:
        return FftType[t.upper()]
    if isinstance(t, (int, np.integer)) and not isinstance(t, bool) and 0 <= t <= 3:
        return FftType(int(t))
    raise errors.op_error("fft", f"fft_type must be an FftType or one of 'fft', 'ifft', "
                          f"'rfft', 'irfft', got {errors.short_repr(t)}",
                          cls=errors.FuncgradValueError)


def _in_trailing(fft_type, lengths):
    """The trailing input shape a transform of `lengths` reads."""
    if fft_type == FftType.IRFFT:
        return lengths[:-1] + (lengths[-1] // 2 + 1,)
    return lengths


def _fft_abstract(x, *, fft_type, fft_lengths):
    k, name = len(fft_lengths), FftType(fft_type).name
    if not 1 <= k <= x.ndim or any(n < 1 for n in fft_lengths):
        raise errors.op_error("fft", f"{name} needs 1 to {x.ndim} positive fft_lengths for an "
                              f"operand {x}, got fft_lengths={fft_lengths}",
                              cls=errors.FuncgradValueError)
    want = "f" if fft_type == FftType.RFFT else "c"
    if dtypes.kind(x.dtype) != want:
        raise errors.op_error("fft", f"{name} takes a {'real float' if want == 'f' else 'complex'}"
                              f" operand, got {x}", hint="funcgrad.numpy.fft converts dtypes")
    trailing = _in_trailing(fft_type, fft_lengths)
    if x.shape[-k:] != trailing:
        raise errors.op_error("fft", f"{name} with fft_lengths={fft_lengths} needs an operand "
                              f"whose last axes are {trailing}, got {x}",
                              cls=errors.FuncgradValueError)
    shape, dt = x.shape, x.dtype
    if fft_type == FftType.RFFT:
        shape, dt = x.shape[:-1] + (fft_lengths[-1] // 2 + 1,), np.result_type(dt, np.complex64)
    elif fft_type == FftType.IRFFT:
        shape, dt = x.shape[:-k] + fft_lengths, np.finfo(dt).dtype
    return ShapedArray(shape, dtypes.canonicalize(dt), False)


_NUMPY = {FftType.FFT: np.fft.fftn, FftType.IFFT: np.fft.ifftn, FftType.RFFT: np.fft.rfftn,
          FftType.IRFFT: np.fft.irfftn}


def _fft_impl(x, *, fft_type, fft_lengths):
    axes = tuple(range(-len(fft_lengths), 0))
    return _NUMPY[fft_type](np.asarray(x), s=fft_lengths, axes=axes)


def _rfft_transpose(ct, lengths):
    # rfft(x) = fft(x + 0j)[..., :n//2+1]: pad the cotangent back to n, FFT, real part
    a, n = get_aval(ct), lengths[-1]
    config = [(0, 0, 0)] * (a.ndim - 1) + [(0, n - (n // 2 + 1), 0)]
    padded = pad(ct, Array(np.zeros((), a.dtype)), config)
    return real(fft(padded, FftType.FFT, lengths))


def _irfft_transpose(ct, lengths):
    # irfft sums each stored frequency k with its mirror n - k (k = 0 and, for even n,
    # k = n/2 stand alone): the transpose is conj(mask * rfft(ct)) / size
    x = fft(ct, FftType.RFFT, lengths)
    a, n = get_aval(x), lengths[-1]
    mask = np.full(n // 2 + 1, 2.0)
    mask[0] = mask[-1 if n % 2 == 0 else 0] = 1.0
    mask = Array((mask / math.prod(lengths)).astype(a.dtype))
    return conj(mul(x, broadcast_in_dim(mask, a.shape, (a.ndim - 1,))))


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if fft_type == FftType.RFFT:
        return [_rfft_transpose(ct, fft_lengths)]
    if fft_type == FftType.IRFFT:
        return [_irfft_transpose(ct, fft_lengths)]
    return [fft(ct, fft_type, fft_lengths)]


def _fft_batch(args, dims, *, fft_type, fft_lengths):
    x = batching.moveaxis(args[0], dims[0], 0)
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), 0


fft_p = Primitive("fft")
fft_p.def_impl(_fft_impl)
fft_p.def_abstract_eval(_fft_abstract)
ad.deflinear(fft_p, _fft_transpose)
batching.batch_rules[fft_p] = _fft_batch
fft_p.declare("library", dtype_kinds="fc")
