"""The native CPU backend: fused kernels as C compiled by the system C compiler, around the
numpy backend's Python wrapper (library calls, control flow, shape operations).

    ops.py       the C dialect `NativeC` (the one C base, `cstyle`, plus C's few overrides),
                 the C prelude
    kernel.py    KernelSpec -> one C function (`CKernel(NativeC)`: the layout's loops; blocks
                 on the pool above a size)
    threads.py   the thread pool large kernels split their outermost loop over
    program.py   Program -> the Python wrapper calling one C module (NativeExecutable)
    loops.py     while/scan/fori loops whose bodies C can run as one C function
    linalg.py    small lu, triangular_solve, cholesky as C routines (in loops, top level)
    shapes.py    shape and indexing operations of loop bodies as C copies
    build.py     compiler discovery and flags, compiling, the in-memory module cache
    cache.py     the on-disk cache: a private folder, modules checked against their digest
    interrupt.py Ctrl-C inside C loops and pool kernels
    tiers.py     the numpy tier first, the native build in a background thread

`compile_program(program, donate_argnums, ir, compile_subprogram)` follows the backend
contract; what it returns depends on `config.native`:

    "background"  (default) the numpy backend's executable at once; the native build runs
                  in a background thread and replaces it when ready (`exe.wait()` waits)
    "sync"        build the native executable now (tests use this)
    "off"         the numpy backend only

With no C compiler (or `$CC` naming a missing one) the numpy backend runs, after one
warning saying what to install. `jit(f, backend="cpu")` is this backend;
`backend="numpy"` always the numpy one. Imports no compiler pass.
"""

from funcgrad.backends.native.build import NativeCompileError, compiler
from funcgrad.backends.native.program import NativeExecutable, compile_native
from funcgrad.backends.native.tiers import TieredExecutable, compile_program

TAKES_DONATED_BUFFERS = True  # results may reuse donated inputs (`_own` guards them)

__all__ = ["NativeCompileError", "NativeExecutable", "TieredExecutable", "compile_native",
           "compile_program", "compiler"]
