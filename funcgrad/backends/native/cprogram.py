"""The C side of a native program: consecutive C statements as one C function (a `Segment`),
its Python caller, and the workspace its temporaries live in.

A segment is the C function of a run of the program's statements that all have a C form (the
whole program when every one has): its parameters are the arrays Python hands it (arguments,
results allocated by the caller, values Python computed), the arrays bound once (constants,
literals, loop constants), the workspace and an optional timing array:

    /* statements 0-11 of the program in one call from Python */
    int fg_run0(const float *p0, float *p1, const float *p2, char *fg_w, double *fg_t) {
        int fg_status = 0;
        float *const w0 = (float *)(fg_w + 0);      /* temporaries: the workspace */
        FG_UPPER_CLEAN(); fg_k0((void *)p0, (void *)w0);
        ...
    fg_end:;
        return fg_status;                            /* 1: out of memory */
    }

With `fg_t` set (profiling), statement k writes its start and end times (seconds) to
`fg_t[2k]`, `fg_t[2k + 1]`. A statement that can fail (a loop out of memory or stopped by
Ctrl-C) stops the segment with its status and its index (`status | k << 4`); a call with
`fg_from = k` resumes there (every earlier statement's results are in place, and a loop
never writes its own operands). The workspace is one block of bytes per program, laid out by
`compiler.memory.pack` over the memory plan's buffer lifetimes, allocated on first use and
kept between calls (`Workspace`). Imports numpy, ctypes and the native C tree only.
"""

import ctypes

import numpy as np

from funcgrad import errors
from funcgrad.backends.native import cnode, interrupt

CLOCK = cnode.Piece("clock", r"""#include <time.h>
static double fg_now(void) {  /* seconds (C11's timespec_get), for per-statement profiles */
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
""")
ALIGN = 64  # bytes: every workspace region starts on a cache line


class Param:
    """A pointer parameter of a segment: `name` in C, `ctype` it points to, `const` when only
    read; `source`: "array" (Python passes an array per call, `expr` its Python name, checked
    when `check`), "bound" (`array` bound once) or "workspace"."""

    def __init__(self, name, ctype, const, source, expr=None, array=None, check=True,
                 dtype=None, size=None):
        self.name, self.ctype, self.const, self.source = name, ctype, const, source
        self.expr, self.array, self.check = expr, array, check
        self.dtype, self.size = dtype, size

    def declaration(self):
        return f"{'const ' if self.const else ''}{self.ctype} *{self.name}"


class Segment:
    """Statements `steps` (each `statements()` -> cnode nodes, `status` when it returns a
    status) printed as C function `cname` with `params` (`Param`s) and the workspace
    pointers `locals` ((C type, name, byte offset)) declared on entry."""

    def __init__(self, cname, pyname, steps, params, locals_, first):
        self.cname, self.pyname, self.steps = cname, pyname, steps
        self.params, self.locals, self.first = params, locals_, first

    def function(self):
        body = [cnode.Stmt("int fg_status = 0;")]
        body += [cnode.Stmt(f"{t} *const {name} = ({t} *)(fg_w + {off});")
                 for t, name, off in self.locals]
        resume, stmts = [], []
        for k, step in enumerate(self.steps):
            if step.status:  # a statement that can fail is where a call may resume
                resume.append(k)
                stmts.append(cnode.Stmt(f"fg_at{k}:;"))
            stmts += [cnode.Stmt(f"if (fg_t) fg_t[{2 * k}] = fg_now();"), *step.statements(),
                      cnode.Stmt(f"if (fg_t) fg_t[{2 * k + 1}] = fg_now();")]
            if step.status:
                stmts.append(cnode.Stmt(f"if (fg_status) {{ fg_status |= {k} << 4; "
                                        "goto fg_end; }"))
        if resume:  # resumed after Ctrl-C (`segment_caller`): from the statement it stopped
            body.append(cnode.Stmt("switch (fg_from) { " + " ".join(
                f"case {k}: goto fg_at{k};" for k in resume) + " default: break; }"))
        body += stmts
        if resume:
            body.append(cnode.Stmt("fg_end:;"))
        body.append(cnode.Stmt("return fg_status;"))
        params = [p.declaration() for p in self.params] + [
            "char *fg_w", "double *fg_t", "long long fg_from"]
        last = self.first + len(self.steps) - 1
        what = f"statement {self.first}" if last == self.first else \
            f"statements {self.first}-{last}"
        needs = [CLOCK] + [p for s in self.steps for p in getattr(s, "needs", ())]
        return cnode.Function("int", self.cname, params, body,
                              f"{what} of the program in one call from Python", needs=needs)

    def caller(self, lib):
        """The Python callable of the loaded function: `call(*arrays, workspace, times)`
        with the "array" parameters in order (see `segment_caller`)."""
        return segment_caller(getattr(lib, self.cname), self.params, self.cname)


