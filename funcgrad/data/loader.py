"""`DataLoader`: batches over arrays or any indexable dataset, with a seeded per-epoch shuffle
and host-side transforms.

Data preparation runs on the host in NumPy: indices, shuffles and augmentations use a
`numpy.random.Generator` seeded from `(seed, epoch)` (the shuffle) and
`(seed, epoch, batch index)` (the transforms), so a run is reproducible and each epoch
differs. This module imports only numpy and `funcgrad.numpy`/`errors`; tqdm is imported
lazily, only when a progress bar is asked for.
"""

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradTypeError, FuncgradValueError

__all__ = ["DataLoader"]

_SHUFFLE, _TRANSFORM = 0, 1  # streams of the seed sequence


class DataLoader:
    """Iterates over a dataset in batches; each `for` loop over it is one epoch.

    Args:
        dataset: a tuple (or list) of arrays with the same leading length, e.g. `(x, y)`
            (the "columns" of the dataset); a single array; or any other object with
            `__len__` and `__getitem__` whose items are arrays or tuples of arrays (one
            example each, stacked into batches).
        batch_size: examples per batch.
        shuffle: shuffle the examples every epoch with a generator seeded by
            `(seed, epoch)`: reproducible, and different each epoch.
        seed: the seed of the shuffles and of random transforms.
        drop_last: drop the last batch when it is smaller than `batch_size` (under `jit`
            this avoids a second compilation for the odd-sized batch).
        transform: `transform(batch, rng) -> batch` applied to each batch tuple on the host
            (see `funcgrad.data.transforms`); `rng` is a `numpy.random.Generator` seeded by
            `(seed, epoch, batch index)`.
        progress: show a tqdm progress bar per epoch when tqdm is installed (the
            `funcgrad[examples]` extra); without tqdm, iterate silently. A string sets the
            bar's description.
        as_numpy: yield NumPy arrays instead of funcgrad arrays.

    Yields:
        One tuple per batch (a single array if `dataset` was one), as funcgrad arrays
        (or NumPy arrays with `as_numpy=True`; both can be passed to jitted functions).

    Example:
        >>> loader = DataLoader((x, y), batch_size=64, shuffle=True, seed=0)
        >>> for epoch in range(3):
        ...     for xb, yb in loader:
        ...         params, opt_state, loss = step(params, opt_state, xb, yb)
    """

    def __init__(self, dataset: Any, batch_size: int, shuffle: bool = False, seed: int = 0,
                 drop_last: bool = False, transform: Callable | None = None,
                 progress: bool | str = False, as_numpy: bool = False):
        if not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise FuncgradValueError(
                f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        self.single = isinstance(dataset, np.ndarray) or hasattr(dataset, "__array__")
        self.arrays = _as_arrays(dataset) if self.single or _is_array_tuple(dataset) else None
        if self.arrays is None:
            _check_dataset(dataset)
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.transform, self.progress, self.as_numpy = transform, progress, as_numpy
        self.epoch = 0

    def __len__(self) -> int:
        n = self.num_examples
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    @property
    def num_examples(self) -> int:
        return len(self.arrays[0]) if self.arrays is not None else len(self.dataset)

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch number used by the next iteration (it then counts on from there)."""
        self.epoch = int(epoch)

    def order(self, epoch: int) -> np.ndarray:
        """The example order of `epoch` (a permutation when shuffling)."""
        n = self.num_examples
        if not self.shuffle:
            return np.arange(n)
        return np.random.default_rng((self.seed, epoch, _SHUFFLE)).permutation(n)

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        self.epoch += 1
        batches = self._batches(epoch)
        if self.progress:
            batches = _progress_bar(batches, len(self), self.progress, epoch)
        return iter(batches)

    def _batches(self, epoch: int):
        order = self.order(epoch)
        for i in range(len(self)):
            batch = self._gather(order[i * self.batch_size:(i + 1) * self.batch_size])
            if self.transform is not None:
                rng = np.random.default_rng((self.seed, epoch, _TRANSFORM, i))
                batch = tuple(self.transform(batch, rng))
            if not self.as_numpy:
                batch = tuple(fnp.asarray(a) for a in batch)
            yield batch[0] if self.single else batch

    def _gather(self, idx: np.ndarray) -> tuple:
        if self.arrays is not None:
            return tuple(a[idx] for a in self.arrays)
        items = [self.dataset[int(i)] for i in idx]
        if not isinstance(items[0], (tuple, list)):
            return (np.stack([np.asarray(x) for x in items]),)
        return tuple(np.stack([np.asarray(x[k]) for x in items]) for k in range(len(items[0])))


def _is_array_tuple(dataset) -> bool:
    return isinstance(dataset, (tuple, list)) and len(dataset) > 0 and all(
        hasattr(a, "__array__") or isinstance(a, np.ndarray) for a in dataset)


def _as_arrays(dataset) -> tuple[np.ndarray, ...]:
    arrays = (dataset,) if not isinstance(dataset, (tuple, list)) else dataset
    arrays = tuple(np.asarray(a) for a in arrays)
    lengths = [a.shape[0] if a.ndim else None for a in arrays]
    if None in lengths or len(set(lengths)) != 1:
        raise FuncgradValueError(
            "DataLoader: the arrays of a dataset must share their leading (example) axis; got "
            f"shapes {[a.shape for a in arrays]}")
    return arrays


def _progress_bar(batches, total: int, progress: bool | str, epoch: int):
    try:
        from tqdm.auto import tqdm
    except ImportError:  # optional: `pip install funcgrad[examples]`
        return batches
    desc = progress if isinstance(progress, str) else f"epoch {epoch}"
    return tqdm(batches, total=total, desc=desc, leave=False)


def _check_dataset(dataset: Sequence) -> None:
    if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
        raise FuncgradTypeError(
            f"DataLoader: a dataset must be arrays or support len() and indexing, got "
            f"{type(dataset).__name__}")
