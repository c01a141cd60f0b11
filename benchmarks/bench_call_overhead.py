"""What a jitted call costs when the arithmetic is nothing: `jit(lambda x: x + 1)` on 8
floats, and a small program of 40 kernels (20 rounds of `x * a + sum(x) * b` on 8 floats,
each round a reduction kernel and an elementwise one) against it, funcgrad's native tier and JAX
side by side in one process (issue 27: the 40-kernel call <= 2x the one-kernel call, and
the one-kernel call <= 1.0x JAX's).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. \\
        python benchmarks/bench_call_overhead.py [--calls 2000] [--rounds 15] [--threads 1]

Each implementation is timed over `--calls` calls in a row (its result kept alive until the
next call), `--rounds` times interleaved with the others; the table shows the median
microseconds per call (p25-p75) and the ratios. `--threads 1` re-executes the script with
one thread for OpenBLAS, OpenMP and XLA (bench_native_programs.py's settings).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
ROUNDS = 20  # two kernels each


def small_program(np_):
    """40 kernels: each round reduces x, then scales it and adds the reduction."""
    def f(x):
        for k in range(ROUNDS):
            x = x * (1.0 + 1e-3 * k) + np_.sum(x) * 1e-3
        return x
    return f


def funcgrad_calls():
    import funcgrad as fg
    import funcgrad.numpy as fnp
    fg.config.update("native", "sync")
    x = fnp.asarray(np.linspace(0, 1, 8, dtype=np.float32))
    plus1 = fg.jit(lambda x: x + 1)
    forty = fg.jit(small_program(fnp))
    exe = forty.lower(x).compile()._exe
    kernels = len(exe.program.kernels)
    c_calls = getattr(exe, "c_calls", None)  # (None: a funcgrad before issue 27's item 5)
    calls = f" ({c_calls} call(s) into C)" if c_calls is not None else ""
    return {"funcgrad native: x + 1": lambda: plus1(x),
            f"funcgrad native: {kernels} kernels{calls}": lambda: forty(x)}


def jax_calls():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    x = jnp.asarray(np.linspace(0, 1, 8, dtype=np.float32))
    plus1 = jax.jit(lambda x: x + 1)
    forty = jax.jit(small_program(jnp))
    return {"JAX jit: x + 1": lambda: plus1(x).block_until_ready(),
            "JAX jit: 40 kernels' program": lambda: forty(x).block_until_ready()}


def time_calls(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn()
    del out
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", default="all", choices=["1", "all"])
    args = ap.parse_args()
    if args.threads == "1" and os.environ.get("FG_BENCH_CHILD") != "1":
        from bench_native_programs import ONE_THREAD
        env = dict(os.environ, FG_BENCH_CHILD="1", **ONE_THREAD)
        sys.exit(subprocess.call([sys.executable, __file__, "--calls", str(args.calls),
                                  "--rounds", str(args.rounds)], env=env))
    impls = {**funcgrad_calls(), **jax_calls()}
    for fn in impls.values():  # warm: compiled, caches filled
        time_calls(fn, 200)
    times = {name: [] for name in impls}
    for _ in range(args.rounds):
        for name, fn in impls.items():
            times[name].append(time_calls(fn, args.calls))
    med = {n: statistics.median(t) for n, t in times.items()}
    threads = "1" if os.environ.get("FG_BENCH_CHILD") == "1" else "all"
    print(f"threads: {threads}; {args.calls} calls x {args.rounds} interleaved rounds; "
          f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| call | us per call (p25-p75) |\n| --- | ---: |")
    for name, t in times.items():
        q = statistics.quantiles(t, n=4)
        print(f"| {name} | {med[name]:.2f} ({q[0]:.2f}-{q[2]:.2f}) |")
    names = list(med)
    fg1, fg40 = med[names[0]], med[names[1]]
    print(f"\nfuncgrad: 40-kernel call / x + 1 call = {fg40 / fg1:.2f} (target <= 2.0)")
    if len(names) == 4:
        j1, j40 = med[names[2]], med[names[3]]
        print(f"funcgrad x + 1 / JAX x + 1 = {fg1 / j1:.2f} (target <= 1.0); "
              f"40 kernels: funcgrad / JAX = {fg40 / j40:.2f}")


if __name__ == "__main__":
    main()
