"""One fused kernel as one C function: loops over the kernel's iteration space.

The layout decisions (reduced axes moved last, unit axes dropped, neighbouring axes merged
where every operand allows it, element strides per operand) are the CUDA planner's
(`cuda.plan.plan_kernel`, which imports no GPU library); this module only prints them as
nested `for` loops, innermost contiguous, so the C compiler vectorizes it:

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

Reductions: the outer (kept) axes are loops, each row accumulates over the inner axes in
order (float sums in double, so results are as accurate as numpy's pairwise sums or
better). Large kernels run their outermost loop in blocks on the thread pool
(`threads.py`): a task function per block, and the kernel function hands the blocks to the
pool. Every identifier is
generated (`p_`, `v_`, `i`/`k` loop counters, `acc`), user text appears only in comments
through `compiler.escape`. Float16 values are rounded to float16 after every instruction,
as numpy does.
"""

import math

import numpy as np

from funcgrad import lax
from funcgrad.backends import cstyle
from funcgrad.backends.cuda.plan import plan_kernel
from funcgrad.backends.native import ops
from funcgrad.backends.native.threads import MAX_BLOCKS
from funcgrad.compiler import escape
from funcgrad.core import Primitive

# Kernels from this size on run on the thread pool. 64k elements gains alone (a tanh kernel
# 31 -> 21 us on two cores) but loses in a GPT step (34-37 against 31-34 ms: workers kept
# spinning beside OpenBLAS's threads).
PARALLEL_MIN_ELEMENTS = 1 << 17
PARALLEL_BLOCK = 1 << 14  # elements (at least) per block a thread claims
_TASKS = "/* blocks on the thread pool */"  # first line of a body `source` splits into tasks
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
_CHUNK_LOOP = "for (long long _c = "  # the header of a chunked innermost loop


def _pointee(dtype):
    """The C type a kernel's array pointer points to: bools as `unsigned char` (a loop that
    loads `_Bool` does not vectorize with gcc 12: a ReLU-backward mask ran at 2 GB/s)."""
    return "unsigned char" if dtype == "bool" else ops.storage(dtype)


