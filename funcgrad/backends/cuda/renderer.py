"""The CUDA renderer: a `KernelPlan` becomes one self-contained CUDA C module.

One loop walks the plan (offsets, loads, the body's instructions, stores, reduction
updates: the statements of the one C base, `cstyle.CStyleLanguage`, through the dialect
`ops.CudaC`) and produces lists of lines; a template per strategy (`templates/*.cu.j2`, one
jinja2 Environment with StrictUndefined) only arranges them.
Every identifier the renderer prints is prefixed (`p_` pointers, `v_` values, `o_`/`ob_`
offsets, `acc`, `_`-names for loop variables), so no input name can shadow another.

    render(plan) -> str        the module: prelude + the kernel (and a split's final pass)
    signature(plan) -> list    per entry point: [(param name, C type, role)] for launchers
"""

import os

import jinja2
import numpy as np

from funcgrad.backends.cuda import ops
from funcgrad.backends.cuda.plan import WARP
from funcgrad.compiler.fusion import CODEGEN_VERSION
from funcgrad.core import ReduceOp

TEMPLATE_DIR = os.path.join(os.path.dirname(__file__), "templates")
ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
                         undefined=jinja2.StrictUndefined, trim_blocks=True,
                         lstrip_blocks=True, keep_trailing_newline=True)
TEMPLATES = {"elementwise": "elementwise.cu.j2", "thread_per_row": "reduce_thread.cu.j2",
             "warp_per_row": "reduce_warp.cu.j2", "block_per_row": "reduce_block.cu.j2"}
INDEX_TYPES = {"int32": "int", "int64": "long long"}


def prelude():
    return ENV.get_template("prelude.cu.j2").render(version=CODEGEN_VERSION,
                                                    **ops.CudaC.prelude_pieces())


def render(plan):
    """The CUDA source of `plan`'s module (see the module docstring)."""
    return _Renderer(plan).module()


def signature(plan):
    """Per entry point of `plan` (in launch order), its parameters as
    `(name, C type, role)` with role "in", "out" or "part" (split partials)."""
    return _Renderer(plan).signatures()


