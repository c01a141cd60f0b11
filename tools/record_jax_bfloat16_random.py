"""Records jax.random's bfloat16 samples (the cases of `tests/random_bfloat16_cases.py`):

    /work/jaxvenv/bin/python tools/record_jax_bfloat16_random.py

writes `tests/golden/jax/random_bfloat16.json` ({case: the samples' bits as uint16}), which
`tests/test_bfloat16.py` reads without JAX. XLA runs with `--xla_allow_excess_precision=false`:
every bfloat16 operation rounds its float32 result, as funcgrad computes (with XLA's default,
a fusion inside a jitted sampler may skip roundings: maxwell, double_sided_maxwell and
dirichlet then differ from these in the last bit of some samples; docs/for-jax-users.md).
"""

import json
import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_allow_excess_precision=false").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
sys.path.insert(0, TESTS)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import random_bfloat16_cases as cases  # noqa: E402


def main():
    key = jax.random.PRNGKey(3)
    record = {"jax": jax.__version__, "cases": {}}
    for name, fn in cases.CASES.items():
        x = np.asarray(fn(jax.random, jnp, key))
        assert x.dtype == jnp.bfloat16, (name, x.dtype)
        record["cases"][name] = {"shape": list(x.shape),
                                 "bits": x.view(np.uint16).ravel().tolist()}
    path = os.path.join(TESTS, "golden", "jax", "random_bfloat16.json")
    with open(path, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
