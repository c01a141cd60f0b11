"""Large fused kernels as a loop over row chunks that stay in the CPU caches.

A kernel over a big iteration space, rendered op by op, streams every intermediate through
main memory. Rendered here instead, it runs over blocks of `rows` leading rows: the chunk's
intermediates live in a few preallocated chunk-sized buffers (L2-resident), so only the
inputs and outputs travel to and from memory once. Work that does not depend on the rows
(operations on broadcast operands only) is hoisted out of the loop. A reduction over the
rows accumulates: each chunk's partial result is added to (or max/min-ed into) the total.

    b0 = np.empty((4096, 1024), np.float32)          # the kernel's output
    t0 = np.empty((256, 1024), np.float32)           # chunk buffers, reused by every chunk
    for r in range(0, 4096, 256):
        x0 = a0[r:r + 256]                           # the chunk of each input and output
        o0 = b0[r:r + 256]
        np.multiply(x0, a1, out=t0)                  # mul  model.py:3 (f)
        np.tanh(t0, out=o0)                          # tanh model.py:3 (f)
    del t0, x0, o0

The whole loop is one step of the program's memory plan: it reads its inputs and defines
its outputs; an output may take the buffer of an input that the chunk no longer reads
after writing that output (donated Adam states are updated in place), and only when every
read of that memory in the loop is the same row chunk (`_Chunked._overwritable`). Each
instruction is written by `emit.py`, as in the whole-array renderer that calls this module
(`render.py`, whose public `Renderer` methods this module uses; it never imports it).
"""

import math

import numpy as np

from funcgrad.backends.numpy import emit, ops, runtime
from funcgrad.compiler import escape, memory
from funcgrad.core import ReduceOp

CHUNK_ELEMENTS = 1 << 18  # elements per chunk buffer (1 MiB of float32): measured best
MIN_CHUNKS = 2  # arrays that fit in the last-level cache gain little from chunking


