"""Code generators for compiled programs, one sub-package per backend, and their registry.

A backend module provides
`compile_program(program, donate_argnums=(), ir=None, compile_subprogram=None)` returning
an `Executable` (`exe(*arrays) -> list of arrays`, `as_text()`, `ir_text()`,
`memory_analysis()`); `compile_subprogram(closed_jaxpr) -> Executable` is the pipeline's
callback for the bodies of higher-order primitives. "cpu" is `funcgrad.backends.native`
(C kernels when a C compiler is found, else the numpy backend; see `config.native`),
"numpy" always `funcgrad.backends.numpy`, "cuda" `funcgrad.backends.cuda` (imported when
first asked for). The core never imports
this package; the compiler pipeline asks it for a backend by name.
"""

import importlib

from funcgrad import errors

_BACKENDS = {"cpu": "funcgrad.backends.native", "numpy": "funcgrad.backends.numpy",
             "cuda": "funcgrad.backends.cuda"}


def get_backend(name):
    """The backend module for `name` ("cpu", "numpy", "cuda"); an error naming the known backends
    otherwise."""
    module = _BACKENDS.get(name)
    if module is None:
        raise errors.FuncgradValueError(
            f"unknown backend {name!r}; known backends: {', '.join(sorted(_BACKENDS))}")
    return importlib.import_module(module)


def register_backend(name, module):
    """Make backend `name` available as the module named `module` (a backend outside this
    package)."""
    _BACKENDS[name] = module
