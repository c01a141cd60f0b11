"""The numpy renderer: a fused `Program` becomes ONE readable Python function.

One loop walks the program's nodes; each kernel instruction, reduction and call becomes one
statement (written by `emit.py` from the tables of `ops.py`), commented with the user's
source line. Buffers come from the liveness plan of `funcgrad.compiler.memory`: elementwise
chains write with `out=` into reused buffers (in place when an operand dies), matmuls go to
BLAS through `np.matmul`, dead buffers are dropped with `del`. Primitives in no table are
library calls to their eager implementation, bound as constants of the generated function.
Large kernels become loops over row chunks (`chunked.py`).

Higher-order primitives (a `jit` call that was not inlined, cond/while/scan, collectives)
render through `higher_order_rules`, keyed by primitive object (primitives declaring
`calls_body` render as a call of their body):

    def rule(r, eqn) -> list[str]      # statements, without the function's indentation
        sub = r.compile_subprogram(eqn.params["jaxpr"])   # bound name of an Executable
        outs = r.output_names(eqn)                        # names the statements must assign
        args = [r.read(a) for a in eqn.invars]            # expressions of the operands
        return [f"{', '.join(outs)}, = {sub}({', '.join(args)})"]

Sub-programs compile through the `compile_subprogram` callback the pipeline passes to
`compile_program` (this backend imports no compiler pass). A rule may emit any statements
(an `if`/`else`, a `while` loop around compiled bodies...); its outputs are treated as
arrays that may alias its operands, unless the rule has a `plan(eqn) -> (kind, inplace)`
attribute giving them another memory kind (e.g. `memory.ANY_BUFFER`: a planned buffer,
possibly the buffer of a dying operand in `inplace`; see `funcgrad.compiler.memory`), as
the collectives in `collectives.py` do.
"""

import itertools
import math

import numpy as np

from funcgrad import errors
from funcgrad.backends.numpy import chunked, emit, ops
from funcgrad.backends.numpy.runtime import (
    Executable,
    Workspace,
    clock,
    own,
    readonly,
    register_source,
    unalias,
)
from funcgrad.compiler import escape, memory
from funcgrad.compiler.fusion import KernelNode
from funcgrad.core import Literal

higher_order_rules = {}

_program_ids = itertools.count(1)
_COMMENT_COLUMN = 52
WORKSPACE_MIN_BYTES = 1 << 17  # smaller temporaries come cheaply from malloc on each call


def _call_rule(r, eqn):
    sub = r.compile_subprogram(eqn.params["jaxpr"])
    outs = r.output_names(eqn)
    args = ", ".join(r.read(a) for a in eqn.invars)
    return [f"{', '.join(outs)}, = {sub}({args})"]




class _Block:
    """The statements of one step, filled in after memory planning: `lines` are
    `(text, eqn)` pairs (eqn None for lines without a source comment)."""

    def __init__(self, step, emit, label, eqn):
        self.step, self.emit, self.label, self.eqn = step, emit, label, eqn
        self.lines = []
        self.node = None  # the program node (kernel or call) it belongs to: a profiling site

    def fill(self):
        lines = [ln if isinstance(ln, tuple) else (ln, None) for ln in self.emit()]
        if lines and self.eqn is not None and all(e is None for _, e in lines):
            lines[0] = (lines[0][0], self.eqn)
        self.lines = lines


def _src_comment(eqn):
    """`file.py:12 (fn)`: the user's line that the equation was traced from (escaped)."""
    return escape.source_location(eqn.source, eqn.prim.name)


