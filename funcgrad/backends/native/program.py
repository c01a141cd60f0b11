"""A fused `Program` as a Python wrapper (the numpy renderer's) calling one C module.

Everything that is not a fused kernel (library calls, control flow, shape operations) is
rendered exactly as by the numpy backend; each kernel C can print becomes one statement
calling its C function, compiled with all the program's kernels into one shared object:

    b0 = np.empty((64, 1000), np.float32)
    _nk0(a0, a1, b0)                                    # model.py:3 (f)

`_nk0` is bound into the wrapper's globals: it passes the arrays' data pointers to the C
function (inputs made C-contiguous first). Consecutive kernel calls are one call of a C
function calling each kernel (`_Segment`, `NativeRenderer.merged`), with each array passed
once: `_ns0(a1, a2, a0)` for an optimizer's per-array updates (the timed variants that
`profile` runs keep one call per kernel). A kernel output is a planned buffer; an
elementwise output may take the buffer of an input it reads at the same index that dies
there (donated optimizer states update in place), then its pointers lose `restrict`.
Kernels C cannot print (complex numbers) stay numpy statements. A small `lu`,
`triangular_solve` or `cholesky` (`linalg.SMALL_MAX`, `linalg.LARGE_MAX`) is a call of a C
routine too (larger ones stay LAPACK through numpy), and so are `conv_general_dilated`
(`conv.py`: packing into numpy's BLAS gemm), the window operations (`windows.py`: pooling
and its gradients) and `scatter`/`scatter-add` (`shapes.AT_TOP_LEVEL`: an embedding's
gradient).
"""

import ctypes
import math
import re

import numpy as np

from funcgrad import errors
from funcgrad.backends.native import (
    build,
    conv,
    interrupt,
    linalg,
    loops,
    ops,
    shapes,
    threads,
    windows,
)
from funcgrad.backends.native.kernel import CKernel
from funcgrad.backends.numpy import emit
from funcgrad.backends.numpy import render as numpy_render
from funcgrad.backends.numpy.runtime import Executable, readonly
from funcgrad.compiler import memory
from funcgrad.core import Literal
from funcgrad.lax.control_flow import cond_p, scan_p, while_p

NATIVE_LOOPS = (while_p, scan_p, cond_p)  # C loops, and C branches for cond/switch
CONTIGUOUS_CONST_MAX = 1 << 24  # bytes: a broadcast constant up to this is made contiguous once
ROUTINES = {**linalg.ROUTINES, **windows.ROUTINES,  # C routines called at top level
            **shapes.AT_TOP_LEVEL, **conv.ROUTINES}


class _Kernel:
    """A kernel of the module: its C function, the wrapper's name for it, `restrict`."""

    def __init__(self, ckernel, pyname):
        self.c, self.pyname, self.restrict = ckernel, pyname, True

    def source(self):
        return self.c.source(self.restrict)

    def bind(self, lib):
        spec = self.c.spec
        operands = [(np.dtype(o.dtype), math.prod(o.shape))
                    for o in list(spec.inputs) + list(spec.outputs)]
        return _caller(getattr(lib, self.c.cname), operands, len(spec.inputs), spec.name)


class _CallLine(tuple):
    """The `(text, eqn)` line calling one C kernel, with what merging needs: the kernel
    and the argument texts (inputs, then outputs)."""

    def __new__(cls, text, eqn, kernel, args):
        line = super().__new__(cls, (text, eqn))
        line.kernel, line.args = kernel, args
        return line


