"""A fused `Program` as one C function, called once from a thin Python wrapper.

Every operation with a C form (`coverage.py`: fused kernels, views, `np.matmul`'s BLAS calls,
linear algebra, shape and indexing routines, loops and branches) becomes a statement of a C
function (`steps.py`); the program's temporaries live in one workspace laid out by the
memory plan (`compiler.memory.pack` over the buffers' lifetimes), kept between calls; its
results are allocated by the wrapper and written by C. A program whose operations all have
a C form is one call into C:

    def fg_jit_3(a0, a1, a2):
        _w = _ws.take()                                # the temporaries (one block)
        b4 = np.empty((7,), np.float32)                # the results, written by C
        s0 = np.empty((), np.float32)
        _fg0(a0, a1, a2, b4, s0, _w.ptr, 0)            # statements 0-41 of the program
        _ws.give(_w)
        return [np.asarray(s0), b4.reshape(1, 7)]

An operation without a C form runs as the numpy backend's statement between two C calls
(`NativeExecutable.python_ops` lists them, with the reason), each run of C statements one
call (a `cprogram.Segment`). The C functions of the statements (kernels, routines, loops) and
the segments' functions are one module, compiled once per program (loop bodies are rendered
inside their loops from the pipeline's fused sub-programs, never compiled apart).
"""

import itertools
import math

import numpy as np

from funcgrad.backends.native import (
    blas,
    build,
    cnode,
    coverage,
    interrupt,
    loops,
    ops,
    steps,
    wrapper,
)
from funcgrad.backends.native.kernel import CKernel
from funcgrad.backends.native.matmul import Matmul
from funcgrad.backends.native.views import View
from funcgrad.backends.numpy import emit
from funcgrad.backends.numpy import render as numpy_render
from funcgrad.backends.numpy.runtime import Executable, readonly
from funcgrad.compiler import memory
from funcgrad.core import Literal

CONTIGUOUS_CONST_MAX = 1 << 24  # bytes: a broadcast constant up to this is made contiguous once


class Bound:
    """An array bound into the program once (a literal operand, a loop's constant): C gets
    its address."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = readonly(np.ascontiguousarray(array))


class Temp:
    """The key of a value the renderer adds (a view copied contiguous for C)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Temp({self.name})"


