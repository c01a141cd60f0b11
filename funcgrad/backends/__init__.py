"""Code generators for compiled programs, one sub-package per backend, and their registry.

A backend module provides
`compile_program(program, donate_argnums=(), ir=None, compile_subprogram=None)` returning
an `Executable` (`exe(*arrays) -> list of arrays`, `as_text()`, `ir_text()`,
`memory_analysis()`); `compile_subprogram(closed_jaxpr) -> Executable` is the pipeline's
callback for the bodies of higher-order primitives. "cpu" is `funcgrad.backends.native`
(C kernels when a C compiler is found, else the numpy backend; see `config.native`),
"numpy" always `funcgrad.backends.numpy`, "cuda" `funcgrad.backends.cuda` (imported when
first asked for); `register_backend` adds one from outside the package. What a backend can
do beyond the contract it declares as module attributes, read through `capabilities(name)`
(never by its name):

    TAKES_DONATED_BUFFERS   its executables may write results into donated input buffers
                            and take `exe(*arrays, owned=True)` when jit has made those
                            buffers private (default False: donation is then only checked,
                            and the donated Arrays stay usable; CUDA's pool reuses memory)

The core never imports this package; the compiler asks it for a backend by name.
"""

import importlib
import types
from dataclasses import dataclass

from funcgrad import errors

_BACKENDS = {"cpu": "funcgrad.backends.native", "numpy": "funcgrad.backends.numpy",
             "cuda": "funcgrad.backends.cuda"}


@dataclass(frozen=True)
class Capabilities:
    """What a backend declares it can do beyond the backend contract (see the module doc)."""

    takes_donated_buffers: bool = False


def names():
    """The names of the registered backends, sorted."""
    return sorted(_BACKENDS)


def get_backend(name):
    """The backend module for `name` ("cpu", "numpy", "cuda", or one registered); an error
    naming the known backends otherwise."""
    module = _BACKENDS.get(name)
    if module is None:
        raise errors.FuncgradValueError(
            f"unknown backend {name!r}; known backends: {', '.join(names())}")
    return module if isinstance(module, types.ModuleType) else importlib.import_module(module)


def capabilities(name):
    """The `Capabilities` backend `name` declares."""
    module = get_backend(name)
    return Capabilities(bool(getattr(module, "TAKES_DONATED_BUFFERS", False)))


def register_backend(name, module):
    """Make backend `name` available to `jit(..., backend=name)`: `module` is the backend
    module itself or its importable name (a backend outside this package).

    Example:
        >>> register_backend("mine", "mypackage.mybackend")  # imported when first used
        >>> fg.jit(f, backend="mine")  # doctest: +SKIP
    """
    if not isinstance(name, str) or not name:
        raise errors.FuncgradValueError(f"register_backend: a backend's name is a non-empty "
                                        f"string, got {name!r}")
    if not isinstance(module, (str, types.ModuleType)):
        raise errors.FuncgradTypeError(f"register_backend({name!r}): expected a module or a "
                                       f"module's name, got {type(module).__name__}")
    if isinstance(module, types.ModuleType) and not callable(
            getattr(module, "compile_program", None)):
        raise errors.FuncgradValueError(f"register_backend({name!r}): module {module.__name__} "
                                        "has no compile_program(program, donate_argnums, ir, "
                                        "compile_subprogram)")
    _BACKENDS[name] = module
