"""Datasets that work offline: scikit-learn's bundled 8x8 digits, and synthetic blobs and
spirals (NumPy only) for tests.

Every loader returns NumPy arrays: float32 inputs and int32 labels. scikit-learn (the
`funcgrad[examples]` extra) is imported lazily, only by `load_digits`.
"""

from typing import NamedTuple

import numpy as np

from funcgrad.errors import FuncgradValueError

__all__ = ["Split", "load_digits", "make_blobs", "make_spirals"]

DIGITS_SPLIT_SEED = 0
DIGITS_NUM_TEST = 360


class Split(NamedTuple):
    """A dataset cut into training and test sets."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits(images: bool = False) -> Split:
    """scikit-learn's bundled handwritten digits (1,797 8x8 images, 10 classes), offline.

    The split is fixed: a permutation seeded with 0 puts 1,437 examples in the training set
    and 360 in the test set, the same on every machine and run.

    Args:
        images: return images of shape `(N, 1, 8, 8)` (NCHW) instead of vectors `(N, 64)`.

    Returns:
        `Split(x_train, y_train, x_test, y_test)`: float32 pixels in [0, 1], int32 labels.

    Raises:
        ImportError: when scikit-learn is missing, saying how to install it.

    Example:
        >>> d = load_digits()
        >>> d.x_train.shape, d.x_test.shape, d.y_train.dtype
        ((1437, 64), (360, 64), dtype('int32'))
    """
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as e:
        raise ImportError("funcgrad.data.load_digits needs scikit-learn: "
                          "pip install funcgrad[examples]  (or: pip install scikit-learn)") from e
    bunch = sklearn_digits()
    x = (bunch.data / 16.0).astype(np.float32)
    y = bunch.target.astype(np.int32)
    if images:
        x = x.reshape(-1, 1, 8, 8)
    order = np.random.default_rng(DIGITS_SPLIT_SEED).permutation(len(x))
    train, test = order[:-DIGITS_NUM_TEST], order[-DIGITS_NUM_TEST:]
    return Split(x[train], y[train], x[test], y[test])


def make_blobs(n_samples: int = 300, centers: int = 3, n_features: int = 2,
               cluster_std: float = 1.0, center_box: float = 10.0,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs: `centers` clusters with centers drawn uniformly in `[-box, box]`.

    Returns:
        `(x, y)`: float32 `(n_samples, n_features)` points and int32 cluster labels, the
        samples spread evenly over the clusters.
    """
    if centers < 1 or n_samples < centers:
        raise FuncgradValueError(
            f"make_blobs: need 1 <= centers <= n_samples, got {centers} and {n_samples}")
    rng = np.random.default_rng(seed)
    means = rng.uniform(-center_box, center_box, (centers, n_features))
    y = np.arange(n_samples) % centers
    x = means[y] + cluster_std * rng.standard_normal((n_samples, n_features))
    order = rng.permutation(n_samples)
    return x[order].astype(np.float32), y[order].astype(np.int32)


def make_spirals(n_samples: int = 300, n_classes: int = 2, noise: float = 0.1,
                 turns: float = 1.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Interleaved 2-D spirals, one arm per class (not linearly separable).

    Returns:
        `(x, y)`: float32 `(n_samples, 2)` points in about `[-1, 1]^2`, int32 labels.
    """
    if n_classes < 1:
        raise FuncgradValueError(f"make_spirals: n_classes must be >= 1, got {n_classes}")
    rng = np.random.default_rng(seed)
    y = np.arange(n_samples) % n_classes
    r = rng.uniform(0.05, 1.0, n_samples)
    theta = 2 * np.pi * (turns * r + y / n_classes)
    x = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)
    x += noise * rng.standard_normal(x.shape)
    order = rng.permutation(n_samples)
    return x[order].astype(np.float32), y[order].astype(np.int32)
