"""Record jax.random's numbers and signatures for funcgrad's tests (JAX is not needed to run
the tests: they read the file this writes).

Runs every case of `tests/random_golden_cases.py` on jax.random (32-bit types, then the
`CASES_X64` with `jax_enable_x64`), and the signature of every public name of `jax.random`,
into `tests/golden/random/jax_random.json`:

    /work/jaxvenv/bin/python tools/record_random_golden.py

Cases are values (dtype, shape, the numbers as a flat list; complex numbers as [re, im]
pairs) with the case's tolerance; signatures are one `[name, kind, default]` triple per
parameter (`default` is the repr of the default, or null for none).
"""

import importlib.util
import inspect
import json
import os
import sys
import types

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "random", "jax_random.json")


def _cases_module():
    path = os.path.join(ROOT, "tests", "random_golden_cases.py")
    spec = importlib.util.spec_from_file_location("random_golden_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _namespace(jax):
    import jax.numpy as jnp
    return types.SimpleNamespace(r=jax.random, xp=jnp, grad=jax.grad, vmap=jax.vmap,
                                 jit=jax.jit, key=jax.random.PRNGKey)


def _record(value, tol):
    a = np.asarray(value)
    flat = a.ravel()
    if a.dtype.kind == "c":
        values = [[float(v.real), float(v.imag)] for v in flat]
    elif a.dtype.kind == "b":
        values = [int(v) for v in flat]
    else:
        values = flat.tolist()
    return {"dtype": str(a.dtype), "shape": list(a.shape), "values": values, "tol": tol}


def _run(cases, ns):
    return {name: _record(fn(ns), tol) for name, (fn, tol) in cases.items()}


def _signatures(module):
    out = {}
    for name in sorted(dir(module)):
        obj = getattr(module, name)
        if name.startswith("_") or not callable(obj) or isinstance(obj, type):
            continue
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            continue
        out[name] = [[p.name, p.kind.name, None if p.default is p.empty else repr(p.default)]
                     for p in sig.parameters.values()]
    return out


def _dumps(record):
    """The record with one line per case and per signature (readable diffs)."""
    parts = []
    for key, value in sorted(record.items()):
        if isinstance(value, dict):
            rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in
                              sorted(value.items()))
            parts.append(f"{json.dumps(key)}: {{\n{rows}\n}}")
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main():
    import jax
    cases = _cases_module()
    ns = _namespace(jax)
    record = {"jax": jax.__version__, "cases": _run(cases.CASES, ns),
              "signatures": _signatures(jax.random)}
    jax.config.update("jax_enable_x64", True)
    record["cases_x64"] = _run(cases.CASES_X64, ns)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(_dumps(record))
    print(f"wrote {len(record['cases'])} + {len(record['cases_x64'])} cases and "
          f"{len(record['signatures'])} signatures to {os.path.relpath(OUT, ROOT)}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
