"""Writes tools/docs/jax_names.json: JAX's and optax's public names, and their signatures.

Run it in a throwaway virtual environment (JAX is never a funcgrad dependency):

    python3 -m venv /tmp/jaxnames && /tmp/jaxnames/bin/pip install jax==0.10.2 optax==0.2.8
    /tmp/jaxnames/bin/python tools/docs/dump_jax_names.py

The file holds two records:
- `namespaces`: the public names of every namespace in `NAMESPACES` (jax, jax.numpy, jax.lax,
  jax.random, jax.nn, jax.scipy.*, jax.sharding, jax.profiler, jax.dtypes, optax, optax.contrib,
  ...) with their kind. A public name is one that `dir(module)` lists without a leading underscore;
  submodules (`jax.numpy.linalg`, ...) are recorded with the kind "module". The docs build
  turns it into the name-status table of `docs/for-jax-users.md` (`tools/docs/jax_table.py`).
- `signatures`: for every public function and class of the same namespaces, its
  `inspect.signature` as a list of parameters `[name, kind]` or `[name, kind, default]`,
  where kind is one of `KINDS`' values and default is the default's `repr` (a jnp ufunc
  object is recorded by the signature of the function it wraps); `null` when it has none
  (a builtin). `tests/test_jax_signatures.py` checks funcgrad's functions against it
  (`tools/docs/jax_signatures.py`).
"""

import importlib
import inspect
import json
import os
import re
import types

# Every namespace recorded, names and signatures (`jax_table.MODULES` maps each to funcgrad's);
# the distributions of jax.scipy.stats (`jax.scipy.stats.norm`, ...) are added by `namespaces()`.
NAMESPACES = [
    "jax", "jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.lax", "jax.lax.linalg",
    "jax.random", "jax.nn", "jax.nn.initializers", "jax.tree_util", "jax.tree",
    "jax.scipy.special", "jax.scipy.linalg", "jax.scipy.signal", "jax.scipy.fft",
    "jax.scipy.integrate", "jax.scipy.interpolate", "jax.scipy.ndimage", "jax.scipy.optimize",
    "jax.scipy.stats", "jax.sharding", "jax.debug", "jax.dtypes", "jax.profiler", "jax.typing",
    "jax.image", "jax.ops", "jax.flatten_util", "jax.ad_checkpoint", "jax.test_util",
    "optax", "optax.schedules", "optax.losses", "optax.transforms", "optax.contrib",
    "optax.tree_utils", "optax.tree", "optax.projections", "optax.perturbations",
    "optax.second_order", "optax.assignment",
]

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # keeps the file the same from run to run

KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "either",
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.KEYWORD_ONLY: "keyword",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}


def kind(value):
    if isinstance(value, types.ModuleType):
        return "module"
    if inspect.isclass(value):
        return "class"
    if callable(value):
        return "function"
    return "value"


def public(module):
    return sorted(n for n in dir(module) if not n.startswith("_"))


def signature(value):
    """[[name, kind(, default repr)], ...] of a function or class, or None."""
    func = getattr(value, "_func", None) if type(value).__name__ == "ufunc" else None
    try:
        sig = inspect.signature(func or value)
    except (TypeError, ValueError):
        return None
    params = []
    for p in sig.parameters.values():
        entry = [p.name, KINDS[p.kind]]
        if p.default is not inspect.Parameter.empty:
            entry.append(ADDRESS.sub("", repr(p.default)))
        params.append(entry)
    return params


def signatures_of(name):
    """{name: signature} of a namespace's public functions and classes."""
    module = importlib.import_module(name)
    out = {}
    for n in public(module):
        value = getattr(module, n)
        if kind(value) in ("function", "class"):
            out[n] = signature(value)
    return out


def namespaces():
    """`NAMESPACES` and the distributions of jax.scipy.stats."""
    import jax.scipy.stats

    return NAMESPACES + [f"jax.scipy.stats.{n}" for n in public(jax.scipy.stats)
                         if isinstance(getattr(jax.scipy.stats, n), types.ModuleType)]


def write(record, path):
    """JSON with one line per signature (the file stays readable and diffs stay small)."""
    lines = ["{", ' "namespaces": ' + json.dumps(record["namespaces"], indent=1, sort_keys=True)
             .replace("\n", "\n ") + ",", ' "signatures": {']
    spaces = sorted(record["signatures"])
    for i, space in enumerate(spaces):
        lines.append(f"  {json.dumps(space)}: {{")
        sigs = record["signatures"][space]
        lines += [f"   {json.dumps(n)}: {json.dumps(sigs[n])}" + ("," if j < len(sigs) - 1 else "")
                  for j, n in enumerate(sorted(sigs))]
        lines.append("  }" + ("," if i < len(spaces) - 1 else ""))
    lines += [" },", ' "versions": ' + json.dumps(record["versions"], sort_keys=True), "}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    import jax
    import jaxlib
    import optax

    names = {}
    for name in namespaces():
        module = importlib.import_module(name)
        names[name] = {n: kind(getattr(module, n)) for n in public(module)}
    record = {"versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
                           "optax": optax.__version__},
              "namespaces": names, "signatures": {n: signatures_of(n) for n in names}}
    write(record, os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_names.json"))
    print({k: len(v) for k, v in names.items()})
    print({k: len(v) for k, v in record["signatures"].items()})


if __name__ == "__main__":
    main()
