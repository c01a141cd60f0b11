"""Eager random calls: funcgrad.random (native C tier and numpy tier) against jax.random and
NumPy's Generator, one thread each, as a markdown table of microseconds per call.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \\
        XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
        PYTHONPATH=. /work/jaxvenv/bin/python benchmarks/bench_random_eager.py

Each cell is the median time of one eager call (`perf_counter` around the call, JAX's
result waited for with `block_until_ready`) and, in brackets, the 10th and 90th percentiles,
after warm-up calls that trace and compile (and, for the C tier, wait for the background
build). funcgrad's two tiers run in child processes (`--tier native|numpy`), so each
compiles its own programs; `OMP_NUM_THREADS=1` keeps funcgrad's C kernels on one thread.
`fg/jax` is the C tier's median over JAX's. NumPy's closest calls: `standard_normal`,
`random`, `spawn(2)` for split, Gumbel-max over `gumbel` draws for categorical,
`standard_gamma`. Without JAX installed its column is empty.
"""

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

SIZES = (10, 1000, 100000)
CLASSES = 10  # categorical: `size` draws over 10 classes (logits of shape (size, 10))


def _ops(r, xp):
    """name -> function(key, size) of a random library with JAX's API."""
    return {
        "normal": lambda k, n: r.normal(k, (n,)),
        "uniform": lambda k, n: r.uniform(k, (n,)),
        "split": lambda k, n: r.split(k, n),
        "categorical": lambda k, n, lg={}: r.categorical(
            k, lg.setdefault(n, xp.zeros((n, CLASSES)))),
        "gamma": lambda k, n: r.gamma(k, 2.0, (n,)),
    }


def _numpy_ops():
    rng = np.random.default_rng(0)
    return {
        "normal": lambda n: rng.standard_normal(n, dtype=np.float32),
        "uniform": lambda n: rng.random(n, dtype=np.float32),
        "split": lambda n: rng.spawn(n),
        "categorical": lambda n: np.argmax(rng.gumbel(size=(n, CLASSES)).astype(np.float32),
                                           axis=-1),
        "gamma": lambda n: rng.standard_gamma(2.0, n, dtype=np.float32),
    }


def _sizes(name):
    return (2, 1000) if name == "split" else SIZES


def _time(call, wait, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        wait(call())
        times.append(time.perf_counter() - t)
    return [float(np.percentile(times, q)) * 1e6 for q in (50, 10, 90)]


def _repeats(n):
    return 30 if n >= 100000 else 200


def _measure(ops, key, wait, settle=lambda: None):
    calls = {(name, n): (lambda f=f, n=n: f(key, n)) for name, f in ops.items()
             for n in _sizes(name)}
    for call in calls.values():
        for _ in range(3):
            wait(call())
    settle()
    return {f"{name}/{n}": _time(call, wait, _repeats(n)) for (name, n), call in calls.items()}


def _funcgrad(tier):
    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad import random as r
    from funcgrad.backends.native import tiers
    fg.config.update("native", "background" if tier == "native" else "off")
    return _measure(_ops(r, fnp), r.PRNGKey(0), np.asarray, settle=tiers.drain)


def _jax():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    return _measure(_ops(jax.random, jnp), jax.random.PRNGKey(0),
                    lambda x: jax.block_until_ready(x))


def _numpy():
    return {f"{name}/{n}": _time(lambda f=f, n=n: f(n), lambda x: x, _repeats(n))
            for name, f in _numpy_ops().items() for n in _sizes(name)}


def _child(tier):
    out = subprocess.run([sys.executable, __file__, "--tier", tier], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _cell(t):
    return "—" if t is None else f"{t[0]:.0f} [{t[1]:.0f}–{t[2]:.0f}]"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", choices=("native", "numpy"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tier:
        print(json.dumps(_funcgrad(args.tier)))
        return
    native, numpy_tier, jax_times, np_times = (_child("native"), _child("numpy"), _jax(),
                                               _numpy())
    print("| call | funcgrad (C tier) µs | funcgrad (numpy tier) µs | JAX µs | NumPy µs | "
          "fg/jax |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for key in native:
        j = jax_times.get(key)
        ratio = f"{native[key][0] / j[0]:.2f}" if j else "—"
        print(f"| {key} | {_cell(native[key])} | {_cell(numpy_tier.get(key))} | {_cell(j)} | "
              f"{_cell(np_times.get(key))} | {ratio} |")


if __name__ == "__main__":
    main()