def chunk_rows(spec):
    """Rows per chunk for a kernel worth chunking, else None (also for a kernel holding a
    bfloat16 or other ml_dtypes value: its instructions are library calls, and its
    reductions round once over the whole axis)."""
    S = tuple(spec.iter_shape)
    dts = [i.dtype for i in spec.inputs + spec.body + spec.outputs]
    if not S or emit.narrow(dts):
        return None
    inner = math.prod(S[1:])
    if inner == 0 or inner > 4 * CHUNK_ELEMENTS:
        return None
    rows = max(1, CHUNK_ELEMENTS // inner)
    if S[0] < MIN_CHUNKS * rows:
        return None
    return rows


class _Chunked:
    """The rendering of one chunked kernel (see the module docstring)."""

    def __init__(self, r, node, rows):
        self.r, self.node, self.rows = r, node, rows
        self.spec = spec = node.spec
        self.S = tuple(spec.iter_shape)
        self.vals = {}  # spec name -> (key, shape, direct, KernelInput or None)
        self.sliced = set()
        self.invariant = set()
        for inp, var in zip(spec.inputs, node.inputs):
            vs = ops.view_shape(inp, self.S)
            self.vals[inp.name] = (var, vs, inp.is_direct(self.S) and inp.shape == self.S, inp)
            if len(vs) == len(self.S) and vs[0] == self.S[0]:
                self.sliced.add(inp.name)
            else:
                self.invariant.add(inp.name)
        self.outs = {o.value: (o, v) for o, v in zip(spec.outputs, node.outputs)
                     if o.reduce is None}
        for instr in spec.body:  # hoisted: row-independent values that are not outputs
            if instr.dst not in self.outs and all(
                    not isinstance(a, str) or a in self.invariant for a in instr.args):
                self.invariant.add(instr.dst)
        self.reds = [(o, v, e) for o, v, e in zip(spec.outputs, node.outputs, node.out_eqns)
                     if o.reduce is not None]
        self.instr_dtypes = {instr.dst: np.dtype(instr.dtype) for instr in spec.body}

    def possible(self):
        return not any(o.value in self.invariant for o, _, _ in self.reds)

    def build(self):
        """Hoisted instructions become ordinary steps; the loop becomes one more step."""
        r, spec = self.r, self.spec
        self.loop = []
        for instr, eqn in zip(spec.body, self.node.eqns):
            if instr.dst in self.invariant:
                r.instruction(instr, eqn, self.vals, {}, self.S, self.node)
            else:
                self.loop.append((instr, eqn))
        order = {}
        for k, (instr, _) in enumerate(self.loop):
            for a in instr.args:
                if isinstance(a, str):
                    order[a] = k
        defs, inplace, safe = [], {}, self._overwritable()
        for k, (instr, _) in enumerate(self.loop):
            if instr.dst in self.outs:
                o, var = self.outs[instr.dst]
                defs.append(r.value(var, o.shape, o.dtype, memory.ANY_BUFFER))
                inplace[var] = tuple(self.vals[a][0] for a in self.sliced
                                     if self.vals[a][0] in safe and order.get(a, -1) <= k)
        for o, var, _ in self.reds:
            defs.append(r.value(var, o.shape, o.dtype, memory.FREE_BUFFER))
        uses = [self.vals[a][0] for a in self._loop_reads()]
        eqn = self.loop[0][1] if self.loop else self.node.out_eqns[0]
        r.add_step(defs, uses, self.emit, spec.name, eqn, inplace)

    def _overwritable(self):
        """Inputs whose buffer an output may take: chunk r of an output overwrites rows that
        a later chunk must still read unchanged, so every read of that memory in the loop
        must be the same row-aligned chunk: no transposed or reversed read of the input
        (`y + y.T`) and no other operand that may share its memory (a view such as
        `rev(y)`, an alias of a library call)."""
        reads = {}  # IR value -> the spec inputs the loop reads it through
        for a in self._loop_reads():
            reads.setdefault(self.vals[a][0], []).append(a)
        memory_of = {key: self.r.reach(key) | {key} if key in self.r.values else {key}
                     for key in reads}
        safe = set()
        for key, names in reads.items():
            if not all(a in self.sliced and self.vals[a][2] for a in names):
                continue
            if any(memory_of[key] & memory_of[other] for other in reads if other != key):
                continue
            safe.add(key)
        return safe

    def _loop_reads(self):
        names = [a for instr, _ in self.loop for a in instr.args if isinstance(a, str)]
        names += [o.value for o, _, _ in self.reds]
        return [a for a in dict.fromkeys(names) if a in self.vals]

    # --- emission (after the program's memory plan) -----------------------------------------

    def emit(self):
        r, S, rows = self.r, self.S, self.rows
        lines = []
        outs = {}  # spec value name -> chunk view name of the output it is written to
        views, after = [], []  # after: lines finishing the totals once the loop is done
        across = 0 in self.spec.reduce_axes  # reductions accumulate chunk by chunk
        for o, var in list(self.outs.values()) + [(o, v) for o, v, _ in self.reds]:
            slot, dt = r.plan.slots[var], ops.dtype_text(o.dtype)
            if o.reduce is not None and across:
                rec, total = ReduceOp.named(o.reduce), r.name_of(var)
                start = ops.literal(rec.identity(np.dtype(o.dtype)), o.dtype, False)
                if slot.existing:
                    lines.append(f"{total}.fill({start})")
                else:
                    lines.append(f"{total} = np.full({emit.shape_text(o.shape)}, {start}, {dt})")
                partial, alloc = r.scratch(o.shape, o.dtype, "p")
                lines += alloc
                fold, init, finish = self._partials(rec, o, total, partial)
                lines += init
                after += finish
                outs[(o.value, o.reduce, var)] = (partial, fold)
                continue
            if slot.action == "new":
                lines.append(emit.allocate(r.name_of(var), o.shape, o.dtype))
            name = r.fresh_name("o")
            views.append((name, r.name_of(var)))
            outs[o.value if o.reduce is None else (o.value, o.reduce, var)] = name
        local = {}
        for a in sorted(self.sliced & set(self._loop_reads())):
            name = r.fresh_name("x")
            key, _, _, inp = self.vals[a]
            views.append((name, ops.view_text(r.name_of(key), inp, S)))
            local[a] = name
        body, temps = self._plan_body(local, outs)
        chunk_bytes = sum(math.prod(shape) * dt.itemsize for _, shape, dt, _ in temps)
        r.plan.analysis.temp_bytes += chunk_bytes  # conservatively: live during the loop
        r.plan.analysis.peak_bytes += chunk_bytes
        for _, _, _, alloc in temps:
            lines += alloc
        label = escape.comment(self.spec.name)
        lines.append(f"for r in range(0, {S[0]}, {rows}):  # kernel {label}, "
                     f"{-(-S[0] // rows)} chunks of {rows} rows")
        lines += [f"    {name} = {base}[r:r + {rows}]" for name, base in views]
        if S[0] % rows and temps:
            n = ", ".join(t for t, _, _, _ in temps)
            trimmed = ", ".join(f"{t}[:{S[0]} - r]" for t, _, _, _ in temps)
            lines.append(f"    if r + {rows} > {S[0]}:")
            lines.append(f"        {n} = {trimmed}")
        lines += [(f"    {text}", eqn) for text, eqn in body]
        lines += after
        dead = [t for t, _, _, alloc in temps if alloc] + [name for name, _ in views]
        lines.append(f"del {', '.join(dead)}")
        return lines

    def _partials(self, rec, o, total, partial):
        """(the statement folding a chunk's `partial` into `total`, lines before the loop,
        lines after it) for reduction output `o` of `ReduceOp` `rec`: its ufunc; a float sum
        (`rec.pairwise`) is as accurate as numpy's pairwise one, whose error grows with the
        log of the length, not with the chunks: float16/float32 partials add up in a float64
        total (rounded once at the end), float64 ones with their rounding errors kept apart
        (`runtime.compensated_add`, Neumaier's summation)."""
        r, shape = self.r, emit.shape_text(o.shape)
        fold = f"np.{rec.ufunc.__name__}({total}, {partial}, out={total})"
        if not rec.pairwise or np.dtype(o.dtype).kind != "f":
            return fold, [], []
        extra = r.fresh_name("w")
        init = [f"{extra} = np.zeros({shape}, np.float64)"]
        if np.dtype(o.dtype).itemsize < 8:
            return (f"np.add({extra}, {partial}, out={extra})", init,
                    [f"np.copyto({total}, {extra}, casting='same_kind')", f"del {extra}"])
        add = r.constant(runtime.compensated_add, "f")
        return (f"{add}({total}, {extra}, {partial})", init,
                [f"np.add({total}, {extra}, out={total})", f"del {extra}"])

    def _plan_body(self, local, outs):
        """Statements of one chunk, with intermediates in chunk buffers (planned by
        liveness like the program itself); returns (lines, [(buffer name, shape, dtype)])."""
        r, rows = self.r, self.rows
        shapes, steps, todo = {}, [], []
        for a in local:
            shapes[a] = (rows,) + self.vals[a][1][1:]
        for o, var, e in self.reds:
            if o.value in local:
                steps.append(memory.Step([], []))
                todo.append((o, e, var, None))
        for instr, eqn in self.loop:
            dts = emit.operand_dtypes(instr, self._dtype)
            arg_shapes = [shapes.get(a, self.vals[a][1] if a in self.vals else ())
                          if isinstance(a, str) else () for a in instr.args]
            shape = tuple(np.broadcast_shapes(*arg_shapes)) if arg_shapes else ()
            found = emit.instruction_rule(instr, dts)
            # chunk buffers only for expressions that write into any buffer
            kind = memory.ANY_BUFFER if found and found[1] == memory.ANY_BUFFER else memory.ALIAS
            key = ("chunk", instr.dst)
            if instr.dst in self.outs:
                kind = memory.VIEW  # written into the output's chunk, not planned here
                shapes[instr.dst] = (rows,) + self.S[1:]  # later reads see the chunk
            else:
                shapes[instr.dst] = shape
            uses = [("chunk", a) for a in instr.args if isinstance(a, str) and a not in
                    self.invariant and a not in local]
            inplace = [("chunk", a) for a in instr.args if isinstance(a, str)
                       and ("chunk", a) in uses and a not in self.outs and shapes[a] == shape]
            steps.append(memory.Step([memory.Value(key, shape, instr.dtype, kind)], uses,
                                     tuple(inplace)))
            todo.append((instr, eqn, found, dts))
            for o, var, e in self.reds:
                if o.value == instr.dst:
                    steps.append(memory.Step([], [key]))
                    todo.append((o, e, var, None))
        plan = memory.plan_memory(steps, [])
        temps = [(*r.scratch(shape, dt), shape, dt) for shape, dt in plan.buffers]
        names = {b: t[0] for b, t in enumerate(temps)}
        temps = [(name, shape, dt, alloc) for name, alloc, shape, dt in temps]
        values = {}

        def arg(a):
            if a in local:
                return local[a]
            if a in outs:
                return outs[a]
            if a in values:
                return values[a]
            return r.operand_text(a, self.vals, self.S)

        lines = []
        for item in todo:
            if item[3] is None:  # a reduction of the chunk: into its output's chunk, or
                o, eqn, var, _ = item  # into a partial result added to the running total
                src = arg(o.value)
                if shapes[o.value] != (rows,) + self.S[1:]:  # e.g. a column broadcast along
                    dims = [f"{src}.shape[0]"] + [str(n) for n in self.S[1:]]  # the rows
                    src = f"np.broadcast_to({src}, ({', '.join(dims)},))"
                text = ops.reduce_expr(o.reduce, src, self.spec.reduce_axes,
                                       np.dtype(o.dtype))
                target = outs[(o.value, o.reduce, var)]
                if isinstance(target, tuple):
                    partial, fold = target
                    lines.append((text.format(out=f", out={partial}"), eqn))
                    lines.append((fold, None))
                else:
                    lines.append((text.format(out=f", out={target}"), eqn))
                continue
            instr, eqn, found, dts = item
            slot = plan.slots.get(("chunk", instr.dst))
            buffer = None if slot is None or slot.buffer is None else names[slot.buffer]
            if found is not None and found[2] and instr.dst not in outs and buffer is None:
                found = None  # needs an out= buffer but has none: the eager implementation
            expr, kind = emit.expression(r, instr, eqn, found, dts, arg)
            if instr.dst in outs:
                text = emit.into(outs[instr.dst], expr, kind)
            elif kind == memory.ANY_BUFFER and buffer is not None:
                values[instr.dst] = buffer
                text = emit.into(buffer, expr, kind)
            else:
                values[instr.dst] = r.fresh_name("u")
                text = f"{values[instr.dst]} = {expr.format(out='')}"
            lines.append((text, eqn))
        return lines, temps

    def _dtype(self, a):
        if a in self.vals:
            return self.r.operand_dtype(a, self.vals)
        return self.instr_dtypes[a]




def render(r, node, rows):
    """Add the steps of `node` (a KernelNode) to renderer `r` as a chunked loop; False when
    the kernel cannot be chunked."""
    c = _Chunked(r, node, rows)
    if not c.possible():
        return False
    c.build()
    return True
