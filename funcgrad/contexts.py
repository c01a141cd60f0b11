"""Context managers of JAX's top level: options set for a block, names, compile-time values.

- `enable_x64`, `debug_nans`, `numpy_rank_promotion`, ... are `ConfigState`s, as JAX's: called
  with a value they are a context manager setting `config.<name>` inside the block;
  `.value` reads it. `disable_jit(disable=True)` and `checking_leaks()` are the same for
  their options.
- `named_scope(name)` and `named_call(fun, name=)` prefix `name/` to the function name of
  the source of every equation traced inside (shown by generated code, profiles, pictures).
- `ensure_compile_time_eval()`: operations on concrete values run at once, even under `jit`.

The options are process-wide (`funcgrad.config`), not per thread as JAX's. Imports the
config, errors and the core.
"""

import contextlib
import functools

from funcgrad import errors
from funcgrad.config import config
from funcgrad.core import eval_concrete, name_scope

__all__ = [
    "ConfigState", "check_tracer_leaks", "checking_leaks", "debug_infs", "debug_nans",
    "default_matmul_precision", "default_prng_impl", "disable_jit", "enable_checks",
    "enable_custom_prng",
    "enable_x64", "ensure_compile_time_eval", "explain_cache_misses", "log_compiles",
    "named_call", "named_scope", "numpy_dtype_promotion", "numpy_rank_promotion",
    "threefry_partitionable",
]

_NO_VALUE = object()


class ConfigState:
    """One option of `funcgrad.config` as JAX exposes it (`jax.enable_x64`): calling it with a
    value gives a context manager that sets the option inside the block; `.value` reads it.

    Example:
        >>> with enable_x64(True):
        ...     print(fnp.ones(1).dtype)
        float64
        >>> enable_x64.value
        False
    """

    def __init__(self, name, default_context_value=_NO_VALUE):
        self.__name__ = self.name = name
        self._default_context_value = default_context_value

    def __repr__(self):
        return f"<funcgrad config state {self.name}={self.value!r}>"

    @property
    def value(self):
        return getattr(config, self.name)

    def __call__(self, new_val=_NO_VALUE):
        if new_val is _NO_VALUE:
            if self._default_context_value is _NO_VALUE:
                raise errors.FuncgradTypeError(
                    f"Context manager for {self.name} config option requires an argument "
                    f"representing the new value for the config option.\n{errors.where()}")
            new_val = self._default_context_value
        return _setting(self.name, new_val)


@contextlib.contextmanager
def _setting(name, value):
    old = getattr(config, name)
    config.update(name, value)
    try:
        yield
    finally:
        config.update(name, old)


def _flag(name):
    return ConfigState(name, default_context_value=True)


enable_x64 = _flag("enable_x64")
debug_nans = _flag("debug_nans")
debug_infs = _flag("debug_infs")
log_compiles = _flag("log_compiles")
explain_cache_misses = _flag("explain_cache_misses")
check_tracer_leaks = _flag("check_tracer_leaks")
enable_checks = _flag("enable_checks")
threefry_partitionable = _flag("threefry_partitionable")
enable_custom_prng = _flag("enable_custom_prng")
default_matmul_precision = ConfigState("default_matmul_precision")
numpy_rank_promotion = ConfigState("numpy_rank_promotion")
numpy_dtype_promotion = ConfigState("numpy_dtype_promotion")
default_prng_impl = ConfigState("default_prng_impl")


def disable_jit(disable=True):
    """Inside the block, jitted functions run op by op (as plain Python), so `print` and
    Python control flow see values. Also `config.update("jax_disable_jit", True)`.

    Example:
        >>> with disable_jit():
        ...     jit(lambda x: print(x) or x)(1.0)
        1.0
    """
    return _setting("disable_jit", bool(disable))


def checking_leaks():
    """`check_tracer_leaks(True)`: accepted; funcgrad raises `TracerLeakError` whenever a
    leaked traced value is used, with or without it."""
    return check_tracer_leaks(True)


@contextlib.contextmanager
def named_scope(name):
    """Name the operations traced inside: their equations' source reads `file.py:12
    (name/fn)` in generated code, profiles, `viz` pictures and error messages. Scopes nest
    (`outer/inner/fn`).

    Raises:
        FuncgradTypeError: `name` is not a string.

    Example:
        >>> def f(x):
        ...     with named_scope("layer1"):
        ...         return fnp.sin(x)
        >>> make_jaxpr(f)(1.0).eqns[0].source[2]
        'layer1/f'
    """
    if not isinstance(name, str):
        raise errors.FuncgradTypeError(f"named_scope name argument must be a string, got "
                                       f"{type(name).__name__}\n{errors.where()}")
    with name_scope(name):
        yield


def named_call(fun, *, name=None):
    """`fun` with its operations in `named_scope(name)` (default: `fun.__name__`).

    Example:
        >>> g = named_call(lambda x: fnp.sin(x), name="block")
        >>> make_jaxpr(g)(1.0).eqns[0].source[2]
        'block/<lambda>'
    """
    scope = name if name is not None else getattr(fun, "__name__", type(fun).__name__)

    @functools.wraps(fun)
    def named(*args, **kwargs):
        with named_scope(scope):
            return fun(*args, **kwargs)
    return named


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Inside the block, an operation whose operands are all concrete runs at once, even under
    `jit`: its result is a concrete Array that Python control flow can read. Operations on
    traced values are still traced.

    Example:
        >>> @jit
        ... def f(x):
        ...     with ensure_compile_time_eval():
        ...         n = fnp.arange(4).sum()      # a concrete 6, not a traced value
        ...     return x * int(n)
        >>> f(1.0)
        Array(6., dtype=float32)
    """
    with eval_concrete():
        yield
