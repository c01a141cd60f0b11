"""Batch transforms for `DataLoader`: `Compose`, `ToFloat`, `Normalize`, `RandomCrop`,
`RandomFlip`, `Lambda`.

A transform is called as `transform(batch, rng) -> batch` on a tuple of NumPy arrays (one
batch, examples along axis 0) with a `numpy.random.Generator`; random transforms draw one
choice per example, vectorized over the batch. By default a transform changes only the
inputs (`batch[0]`); `on=(0, 1)` applies it, with the same random draws, to the targets as
well (e.g. flipping a segmentation mask with its image). Host-side NumPy only: this module
imports nothing from funcgrad but `errors`.
"""

import abc
from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from funcgrad.errors import FuncgradValueError

__all__ = ["Compose", "Lambda", "Normalize", "RandomCrop", "RandomFlip", "ToFloat", "Transform"]


class Transform(abc.ABC):
    """Base class: draws random parameters once per batch, then applies them to `on`.

    Subclasses define `apply(x, params)` and, when random, `draw(x, rng)`, which sees the
    first of the chosen entries and returns the parameters shared by all of them.
    """

    def __init__(self, on: Sequence[int] = (0,)):
        self.on = tuple(on)

    def draw(self, x: np.ndarray, rng: np.random.Generator):
        return None

    @abc.abstractmethod
    def apply(self, x: np.ndarray, params) -> np.ndarray:
        """The transformed entry `x`, given the parameters `draw` chose."""

    def __call__(self, batch, rng: np.random.Generator | None = None):
        batch = list(batch)
        rng = rng if rng is not None else np.random.default_rng(0)
        params = self.draw(np.asarray(batch[self.on[0]]), rng)
        for k in self.on:
            batch[k] = self.apply(np.asarray(batch[k]), params)
        return tuple(batch)


class Compose:
    """Applies transforms in order, sharing one generator.

    Example:
        >>> t = Compose([RandomCrop(8, padding=1), Normalize(0.5, 0.25)])
        >>> xb, yb = t((x, y), np.random.default_rng(0))
    """

    def __init__(self, transforms: Sequence[Callable]):
        self.transforms = list(transforms)

    def __call__(self, batch, rng: np.random.Generator | None = None):
        rng = rng if rng is not None else np.random.default_rng(0)
        for t in self.transforms:
            batch = t(batch, rng)
        return tuple(batch)


class Lambda(Transform):
    """Applies `fn(x)` to the chosen batch entries."""

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray], on: Sequence[int] = (0,)):
        super().__init__(on)
        self.fn = fn

    def apply(self, x, params):
        return self.fn(x)


class ToFloat(Transform):
    """`x.astype(float32) * scale` (e.g. `scale=1/255` for bytes)."""

    def __init__(self, scale: float = 1.0, on: Sequence[int] = (0,)):
        super().__init__(on)
        self.scale = np.float32(scale)

    def apply(self, x, params):
        x = x.astype(np.float32)
        return x if self.scale == 1 else x * self.scale


class Normalize(Transform):
    """`(x - mean) / std` in float32.

    `mean` and `std` broadcast against one example: scalars, or per channel for NCHW images
    as arrays of shape `(C, 1, 1)`.
    """

    def __init__(self, mean, std, on: Sequence[int] = (0,)):
        super().__init__(on)
        self.mean = np.asarray(mean, np.float32)
        self.std = np.asarray(std, np.float32)
        if np.any(self.std <= 0):
            raise FuncgradValueError(f"Normalize: std must be positive, got {std}")

    def apply(self, x, params):
        return ((x - self.mean) / self.std).astype(np.float32)


class RandomCrop(Transform):
    """Pads the two spatial axes by `padding`, then crops a random `size` window per example.

    Args:
        size: the crop's `(height, width)` (an int for a square).
        padding: zeros (or `fill`) added on each side of both spatial axes first.
        axes: the spatial axes of the batch array; `(-2, -1)` suits NCHW and NHW.
        fill: the padding value.
        on: the batch entries to crop (the same window for each).
    """

    def __init__(self, size, padding: int = 0, axes: tuple[int, int] = (-2, -1),
                 fill: float = 0.0, on: Sequence[int] = (0,)):
        super().__init__(on)
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.padding, self.axes, self.fill = int(padding), tuple(axes), fill

    def _padded_shape(self, x):
        return x.shape[self.axes[0]] + 2 * self.padding, x.shape[self.axes[1]] + 2 * self.padding

    def draw(self, x, rng):
        (height, width), (h, w) = self._padded_shape(x), self.size
        if h > height or w > width:
            raise FuncgradValueError(
                f"RandomCrop: crop {self.size} is larger than the padded image "
                f"{(height, width)}")
        return rng.integers(0, height - h + 1, len(x)), rng.integers(0, width - w + 1, len(x))

    def apply(self, x, offsets):
        oy, ox = offsets
        x = np.moveaxis(x, self.axes, (-2, -1))
        p = self.padding
        pads = [(0, 0)] * (x.ndim - 2) + [(p, p), (p, p)]
        padded = np.pad(x, pads, constant_values=self.fill) if p else x
        windows = sliding_window_view(padded, self.size, axis=(-2, -1))  # (n, ..., Y, X, h, w)
        windows = np.moveaxis(windows, (-4, -3), (1, 2))  # (n, Y, X, ..., h, w)
        out = windows[np.arange(len(x)), oy, ox]
        return np.moveaxis(out, (-2, -1), self.axes)


class RandomFlip(Transform):
    """Flips each example along `axis` (of the batch array) with probability `p`.

    `axis=-1` flips NCHW or NHW images horizontally.
    """

    def __init__(self, axis: int = -1, p: float = 0.5, on: Sequence[int] = (0,)):
        super().__init__(on)
        self.axis, self.p = axis, p

    def draw(self, x, rng):
        return rng.random(len(x)) < self.p

    def apply(self, x, flip):
        if self.axis % x.ndim == 0:
            raise FuncgradValueError("RandomFlip: axis 0 is the batch axis")
        out = x.copy()
        out[flip] = np.flip(x[flip], axis=self.axis)
        return out
