"""funcgrad's signatures checked against JAX's and optax's (recorded in `jax_names.json`).

Every public function and class of the recorded JAX namespaces that funcgrad also has
(looked up by name on the matching funcgrad module, `jax_table.modules_for`) must accept
JAX's parameters by name, in JAX's positional order, with JAX's defaults; funcgrad may add
parameters of its own only as keyword-only ones with a default. What differs on purpose is
listed, with its reason, in `jax_differences.DIFFERENCES`, which `docs/for-jax-users.md`
shows (`<!-- jax-differences -->`, `differences_markdown`). `tests/test_jax_signatures.py`
runs the check.

    >>> report = check()              # every name both sides have
    >>> report.problems               # {"jax.numpy.sum": [(parameter, message)], ...}
"""

import ast
import dataclasses
import enum
import importlib
import inspect
import math
import re

import jax_differences
import jax_table

# A JAX default shown by one of these means "not given": any funcgrad default matches it.
SENTINELS = ("NoDefault", "Unspecified", "<object object>", "<not-specified>", "Deprecated",
             "jax.sharding.Infer")


modules_for = jax_table.modules_for  # the one namespace map


def counterpart(namespace, name):
    """(funcgrad path, object) for `namespace.name`, or None."""
    for module_name in modules_for(namespace):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        value = getattr(module, name, None)
        if value is not None and (inspect.isroutine(value) or inspect.isclass(value)
                                  or callable(value)) and not inspect.ismodule(value):
            return f"{module_name}.{name}", value
    return None


@dataclasses.dataclass
class Report:
    names: int = 0                                # names both sides have, checked
    parameters: int = 0                           # JAX parameters checked
    problems: dict = dataclasses.field(default_factory=dict)  # "ns.name" -> [(param, msg)]
    paths: dict = dataclasses.field(default_factory=dict)     # "ns.name" -> funcgrad path


def check(record=None):
    """Compare every recorded JAX signature with its funcgrad counterpart."""
    record = record or jax_table.load_names()
    report = Report()
    for namespace, sigs in sorted(record["signatures"].items()):
        for name, jax_params in sorted(sigs.items()):
            found = counterpart(namespace, name)
            if found is None or jax_params is None:
                continue
            path, value = found
            key = f"{namespace}.{name}"
            report.names += 1
            report.parameters += sum(1 for p in jax_params if not p[0].startswith("_"))
            report.paths[key] = path
            problems = compare(jax_params, value)
            if problems:
                report.problems[key] = problems
    return report


def fg_signature(value):
    if type(value).__name__ == "ufunc" and hasattr(value, "_func"):
        value = value._func
    try:
        return inspect.signature(value)
    except (TypeError, ValueError):
        return None


_KIND = {inspect.Parameter.POSITIONAL_ONLY: "positional",
         inspect.Parameter.POSITIONAL_OR_KEYWORD: "either",
         inspect.Parameter.VAR_POSITIONAL: "*args",
         inspect.Parameter.KEYWORD_ONLY: "keyword",
         inspect.Parameter.VAR_KEYWORD: "**kwargs"}


def compare(jax_params, value):
    """[(parameter, message)] where funcgrad's `value` does not take JAX's `jax_params`."""
    sig = fg_signature(value)
    if sig is None:
        return [("*", "funcgrad's signature cannot be read")]
    fg = [(p.name, _KIND[p.kind], p.default) for p in sig.parameters.values()]
    jax_params = [p for p in jax_params if not p[0].startswith("_")]  # JAX's private ones
    return _positional(jax_params, fg) + _by_name(jax_params, fg) + _extra(jax_params, fg)


def _positional(jax_params, fg):
    """JAX's positional parameters are funcgrad's, in the same order, with the same names."""
    jax_pos = [p for p in jax_params if p[1] in ("positional", "either")]
    fg_pos = [p for p in fg if p[1] in ("positional", "either")]
    fg_var = any(p[1] == "*args" for p in fg)
    problems = []
    for i, (name, kind, *_) in enumerate(jax_pos):
        if i >= len(fg_pos):
            if not fg_var or kind == "either":
                problems.append((name, f"JAX's positional parameter {i} ({name}) is not "
                                       "positional in funcgrad"))
            continue
        fg_name, fg_kind, _ = fg_pos[i]
        if kind == "either" and fg_name != name:
            problems.append((name, f"positional parameter {i} is {fg_name!r} in funcgrad, "
                                   f"{name!r} in JAX"))
        elif kind == "either" and fg_kind == "positional":
            problems.append((name, f"{name!r} is positional-only in funcgrad"))
    for _, kind, *_ in jax_params:
        if kind in ("*args", "**kwargs") and not any(p[1] == kind for p in fg):
            problems.append((kind, f"JAX takes {kind}, funcgrad does not"))
    return problems


def _by_name(jax_params, fg):
    """Each of JAX's named parameters exists in funcgrad, by name, with JAX's default."""
    by_name = {p[0]: p for p in fg}
    fg_kwargs = any(p[1] == "**kwargs" for p in fg)
    problems = []
    for name, kind, *default in jax_params:
        if kind in ("*args", "**kwargs", "positional"):
            continue
        if name not in by_name:
            if not fg_kwargs:
                problems.append((name, f"funcgrad has no parameter {name!r}"))
            continue
        _, fg_kind, fg_default = by_name[name]
        if fg_kind == "positional":
            continue  # reported by _positional
        if default and fg_default is inspect.Parameter.empty:
            problems.append((name, f"{name!r} is required in funcgrad, JAX's default is "
                                   f"{default[0]}"))
        elif default and not same_default(default[0], fg_default):
            problems.append((name, f"default of {name!r} is {fg_default!r} in funcgrad, "
                                   f"{default[0]} in JAX"))
    return problems


