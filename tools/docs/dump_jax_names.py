"""Writes tools/docs/jax_names.json: the public names of jax, jax.numpy, jax.lax, jax.random, optax.

Run it in a throwaway virtual environment (JAX is never a funcgrad dependency):

    python3 -m venv /tmp/jaxnames && /tmp/jaxnames/bin/pip install jax optax
    /tmp/jaxnames/bin/python tools/docs/dump_jax_names.py

A public name is one that `dir(module)` lists without a leading underscore; submodules
(`jax.numpy.linalg`, ...) are recorded with the kind "module". The docs build turns the file
into the name-status table of `docs/for-jax-users.md` (see `tools/docs/jax_table.py`).
"""

import importlib
import inspect
import json
import os
import types

NAMESPACES = ["jax", "jax.numpy", "jax.lax", "jax.random", "optax"]


def kind(value):
    if isinstance(value, types.ModuleType):
        return "module"
    if inspect.isclass(value):
        return "class"
    if callable(value):
        return "function"
    return "value"


def main():
    import jax
    import jaxlib
    import optax

    names = {}
    for name in NAMESPACES:
        module = importlib.import_module(name)
        public = sorted(n for n in dir(module) if not n.startswith("_"))
        names[name] = {n: kind(getattr(module, n)) for n in public}
    record = {"versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
                           "optax": optax.__version__},
              "namespaces": names}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_names.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    print({k: len(v) for k, v in names.items()})


if __name__ == "__main__":
    main()
