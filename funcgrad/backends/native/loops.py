"""Loops in C: a `while_loop` or `scan` whose bodies are made only of fused kernels runs as
one C function, so an iteration costs no Python at all.

The bodies come from the pipeline optimized and fused (`bodies(closed) -> Program`, the
callback's `fused`: no C is compiled for them apart); when a body's nodes all have a C form,
its kernels are printed into the enclosing module and called from a C loop:

    int fg_loop0(const float *restrict p_a0, const float *restrict p_a1, float *p_o0) {
        float t0[100];                                    /* body temporaries (large: malloc) */
        volatile int *const fg_count = fg_sigint_count();  /* Ctrl-C: interrupt.py */
        const int fg_seen = *fg_count;
        int fg_status = 0;
        memcpy(p_o0, p_a1, 400);                          /* the carry lives in the output */
        for (long long _it = 0; _it < 100; ++_it) {
            const long long _i = _it;
            fg_loop0_b0(p_a0, p_o0, t0);                  /* the body's kernels */
            memcpy(p_o0, t0, 400);                        /* the new carry */
            if (*fg_count != fg_seen) { fg_status = FG_INTERRUPTED; goto fg_end; }
        }
    fg_end:;                                              /* free the malloc'ed temporaries */
        return fg_status;                                 /* 1: out of memory (a nested loop) */
    }

A small `dot_general` in a body (an RNN's `h @ W`) is a C function of the loop too
(`SmallDot`), and a `cond`/`switch` in a body a C `if`/`else` around its branches' kernels
(`_Cond`; the index clamps as `lax.switch` does), and so is one at top level whose results are
small (`BRANCH_MAX_BYTES`; larger ones keep the wrapper's Python `if`); a small `lu`,
`triangular_solve` or `cholesky` (so `fnp.linalg.solve`) is a C routine of `linalg.py`, and a
shape or indexing operation (transpose, slices, pads, dynamic_slice, gathers such as
`emb[tokens]` and `take`, scatters such as `x.at[idx].add`) a copy of `shapes.py`;
`argmax`/`argmin` and the cumulative sums, products, maxima and minima are routines of
`along_axis.py`, and `select_and_scatter_add` one of `windows.py`. A `while_loop` or `scan`
in a body (nested loops: an MPC step's inner solver) is its own `CLoop` function, called
from the outer loop (`_Nested`; its constants become the outer function's).
The carry is written after the whole body ran (a body output that is one of its inputs
passes through a staging buffer first, so a swap of two carries is right). Scan inputs are
read at `p + i * slice` and its stacked outputs written the same way. Anything else (another
library call in a body, a large matmul, a kernel C cannot print) leaves
the loop to the numpy renderer's Python loop around the compiled bodies.
"""

import math

import numpy as np

from funcgrad.backends.native import blas, cnode, interrupt, ops, shapes
from funcgrad.backends.native.kernel import CKernel
from funcgrad.compiler.fusion import KernelNode
from funcgrad.core import Literal
from funcgrad.lax.control_flow import cond_p, scan_p, while_p
from funcgrad.lax.linalg import dot_general_p

# A top-level cond whose results are larger stays a Python `if` (its branches' buffers are
# returned as they are; the C branches copy the results once).
BRANCH_MAX_BYTES = 1 << 16
SMALL_DOT_MAX_FLOPS = 1 << 18  # without BLAS, larger products leave the loop to Python
STACK_TEMPS_MAX_BYTES = 1 << 13  # a loop function's temporaries up to this live on its stack
BLAS_MIN_FLOPS = 1 << 12  # with numpy's BLAS (blas.functions), products from here call it


class _Node:
    def __init__(self, inputs, outputs):
        self.inputs, self.outputs = list(inputs), list(outputs)