def _extra(jax_params, fg):
    """funcgrad's own parameters come last, keyword-only, with a default."""
    jax_names = {p[0] for p in jax_params if p[1] != "positional"}
    n_jax_pos = sum(1 for p in jax_params if p[1] in ("positional", "either"))
    problems = []
    for i, (name, kind, default) in enumerate(fg):
        if name in jax_names or kind in ("*args", "**kwargs") or i < n_jax_pos:
            continue
        if default is inspect.Parameter.empty:
            problems.append((name, f"funcgrad requires {name!r}, which JAX does not have"))
        elif kind != "keyword":
            problems.append((name, f"funcgrad's own parameter {name!r} should be keyword-only"))
    return problems


_CLASS = re.compile(r"^<class '(?:[\w.]+\.)?(\w+)'>$")
_FUNCTION = re.compile(r"^<function (?:[\w.<>]+\.)?(\w+|<lambda>)>$")
_OBJECT = re.compile(r"^<(?:[\w.]+\.)?(\w+) object>$")  # `<optax...Gumbel object>` -> `Gumbel`
_ENUM = re.compile(r"^<(\w+\.\w+): [^>]*>$")  # `<RoundingMethod.AWAY_FROM_ZERO: 0>`


def normalized(text):
    """A default's repr without module paths: `<class 'jax.numpy.float32'>` -> `float32`."""
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", text)
    for pattern in (_CLASS, _FUNCTION, _ENUM, _OBJECT):
        m = pattern.match(text)
        if m:
            return m.group(1)
    return text


def same_default(jax_repr, fg_default):
    """Whether funcgrad's default equals JAX's (recorded as its repr)."""
    if any(s in jax_repr for s in SENTINELS):
        return True
    try:
        jax_value = ast.literal_eval(jax_repr)
    except (ValueError, SyntaxError):
        if jax_repr in ("nan", "inf", "-inf"):
            return _same_value(float(jax_repr), fg_default)
        return normalized(jax_repr) == _fg_normalized(fg_default)
    return _same_value(jax_value, fg_default)


def _fg_normalized(value):
    if isinstance(value, enum.Enum):  # JAX's enums print as `Precision.HIGHEST`
        return f"{type(value).__name__}.{value.name}"
    if inspect.isclass(value) or inspect.isroutine(value):
        return getattr(value, "__name__", repr(value))
    name = getattr(value, "name", None)  # a numpy dtype
    if isinstance(name, str) and type(value).__module__ == "numpy":
        return name
    return normalized(repr(value))


def _same_value(a, b):
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and _is_number(b):
        b = float(b)
        return (math.isnan(a) and math.isnan(b)) or a == b
    return type(a) is type(b) and a == b


def _is_number(value):
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, (str, bytes))


# --- the differences table --------------------------------------------------------------------

def unexplained(report, pending=()):
    """`[(name, parameter, message)]` of the problems neither listed in
    `jax_differences.DIFFERENCES` nor in `pending` (a set of `(name, parameter)`)."""
    listed = {(d.name, p) for d in jax_differences.DIFFERENCES for p in d.parameters}
    return [(name, param, msg) for name, problems in sorted(report.problems.items())
            for param, msg in problems
            if (name, param) not in listed and (name, param) not in pending]


def stale(report, pending=()):
    """The `(name, parameter)` pairs listed as checked differences (or pending) that the check
    no longer finds: fixed, so the row must go."""
    found = {(name, param) for name, problems in report.problems.items()
             for param, _ in problems}
    listed = [(d.name, p) for d in jax_differences.DIFFERENCES if d.checked
              for p in d.parameters]
    return [pair for pair in listed + sorted(pending) if pair not in found]


def differences_markdown(report=None):
    """The "For JAX users" section: the check's counts, then one row per difference, by name."""
    report = report or check()
    rows = sorted(jax_differences.DIFFERENCES, key=lambda d: d.name)
    behaviour = sum(1 for d in rows if not d.checked)
    out = [f"funcgrad's signatures are checked against JAX's and optax's (`tools/docs/"
           f"jax_names.json`, `tests/test_jax_signatures.py`): {report.names} names that both "
           f"have, {report.parameters} of JAX's parameters, each accepted by name, in JAX's "
           f"positional order, with JAX's default. The {len(rows)} deliberate differences "
           f"({len(rows) - behaviour} in signatures, {behaviour} in behaviour), each with its "
           "reason:", "", "| JAX | funcgrad | why |", "| --- | --- | --- |"]
    for d in rows:
        params = ", ".join(f"`{p}`" for p in d.parameters)
        jax = f"`{d.name}`" + (f" ({params})" if params else "")
        if d.jax:
            jax += f": {d.jax}"
        out.append(f"| {_cell(jax)} | {_cell(d.funcgrad)} | {_cell(d.reason)} |")
    return "\n".join(out) + "\n"


def _cell(text):
    return text.replace("|", "&#124;").replace("\n", " ")
