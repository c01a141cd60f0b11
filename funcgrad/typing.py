"""`funcgrad.typing`, JAX's `jax.typing`: annotations for functions that take arrays.

`ArrayLike` is anything funcgrad converts to an array (its arrays and traced values, NumPy
arrays and scalars, Python numbers); `DTypeLike` anything that names a dtype. `Array` (the
type of funcgrad's arrays and traced values, `ArrayBase`) is here too, for annotations.

Example:
    >>> def scale(x: ArrayLike, dtype: DTypeLike = None) -> Array:
    ...     return fnp.asarray(x, dtype) * 2
"""

from typing import Any, Protocol, runtime_checkable

import numpy as np

from funcgrad.core import ArrayBase

__all__ = ["Array", "ArrayLike", "DType", "DTypeLike", "Shape", "SupportsDType"]

Array = ArrayBase  # funcgrad's arrays and the values traced in their place
DType = np.dtype
Shape = tuple[int, ...]


@runtime_checkable
class SupportsDType(Protocol):
    """Anything with a `dtype` attribute (an array, `fnp.float32`)."""

    @property
    def dtype(self) -> np.dtype: ...


ArrayLike = ArrayBase | np.ndarray | np.bool_ | np.number | bool | int | float | complex
DTypeLike = str | type[Any] | np.dtype | SupportsDType
