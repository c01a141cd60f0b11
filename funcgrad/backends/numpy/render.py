"""The numpy renderer: a fused `Program` becomes ONE readable Python function.

One loop walks the program's nodes; each kernel instruction, reduction and call becomes one
statement (looked up in the tables of `ops.py`), commented with the user's source line.
Buffers come from the liveness plan of `funcgrad.compiler.memory`: elementwise chains write
with `out=` into reused buffers (in place when an operand dies), matmuls go to BLAS through
`np.matmul`, dead buffers are dropped with `del`. Primitives in no table are library calls
to their eager implementation, bound as constants of the generated function.

Higher-order primitives (a `jit` call that was not inlined; cond/while/scan later) render
through `higher_order_rules`, keyed by primitive object or name:

    def rule(r, eqn) -> list[str]      # statements, without the function's indentation
        sub = r.compile_subprogram(eqn.params["jaxpr"])   # bound name of an Executable
        outs = r.output_names(eqn)                        # names the statements must assign
        args = [r.read(a) for a in eqn.invars]            # expressions of the operands
        return [f"{', '.join(outs)}, = {sub}({', '.join(args)})"]

A rule may emit any statements (an `if`/`else`, a `while` loop around compiled bodies...);
its outputs are treated as arrays that may alias its operands, unless the rule has a
`plan(eqn) -> (kind, inplace)` attribute giving them another memory kind (e.g. "ufunc": a
planned buffer, possibly the buffer of a dying operand in `inplace`; see
`funcgrad.compiler.memory`), as the collectives in `collectives.py` do.
"""

import itertools
import math

import numpy as np

