"""Pictures of programs (funcgrad.viz): golden DOT of a fixed program (IR and compiled), a
strict DOT syntax check (and Graphviz's own `dot` when installed), escaping of hostile user
text, the compiled form's clusters and buffers, and the SVG path's errors."""


import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax, viz

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "viz")
# The golden program, compiled from a fixed file name so that its source lines are stable.
GOLDEN_SRC = """def golden_fn(x, w):
    h = fnp.tanh(x @ w + 1.0)
    return (h * h).sum(axis=1)
"""
_ns = {"fnp": fnp}
exec(compile(GOLDEN_SRC, "golden.py", "exec"), _ns)
golden_fn = _ns["golden_fn"]
X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
W = np.linspace(0, 1, 15, dtype=np.float32).reshape(3, 5)


# --- a strict checker of the DOT subset viz writes ----------------------------------------------

_TOKEN = re.compile(r'\s*(?:(->)|([{}\[\];=,])|("(?:[^"\\\n]|\\["n\\])*")|([A-Za-z_][A-Za-z0-9_]*'
                    r'|-?[0-9]+(?:\.[0-9]+)?))')


def tokens(text):
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m, f"not DOT at {text[pos:pos + 40]!r}"
        out.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
    return out


def check_dot(text):
    """Parse `digraph ID { stmt* }` with node, edge, attribute and subgraph statements; every
    edge endpoint must be a declared node. Returns (nodes, edges, clusters)."""
    t = tokens(text)
    assert t[:3] == ["digraph", t[1], "{"] and t[1].startswith('"') and t[-1] == "}"
    nodes, edges, clusters, depth, i = set(), [], [], 1, 3

    def attrs(i):  # [k=v, k=v] -> index after it
        assert t[i] == "["
        i += 1
        while t[i] != "]":
            assert re.fullmatch(r"[a-z]+", t[i]) and t[i + 1] == "=", t[i:i + 3]
            assert t[i + 2] not in "{}[];=,", t[i:i + 3]
            i += 3
            if t[i] == ",":
                i += 1
        return i + 1

    while i < len(t) - 1:
        tok = t[i]
        if tok == "}":
            depth -= 1
            i += 1
        elif tok == "subgraph":
            assert t[i + 1].startswith("cluster_") and t[i + 2] == "{"
            clusters.append(t[i + 1])
            depth, i = depth + 1, i + 3
        elif tok in ("graph", "node", "edge"):
            i = attrs(i + 1)
            assert t[i - 1] == "]" and t[i] == ";"
            i += 1
        elif t[i + 1] == "=":  # label=...; style=...;
            assert t[i + 2] not in "{}[];=,"
            assert t[i + 3] == ";"
            i += 4
        elif t[i + 1] == "->":
            edges.append((tok, t[i + 2]))
            i += 3
            if t[i] == "[":
                i = attrs(i)
            assert t[i] == ";"
            i += 1
        else:
            assert re.fullmatch(r"n[0-9]+", tok), tok
            assert tok not in nodes, f"{tok} declared twice"
            nodes.add(tok)
            i = attrs(i + 1)
            assert t[i] == ";"
            i += 1
        assert depth >= 1
    assert depth == 1, "unbalanced braces"
    for a, b in edges:
        assert a in nodes and b in nodes, f"edge {a} -> {b} to an undeclared node"
    assert len(clusters) == len(set(clusters))
    return nodes, edges, clusters


def check_with_graphviz(text):
    """Graphviz's own parser, where it is installed (the strict check above runs always)."""
    if shutil.which("dot") is None:
        return
    done = subprocess.run(["dot", "-Tsvg"], input=text.encode(), capture_output=True)
    assert done.returncode == 0 and not done.stderr, done.stderr.decode()
    assert b"<svg" in done.stdout


def test_the_checker_rejects_broken_dot():
    good = 'digraph "g" {\n  n1 [label="a"];\n  n2 [label="b"];\n  n1 -> n2;\n}\n'
    check_dot(good)
    for bad in [good.replace("n1 -> n2", "n1 -> n3"), good[:-2], good.replace('"a"', '"a\nb"'),
                good.replace('"a"', '"a"b"'), good.replace('"a"', '"a\\x"'),
                good.replace("n2 [", "n1 [")]:
        with pytest.raises(AssertionError):
            check_dot(bad)


# --- golden ---------------------------------------------------------------------------------------

def golden_texts():
    lowered = fg.jit(golden_fn, backend="numpy").lower(X, W)
    return {"ir.dot": viz.to_dot(lowered), "compiled.dot": lowered.compile().as_dot()}


@pytest.mark.parametrize("name", ["ir.dot", "compiled.dot"])
def test_golden_dot(name):
    text = golden_texts()[name]
    path = os.path.join(GOLDEN, name)
    if os.environ.get("FUNCGRAD_REGEN_GOLDEN"):
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        assert text == f.read(), f"{name}: the picture changed; review and regenerate the golden"
    check_dot(text)
    check_with_graphviz(text)