class SmallDot:
    """A small `dot_general` in a loop body as a C function: `[M, K] x [K, N]` (a may be
    `[K, M]`, b `[N, K]`: each contracted on either axis; vectors are M = 1 or N = 1; an
    outer product of vectors or scalars is K = 1), after leading batch axes shared by both
    (what `vmap` makes), float32 or float64, accumulated in order in the operands' type
    (BLAS may round differently)."""

    def __init__(self, eqn, cname):
        self.cname, self.eqn = cname, eqn
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        a, b = (v.aval for v in eqn.invars)
        dt = np.dtype(eqn.outvars[0].aval.dtype)
        nb = len(lb)
        lc, rc = [d - nb for d in lc], [d - nb for d in rc]
        ash, bsh = a.shape, b.shape
        if not lc and not rc and a.ndim - nb <= 1 and b.ndim - nb <= 1:  # outer: K = 1
            ash = ash[:nb] + (ash[nb:] or (1,)) + (1,)
            bsh = bsh[:nb] + (1,) + (bsh[nb:] or (1,))
            lc, rc = [1], [0]
        na, nbb = len(ash) - nb, len(bsh) - nb
        if (tuple(lb) != tuple(range(nb)) or tuple(rb) != tuple(range(nb))
                or ash[:nb] != bsh[:nb] or dt.name not in ("float32", "float64")
                or a.dtype != dt or b.dtype != dt or na not in (1, 2) or nbb not in (1, 2)
                or lc not in ([0], [1]) or lc[0] >= na or rc not in ([0], [nbb - 1])):
            raise NotNative("a dot_general this C loop does not compute")
        self.batch = math.prod(ash[:nb])
        self.a_cols = na == 2 and lc[0] == 0  # a is [K, M]: contracted on its rows
        self.m = ash[nb + 1 - lc[0]] if na == 2 else 1
        self.k = ash[nb + lc[0]]
        self.n = bsh[nb + 1 - rc[0]] if nbb == 2 else 1
        self.b_rows = rc[0] == 0  # b is [K, N]
        flops = self.batch * self.m * self.n * self.k
        self.blas = bool(blas.functions()) and flops >= BLAS_MIN_FLOPS
        if flops > SMALL_DOT_MAX_FLOPS and not self.blas:
            raise NotNative("a dot_general too large for a C loop (BLAS does it)")
        self.t = ops.storage(dt.name)
        self.needs = [blas.BLAS] if self.blas else []

    def _gemm(self):
        """The BLAS call (row-major; 111/112: CblasNoTrans/CblasTrans), when the pointer is set."""
        m, n, k = self.m, self.n, self.k
        fn = "fg_sgemm" if self.t == "float" else "fg_dgemm"
        ta, lda = (112, m) if self.a_cols else (111, k)
        tb, ldb = (111, n) if self.b_rows else (112, k)
        return [f"if ({fn}) {{",
                f"    for (long long _b = 0; _b < {self.batch}; ++_b)",
                f"        {fn}(101, {ta}, {tb}, {m}, {n}, {k}, 1, a0 + _b * {m * k}, {lda}, "
                f"b0 + _b * {k * n}, {ldb}, 0, out0 + _b * {m * n}, {n});",
                "    return;", "}"]

    def source(self):
        t, m, n, k = self.t, self.m, self.n, self.k
        a_ip = f"a[p * {m} + i]" if self.a_cols else f"a[i * {k} + p]"
        batch = f"{self.batch} x " if self.batch != 1 else ""
        head = (f"/* dot_general {batch}{m}x{k} @ {k}x{n} */\nvoid {self.cname}(const {t} "
                f"*restrict a0, const {t} *restrict b0, {t} *restrict out0) {{")
        if self.b_rows:  # out[i, :] += a[i, p] * b[p, :]: the inner loop vectorizes
            body = [f"for (long long i = 0; i < {m}; ++i) {{",
                    f"    for (long long j = 0; j < {n}; ++j) out[i * {n} + j] = 0;",
                    f"    for (long long p = 0; p < {k}; ++p) {{",
                    f"        const {t} x = {a_ip};",
                    f"        for (long long j = 0; j < {n}; ++j) "
                    f"out[i * {n} + j] += x * b[p * {n} + j];",
                    "    }", "}"]
        else:
            body = [f"for (long long i = 0; i < {m}; ++i)",
                    f"    for (long long j = 0; j < {n}; ++j) {{",
                    f"        {t} acc = 0;",
                    f"        for (long long p = 0; p < {k}; ++p) "
                    f"acc += {a_ip} * b[j * {k} + p];",
                    f"        out[i * {n} + j] = acc;", "    }"]
        outer = [f"for (long long _b = 0; _b < {self.batch}; ++_b) {{",
                 f"    const {t} *restrict a = a0 + _b * {m * k};",
                 f"    const {t} *restrict b = b0 + _b * {k * n};",
                 f"    {t} *restrict out = out0 + _b * {m * n};"]
        body = (self._gemm() if self.blas else []) + outer + ["    " + ln for ln in body] + ["}"]
        return "\n".join([head] + ["    " + ln for ln in body] + ["}"]) + "\n"


