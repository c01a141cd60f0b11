"""Records JAX's int4/uint4 numbers (float casts and `jax.random.randint`):

    /work/jaxvenv/bin/python tools/record_jax_narrow_ints.py

writes `tests/golden/jax/narrow_ints.json`, which `tests/test_bfloat16.py` reads without JAX:
a float32 vector (fractions, out-of-range values, infinities, NaN) cast to each type (XLA's rule:
toward zero, saturating, NaN -> 0) and randint draws with key 0 over a few ranges.
"""

import json
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(os.path.dirname(HERE), "tests", "golden", "jax", "narrow_ints.json")
VALUES = [1.5, -2.0, 2.999, -2.999, 7.5, 8.0, -8.5, 100.0, -100.0, np.inf, -np.inf, np.nan, 0.0]
RANGES = [(0, 5), (-3, 100), (-100, 100), (2, 3)]


def main():
    x = jnp.asarray(VALUES, jnp.float32)
    record = {"jax": jax.__version__, "values": [repr(float(v)) for v in VALUES],
              "casts": {}, "randint": {}}
    for name in ("int4", "uint4", "int2", "uint2"):
        record["casts"][name] = np.asarray(x.astype(getattr(jnp, name))).astype(int).tolist()
    for name in ("int4", "uint4"):
        for lo, hi in RANGES:
            r = jax.random.randint(jax.random.key(0), (12,), lo, hi, dtype=getattr(jnp, name))
            record["randint"][f"{name} {lo} {hi}"] = np.asarray(r).astype(int).tolist()
    with open(PATH, "w") as f:
        json.dump(record, f, sort_keys=True)
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