class Renderer:
    """Renders one `Program` into Python source plus the namespace it runs in."""

    workspace_min_bytes = WORKSPACE_MIN_BYTES  # temporaries from this size on are kept
    pack_workspace = False  # the kept temporaries as separate arrays (memory.pack: one block)

    def __init__(self, program, donate_argnums=(), chunking=True, workspace=True,
                 compile_subprogram=None):
        self.program = program
        self._compile = compile_subprogram
        self.chunking = chunking
        self.persistent = workspace
        self.workspace = []  # (name, shape, dtype) of the buffers kept between calls
        self.jaxpr = program.jaxpr
        self.ns = {"np": np, "_own": own, "_unalias": unalias}
        self.donated = {self.jaxpr.invars[i] for i in donate_argnums
                        if i < len(self.jaxpr.invars)}
        self.blocks, self.names, self.values = [], {}, {}
        self._counts = {}
        self.plan = None
        self.children = []  # the compiled sub-programs bound into the generated function

    # --- helpers for rules ---------------------------------------------------------------

    def fresh_name(self, prefix):
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}{n}"

    def constant(self, obj, prefix="k"):
        """Bind `obj` into the generated function's globals; returns its name."""
        name = self.fresh_name(prefix)
        self.ns[name] = obj
        return name

    def read(self, atom):
        """The expression of an IR atom (variable or literal) at this point of the program."""
        if type(atom) is Literal:
            return self.constant(readonly(np.asarray(atom.val, atom.aval.dtype)), "l")
        return self.name_of(atom)

    def name_of(self, key):
        slot = self.plan.slots.get(key) if self.plan else None
        if slot is not None and slot.buffer is not None:
            return self.buffer_names[slot.buffer]
        if key not in self.names:
            v = self.values[key]
            self.names[key] = self.fresh_name("s" if v.kind == memory.SCALAR else "v")
        return self.names[key]

    def planned_buffer(self, key, shape, dtype):
        """(name, allocation lines) of the buffer value `key` is written into: the buffer the
        plan gave it, or a new one."""
        name, slot = self.name_of(key), self.plan.slots.get(key)
        return name, [] if slot is not None and slot.existing else [
            emit.allocate(name, shape, dtype)]

    def output_names(self, eqn):
        return [self.name_of(v) for v in eqn.outvars]

    def scratch(self, shape, dtype, prefix="t"):
        """A named scratch buffer (e.g. a chunk buffer): from the workspace when it is large,
        else allocated on each call; returns (name, allocation lines)."""
        name = self.fresh_name(prefix)
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if self.persistent and nbytes >= WORKSPACE_MIN_BYTES:
            self.workspace.append((name, tuple(shape), np.dtype(dtype)))
            self.plan.analysis.workspace_bytes += nbytes
            return name, []
        return name, [emit.allocate(name, shape, dtype)]

    def compile_executable(self, closed):
        """A sub-program (a ClosedJaxpr) compiled into an `Executable` by the callback the
        pipeline gave `compile_program`."""
        if self._compile is None:
            raise errors.FuncgradInternalError(
                "this program calls a sub-program, but compile_program was given no "
                "compile_subprogram callback to compile it with")
        exe = self._compile(closed)
        self.children.append(exe)
        return exe

    def compile_subprogram(self, closed):
        """Compile a sub-program (a ClosedJaxpr) and bind its Executable; returns its name."""
        return self.constant(self.compile_executable(closed), "call")

    # --- building steps ------------------------------------------------------------------

    def value(self, key, shape, dtype, kind, aliases=()):
        """Declare value `key` of memory `kind` (rank-0 results of numpy calls are numpy
        scalars, never written into a buffer)."""
        if tuple(shape) == () and kind in memory.OWNING:
            kind = memory.SCALAR
        v = memory.Value(key, tuple(shape), np.dtype(dtype), kind, tuple(aliases))
        self.values[key] = v
        return v

    def add_step(self, defs, uses, lines, label, eqn, inplace=()):
        """One step of the memory plan; `lines()` gives its statements once the plan is
        made (see `_Block`)."""
        inplace = inplace if isinstance(inplace, dict) else tuple(inplace)
        step = memory.Step(defs, [u for u in uses if u is not None], inplace)
        self.blocks.append(_Block(step, lines, label, eqn))

    def build(self):
        j = self.jaxpr
        args = [self.value(v, v.aval.shape, v.aval.dtype, memory.ARG) for v in j.invars]
        consts = [self.value(v, v.aval.shape, v.aval.dtype, memory.CONST) for v in j.constvars]
        for i, v in enumerate(j.invars):
            self.names[v] = f"a{i}"
        for i, (v, c) in enumerate(zip(j.constvars, self.program.consts)):
            self.names[v] = f"c{i}"
            self.ns[f"c{i}"] = readonly(getattr(c, "_value", c))
        for node in self.program.nodes:
            first = len(self.blocks)
            if isinstance(node, KernelNode):
                self._kernel(node)
            else:
                self._call(node.eqn)
            for block in self.blocks[first:]:
                block.node = node
        outs = [v for v in j.outvars if type(v) is not Literal]
        self.used = set(outs).union(*[b.step.uses for b in self.blocks])
        self.plan = memory.plan_memory([b.step for b in self.blocks], args, consts, outs,
                                       self.donated,
                                       self.workspace_min_bytes if self.persistent else None,
                                       self.pack_workspace)
        self.buffer_names = [f"b{i}" for i in range(len(self.plan.buffers))]
        arg_index = {id(v): i for i, v in enumerate(j.invars)}  # one pass: many inputs
        for b, holders in enumerate(self.plan.holders):
            i = arg_index.get(id(holders[0])) if holders else None
            if i is not None and holders[0] is j.invars[i]:
                self.buffer_names[b] = f"a{i}"
        for b in self.plan.workspace:
            self.workspace.append((self.buffer_names[b], *self.plan.buffers[b]))
        for block in self.blocks:
            block.fill()
        return self

    def _call(self, eqn):
        name = eqn.prim.name
        var_ins = [a for a in eqn.invars if type(a) is not Literal]
        rule = higher_order_rules.get(eqn.prim) or (
            _call_rule if eqn.prim.calls_body else None)
        if rule is not None:
            kind, inplace = rule.plan(eqn) if hasattr(rule, "plan") else (memory.ALIAS, ())
            defs = [self.value(v, v.aval.shape, v.aval.dtype, kind,
                               var_ins if kind == memory.ALIAS else ()) for v in eqn.outvars]
            self.add_step(defs, var_ins, lambda: rule(self, eqn), name, eqn, inplace)
            return
        found = emit.call_rule(self, eqn)
        if found is None:
            defs = [self.value(v, v.aval.shape, v.aval.dtype, memory.ALIAS, var_ins)
                    for v in eqn.outvars]

            def library_call():
                f = emit.library_call(self, eqn)
                args = ", ".join(self.read(a) for a in eqn.invars)
                if not any(v in self.used for v in eqn.outvars):  # run for its effect
                    return [f"{f}({args})"]
                lhs = ", ".join(self.name_of(v) if v in self.used else "_"
                                for v in eqn.outvars)
                return [f"{lhs}{',' if eqn.prim.multiple_results else ''} = {f}({args})"]
            self.add_step(defs, var_ins, library_call, name, eqn)
            return
        expr, kind = found
        out = eqn.outvars[0]
        d = self.value(out, out.aval.shape, out.aval.dtype, kind,
                       var_ins if kind == memory.VIEW else ())

        def call():
            text = expr.format(*[self.read(a) for a in eqn.invars], out="{out}")
            return self._assign(d, text, out.aval.shape)
        self.add_step([d], var_ins, call, name, eqn)

    def _assign(self, d, text, natural):
        """Statements computing `text` (with an `{out}` slot) as value `d` (`emit.assign`)."""
        slot = self.plan.slots.get(d.key)
        return emit.assign(self.name_of(d.key), text, d.kind, d.shape, d.dtype, natural,
                           slot is not None and slot.existing)

    # --- kernels -------------------------------------------------------------------------

    def _kernel(self, node):
        spec = node.spec
        S = tuple(spec.iter_shape)
        rows = chunked.chunk_rows(spec) if self.chunking else None
        if rows and chunked.render(self, node, rows):
            return
        vals = {}  # spec name -> (key, natural shape, direct)
        for inp, var in zip(spec.inputs, node.inputs):
            vals[inp.name] = (var, ops.view_shape(inp, S), inp.is_direct(S) and inp.shape == S,
                              inp)
        outs = {o.value: var for o, var in zip(spec.outputs, node.outputs) if o.reduce is None}
        reds = [(o, var, e) for o, var, e in zip(spec.outputs, node.outputs, node.out_eqns)
                if o.reduce is not None]
        header = f"# kernel {escape.comment(spec.name)}: {_aval_text(S, spec.outputs)}"
        if spec.reduce_axes:
            header += f", reduces axes {spec.reduce_axes}"
        self.blocks.append(_Block(memory.Step([], []), lambda: [header], None, None))
        for o, var, e in reds:
            if o.value in vals and o.value.startswith("in"):
                self._reduction(o, var, e, vals, S, spec.reduce_axes)
        for instr, eqn in zip(spec.body, node.eqns):
            self.instruction(instr, eqn, vals, outs, S, node)
            for o, var, e in reds:
                if o.value == instr.dst:
                    self._reduction(o, var, e, vals, S, spec.reduce_axes)

    def instruction(self, instr, eqn, vals, outs, S, node):
        """Kernel instruction `instr` as one whole-array step. `vals`: spec name -> (value
        key, natural shape, read directly, KernelInput or None), extended with `instr.dst`;
        `outs`: spec name -> the IR variable of a kernel output."""
        arg_shapes = [() if not isinstance(a, str) else vals[a][1] for a in instr.args]
        natural = tuple(np.broadcast_shapes(*arg_shapes)) if arg_shapes else ()
        dts = emit.operand_dtypes(instr, lambda a: self.operand_dtype(a, vals))
        found = emit.instruction_rule(instr, dts)
        out_var = outs.get(instr.dst)
        key = out_var if out_var is not None else (id(node), instr.dst)
        shape = S if out_var is not None else natural
        uses = [vals[a][0] for a in instr.args if isinstance(a, str)]
        kind = memory.ALIAS if found is None else found[1]
        d = self.value(key, shape, instr.dtype, kind, uses if kind == memory.ALIAS else ())
        inplace = [vals[a][0] for a in instr.args
                   if isinstance(a, str) and vals[a][2] and vals[a][1] == shape]
        vals[instr.dst] = (key, shape, True, None)

        def lines():
            text, _ = emit.expression(self, instr, eqn, found, dts,
                                      lambda a: self.operand_text(a, vals, S))
            return self._assign(d, text, None if found and found[2] else natural)
        self.add_step([d], uses, lines, eqn.prim.name, eqn, inplace)

    def _reduction(self, o, var, eqn, vals, S, axes):
        key, shape, _, _ = vals[o.value]
        narrow = emit.narrow([o.dtype])  # reduced widened, then rounded once: a new array
        d = self.value(var, o.shape, o.dtype, memory.NEW_ARRAY if narrow else memory.FREE_BUFFER)

        def lines():
            arg = self.operand_text(o.value, vals, S)
            if tuple(shape) != S:
                arg = f"np.broadcast_to({arg}, {emit.shape_text(S)})"
            expr = ops.reduce_expr(o.reduce, arg, axes, np.dtype(o.dtype))
            return self._assign(d, expr, o.shape)
        self.add_step([d], [key], lines, eqn.prim.name, eqn)

    def operand_dtype(self, name, vals):
        """The dtype of spec value `name` (see `instruction` for `vals`)."""
        inp = vals[name][3]
        if inp is not None:
            return inp.dtype
        return self.values[vals[name][0]].dtype

    def operand_text(self, name, vals, S):
        """Source of spec value `name` over iteration shape `S`: a kernel input's view, or the
        name of an earlier instruction's value."""
        key, _, _, inp = vals[name]
        if inp is None:
            return self.name_of(key)
        return ops.view_text(self.name_of(key), inp, S)

    # --- output --------------------------------------------------------------------------

    def head(self, fn_name):
        """The function's first lines: its signature, what its parameters and bound
        constants are, and the check of the donated buffers it writes into."""
        j = self.jaxpr
        owned = [i for i, v in enumerate(j.invars) if v in self.plan.donated_used]
        params = [f"a{i}" for i in range(len(j.invars))] + ["_owned=False"] * bool(owned)
        lines = [f"def {fn_name}({', '.join(params)}):"]
        for i, v in enumerate(j.invars):
            lines.append(f"    # a{i}: {v.aval.str_short()}")
        for i, v in enumerate(j.constvars):
            lines.append(f"    # c{i}: {v.aval.str_short()} (bound constant)")
        if owned:  # donated buffers the program writes into: checked (or copied) once,
            # unless the caller did (`_owned`: jit's donation, `jit_cache.call_donating`)
            names = ", ".join(f"a{i}" for i in owned)
            everything = ", ".join(f"a{i}" for i in range(len(j.invars)))
            comma = "," if len(j.invars) == 1 else ""
            lines += ["    if not _owned:", f"        {names}{',' if len(owned) == 1 else ''}"
                      f" = _own(({everything}{comma}), {tuple(owned)})"]
        return lines

    def source(self, fn_name, profile=False):
        """The generated source; with `profile`, a timer around every step; with
        `profile="sites"`, `_t = _clock()` before and `_rec(_sites[k], _t)` after the
        statements of each kernel and call (`site_nodes` lists the nodes, in site order)."""
        lines = self.head(fn_name)
        if self.workspace:
            names = ", ".join(name for name, _, _ in self.workspace)
            lines.append("    _w = _ws.take()  # temporaries kept between calls")
            lines.append(f"    {names}{',' if len(self.workspace) == 1 else ''} = _w")
        spans, line_eqns, self.site_nodes = [], {}, []
        for i, block in enumerate(self.blocks):
            body = self.timed_body(i, profile, len(spans))
            first = len(lines) + 1
            add_lines(lines, body, line_eqns)
            if block.eqn is not None:
                spans.append((first, len(lines), block.label, block.eqn))
        if self.workspace:
            lines.append("    _ws.give(_w)")
        lines.append(f"    return [{', '.join(self._results())}]")
        return "\n".join(lines) + "\n", spans, line_eqns

    def body(self, i):
        """The statements of block `i`: its lines, then a `del` of what dies there."""
        body = list(self.blocks[i].lines)
        rel = [self._release_name(r) for r in self.plan.releases.get(i, ())]
        rel = [r for r in rel if r]
        if rel:
            body.append((f"del {', '.join(rel)}", None))
        return body

    def make_workspace(self):
        """The `Workspace` the generated function takes its kept temporaries from."""
        return Workspace([(shape, dt) for _, shape, dt in self.workspace])

    def timed_body(self, i, profile, span):
        """The statements of block `i`, with its timer when profiling: `profile=True` adds
        its time to `_acc[span]`, "sites" reports its node's site (`_site_timer`)."""
        body = self.body(i)
        if profile == "sites":
            return self._site_timer(i, body)
        if profile is True and self.blocks[i].eqn is not None:
            return [("_t = _clock()", None)] + body + [
                (f"_acc[{span}] += _clock() - _t", None)]
        return body

    def _site_timer(self, i, body):
        """The statements of block `i` with the timer of its node's site opened before the
        node's first block and recorded after its last."""
        node, blocks = self.blocks[i].node, self.blocks
        if i == 0 or blocks[i - 1].node is not node:
            self.site_nodes.append(node)
            body = [("_t = _clock()", None)] + body
        if i == len(blocks) - 1 or blocks[i + 1].node is not node:
            body = body + [(f"_rec(_sites[{len(self.site_nodes) - 1}], _t)", None)]
        return body

    def _release_name(self, rel):
        kind, x = rel
        if kind == "buffer":
            name = self.buffer_names[x]
            return None if name.startswith("a") or x in self.plan.workspace else name
        return self.name_of(x) if x in self.used else None

    def _results(self):
        """The returned expressions: copies of arguments, consts and repeated values; 0-d
        results as arrays; views and library results checked at run time (`_unalias`)
        against the arguments, consts and other results they may share memory with."""
        outs = self.jaxpr.outvars
        owned = {v for v in outs if type(v) is not Literal
                 and self.values[v].kind in memory.OWNING}
        earlier, texts = set(), []
        for idx, atom in enumerate(outs):
            if type(atom) is Literal:
                texts.append(f"np.array({self.read(atom)}, copy=True)")
                continue
            name, v = self.name_of(atom), self.values[atom]
            if idx in self.plan.copies:
                texts.append(f"np.array({name}, copy=True)")
            elif v.kind == memory.SCALAR:
                texts.append(f"np.asarray({name})")
            elif v.kind in memory.SHARING:
                reach = self.reach(atom)
                risky = [k for k in reach if k in owned or k in earlier or self._kept(k)]
                earlier |= reach
                texts.append(f"_unalias({name}, {', '.join(self.name_of(k) for k in risky)})"
                             if risky else name)
            else:
                texts.append(name)
        return texts

    def _kept(self, key):
        """Arguments the caller keeps (not donated) and consts."""
        v = self.values[key]
        return (v.kind == memory.ARG and key not in self.donated) or v.kind == memory.CONST

    def reach(self, key):
        """The values that value `key` may share memory with (following aliases)."""
        return memory.alias_reach(self.values, (key,))


