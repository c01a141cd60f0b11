"""SciPy's short-time Fourier transforms and Welch's spectral estimates on funcgrad arrays, as
`jax.scipy.signal`'s (`funcgrad.scipy.signal` re-exports them): `stft`, `istft`, `csd`,
`welch`.

JAX 0.10.2's algorithms: the signal is extended and padded, cut into overlapping segments
(one gather with a static index table), detrended, windowed and transformed with `fft.rfft`
or `fft.fft`; `istft` inverts with an overlap-add of the windowed segments divided by the
overlap-added squared window. Everything is a composition of funcgrad.numpy operations, so
grad, vmap and jit go through. As JAX: `nperseg=None` in `csd`/`welch` means the whole
signal (SciPy: 256), the Hann window is computed here and other named windows come from
SciPy's `get_window` (an optional import), and a window may be an array.
Imports funcgrad.numpy and funcgrad.scipy.signal.
"""

import operator

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import errors

__all__ = ["csd", "istft", "stft", "welch"]


def _int(name, what, v):
    try:
        return operator.index(v)
    except TypeError:
        raise errors.op_error(name, f"{what} must be an int, got {errors.short_repr(v)}",
                              cls=errors.FuncgradTypeError) from None


def _named_window(name, window, n, dtype):
    if isinstance(window, str) and window == "hann":
        w = np.ones(1) if n == 1 else np.sin(np.linspace(0, np.pi, n, endpoint=False)) ** 2
    else:
        try:
            from scipy.signal import get_window
        except ImportError:
            raise errors.op_error(name, f"window={errors.short_repr(window)} needs SciPy's "
                                  "get_window (as in JAX)", cls=errors.FuncgradValueError,
                                  hint="install scipy, or pass the window as an array") from None
        try:
            w = get_window(window, n)
        except (ValueError, TypeError) as e:
            raise errors.op_error(name, f"unknown window {errors.short_repr(window)}: "
                                  f"{str(e)[:100]}", cls=errors.FuncgradValueError) from None
    return fnp.asarray(np.asarray(w, np.float64)).astype(dtype)


def _window(name, window, nperseg, length, dtype):
    """(window array, nperseg), JAX's `_triage_segments`."""
    if isinstance(window, (str, tuple)):
        n = length if nperseg is None else _int(name, "nperseg", nperseg)
        n = min(n, length)  # (JAX warns and uses the signal's length)
        return _named_window(name, window, max(n, 1), dtype), n
    win = fnp.asarray(window).astype(dtype)
    n = win.size if nperseg is None else _int(name, "nperseg", nperseg)
    if win.ndim != 1:
        raise errors.op_error(name, f"window must be 1-D, got shape {win.shape}",
                              cls=errors.FuncgradValueError)
    if length < win.size:
        raise errors.op_error(name, f"window (length {win.size}) is longer than the input "
                              f"signal ({length})", cls=errors.FuncgradValueError)
    if n != win.size:
        raise errors.op_error(name, f"nperseg={n} differs from the window's length "
                              f"{win.size}", cls=errors.FuncgradValueError)
    return win, n


def _pad_last(x, lo, hi, mode):
    width = [(0, 0)] * (x.ndim - 1) + [(lo, hi)]
    return fnp.pad(x, width, mode)


def _extend(name, x, n, boundary):
    if boundary is None or n < 1:
        return x
    if boundary == "zeros":
        return _pad_last(x, n, n, "constant")
    if boundary == "even":
        return _pad_last(x, n, n, "reflect")
    if boundary == "constant":
        return _pad_last(x, n, n, "edge")
    if n > x.shape[-1] - 1:
        raise errors.op_error(name, f"the odd extension length {n} must not exceed "
                              f"{x.shape[-1] - 1}", cls=errors.FuncgradValueError)
    left, right = x[..., :1], x[..., -1:]
    return fnp.concatenate([2 * left - fnp.flip(x[..., 1:n + 1], -1), x,
                            2 * right - fnp.flip(x[..., -n - 1:-1], -1)], -1)


