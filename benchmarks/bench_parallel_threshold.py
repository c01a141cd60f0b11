"""What a kernel on funcgrad's thread pool costs against one thread, by size.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. \\
        python benchmarks/bench_parallel_threshold.py [--repeat 200]

Times two jitted native kernels, `x * 2 + 1` (memory-bound) and `tanh(x) * 0.5 + x`, on
float32 vectors of 32k to 2M elements, in fresh processes: one thread (OMP_NUM_THREADS=1),
every core with the pool as it is (idle workers spin, yielding, for `threads.SPIN_US`
before they sleep), and every core with workers that sleep at once after their last block
(SPIN_US = 0: every call wakes a worker, which on this project's VM costs the caller more
than the worker saves below 256k elements). Kernels from
`kernel.PARALLEL_MIN_ELEMENTS` elements on run on the pool. Medians of `--repeat` calls,
microseconds.
"""

import argparse
import json
import os
import subprocess
import sys
import time

SIZES = [1 << k for k in range(15, 22)]
SETTINGS = {"1 thread": {"OMP_NUM_THREADS": "1"},
            "all cores (default)": {},
            "all cores, workers sleep at once": {"BENCH_SPIN_US": "0"}}


def child(repeat):
    import numpy as np

    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad.backends.native import threads
    threads.SPIN_US = int(os.environ.get("BENCH_SPIN_US", threads.SPIN_US))  # before its start
    fg.config.update("native", "sync")
    out = {}
    for n in SIZES:
        x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        for name, fn in (("x*2+1", lambda x: x * 2 + 1),
                         ("tanh(x)*0.5+x", lambda x: fnp.tanh(x) * 0.5 + x)):
            f = fg.jit(fn)
            f(x)
            ts = []
            for _ in range(repeat):
                t = time.perf_counter()
                f(x)
                ts.append(time.perf_counter() - t)
            out[f"{name} {n}"] = float(np.median(ts)) * 1e6
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.repeat)
    runs = {}
    for label, env in SETTINGS.items():
        e = dict(os.environ, **env)
        out = subprocess.run([sys.executable, __file__, "--child", "--repeat", str(args.repeat)],
                             env=e, check=True, capture_output=True, text=True)
        runs[label] = json.loads(out.stdout.splitlines()[-1])
    print(f"{os.cpu_count()} CPUs; medians of {args.repeat} calls, us\n")
    print("| kernel | elements | " + " | ".join(SETTINGS) + " |")
    print("| --- | ---: |" + " ---: |" * len(SETTINGS))
    for key in runs["1 thread"]:
        name, n = key.rsplit(" ", 1)
        cells = " | ".join(f"{runs[s][key]:.0f}" for s in SETTINGS)
        print(f"| {name} | {int(n) >> 10}k | {cells} |")


if __name__ == "__main__":
    main()
