"""Pictures of programs: the IR and the compiled form as Graphviz DOT, and as SVG.

    to_dot(make_jaxpr(f)(x))           the IR: inputs, one box per equation, the values
    to_dot(jit(f).lower(x))            between them; sub-programs (loop and branch bodies) as
                                       clusters
    to_dot(jit(f).lower(x).compile())  the compiled program: fused kernels as clusters of
                                       their instructions, library calls, each value's buffer
                                       and the memory plan
    to_svg(...), save(obj, "f.svg")    SVG through Graphviz's `dot` (apt-get install graphviz)
    to_graphviz(...)                   a `graphviz.Source` (the `viz` extra; Jupyter shows it)

DOT text needs nothing beyond funcgrad; SVG needs the `dot` program. Every identifier in
the DOT text is generated; user text (function and file names, parameters) appears only in
quoted labels, escaped by `compiler.escape.comment` and `_quote`. Imports the compiler
lazily; nothing imports this module.
"""

import os
import shutil
import subprocess

import numpy as np

from funcgrad import errors
from funcgrad.compiler import escape
from funcgrad.core import ClosedJaxpr, Jaxpr, Literal, Var
from funcgrad.core.ir import _name  # the printer's variable names: a, b, ..., z, aa, ...

__all__ = ["render_svg", "save", "to_dot", "to_graphviz", "to_svg"]

_LABEL_LIMIT = 80  # characters of one line of a label
_HEADER = ['graph [fontname="Helvetica", fontsize=10, rankdir=TB];',
           'node [fontname="Helvetica", fontsize=10];',
           'edge [fontname="Helvetica", fontsize=9];']


def _quote(*lines):
    """A DOT quoted string of `lines` (centred): each line escaped (no line breaks,
    backslashes or control characters survive), `"` quoted, lines joined by DOT's `\\n`."""
    parts = [escape.comment(line, _LABEL_LIMIT).replace('"', '\\"') for line in lines]
    return '"' + "\\n".join(parts) + '"'