class _Segment:
    """Consecutive kernels of the wrapper called as one C function (`fg_sN`): the
    distinct arrays they read or write are passed once, inputs first, and the function
    calls each kernel with its own pointers, in order. Saves a ctypes call and the checks
    of every repeated array per kernel (an Adam update over 7 arrays: 7 calls, 49 pointers
    -> 1 call, 28 pointers)."""

    def __init__(self, calls, cname, pyname):
        self.calls, self.cname, self.pyname = calls, cname, pyname
        written = {a for c in calls for a in c.args[len(c.kernel.c.spec.inputs):]}
        order = list(dict.fromkeys(a for c in calls for a in c.args))
        self.args = [a for a in order if a not in written] + [a for a in order if a in written]
        self.n_in = len(self.args) - len(written)
        self.operands = {}
        for c in calls:
            spec = c.kernel.c.spec
            for a, o in zip(c.args, list(spec.inputs) + list(spec.outputs)):
                self.operands.setdefault(a, set()).add((np.dtype(o.dtype), math.prod(o.shape)))

    def consistent(self):
        """Whether every array is read and written with one dtype and size."""
        return all(len(v) == 1 for v in self.operands.values())

    def line(self):
        return (f"{self.pyname}({', '.join(self.args)})", self.calls[0][1])

    def source(self):
        at = {a: k for k, a in enumerate(self.args)}
        params = [f"void *p{k}" for k in range(len(self.args))]
        params = ",\n        ".join(", ".join(params[k:k + 8]) for k in range(0, len(params), 8))
        names = ", ".join(c.kernel.c.cname for c in self.calls)
        lines = [f"/* segment {self.cname}: {names} in one call from Python */",
                 f"void {self.cname}({params}) {{"]
        for c in self.calls:
            casts = [f"({'const ' if role == 'in' else ''}{t} *)p{at[a]}"
                     for a, (role, _, t) in zip(c.args, c.kernel.c.params)]
            lines.append(f"    FG_UPPER_CLEAN(); {c.kernel.c.cname}({', '.join(casts)});")
        return "\n".join(lines + ["}"]) + "\n"

    def bind(self, lib):
        operands = [next(iter(self.operands[a])) for a in self.args]
        return _caller(getattr(lib, self.cname), operands, self.n_in, self.cname)


class _Loop:
    """A loop of the module (`loops.CLoop`) and the wrapper's name for it."""

    def __init__(self, cloop, pyname):
        self.c, self.pyname = cloop, pyname

    def source(self):
        return self.c.source()

    def bind(self, lib):
        fn = _caller(getattr(lib, self.c.cname), self.c.operands, self.c.n_in,
                     f"{self.c.eqn.prim.name} loop", status=True)
        consts = self.c.consts
        if not consts:
            return fn
        n = len(self.c.eqn.invars)
        return lambda *arrays: fn(*arrays[:n], *consts, *arrays[n:])


class _Routine:
    """A routine of the module (`linalg.py`, `windows.py`), called at top level."""

    def __init__(self, routine, pyname):
        self.c, self.pyname = routine, pyname

    def source(self):
        return self.c.source()

    def bind(self, lib):
        return _caller(getattr(lib, self.c.cname), self.c.operands, self.c.n_in,
                       self.c.eqn.prim.name, status=getattr(self.c, "status", False))