from funcgrad.backends.numpy import chunked, ops
from funcgrad.backends.numpy.runtime import (
    Executable,
    LibCall,
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


for _name in ("jit", "custom_jvp_call", "custom_vjp_call", "checkpoint"):  # calls of a body
    higher_order_rules[_name] = _call_rule


class _Block:
    """The statements of one step, filled in after memory planning: `lines` are
    `(text, eqn)` pairs (eqn None for lines without a source comment)."""

    def __init__(self, step, emit, label, eqn):
        self.step, self.emit, self.label, self.eqn = step, emit, label, eqn
        self.lines = []

    def fill(self):
        lines = [ln if isinstance(ln, tuple) else (ln, None) for ln in self.emit()]
        if lines and self.eqn is not None and all(e is None for _, e in lines):
            lines[0] = (lines[0][0], self.eqn)
        self.lines = lines


def _rule(instr, dts):
    """The table's (expression template, kind, needs an out buffer) for a kernel
    instruction, or None."""
    rule = ops.ELEMENTWISE.get(instr.op)
    if rule is None:
        return None
    consts = [None if isinstance(a, str) else a.value for a in instr.args]
    found = rule([f"{{{k}}}" for k in range(len(instr.args))], dts, instr.param_dict, consts)
    if found is None:
        return None
    expr, kind = found
    return expr, kind.rstrip("!"), kind.endswith("!")


def _shape_text(shape):
    return ops._shape(tuple(shape))


def _src_comment(eqn):
    """`file.py:12 (fn)`: the user's line that the equation was traced from (escaped)."""
    return escape.source_location(eqn.source, eqn.prim.name)


class Renderer:
    """Renders one `Program` into Python source plus the namespace it runs in."""

    def __init__(self, program, donate_argnums=(), chunking=True, workspace=True):
        self.program = program
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
            self.names[key] = self.fresh_name("s" if v.kind == "scalar" else "v")
        return self.names[key]

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
        return name, [f"{name} = np.empty({_shape_text(shape)}, np.{np.dtype(dtype).name})"]

    def compile_subprogram(self, closed):
        """Compile a sub-program (a ClosedJaxpr) and bind its Executable; returns its name."""
        from funcgrad.compiler.pipeline import compile_jaxpr
        return self.constant(compile_jaxpr(closed), "call")

    # --- building steps ------------------------------------------------------------------

    def _value(self, key, shape, dtype, kind, aliases=()):
        if tuple(shape) == () and kind in ("ufunc", "out", "fresh"):
            kind = "scalar"
        v = memory.Value(key, tuple(shape), np.dtype(dtype), kind, tuple(aliases))
        self.values[key] = v
        return v

    def _add(self, defs, uses, emit, label, eqn, inplace=()):
        inplace = inplace if isinstance(inplace, dict) else tuple(inplace)
        step = memory.Step(defs, [u for u in uses if u is not None], inplace)
        self.blocks.append(_Block(step, emit, label, eqn))

    def build(self):
        j = self.jaxpr
        args = [self._value(v, v.aval.shape, v.aval.dtype, "arg") for v in j.invars]
        consts = [self._value(v, v.aval.shape, v.aval.dtype, "const") for v in j.constvars]
        for i, v in enumerate(j.invars):
            self.names[v] = f"a{i}"
        for i, (v, c) in enumerate(zip(j.constvars, self.program.consts)):
            self.names[v] = f"c{i}"
            self.ns[f"c{i}"] = readonly(getattr(c, "_value", c))
        for node in self.program.nodes:
            if isinstance(node, KernelNode):
                self._kernel(node)
            else:
                self._call(node.eqn)
        outs = [v for v in j.outvars if type(v) is not Literal]
        self.used = set(outs).union(*[b.step.uses for b in self.blocks])
        self.plan = memory.plan_memory([b.step for b in self.blocks], args, consts, outs,
                                       self.donated,
                                       WORKSPACE_MIN_BYTES if self.persistent else None)
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
        rule = higher_order_rules.get(eqn.prim) or higher_order_rules.get(name)
        if rule is not None:
            kind, inplace = rule.plan(eqn) if hasattr(rule, "plan") else ("alias", ())
            defs = [self._value(v, v.aval.shape, v.aval.dtype, kind,
                                var_ins if kind == "alias" else ()) for v in eqn.outvars]
            self._add(defs, var_ins, lambda: rule(self, eqn), name, eqn, inplace)
            return
        table = ops.CALLS.get(name)
        placeholders = [f"{{{k}}}" for k in range(len(eqn.invars))]
        found = table(self, eqn, placeholders) if table is not None else None
        if found is None:
            fn = LibCall(eqn.prim, eqn.params, [v.aval for v in eqn.outvars])
            defs = [self._value(v, v.aval.shape, v.aval.dtype, "alias", var_ins)
                    for v in eqn.outvars]

            def emit_lib():
                f = self.constant(fn, f"_{ops.ident(name)}_")
                args = ", ".join(self.read(a) for a in eqn.invars)
                if not any(v in self.used for v in eqn.outvars):  # run for its effect
                    return [f"{f}({args})"]
                lhs = ", ".join(self.name_of(v) if v in self.used else "_"
                                for v in eqn.outvars)
                return [f"{lhs}{',' if eqn.prim.multiple_results else ''} = {f}({args})"]
            self._add(defs, var_ins, emit_lib, name, eqn)
            return
        expr, kind = found
        out = eqn.outvars[0]
        d = self._value(out, out.aval.shape, out.aval.dtype, kind,
                        var_ins if kind == "view" else ())

        def emit_call():
            text = expr.format(*[self.read(a) for a in eqn.invars], out="{out}")
            return self._assign(d, text, out.aval.shape)
        self._add([d], var_ins, emit_call, name, eqn)

    def _assign(self, d, expr, natural):
        """Statements computing `expr` (with an `{out}` slot) into value `d`; `natural` is
        the shape the expression has by itself (None: it must be given a buffer)."""
        slot = self.plan.slots.get(d.key)
        if d.kind in ("ufunc", "out") and slot.action in ("reuse", "inplace"):
            return [expr.format(out=f", out={self.name_of(d.key)}")]
        name = self.name_of(d.key)
        if (d.kind in ("ufunc", "out") and (natural is None or tuple(natural) != d.shape)
                or d.kind == "scalar" and natural is None):
            return [f"{name} = np.empty({_shape_text(d.shape)}, np.{d.dtype.name})",
                    expr.format(out=f", out={name}")]
        text = expr.format(out="")
        if d.kind == "fresh" and tuple(natural) != d.shape:
            return [f"{name} = np.empty({_shape_text(d.shape)}, np.{d.dtype.name})",
                    f"np.copyto({name}, {text})"]
        if d.kind == "alias" and tuple(natural) != d.shape:
            text = f"np.broadcast_to({text}, {_shape_text(d.shape)})"
        return [f"{name} = {text}"]

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
            self._instr(instr, eqn, vals, outs, S, node)
            for o, var, e in reds:
                if o.value == instr.dst:
                    self._reduction(o, var, e, vals, S, spec.reduce_axes)

    def _instr(self, instr, eqn, vals, outs, S, node):
        arg_shapes = [() if not isinstance(a, str) else vals[a][1] for a in instr.args]
        natural = tuple(np.broadcast_shapes(*arg_shapes)) if arg_shapes else ()
        dts = [np.dtype(a.dtype if not isinstance(a, str) else self._dtype_of(a, vals, node))
               for a in instr.args]
        found = _rule(instr, dts)
        out_var = outs.get(instr.dst)
        key = out_var if out_var is not None else (id(node), instr.dst)
        shape = S if out_var is not None else natural
        uses = [vals[a][0] for a in instr.args if isinstance(a, str)]
        if found is None:
            fn = LibCall(eqn.prim, eqn.params, [v.aval for v in eqn.outvars])
            expr, kind, needs_out = None, "alias", False
        else:
            expr, kind, needs_out = found
        d = self._value(key, shape, instr.dtype, kind, uses if kind == "alias" else ())
        inplace = [vals[a][0] for a in instr.args
                   if isinstance(a, str) and vals[a][2] and vals[a][1] == shape]
        vals[instr.dst] = (key, shape, True, None)

        def emit():
            if expr is None:  # the eager implementation: constants as typed numpy scalars
                args = [self._arg_text(a, instr.args, vals, S) for a in instr.args]
                f = self.constant(fn, f"_{ops.ident(instr.op)}_")
                return self._assign(d, f"{f}({', '.join(args)})", natural)
            args = [self._arg_text(a, instr.args, vals, S, dts) for a in instr.args]
            return self._assign(d, expr.format(*args, out="{out}"),
                                None if needs_out else natural)
        self._add([d], uses, emit, eqn.prim.name, eqn, inplace)

    def _reduction(self, o, var, eqn, vals, S, axes):
        key, shape, _, _ = vals[o.value]
        d = self._value(var, o.shape, o.dtype, "out")

        def emit():
            arg = self._arg_text(o.value, (o.value,), vals, S)
            if tuple(shape) != S:
                arg = f"np.broadcast_to({arg}, {_shape_text(S)})"
            expr = ops.reduce_expr(o.reduce, arg, axes, np.dtype(o.dtype))
            return self._assign(d, expr, o.shape)
        self._add([d], [key], emit, eqn.prim.name, eqn)

    def _dtype_of(self, name, vals, node):
        inp = vals[name][3]
        if inp is not None:
            return inp.dtype
        return self.values[vals[name][0]].dtype

    def _arg_text(self, a, args, vals, S, dts=None):
        if not isinstance(a, str):
            typed = dts is None or not any(isinstance(b, str) and dt == np.dtype(a.dtype)
                                           for b, dt in zip(args, dts))
            return ops.literal(a.value, a.dtype, typed)
        key, _, _, inp = vals[a]
        if inp is None:
            return self.name_of(key)
        return ops.view_text(self.name_of(key), inp, S)

    # --- output --------------------------------------------------------------------------

    def source(self, fn_name, profile=False):
        """The generated source; with `profile`, a timer around every step."""
        j = self.jaxpr
        params = ", ".join(f"a{i}" for i in range(len(j.invars)))
        lines = [f"def {fn_name}({params}):"]
        for i, v in enumerate(j.invars):
            lines.append(f"    # a{i}: {v.aval.str_short()}")
        for i, v in enumerate(j.constvars):
            lines.append(f"    # c{i}: {v.aval.str_short()} (bound constant)")
        owned = [i for i, v in enumerate(j.invars) if v in self.plan.donated_used]
        if owned:  # donated buffers the program writes into: checked (or copied) once
            names = ", ".join(f"a{i}" for i in owned)
            everything = ", ".join(f"a{i}" for i in range(len(j.invars)))
            comma = "," if len(j.invars) == 1 else ""
            lines.append(f"    {names}{',' if len(owned) == 1 else ''} = "
                         f"_own(({everything}{comma}), {tuple(owned)})")
        if self.workspace:
            names = ", ".join(name for name, _, _ in self.workspace)
            lines.append("    _w = _ws.take()  # temporaries kept between calls")
            lines.append(f"    {names}{',' if len(self.workspace) == 1 else ''} = _w")
        spans, line_eqns = [], {}
        for i, block in enumerate(self.blocks):
            body = list(block.lines)
            rel = [self._release_name(r) for r in self.plan.releases.get(i, ())]
            rel = [r for r in rel if r]
            if rel:
                body.append((f"del {', '.join(rel)}", None))
            timed = profile and block.eqn is not None
            if timed:
                body = [("_t = _clock()", None)] + body + [
                    (f"_acc[{len(spans)}] += _clock() - _t", None)]
            first = len(lines) + 1
            for text, eqn in body:
                if eqn is not None:
                    line_eqns[len(lines) + 1] = eqn
                    text = f"{text:<{_COMMENT_COLUMN}}  # {_src_comment(eqn)}"
                lines.append("    " + text)
            if block.eqn is not None:
                spans.append((first, len(lines), block.label, block.eqn))
        if self.workspace:
            lines.append("    _ws.give(_w)")
        lines.append(f"    return [{', '.join(self._results())}]")
        return "\n".join(lines) + "\n", spans, line_eqns

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
                 and self.values[v].kind in ("ufunc", "out", "fresh")}
        earlier, texts = set(), []
        for idx, atom in enumerate(outs):
            if type(atom) is Literal:
                texts.append(f"np.array({self.read(atom)}, copy=True)")
                continue
            name, v = self.name_of(atom), self.values[atom]
            if idx in self.plan.copies:
                texts.append(f"np.array({name}, copy=True)")
            elif v.kind == "scalar":
                texts.append(f"np.asarray({name})")
            elif v.kind in ("alias", "view"):
                reach = self._reach(atom)
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
        return (v.kind == "arg" and key not in self.donated) or v.kind == "const"

    def _reach(self, key):
        """The values that value `key` may share memory with (following aliases)."""
        seen, stack = set(), list(self.values[key].aliases)
        while stack:
            k = stack.pop()
            if k not in seen:
                seen.add(k)
                stack.extend(self.values[k].aliases)
        return seen


