"""funcgrad.numpy.fft and lax.fft: every function against numpy.fft on hypothesis-drawn shapes
(batched, size-0 batches, length 1, odd and even lengths, n=/s= cropping and padding, all three
norms), derivatives by check_grads (orders 1-2, both modes, float64/complex128), batching
against a Python loop, jit against eager, the frequency helpers and the error messages."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.test_util import check_batching, check_grads

NORMS = (None, "backward", "ortho", "forward")
ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
N_D = ("fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2")
REAL_IN = ("rfft", "ihfft", "rfftn", "rfft2")  # these take real operands


def _input(seed, shape, name, dtype=np.complex128):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return (x.real if name in REAL_IN else x).astype(
        np.finfo(dtype).dtype if name in REAL_IN else dtype)


def _close(got, want, tol):
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _one_d_cases():
    return st.tuples(
        st.sampled_from(ONE_D),
        st.lists(st.integers(0, 3), min_size=0, max_size=2),  # batch axes (size 0 allowed)
        st.integers(1, 7),  # transform axis length: odd, even, 1
        st.sampled_from([None, 1, 2, 5, 8]),  # n: crop or pad
        st.sampled_from(NORMS),
        st.integers(0, 2**31 - 1))


@given(_one_d_cases())
def test_one_d_matches_numpy(case):
    name, batch, m, n, norm, seed = case
    if name in ("irfft", "hfft") and n is None and m == 1:
        n = 1  # numpy's default n = 2 (m - 1) would be 0
    axis = int(np.random.default_rng(seed).integers(-len(batch) - 1, len(batch) + 1))
    shape = list(batch)
    shape.insert(axis % (len(batch) + 1), m)
    x = _input(seed, tuple(shape), name)
    got = getattr(fnp.fft, name)(x, n=n, axis=axis, norm=norm)
    want = getattr(np.fft, name)(x, n=n, axis=axis, norm=norm)
    assert got.dtype == (np.float32 if want.dtype.kind == "f" else np.complex64)
    _close(got, want, 2e-4 * max(1, m, n or 1))


@given(st.sampled_from(N_D), st.integers(0, 2**31 - 1), st.booleans(), st.sampled_from(NORMS))
def test_n_d_matches_numpy(name, seed, with_s, norm):
    rng = np.random.default_rng(seed)
    shape = tuple(int(k) for k in rng.integers(1, 5, size=3))
    if name.endswith("2"):
        axes = (-2, -1) if rng.random() < 0.5 else (0, 2)
    else:
        axes = None if rng.random() < 0.3 else tuple(int(a) for a in rng.permutation(3)[:2])
    s = tuple(int(k) for k in rng.integers(1, 6, size=2)) if with_s else None
    if s is None and name.startswith("irfft") and shape[(axes or (-1,))[-1]] == 1:
        s = (2, 3)  # the default last length 2 (m - 1) would be 0
    axes_np = tuple(range(3 - len(s), 3)) if axes is None and s is not None else axes
    x = _input(seed, shape, name)
    got = getattr(fnp.fft, name)(x, s=s, axes=axes, norm=norm)
    want = getattr(np.fft, name)(x, s=s, axes=axes_np, norm=norm)
    _close(got, want, 1e-3)


def test_size_zero_batch_and_x64_dtypes():
    x = np.zeros((0, 4), np.complex64)
    assert fnp.fft.fft(x).shape == (0, 4)
    assert fnp.fft.rfft(np.zeros((3, 0, 5), np.float32), axis=-1).shape == (3, 0, 3)
    assert fnp.fft.fft(np.arange(4)).dtype == np.complex64  # ints: the default complex
    assert fnp.fft.fft(np.ones(4, np.float64)).dtype == np.complex64  # x64 off
    fg.config.update("enable_x64", True)
    assert fnp.fft.fft(np.ones(4, np.float64)).dtype == np.complex128
    assert fnp.fft.irfft(np.ones(3, np.complex128)).dtype == np.float64
    assert fnp.fft.rfft(np.ones(4, np.float32)).dtype == np.complex64


def _grad_fn(name, n=None, norm=None, axis=-1):
    return lambda x: getattr(fnp.fft, name)(x, n=n, axis=axis, norm=norm)


@pytest.mark.parametrize("name", ONE_D)
@pytest.mark.parametrize("m,n", [(5, None), (4, None), (1, 3), (6, 3), (3, 8)])
def test_one_d_derivatives(name, m, n):
    if name in ("irfft", "hfft") and n is None and m == 1:
        n = 1
    x = _input(0, (2, m), name)
    check_grads(_grad_fn(name, n, "ortho" if m % 2 else "forward"), (x,), order=2)


@pytest.mark.parametrize("name", N_D)
def test_n_d_derivatives(name):
    x = _input(1, (3, 4, 5), name)
    if name.endswith("2"):
        f = lambda x: getattr(fnp.fft, name)(x, s=(3, 4), norm="ortho")  # noqa: E731
    else:
        f = lambda x: getattr(fnp.fft, name)(x, s=(2, 5, 3), axes=(2, 0, 1))  # noqa: E731
    check_grads(f, (x,), order=2)


@pytest.mark.parametrize("fft_type,lengths,shape", [
    ("fft", (3, 4), (2, 3, 4)), ("ifft", (5,), (5,)), ("rfft", (2, 5), (2, 5)),
    ("rfft", (4,), (3, 4)), ("irfft", (3, 6), (3, 4)), ("irfft", (5,), (2, 3)),
    ("irfft", (1,), (1,)), ("irfft", (2,), (4, 2))])
def test_lax_fft_grads_batching_and_jit(fft_type, lengths, shape):
    x = _input(2, shape, "rfft" if fft_type == "rfft" else "fft")
    f = lambda x: lax.fft(x, fft_type, lengths)  # noqa: E731
    check_grads(f, (x,), order=2)
    batched = np.stack([_input(k, shape, "rfft" if fft_type == "rfft" else "fft")
                        for k in range(3)], axis=-1)
    check_batching(f, (batched,), (len(shape),))
    y = x.astype(np.float32 if x.dtype.kind == "f" else np.complex64)
    _close(fg.jit(f)(y), np.asarray(f(y)), 1e-6)


def test_vmap_matches_a_loop():
    xs = _input(3, (4, 3, 6), "rfft")
    f = lambda x: fnp.fft.irfft(fnp.fft.rfft(x, n=8) * 2j, n=7, norm="ortho")  # noqa: E731
    got = fg.vmap(f, in_axes=1)(xs)
    want = np.stack([np.asarray(f(xs[:, i])) for i in range(3)])
    _close(got, want, 1e-5)


def test_jit_matches_eager_and_is_one_library_call():
    x = _input(4, (3, 8), "fft", np.complex64)

    def f(x):
        return fnp.abs(fnp.fft.fftshift(fnp.fft.fft2(x, norm="ortho"))) ** 2
    _close(fg.jit(f)(x), np.asarray(f(x)), 1e-5)
    src = fg.jit(f).lower(x).compile().as_text()
    assert src.count("_fft_") == 1, src
    jaxpr = str(fg.make_jaxpr(lambda x: lax.fft(x, "rfft", (8,)))(np.ones(8, np.float32)))
    assert "fft[fft_lengths=(8,) fft_type=RFFT]" in jaxpr and "c64[5]" in jaxpr


def test_grad_of_a_real_loss_through_the_spectrum():
    x = _input(5, (6,), "rfft")

    def power(x):  # Parseval: sum |rfft|^2 with the doubled middle bins is n * sum x^2
        return fnp.sum(fnp.abs(fnp.fft.fft(x)) ** 2)
    fg.config.update("enable_x64", True)
    np.testing.assert_allclose(fg.grad(power)(x), 2 * 6 * x, rtol=1e-10)


@given(st.integers(1, 9), st.sampled_from([1.0, 0.1, 2.5]), st.sampled_from([None, "float32"]))
def test_fftfreq_matches_numpy(n, d, dtype):
    for name in ("fftfreq", "rfftfreq"):
        got = getattr(fnp.fft, name)(n, d, dtype=dtype)
        want = getattr(np.fft, name)(n, d)
        assert got.dtype == np.float32
        _close(got, want, 1e-6)


def test_fftfreq_with_traced_spacing_and_device():
    f = fg.jit(lambda d: fnp.fft.fftfreq(5, d))
    _close(f(fnp.float32(0.5)), np.fft.fftfreq(5, 0.5), 1e-6)
    g = fg.grad(lambda d: fnp.sum(fnp.fft.rfftfreq(6, d) ** 2))(2.0)
    k = np.arange(4) / 6.0  # sum (k/d)^2 -> -2 sum k^2 / d^3
    np.testing.assert_allclose(g, -2 * np.sum(k ** 2) / 8, rtol=1e-5)
    assert fnp.fft.fftfreq(4, device=fg.devices()[0]).shape == (4,)
    assert fnp.fft.rfftfreq(4, device="cpu").shape == (3,)
    with pytest.raises(errors.FuncgradValueError, match="invalid device"):
        fnp.fft.fftfreq(4, device="tpu:7")


@given(st.lists(st.integers(0, 5), min_size=0, max_size=3), st.data())
def test_shifts_match_numpy(shape, data):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    axes = data.draw(st.sampled_from([None] + list(range(-len(shape), len(shape)))
                                     + ([(0, -1)] if len(shape) >= 2 else [])))
    for name in ("fftshift", "ifftshift"):
        want = getattr(np.fft, name)(x, axes=axes) if shape else x  # numpy fails on 0-d
        _close(getattr(fnp.fft, name)(x, axes=axes), want, 0)


def test_array_api_keyword_signatures():
    x = _input(6, (2, 5), "fft", np.complex64)
    _close(fnp.fft.fft(x, n=4, axis=0, norm="forward"), np.fft.fft(x, 4, 0, "forward"), 1e-5)
    _close(fnp.fft.ifftn(x, s=(2, 3), axes=(0, 1)), np.fft.ifftn(x, (2, 3), (0, 1)), 1e-5)
    _close(fnp.fft.hfft(x, n=6, axis=1), np.fft.hfft(x, 6, 1), 1e-4)


@pytest.mark.parametrize("call,match", [
    (lambda: fnp.fft.fft(np.ones(3), norm="bogus"), "norm must be"),
    (lambda: fnp.fft.fft(np.ones(3), n=0), "Invalid number of FFT data points"),
    (lambda: fnp.fft.irfft(np.ones(1)), "Invalid number of FFT data points"),
    (lambda: fnp.fft.rfft(np.ones(3) * 1j), "takes a real operand"),
    (lambda: fnp.fft.fftn(np.ones((2, 2)), axes=(0, 0)), "distinct"),
    (lambda: fnp.fft.fftn(np.ones((2, 2)), s=(2,), axes=(0, 1)), "differ in length"),
    (lambda: fnp.fft.fft(np.ones(3), axis=2), "out of bounds"),
    (lambda: fnp.fft.fftfreq(0), "positive"),
    (lambda: fnp.fft.fftfreq(3, dtype=np.int32), "real floating"),
    (lambda: lax.fft(np.ones(4, np.complex64), "irfft", (4,)), r"last axes are \(3,\)"),
    (lambda: lax.fft(np.ones(4, np.float32), "fft", (4,)), "complex operand"),
    (lambda: lax.fft(np.ones(4, np.complex64), "dct", (4,)), "fft_type must be"),
    (lambda: lax.fft(np.ones(4, np.complex64), "fft", (4, 4)), "1 to 1 positive"),
])
def test_errors_name_the_operation(call, match):
    with pytest.raises((errors.FuncgradTypeError, errors.FuncgradValueError), match=match):
        call()