class NativeRenderer(numpy_render.Renderer):
    """The numpy renderer, with fused kernels as calls into C (see the module docstring)."""

    def __init__(self, program, donate_argnums=(), compile_subprogram=None):
        super().__init__(program, donate_argnums, chunking=False,
                         compile_subprogram=compile_subprogram)
        self.c_kernels = []
        self._segments = None  # `segments()`, once the blocks are filled
        self.polls = False  # whether the module's loops or kernels poll for Ctrl-C

    def build(self):
        """The numpy renderer's build, with each bound constant that is a broadcast view (as
        constant folding leaves `eye` and `tril` masks: strides 0) made contiguous once: C
        reads contiguous memory, and `_caller` would otherwise copy it on every call (six
        100x100 masks made one GP kernel 57 us instead of 11)."""
        super().build()
        for i in range(len(self.jaxpr.constvars)):
            c = self.ns.get(f"c{i}")
            if (isinstance(c, np.ndarray) and not c.flags.c_contiguous
                    and c.size * c.itemsize <= CONTIGUOUS_CONST_MAX):
                self.ns[f"c{i}"] = readonly(np.ascontiguousarray(c))
        return self

    def _kernel(self, node):
        try:
            ck = CKernel(node.spec, f"fg_k{len(self.c_kernels)}", node.eqns)
        except ops.Unsupported:
            return super()._kernel(node)
        k = _Kernel(ck, self.fresh_name("_nk"))
        self.ns[k.pyname] = None  # bound once the module is loaded
        self.c_kernels.append(k)
        spec, S = node.spec, tuple(node.spec.iter_shape)
        ins = [v for v in node.inputs if type(v) is not Literal]
        defs, inplace = [], {}
        for o, var in zip(spec.outputs, node.outputs):
            kind = memory.ANY_BUFFER if o.reduce is None else memory.FREE_BUFFER
            defs.append(self.value(var, o.shape, o.dtype, kind))
            if o.reduce is None:
                inplace[var] = self._overwritable(node, o, S)
        eqn = (node.eqns or node.out_eqns)[0]

        def lines():
            out, names = [], []
            for d in defs:
                if d.kind == memory.SCALAR:
                    names.append(self.name_of(d.key))
                    out.append(f"{names[-1]} = np.empty((), np.{d.dtype.name})")
                else:
                    name, alloc = self.planned_buffer(d.key, d.shape, d.dtype)
                    names.append(name)
                    out += alloc
            slots = [self.plan.slots.get(d.key) for d in defs]
            k.restrict = not any(s is not None and s.action == "inplace" for s in slots)
            args = [self.read(a) for a in node.inputs] + names
            out.append(_CallLine(f"{k.pyname}({', '.join(args)})", eqn, k, args))
            return out
        self.add_step(defs, ins, lines, spec.name, eqn, inplace)

    def _call(self, eqn):
        if eqn.prim in NATIVE_LOOPS:
            try:
                loop = loops.CLoop(f"fg_loop{len(self.c_kernels)}", eqn,
                                   self.compile_executable)
            except (loops.NotNative, ops.Unsupported):
                loop = None
            if loop is not None:
                return self._c_call(_Loop(loop, self.fresh_name("_nl")), eqn)
        if eqn.prim in ROUTINES:
            try:
                routine = ROUTINES[eqn.prim](eqn, f"fg_la{len(self.c_kernels)}")
            except ops.Unsupported:
                routine = None
            if routine is not None:
                return self._c_call(_Routine(routine, self.fresh_name("_nla")), eqn)
        return super()._call(eqn)

    def _c_call(self, k, eqn):
        """`eqn` as one call of the C function of `k` (a loop or a linalg routine)."""
        self.ns[k.pyname] = None  # bound once the module is loaded
        self.c_kernels.append(k)
        defs = [self.value(v, v.aval.shape, v.aval.dtype, memory.FREE_BUFFER)
                for v in eqn.outvars]
        ins = [v for v in eqn.invars if type(v) is not Literal]

        def lines():
            out, names = [], []
            for d in defs:
                if d.kind == memory.SCALAR:
                    names.append(self.name_of(d.key))
                    out.append(f"{names[-1]} = np.empty((), np.{d.dtype.name})")
                else:
                    name, alloc = self.planned_buffer(d.key, d.shape, d.dtype)
                    names.append(name)
                    out += alloc
            args = [self.read(a) for a in eqn.invars] + names
            out.append((f"{k.pyname}({', '.join(args)})", eqn))
            return out
        self.add_step(defs, ins, lines, eqn.prim.name, eqn)

    def _overwritable(self, node, out, S):
        """The inputs whose buffer elementwise output `out` may take: read once, at the
        output's own index, with its dtype, sharing memory with no other input."""
        direct = tuple(range(len(S)))
        reach = {v: {v} | self.reach(v) for v in node.inputs if type(v) is not Literal}
        found = []
        for inp, var in zip(node.spec.inputs, node.inputs):
            if (type(var) is Literal or node.inputs.count(var) != 1 or inp.shape != S
                    or inp.axes != direct or inp.dtype != out.dtype):
                continue
            if all(not (reach[var] & r) for u, r in reach.items() if u is not var):
                found.append(var)
        return found

    def merged(self, bodies):
        """Each run of consecutive kernel calls (`segments`) as one call of its segment, in
        the run's first block: the run's allocations first, then the call, then its `del`."""
        bodies = list(bodies)
        for first, n, seg in self.segments():
            run = bodies[first:first + n]
            calls = [ln for b in run for ln in b if isinstance(ln, _CallLine)]
            if [c.kernel for c in calls] != [c.kernel for c in seg.calls]:
                raise errors.FuncgradInternalError(
                    f"native segment {seg.cname}: its blocks changed since it was planned")
            bodies[first] = ([ln for b in run for ln in b if emit.allocated_name(ln[0])]
                             + [seg.line()]
                             + [ln for b in run for ln in b if ln[0].startswith("del ")])
            bodies[first + 1:first + n] = [[] for _ in range(n - 1)]
        return bodies

    def segments(self):
        """(first block, blocks, `_Segment`) per run of two or more consecutive blocks that
        each allocate their outputs, call one C kernel and may end with a `del`: their
        allocations can go first when they bind no name the run used before, and a `del`
        ends a run (a later block may bind the name again)."""
        if self._segments is not None:
            return self._segments
        runs, run, used = [], [], set()  # used: the names the run's lines mention

        def close():
            if len(run) > 1:
                runs.append(list(run))
            run.clear()
        for i in range(len(self.blocks)):
            body = self.body(i)
            calls = [ln for ln in body if isinstance(ln, _CallLine)]
            allocs = [ln for ln in body if emit.allocated_name(ln[0])]
            dels = [ln for ln in body if ln[0].startswith("del ")]
            if (len(calls) != 1 or len(allocs) + len(dels) + 1 != len(body)
                    or body[len(allocs)] is not calls[0]):
                close()
                continue
            bound = {emit.allocated_name(ln[0]) for ln in allocs}
            if bound & used:
                close()
            if not run:
                used = set()
            run.append((i, calls[0], allocs))
            used |= bound | set(_NAME.findall(calls[0][0]))
            if dels:
                close()
        close()
        self._segments = []
        for r in runs:
            seg = _Segment([c for _, c, _ in r], f"fg_s{len(self._segments)}",
                           self.fresh_name("_ns"))
            if seg.consistent():
                self.ns[seg.pyname] = None  # bound once the module is loaded
                self._segments.append((r[0][0], len(r), seg))
        return self._segments

    def c_source(self):
        segments = [seg for _, _, seg in self.segments()]
        self.c_kernels += [seg for seg in segments if seg not in self.c_kernels]
        loops_here = any(isinstance(k, _Loop) for k in self.c_kernels)
        body = "".join("\n" + k.source() for k in self.c_kernels)
        parallel = "fg_parallel(" in body  # kernels whose blocks run on the thread pool
        self.polls = loops_here or parallel  # they stop on Ctrl-C (interrupt.py)
        head = ops.PRELUDE + ("#include <stdlib.h>\n" + interrupt.HEADER if loops_here else "")
        if "fg_sgemm(" in body or "fg_dgemm(" in body:  # loops that call BLAS (loops.SmallDot)
            head += loops.GEMM_HEADER
        if parallel:
            head += threads.MODULE_HEADER
        return head + body

    def bind(self, lib):
        for k in self.c_kernels:
            self.ns[k.pyname] = k.bind(lib)


