"""The layering of DESIGN.md, checked: who may import whom inside funcgrad, no module patching
another's globals, and a line budget per module.

Every import counts: those at the top of a module, those inside functions (lazy imports),
under `if TYPE_CHECKING:`, and `importlib.import_module("...")` calls with a literal name.
An import is written as its target, `module.name` for `from module import name`
(`from funcgrad import lax` is `funcgrad.lax`).
"""

import ast
import pathlib

import funcgrad
from funcgrad.core import ops

ROOT = pathlib.Path(funcgrad.__file__).parent
LINE_BUDGET = 800

ONLY, NONE_OF, NO_PRIVATE = "only", "none of", "no private name of"
BASE = ("funcgrad.errors", "funcgrad.config", "funcgrad.dtypes", "funcgrad.tree_util",
        "funcgrad._pytree")

# files (a folder ends in /)  kind        targets                      why
RULES = [
    ("core/", ONLY, ("funcgrad.core",) + BASE,
     "the IR and tracing know no primitive and no layer above them"),
    ("interpreters/", ONLY, ("funcgrad.core", "funcgrad.interpreters") + BASE,
     "transforms import no lax, numpy, compiler or backend: lax operations reach them "
     "through the funcgrad.core.ops registry"),
    ("lax/", ONLY, ("funcgrad.core", "funcgrad.interpreters", "funcgrad.lax") + BASE,
     "primitives know no array API, compiler or backend"),
    ("compiler/fusion.py", NONE_OF, ("funcgrad.backends",), "kernel specs are backend-neutral"),
    ("compiler/passes.py", NONE_OF, ("funcgrad.backends",), "passes are backend-neutral"),
    ("backends/", NONE_OF,
     ("funcgrad.compiler.pipeline", "funcgrad.compiler.jit", "funcgrad.compiler.call"),
     "a backend gets kernel specs and a callback to compile sub-programs"),
    ("backends/native/", NONE_OF, ("funcgrad.backends.cuda",),
     "the C dialects share backends/cstyle.py and backends/layout.py, not each other"),
    ("backends/cuda/", NONE_OF, ("funcgrad.backends.native",),
     "the C dialects share backends/cstyle.py and backends/layout.py, not each other"),
    ("devices.py", NO_PRIVATE, ("funcgrad.backends",),
     "devices use the backends' public API"),
]

# The violations that exist today, each to be fixed in its own area. The test fails when a new
# violation appears AND when one of these is fixed without being removed from this set.
ALLOWED_EXCEPTIONS = {
    # core reaches the device layer lazily: Array.device, device arrays, eager ops on a GPU
    # (devices.py sits above core): a device registry in core would end it.
    ("core/array.py", "funcgrad.devices.device_of"),
    ("core/array.py", "funcgrad.devices.cuda_provider"),
    ("core/trace.py", "funcgrad.devices.run_on_devices"),
}


# --- reading imports ----------------------------------------------------------------------------

def _files():
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(path):
    return path.relative_to(ROOT).as_posix()


def _package(path):
    parts = ["funcgrad"] + list(path.relative_to(ROOT).parent.parts)
    return ".".join(parts)


