"""funcgrad.compiler: `jit` and the optimizing compiler behind it.

`jit.py` is the user-facing API (tracing, cache, lowering), `call.py` the `jit` call
primitive and its transform rules; the passes, fusion, memory planning and the pipeline
that turns a jaxpr into an executable live in the other modules of this package.
"""

from funcgrad.compiler.jit import jit

__all__ = ["jit"]
