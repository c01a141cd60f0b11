"""One fused kernel as one C function: loops over the kernel's iteration space.

The layout (reduced axes moved last, unit axes dropped, neighbouring axes merged where
every operand allows it, element strides per operand) is `backends.layout.layout_kernel`'s,
as the CUDA planner's; the statements of an element (loads, instructions, stores) are the
one C base's (`cstyle.CStyleLanguage`, through the dialect `ops.NativeC`). This module
prints them as nested `for` loops, innermost contiguous, so the C compiler vectorizes it:

    /* kernel k0_add_tanh: f32[64,1000] */
    void fg_k0(const float *restrict p_in0, const float *restrict p_in1,
               float *restrict p_out0) {
        for (long long i0 = 0; i0 < 64; ++i0) {
            #pragma omp simd
            for (long long i1 = 0; i1 < 1000; ++i1) {
                const float v_in0 = p_in0[i0 * 1000 + i1];
                const float v_in1 = p_in1[i1];
                const float v_t0 = (v_in0 * v_in1);   /* model.py:3 (f) */
                const float v_t1 = tanhf(v_t0);       /* model.py:3 (f) */
                p_out0[i0 * 1000 + i1] = v_t1;
            }
        }
    }

Reductions: the outer (kept) axes are loops, each row accumulates over the inner axes as
its `ReduceOp` says (`row_fold`): in SIMD lanes where it names an OpenMP operator, float16/32
sums and products in double and float64 sums pairwise over blocks, so results are as
accurate as numpy's pairwise sums or better. Large kernels run their outermost loop in
blocks on the thread pool (`threads.py`): a task function per block, and the kernel function
hands the blocks to the pool. Every identifier is generated (`p_`, `v_`, `i`/`k` loop
counters, `acc`), user text appears only in comments through `compiler.escape`. Float16
values are rounded to float16 after every instruction, as numpy does (the base's
narrow-float policy).
"""

import math

import numpy as np

from funcgrad.backends.layout import layout_kernel, row_major
from funcgrad.backends.native import cnode, ops, threads
from funcgrad.backends.native.threads import MAX_BLOCKS
from funcgrad.compiler import escape
from funcgrad.core import ReduceOp

# Kernels from this size on run on the thread pool. 64k elements gains alone (a tanh kernel
# 31 -> 21 us on two cores) but loses in a GPT step (34-37 against 31-34 ms: workers kept
# spinning beside OpenBLAS's threads).
PARALLEL_MIN_ELEMENTS = 1 << 17
PARALLEL_BLOCK = 1 << 14  # elements (at least) per block a thread claims
COLUMN_BLOCK = 256  # rows a column reduction accumulates side by side (on the stack)
# Elementwise kernels streaming this many bytes or more run their innermost loop in chunks
# of `PREFETCH_CHUNK` elements, each first asking for the cache lines `PREFETCH_BYTES`
# ahead in every array it reads (`FG_PREFETCH`, ops.PRELUDE). The hardware prefetchers of
# this project's Xeon keep too few lines in flight for several streams coming from L3 or
# memory: after 64 MiB of other writes, one thread, an Adam update over 670k floats took
# 1.32 -> 1.10 ms and gelu(x*a+b) on 4M floats 3.45 -> 2.92 ms (RESULTS.md, "Prefetching").
PREFETCH_MIN_BYTES = 1 << 20
PREFETCH_BYTES = 2048
PREFETCH_CHUNK = 64
# float64 sums add blocks of this many elements (each in SIMD lanes) pairwise, as numpy's
# pairwise sum adds blocks of 128 (in 8 lanes): errors grow with log2 of the length
PAIRWISE_BLOCK = 128


class Tasks(cnode.Node):
    """The outermost loop of a kernel run in `count` blocks on the thread pool: block `_t`
    starts with `head` (its bounds) and runs `body`. `CKernel.functions` prints it as a task
    function and a kernel function calling `fg_parallel` (printed inline, it is the loop over
    the blocks, as a pool without threads runs it)."""

    def __init__(self, count, head, body):
        self.count, self.head, self.body = count, head, list(body)

    def emit(self, out, indent):
        cnode.For("_t", 0, self.count, [cnode.Stmt(self.head)] + self.body).emit(out, indent)


