"""Records what funcgrad.optim is checked against: optax 0.2.8's public API and its numbers.

Run it in a throwaway virtual environment with JAX and optax (never funcgrad dependencies):

    /work/jaxvenv/bin/python tools/record_optax_golden.py

It writes two files that the tests read without JAX:

- `tests/golden/optax_api.json`: every public name of optax and of its namespaces
  (`optax.losses`, `optax.contrib`, ...) with its kind, its signature (parameter names,
  kinds and defaults, written by `optax_cases.describe`) and, for NamedTuple states, the
  field names. Deprecated names (optax warns when they are used) are marked.
- `tests/golden/optax_golden.json`: the result of every case of `tests/optax_cases.py`, run
  with `optax`, `jax.numpy` and `jax` (float32, as JAX's default). The tests run the same
  cases with `funcgrad.optim`, `funcgrad.numpy` and `funcgrad`.
"""

import importlib
import json
import os
import sys
import types
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
sys.path.insert(0, TESTS)

import optax_cases  # noqa: E402

# Names optax keeps only for backward compatibility (each warns, or is documented as
# deprecated in 0.2.8).
DEPRECATED = {"convex_kl_divergence", "InjectHyperparamsState"}


def api_record():
    """{namespace: {name: {"kind", "signature", "fields", "deprecated"}}}."""
    out = {}
    for namespace in optax_cases.NAMESPACES:
        module = importlib.import_module(namespace)
        names = {}
        for name in sorted(n for n in dir(module) if not n.startswith("_")):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                continue
            names[name] = optax_cases.describe(value)
            names[name]["deprecated"] = name in DEPRECATED
        out[namespace] = names
    return out


def main():
    import jax
    import jax.numpy as jnp
    import optax

    frameworks = optax_cases.Frameworks(optax=optax, jnp=jnp, jax=jax)
    golden = {}
    for name, case in sorted(optax_cases.all_cases().items()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            golden[name] = optax_cases.to_json(case(frameworks))
    api = api_record()
    record = {"versions": {"jax": jax.__version__, "optax": optax.__version__}}
    for filename, body in (("optax_api.json", {**record, "namespaces": api}),
                           ("optax_golden.json", {**record, "cases": golden})):
        with open(os.path.join(TESTS, "golden", filename), "w") as f:
            json.dump(body, f, indent=0, sort_keys=True)
            f.write("\n")
    print(f"{len(golden)} cases; names: " + ", ".join(f"{ns} {len(v)}" for ns, v in api.items()))


if __name__ == "__main__":
    main()
