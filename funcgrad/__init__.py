"""funcgrad: pure functions on arrays, traced to a small typed IR and transformed.

    import funcgrad as fg
    import funcgrad.numpy as fnp
    fg.grad(lambda x: fnp.sin(x).sum())(fnp.ones(3))
"""

from funcgrad import (  # noqa: F401
    data,
    debug,
    io,
    lax,
    nn,
    numpy,  # noqa: F401  (installs array operators and methods)
    optim,
    random,
    scipy,
    sharding,  # noqa: F401  (installs Array.sharding, .devices(), ...)
    tree,
    tree_util,
)
from funcgrad.abstract_eval import ShapeDtypeStruct, eval_shape, typeof  # noqa: F401
from funcgrad.api import grad, jvp, linearize, make_jaxpr, value_and_grad, vjp  # noqa: F401
from funcgrad.backends import numpy as _numpy_backend  # noqa: F401  (loaded now, not in a jit call)
from funcgrad.batching_api import vmap  # noqa: F401
from funcgrad.callbacks import pure_callback  # noqa: F401
from funcgrad.checkpoint import checkpoint, checkpoint_policies, remat  # noqa: F401
from funcgrad.compiler import jit  # noqa: F401
from funcgrad.compiler import pipeline as _pipeline  # noqa: F401  (likewise)
from funcgrad.config import config  # noqa: F401
from funcgrad.contexts import (  # noqa: F401
    check_tracer_leaks,
    checking_leaks,
    debug_infs,
    debug_nans,
    default_matmul_precision,
    default_prng_impl,
    disable_jit,
    enable_checks,
    enable_custom_prng,
    enable_x64,
    ensure_compile_time_eval,
    explain_cache_misses,
    log_compiles,
    named_call,
    named_scope,
    numpy_dtype_promotion,
    numpy_rank_promotion,
    threefry_partitionable,
)
from funcgrad.core import Array  # noqa: F401
from funcgrad.custom_derivatives import custom_jvp, custom_vjp  # noqa: F401
from funcgrad.devices import (  # noqa: F401
    Device,
    block_until_ready,
    default_backend,
    default_device,
    device_count,
    device_get,
    device_put,
    devices,
    local_device_count,
    local_devices,
    process_count,
    process_index,
    process_indices,
)
from funcgrad.dtypes import float0  # noqa: F401
from funcgrad.environment import (  # noqa: F401
    clear_caches,
    effects_barrier,
    live_arrays,
    print_environment_info,
)
from funcgrad.jacobians import hessian, jacfwd, jacobian, jacrev  # noqa: F401
from funcgrad.lax import stop_gradient  # noqa: F401
from funcgrad.more_transforms import closure_convert, custom_gradient, linear_transpose  # noqa: F401
from funcgrad.pmap import pmap  # noqa: F401
from funcgrad.profiler import profile  # noqa: F401
from funcgrad.sharding import (  # noqa: F401
    NamedSharding,
    P,
    Shard,
    make_array_from_callback,
    make_array_from_process_local_data,
    make_array_from_single_device_arrays,
    make_mesh,
    reshard,
    set_mesh,
    shard_map,
    smap,
)

__version__ = "0.1.0"

# loaded on first use, as jax.example_libraries, jax.image, ...
_LAZY = ("example_libraries", "ad_checkpoint", "flatten_util", "image", "ops", "typing")
_NAMESPACES = ("numpy", "lax", "nn", "optim", "random", "scipy", "tree", "tree_util", "data",
               "debug", "io", "sharding", "example_libraries", "ad_checkpoint", "dtypes",
               "flatten_util", "image", "ops", "profiler", "typing")


def __getattr__(name):
    import importlib
    if name in _LAZY:
        return importlib.import_module(f"funcgrad.{name}")
    homes = [m for m in _NAMESPACES[:8] if not name.startswith("_")
             and hasattr(globals()[m], name)]
    where = f"; it is funcgrad.{homes[0]}.{name}" if homes else ""
    raise AttributeError(f"module 'funcgrad' has no attribute {name!r}{where} (namespaces: "
                         f"{', '.join(_NAMESPACES)})")
