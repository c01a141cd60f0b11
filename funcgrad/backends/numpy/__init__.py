"""The CPU backend: fused programs rendered as readable Python/numpy source.

    render.py        Renderer: the program walk, the memory plan, the generated function;
                     `compile_program` and the `higher_order_rules` hook
    chunked.py       large kernels as loops over row chunks (one step of the plan)
    emit.py          one instruction -> numpy statements (shared by both renderers): table
                     lookup, library-call fallback, writing into `out=`/copies/new values
    ops.py           the tables: one numpy expression per primitive, views, literals
    control_flow.py  cond/while/scan as Python statements around compiled bodies
    collectives.py   psum/all_gather/... as mpi4py calls
    runtime.py       what generated code calls: Executable, LibCall, workspace, profiling

`compile_program(program, donate_argnums, ir, compile_subprogram)` returns an `Executable`;
sub-programs compile through the `compile_subprogram` callback the pipeline passes. This
package imports no compiler pass (only the fusion pass's data types, the memory planner and
the escaping policy).
"""

from funcgrad.backends.numpy import (
    collectives,  # noqa: F401  (registers psum, all_gather...)
    control_flow,  # noqa: F401  (registers cond/while/scan)
)
from funcgrad.backends.numpy.render import Renderer, compile_program, higher_order_rules
from funcgrad.backends.numpy.runtime import Executable, LibCall, Profile

TAKES_DONATED_BUFFERS = True  # results may reuse donated inputs (`_own` guards them)

__all__ = ["Executable", "LibCall", "Profile", "Renderer", "compile_program",
           "higher_order_rules"]