def test_ir_picture_has_one_box_per_equation_and_the_values_between():
    closed = fg.make_jaxpr(golden_fn)(X, W)
    text = viz.to_dot(closed)
    nodes, edges, _ = check_dot(text)
    n = len(closed.jaxpr.eqns)
    assert len(nodes) == 2 + n + 1  # inputs, equations, output
    assert len(edges) == 2 + (n - 1) + 1 + 0  # dot reads a, b; a chain; the output
    for eqn in closed.jaxpr.eqns:
        assert f'label="{eqn.prim.name}  ->' in text
    assert "golden.py:2 (golden_fn)" in text  # the user's line of `x @ w`


def test_compiled_picture_has_kernels_as_clusters_calls_and_buffers():
    lowered = fg.jit(golden_fn, backend="numpy").lower(X, W)
    compiled = lowered.compile()
    text = compiled.as_dot()
    _, _, clusters = check_dot(text)
    program = compiled._exe.program
    assert len(clusters) == len(program.kernels) == 1
    spec = program.kernels[0].spec
    assert f"kernel {spec.name}" in text
    for instr in spec.body:
        assert f"{instr.dst} = {instr.op}(" in text
    assert "dot_general  (library call)" in text and "box3d" in text
    source = compiled.as_text()
    for name, shape, dt, _, _ in compiled._exe.buffers:  # the generated code's buffers
        assert re.search(rf"\b{name}\b", source)
        assert f"{name}: {dt}{list(shape)}" in text
    assert "memory plan" in text and "peak" in text


def test_control_flow_bodies_are_clusters():
    def f(x):
        y = lax.fori_loop(0, 3, lambda i, c: c * 0.5 + fnp.sin(c), x)
        return lax.cond(y.sum() > 0, lambda v: v * 2.0, lambda v: v - 1.0, y)
    closed = fg.make_jaxpr(f)(np.ones(4, np.float32))
    text = viz.to_dot(closed)
    _, _, clusters = check_dot(text)
    assert len(clusters) == 3  # the loop body, two branches
    assert "cond: branches[1]" in text and "sin  ->" in text
    check_with_graphviz(text)
    compiled = fg.jit(f, backend="numpy").lower(np.ones(4, np.float32)).compile()
    ctext = compiled.as_dot()
    check_dot(ctext)
    assert "(loop/branch/call of compiled bodies)" in ctext


# --- hostile user text ----------------------------------------------------------------------------

NASTY = 'ev"il}\n  n1 -> n99 [label="x"];\\ <b>&</b> {'


def nasty_fn():
    src = "def f(x):\n    return fnp.sin(x) * 2.0\n"
    ns = {"fnp": fnp}
    exec(compile(src, NASTY + ".py", "exec"), ns)
    f = ns["f"]
    f.__name__ = NASTY
    return f


def test_hostile_names_and_files_cannot_break_the_dot_text():
    f = nasty_fn()
    x = np.ones(3, np.float32)
    lowered = fg.jit(f, backend="numpy").lower(x)
    for text in [viz.to_dot(fg.make_jaxpr(f)(x), name=NASTY), lowered.as_dot(),
                 lowered.compile().as_dot()]:
        nodes, edges, _ = check_dot(text)
        assert "n99" not in {b for _, b in edges}
        assert "\n  n1 -> n99" not in text
        assert "ev\\\"il}" in text  # the name is there, quoted
        check_with_graphviz(text)


# --- SVG and errors -------------------------------------------------------------------------------

def test_svg_without_graphviz_says_what_to_install(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    lowered = fg.jit(golden_fn, backend="numpy").lower(X, W)
    with pytest.raises(errors.BackendUnavailableError, match="apt-get install graphviz"):
        lowered.as_svg()
    with pytest.raises(errors.BackendUnavailableError, match=r"funcgrad\[viz\]"):
        viz.save(lowered, "never-written.svg")
    assert not os.path.exists("never-written.svg")


def test_svg_and_save(tmp_path):
    lowered = fg.jit(golden_fn, backend="numpy").lower(X, W)
    path = viz.save(lowered.compile(), tmp_path / "f.dot")
    assert open(path).read() == lowered.compile().as_dot()
    if shutil.which("dot") is None:  # no Graphviz: the DOT text was checked strictly above
        check_dot(open(path).read())
        return
    svg = lowered.compile().as_svg()
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    assert "k1_add_tanh_mul" in svg and "dot_general" in svg


def test_to_graphviz_wraps_the_dot_text_or_says_what_to_install(monkeypatch):
    import sys
    import types
    lowered = fg.jit(golden_fn, backend="numpy").lower(X, W)
    monkeypatch.setitem(sys.modules, "graphviz", None)  # not installed
    with pytest.raises(errors.BackendUnavailableError, match=r"pip install funcgrad\[viz\]"):
        viz.to_graphviz(lowered)
    fake = types.ModuleType("graphviz")  # the package's one entry point viz uses
    fake.Source = lambda text: ("Source", text)
    monkeypatch.setitem(sys.modules, "graphviz", fake)
    assert viz.to_graphviz(lowered) == ("Source", lowered.as_dot())


def test_to_dot_of_something_else_is_a_clear_error():
    with pytest.raises(errors.FuncgradTypeError, match="expected a ClosedJaxpr"):
        viz.to_dot(golden_fn)