def add_lines(lines, body, line_eqns):
    """Append `body` ((text, eqn) pairs) to the function's `lines`, indented, with the user's
    source line as a comment where there is an eqn (noted in `line_eqns`)."""
    for text, eqn in body:
        if eqn is not None:
            line_eqns[len(lines) + 1] = eqn
            text = f"{text:<{_COMMENT_COLUMN}}  # {_src_comment(eqn)}"
        lines.append("    " + text)


def _aval_text(shape, outputs):
    dts = sorted({o.dtype for o in outputs})
    return f"{'/'.join(np.dtype(d).name for d in dts)}{list(shape)}"


def compile_program(program, donate_argnums=(), ir=None, compile_subprogram=None,
                    workspace=True):
    """Render `program` (a fusion `Program`) and compile it into an `Executable`.

    Args:
        program: the fused program.
        donate_argnums: positions of arguments whose buffers the program may overwrite.
        ir: the optimized IR it was fused from (for `Executable.ir_text()`).
        compile_subprogram: `fn(closed_jaxpr) -> Executable` compiling the sub-programs of
            higher-order primitives (the pipeline passes one).
        workspace: allocate large temporaries once and reuse them in later calls.
    """
    r = Renderer(program, donate_argnums, workspace=workspace,
                 compile_subprogram=compile_subprogram).build()
    n = next(_program_ids)
    header = (f"# funcgrad jit program {n}: {len(program.jaxpr.invars)} inputs, "
              f"{len(program.jaxpr.outvars)} outputs, {len(program.kernels)} kernels, "
              f"{len(program.nodes) - len(program.kernels)} calls\n")
    fn, src, filename, spans, line_eqns, profiled, instrumented = load_program(r, n, header)
    exe = Executable(fn, src, filename, ir, r.plan.analysis, spans, line_eqns, profiled,
                     instrumented)
    exe.program, exe.buffers = program, buffer_table(r)
    return exe