class NativeRenderer(numpy_render.Renderer):
    """The numpy renderer's plan and Python statements, with every operation that has a C
    form as a C statement (see the module docstring)."""

    workspace_min_bytes = 0  # every temporary of C lives in the workspace,
    pack_workspace = True  # one block laid out by the buffers' lifetimes

    def __init__(self, program, donate_argnums=(), compile_subprogram=None):
        super().__init__(program, donate_argnums, chunking=False,
                         compile_subprogram=compile_subprogram)
        self.cviews = {}  # key -> (root key, View, eqn): views C reads in place
        self.python_ops = []  # (primitive, reason) of the operations left to Python
        self._ids = itertools.count()
        self.segments = None  # the C segments, once built (`_build_segments`)

    def cname(self, prefix):
        return f"{prefix}{next(self._ids)}"

    def build(self):
        """The numpy renderer's build (this class's `_kernel`/`_call` choose C or Python),
        with each bound constant that is a broadcast view (as constant folding leaves `eye`
        and `tril` masks) made contiguous once: C reads contiguous memory."""
        super().build()
        for i in range(len(self.jaxpr.constvars)):
            c = self.ns.get(f"c{i}")
            if (isinstance(c, np.ndarray) and not c.flags.c_contiguous
                    and c.size * c.itemsize <= CONTIGUOUS_CONST_MAX):
                self.ns[f"c{i}"] = readonly(np.ascontiguousarray(c))
        return self

    # --- values as C reads them ---------------------------------------------------------

    def aval_of(self, key):
        if isinstance(key, Bound):
            return key.array.shape, key.array.dtype
        v = self.values[key]
        return v.shape, v.dtype

    def layout(self, key):
        """(root key, `View` of the root's buffer) of value `key`."""
        if key in self.cviews:
            root, view, _ = self.cviews[key]
            return root, view
        return key, View.contiguous(*self.aval_of(key))

    def c_operand(self, atom, eqn=None):
        """The key C reads operand `atom` through, contiguous: a bound array for a literal,
        a contiguous copy of a view C cannot read in place."""
        if type(atom) is Literal:
            return Bound(np.asarray(atom.val, atom.aval.dtype))
        root, view = self.layout(atom)
        if atom in self.cviews and not view.is_contiguous():
            return self.copy_view(root, view, [atom], eqn)
        return atom

    def copy_view(self, root, view, uses, eqn):
        """A C statement copying `view` of `root` into a new contiguous value; its key."""
        key = Temp(self.cname("copy"))
        d = self.value(key, view.shape, view.dtype, memory.FREE_BUFFER)
        step = steps.CopyStep(root, view, key, ops.storage(view.dtype.name))
        self.c_step(step, [d], uses, "copy", eqn)
        return key

    def c_step(self, step, defs, uses, label, eqn, inplace=()):
        self.add_step(defs, [u for u in uses if type(u) is not Literal
                             and not isinstance(u, Bound)], lambda: [], label, eqn, inplace)
        self.blocks[-1].cstep = step

    def python(self, prim, reason):
        self.python_ops.append((prim, str(reason)))

    # --- kernels ---------------------------------------------------------------------------

    def _kernel(self, node):
        try:
            ck = CKernel(node.spec, self.cname("fg_k"), node.eqns)
        except ops.Unsupported as e:
            self.python("kernel " + node.spec.name, e)
            return super()._kernel(node)
        eqn = (node.eqns or node.out_eqns)[0]
        ins = [self.c_operand(a, eqn) for a in node.inputs]
        spec, S = node.spec, tuple(node.spec.iter_shape)
        defs, inplace = [], {}
        for o, var in zip(spec.outputs, node.outputs):
            kind = memory.ANY_BUFFER if o.reduce is None else memory.FREE_BUFFER
            defs.append(self.value(var, o.shape, o.dtype, kind))
            if o.reduce is None:
                inplace[var] = [v for v in self._overwritable(node, o, S) if v in ins]
        self.c_step(steps.KernelStep(ck, ins, node.outputs), defs, ins, spec.name, eqn,
                    inplace)

    def _overwritable(self, node, out, S):
        """The inputs whose buffer elementwise output `out` may take: read once, at the
        output's own index, with its dtype, sharing memory with no other input."""
        direct = tuple(range(len(S)))
        reach = {v: {v} | self.reach(v) for v in node.inputs if type(v) is not Literal}
        found = []
        for inp, var in zip(node.spec.inputs, node.inputs):
            if (type(var) is Literal or node.inputs.count(var) != 1 or inp.shape != S
                    or inp.axes != direct or inp.dtype != out.dtype or var in self.cviews):
                continue
            if all(not (reach[var] & r) for u, r in reach.items() if u is not var):
                found.append(var)
        return found

    # --- calls -----------------------------------------------------------------------------

    def _call(self, eqn):
        form, detail = coverage.form(eqn.prim)
        try:
            if form == coverage.VIEW and self._view(eqn, detail):
                return
            if form == coverage.MATMUL and self._matmul(eqn):
                return
            if form == coverage.ROUTINE:
                return self._routine(eqn, detail)
            if form == coverage.LOOP:
                return self._loop(eqn)
        except (ops.Unsupported, loops.NotNative) as e:
            detail = e
        self.python(eqn.prim.name, detail)
        super()._call(eqn)

    def _view(self, eqn, kind):
        x, out = eqn.invars[0], eqn.outvars[0]
        src = Bound(np.asarray(x.val, x.aval.dtype)) if type(x) is Literal else x
        root, view = self.layout(src)
        new = self._viewed(eqn, kind, view)
        if new is None:  # numpy copies here (a reshape of a strided view): so does C
            src = root = self.copy_view(root, view, [x], eqn)
            view = View.contiguous(view.shape, view.dtype)
            new = self._viewed(eqn, kind, view)
        uses = [] if isinstance(src, Bound) else [src]
        d = self.value(out, out.aval.shape, out.aval.dtype, memory.VIEW, uses)
        self.cviews[out] = (root, new, (eqn, src))
        self.add_step([d], uses, lambda: [], eqn.prim.name, eqn)
        self.blocks[-1].view = True
        return True

    @staticmethod
    def _viewed(eqn, kind, view):
        """`view` through the view equation `eqn` as the numpy backend takes it (None where
        numpy copies)."""
        p, out = eqn.params, eqn.outvars[0].aval
        if kind == "reshape":
            return view.reshape(out.shape)
        if kind == "transpose":
            return view.transpose(p["permutation"])
        if kind == "slice":
            return view.slice(p["start_indices"], p["limit_indices"], p["strides"])
        if kind == "flip":
            return view.flip(tuple(p["dimensions"]))
        dims, x = p["broadcast_dimensions"], eqn.invars[0].aval  # numpy ops._broadcast_in_dim
        n = len(out.shape)
        if tuple(dims) != tuple(range(n - x.ndim, n)) and x.ndim:
            expanded = [1] * (n - dims[0])
            for i, d in enumerate(dims):
                expanded[d - dims[0]] = x.shape[i]
            view = view.reshape(expanded)
            if view is None:
                return None
        return view.broadcast(out.shape)

    def _view_text(self, key):
        """The numpy expression of C view `key` for a Python statement or a result: the
        numpy backend's view of the operand (or of its contiguous copy, where C made one)."""
        _, _, (eqn, src) = self.cviews[key]
        x = self.name_of(src) if isinstance(src, Temp) else self.read(eqn.invars[0])
        p = eqn.params
        if eqn.prim is coverage.lax.slice_p:
            st = p["strides"] or (1,) * len(p["start_indices"])
            return f"{x}[{', '.join(f'{a}:{b}:{s}' for a, b, s in zip(p['start_indices'], p['limit_indices'], st))},]"  # noqa: E501
        if eqn.prim is coverage.lax.rev_p:
            return f"np.flip({x}, {tuple(p['dimensions'])})"
        expr, _ = emit.call_rule(self, eqn)
        return expr.format(x, out="")

    def name_of(self, key):
        if key in self.cviews and self.plan is not None:
            return self._view_text(key)
        return super().name_of(key)

    def _release_name(self, rel):
        kind, x = rel
        if kind == "value" and x in self.cviews:
            return None
        return super()._release_name(rel)

    def _matmul(self, eqn):
        """`dot_general` as the numpy backend's `np.matmul` (`numpy/ops.py`), in C: False
        where the numpy backend makes a library call of it."""
        found = emit.call_rule(self, eqn)
        if found is None:
            return False
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        x, y = eqn.invars
        out = eqn.outvars[0]
        dt = np.dtype(out.aval.dtype)
        if dt.name not in ("float32", "float64") or not blas.functions():
            raise ops.Unsupported(f"dot_general of {dt.name} in C (numpy's own loop)")
        lf = [i for i in range(x.aval.ndim) if i not in lc and i not in lb]
        rf = [i for i in range(y.aval.ndim) if i not in rc and i not in rb]
        if len(lb) > 1:
            raise ops.Unsupported("dot_general with several batch axes")
        a_root, a, a_use = self._matmul_operand(x, lb, lf, lc, eqn)
        b_root, b, b_use = self._matmul_operand(y, rb, rc, rf, eqn)
        mm = Matmul(a, b, dt, self.cname("fg_mm"))
        d = self.value(out, out.aval.shape, dt, memory.FREE_BUFFER)
        step = steps.MatmulStep(mm, (a_root, a.offset), (b_root, b.offset), out)
        self.c_step(step, [d], [a_use, b_use], "dot_general", eqn)
        return True

    def _matmul_operand(self, x, batch, first, second, eqn):
        """(root key, View, the key the product reads) of operand `x` as
        `numpy/ops._matmul_operand` hands it to np.matmul: transposed to (batch, first,
        second), then reshaped to 2 or 3 axes (a copy where numpy copies)."""
        use = Bound(np.asarray(x.val, x.aval.dtype)) if type(x) is Literal else x
        root, view = self.layout(use)
        perm = tuple(batch) + tuple(first) + tuple(second)
        if perm != tuple(range(len(perm))):
            view = view.transpose(perm)
        if len(batch) <= 1 and len(first) == 1 and len(second) == 1:
            return root, view, use
        size = lambda axes: math.prod(x.aval.shape[a] for a in axes)  # noqa: E731
        flat = ((size(batch),) if batch else ()) + (size(first), size(second))
        new = view.reshape(flat)
        if new is None:  # numpy copies the transposed operand
            use = root = self.copy_view(root, view, [use], eqn)
            new = View.contiguous(view.shape, view.dtype).reshape(flat)
        return root, new, use

    def _routine(self, eqn, cls):
        routine = cls(eqn, self.cname("fg_la"))
        ins = [self.c_operand(a, eqn) for a in eqn.invars]
        defs = [self.value(v, v.aval.shape, v.aval.dtype, memory.FREE_BUFFER)
                for v in eqn.outvars]
        self.c_step(steps.RoutineStep(routine, ins, eqn.outvars), defs, ins,
                    eqn.prim.name, eqn)

    def _loop(self, eqn):
        cloop = loops.CLoop(self.cname("fg_loop"), eqn, self.body_program)
        consts = [Bound(c) for c in cloop.consts]
        ins = [self.c_operand(a, eqn) for a in eqn.invars]
        defs = [self.value(v, v.aval.shape, v.aval.dtype, memory.FREE_BUFFER)
                for v in eqn.outvars]
        self.c_step(steps.LoopStep(cloop, ins, consts, eqn.outvars), defs, ins,
                    eqn.prim.name, eqn)

    def body_program(self, closed):
        """A loop or branch body (a ClosedJaxpr) optimized and fused by the pipeline's
        callback (`.fused`), so it is rendered inside its loop and compiled with the
        program; a callback without it compiles the body and gives its program."""
        fused = getattr(self._compile, "fused", None)
        if fused is not None:
            return fused(closed)
        program = getattr(self.compile_executable(closed), "program", None)
        if program is None:
            raise loops.NotNative("the body did not compile natively")
        return program

    # --- the program: C segments between Python statements -------------------------------

    def groups(self):
        """[("c", block indices) | ("py", [index])]: runs of C statements (view blocks,
        which print nothing, inside them) and the Python blocks between."""
        out, run = [], []
        for i, b in enumerate(self.blocks):
            if getattr(b, "cstep", None) is not None or (getattr(b, "view", False) and run):
                run.append(i)
                continue
            if run:
                out.append(("c", run))
                run = []
            out.append(("view" if getattr(b, "view", False) else "py", [i]))
        if run:
            out.append(("c", run))
        return out

    def build_segments(self):
        """The C segments (`cprogram.Segment`s, in program order) and the workspace
        layout (`ws_layout`), once."""
        if self.segments is not None:
            return self.segments
        self.ws_layout = wrapper.Layout(self)
        self.segments, first = [], 0
        for kind, idx in self.groups():
            if kind != "c":
                continue
            run = [self.blocks[i] for i in idx if getattr(self.blocks[i], "cstep", None)]
            n = len(self.segments)
            self.segments.append(self.ws_layout.segment(f"fg_run{n}", f"_fg{n}", run, first))
            first += len(run)
        return self.segments

    def source(self, fn_name, profile=False):
        return wrapper.source(self, fn_name, profile)

    def make_workspace(self):
        self.build_segments()
        return self.ws_layout.workspace()

    def c_source(self):
        """The C module: every statement's functions, then each segment's function."""
        functions = []
        for seg in self.build_segments():
            for step in seg.steps:
                if isinstance(step, steps.KernelStep):
                    step.restrict = not any(
                        getattr(self.plan.slots.get(k), "action", None) == "inplace"
                        for k in step.outs)
                functions += step.functions()
            functions.append(seg.function())
        module = cnode.Module(functions, ops.PRELUDE)
        self.polls = interrupt.INTERRUPT in module.pieces()  # loops, pool kernels: Ctrl-C
        return module.source()

    def bind(self, lib):
        """Bind each segment's caller (and the profile's helpers) into the wrapper's
        globals (`build.load` handed the module its BLAS, pool and Ctrl-C count)."""
        for seg in self.segments:
            self.ns[seg.pyname] = seg.caller(lib)
        self.ns["_cacc"], self.ns["_crec"] = wrapper.c_accumulate, wrapper.c_record