def _segments_fft(x, win, detrend, nperseg, noverlap, nfft, sides):
    """The windowed FFT of each segment: shape (..., segments, frequencies)."""
    from funcgrad.scipy.signal import detrend as _detrend
    starts = np.arange(0, x.shape[-1] - nperseg + 1, nperseg - noverlap)
    seg = fnp.take(x, starts[:, None] + np.arange(nperseg)[None, :], axis=-1)
    if isinstance(detrend, str):
        seg = _detrend(seg, axis=-1, type=detrend)
    elif callable(detrend):
        seg = detrend(seg)
    seg = win * seg
    return fnp.fft.fft(seg, n=nfft) if sides == "twosided" else fnp.fft.rfft(seg.real, n=nfft)


def _check_detrend(name, detrend):
    if isinstance(detrend, str):
        if detrend not in ("linear", "l", "constant", "c"):
            raise errors.op_error(name, f"unsupported detrend type "
                                  f"{errors.short_repr(detrend)}", cls=errors.FuncgradValueError)
    elif not callable(detrend) and detrend:
        raise errors.op_error(name, f"unsupported detrend type {errors.short_repr(detrend)}",
                              cls=errors.FuncgradValueError)


def _spectral(name, x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
              scaling, axis, mode, boundary=None, padded=False):
    """JAX's `_spectral_helper`: (frequencies, times, result)."""
    if boundary not in (None, "zeros", "even", "odd", "constant"):
        raise errors.op_error(name, f"unknown boundary {errors.short_repr(boundary)}; use "
                              "None, 'zeros', 'even', 'odd' or 'constant'",
                              cls=errors.FuncgradValueError)
    if scaling not in ("density", "spectrum"):
        raise errors.op_error(name, f"unknown scaling {errors.short_repr(scaling)}",
                              cls=errors.FuncgradValueError)
    _check_detrend(name, detrend)
    x = fnp.asarray(x)
    ys = [] if y is None else [fnp.asarray(y)]
    dt = fnp.result_type(x, *ys, 1.0)
    x, ys = x.astype(dt), [v.astype(dt) for v in ys]
    axis = _int(name, "axis", axis)
    if not -x.ndim <= axis < x.ndim or (ys and ys[0].ndim != x.ndim):
        raise errors.op_error(name, f"axis {axis} or the inputs' ranks do not fit: x "
                              f"{x.shape}{', y ' + str(ys[0].shape) if ys else ''}",
                              cls=errors.FuncgradValueError)
    axis = axis % x.ndim
    x, ys = fnp.moveaxis(x, axis, -1), [fnp.moveaxis(v, axis, -1) for v in ys]
    cdt = fnp.result_type(dt, 1j)
    fdt = fnp.real(fnp.zeros((), cdt)).dtype
    if ys and x.shape[-1] != ys[0].shape[-1]:
        n = max(x.shape[-1], ys[0].shape[-1])
        x, ys = _pad_last(x, 0, n - x.shape[-1], "constant"), [
            _pad_last(ys[0], 0, n - ys[0].shape[-1], "constant")]
    win, nperseg = _window(name, window, nperseg, x.shape[-1], dt)
    if nperseg < 1:
        raise errors.op_error(name, "nperseg must be a positive integer",
                              cls=errors.FuncgradValueError)
    noverlap = nperseg // 2 if noverlap is None else _int(name, "noverlap", noverlap)
    nfft = nperseg if nfft is None else _int(name, "nfft", nfft)
    if nfft < nperseg or not 0 <= noverlap < nperseg:
        raise errors.op_error(name, f"needs nfft >= nperseg > noverlap >= 0, got nfft={nfft}, "
                              f"nperseg={nperseg}, noverlap={noverlap}",
                              cls=errors.FuncgradValueError)
    x, ys = _extend(name, x, nperseg // 2, boundary), [
        _extend(name, v, nperseg // 2, boundary) for v in ys]
    if padded:
        nadd = (-(x.shape[-1] - nperseg) % (nperseg - noverlap)) % nperseg
        x, ys = _pad_last(x, 0, nadd, "constant"), [_pad_last(v, 0, nadd, "constant")
                                                      for v in ys]
    scale = 1.0 / (fs * fnp.sum(win * win)) if scaling == "density" else 1.0 / fnp.sum(win) ** 2
    scale = fnp.sqrt(scale) if mode == "stft" else scale
    sides = "twosided" if not return_onesided or dt.kind == "c" else "onesided"
    freq = (np.fft.fftfreq if sides == "twosided" else np.fft.rfftfreq)(nfft)
    freqs = fnp.asarray(freq).astype(fdt) * fs
    out = _segments_fft(x, win, detrend, nperseg, noverlap, nfft, sides)
    if ys:
        out = fnp.conj(out) * _segments_fft(ys[0], win, detrend, nperseg, noverlap, nfft, sides)
    elif mode == "psd":
        out = fnp.conj(out) * out
    out = out * scale
    if sides == "onesided" and mode == "psd":
        end = out.shape[-1] if nfft % 2 else out.shape[-1] - 1
        double = np.ones(out.shape[-1])
        double[1:end] = 2.0
        out = out * double.astype(fdt)
    times = fnp.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, nperseg - noverlap,
                       dtype=fdt) / fs
    if boundary is not None:
        times = times - (nperseg / 2) / fs
    out = out.astype(cdt)
    if not ys and mode != "stft":
        out = fnp.real(out)
    return freqs, times, fnp.moveaxis(out, -1, axis)


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
    """The short-time Fourier transform (f, t, Zxx) of `x` along `axis`: frequencies, segment
    times and the (complex) transform, shape (..., frequencies, segments).

    Example:
        >>> f, t, z = stft(fnp.array([1.0, 2.0, 3.0, 2.0, 1.0, 0.0, 1.0, 2.0]), nperseg=4)
        >>> z[0]
        Array([1. +0.j, 2.5+0.j, 1. +0.j, 1. +0.j, 0.5+0.j], dtype=complex64)
    """
    return _spectral("stft", x, None, fs, window, nperseg, noverlap, nfft, detrend,
                     return_onesided, "spectrum", axis, "stft", boundary, padded)


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1, average="mean"):
    """The cross power spectral density (f, Pxy) of `x` and `y` by Welch's method (`y=None`:
    the power spectral density of `x`; `nperseg=None`: the whole signal, as JAX).

    Example:
        >>> f, p = csd(fnp.array([1.0, 2.0, 3.0, 4.0]), fnp.array([1.0, 0.0, 1.0, 0.0]),
        ...            nperseg=2)
        >>> p
        Array([-0.08333334+0.j, -0.08333334+0.j], dtype=complex64)
    """
    if average not in ("mean", "median"):
        raise errors.op_error("csd", f"average must be 'median' or 'mean', got "
                              f"{errors.short_repr(average)}", cls=errors.FuncgradValueError)
    freqs, _, p = _spectral("csd", x, y, fs, window, nperseg, noverlap, nfft, detrend,
                            return_onesided, scaling, axis, "psd")
    if y is not None:
        p = p + 0j
    if p.ndim >= 2 and p.size > 0:
        if p.shape[-1] > 1 and average == "median":
            k = np.arange(2.0, p.shape[-1], 2)
            bias = 1 + np.sum(1.0 / (k + 1) - 1.0 / k)
            med = fnp.median(fnp.real(p), axis=-1)
            if p.dtype.kind == "c":
                med = med + 1j * fnp.median(fnp.imag(p), axis=-1)
            p = med / fnp.asarray(bias).astype(med.dtype)
        elif p.shape[-1] > 1:
            p = fnp.mean(p, axis=-1)
        else:
            p = fnp.reshape(p, p.shape[:-1])
    return freqs, p


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """The power spectral density (f, Pxx) of `x` by Welch's method (`nperseg=None`: the
    whole signal, as JAX).

    Example:
        >>> f, p = welch(fnp.array([1.0, 2.0, 3.0, 4.0]), nperseg=2)
        >>> p
        Array([0.25, 0.25], dtype=float32)
    """
    freqs, p = csd(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                   scaling, axis, average)
    return freqs, fnp.real(p)


