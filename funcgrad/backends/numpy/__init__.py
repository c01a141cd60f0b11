"""The CPU backend: fused programs rendered as readable Python/numpy source.

`compile_program(program, donate_argnums)` returns an `Executable`; `higher_order_rules`
is the hook through which control-flow primitives render (see `render.py`).
"""

from funcgrad.backends.numpy import (
    collectives,  # noqa: F401  (registers psum, all_gather...)
    control_flow,  # noqa: F401  (registers cond/while/scan)
)
from funcgrad.backends.numpy.render import Renderer, compile_program, higher_order_rules
from funcgrad.backends.numpy.runtime import Executable, LibCall, Profile

__all__ = ["Executable", "LibCall", "Profile", "Renderer", "compile_program",
           "higher_order_rules"]
