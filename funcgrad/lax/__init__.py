"""funcgrad.lax: the primitive layer, with JAX's names (`add`, `dot_general`, `cond`, ...).

Each family lives in its own module; this package re-exports their public wrappers (`__all__`)
behind `errors.api_boundary`, so bad arguments that a wrapper's own checks miss still give a
funcgrad error naming the function, never a raw numpy/Python exception.
"""

import inspect as _inspect

from funcgrad import errors as _errors
from funcgrad.interpreters.ad import add_any_p
from funcgrad.lax import associative_scan as _associative_scan_family
from funcgrad.lax import (
    barrier,
    bit_ops,
    composites,
    control_flow,
    conv_patches,
    conv_shapes,
    convolution,
    elementwise,
    indexing,
    linalg,
    linear_solve,
    logic,
    parallel,
    parallel_ops,
    precision,
    ragged,
    reductions,
    rng,
    shape,
    slicing,
    sorting,
    special,
    special_series,
)
from funcgrad.lax import fft as _fft_family  # the module; `fft` is lax.fft, as in JAX
from funcgrad.lax.associative_scan import *  # noqa: F403
from funcgrad.lax.barrier import *  # noqa: F403
from funcgrad.lax.bit_ops import *  # noqa: F403
from funcgrad.lax.composites import *  # noqa: F403
from funcgrad.lax.control_flow import *  # noqa: F403
from funcgrad.lax.conv_patches import *  # noqa: F403
from funcgrad.lax.conv_shapes import *  # noqa: F403
from funcgrad.lax.convolution import *  # noqa: F403
from funcgrad.lax.elementwise import *  # noqa: F403
from funcgrad.lax.fft import *  # noqa: F403
from funcgrad.lax.indexing import *  # noqa: F403
from funcgrad.lax.linalg import *  # noqa: F403
from funcgrad.lax.linear_solve import *  # noqa: F403
from funcgrad.lax.logic import *  # noqa: F403
from funcgrad.lax.parallel import *  # noqa: F403
from funcgrad.lax.parallel_ops import *  # noqa: F403
from funcgrad.lax.precision import *  # noqa: F403
from funcgrad.lax.ragged import *  # noqa: F403
from funcgrad.lax.reductions import *  # noqa: F403
from funcgrad.lax.rng import *  # noqa: F403
from funcgrad.lax.shape import *  # noqa: F403
from funcgrad.lax.slicing import *  # noqa: F403
from funcgrad.lax.sorting import *  # noqa: F403
from funcgrad.lax.special import *  # noqa: F403
from funcgrad.lax.special_series import *  # noqa: F403

__all__ = sorted({"add_any_p"}.union(*(m.__all__ for m in (
    barrier, control_flow, conv_shapes, convolution, elementwise, _fft_family, indexing, linalg,
    logic, parallel, parallel_ops, precision, reductions, shape, slicing, sorting, special,
    composites, _associative_scan_family, bit_ops, special_series, conv_patches, rng, ragged,
    linear_solve))))

for _name in __all__:
    if _inspect.isfunction(globals()[_name]):
        globals()[_name] = _errors.api_boundary(globals()[_name], f"lax.{_name}")
