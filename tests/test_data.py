"""Tests for funcgrad.data: the loader (batching, seeded per-epoch shuffles, drop_last,
indexable datasets, transforms, progress bars), the batch transforms and the datasets."""

import importlib.util
import sys

import numpy as np
import pytest

import funcgrad.numpy as fnp
from funcgrad import data
from funcgrad.core import Array
from funcgrad.errors import FuncgradError


def columns(n=10):
    return np.arange(n * 2, dtype=np.float32).reshape(n, 2), np.arange(n, dtype=np.int32)


def epoch_labels(loader):
    return np.concatenate([np.asarray(y) for _, y in loader])


def test_batches_in_order_with_last_partial_batch():
    x, y = columns(10)
    loader = data.DataLoader((x, y), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and [len(b[1]) for b in batches] == [4, 4, 2]
    assert all(isinstance(a, Array) for b in batches for a in b)
    np.testing.assert_array_equal(np.asarray(batches[0][0]), x[:4])
    assert batches[0][1].dtype == np.int32


def test_drop_last_and_numpy_output():
    x, y = columns(10)
    loader = data.DataLoader((x, y), batch_size=4, drop_last=True, as_numpy=True)
    batches = list(loader)
    assert len(loader) == 2 and [len(b[1]) for b in batches] == [4, 4]
    assert isinstance(batches[0][0], np.ndarray)


def test_shuffle_is_seeded_and_differs_per_epoch():
    x, y = columns(50)
    a = data.DataLoader((x, y), batch_size=8, shuffle=True, seed=3)
    b = data.DataLoader((x, y), batch_size=8, shuffle=True, seed=3)
    e0, e1 = epoch_labels(a), epoch_labels(a)
    np.testing.assert_array_equal(e0, epoch_labels(b))  # same seed, same epoch 0
    assert not np.array_equal(e0, e1)  # the next epoch differs
    assert sorted(e0) == sorted(e1) == list(range(50))  # each a permutation
    assert not np.array_equal(e0, epoch_labels(data.DataLoader((x, y), 8, shuffle=True, seed=4)))
    b.set_epoch(1)
    np.testing.assert_array_equal(epoch_labels(b), e1)
    np.testing.assert_array_equal(a.order(0), e0)


def test_single_array_and_indexable_dataset():
    x, _ = columns(6)
    batches = list(data.DataLoader(x, batch_size=4))
    assert isinstance(batches[0], Array) and batches[0].shape == (4, 2)

    class Squares:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return np.full(3, i, np.float32), np.int32(i * i)

    xb, yb = next(iter(data.DataLoader(Squares(), batch_size=5)))
    assert xb.shape == (5, 3)
    np.testing.assert_array_equal(np.asarray(yb), [0, 1, 4, 9, 16])


def test_bad_datasets_are_clear_errors():
    with pytest.raises(FuncgradError, match="leading"):
        data.DataLoader((np.zeros((3, 2)), np.zeros(4)), batch_size=2)
    with pytest.raises(FuncgradError, match="batch_size"):
        data.DataLoader(np.zeros((3, 2)), batch_size=0)
    with pytest.raises(FuncgradError, match="len"):
        data.DataLoader(object(), batch_size=2)


def test_transforms_are_deterministic_per_epoch_and_batch():
    x = np.random.default_rng(0).random((16, 1, 6, 6)).astype(np.float32)
    y = np.arange(16, dtype=np.int32)
    t = data.Compose([data.RandomCrop(6, padding=2), data.RandomFlip(-1)])
    a = data.DataLoader((x, y), 8, shuffle=True, seed=1, transform=t, as_numpy=True)
    b = data.DataLoader((x, y), 8, shuffle=True, seed=1, transform=t, as_numpy=True)
    ea, eb, ea2 = list(a), list(b), list(a)
    for (xa, ya), (xb, yb) in zip(ea, eb):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    assert not all(np.array_equal(p[0], q[0]) for p, q in zip(ea, ea2))
    # The targets pass through untouched, and each image is a crop of its own source.
    for xb, yb in ea:
        for img, label in zip(xb, yb):
            padded = np.pad(x[label, 0], 2)
            assert any(np.array_equal(cand[i:i + 6, j:j + 6], img[0])
                       for cand in (padded, padded[:, ::-1])
                       for i in range(5) for j in range(5))


def test_random_crop_without_padding_keeps_size_and_crops_smaller():
    x = np.arange(2 * 5 * 5, dtype=np.float32).reshape(2, 5, 5)  # N, H, W
    (out,) = data.RandomCrop(5)((x,), np.random.default_rng(0))
    np.testing.assert_array_equal(out, x)
    (small,) = data.RandomCrop((2, 3))((x,), np.random.default_rng(0))
    assert small.shape == (2, 2, 3)
    with pytest.raises(FuncgradError, match="larger"):
        data.RandomCrop(7, padding=0)((x,), np.random.default_rng(0))


def test_random_crop_channels_last_matches_channels_first():
    x = np.random.default_rng(1).random((4, 3, 6, 6)).astype(np.float32)
    (nchw,) = data.RandomCrop(6, padding=1)((x,), np.random.default_rng(5))
    (nhwc,) = data.RandomCrop(6, padding=1, axes=(1, 2))((np.moveaxis(x, 1, -1),),
                                                          np.random.default_rng(5))
    np.testing.assert_array_equal(np.moveaxis(nhwc, -1, 1), nchw)


def test_random_flip_probability_and_targets_flip_together():
    x = np.random.default_rng(2).random((200, 4, 4)).astype(np.float32)
    out, = data.RandomFlip(axis=-1, p=1.0)((x,), np.random.default_rng(0))
    np.testing.assert_array_equal(out, x[:, :, ::-1])
    same, = data.RandomFlip(axis=-1, p=0.0)((x,), np.random.default_rng(0))
    np.testing.assert_array_equal(same, x)
    img, mask = data.RandomFlip(axis=-1, on=(0, 1))((x, x.copy()), np.random.default_rng(0))
    np.testing.assert_array_equal(img, mask)
    flipped = np.mean([not np.array_equal(a, b) for a, b in zip(img, x)])
    assert 0.35 < flipped < 0.65


def test_normalize_and_to_float():
    x = np.array([[0, 8, 16]], np.uint8)
    (f,) = data.ToFloat(1 / 16)((x,), None)
    assert f.dtype == np.float32
    np.testing.assert_allclose(f, [[0, 0.5, 1]])
    (n,) = data.Normalize(0.5, 0.25)((f,), None)
    np.testing.assert_allclose(n, [[-2, 0, 2]])
    images = np.ones((2, 3, 2, 2), np.float32)
    (per_channel,) = data.Normalize(np.array([1, 2, 3]).reshape(3, 1, 1), 2.0)((images,), None)
    np.testing.assert_allclose(per_channel[0, :, 0, 0], [0, -0.5, -1])
    with pytest.raises(FuncgradError, match="positive"):
        data.Normalize(0.0, 0.0)


def test_progress_bar_uses_tqdm_when_installed(capsys):
    x, y = columns(10)
    assert len(list(data.DataLoader((x, y), 4, progress="training"))) == 3
    has_tqdm = importlib.util.find_spec("tqdm") is not None  # an optional extra
    assert ("training" in capsys.readouterr().err) == has_tqdm


def test_progress_without_tqdm_iterates_silently(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # makes `import tqdm` fail
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    x, y = columns(10)
    assert len(list(data.DataLoader((x, y), 4, progress=True))) == 3
    assert capsys.readouterr().err == ""


def test_load_digits_fixed_split():
    d = data.load_digits()
    assert d.x_train.shape == (1437, 64) and d.x_test.shape == (360, 64)
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int32
    assert 0.0 <= d.x_train.min() and d.x_train.max() == 1.0
    again = data.load_digits(images=True)
    assert again.x_train.shape == (1437, 1, 8, 8)
    np.testing.assert_array_equal(again.x_train.reshape(1437, 64), d.x_train)
    np.testing.assert_array_equal(again.y_test, d.y_test)
    assert set(np.unique(d.y_test)) == set(range(10))
    # The split is pinned: these are the first test labels on every machine.
    np.testing.assert_array_equal(d.y_test[:8], _first_test_labels())


def _first_test_labels():
    from sklearn.datasets import load_digits
    y = load_digits().target
    return y[np.random.default_rng(0).permutation(len(y))[-360:]][:8]


def test_synthetic_datasets():
    x, y = data.make_blobs(90, centers=3, n_features=4, cluster_std=0.1, seed=0)
    assert x.shape == (90, 4) and x.dtype == np.float32 and np.bincount(y).tolist() == [30] * 3
    centers = np.stack([x[y == k].mean(0) for k in range(3)])
    spread = max(np.abs(x[y == k] - centers[k]).max() for k in range(3))
    assert spread < 0.6 < np.abs(centers[0] - centers[1]).max()
    np.testing.assert_array_equal(x, data.make_blobs(90, 3, 4, 0.1, seed=0)[0])
    xs, ys = data.make_spirals(100, n_classes=2, seed=1)
    assert xs.shape == (100, 2) and set(np.unique(ys)) == {0, 1}
    assert np.abs(xs).max() < 1.5
    with pytest.raises(FuncgradError):
        data.make_blobs(2, centers=3)


def test_loader_batches_feed_jitted_functions():
    import funcgrad as fg
    x, y = data.make_blobs(32, centers=2, seed=0)
    f = fg.jit(lambda a, b: fnp.sum(a) + fnp.sum(b))
    totals = [float(f(xb, yb)) for xb, yb in data.DataLoader((x, y), 8)]
    assert f.trace_count == 1
    np.testing.assert_allclose(sum(totals), x.sum() + y.sum(), rtol=1e-5)


def test_load_digits_without_scikit_learn_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"pip install funcgrad\[examples\]"):
        data.load_digits()