_addressof, _from_buffer = ctypes.addressof, ctypes.c_char.from_buffer
_NAME = re.compile(r"[A-Za-z_]\w*")


def _caller(fn, operands, n_in, what, status=False):
    """The Python callable of one C function: checks each array's dtype and size against
    `operands` ((dtype, size) per pointer; a pointer to the wrong memory must never reach
    C) and makes the `n_in` inputs C-contiguous; with `status`, the C function returns 1
    when it could not allocate its temporaries, `FG_INTERRUPTED` when Ctrl-C stopped it
    (Python's handler then raises; when it does not, the call runs again)."""
    fn.argtypes = [ctypes.c_void_p] * len(operands)
    fn.restype = ctypes.c_int if status else None

    operands = [(np.dtype(dt), size) for dt, size in operands]

    def checked(arrays):
        ptrs, keep = [], []
        for k, (a, (dt, size)) in enumerate(zip(arrays, operands)):
            if type(a) is not np.ndarray or a.dtype != dt or not a.flags.c_contiguous:
                if k >= n_in:
                    raise errors.FuncgradInternalError(
                        f"native {what}: output {k - n_in} is not a C-contiguous {dt} array")
                a = np.ascontiguousarray(a, dt)
                keep.append(a)
            if a.size != size:
                raise errors.FuncgradInternalError(
                    f"native {what}: operand {k} has {a.size} elements, the C function was "
                    f"compiled for {size}")
            ptrs.append(a.ctypes.data)
        return fn(*ptrs)

    def call(*arrays):
        ptrs = []
        for a, (dt, size) in zip(arrays, operands):  # the common case, checked cheaply
            if (type(a) is not np.ndarray or a.dtype is not dt or a.size != size
                    or not a.flags.c_contiguous):
                ptrs = None
                break
            try:  # 4x faster than a.ctypes.data, for writable non-empty arrays
                ptrs.append(_addressof(_from_buffer(a)))
            except (TypeError, ValueError):  # read-only or empty
                ptrs.append(a.ctypes.data)
        done = checked(arrays) if ptrs is None else fn(*ptrs)
        while done == interrupt.FG_INTERRUPTED:
            interrupt.checked_status()
            done = checked(arrays) if ptrs is None else fn(*ptrs)
        if done:
            raise MemoryError(f"native {what}: could not allocate its temporaries")
    return call