class NotNative(Exception):
    """This loop stays a Python loop (the reason is the message)."""


def _nbytes(aval):
    return math.prod(aval.shape) * np.dtype(aval.dtype).itemsize


def _ctype(aval):
    return ops.storage(np.dtype(aval.dtype).name)


class _Body:
    """One body program (a fused `Program`) printed as calls of its kernels; `args` maps
    its invars and consts to C pointer expressions (consts: names of extra loop
    parameters)."""

    def __init__(self, program, prefix, bodies=None):
        self.program, self.prefix, self.temps, self.kernels = program, prefix, [], []
        self.exits = False  # whether `statements` jumps to the function's `fg_end`
        extra = []  # the constants of nested loops: parameters of the enclosing C function
        for k, node in enumerate(program.nodes):
            if isinstance(node, KernelNode):
                ck = CKernel(node.spec, f"{prefix}_k{k}", node.eqns)
                self.kernels.append((ck, _Node(node.inputs, node.outputs)))
            elif node.eqn.prim is dot_general_p:
                dot = SmallDot(node.eqn, f"{prefix}_k{k}")
                self.kernels.append((dot, _Node(node.eqn.invars, node.eqn.outvars)))
            elif node.eqn.prim in shapes.IN_LOOPS:
                try:
                    routine = shapes.IN_LOOPS[node.eqn.prim](node.eqn, f"{prefix}_k{k}")
                except ops.Unsupported as e:
                    raise NotNative(str(e)) from None
                self.kernels.append((routine, _Node(node.eqn.invars, node.eqn.outvars)))
            elif node.eqn.prim is cond_p and bodies is not None:
                br = _Cond(node.eqn, f"{prefix}_k{k}", bodies)
                self.kernels.append((br, _Node(node.eqn.invars, node.eqn.outvars)))
            elif node.eqn.prim in (while_p, scan_p) and bodies is not None:
                inner = _Nested(CLoop(f"{prefix}_k{k}", node.eqn, bodies))
                extra += inner.const_items
                self.kernels.append((inner, _Node(node.eqn.invars, node.eqn.outvars)))
            else:
                raise NotNative(f"the body calls {node.eqn.prim.name}")
        for v in program.jaxpr.outvars:
            if type(v) is Literal and (v.aval.shape != ()
                                       or np.dtype(v.aval.dtype).name in ops.NARROW):
                raise NotNative("a body output is an array or narrow-float literal")
        self.consts = list(zip(program.jaxpr.constvars, program.consts)) + extra

    def statements(self, where):
        """Kernel calls; `where` (var -> C pointer expression) is extended with temps."""
        lines = []
        for ck, node in self.kernels:
            if isinstance(ck, _Cond):
                lines += ck.statements(self, node, where)
                continue
            args = []
            for v in node.inputs:
                if type(v) is Literal:
                    args.append(self._literal(v))
                else:
                    args.append(where[v])
            if isinstance(ck, _Nested):  # then the inner loop's constants
                args += [where[key] for key, _ in ck.const_items]
            for v in node.outputs:
                name = f"{self.prefix}_t{len(self.temps)}"
                self.temps.append((name, v.aval))
                where[v] = name
                args.append(name)
            call = f"{ck.cname}({', '.join(args)})"  # FG_UPPER_CLEAN: see ops.PRELUDE
            if isinstance(ck, _Nested):  # its status (no memory, Ctrl-C) ends this loop too
                self.exits = True
                lines.append(f"FG_UPPER_CLEAN(); if ((fg_status = {call})) goto fg_end;")
            else:
                lines.append(f"FG_UPPER_CLEAN(); {call};")
        for v in self.program.jaxpr.outvars:  # a constant result (`lambda: 1.0`): a temp
            if type(v) is Literal and v not in where:
                name = f"{self.prefix}_t{len(self.temps)}"
                self.temps.append((name, v.aval))
                where[v] = name
                value = ops.literal(np.asarray(v.val).item(), np.dtype(v.aval.dtype).name)
                lines.append(f"{name}[0] = {value};")
        return lines

    def _literal(self, lit):
        dt = np.dtype(lit.aval.dtype).name
        value = ops.literal(np.asarray(lit.val).item(), dt)
        if dt in ops.NARROW:
            raise NotNative(f"a {dt} literal operand")
        return f"(const {ops.storage(dt)}[]){{{value}}}"


