"""The process-wide helpers of JAX's top level: `clear_caches`, `live_arrays`,
`effects_barrier`, `print_environment_info`.

Imports the core, the config and (lazily) the compiler's cache and the backends.
"""

import gc
import platform
import sys

import numpy as np

from funcgrad.config import config
from funcgrad.core import Array

__all__ = ["clear_caches", "effects_barrier", "live_arrays", "print_environment_info"]


def clear_caches():
    """Forget every trace and compiled program kept by `jit` (later calls trace and compile
    again); the on-disk cache of compiled C modules stays.

    Example:
        >>> f = jit(fnp.sin); f(1.0); clear_caches(); f.cache_info().size
        0
    """
    from funcgrad.compiler import jit_cache
    jit_cache.clear_all()
    config.update("jit_cache_size", config.jit_cache_size)  # also empties the shape caches


def live_arrays(platform=None):
    """Every funcgrad `Array` alive now (optionally only those on `platform`, "cpu" or
    "cuda"). It walks the garbage collector's objects, so arrays cost nothing until asked.

    Example:
        >>> x = fnp.ones(3); any(a is x for a in live_arrays())
        True
    """
    arrays = [o for o in gc.get_objects() if type(o) is Array]
    if platform is None:
        return arrays
    return [a for a in arrays if a.device.platform == platform]


def effects_barrier():
    """Wait until every effect (`debug.print`, callbacks) started so far has run: funcgrad
    runs them in program order as the program runs, so there is nothing to wait for."""


def print_environment_info(return_string=False):
    """The versions of funcgrad, Python, NumPy and what the backends find (a C compiler,
    CuPy and a GPU), printed or, with `return_string`, returned.

    Example:
        >>> print_environment_info()
        funcgrad:   0.1.0
        ...
    """
    import funcgrad
    from funcgrad.devices import cuda_provider
    lines = [f"funcgrad:   {funcgrad.__version__}", f"numpy:      {np.__version__}",
             f"python:     {sys.version.split()[0]}",
             f"platform:   {platform.platform()}", f"C compiler: {_compiler()}",
             f"cuda:       {'unavailable' if cuda_provider().problem() else 'available'}",
             f"x64:        {config.enable_x64}",
             "(`python -m funcgrad doctor` checks the native and CUDA backends in depth)"]
    text = "\n".join(lines) + "\n"
    if return_string:
        return text
    print(text, end="")
    return None


def _compiler():
    from funcgrad.backends.native import build
    return build.find_compiler() or "none"
