"""funcgrad.data: host-side data loading: `DataLoader`, batch transforms and datasets.

    from funcgrad import data
    d = data.load_digits()
    loader = data.DataLoader((d.x_train, d.y_train), batch_size=64, shuffle=True, seed=0)
    for xb, yb in loader:   # one epoch; the next `for` shuffles differently
        ...

Everything here runs in NumPy on the host (`loader`, `transforms`, `datasets`); batches are
handed over as funcgrad arrays (or NumPy arrays with `as_numpy=True`).
"""

from funcgrad.data import datasets, loader, transforms  # noqa: F401
from funcgrad.data.datasets import Split, load_digits, make_blobs, make_spirals  # noqa: F401
from funcgrad.data.loader import DataLoader  # noqa: F401
from funcgrad.data.transforms import (  # noqa: F401
    Compose,
    Lambda,
    Normalize,
    RandomCrop,
    RandomFlip,
    ToFloat,
    Transform,
)
