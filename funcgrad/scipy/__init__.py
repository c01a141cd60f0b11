"""`funcgrad.scipy`: SciPy's names on funcgrad arrays, as `jax.scipy` (`linalg`, `special`,
`stats`, `fft`, `integrate`, `interpolate`, `ndimage`, `optimize`, `signal`).

The submodules load on first use (module `__getattr__`), so `import funcgrad.scipy` never
fails because one of them does, and an unknown name is an error listing what exists.

    >>> import funcgrad.scipy as jsp
    >>> jsp.special.expit(0.0)
    Array(0.5, dtype=float32)
"""

import importlib

__all__ = ["linalg", "special", "stats", "fft", "integrate", "interpolate", "ndimage", "optimize",
           "signal"]


def __getattr__(name):
    if name in __all__:
        try:
            module = importlib.import_module(f"funcgrad.scipy.{name}")
        except ImportError as e:
            raise ImportError(f"funcgrad.scipy.{name} could not be imported ({e}); the other "
                              f"submodules of funcgrad.scipy ({', '.join(__all__)}) still "
                              "load on their own") from e
        globals()[name] = module
        return module
    raise AttributeError(f"module 'funcgrad.scipy' has no attribute {name!r}; it has "
                         f"{', '.join(__all__)}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