class _Nested:
    """A `while_loop` or `scan` in a loop body: its own C function (a `CLoop`), called from
    the enclosing loop; its bound constants become constants of the enclosing body
    (`const_items`: (key, array) pairs, bound to parameters like the body's own)."""

    def __init__(self, loop):
        self.loop, self.cname = loop, loop.cname
        self.const_items = [(_ConstKey(), c) for c in loop.consts]

    def source(self):
        return self.loop.source()

    @property
    def needs(self):
        return self.loop.needs


class _ConstKey:
    """A nested loop's constant in a body's `where` map (no IR variable stands for it)."""


class _Cond:
    """A `cond` in a loop body: C `if`/`else` around each branch's kernels, every branch
    copying its results into the same temporaries."""

    def __init__(self, eqn, prefix, bodies):
        self.eqn = eqn
        self.branches = [_Body(bodies(b), f"{prefix}_br{k}", bodies)
                         for k, b in enumerate(eqn.params["branches"])]
        if any(b.consts for b in self.branches):
            raise NotNative("a branch with bound constants")

    def source(self):
        return "\n".join(ck.source() for b in self.branches for ck, _ in b.kernels)

    def statements(self, body, node, where, outs=None):
        """The C `if`/`else`; each branch copies its results into `outs` (pointer names),
        by default new temporaries of `body`."""
        index, args = node.inputs[0], node.inputs[1:]
        if any(type(a) is Literal for a in node.inputs):
            raise NotNative("a cond with a literal operand")
        if outs is None:
            outs = []
            for v in node.outputs:
                name = f"{body.prefix}_t{len(body.temps)}"
                body.temps.append((name, v.aval))
                outs.append(name)
        for v, name in zip(node.outputs, outs):
            where[v] = name
        lines = []
        for k, b in enumerate(self.branches):
            bj = b.program.jaxpr
            inner = dict(zip(bj.invars, [where[a] for a in args]))
            stmts = b.statements(inner)
            body.temps += b.temps
            b.temps = []
            stmts += [f"memcpy({o}, {inner[v]}, {_nbytes(v.aval)});"
                      for o, v in zip(outs, bj.outvars)]
            if len(self.branches) == 1:
                return stmts
            head = (f"if ({where[index]}[0] <= 0) {{" if k == 0 else "} else {"
                    if k == len(self.branches) - 1 else f"}} else if ({where[index]}[0] == {k}) {{")
            lines += [head] + ["    " + ln for ln in stmts]
        return lines + ["}"]

    @property
    def kernels(self):
        return [kn for b in self.branches for kn in b.kernels]

    @property
    def exits(self):
        return any(b.exits for b in self.branches)


def _on_stack(temps):
    """[(name, aval, on the stack?)] of a loop function's temporaries: arrays on its stack
    while they fit `STACK_TEMPS_MAX_BYTES` together (an MPC step's inner loop: 5 x 16 bytes,
    50 calls per program call, each paying 5 mallocs and frees), the rest `malloc`ed."""
    out, used = [], 0
    for name, aval in temps:
        n = max(_nbytes(aval), 1)
        out.append((name, aval, used + n <= STACK_TEMPS_MAX_BYTES))
        used += n if out[-1][2] else 0
    return out


def _alloc(temps):
    lines, heap = [], []
    for name, aval, stack in _on_stack(temps):
        t = _ctype(aval)
        if stack:
            lines.append(f"{t} {name}[{max(math.prod(aval.shape), 1)}];")
        else:
            lines.append(f"{t} *{name} = ({t} *)malloc({max(_nbytes(aval), 1)});")
            heap.append(name)
    if heap:
        lines.append(f"if ({' || '.join('!' + h for h in heap)}) {{ "
                     + "".join(f"free({h}); " for h in heap) + "return 1; }")
    return lines