def _overlap_add(x, step):
    """Sum the frames of x (..., frames, length) placed `step` apart: (..., output)."""
    nframes, length = x.shape[-2], x.shape[-1]
    where = (np.arange(nframes)[:, None] * step + np.arange(length)[None, :]).ravel()
    out = fnp.zeros((*x.shape[:-2], step * (nframes - 1) + length), x.dtype)
    return out.at[..., where].add(fnp.reshape(x, (*x.shape[:-2], nframes * length)))


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,  # noqa: N803
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2):
    """The inverse short-time Fourier transform (t, x) of `Zxx` (frequencies on `freq_axis`,
    segments on `time_axis`): the inverse of `stft` with the same parameters.

    Example:
        >>> x = fnp.array([1.0, 2.0, 3.0, 2.0, 1.0, 0.0, 1.0, 2.0])
        >>> istft(stft(x, nperseg=4)[2])[1]
        Array([1., 2., 3., 2., 1., 0., 1., 2.], dtype=float32)
    """
    z = fnp.asarray(Zxx)
    if z.ndim < 2:
        raise errors.op_error("istft", f"the STFT must be at least 2-D, got shape {z.shape}",
                              cls=errors.FuncgradValueError)
    fa, ta = (_int("istft", "freq_axis", freq_axis), _int("istft", "time_axis", time_axis))
    if not (-z.ndim <= fa < z.ndim and -z.ndim <= ta < z.ndim) or fa % z.ndim == ta % z.ndim:
        raise errors.op_error("istft", f"time_axis {ta} and freq_axis {fa} must be distinct "
                              f"axes of shape {z.shape}", cls=errors.FuncgradValueError)
    fa, ta = fa % z.ndim, ta % z.ndim
    z = z.astype(fnp.result_type(z, 1j))
    n_default = 2 * (z.shape[fa] - 1) if input_onesided else z.shape[fa]
    nperseg = _int("istft", "nperseg", nperseg or n_default)
    if nfft is None:
        nfft = n_default + (1 if input_onesided and nperseg == n_default + 1 else 0)
    nfft = _int("istft", "nfft", nfft)
    noverlap = _int("istft", "noverlap", noverlap or nperseg // 2)
    if nperseg < 1 or nfft < nperseg or not 0 <= noverlap < nperseg:
        raise errors.op_error("istft", f"needs nfft >= nperseg > noverlap >= 0, got nfft={nfft}, "
                              f"nperseg={nperseg}, noverlap={noverlap}",
                              cls=errors.FuncgradValueError)
    outer = tuple(i for i in range(z.ndim) if i not in (fa, ta))
    z = fnp.transpose(z, outer + (fa, ta))
    inv = fnp.fft.irfft if input_onesided else fnp.fft.ifft
    xsubs = inv(z, n=nfft, axis=-2)[..., :nperseg, :]
    rdt = fnp.real(xsubs[..., :0, :0]).dtype
    if isinstance(window, (str, tuple)):
        win = _named_window("istft", window, nperseg, rdt).astype(xsubs.dtype)
    else:
        win = fnp.asarray(window).astype(xsubs.dtype)
        if win.shape != (nperseg,):
            raise errors.op_error("istft", f"window must be 1-D of length {nperseg}, got shape "
                                  f"{win.shape}", cls=errors.FuncgradValueError)
    xsubs = xsubs * fnp.sum(win)
    x = _overlap_add(fnp.swapaxes(xsubs * win[:, None], -2, -1), nperseg - noverlap)
    w2 = fnp.broadcast_to((win * win)[None, :], (xsubs.shape[-1], nperseg))
    norm = _overlap_add(w2, nperseg - noverlap)
    if boundary:
        h = nperseg // 2
        x, norm = x[..., h:x.shape[-1] - h], norm[..., h:norm.shape[-1] - h]
    x = x / fnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and ta != z.ndim - 1:
        x = fnp.moveaxis(x, -1, ta - 1 if fa < ta else ta)
    times = fnp.arange(x.shape[0], dtype=fnp.real(x[:0]).dtype) / fs
    return times, x