class NativeExecutable(Executable):
    """An `Executable` whose kernels run in C: `as_text()` shows the Python wrapper and
    the C module, `c_source()` the C module alone."""

    def __init__(self, *args, c_source, **kw):
        super().__init__(*args, **kw)
        self._c_source = c_source

    def as_text(self):
        return (self._source + "\n# ---- C module (native backend) ----\n" + self._c_source)

    def c_source(self):
        """The C module of this program's kernels."""
        return self._c_source


def compile_native(program, donate_argnums=(), ir=None, compile_subprogram=None, cc=None):
    """`program` rendered as a Python wrapper around one C module; None when no kernel of
    it is printable in C (the numpy backend then serves it as it is)."""
    cc = cc or build.compiler()
    r = NativeRenderer(program, donate_argnums, compile_subprogram).build()
    if not r.c_kernels:
        return None
    c_src = r.c_source()
    if r.polls:  # the Ctrl-C runtime builds beside the module (an empty cache: interrupt.py)
        interrupt.prepare(cc)
    r.bind(build.load(c_src, cc))
    n = next(numpy_render._program_ids)
    functions = [k for k in r.c_kernels if not isinstance(k, _Segment)]
    header = (f"# funcgrad jit program {n} (native): {len(program.jaxpr.invars)} inputs, "
              f"{len(program.jaxpr.outvars)} outputs, {len(functions)} C kernels, "
              f"{len(program.nodes) - len(program.kernels)} calls\n")
    fn, src, filename, spans, line_eqns, profiled, instrumented = numpy_render.load_program(
        r, n, header)
    exe = NativeExecutable(fn, src, filename, ir, r.plan.analysis, spans, line_eqns,
                           profiled, instrumented, c_source=c_src)
    exe.program, exe.buffers = program, numpy_render.buffer_table(r)
    return exe
