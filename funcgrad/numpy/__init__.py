"""funcgrad.numpy: a NumPy-compatible array API built only from funcgrad.lax primitives.

NumPy's broadcasting with JAX's dtype policy (float32/int32 defaults, weak Python scalars,
`config.update("enable_x64", True)` for 64-bit); the same functions run eagerly and inside
every transform. Families: creation, math (ufuncs), logic, reductions, shape, products
(dot, matmul, einsum), `linalg` (numpy.linalg), indexing; `methods` installs operators and
methods on arrays and tracers.
"""

import numpy as _np

from funcgrad.core import ArrayBase as ndarray
from funcgrad.dtypes import NARROW_NAMES as _narrow_names
from funcgrad.numpy import array_api as _array_api
from funcgrad.numpy import dtype_api as _dtype_api
from funcgrad.numpy import fft, linalg, methods  # noqa: F401  (methods installs the operators)
from funcgrad.numpy import ufuncs as _ufuncs
from funcgrad.numpy._util import broadcast_shapes as _broadcast_shapes
from funcgrad.numpy.array_api import *
from funcgrad.numpy.calculus import *
from funcgrad.numpy.creation import *
from funcgrad.numpy.dtype_api import *
from funcgrad.numpy.editing import *
from funcgrad.numpy.float_ops import *
from funcgrad.numpy.functional import *
from funcgrad.numpy.histograms import *
from funcgrad.numpy.host import *
from funcgrad.numpy.index_tricks import *
from funcgrad.numpy.indexing import *
from funcgrad.numpy.logic import *
from funcgrad.numpy.math import *
from funcgrad.numpy.padding import *
from funcgrad.numpy.polynomial import *
from funcgrad.numpy.products import *
from funcgrad.numpy.reductions import *
from funcgrad.numpy.searching import *
from funcgrad.numpy.setops import *
from funcgrad.numpy.shape import *
from funcgrad.numpy.statistics import *
from funcgrad.numpy.ufuncs import *
from funcgrad.numpy.windows import *

astype, clip = _array_api.astype, _array_api.clip  # the Array API's signatures, not NumPy's
pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None


def broadcast_shapes(*shapes):
    """The shape that `shapes` broadcast to (NumPy rules)."""
    return _broadcast_shapes("broadcast_shapes", *[tuple(s) for s in shapes])


def _install_boundaries():
    """Every public function behind `errors.api_boundary`: bad arguments that a function's own
    checks miss give a funcgrad error naming it, never a raw numpy/Python exception."""
    import inspect

    from funcgrad import errors
    ns = globals()
    for name, obj in list(ns.items()):
        if not name.startswith("_") and inspect.isfunction(obj):
            ns[name] = errors.api_boundary(obj, f"numpy.{name}")


_install_boundaries()
_ufuncs.install(globals())  # add.reduce, maximum.at, ... (JAX's ufunc methods)


def __getattr__(name):
    """`fnp.bfloat16` & co.: made (and ml_dtypes imported) on first use (`dtype_api`)."""
    t = _dtype_api.narrow_scalar_type(name) if name in _narrow_names else None
    if t is None:
        raise AttributeError(f"module 'funcgrad.numpy' has no attribute {name!r}")
    globals()[name] = t
    return t


def __dir__():
    return sorted({*globals(), *_narrow_names})