class CKernel:
    """The C function of one `KernelSpec` (raises `ops.Unsupported` when C cannot print
    it). `params` are (role, spec operand name, C type) in call order: inputs, then
    outputs as the spec lists them."""

    def __init__(self, spec, cname, eqns=()):
        self.spec, self.cname = spec, cname
        self.plan = plan_kernel(spec)
        self.tasks = 0  # blocks run on the thread pool (`loops` sets it; 0: one C loop)
        self.comments = {i.dst: _comment(e) for i, e in zip(spec.body, eqns)}
        self.dtypes = {inp.name: inp.dtype for inp in spec.inputs}
        self.dtypes.update({i.dst: i.dtype for i in spec.body})
        self.params = ([("in", inp.name, _pointee(inp.dtype)) for inp in spec.inputs]
                       + [("out", o.name, _pointee(o.dtype)) for o in spec.outputs])
        self.invariant, self.recips = self._invariant_values(), []
        self.body = [self.instr(i) for i in spec.body]  # raises Unsupported early
        self.hoisted = self._hoisted()

    def source(self, restrict=True):
        """The C text; `restrict=False` when an output may share an input's buffer."""
        q = " *restrict " if restrict else " *"
        params = ", ".join(f"{'const ' if role == 'in' else ''}{t}{q}p_{n}"
                           for role, n, t in self.params)
        spec = self.spec
        head = f"/* kernel {escape.comment(spec.name)}: {list(spec.iter_shape)}"
        head += f", reduces axes {list(spec.reduce_axes)} */" if spec.reduce_axes else " */"
        body = self.reduction() if self.plan.reductions else self.elementwise()
        if body[:1] == [_TASKS]:  # body[1] is the loop over the blocks: a task per block
            return head + "\n" + self.task_source(params, q, body[2:-1])
        lines = [head, f"void {self.cname}({params}) {{"]
        lines += ["    " + ln for ln in body]
        return "\n".join(lines + ["}"]) + "\n"

    def task_source(self, params, q, block):
        """The kernel as a task function running one block `_t` of its outermost loop and
        the kernel function, which runs its `tasks` blocks on the pool (`threads.py`)."""
        lines = [f"static void {self.cname}_task(void *const *fg_a, long long _t) {{"]
        for k, (role, n, t) in enumerate(self.params):
            c = "const " if role == "in" else ""
            lines.append(f"    {c}{t}{q}p_{n} = ({c}{t} *)fg_a[{k}];")
        lines += block + ["}", f"void {self.cname}({params}) {{"]
        ptrs = ", ".join(f"(void *)p_{n}" for _, n, _ in self.params)
        lines += [f"    void *const fg_a[] = {{{ptrs}}};",
                  f"    fg_parallel({self.cname}_task, fg_a, {self.tasks});", "}"]
        return "\n".join(lines) + "\n"

    # --- pieces --------------------------------------------------------------------------

    def instr(self, instr):
        args, dts = cstyle.operands(instr, self.dtypes)
        text = self._invariant_division(instr, args, dts) or ops.expr(instr, args, dts)
        if instr.dtype == "float16":
            text = f"fg_round_half({text})"
        note = self.comments.get(instr.dst)
        return f"const {_value_type(instr.dtype)} v_{instr.dst} = {text};" + (
            f"  /* {note} */" if note else "")

    def _simd_axis(self):
        """The plan dimension the innermost (vectorized) loop runs over."""
        p = self.plan
        if p.reductions and len(p.outer) == 1 and p.rows > 1 and not self._rows_contiguous():
            return 0  # column reductions: the rows are innermost
        return len(p.outer) + len(p.inner) - 1

    def _invariant_values(self):
        """Names of the values that do not change along the innermost loop: inputs with
        stride 0 there, and instructions on those and on literals."""
        axis = self._simd_axis()
        if axis < 0:  # no loop
            return set()
        out = {inp.name for inp in self.plan.inputs if not inp.strides[axis]}
        for i in self.spec.body:
            if all(not isinstance(a, str) or a in out for a in i.args):
                out.add(i.dst)
        return out

    def _hoisted(self):
        """The invariant values the reciprocals need (their inputs and instructions)."""
        need = set(self.recips)
        for i in reversed(self.spec.body):
            if i.dst in need:
                need.update(a for a in i.args if isinstance(a, str))
        return need

    def hoist(self, heads, counters):
        """`heads` (loop headers) with the reciprocals of invariant divisors, and what they
        are computed from, declared before the innermost loop (once per row)."""
        if not self.recips:
            return heads
        recip = "const double r_{0} = 1.0 / (double)v_{0};".format
        lines = [self.load(inp, _offset(counters, inp.strides)) for inp in self.plan.inputs
                 if inp.name in self.hoisted]
        lines += [recip(inp.name) for inp in self.plan.inputs if inp.name in self.recips]
        for i, ln in zip(self.spec.body, self.body):  # a reciprocal right after its divisor:
            if i.dst in self.hoisted:  # a hoisted quotient (a / (b / c)) may use one
                lines += [ln, recip(i.dst)] if i.dst in self.recips else [ln]
        fors = [k for k, h in enumerate(heads) if h.startswith("for")]
        if not fors:  # the rows are the innermost loop (reduced axes of size 1)
            return heads + lines
        at = fors[-1]
        chunked = [k for k in fors if heads[k].startswith(_CHUNK_LOOP)]
        if chunked:  # before the loop over the chunks
            at = chunked[-1]
        elif at and heads[at - 1].startswith("#pragma omp simd"):
            at -= 1
        return heads[:at] + lines + heads[at:]

    def _invariant_division(self, instr, args, dts):
        """`a / b` in float32 with `b` the same along the innermost loop, as `a` times
        the double reciprocal of `b`, rounded to float: the reciprocal is computed once per
        row (`hoist` declares it before the innermost loop; a literal's is a constant), and
        the quotient is exactly IEEE float division's. Why exact: a float32 quotient `a/b`
        is never a rounding midpoint and lies at least 2^-49 (relative) from one, since
        `a - m*b` is a nonzero multiple of the product of the significands' ulps; the double
        reciprocal and product are within 2^-52 of it, so they round to the same float
        (special values: b = 0, inf, NaN give inf, 0, NaN as the division does;
        tests/test_native_backend.py checks every class of float). None when the rule does
        not apply (other primitives, dtypes, varying divisors)."""
        if Primitive.fusible_named(instr.op) is not lax.div_p or \
                ops.ctype(instr.dtype) != "float" or any(ops.ctype(d) != "float" for d in dts):
            return None
        b = instr.args[1]
        if isinstance(b, str):
            if b not in self.invariant:
                return None
            if b not in self.recips:
                self.recips.append(b)
            return f"((float)((double){args[0]} * r_{b}))"
        value = float(np.dtype(b.dtype).type(b.value))  # as the C literal holds it
        if value == 0.0 or not math.isfinite(value):
            return None
        return f"((float)((double){args[0]} * {float.hex(1.0 / value)}))"

    def load(self, operand, offset):
        text = f"p_{operand.name}[{offset}]"
        if operand.dtype == "float16":
            text = f"fg_h2f({text})"
        elif operand.dtype == "bool":  # numpy's bools are the bytes 0 and 1
            text = f"({text} != 0)"
        return f"const {_value_type(operand.dtype)} v_{operand.name} = {text};"

    @staticmethod
    def store(name, dtype, offset, value):
        return f"p_{name}[{offset}] = {f'fg_f2h({value})' if dtype == 'float16' else value};"

    def out_values(self):
        values = {o.name: o.value for o in self.spec.outputs if o.reduce is None}
        return [(o, values[o.name]) for o in self.plan.outputs]

    def loops(self, dims, var, simd, work=None, fetch=None):
        """`for` headers over `dims` with counters `{var}0, {var}1...`; the innermost gets
        `#pragma omp simd` when `simd`. With `work` (the elements one step of the outermost
        loop costs), a kernel of `PARALLEL_MIN_ELEMENTS` or more runs that loop in blocks
        of about `PARALLEL_BLOCK` elements on the thread pool: the headers then start with
        `_TASKS` and the loop over the blocks `_t` (see `source`). With `fetch` (the
        prefetch statements of a chunk starting at a counter), the innermost loop runs in
        chunks of `PREFETCH_CHUNK` (see `prefetches`)."""
        lines = []
        tasks, rows = self.blocks(dims[0] if dims else 1, work)
        if tasks > 1:
            n = dims[0]
            self.tasks = tasks
            lines += [_TASKS, f"for (long long _t = 0; _t < {tasks}; ++_t) {{",
                      f"const long long _lo = _t * {rows}, "
                      f"_hi = _lo + {rows} < {n} ? _lo + {rows} : {n};"]
        for d, size in enumerate(dims):
            lo, hi = ("_lo", "_hi") if d == 0 and tasks > 1 else ("0", size)
            if d == len(dims) - 1 and simd and fetch:
                c = PREFETCH_CHUNK
                lines += [f"{_CHUNK_LOOP}{lo}; _c < {hi}; _c += {c}) {{",
                          f"const long long _ce = _c + {c} < {hi} ? _c + {c} : {hi};",
                          *fetch("_c")]
                lo, hi = "_c", "_ce"
            if d == len(dims) - 1 and simd:
                lines.append("#pragma omp simd")
            lines.append(f"for (long long {var}{d} = {lo}; {var}{d} < {hi}; ++{var}{d}) {{")
        return lines

    def prefetches(self, dims, counters):
        """None, or for a kernel streaming `PREFETCH_MIN_BYTES` or more: a function of the
        innermost counter's value at a chunk's start giving the `FG_PREFETCH` statements of
        the lines `PREFETCH_BYTES` ahead in each array read whole (row-major over `dims`;
        broadcast rows stay in cache anyway). Outputs are not fetched: a line an output
        writes is read by then, or is new and costs the same either way."""
        if not dims or dims[-1] < PREFETCH_CHUNK:
            return None
        n, whole = math.prod(dims), tuple(_row_major(dims))
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
                    lines.append(f"FG_PREFETCH(p_{o.name}, {at} + {ahead + k * 64 // size});")
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
        head = self.loops(dims, "i", True, math.prod(dims[1:]),
                          self.prefetches(dims, counters))
        return _nest(self.hoist(head, counters), self.element(counters))

    def reduction(self):
        p = self.plan
        if len(p.outer) == 1 and p.rows > 1 and not self._rows_contiguous():
            return self.column_reduction()
        no, ni = len(p.outer), len(p.inner)
        outer = [f"i{d}" for d in range(no)]
        counters = outer + [f"k{d}" for d in range(ni)]
        row = _offset(outer, _row_major(p.outer)) if no else "0"
        init, inner, write = [], self.element(counters), []
        clauses = []
        for j, r in enumerate(p.reductions):
            at, ident, update = self.accumulator(j, r, f"acc{j}")
            init.append(f"{at} acc{j} = {ident};")
            result = f"acc{j}"
            kind = np.dtype(_acc_dtype(r)).kind
            if r.op == "sum" and _acc_dtype(r) == "float64":
                clauses.append(f"reduction(+:acc{j})")
            elif r.op in ("max", "min") and kind == "f":
                # NaN apart (a flag), so that the lanes combine with plain max/min
                v, cmp = f"v_{r.value}", ">" if r.op == "max" else "<"
                update = f"acc{j} = {v} {cmp} acc{j} ? {v} : acc{j}; nan{j} |= {v} != {v};"
                init.append(f"int nan{j} = 0;")
                result = f"(nan{j} ? {ops.literal(float('nan'), _acc_dtype(r))} : acc{j})"
                clauses += [f"reduction({r.op}:acc{j})", f"reduction(|:nan{j})"]
            elif r.op in ("max", "min") and kind in "iu":
                clauses.append(f"reduction({r.op}:acc{j})")
            else:
                clauses.append(None)
            inner.append(update)
            write.append(self.store(r.out, r.dtype, row, f"({ops.ctype(r.dtype)}){result}"))
        heads = self.loops(p.inner, "k", False, False)
        if heads and None not in clauses:  # partial results in SIMD lanes (deterministic)
            heads.insert(len(heads) - 1, f"#pragma omp simd {' '.join(clauses)}")
        heads = self.hoist(heads, counters)
        rows_body = init + _nest(heads, inner) + write
        work = math.prod(p.outer[1:]) * math.prod(p.inner)
        return _nest(self.loops(p.outer, "i", False, work if no else None), rows_body)

    def column_reduction(self):
        """Rows not contiguous in memory (column sums): blocks of `COLUMN_BLOCK` rows
        accumulate side by side, the reduced axes outside, the rows innermost (SIMD)."""
        p, b = self.plan, COLUMN_BLOCK
        rows = p.rows
        counters = ["i0"] + [f"k{d}" for d in range(len(p.inner))]
        init, inner, write = [], self.element(counters), []
        for j, r in enumerate(p.reductions):
            at, ident, update = self.accumulator(j, r, f"acc{j}[i0 - _r]")
            init += [f"{at} acc{j}[{b}];",
                     f"for (long long i0 = _r; i0 < _e; ++i0) acc{j}[i0 - _r] = {ident};"]
            inner.append(update)
            write.append("for (long long i0 = _r; i0 < _e; ++i0) " + self.store(
                r.out, r.dtype, "i0", f"({ops.ctype(r.dtype)})acc{j}[i0 - _r]"))
        rows_loop = ["#pragma omp simd", "for (long long i0 = _r; i0 < _e; ++i0) {"]
        heads = self.hoist(self.loops(p.inner, "k", False, False) + rows_loop, counters)
        body = init + _nest(heads, inner) + write
        tasks = -(-rows // b)
        end = f"_e = _r + {b} < {rows} ? _r + {b} : {rows};"
        if tasks > 1 and p.n >= PARALLEL_MIN_ELEMENTS:  # a block of rows per task
            self.tasks = tasks
            head = [_TASKS, f"for (long long _t = 0; _t < {tasks}; ++_t) {{",
                    f"const long long _r = _t * {b}, {end}"]
        else:
            head = [f"for (long long _r = 0; _r < {rows}; _r += {b}) {{", f"const long long {end}"]
        return _nest(head, body)

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
        loop (less what `hoist` moved out of it)."""
        p = self.plan
        lines = [self.load(inp, _offset(counters, inp.strides)) for inp in p.inputs
                 if inp.name not in self.hoisted]
        lines += [ln for i, ln in zip(self.spec.body, self.body) if i.dst not in self.hoisted]
        lines += [self.store(o.name, o.dtype, _offset(counters, o.strides), f"v_{v}")
                  for o, v in self.out_values()]
        return lines

    def accumulator(self, j, r, acc):
        """(C type, identity, update statement) of reduction `r` accumulated in `acc`."""
        dt = _acc_dtype(r)
        at = ops.ctype(dt)
        value = f"v_{r.value}"
        if ops.ctype(self.dtypes[r.value]) != at:
            value = f"({at}){value}"
        return (at, ops.cstyle.identity(r.op, r.dtype, dt),
                f"{acc} = {ops.cstyle.combine(r.op, acc, value, dt)};")


def _value_type(dtype):
    """The C type of a kernel's value of `dtype`: booleans as `int` 0/1 (a loop mixing
    `_Bool` values with floats does not vectorize with gcc 12: a GP's kernel-matrix kernel,
    with its masks, ran scalar at 10 ns per element), else the dtype's compute type."""
    return "int" if dtype == "bool" else ops.ctype(dtype)


def _acc_dtype(r):
    """The accumulator: the planner's, except float sums, which accumulate in double."""
    if r.op == "sum" and r.acc in ("float16", "float32"):
        return "float64"
    return r.acc


def _comment(eqn):
    if eqn is None:
        return None
    return escape.source_location(eqn.source, eqn.prim.name)


def _row_major(dims):
    out, stride = [0] * len(dims), 1
    for i in reversed(range(len(dims))):
        out[i] = stride if dims[i] != 1 else 0
        stride *= dims[i]
    return out


def _offset(counters, strides):
    terms = [c if s == 1 else f"{c} * {s}" for c, s in zip(counters, strides) if s]
    return " + ".join(terms) if terms else "0"


def _nest(heads, body):
    """`heads` (loop headers, pragmas, declarations) around `body`, indented and closed."""
    out, level = [], 0
    for h in heads:
        out.append("    " * level + h)
        if h.startswith("for"):
            level += 1
    out += ["    " * level + ln for ln in body]
    for d in reversed(range(level)):
        out.append("    " * d + "}")
    return out


def elements(spec):
    return math.prod(spec.iter_shape)