def _frame(temps, lines, exits=True):
    """A loop function's body: its temporaries, `lines`, then (at `fg_end`, where a nested
    loop's failure or a SIGINT jumps) the temporaries freed and the status returned: 0,
    1 (no memory) or `FG_INTERRUPTED`."""
    start = ["volatile int *const fg_count = fg_sigint_count();",
             "const int fg_seen = *fg_count;", "int fg_status = 0;"]
    end = ["fg_end:;"] if exits else []
    end += [f"free({name});" for name, _, stack in _on_stack(temps) if not stack]
    return _alloc(temps) + start + lines + end + ["return fg_status;"]


# The last statement of every loop iteration: Ctrl-C stops the loop (interrupt.py)
_POLL = "if (*fg_count != fg_seen) { fg_status = FG_INTERRUPTED; goto fg_end; }"


class CLoop:
    """A while_loop or scan equation as one C function (see the module docstring), or a
    top-level cond/switch as one C `if`/`else` around its branches' kernels.
    `operands`: (dtype, size) of every pointer parameter, inputs first; `n_in` inputs;
    `consts`: numpy arrays the wrapper passes after the equation's operands."""

    def __init__(self, cname, eqn, bodies):
        self.cname, self.eqn = cname, eqn
        if eqn.prim is while_p:
            self._while(bodies)
        elif eqn.prim is cond_p:
            self._branch(bodies)
        else:
            self._scan(bodies)

    # --- cond / switch at top level: one C if/else, no loop ----------------------------------

    def _branch(self, bodies):
        eqn = self.eqn
        if sum(_nbytes(v.aval) for v in eqn.outvars) > BRANCH_MAX_BYTES:
            raise NotNative("large branch results (the Python if returns them uncopied)")
        cond = _Cond(eqn, self.cname, bodies)
        ins = [f"p_a{i}" for i in range(len(eqn.invars))]
        outs = [f"p_o{j}" for j in range(len(eqn.outvars))]
        holder = _Temps(f"{self.cname}_r")
        lines = cond.statements(holder, _Node(eqn.invars, eqn.outvars),
                                dict(zip(eqn.invars, ins)), outs)
        self.consts = []  # a branch with bound constants is NotNative (see _Cond)
        self.body_lines = _frame(holder.temps, lines, cond.exits)
        self.kernels = cond.kernels

    # --- while ------------------------------------------------------------------------------

    def _while(self, bodies):
        p, eqn = self.eqn.params, self.eqn
        ncc, nbc = p["cond_nconsts"], p["body_nconsts"]
        cond = _Body(bodies(p["cond_jaxpr"]), f"{self.cname}_c", bodies)
        body = _Body(bodies(p["body_jaxpr"]), f"{self.cname}_b", bodies)
        ins = [f"p_a{i}" for i in range(len(eqn.invars))]
        outs = [f"p_o{j}" for j in range(len(eqn.outvars))]
        cj, bj = cond.program.jaxpr, body.program.jaxpr
        c_where = dict(zip(cj.invars, ins[:ncc] + outs))
        b_where = dict(zip(bj.invars, ins[ncc:ncc + nbc] + outs))
        self._bind_consts([cond, body], [c_where, b_where], len(eqn.invars))
        c_lines, b_lines = cond.statements(c_where), body.statements(b_where)
        pred = c_where[cj.outvars[0]]
        copy, stage = self._carry(bj.outvars, b_where, outs, bj.invars, f"{self.cname}_s")
        init = [f"memcpy({o}, {a}, {_nbytes(v.aval)});"
                for o, a, v in zip(outs, ins[ncc + nbc:], eqn.outvars)]
        temps = cond.temps + body.temps + stage
        loop = (["for (;;) {"] + ["    " + ln for ln in c_lines]
                + [f"    if (!{pred}[0]) break;"]
                + ["    " + ln for ln in b_lines + copy + [_POLL]] + ["}"])
        self.body_lines = _frame(temps, init + loop)
        self.kernels = cond.kernels + body.kernels

    # --- scan -------------------------------------------------------------------------------

    def _scan(self, bodies):
        p, eqn = self.eqn.params, self.eqn
        nc, nk, length = p["num_consts"], p["num_carry"], p["length"]
        body = _Body(bodies(p["jaxpr"]), f"{self.cname}_b", bodies)
        ins = [f"p_a{i}" for i in range(len(eqn.invars))]
        outs = [f"p_o{j}" for j in range(len(eqn.outvars))]
        bj = body.program.jaxpr
        xs = [f"({x} + _i * {math.prod(v.aval.shape[1:])})"
              for x, v in zip(ins[nc + nk:], eqn.invars[nc + nk:])]
        where = dict(zip(bj.invars, ins[:nc] + outs[:nk] + xs))
        self._bind_consts([body], [where], len(eqn.invars))
        lines = body.statements(where)
        ys = []
        for o, v, src in zip(outs[nk:], eqn.outvars[nk:], bj.outvars[nk:]):
            size = math.prod(v.aval.shape[1:])
            nbytes = size * np.dtype(v.aval.dtype).itemsize
            ys.append(f"memcpy({o} + _i * {size}, {where[src]}, {nbytes});")
        copy, stage = self._carry(bj.outvars[:nk], where, outs[:nk], bj.invars,
                                  f"{self.cname}_s")
        init = [f"memcpy({o}, {a}, {_nbytes(v.aval)});"
                for o, a, v in zip(outs[:nk], ins[nc:nc + nk], eqn.outvars[:nk])]
        i = f"{length - 1} - _it" if p["reverse"] else "_it"
        loop = ([f"for (long long _it = 0; _it < {length}; ++_it) {{",
                 f"    const long long _i = {i};"]
                + ["    " + ln for ln in lines + ys + copy + [_POLL]] + ["}"])
        temps = body.temps + stage
        self.body_lines = _frame(temps, init + loop)
        self.kernels = body.kernels

    # --- shared -----------------------------------------------------------------------------

    def _bind_consts(self, bodies, wheres, first):
        self.consts = []
        for body, where in zip(bodies, wheres):
            for v, value in body.consts:
                where[v] = f"p_a{first + len(self.consts)}"
                self.consts.append(np.ascontiguousarray(np.asarray(getattr(value, "_value",
                                                                           value))))

    @staticmethod
    def _carry(outvars, where, carries, invars, prefix):
        """Statements writing the body's results into the carry; passthrough inputs are
        staged first (returns (lines, staging temps))."""
        inputs, stage, first, then = set(invars), [], [], []
        for k, (v, dst) in enumerate(zip(outvars, carries)):
            if where[v] == dst:
                continue  # the carry passes through unchanged
            if v in inputs:
                name = f"{prefix}{k}"
                stage.append((name, v.aval))
                first.append(f"memcpy({name}, {where[v]}, {_nbytes(v.aval)});")
                then.append(f"memcpy({dst}, {name}, {_nbytes(v.aval)});")
            else:
                then.append(f"memcpy({dst}, {where[v]}, {_nbytes(v.aval)});")
        return first + then, stage

    @property
    def operands(self):
        avals = [a.aval for a in self.eqn.invars]
        avals += [_Shaped(c) for c in self.consts]
        avals += [v.aval for v in self.eqn.outvars]
        return [(np.dtype(a.dtype), math.prod(a.shape)) for a in avals]

    @property
    def n_in(self):
        return len(self.eqn.invars) + len(self.consts)

    @property
    def needs(self):
        """The runtime pieces the loop function and its kernels use."""
        found = [cnode.STDLIB, interrupt.INTERRUPT]
        for ck, _ in self.kernels:
            found += getattr(ck, "needs", None) or []
        return found

    def source(self):
        params = []
        for k, (dt, _) in enumerate(self.operands):
            t = ops.storage(dt.name)
            params.append(f"const {t} *p_a{k}" if k < self.n_in else f"{t} *p_o{k - self.n_in}")
        parts = [ck.source() for ck, _ in self.kernels]  # kernels and small dots
        what = "branches" if self.eqn.prim is cond_p else "loop"
        head = f"/* {self.eqn.prim.name} {what} */\nint {self.cname}({', '.join(params)}) {{"
        parts.append("\n".join([head] + ["    " + ln for ln in self.body_lines] + ["}"]))
        return "\n".join(parts) + "\n"


class _Temps:
    """Where a top-level cond's results go before they are copied out: `prefix`, `temps`."""

    def __init__(self, prefix):
        self.prefix, self.temps = prefix, []


class _Shaped:
    def __init__(self, value):
        self.shape, self.dtype = value.shape, value.dtype