def _size(n):
    for unit in ("B", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _aval(v):
    return v.aval.str_short()


def _lit(atom):
    val = np.asarray(atom.val)
    return f"{val.item() if val.ndim == 0 else val!r}:{_aval(atom)}"


def _source(eqn):
    return escape.source_location(eqn.source) if eqn.source is not None else ""


def _params(eqn):
    """Short `k=v` texts of the equation's parameters (sub-programs are drawn; parameters
    that are None, the defaults, are left out)."""
    out = []
    for k, v in sorted(eqn.params.items()):
        if k.startswith("_") or v is None or _subprograms(v):
            continue
        text = f"{k}={v}"
        out.append(text if len(text) <= 48 else text[:45] + "...")
    return out


def _subprograms(v):
    if isinstance(v, (Jaxpr, ClosedJaxpr)):
        return [v]
    if isinstance(v, tuple) and v and all(isinstance(x, (Jaxpr, ClosedJaxpr)) for x in v):
        return list(v)
    return []


class _Graph:
    """DOT statements with generated node ids and IR names given in printing order. Edges
    are written after every node, outside all clusters (an edge inside a cluster would pull
    its endpoints into it)."""

    def __init__(self):
        self.lines, self.edges, self.names, self.ids = [], [], {}, 0

    def var(self, v):
        if type(v) is Literal:
            return _lit(v)
        if v not in self.names:
            self.names[v] = _name(len(self.names))
        return self.names[v]

    def node(self, label_lines, indent=1, **attrs):
        self.ids += 1
        nid = f"n{self.ids}"
        extra = "".join(f", {k}={v}" for k, v in attrs.items())
        self.lines.append("  " * indent + f"{nid} [label={_quote(*label_lines)}{extra}];")
        return nid

    def edge(self, a, b, label=None, indent=1):
        text = f" [label={_quote(label)}]" if label else ""
        self.edges.append(f"  {a} -> {b}{text};")

    def text(self, name):
        body = "\n".join(["  " + h for h in _HEADER] + self.lines + self.edges)
        return f"digraph {_quote(name)} {{\n{body}\n}}\n"


# --- the IR ---------------------------------------------------------------------------------

def _ir(g, jaxpr, indent):
    """Draw `jaxpr` into `g`; returns {var: node id of its producer}."""
    made = {}
    for v in jaxpr.constvars:
        made[v] = g.node([f"{g.var(v)}: {_aval(v)}", "const"], indent, shape="ellipse",
                         style="dashed")
    for v in jaxpr.invars:
        made[v] = g.node([f"{g.var(v)}: {_aval(v)}", "input"], indent,
                         shape="ellipse")
    for eqn in jaxpr.eqns:
        outs = ", ".join(f"{g.var(v)}: {_aval(v)}" for v in eqn.outvars) or "(effect)"
        lits = [_lit(a) for a in eqn.invars if type(a) is Literal]
        label = [f"{eqn.prim.name}  ->  {outs}"] + _params(eqn)
        label += [f"with {', '.join(lits)}"] if lits else []
        label += [_source(eqn)] if eqn.source is not None else []
        nid = g.node(label, indent, shape="box", style="rounded")
        _bodies(g, eqn, indent)
        for a in dict.fromkeys(a for a in eqn.invars if type(a) is Var):
            if a in made:
                g.edge(made[a], nid, f"{g.var(a)}", indent)
        for v in eqn.outvars:
            made[v] = nid
    _outputs(g, jaxpr.outvars, made, indent)
    return made


def _bodies(g, eqn, indent):
    for key, v in sorted(eqn.params.items()):
        subs = _subprograms(v)
        for j, sub in enumerate(subs):
            jp = sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub
            g.ids += 1
            title = f"{eqn.prim.name}: {key}" + (f"[{j}]" if len(subs) > 1 else "")
            g.lines.append("  " * indent + f"subgraph cluster_{g.ids} {{")
            g.lines.append("  " * (indent + 1) + f"label={_quote(title)}; style=dashed;")
            _ir(g, jp, indent + 1)
            g.lines.append("  " * indent + "}")


def _outputs(g, outvars, made, indent, names=None):
    for i, v in enumerate(outvars):
        what = f"{g.var(v)}: {_aval(v)}" if names is None else names(v)
        nid = g.node([f"output {i}", what], indent,
                     shape="ellipse", peripheries=2)
        if type(v) is Var and v in made:
            g.edge(made[v], nid, None, indent)


# --- the compiled program -----------------------------------------------------------------

_CALL_KINDS = {"library": "library call", "view": "view, no copy",
               "higher-order": "loop/branch/call of compiled bodies"}
_CALL_SHAPES = {"library call": "box3d", "view, no copy": "box",
                "loop/branch/call of compiled bodies": "tab"}


def _const(c):
    """A kernel constant as its dtype prints it (`0.1`, not 0.10000000149011612)."""
    try:
        return str(np.dtype(c.dtype).type(c.value))
    except (TypeError, ValueError):
        return str(c.value)


class _Compiled:
    """Draws a fused program with its buffers (`exe.program`, `exe.buffers`)."""

    def __init__(self, g, program, buffers):
        self.g, self.program, self.buffers = g, program, buffers
        self.buffer_of = {k: name for name, _, _, keys, _ in buffers for k in keys}
        self.made = {}
        j = program.jaxpr
        for v in list(j.constvars) + list(j.invars):  # IR names as `compiled.ir_text()`
            g.var(v)

    def value(self, v):
        """Edge text of IR value `v`: its IR name, type and buffer."""
        buf = self.buffer_of.get(v)
        return f"{self.g.var(v)}: {_aval(v)}" + (f" in {buf}" if buf else "")

    def draw(self, analysis):
        g, j = self.g, self.program.jaxpr
        for i, v in enumerate(j.constvars):
            self.made[v] = g.node([f"c{i} = {g.var(v)}: {_aval(v)}", "bound constant"],
                                  shape="ellipse", style="dashed")
        for i, v in enumerate(j.invars):
            self.made[v] = g.node([f"a{i} = {g.var(v)}: {_aval(v)}", "argument"],
                                  shape="ellipse")
        for k, node in enumerate(self.program.nodes):
            if hasattr(node, "spec"):
                self.kernel(k, node)
            else:
                self.call(node.eqn)
        _outputs(g, j.outvars, self.made, 1, names=self.value)
        if analysis is not None:
            g.node(["memory plan", *_analysis_lines(analysis), *self.plan_lines()],
                   shape="note")


    def link(self, v, nid, indent=1):
        if type(v) is Var and v in self.made:
            self.g.edge(self.made[v], nid, self.value(v), indent)

    def call(self, eqn):
        g = self.g
        kind = _CALL_KINDS.get(eqn.prim.kind, "unfused op")
        outs = ", ".join(self.value(v) for v in eqn.outvars) or "(effect)"
        nbytes = sum(int(np.prod(a.aval.shape)) * a.aval.dtype.itemsize
                     for a in list(eqn.invars) + list(eqn.outvars) if type(a) is Var)
        label = [f"{eqn.prim.name}  ({kind})", f"-> {outs}", f"moves {_size(nbytes)}"]
        label += [_source(eqn)] if eqn.source is not None else []
        nid = g.node(label, shape=_CALL_SHAPES.get(kind, "box"))
        for a in dict.fromkeys(eqn.invars):
            self.link(a, nid)
        for v in eqn.outvars:
            self.made[v] = nid

    def kernel(self, k, node):
        g, spec = self.g, node.spec
        red = f", reduces axes {list(spec.reduce_axes)}" if spec.reduce_axes else ""
        lines = [f"kernel {spec.name}", f"over {list(spec.iter_shape)}{red}"]
        lines += sorted({_source(e) for e in node.eqns if e.source is not None})
        g.lines.append(f"  subgraph cluster_k{k} {{")
        g.lines.append(f"    label={_quote(*lines)}; style=rounded; color=blue;")
        local = {}
        for inp, var in zip(spec.inputs, node.inputs):
            local[inp.name] = g.node([f"{inp.name} <- {g.var(var)}", _aval(var)], 2,
                                     shape="plain")
            self.link(var, local[inp.name], 2)
        for instr in spec.body:
            args = ", ".join(a if isinstance(a, str) else _const(a) for a in instr.args)
            local[instr.dst] = g.node([f"{instr.dst} = {instr.op}({args})"], 2, shape="box")
            for a in dict.fromkeys(a for a in instr.args if isinstance(a, str)):
                g.edge(local[a], local[instr.dst], None, 2)
        for o, var in zip(spec.outputs, node.outputs):
            nid = local[o.value]
            if o.reduce is not None:
                nid = g.node([f"{o.name} = {o.reduce}({o.value})", _aval(var)], 2,
                             shape="box", style="bold")
                g.edge(local[o.value], nid, None, 2)
            self.made[var] = nid
        g.lines.append("  }")

    def plan_lines(self):
        out = []
        for name, shape, dt, keys, kept in self.buffers:
            held = [self.g.var(k) for k in keys if type(k) is Var and k in self.g.names]
            temps = sum(1 for k in keys if type(k) is not Var)
            what = ", ".join(held + ([f"{temps} kernel temporaries"] if temps else []))
            size = int(np.prod(shape)) * np.dtype(dt).itemsize
            out.append(f"{name}: {dt}{list(shape)} {_size(size)}"
                       f"{' (kept between calls)' if kept else ''} holds {what}")
        return out


def _analysis_lines(a):
    return [f"peak {_size(a.peak_bytes)}: arguments {_size(a.argument_bytes)}, "
            f"temporaries {_size(a.temp_bytes)}, outputs {_size(a.output_bytes)}",
            f"{a.buffers} allocations, donated reuse {_size(a.alias_bytes)}, "
            f"kept between calls {_size(a.workspace_bytes)}"]


# --- entry points ---------------------------------------------------------------------------

def _program_of(compiled):
    """(fused program, buffers, memory analysis) of a `Compiled`."""
    exe = compiled._exe
    program = getattr(exe, "program", None)
    if program is None:  # a backend that keeps no program: fuse the IR again
        from funcgrad.compiler import fusion, pipeline
        program = fusion.fuse(pipeline.optimize(compiled._lowered.jaxpr))
    return program, getattr(exe, "buffers", ()), exe.memory_analysis()


def to_dot(obj, name=None):
    """A Graphviz DOT picture of a program.

    Args:
        obj: a `ClosedJaxpr` or `Jaxpr` (`make_jaxpr(f)(x)`), a `Lowered`
            (`jit(f).lower(x)`: its optimized IR) or a `Compiled` (`.compile()`: fused
            kernels as clusters, library calls, buffers and the memory plan).
        name: the graph's title (default: the function's name or "program").

    Returns:
        DOT text (`dot -Tsvg` or any Graphviz viewer draws it).

    Raises:
        FuncgradTypeError: for any other object.

    Example:
        >>> print(to_dot(make_jaxpr(fnp.sin)(1.0)))
        digraph "program" {
          ...
          n2 [label="sin  ->  b: f32[]\\n...", shape=box, style=rounded];
          n1 -> n2 [label="a"];
          ...
    """
    from funcgrad.compiler.jit import Compiled, Lowered
    g = _Graph()
    if isinstance(obj, Compiled):
        program, buffers, analysis = _program_of(obj)
        _Compiled(g, program, buffers).draw(analysis)
        return g.text(name or f"compiled {obj._lowered._jitted._name}")
    if isinstance(obj, Lowered):
        from funcgrad.compiler import pipeline
        name = name or obj._jitted._name
        obj = pipeline.optimize(obj.jaxpr)
    if isinstance(obj, (ClosedJaxpr, Jaxpr)):
        _ir(g, obj.jaxpr if isinstance(obj, ClosedJaxpr) else obj, 1)
        return g.text(name or "program")
    raise errors.FuncgradTypeError(
        f"viz.to_dot: expected a ClosedJaxpr (make_jaxpr), a Lowered (jit(f).lower(...)) or "
        f"a Compiled (.compile()), got {type(obj).__name__}\n{errors.where()}")


def render_svg(dot_text):
    """SVG text of DOT text, drawn by Graphviz's `dot` program.

    Raises:
        BackendUnavailableError: when Graphviz is not installed (says what to install).
    """
    exe = shutil.which("dot")
    if exe is None:
        raise errors.BackendUnavailableError(
            "viz: drawing SVG needs Graphviz's `dot` program, which is not on PATH\n"
            "  hint: install Graphviz (`apt-get install graphviz`, `brew install graphviz` or "
            "`conda install graphviz`; `pip install funcgrad[viz]` adds the `graphviz` Python "
            "package); the DOT text itself (`to_dot`, `.as_dot()`) needs nothing.")
    done = subprocess.run([exe, "-Tsvg"], input=dot_text.encode(), capture_output=True,
                          check=False)
    if done.returncode != 0:
        raise errors.FuncgradInternalError(
            f"viz: Graphviz could not draw the generated DOT text (a funcgrad bug): "
            f"{done.stderr.decode(errors='replace')[:400]}")
    return done.stdout.decode()


def to_svg(obj, name=None):
    """`to_dot(obj, name)` drawn as SVG text (needs Graphviz; see `render_svg`)."""
    return render_svg(to_dot(obj, name))


def to_graphviz(obj, name=None):
    """The picture as a `graphviz.Source` (the `viz` extra), which Jupyter draws inline.

    Raises:
        BackendUnavailableError: when the `graphviz` Python package is not installed.
    """
    try:
        import graphviz
    except ImportError:
        raise errors.BackendUnavailableError(
            "viz.to_graphviz: needs the `graphviz` Python package\n  hint: pip install "
            "funcgrad[viz] (drawing also needs Graphviz's `dot`: apt-get install graphviz); "
            "to_dot() gives the DOT text without either.") from None
    return graphviz.Source(to_dot(obj, name))


def save(obj, path, name=None):
    """Write the picture of `obj` to `path`: SVG for a `.svg` path, else DOT text.

    Example:
        >>> save(jit(f).lower(x).compile(), "f.svg")
    """
    text = to_svg(obj, name) if os.fspath(path).endswith(".svg") else to_dot(obj, name)
    with open(path, "w") as f:
        f.write(text)
    return path