def segment_caller(fn, params, what):
    """`call(*arrays, ws, times)`: the C function `fn` on the data pointers of `arrays` (one
    per "array" parameter, in order: each checked for its dtype and size where `check`, and
    made C-contiguous), the bound arrays' addresses, the workspace address `ws` (an int, 0
    for none) and `times` (the address of a float64 array of two entries per statement, or
    0). A statement stopped by Ctrl-C lets Python's handler run (which raises
    KeyboardInterrupt; when a handler does not, the call resumes at that statement); one out
    of memory raises MemoryError."""
    fn.argtypes = [ctypes.c_void_p] * (len(params) + 2) + [ctypes.c_longlong]
    fn.restype = ctypes.c_int
    arrays = [p for p in params if p.source == "array"]
    order = [p.source == "array" for p in params]
    bound = [p.array.ctypes.data for p in params if p.source == "bound"]
    checks = [(k, np.dtype(p.dtype), p.size) for k, p in enumerate(arrays) if p.check]
    if any(order[len(arrays):]) or not all(order[:len(arrays)]):
        raise errors.FuncgradInternalError(f"native {what}: array parameters must come first")

    def call(*args):
        *arrs, ws, times = args
        ptrs, keep = [], []
        for a in arrs:  # no Python call per array (4x faster than a.ctypes.data)
            try:
                ptrs.append(_addressof(_from_buffer(a)))
            except (TypeError, ValueError):  # read-only, empty or not an array
                ptrs.append(a.ctypes.data if type(a) is np.ndarray else 0)
        for k, dt, size in checks:
            a = arrs[k]
            if (type(a) is not np.ndarray or a.dtype is not dt or a.size != size
                    or not a.flags.c_contiguous):
                keep.append(_contiguous(a, dt, size, what, k))  # alive until C returns
                ptrs[k] = keep[-1].ctypes.data
        status = fn(*ptrs, *bound, ws, times, 0)
        while status & 15 == interrupt.FG_INTERRUPTED:
            interrupt.checked_status()  # Python's handler: KeyboardInterrupt, as a rule
            status = fn(*ptrs, *bound, ws, times, status >> 4)
        if status:
            raise MemoryError(f"native {what}: could not allocate its temporaries")
    return call


_addressof, _from_buffer = ctypes.addressof, ctypes.c_char.from_buffer


def _contiguous(a, dt, size, what, k):
    """`a` as a C-contiguous array of `dt` and `size` elements (a copy where needed)."""
    a = np.ascontiguousarray(a, dt)
    if a.size != size:
        raise errors.FuncgradInternalError(
            f"native {what}: operand {k} has {a.size} elements, the C function was compiled "
            f"for {size}")
    return a


class WorkspaceSet:
    """One set of a program's temporaries: `ptr` the address of its bytes, `views` the typed
    numpy views of the regions Python statements read or write."""

    __slots__ = ("raw", "ptr", "views")

    def __init__(self, nbytes, regions):
        self.raw = np.empty(max(nbytes, 1) + ALIGN, np.uint8)
        start = -self.raw.ctypes.data % ALIGN
        self.ptr = self.raw.ctypes.data + start
        self.views = [self.raw[start + off:start + off + int(np.prod(shape)) * dt.itemsize]
                      .view(dt).reshape(shape) for off, shape, dt in regions]


class Workspace:
    """The workspace of one program: `nbytes` bytes with typed views `regions` ((byte
    offset, shape, dtype)); a call takes a set and gives it back when it returns, so
    concurrent or re-entrant calls get their own set; at most two spare sets are kept."""

    def __init__(self, nbytes, regions):
        self.nbytes, self.regions = nbytes, [(o, tuple(s), np.dtype(d)) for o, s, d in regions]
        self.free = []

    def take(self):
        try:
            return self.free.pop()
        except IndexError:
            return WorkspaceSet(self.nbytes, self.regions)

    def give(self, ws):
        if len(self.free) < 2:
            self.free.append(ws)
