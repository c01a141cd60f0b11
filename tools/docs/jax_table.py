"""The "for JAX users" name-status table, built from `jax_names.json` and funcgrad itself.

Each public name of jax, jax.numpy, jax.lax, jax.random and optax (recorded by
`dump_jax_names.py`) is looked up with `hasattr` on the matching funcgrad module when the docs
are built, so the table stays true as names are added. optax's losses live in `funcgrad.nn`
and are found there too.

    >>> table = name_table()     # Markdown: a summary of counts, then one table per namespace
"""

import importlib
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# jax namespace -> the funcgrad modules that may hold its names, the first one preferred.
MODULES = {
    "jax": ["funcgrad"],
    "jax.numpy": ["funcgrad.numpy"],
    "jax.lax": ["funcgrad.lax"],
    "jax.random": ["funcgrad.random"],
    "jax.sharding": ["funcgrad.sharding"],  # listed once jax_names.json records it
    "optax": ["funcgrad.optim", "funcgrad.nn"],
}


def load_names(path=None):
    with open(path or os.path.join(HERE, "jax_names.json")) as f:
        return json.load(f)


def status(namespace, name):
    """The funcgrad name that provides `namespace.name`, or None."""
    for module_name in MODULES[namespace]:
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            return f"{module_name}.{name}"
    return None


def rows(record):
    """{namespace: [(name, kind, funcgrad name or None)]} in the file's order."""
    names = record["namespaces"]
    return {ns: [(n, kind, status(ns, n)) for n, kind in names[ns].items()]
            for ns in MODULES if ns in names}


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
                + ", ".join(f"`{m}`" for m in MODULES[ns]) + ".", "",
                "| name | kind | funcgrad |", "| --- | --- | --- |"]
        out += [f"| `{n}` | {kind} | {f'`{fg}`' if fg else '—'} |" for n, kind, fg in entries]
    return "\n".join(out) + "\n"


def anchor(namespace):
    return "names-" + namespace.replace(".", "-")
