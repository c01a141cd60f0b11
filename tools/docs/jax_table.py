"""The "for JAX users" name-status table, built from `jax_names.json` and funcgrad itself.

Each public name of every recorded JAX and optax namespace (`dump_jax_names.py`: jax, jax.numpy,
jax.lax, jax.random, jax.nn, jax.scipy.*, jax.sharding, jax.profiler, jax.dtypes, optax,
optax.contrib, ...) is looked up with `hasattr` on the matching funcgrad module (`modules_for`)
when the docs are built, so the table stays true as names are added. optax's losses live in
`funcgrad.nn` and are found there too.

    >>> table = name_table()     # Markdown: a summary of counts, then one table per namespace
"""

import importlib
import json
import os

import jax_differences

HERE = os.path.dirname(os.path.abspath(__file__))

# The one map from a JAX (optax) namespace to the funcgrad modules that may hold its names, the
# first one preferred; the name table here and the signature check (`jax_signatures.py`) use it.
# A namespace not listed maps by its name: jax.X -> funcgrad.X, optax.X -> funcgrad.optim.X.
MODULES = {
    "jax": ["funcgrad"],
    "optax": ["funcgrad.optim", "funcgrad.nn"],  # optax's losses live in funcgrad.nn too
    "optax.losses": ["funcgrad.nn.losses", "funcgrad.optim.losses"],
}


def modules_for(namespace):
    """The funcgrad module names for a JAX or optax namespace.

        >>> modules_for("jax.scipy.stats.norm"), modules_for("optax.contrib")
        (['funcgrad.scipy.stats.norm'], ['funcgrad.optim.contrib'])
    """
    if namespace in MODULES:
        return MODULES[namespace]
    for prefix, home in (("jax.", "funcgrad."), ("optax.", "funcgrad.optim.")):
        if namespace.startswith(prefix):
            return [home + namespace[len(prefix):]]
    return []


def module(name):
    """The funcgrad module `name`, or None where funcgrad has none (yet)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def load_names(path=None):
    with open(path or os.path.join(HERE, "jax_names.json")) as f:
        return json.load(f)


def status(namespace, name):
    """The funcgrad name that provides `namespace.name`, or None."""
    for module_name in modules_for(namespace):
        found = module(module_name)
        if found is not None and hasattr(found, name):
            return f"{module_name}.{name}"
    return None


def rows(record):
    """{namespace: [(name, kind, funcgrad name or None)]} in the file's order."""
    names = record["namespaces"]
    return {ns: [(n, kind, status(ns, n)) for n, kind in names[ns].items()]
            for ns in names}


def name_table(record=None):
    record = record or load_names()
    table = rows(record)
    v = record["versions"]
    out = [f"Names from jax {v['jax']} and optax {v['optax']} (`tools/docs/jax_names.json`), "
           "looked up in funcgrad when these pages were built.", "",
           "| namespace | public names | in funcgrad | missing |", "| --- | ---: | ---: | ---: |"]
    for ns, entries in table.items():
        have = sum(1 for *_, fg in entries if fg)
        out.append(f"| [`{ns}`](#{anchor(ns)}) | {len(entries)} | {have} | "
                   f"{len(entries) - have} |")
    for ns, entries in table.items():
        have = sum(1 for *_, fg in entries if fg)
        out += ["", f"### `{ns}` {{#{anchor(ns)}}}", "",
                f"{have} of {len(entries)} names; funcgrad module: "
                + ", ".join(f"`{m}`" for m in modules_for(ns)) + ".", "",
                "| name | kind | funcgrad |", "| --- | --- | --- |"]
        out += [f"| `{n}` | {kind} | {_found(ns, n, fg)} |" for n, kind, fg in entries]
    return "\n".join(out) + "\n"


def _found(namespace, name, path):
    if path:
        return f"`{path}`"
    reason = jax_differences.MISSING.get(f"{namespace}.{name}")
    return f"— ({reason})" if reason else "—"


def anchor(namespace):
    return "names-" + namespace.replace(".", "-")
