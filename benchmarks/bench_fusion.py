"""A fused elementwise chain against the naive NumPy expression.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_fusion.py [--n N]

Computes gelu(x * a + b) (tanh form) with x f32[N/1024, 1024] (4M elements by default) and
a, b f32[1024] broadcast along the rows, three ways: the naive NumPy expression (every
operation allocates a temporary), the funcgrad-compiled kernel (one fused kernel: `out=`
into reused buffers), and the same compiled kernel with x donated (computed in place).
Runs are interleaved so that machine load affects all columns alike; the table shows the
median and the spread (25th-75th percentile) in ms, the ratio to NumPy, and the bytes
allocated beyond inputs and outputs (tracemalloc peak, and the compiler's prediction).
"""

import argparse
import time
import tracemalloc

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.compiler import pipeline

C = 0.7978845608028654


def gelu_numpy(x, a, b):
    y = x * a + b
    return 0.5 * y * (1.0 + np.tanh(C * (y + 0.044715 * y * y * y)))


def gelu_funcgrad(x, a, b):
    y = x * a + b
    return 0.5 * y * (1.0 + fnp.tanh(C * (y + 0.044715 * y * y * y)))


def interleaved(fns, repeat):
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, (fn, setup) in fns.items():
            args = setup()
            t0 = time.perf_counter()
            fn(*args)
            times[name].append(time.perf_counter() - t0)
    return {k: np.array(v) * 1e3 for k, v in times.items()}


def extra_bytes(fn, args, out_bytes):
    """Peak bytes allocated by one call beyond its result (tracemalloc)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out = fn(*args)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del out
    return peak - out_bytes


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4 * 2**20)
    p.add_argument("--repeat", type=int, default=21)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.n // 1024, 1024)).astype(np.float32)
    a = rng.normal(size=1024).astype(np.float32)
    b = rng.normal(size=1024).astype(np.float32)

    t0 = time.perf_counter()
    closed = fg.make_jaxpr(gelu_funcgrad)(x, a, b)
    exe = pipeline.compile_jaxpr(closed)
    exe_donated = pipeline.compile_jaxpr(closed, donate_argnums=(0,))
    compile_ms = (time.perf_counter() - t0) * 1e3 / 2
    np.testing.assert_allclose(exe(x, a, b)[0], gelu_numpy(x, a, b), rtol=1e-4, atol=1e-5)

    spare = [x.copy() for _ in range(args.repeat)]
    fns = {
        "numpy (naive)": (gelu_numpy, lambda: (x, a, b)),
        "funcgrad fused": (exe, lambda: (x, a, b)),
        "fused, x donated": (exe_donated, lambda: (spare.pop(), a, b)),
    }
    interleaved(fns, 2)  # warm up
    spare = [x.copy() for _ in range(args.repeat)]
    times = interleaved(fns, args.repeat)
    base = np.median(times["numpy (naive)"])
    temps = {"numpy (naive)": extra_bytes(gelu_numpy, (x, a, b), x.nbytes),
             "funcgrad fused": extra_bytes(exe, (x, a, b), x.nbytes),
             "fused, x donated": extra_bytes(exe_donated, (x.copy(), a, b), 0)}
    print(f"gelu(x * a + b), x f32{list(x.shape)} ({x.size / 2**20:.0f}M elements), "
          f"a, b f32[1024]; compile {compile_ms:.1f} ms; {args.repeat} interleaved runs")
    print(f"{'':18} {'median ms':>10} {'p25-p75 ms':>14} {'vs numpy':>9} {'temp MiB':>9}")
    for name, t in times.items():
        q1, q3 = np.percentile(t, [25, 75])
        print(f"{name:18} {np.median(t):10.2f} {q1:6.2f}-{q3:<7.2f} "
              f"{np.median(t) / base:9.2f} {temps[name] / 2**20:9.1f}")
    mem = exe.memory_analysis()
    print(f"compiler's prediction (not donated): {mem}")
    print("\ngenerated source:\n" + exe.as_text())


if __name__ == "__main__":
    main()
