"""Records optax 0.2.8 on bfloat16 parameters (the cases of `tests/optax_bfloat16_cases.py`):

    /work/jaxvenv/bin/python tools/record_optax_bfloat16.py

writes `tests/golden/jax/optax_bfloat16.json`, which `tests/test_bfloat16_optim.py` reads
without JAX. The optimizers run eagerly (op by op, each result rounded to bfloat16, as funcgrad
computes them).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
sys.path.insert(0, TESTS)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
import optax_bfloat16_cases as cases  # noqa: E402


def main():
    record = {"versions": {"jax": jax.__version__, "optax": optax.__version__},
              "cases": {name: cases.run(optax, jnp, name) for name in cases.OPTIMIZERS}}
    path = os.path.join(TESTS, "golden", "jax", "optax_bfloat16.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
