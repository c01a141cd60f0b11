"""The compiler pipeline: optimize an IR, fuse it, render it with a backend.

    optimize(closed)                       -> ClosedJaxpr (inline, then fold/simplify/cse/dce
                                              until nothing changes)
    compile_jaxpr(closed, backend="cpu", donate_argnums=())
                                           -> Executable: exe(*numpy_arrays) -> [np.ndarray]

A backend gets the fused program and a `compile_subprogram` callback (a `Subprograms`: it
compiles a body with this function, for the same backend, and `.fused(body)` hands it the
body optimized and fused, for a backend that renders it inside its own code, as the native
backend's C loops do); backends never import this module. `stats["compiles"]` counts
compilations (tests read it to check caching); `stats["last_seconds"]` holds the time of
each phase of the last compilation (a view of the one set of counters, `jit_cache.stats`).
"""

import time

from funcgrad.backends import get_backend
from funcgrad.compiler.bucketing import bucket_collectives
from funcgrad.compiler.fusion import fuse
from funcgrad.compiler.jit_cache import stats as _counters
from funcgrad.compiler.passes import cse, dce, fold_constants, inline_calls, simplify
from funcgrad.config import config
from funcgrad.core import typecheck_jaxpr
from funcgrad.core.nesting import nests

stats = _counters.pipeline  # {"compiles", "compile_seconds", "last_seconds"}

PASSES = (fold_constants, simplify, cse, dce)


def optimize(closed, passes=PASSES, max_rounds=4):
    """Inline nested jit calls, then run `passes` in order until the IR stops changing.

    Example:
        >>> print(optimize(make_jaxpr(lambda x: (x * 1.0 + 0.0).T.T)(np.ones((2, 3)))))
        { lambda ; a:f32[2,3]. let  in (a,) }
    """
    closed = inline_calls(closed)
    for _ in range(max_rounds):
        new = closed
        for p in passes:
            new = p(new)
        if new is closed:
            break
        closed = new
    closed = bucket_collectives(closed)  # gradient allreduces in buckets (if any)
    if config.check_jaxprs:
        typecheck_jaxpr(closed.jaxpr)
    return closed


def compile_jaxpr(closed, backend="cpu", donate_argnums=(), optimize_ir=True):
    """Compile a ClosedJaxpr into an `Executable` for `backend`.

    Args:
        closed: the program; its consts are bound into the compiled code once.
        backend: a registered backend's name ("cpu": C kernels or numpy source, "numpy",
            "cuda", or one added with `funcgrad.backends.register_backend`).
        donate_argnums: positions of arguments whose buffers the program may reuse.
        optimize_ir: run `optimize` first (default True).

    Returns:
        An Executable: `exe(*arrays)` returns a list of numpy arrays; `exe.as_text()` is the
        generated source, `exe.ir_text()` the optimized IR, `exe.memory_analysis()` the
        predicted memory use, `exe.profile(*arrays)` per-statement timings.
    """
    return _compile(closed, backend, tuple(donate_argnums), optimize_ir, {})


@nests
def _compile(closed, backend, donate_argnums, optimize_ir, compiled):
    """`compile_jaxpr`; `compiled` holds the sub-programs compiled (or fused) so far for the
    outermost program, by identity (`Subprograms`): a backend may ask for one twice, which
    must not cost 2^depth compiles."""
    t0 = time.perf_counter()
    opt = optimize(closed) if optimize_ir else closed
    t1 = time.perf_counter()
    program = fuse(opt)
    t2 = time.perf_counter()

    exe = get_backend(backend).compile_program(program, donate_argnums, opt,
                                               compile_subprogram=Subprograms(backend, compiled))
    t3 = time.perf_counter()
    _counters.compiled(t3 - t0, {"optimize": t1 - t0, "fuse": t2 - t1, "render": t3 - t2})
    return exe


class Subprograms:
    """The callback a backend gets for the bodies of higher-order primitives (cond, while,
    scan, calls): `subprograms(body)` compiles the `ClosedJaxpr` `body` into an executable of
    the same backend; `subprograms.fused(body)` only optimizes and fuses it (a fusion
    `Program`), for a backend that renders bodies inside its own code (the native
    backend's C loops: the C compiler then runs once per program). Both are kept in
    `compiled` (per outermost program, by identity: the entry keeps the body alive, so its
    id stays its own), so a body asked for twice costs one compile."""

    def __init__(self, backend, compiled):
        self.backend, self.compiled = backend, compiled

    def __call__(self, closed):
        hit = self.compiled.get(id(closed))
        if hit is None:
            hit = self.compiled[id(closed)] = (
                closed, _compile(closed, self.backend, (), True, self.compiled))
        return hit[1]

    def fused(self, closed):
        hit = self.compiled.get(("fused", id(closed)))
        if hit is None:
            hit = self.compiled[("fused", id(closed))] = (closed, fuse(optimize(closed)))
        return hit[1]
