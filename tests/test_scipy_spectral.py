"""funcgrad.scipy.signal's stft, istft, csd and welch (JAX's algorithms) against SciPy, the
places where JAX differs from SciPy (nperseg=None is the whole signal) against values read
from JAX 0.10.2, and derivatives (check_grads, float64), vmap and jit."""

import numpy as np
import pytest
import scipy.signal as ssig
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.scipy.signal as sig

R = np.random.default_rng(5)
X, Y = R.normal(size=(3, 100)), R.normal(size=(3, 100))

WELCH = [dict(nperseg=16), dict(nperseg=16, average="median"),
         dict(nperseg=20, noverlap=5, nfft=32, detrend="linear", scaling="spectrum"),
         dict(nperseg=16, return_onesided=False), dict(nperseg=15, window="hamming"),
         dict(nperseg=16, window=np.linspace(0.5, 1.5, 16), detrend=False)]
STFT = [dict(nperseg=16), dict(nperseg=16, boundary="even", padded=False),
        dict(nperseg=16, boundary="odd"), dict(nperseg=16, boundary=None, detrend="constant"),
        dict(nperseg=15, noverlap=10, nfft=20, return_onesided=False),
        dict(nperseg=16, boundary="constant", window=("tukey", 0.3))]


@pytest.mark.parametrize("kw", WELCH, ids=range(len(WELCH)))
def test_welch_and_csd_match_scipy(kw):
    fg.config.update("enable_x64", True)
    for got, want in [(sig.welch(X, **kw), ssig.welch(X, **kw)),
                      (sig.csd(X, Y, **kw), ssig.csd(X, Y, **kw)),
                      (sig.welch(X.T, axis=0, **kw), ssig.welch(X.T, axis=0, **kw))]:
        close(got[0], want[0], 1e-12, 1e-12)
        close(got[1], want[1], 1e-10, 1e-12)
    fg.config.update("enable_x64", False)


@pytest.mark.parametrize("kw", STFT, ids=range(len(STFT)))
def test_stft_and_istft_match_scipy(kw):
    fg.config.update("enable_x64", True)
    f, t, z = sig.stft(X, **kw)
    f2, t2, z2 = ssig.stft(X, **kw)
    close(f, f2, 1e-12, 1e-12)
    close(t, t2, 1e-12, 1e-12)
    close(z, z2, 1e-10, 1e-12)
    inv = {k: v for k, v in kw.items() if k in ("nperseg", "noverlap", "nfft", "window")}
    inv["input_onesided"] = kw.get("return_onesided", True)
    if kw.get("boundary", "zeros") is not None:
        close(sig.istft(z2, **inv)[1], ssig.istft(z2, **inv)[1], 1e-10, 1e-12)
    fg.config.update("enable_x64", False)


def test_istft_axes_and_roundtrip():
    fg.config.update("enable_x64", True)
    z = ssig.stft(X.T, nperseg=16, axis=0)[2]  # (9, 3, 14): frequencies first
    close(sig.istft(z, time_axis=0, freq_axis=1)[1],
          ssig.istft(z, time_axis=0, freq_axis=1)[1], 1e-10, 1e-12)
    close(sig.istft(sig.stft(X, nperseg=32)[2], nperseg=32)[1][..., :100], X, 1e-10, 1e-12)
    fg.config.update("enable_x64", False)


def test_jax_defaults_recorded():
    # jax.scipy.signal 0.10.2: nperseg=None uses the whole signal (SciPy: 256), and istft's
    # times count x.shape[0]
    x = np.arange(10.0, dtype=np.float32) ** 1.5
    close(sig.welch(x)[1], np.float32([2.6903331e+00, 2.0949803e+02, 1.1756735e+01,
                                       5.8538300e-01, 5.5352412e-02, 7.3062093e-04]), 2e-5, 1e-6)
    close(sig.csd(x, x[::-1])[1][:2], np.complex64([-1.0449344e+01, -1.8575104e+02
                                                    - 8.5800613e+01j]), 2e-5, 1e-4)
    close(sig.istft(sig.stft(np.ones((2, 8), np.float32), nperseg=4)[2])[0],
          np.float32([0.0, 1.0]), 0, 0)


def test_spectral_transforms():
    x, y = X[0, :40].astype(np.float32), Y[0, :40].astype(np.float32)
    check_all(lambda a: sig.welch(a, nperseg=8)[1], (x,), ssig.welch(x, nperseg=8)[1],
              grad=(0,), rtol=1e-4, atol=1e-5)
    check_all(lambda a, b: sig.csd(a, b, nperseg=8, average="median")[1], (x, y),
              ssig.csd(x, y, nperseg=8, average="median")[1], grad=(0, 1), rtol=1e-4,
              atol=1e-5)
    check_all(lambda a: sig.stft(a, nperseg=8)[2], (x,), ssig.stft(x, nperseg=8)[2],
              grad=(0,), rtol=1e-4, atol=1e-5)
    z = ssig.stft(x, nperseg=8)[2].astype(np.complex64)
    # the complex input as its real and imaginary parts (check_grads takes real arguments)
    check_all(lambda re, im: sig.istft(re + 1j * im, nperseg=8)[1], (z.real, z.imag),
              ssig.istft(z, nperseg=8)[1], grad=(0, 1), rtol=1e-4, atol=1e-5)


def test_spectral_errors():
    with pytest.raises(ValueError, match="welch.*scaling"):
        sig.welch(X, scaling="bad")
    with pytest.raises(ValueError, match="stft.*boundary"):
        sig.stft(X, boundary="bad")
    with pytest.raises(ValueError, match="csd.*average"):
        sig.csd(X, Y, average="mode")
    with pytest.raises(ValueError, match="stft.*noverlap"):
        sig.stft(X, nperseg=8, noverlap=8)
    with pytest.raises(ValueError, match="istft.*distinct"):
        sig.istft(np.ones((3, 4), np.complex64), time_axis=0, freq_axis=0)
    with pytest.raises(ValueError, match="welch.*window"):
        sig.welch(X, window=np.ones(200))