def _aval_text(shape, outputs):
    dts = sorted({o.dtype for o in outputs})
    return f"{'/'.join(np.dtype(d).name for d in dts)}{list(shape)}"


def compile_program(program, donate_argnums=(), ir=None, workspace=True):
    """Render `program` and compile it into an `Executable`; with `workspace`, temporaries
    are allocated once and reused by later calls."""
    r = Renderer(program, donate_argnums, workspace=workspace).build()
    n = next(_program_ids)
    fn_name = f"fg_jit_{n}"
    filename = f"<funcgrad-jit-{n}>"
    src, spans, line_eqns = r.source(fn_name)
    header = (f"# funcgrad jit program {n}: {len(program.jaxpr.invars)} inputs, "
              f"{len(program.jaxpr.outvars)} outputs, {len(program.kernels)} kernels, "
              f"{len(program.nodes) - len(program.kernels)} calls\n")
    src = header + src
    spans = [(a + 1, b + 1, *rest) for a, b, *rest in spans]
    line_eqns = {k + 1: e for k, e in line_eqns.items()}
    register_source(filename, src)
    r.ns["_ws"] = Workspace([(shape, dt) for _, shape, dt in r.workspace])
    ns = dict(r.ns)
    exec(compile(src, filename, "exec"), ns)

    def profiled():
        if "fn" not in cache:
            psrc, _, _ = r.source(fn_name, profile=True)
            pname = f"<funcgrad-jit-{n}-profile>"
            register_source(pname, psrc)
            acc = [0.0] * len(spans)
            pns = dict(r.ns, _clock=clock, _acc=acc)
            exec(compile(psrc, pname, "exec"), pns)
            cache["fn"], cache["acc"] = pns[fn_name], acc
        return cache["fn"], cache["acc"]
    cache = {}
    return Executable(ns[fn_name], src, filename, ir, r.plan.analysis, spans, line_eqns,
                      profiled)