def load_program(r, n, header):
    """The Python function of built renderer `r` (this one or a subclass, as the native
    backend's) as program `n`, with the one-line `header` on top: registered (tracebacks show
    it) and executed. Returns `(fn, src, filename, spans, line_eqns, profiled, instrumented)`."""
    fn_name, filename = f"fg_jit_{n}", f"<funcgrad-jit-{n}>"
    src, spans, line_eqns = r.source(fn_name)
    src = header + src
    spans = [(a + 1, b + 1, *rest) for a, b, *rest in spans]
    line_eqns = {k + 1: e for k, e in line_eqns.items()}
    register_source(filename, src)
    r.ns["_ws"] = r.make_workspace()
    ns = dict(r.ns)
    exec(compile(src, filename, "exec"), ns)
    profiled, instrumented = timed_variants(r, fn_name, n, len(spans))
    return ns[fn_name], src, filename, spans, line_eqns, profiled, instrumented


def timed_variants(r, fn_name, n, nspans):
    """The two timed variants of the program of built renderer `r` (this one or a subclass,
    as the native backend's), each built on first use: `profiled()` -> (function,
    accumulators, the first statement of each timed group) timing every statement
    (`Executable.profile`), and
    `instrumented(recorder)` -> a function reporting each kernel and call to `recorder`
    (`funcgrad.profiler`), whose sub-programs report to it too."""
    cache = {}

    def profiled():
        if "fn" not in cache:
            psrc, pspans, _ = r.source(fn_name, profile=True)
            plines = psrc.splitlines()  # a group's first line starts its timer
            cache["texts"] = [plines[first] if first < len(plines) else ""
                              for first, *_ in pspans]
            pname = f"<funcgrad-jit-{n}-profile>"
            register_source(pname, psrc)
            acc = [0.0] * nspans
            pns = dict(r.ns, _clock=clock, _acc=acc)
            exec(compile(psrc, pname, "exec"), pns)
            cache["fn"], cache["acc"] = pns[fn_name], acc
        return cache["fn"], cache["acc"], cache["texts"]

    def instrumented(recorder):
        if "sites" not in cache:
            from funcgrad.profiler import site_of
            isrc, _, _ = r.source(fn_name, profile="sites")
            iname = f"<funcgrad-jit-{n}-sites>"
            register_source(iname, isrc)
            cache["code"] = compile(isrc, iname, "exec")
            cache["sites"] = [site_of(node, fn_name) for node in r.site_nodes]
        ins = dict(r.ns, _clock=recorder.clock, _rec=recorder.record, _sites=cache["sites"])
        for child in r.children:
            fn = child.instrumented(recorder)
            raw = getattr(child, "_fn", child)
            ins.update({k: fn for k, v in r.ns.items() if v is child or v is raw})
        exec(cache["code"], ins)
        return ins[fn_name]
    return profiled, instrumented


def buffer_table(r):
    """`(name, shape, dtype, keys of the values it holds, kept between calls)` per buffer of
    the memory plan (for pictures of the program, `funcgrad.viz`)."""
    plan, ws = r.plan, set(r.plan.workspace)
    return [(r.buffer_names[b], tuple(shape), np.dtype(dt), tuple(plan.holders[b]), b in ws)
            for b, (shape, dt) in enumerate(plan.buffers)]
