"""The statements of a native program's C function, one class per kind of operation.

Each step knows the C functions it calls (`functions()`, `cnode.Function`s or verbatim routine
text) and prints its statements once the memory plan has placed every value
(`statements()`): a call with the data pointers of its operands, which `ptr(key)` gives (a
parameter, a workspace region, a view's offset into either). A step whose C returns a status
(`status`: a loop out of memory or stopped by Ctrl-C) ends the program's function with it.

    FG_UPPER_CLEAN(); fg_k3((void *)p0, (void *)(w1 + 7), (void *)p2);     # KernelStep
    if ((fg_status = fg_loop4((void *)w0, (void *)p1))) goto fg_end;        # LoopStep

`FG_UPPER_CLEAN()` (vzeroupper, see `ops.PRELUDE`) precedes every call of a module function.
Imports the native C tree only.
"""

from funcgrad.backends.native import cnode


def _call(fn, ptrs, status=False):
    args = ", ".join(f"(void *){p}" for p in ptrs)
    if status:
        return cnode.Stmt(f"FG_UPPER_CLEAN(); if ((fg_status = {fn}({args}))) goto fg_end;")
    return cnode.Stmt(f"FG_UPPER_CLEAN(); {fn}({args});")


class Raw(cnode.Node):
    """A C function printed by a routine as text (its own `source()`), with its `needs`."""

    def __init__(self, text, needs=()):
        self.text, self.needs = text, list(needs)

    def emit(self, out, indent):
        out.extend(self.text.rstrip("\n").split("\n"))

    def source(self):
        return self.text if self.text.endswith("\n") else self.text + "\n"


class Step:
    """A statement of the program: `ins` and `outs` are value keys, `ptr` their pointers."""

    status = False

    def __init__(self, label, ins, outs):
        self.label, self.ins, self.outs = label, list(ins), list(outs)
        self.ptr = None  # key -> C pointer expression (set when the program is printed)

    def functions(self):
        return []

    def pointers(self):
        return [self.ptr(k) for k in self.ins + self.outs]


class KernelStep(Step):
    """A fused kernel (`kernel.CKernel`); `restrict` is cleared when an output takes an
    input's buffer (in place)."""

    def __init__(self, ckernel, ins, outs):
        super().__init__(ckernel.spec.name, ins, outs)
        self.c, self.restrict = ckernel, True

    def functions(self):
        return self.c.functions(self.restrict)

    def statements(self):
        return [_call(self.c.cname, self.pointers())]


class RoutineStep(Step):
    """A C routine of one equation (`linalg.py`, `shapes.py`, `along_axis.py`, `windows.py`):
    its operands, then its results, contiguous."""

    def __init__(self, routine, ins, outs):
        super().__init__(routine.eqn.prim.name, ins, outs)
        self.c = routine
        self.status = bool(getattr(routine, "status", False))

    def functions(self):
        return [Raw(self.c.source(), getattr(self.c, "needs", ()))]

    def statements(self):
        return [_call(self.c.cname, self.pointers(), self.status)]


class MatmulStep(Step):
    """`np.matmul` as numpy computes it (`matmul.Matmul`): operand pointers at their views'
    first elements."""

    def __init__(self, mm, a, b, out):
        super().__init__("dot_general", [a[0], b[0]], [out])
        self.c, self.offsets = mm, (a[1], b[1])

    def functions(self):
        return [self.c.function()]

    def statements(self):
        ptrs = [f"({self.ptr(k)} + {off})" if off else self.ptr(k)
                for k, off in zip(self.ins, self.offsets)]
        return [_call(self.c.cname, ptrs + [self.ptr(self.outs[0])])]


class LoopStep(Step):
    """A while/scan loop or a cond (`loops.CLoop`): operands, its bound constants (`consts`:
    keys), then its results; returns a status."""

    status = True

    def __init__(self, cloop, ins, consts, outs):
        super().__init__(f"{cloop.eqn.prim.name} loop", ins, outs)
        self.c, self.consts = cloop, list(consts)

    def functions(self):
        return [Raw(self.c.source(), self.c.needs)]

    def pointers(self):
        return [self.ptr(k) for k in self.ins + self.consts + self.outs]

    def statements(self):
        return [_call(self.c.cname, self.pointers(), True)]


class CopyStep(Step):
    """A view C cannot read as it is (not row-major: a transpose, a broadcast, a strided
    slice) copied into a contiguous buffer, in row-major order of the view."""

    def __init__(self, src, view, dst, ctype):
        super().__init__("copy", [src], [dst])
        self.view, self.ctype = view, ctype

    def statements(self):
        v, t = self.view, self.ctype
        src, dst = self.ptr(self.ins[0]), self.ptr(self.outs[0])
        terms = [str(v.offset)] * bool(v.offset) + [
            f"i{k} * {s}" for k, s in enumerate(v.strides) if s and v.shape[k] != 1]
        body = [cnode.Stmt(f"_d[_o++] = _s[{' + '.join(terms) or '0'}];")]
        for k in reversed(range(len(v.shape))):
            body = [cnode.For(f"i{k}", 0, v.shape[k], body)]
        return [cnode.Block([cnode.Stmt(f"const {t} *const _s = (const {t} *){src};"),
                             cnode.Stmt(f"{t} *const _d = ({t} *){dst};"),
                             cnode.Stmt("long long _o = 0;"), *body], braces=True)]