class _Renderer(ops.CudaC):
    def __init__(self, plan):
        super().__init__(plan)
        self.plan = plan
        self.idx = INDEX_TYPES[plan.index]

    # --- pieces shared by every strategy ----------------------------------------------------

    def signatures(self):
        p = self.plan
        ins = [(f"p_{o.name}", f"const {self.pointee(o.dtype)}*", "in") for o in p.inputs]
        outs = [(f"p_{o.name}", f"{self.pointee(o.dtype)}*", "out") for o in p.spec.outputs]
        parts = [(f"p_part{j}", f"{self.ctype(r.acc)}*", "part")
                 for j, r in enumerate(p.reductions)]
        if p.splits == 1:
            return [ins + outs]
        red_outs = [(f"p_{r.out}", f"{self.pointee(r.dtype)}*", "out") for r in p.reductions]
        finals = [(n, "const " + t, "part") for n, t, _ in parts]
        return [ins + outs + parts, finals + red_outs]

    @staticmethod
    def params(sig):
        return ", ".join(f"{t} __restrict__ {n}" for n, t, _ in sig)

    def decompose(self, var, dims, operands, prefix, base=None):
        """Lines computing `{prefix}{name}` (the element offset of index `var` over `dims`)
        for each operand `(name, strides)`; returns (lines, {name: offset expression})."""
        idx, lines, exprs = self.idx, [], {}
        contiguous = _contiguous_strides(dims)
        todo = []
        for name, strides in operands:
            start = f"{base[name]} + " if base and base.get(name, "0") != "0" else ""
            if not any(strides):
                exprs[name] = base.get(name, "0") if base else "0"
            elif tuple(strides) == contiguous:
                exprs[name] = f"{start}{var}"
            elif len(dims) == 1:
                exprs[name] = f"{start}{var} * {strides[0]}"
            else:
                todo.append((name, strides))
                exprs[name] = f"{prefix}{name}"
        if todo:
            for name, _ in todo:
                b = base.get(name, "0") if base else "0"
                lines.append(f"{idx} {prefix}{name} = {b};")
            parts = [f"{idx} _r = {var};"]
            for d in reversed(range(len(dims))):
                acc = " ".join(f"{prefix}{name} += _c{d}{_times(s[d])};"
                               for name, s in todo if s[d])
                if d > 0:
                    parts.append(f"const {idx} _c{d} = _r % {dims[d]}; _r /= {dims[d]}; {acc}")
                elif acc:
                    parts.append(f"const {idx} _c0 = _r; {acc}")
            lines.append("{ " + " ".join(p for p in parts if p) + " }")
        return lines, exprs

    def out_values(self):
        """Elementwise outputs: (plan operand, body value name)."""
        values = {o.name: o.value for o in self.plan.spec.outputs if o.reduce is None}
        return [(o, values[o.name]) for o in self.plan.outputs]

    # --- elementwise -------------------------------------------------------------------------

    def elementwise(self):
        p = self.plan
        dims = p.outer + p.inner
        lines, offs = self.decompose("_i", dims, [(o.name, o.strides) for o in p.inputs], "o_")
        lines += [self.load(inp.name, inp.dtype, offs[inp.name]) for inp in p.inputs]
        lines += [self.instr(i) for i in p.spec.body]
        lines += [self.store(o.name, o.dtype, "_i", f"v_{v}") for o, v in self.out_values()]
        return {"elem": lines, "n": p.n}

    def elementwise_vec(self):
        p = self.plan
        dims = p.outer + p.inner
        head, offs = self.decompose("_i", dims, [(o.name, o.strides) for o in p.inputs], "o_")
        lane = []
        for inp in p.inputs:
            if inp.vec:
                vt = ops.VEC_TYPES[inp.dtype]
                head.append(f"const {vt} l_{inp.name} = *reinterpret_cast<const {vt}*>("
                            f"p_{inp.name} + {offs[inp.name]});")
                lane.append(f"const {self.value_type(inp.dtype)} v_{inp.name} = "
                            f"({self.value_type(inp.dtype)})(&l_{inp.name}.x)[_e];")
            else:
                head.append(self.load(inp.name, inp.dtype, offs[inp.name]))
        tail = []
        lane += [self.instr(i) for i in p.spec.body]
        for o, v in self.out_values():
            head.append(f"{self.pointee(o.dtype)} s_{o.name}[4];")
            lane.append(f"s_{o.name}[_e] = v_{v};")
            vt = ops.VEC_TYPES[o.dtype]
            cast = "(unsigned char)" if o.dtype == "bool" else ""
            elems = ", ".join(f"{cast}s_{o.name}[{e}]" for e in range(4))
            tail.append(f"*reinterpret_cast<{vt}*>(p_{o.name} + _i) = make_{vt}({elems});")
        return {"head": head, "lane": lane, "tail": tail, "n": p.n}

    # --- reductions --------------------------------------------------------------------------

    def reduction(self):
        p = self.plan
        nouter = len(p.outer)
        row = [f"const {self.idx} _row = _vrow % {p.rows};" if p.splits > 1 else
               f"const {self.idx} _row = _vrow;"]
        if p.splits > 1:
            row.append(f"const {self.idx} _k0 = (_vrow / {p.rows}) * {p.chunk};")
            row.append(f"const {self.idx} _k1 = _k0 + {p.chunk} < {p.k} ? _k0 + {p.chunk} "
                       f": {p.k};")
        else:
            row.append(f"const {self.idx} _k0 = 0, _k1 = {p.k};")
        ops_all = list(p.inputs) + list(p.outputs)
        outer = [(o.name, o.strides[:nouter]) for o in ops_all]
        lines, base = self.decompose("_row", p.outer, outer, "ob_")
        row += lines
        for name, off in list(base.items()):
            if off not in ("0", f"{'ob_' + name}") and not off.isidentifier():
                row.append(f"const {self.idx} ob_{name} = {off};")
                base[name] = f"ob_{name}"
        inner = [(o.name, o.strides[nouter:]) for o in ops_all]
        elem, offs = self.decompose("_k", p.inner, inner, "o_", base)
        hoisted = {inp.name for inp in p.inputs if not any(inp.strides[nouter:])}
        for inp in p.inputs:
            (row if inp.name in hoisted else elem).append(
                self.load(inp.name, inp.dtype, offs[inp.name]))
        for i in p.spec.body:
            if all(not isinstance(a, str) or a in hoisted for a in i.args):
                hoisted.add(i.dst)
                row.append(self.instr(i))
            else:
                elem.append(self.instr(i))
        scan = list(elem)  # what computes the reduced values, for `zero_sign`
        elem += [self.store(o.name, o.dtype, offs[o.name], f"v_{v}")
                 for o, v in self.out_values()]
        pieces = {"row": row, "elem": elem, "vrows": p.rows * p.splits, "shuffle": [],
                  "write": [], "smem": [], "smem_store": [], "smem_load": [], "fold": []}
        nwarps = p.block // WARP
        for j, r in enumerate(p.reductions):
            acc, at = f"acc{j}", self.ctype(r.acc)
            ident = self.identity(r.op, r.dtype, r.acc)
            value = self.cast(f"v_{r.value}", self.dtypes[r.value], r.acc)
            decl, update, folded = self.fold(j, r, value)
            row += decl
            elem.append(update)
            pieces["fold"] += folded
            shfl = f"__shfl_down_sync(0xffffffffu, {acc}, _s)"
            pieces["shuffle"].append(f"{acc} = {self.combine(r.op, acc, shfl, r.acc, r.dtype)};")
            pieces["smem"].append(f"__shared__ {at} sm_{acc}[{nwarps}];")
            pieces["smem_store"].append(f"sm_{acc}[_warp] = {acc};")
            pieces["smem_load"].append(f"{acc} = _lane < {nwarps} ? sm_{acc}[_lane] : {ident};")
            if p.strategy != "thread_per_row":  # lanes fold interleaved elements
                back = self.scan_backward(r)
                loop = (f"for ({self.idx} _k = _k1 - 1; _k >= _k0; --_k) {{" if back else
                        f"for ({self.idx} _k = _k0; _k < _k1; ++_k) {{")
                pieces["write"] += self.zero_sign(r, acc, [loop], scan)
            if p.splits > 1:
                pieces["write"].append(f"p_part{j}[_vrow] = {acc};")
            else:
                pieces["write"].append(self.store(r.out, r.dtype, "_vrow",
                                                  f"({self.ctype(r.dtype)}){acc}"))
        return pieces

    def fold(self, j, r, value):
        """(declarations, the statement folding `value` into `acc<j>`, statements after the
        fold) of reduction `r`: its `ReduceOp`'s combine, or for a float sum (`pairwise`)
        Kahan's compensated sum (the running error in `cmp<j>`, subtracted at the end), so a
        thread's long run of additions, and the final pass over thousands of partial sums,
        are as accurate as numpy's pairwise sum (float16 accumulates in float32)."""
        acc, at = f"acc{j}", self.ctype(r.acc)
        decl = [f"{at} {acc} = {self.identity(r.op, r.dtype, r.acc)};"]
        if not (ReduceOp.named(r.op).pairwise and np.dtype(r.acc).kind == "f"):
            return decl, f"{acc} = {self.combine(r.op, acc, value, r.acc, r.dtype)};", []
        c = f"cmp{j}"
        update = (f"{{ const {at} _y = {value} - {c}; const {at} _t = {acc} + _y; "
                  f"{c} = (_t - {acc}) - _y; {acc} = _t; }}")
        return decl + [f"{at} {c} = {self.literal(0, r.acc)};"], update, [f"{acc} -= {c};"]

    def final(self):
        p = self.plan
        init, combine, write = [], [], []
        for j, r in enumerate(p.reductions):
            acc = f"acc{j}"
            decl, update, folded = self.fold(j, r, f"p_part{j}[_s * {p.rows} + _row]")
            init += decl
            combine.append(update)
            write += folded
            write.append(self.store(r.out, r.dtype, "_row", f"({self.ctype(r.dtype)}){acc}"))
        return {"init": init, "combine": combine, "write": write, "rows": p.rows,
                "splits": p.splits}

    # --- the module --------------------------------------------------------------------------

    def module(self):
        p = self.plan
        sigs = self.signatures()
        common = {"block": p.block, "idx": self.idx}
        if p.strategy == "elementwise":
            pieces = self.elementwise_vec() if p.vec == 4 else self.elementwise()
            template = "elementwise_vec.cu.j2" if p.vec == 4 else TEMPLATES["elementwise"]
        else:
            pieces, template = self.reduction(), TEMPLATES[p.strategy]
        parts = [prelude(), ENV.get_template(template).render(
            name=p.name, params=self.params(sigs[0]), **common, **pieces)]
        if p.splits > 1:
            parts.append(ENV.get_template("reduce_final.cu.j2").render(
                name=p.name + "_final", params=self.params(sigs[1]), **common, **self.final()))
        return "\n".join(parts)


def _contiguous_strides(dims):
    out, stride = [], 1
    for d in reversed(dims):
        out.append(stride)
        stride *= d
    return tuple(reversed(out))


def _times(s):
    return "" if s == 1 else f" * {s}"