class CKernel(ops.NativeC):
    """The C function of one `KernelSpec` (raises `ops.Unsupported` when C cannot print
    it). `params` are (role, spec operand name, C type) in call order: inputs, then
    outputs as the spec lists them."""

    def __init__(self, spec, cname, eqns=()):
        super().__init__(layout_kernel(spec))
        self.spec, self.cname, self.plan = spec, cname, self.layout
        self.tasks = 0  # blocks run on the thread pool (`nest` sets it; 0: one C loop)
        self.comments = {i.dst: _comment(e) for i, e in zip(spec.body, eqns)}
        self.params = ([("in", inp.name, self.pointee(inp.dtype)) for inp in spec.inputs]
                       + [("out", o.name, self.pointee(o.dtype)) for o in spec.outputs])
        self.body = [self.instr(i, self.comments.get(i.dst))
                     for i in spec.body]  # raises Unsupported early
        self.tree = self.reduction() if self.plan.reductions else self.elementwise()

    def functions(self, restrict=True):
        """The kernel's C functions (`cnode.Function`s): the kernel, preceded by its task
        function when its blocks run on the pool; `restrict=False` when an output may share
        an input's buffer."""
        q = " *restrict " if restrict else " *"
        params = [f"{'const ' if role == 'in' else ''}{t}{q}p_{n}" for role, n, t in self.params]
        spec = self.spec
        head = f"kernel {escape.comment(spec.name)}: {list(spec.iter_shape)}"
        head += f", reduces axes {list(spec.reduce_axes)}" if spec.reduce_axes else ""
        tree = self.tree
        if len(tree) == 1 and isinstance(tree[0], Tasks):
            return self.task_functions(head, params, q, tree[0])
        return [cnode.Function("void", self.cname, params, tree, head)]

    def source(self, restrict=True):
        """The C text of `functions`."""
        return "".join(fn.source() for fn in self.functions(restrict))

    @property
    def needs(self):
        """The runtime pieces the kernel uses: the thread pool when it runs in blocks."""
        return [threads.POOL] if self.tasks > 1 else []

    def task_functions(self, head, params, q, tasks):
        """The kernel as a task function running one block `_t` of its outermost loop and
        the kernel function, which runs its `tasks` blocks on the pool (`threads.py`)."""
        unpack = []
        for k, (role, n, t) in enumerate(self.params):
            c = "const " if role == "in" else ""
            unpack.append(cnode.Stmt(f"{c}{t}{q}p_{n} = ({c}{t} *)fg_a[{k}];"))
        task = cnode.Function("void", f"{self.cname}_task",
                              ["void *const *fg_a", "long long _t"],
                              unpack + [cnode.Stmt(tasks.head)] + tasks.body, head,
                              static=True)
        ptrs = ", ".join(f"(void *)p_{n}" for _, n, _ in self.params)
        call = [cnode.Stmt(f"void *const fg_a[] = {{{ptrs}}};"),
                cnode.Stmt(f"fg_parallel({self.cname}_task, fg_a, {tasks.count});")]
        return [task, cnode.Function("void", self.cname, params, call, needs=[threads.POOL])]

    # --- pieces --------------------------------------------------------------------------

    def out_values(self):
        values = {o.name: o.value for o in self.spec.outputs if o.reduce is None}
        return [(o, values[o.name]) for o in self.plan.outputs]

    def nest(self, dims, var, body, simd=False, pragma=None, work=None, fetch=None):
        """`body` inside `for` loops over `dims` with counters `{var}0, {var}1...`; the
        innermost gets `#pragma omp simd` when `simd` (or `pragma`). With `work` (the
        elements one step of the outermost loop costs), a kernel of
        `PARALLEL_MIN_ELEMENTS` or more runs that loop in blocks of about `PARALLEL_BLOCK`
        elements on the thread pool: the nest is then one `Tasks`. With `fetch` (the
        prefetch statements of a chunk starting at a counter), the innermost loop runs in
        chunks of `PREFETCH_CHUNK` (see `prefetches`)."""
        tasks, rows = self.blocks(dims[0] if dims else 1, work)
        inner = list(body)
        for d in reversed(range(len(dims))):
            lo, hi = ("_lo", "_hi") if d == 0 and tasks > 1 else (0, dims[d])
            last = d == len(dims) - 1
            prag = "omp simd" if last and simd else (pragma if last else None)
            if last and simd and fetch:
                c = PREFETCH_CHUNK
                loop = cnode.For(f"{var}{d}", "_c", "_ce", inner, prag)
                inner = [cnode.For("_c", lo, hi, [
                    cnode.Stmt(f"const long long _ce = _c + {c} < {hi} ? _c + {c} : {hi};"),
                    *fetch("_c"), loop], step=c)]
            else:
                inner = [cnode.For(f"{var}{d}", lo, hi, inner, prag)]
        if tasks > 1:
            n = dims[0]
            self.tasks = tasks
            head = (f"const long long _lo = _t * {rows}, "
                    f"_hi = _lo + {rows} < {n} ? _lo + {rows} : {n};")
            return [Tasks(tasks, head, inner)]
        return inner

    def prefetches(self, dims, counters):
        """None, or for a kernel streaming `PREFETCH_MIN_BYTES` or more: a function of the
        innermost counter's value at a chunk's start giving the `FG_PREFETCH` statements of
        the lines `PREFETCH_BYTES` ahead in each array read whole (row-major over `dims`;
        broadcast rows stay in cache anyway). Outputs are not fetched: a line an output
        writes is read by then, or is new and costs the same either way."""
        if not dims or dims[-1] < PREFETCH_CHUNK:
            return None
        n, whole = math.prod(dims), row_major(dims)
        streams = [o for o in self.plan.inputs if tuple(o.strides) == whole]
        moved = sum(n * np.dtype(o.dtype).itemsize for o in self.plan.inputs + self.plan.outputs
                    if tuple(o.strides) == whole)
        if not streams or moved < PREFETCH_MIN_BYTES:
            return None

        def fetch(start):
            lines = []
            for o in streams:
                size = 2 if o.dtype == "float16" else np.dtype(o.dtype).itemsize
                at = _offset(counters[:-1] + [start], o.strides)
                ahead = PREFETCH_BYTES // size
                for k in range(max(1, PREFETCH_CHUNK * size // 64)):
                    lines.append(cnode.Stmt(
                        f"FG_PREFETCH(p_{o.name}, {at} + {ahead + k * 64 // size});"))
            return lines
        return fetch

    @staticmethod
    def blocks(n, work):
        """(tasks, steps per task) of a loop of `n` steps costing `work` elements each: one
        task below `PARALLEL_MIN_ELEMENTS` elements, else blocks of `PARALLEL_BLOCK`
        elements or more, at most `threads.MAX_BLOCKS` of them."""
        if work is None or n * work < PARALLEL_MIN_ELEMENTS or n < 2:
            return 1, n
        rows = max(-(-PARALLEL_BLOCK // max(work, 1)), -(-n // MAX_BLOCKS))
        return -(-n // rows), rows

    def elementwise(self):
        p = self.plan
        dims = p.outer + p.inner
        counters = [f"i{d}" for d in range(len(dims))]
        return self.nest(dims, "i", self.element(counters), simd=True,
                         work=math.prod(dims[1:]), fetch=self.prefetches(dims, counters))

    def reduction(self):
        p = self.plan
        if len(p.outer) == 1 and p.rows > 1 and not self._rows_contiguous():
            return self.column_reduction()
        no, ni = len(p.outer), len(p.inner)
        outer = [f"i{d}" for d in range(no)]
        counters = outer + [f"k{d}" for d in range(ni)]
        row = _offset(outer, row_major(p.outer)) if no else "0"
        init, inner, write, fix = [], self.element(counters), [], []
        folds = [self.row_fold(j, r) for j, r in enumerate(p.reductions)]
        for j, (r, f) in enumerate(zip(p.reductions, folds)):
            init += [cnode.Stmt(x) for x in f["init"]]
            inner.append(cnode.Stmt(f["update"]))
            fix += self.row_zero_sign(j, r, counters)
            result = f["result"]
            if r.dtype in ops.NARROW and _acc_dtype(r) == "float64":  # one rounding
                result = f"{ops.NARROW[r.dtype].round}_d({result})"
            write.append(cnode.Stmt(
                self.store(r.out, r.dtype, row, f"({ops.ctype(r.dtype)}){result}")))
        clauses = [c for f in folds for c in f["clauses"]]
        lanes = bool(p.inner) and None not in clauses  # partial results in SIMD lanes (in order)
        pragma = f"omp simd {' '.join(clauses)}" if lanes else None
        blocks = [f["block"] for f in folds if f["block"]]
        starts, ends = [cnode.Stmt(i) for i, _ in blocks], [cnode.Stmt(a) for _, a in blocks]
        if blocks and p.inner:  # the innermost loop in blocks, whose sums add up pairwise
            n, c, b = p.inner[-1], counters[-1], PAIRWISE_BLOCK
            loop = cnode.For(c, "_kb", "_ke", inner, pragma)
            block = cnode.For("_kb", 0, n, [
                cnode.Stmt(f"const long long _ke = _kb + {b} < {n} ? _kb + {b} : {n};"),
                *starts, loop, *ends], step=b)
            nest = self.nest(p.inner[:-1], "k", [block])
        else:
            nest = starts + self.nest(p.inner, "k", inner, pragma=pragma) + ends
        rows_body = init + nest + fix + write
        work = math.prod(p.outer[1:]) * math.prod(p.inner)
        return self.nest(p.outer, "i", rows_body, work=work if no else None)

    def row_fold(self, j, r):
        """How row reduction `j` (`r`) folds, from its `ReduceOp`: {"init": declarations per
        row, "update": the statement per element, "clauses": its OpenMP clauses (None: the
        fold stays in order), "result": its value after the row, "block": None, or (the
        declaration starting a block, the statement ending it) for a float64 sum, summed
        pairwise over blocks of `PAIRWISE_BLOCK` elements as numpy does (float16/32 sums and
        products accumulate in double instead)."""
        rec, dt = ReduceOp.named(r.op), _acc_dtype(r)
        at, ident, update = self.accumulator(j, r, f"acc{j}")
        kind = np.dtype(dt).kind
        out = {"init": [f"{at} acc{j} = {ident};"], "update": update, "result": f"acc{j}",
               "clauses": [f"reduction({rec.openmp}:acc{j})"], "block": None}
        if rec.openmp is None or kind in "iu" and not rec.selects:
            out["clauses"] = [None]  # integers wrap: lanes would combine in signed arithmetic
        elif rec.selects and kind == "f" and self.plan.outputs:
            out["clauses"] = [None]  # in order, numpy's tie rule: no second reading of the row
        elif rec.selects and kind == "f":  # NaN apart (a flag): lanes combine with plain max
            v, cmp = f"v_{r.value}", ">" if rec.openmp == "max" else "<"
            out["update"] = f"acc{j} = {v} {cmp} acc{j} ? {v} : acc{j}; nan{j} |= {v} != {v};"
            out["init"].append(f"int nan{j} = 0;")
            out["result"] = f"(nan{j} ? {ops.literal(float('nan'), dt)} : acc{j})"
            out["clauses"].append(f"reduction(|:nan{j})")
        elif rec.pairwise and r.dtype == "float64":
            out["init"] = [f"fg_pairwise pw{j}; pw{j}.top = 0; pw{j}.n = 0;"]
            out["block"] = (f"{at} acc{j} = {ident};", f"fg_pairwise_add(&pw{j}, acc{j});")
            out["result"] = f"fg_pairwise_total(&pw{j})"
        return out

    def row_zero_sign(self, j, r, counters):
        """`zero_sign`'s lines for reduction `j` of a row folded in SIMD lanes: the row's
        loops again, backward (float16: forward). Not where the kernel also writes
        elementwise outputs: one may share an input's buffer, so the row is gone."""
        p = self.plan
        if p.outputs or not p.inner:
            return []
        back = self.scan_backward(r)
        loops = [f"for (long long {c} = {n - 1}; {c} >= 0; --{c}) {{" if back else
                 f"for (long long {c} = 0; {c} < {n}; ++{c}) {{"
                 for c, n in zip(counters[len(p.outer):], p.inner)]
        body = [self.load(inp.name, inp.dtype, _offset(counters, inp.strides))
                for inp in p.inputs] + self.body
        lines = self.zero_sign(r, f"acc{j}", loops, body)
        return [cnode.Lines(lines)] if lines else []

    def column_reduction(self):
        """Rows not contiguous in memory (column sums): blocks of `COLUMN_BLOCK` rows
        accumulate side by side, the reduced axes outside, the rows innermost (SIMD)."""
        p, b = self.plan, COLUMN_BLOCK
        rows = p.rows
        counters = ["i0"] + [f"k{d}" for d in range(len(p.inner))]
        init, inner, write = [], self.element(counters), []
        for j, r in enumerate(p.reductions):
            at, ident, update = self.accumulator(j, r, f"acc{j}[i0 - _r]")
            init += [cnode.Stmt(f"{at} acc{j}[{b}];"), cnode.Stmt(
                f"for (long long i0 = _r; i0 < _e; ++i0) acc{j}[i0 - _r] = {ident};")]
            inner.append(cnode.Stmt(update))
            write.append(cnode.Stmt("for (long long i0 = _r; i0 < _e; ++i0) " + self.store(
                r.out, r.dtype, "i0", f"({ops.ctype(r.dtype)})acc{j}[i0 - _r]")))
        rows_loop = cnode.For("i0", "_r", "_e", inner, "omp simd")
        body = init + self.nest(p.inner, "k", [rows_loop]) + write
        tasks = -(-rows // b)
        end = f"_e = _r + {b} < {rows} ? _r + {b} : {rows};"
        if tasks > 1 and p.n >= PARALLEL_MIN_ELEMENTS:  # a block of rows per task
            self.tasks = tasks
            return [Tasks(tasks, f"const long long _r = _t * {b}, {end}", body)]
        return [cnode.For("_r", 0, rows, [cnode.Stmt(f"const long long {end}")] + body, step=b)]

    def _rows_contiguous(self):
        """Whether the largest input reads each row's reduced elements contiguously."""
        p = self.plan
        if not p.inputs:
            return True
        extent = lambda o: sum((d - 1) * abs(s) for d, s in zip(p.outer + p.inner, o.strides))
        main = max(p.inputs, key=extent)
        return main.strides[-1] == 1 or not any(main.strides[len(p.outer):])

    def element(self, counters):
        """Loads, the body and the elementwise stores of one iteration of the innermost
        loop."""
        p = self.plan
        lines = [self.load(inp.name, inp.dtype, _offset(counters, inp.strides))
                 for inp in p.inputs]
        lines += self.body
        lines += [self.store(o.name, o.dtype, _offset(counters, o.strides), f"v_{v}")
                  for o, v in self.out_values()]
        return [cnode.Stmt(ln) for ln in lines]

    def accumulator(self, j, r, acc):
        """(C type, identity, update statement) of reduction `r` accumulated in `acc`."""
        dt = _acc_dtype(r)
        value = self.cast(f"v_{r.value}", self.dtypes[r.value], dt)
        return (self.ctype(dt), self.identity(r.op, r.dtype, dt),
                f"{acc} = {self.combine(r.op, acc, value, dt, r.dtype)};")


def _acc_dtype(r):
    """The accumulator: the layout's (the `ReduceOp`'s `accumulate`), except that float
    folds which round (sums, products) accumulate in double."""
    if not ReduceOp.named(r.op).selects and r.acc in ("float16", "float32"):
        return "float64"
    return r.acc


def _comment(eqn):
    if eqn is None:
        return None
    return escape.source_location(eqn.source, eqn.prim.name)


def _offset(counters, strides):
    terms = [c if s == 1 else f"{c} * {s}" for c, s in zip(counters, strides) if s]
    return " + ".join(terms) if terms else "0"


def elements(spec):
    return math.prod(spec.iter_shape)