def imports(source, package):
    """`(target, line)` for every import in `source`, a module of package `package`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(pkg + ([node.module] if node.module else []))
            out += [(f"{base}.{a.name}", node.lineno) for a in node.names]
        elif (isinstance(node, ast.Call) and _is_import_module(node.func) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.args[0].value, node.lineno))
    return out


def _is_import_module(func):
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or \
        (isinstance(func, ast.Name) and func.id in ("import_module", "__import__"))


def _under(target, prefix):
    return target == prefix or target.startswith(prefix + ".")


def _breaks(kind, targets, imported):
    if not _under(imported, "funcgrad"):
        return False
    if kind == ONLY:
        return not any(_under(imported, t) for t in targets)
    if kind == NONE_OF:
        return any(_under(imported, t) for t in targets)
    return any(_under(imported, t) and any(part.startswith("_") and not part.startswith("__")
                                           for part in imported[len(t) + 1:].split("."))
               for t in targets)


def _applies(rule_path, rel):
    return rel.startswith(rule_path) if rule_path.endswith("/") else rel == rule_path


def violations():
    """{(file, target): (line, why)} for every import that breaks a rule."""
    found = {}
    for path in _files():
        rel = _rel(path)
        for imported, line in imports(path.read_text(), _package(path)):
            for rule_path, kind, targets, why in RULES:
                if _applies(rule_path, rel) and _breaks(kind, targets, imported):
                    found.setdefault((rel, imported), (line, f"{rule_path} imports {kind} "
                                                             f"{', '.join(targets)}: {why}"))
    return found


# --- the checks ---------------------------------------------------------------------------------

def test_imports_follow_the_layering():
    found = violations()
    new = sorted(set(found) - ALLOWED_EXCEPTIONS)
    assert not new, "layering broken:\n" + "\n".join(
        f"  funcgrad/{f}:{found[f, t][0]} imports {t} ({found[f, t][1]})" for f, t in new)
    fixed = sorted(ALLOWED_EXCEPTIONS - set(found))
    assert not fixed, "fixed, now remove them from ALLOWED_EXCEPTIONS:\n" + "\n".join(
        f"  {f}: {t}" for f, t in fixed)


def test_every_rule_names_existing_files():
    rels = [_rel(p) for p in _files()]
    for rule_path, *_ in RULES:
        assert any(_applies(rule_path, r) for r in rels), f"rule for {rule_path} matches nothing"


def test_import_reader_sees_lazy_relative_and_dynamic_imports():
    src = ("import numpy as np\nfrom . import shape\nfrom ..core import ops\n"
           "def f():\n    from funcgrad import lax\n    return lax\n"
           "def g():\n    return importlib.import_module('funcgrad.compiler.jit')\n")
    got = [t for t, _ in imports(src, "funcgrad.lax.control_flow")]
    assert got == ["numpy", "funcgrad.lax.control_flow.shape", "funcgrad.lax.core.ops",
                   "funcgrad.lax", "funcgrad.compiler.jit"]
    assert _breaks(NO_PRIVATE, ("funcgrad.backends",), "funcgrad.backends._BACKENDS")
    assert not _breaks(NO_PRIVATE, ("funcgrad.backends",), "funcgrad.backends.register_backend")
    assert _breaks(ONLY, ("funcgrad.core",), "funcgrad.lax")
    assert not _breaks(ONLY, ("funcgrad.core",), "funcgrad.core.ops")
    assert not _breaks(NONE_OF, ("funcgrad.lax",), "funcgrad.laxative")
    patch = ("from funcgrad.core import trace as _trace\nfrom funcgrad.interpreters import ad\n"
             "_trace.vma_rule = print\nad.jvp_rules[print] = print\n")
    assert module_assignments(patch, "funcgrad.lax") == [(3, "funcgrad.core.trace.vma_rule")]


def test_no_module_assigns_another_modules_globals():
    """Rule tables are filled by subscripting (`ad.jvp_rules[p] = rule`) or by definers; a
    module never rebinds another funcgrad module's global (`trace.vma_rule = fn`)."""
    bad = [f"funcgrad/{_rel(path)}:{line} sets {what}" for path in _files()
           for line, what in module_assignments(path.read_text(), _package(path))]
    assert not bad, "\n".join(bad)


def module_assignments(source, package):
    """`(line, "module.attr")` for each assignment to an attribute of a funcgrad module."""
    tree = ast.parse(source)
    modules = _module_aliases(tree, package)
    out = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                    t.value.id in modules:
                out.append((node.lineno, f"{modules[t.value.id]}.{t.attr}"))
    return out


def _module_aliases(tree, package):
    """Local names bound to funcgrad modules by the imports of `tree`."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            src = ast.unparse(node)
            for target, _ in imports(src, package):
                alias = _alias_of(node, target)
                if _under(target, "funcgrad") and _is_module(target) and alias:
                    names[alias] = target
    return names


def _alias_of(node, target):
    for a in node.names:
        if isinstance(node, ast.Import) and a.name == target:
            return a.asname  # `import funcgrad.x` binds `funcgrad`, not the module
        if isinstance(node, ast.ImportFrom) and target.endswith("." + a.name):
            return a.asname or a.name
    return None


def _is_module(target):
    rel = pathlib.Path(*target.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel / "__init__.py").exists()


def test_ops_used_by_core_and_interpreters_are_registered():
    used = set()
    for path in _files():
        if _rel(path).startswith(("core/", "interpreters/")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                        node.value.id == "ops":
                    used.add(node.attr)
    assert used, "no use of funcgrad.core.ops found"
    missing = sorted(n for n in used if n not in vars(ops))
    assert not missing, f"used but never registered in funcgrad.core.ops: {missing}"


def test_modules_stay_under_the_line_budget():
    over = [(len(p.read_text().splitlines()), _rel(p)) for p in _files()]
    over = sorted((n, f) for n, f in over if n > LINE_BUDGET)
    assert not over, f"modules over {LINE_BUDGET} lines (split them):\n" + "\n".join(
        f"  funcgrad/{f}: {n}" for n, f in over)
