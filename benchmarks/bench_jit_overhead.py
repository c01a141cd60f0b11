"""Call overhead of a jitted function on a cache hit, funcgrad side by side with JAX (and a
plain Python call), every library on one thread.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. \\
        /work/benchvenv/bin/python benchmarks/bench_jit_overhead.py [--samples 41] [--calls 200]

The functions are trivial (x + 1 on 4 floats, a dict of 10 such arrays, a static argument,
a donated argument fed back), so the time is dispatch: the cache key, the lookup, the
executable's call, the outputs. funcgrad runs each on its numpy tier (`backend="numpy"`)
and on its native tier (C, `config.native="sync"`). A sample is the mean of `--calls`
consecutive calls; the implementations take turns sample by sample (so a busy machine
slows them alike); cells are the median us per call and (p25-p75) over `--samples`
samples. "exe alone" is the native tier's compiled executable called directly on the
unwrapped values: the rest of the native column is jit's dispatch (key, lookup, outputs).
"""

import argparse
import os
import sys
import time

ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NPROC": "1",  # XLA's CPU client sizes its thread pool from it
              "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
for _k, _v in ONE_THREAD.items():  # before numpy, OpenBLAS or XLA start any thread
    os.environ.setdefault(_k, _v)

import numpy as np  # noqa: E402

import funcgrad as fg  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402

try:  # optional comparison tier
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None

KEYS = tuple(f"w{i}" for i in range(10))


def _cases(lib, asarray):
    """(name, make(jit) -> (jitted, args, feeds back)) for library `lib` (funcgrad or jax)."""
    x = np.ones(4, np.float32)
    tree_map = lib.tree_util.tree_map

    def add_one(a):
        return a + 1.0

    def tree_add(t):
        return tree_map(lambda a: a + 1.0, t)

    def add_n(a, n):
        return a + n

    return [
        ("x + 1", lambda jit: (jit(add_one), (asarray(x),), False)),
        ("dict of 10 arrays + 1", lambda jit: (
            jit(tree_add), ({k: asarray(x) for k in KEYS},), False)),
        ("x + n, n static", lambda jit: (jit(add_n, static_argnums=1), (asarray(x), 2), False)),
        ("x + 1, x donated", lambda jit: (jit(add_one, donate_argnums=0), (asarray(x),), True)),
    ]


def _runner(jitted, args, feeds_back, block=lambda out: out):
    """A function making one call (a donated argument is replaced by the call's output)."""
    args = list(args)
    if feeds_back:
        def call():
            args[0] = block(jitted(*args))
        return call
    return lambda: block(jitted(*args))


def _funcgrad_runners(tier):
    fg.config.update("native", "sync" if tier == "native" else "off")
    backend = "cpu" if tier == "native" else "numpy"
    jit = lambda f, **kw: fg.jit(f, backend=backend, **kw)
    out = {}
    for name, make in _cases(fg, fnp.asarray):
        jitted, args, feeds_back = make(jit)
        out[name] = _runner(jitted, args, feeds_back)
        out[name]()  # trace and compile
        out[name].exe_alone = _executable_alone(jitted, args, feeds_back)
    return out


def _executable_alone(jitted, args, feeds_back):
    """The compiled executable called directly on the unwrapped values (no jit dispatch)."""
    if feeds_back:
        return None
    entry = next(iter(jitted._cache.entries.values()))
    leaves = fg.tree_util.tree_leaves([a for i, a in enumerate(args)
                                       if i not in jitted._static_nums])
    vals = [*entry.const_vals, *(x._value for x in leaves)]
    exe = entry.exe
    return lambda: exe(*vals)


def _jax_runners():
    out = {}
    for name, make in _cases(jax, jnp.asarray):
        jitted, args, feeds_back = make(jax.jit)
        out[name] = _runner(jitted, args, feeds_back, jax.block_until_ready)
        out[name]()
    return out


def _sample(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def _cell(v):
    return f"{np.median(v):.2f} ({np.percentile(v, 25):.2f}-{np.percentile(v, 75):.2f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=41, help="samples per cell")
    parser.add_argument("--calls", type=int, default=200, help="calls per sample")
    args = parser.parse_args()
    columns = {"numpy tier": _funcgrad_runners("numpy"), "native tier": _funcgrad_runners("native")}
    columns["exe alone"] = {k: f.exe_alone for k, f in columns["native tier"].items()}
    if jax is not None:
        columns["JAX"] = _jax_runners()
    names = list(columns["numpy tier"])
    times = {(c, n): [] for c in columns for n in names if columns[c][n] is not None}
    for _ in range(args.samples):  # turns: every cell gets one sample per round
        for (c, n), samples in times.items():
            samples.append(_sample(columns[c][n], args.calls))
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"\njit call on a cache hit, us per call: median (p25-p75) of {args.samples} samples "
          f"of {args.calls} calls; one thread (OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS')}); python {sys.version.split()[0]}, "
          f"jax {jax.__version__ if jax else '-'}\n")
    head = ["function", *columns]
    if jax is not None:
        head += ["numpy tier / JAX", "native tier / JAX"]
    print("| " + " | ".join(head) + " |\n|" + "|".join(
        [" --- "] + [" ---: "] * (len(head) - 1)) + "|")
    for n in names:
        cells = [_cell(times[c, n]) if (c, n) in times else "-" for c in columns]
        if jax is not None:
            cells += [f"{med['numpy tier', n] / med['JAX', n]:.2f}",
                      f"{med['native tier', n] / med['JAX', n]:.2f}"]
        print(f"| {n} | " + " | ".join(cells) + " |")
    if jax is None:
        print("(JAX is not installed: no JAX column)")


if __name__ == "__main__":
    main()
