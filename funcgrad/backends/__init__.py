"""Code generators for compiled programs, one sub-package per backend.

A backend module provides `compile_program(program, donate_argnums=(), ir_text="")`
returning an `Executable` (`exe(*numpy_arrays) -> list of arrays`, `as_text()`,
`ir_text()`, `memory_analysis()`). "cpu" is `funcgrad.backends.numpy`.
"""

import importlib

from funcgrad import errors

_BACKENDS = {"cpu": "funcgrad.backends.numpy", "numpy": "funcgrad.backends.numpy"}


def get_backend(name):
    """The backend module for `name` ("cpu"); an error naming the known backends otherwise."""
    module = _BACKENDS.get(name)
    if module is None:
        raise errors.FuncgradValueError(
            f"unknown backend {name!r}; known backends: {', '.join(sorted(_BACKENDS))}")
    return importlib.import_module(module)


def register_backend(name, module):
    """Make backend `name` available as the module named `module` (e.g. a CUDA renderer)."""
    _BACKENDS[name] = module
