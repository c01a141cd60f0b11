"""C code as a small tree of objects, printed once (STYLE lesson 14; tinygrad's UOps and
Inductor's `LoopLevel` are the models): a renderer builds statements, loops, branches and
functions, and `Module` prints them with the runtime pieces they declare. Nothing in the
backend reads generated text back.

    body = [Stmt("const float v = p_x[i0];"), Stmt("p_y[i0] = v * 2;")]
    fn = Function("void", "fg_k0", ["const float *restrict p_x", "float *restrict p_y"],
                  [For("i0", 0, 64, body, pragma="omp simd")], comment="kernel k0_mul")
    Module([fn]).source()          # the prelude, the pieces `fn` needs, then fn

    /* kernel k0_mul */
    void fg_k0(const float *restrict p_x, float *restrict p_y) {
        #pragma omp simd
        for (long long i0 = 0; i0 < 64; ++i0) {
            const float v = p_x[i0];
            p_y[i0] = v * 2;
        }
    }

A `Piece` is a named part of the C runtime a function needs (an include, the gemm pointers
`build.load` sets, the thread pool's entry, the Ctrl-C count): a function lists its pieces in
`needs` and the module prints each once, after the pieces it requires. Imports nothing of
funcgrad.
"""

INDENT = "    "


class Piece:
    """A part of the runtime a C function needs: `text` printed once per module, after the
    pieces in `requires`."""

    def __init__(self, name, text, requires=()):
        self.name, self.text, self.requires = name, text, tuple(requires)

    def __repr__(self):
        return f"Piece({self.name!r})"


STDLIB = Piece("stdlib", "#include <stdlib.h>\n")


class Node:
    """A C statement (or several): `emit(out, indent)` appends its lines."""

    def emit(self, out, indent):
        raise NotImplementedError(f"{type(self).__name__} must define emit (Node is abstract)")

    def lines(self, indent=""):
        out = []
        self.emit(out, indent)
        return out


class Stmt(Node):
    """One line of C (a declaration, an assignment, a call, a label, a pragma...)."""

    def __init__(self, text):
        self.text = text

    def emit(self, out, indent):
        out.append(indent + self.text)


class Lines(Node):
    """Lines formatted by someone else (the C base's `zero_sign`), indented as a whole."""

    def __init__(self, lines):
        self.texts = list(lines)

    def emit(self, out, indent):
        out.extend(indent + t for t in self.texts)


class Block(Node):
    """Statements in sequence, `{ }` around them when `braces` (a scope of their own)."""

    def __init__(self, body, braces=False):
        self.body, self.braces = list(body), braces

    def emit(self, out, indent):
        if self.braces:
            out.append(indent + "{")
            emit_all(self.body, out, indent + INDENT)
            out.append(indent + "}")
        else:
            emit_all(self.body, out, indent)


class For(Node):
    """`for (long long var = lo; var < hi; ++var) { body }`, `var += step` when `step` is not 1;
    `pragma` (e.g. "omp simd") is printed on the line before it."""

    def __init__(self, var, lo, hi, body, pragma=None, step=1):
        self.var, self.lo, self.hi, self.step = var, lo, hi, step
        self.body, self.pragma = list(body), pragma

    def header(self):
        v = self.var
        inc = f"++{v}" if self.step == 1 else f"{v} += {self.step}"
        return f"for (long long {v} = {self.lo}; {v} < {self.hi}; {inc})"

    def emit(self, out, indent):
        if self.pragma:
            out.append(f"{indent}#pragma {self.pragma}")
        out.append(f"{indent}{self.header()} {{")
        emit_all(self.body, out, indent + INDENT)
        out.append(indent + "}")


class If(Node):
    """`if (cond) { then } else { orelse }` (an `If` as `orelse` prints as `else if`)."""

    def __init__(self, cond, then, orelse=None):
        self.cond, self.then, self.orelse = cond, list(then), orelse

    def emit(self, out, indent, first=True):
        out.append(f"{indent}{'if' if first else '} else if'} ({self.cond}) {{")
        emit_all(self.then, out, indent + INDENT)
        if isinstance(self.orelse, If):
            self.orelse.emit(out, indent, first=False)
            return
        if self.orelse:
            out.append(indent + "} else {")
            emit_all(self.orelse, out, indent + INDENT)
        out.append(indent + "}")


class Function(Node):
    """A C function: `ret name(params) { body }` with a `/* comment */` line above it;
    `needs`: the `Piece`s it uses (its callees' are gathered by `Module`)."""

    def __init__(self, ret, name, params, body, comment=None, static=False, needs=()):
        self.ret, self.name, self.params = ret, name, list(params)
        self.body, self.comment, self.static = list(body), comment, static
        self.needs = list(needs)

    def signature(self):
        return (f"{'static ' if self.static else ''}{self.ret} {self.name}"
                f"({', '.join(self.params) or 'void'})")

    def emit(self, out, indent):
        if self.comment is not None:
            out.append(f"{indent}/* {self.comment} */")
        out.append(f"{indent}{self.signature()} {{")
        emit_all(self.body, out, indent + INDENT)
        out.append(indent + "}")

    def source(self):
        return "\n".join(self.lines()) + "\n"


def emit_all(nodes, out, indent):
    for n in nodes:
        n.emit(out, indent)


class Module:
    """Functions printed after `prelude` and the pieces they need, each once and in the order
    of first need (a piece after those it requires)."""

    def __init__(self, functions, prelude=""):
        self.functions, self.prelude = list(functions), prelude

    def pieces(self):
        seen = {}

        def add(p):
            if p.name not in seen:
                for r in p.requires:
                    add(r)
                seen[p.name] = p
        for fn in self.functions:
            for p in fn.needs:
                add(p)
        return list(seen.values())

    def source(self):
        head = self.prelude + "".join(p.text for p in self.pieces())
        return head + "".join("\n" + fn.source() for fn in self.functions)
