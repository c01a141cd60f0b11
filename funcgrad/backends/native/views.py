"""Views of arrays as the numpy backend makes them, so C reads the same memory the same way.

The numpy backend renders `reshape`, `squeeze`, `transpose` and `broadcast_in_dim` as numpy
views (`x.reshape(...)`, `x.T`, `np.broadcast_to(...)`) and `np.matmul` reads its operands
through them: which BLAS routine it calls and with which transpositions (OpenBLAS's results
depend on them) follows from their strides. A `View` is the same view of a C buffer: element
offset, shape and element strides, computed by numpy itself on a proxy array that owns one
element (no data is ever read), so every stride numpy would choose (size-1 axes included) is
the one numpy chooses:

    v = View.contiguous((7, 1), "float32").transpose((1, 0))
    v.shape, v.strides, v.offset       # (1, 7), (1, 1), 0
    v.reshape((7,))                    # a View, or None where numpy would copy

Imports numpy only.
"""

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided


class View:
    """`offset`, `shape` and `strides` (in elements) of a view of a row-major buffer."""

    __slots__ = ("dtype", "_base", "_proxy")

    def __init__(self, dtype, base, proxy):
        self.dtype, self._base, self._proxy = np.dtype(dtype), base, proxy

    @classmethod
    def contiguous(cls, shape, dtype):
        """The whole of a row-major buffer of `shape`."""
        dtype = np.dtype(dtype)
        base = np.zeros(1, dtype)
        strides = [math.prod(shape[k + 1:]) * dtype.itemsize for k in range(len(shape))]
        return cls(dtype, base, as_strided(base, tuple(shape), tuple(strides)))

    def _derived(self, proxy):
        return View(self.dtype, self._base, proxy)

    @property
    def shape(self):
        return tuple(self._proxy.shape)

    @property
    def strides(self):
        return tuple(s // self.dtype.itemsize for s in self._proxy.strides)

    @property
    def offset(self):
        return (self._proxy.ctypes.data - self._base.ctypes.data) // self.dtype.itemsize

    def is_contiguous(self):
        """Whether the view is its buffer's elements `offset...offset + size` in row-major
        order (what a C routine reads)."""
        return self._proxy.flags.c_contiguous

    def transpose(self, perm):
        return self._derived(self._proxy.transpose(tuple(perm)))

    def reshape(self, shape):
        """The view numpy's `reshape` returns, or None where it copies."""
        try:
            return self._derived(self._proxy.reshape(tuple(shape), copy=False))
        except ValueError:
            return None

    def broadcast(self, shape):
        """`np.broadcast_to` (numpy's right-aligned broadcasting)."""
        return self._derived(np.broadcast_to(self._proxy, tuple(shape)))

    def slice(self, starts, limits, steps=None):
        steps = steps or (1,) * len(starts)
        index = tuple(slice(a, b, s) for a, b, s in zip(starts, limits, steps))
        return self._derived(self._proxy[index])

    def flip(self, axes):
        index = tuple(slice(None, None, -1) if k in axes else slice(None)
                      for k in range(len(self.shape)))
        return self._derived(self._proxy[index])

    def __repr__(self):
        return f"View({self.shape}, strides={self.strides}, offset={self.offset})"