class NativeExecutable(Executable):
    """An `Executable` whose operations run in C: `as_text()` shows the Python wrapper and
    the C module, `c_source()` the C module alone; `c_calls` is the number of calls into C
    a run makes, `python_ops` the operations left to Python ((primitive, reason))."""

    def __init__(self, *args, c_source, c_calls=0, python_ops=(), **kw):
        super().__init__(*args, **kw)
        self._c_source = c_source
        self.c_calls, self.python_ops = c_calls, list(python_ops)

    def as_text(self):
        return (self._source + "\n# ---- C module (native backend) ----\n" + self._c_source)

    def c_source(self):
        """The C module of this program."""
        return self._c_source


def compile_native(program, donate_argnums=(), ir=None, compile_subprogram=None, cc=None):
    """`program` rendered as one C module called from a Python wrapper; None when no
    operation of it has a C form (the numpy backend then serves it as it is)."""
    cc = cc or build.compiler()
    r = NativeRenderer(program, donate_argnums, compile_subprogram).build()
    if not any(getattr(b, "cstep", None) for b in r.blocks):
        return None
    c_src = r.c_source()
    if r.polls:  # the Ctrl-C runtime builds beside the module (an empty cache: interrupt.py)
        interrupt.prepare(cc)
    r.bind(build.load(c_src, cc))
    n = next(numpy_render._program_ids)
    header = (f"# funcgrad jit program {n} (native): {len(program.jaxpr.invars)} inputs, "
              f"{len(program.jaxpr.outvars)} outputs, {len(r.segments)} call(s) into C"
              f"{', ' + str(len(r.python_ops)) + ' operation(s) in Python' if r.python_ops else ''}"
              "\n")
    fn, src, filename, spans, line_eqns, profiled, instrumented = numpy_render.load_program(
        r, n, header)
    exe = NativeExecutable(fn, src, filename, ir, r.plan.analysis, spans, line_eqns,
                           profiled, instrumented, c_source=c_src, c_calls=len(r.segments),
                           python_ops=r.python_ops)
    exe.program, exe.buffers = program, numpy_render.buffer_table(r)
    return exe
