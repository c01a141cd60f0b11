"""The native C backend against the numpy backend, hand-written NumPy, and JAX/PyTorch
when importable (one thread, then all cores: set OMP_NUM_THREADS before starting).

    OMP_NUM_THREADS=1 python benchmarks/bench_native.py
    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/bench_native.py   # with JAX/torch

Workloads: the fused chain gelu(x * a + b) (tanh form) on x f32[4096, 1024] (4M elements)
with a, b f32[1024]; one Adam update over 670k float32 parameters (params, both moments
donated); a loop-heavy scan (1000 steps of h = tanh(h * w + x_t), h f32[256]), whose body
the native backend runs as one C loop; an RNN scan with two 64x64 matmuls per step (small
matmuls run in the C loop too). Each row: median ms (25th-75th percentile) over
interleaved runs, the ratio to the native backend, and the effective bandwidth (bytes the
kernel must move / time) as a fraction of this machine's copy bandwidth (np.copyto of
256 MiB, measured at start).
"""

import argparse
import os
import time

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp

C = 0.7978845608028654
SHAPES = [(784, 512), (512, 512), (512,), (512, 10), (10,), (512, 128), (128,)]  # ~670k


def gelu(m, x, a, b):
    y = x * a + b
    return 0.5 * y * (1.0 + m.tanh(C * (y + 0.044715 * y * y * y)))


def adam(m, sqrt, p, mu, nu, g, count=10, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    out = []
    for pi, mi, vi, gi in zip(p, mu, nu, g):
        mi = b1 * mi + (1 - b1) * gi
        vi = b2 * vi + (1 - b2) * gi * gi
        mh = mi / (1 - b1 ** count)
        vh = vi / (1 - b2 ** count)
        out.append((pi - lr * mh / (sqrt(vh) + eps), mi, vi))
    return out


def copy_bandwidth():
    a = np.ones(1 << 26, np.float32)
    b = np.empty_like(a)
    best = min(_time(lambda: np.copyto(b, a)) for _ in range(5))
    return 2 * a.nbytes / best


def _time(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleaved(fns, repeat):
    times = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            times[k].append(_time(fn))
    return {k: np.array(v) * 1e3 for k, v in times.items()}


def _jit(fn, backend, donate=()):
    fg.config.update("native", "sync")
    return fg.jit(fn, backend=backend, donate_argnums=donate)


def gelu_runs(n):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n // 1024, 1024)).astype(np.float32)
    a, b = (rng.normal(size=1024).astype(np.float32) for _ in range(2))
    f = lambda x, a, b: gelu(fnp, x, a, b)
    fns = {"numpy (hand)": lambda: gelu(np, x, a, b)}
    for backend in ("numpy", "cpu"):
        j = _jit(f, backend)
        fx, fa, fb = fnp.asarray(x), fnp.asarray(a), fnp.asarray(b)
        fg.block_until_ready(j(fx, fa, fb))
        fns[f"funcgrad {'native' if backend == 'cpu' else 'numpy backend'}"] = (
            lambda j=j, fx=fx, fa=fa, fb=fb: j(fx, fa, fb))
    fns.update(_others_gelu(x, a, b))
    return fns, 2 * x.nbytes


def adam_runs():
    rng = np.random.default_rng(1)
    p, g = ([rng.normal(size=s).astype(np.float32) for s in SHAPES] for _ in range(2))
    mu, nu = [np.zeros_like(x) for x in p], [np.zeros_like(x) for x in p]
    fns = {"numpy (hand)": lambda: adam(np, np.sqrt, p, mu, nu, g)}
    for backend in ("numpy", "cpu"):
        j = _jit(lambda p, mu, nu, g: adam(fnp, fnp.sqrt, p, mu, nu, g), backend, (0, 1, 2))
        state = [[fnp.asarray(x) for x in t] for t in (p, mu, nu)]

        def step(j=j, state=state):
            out = j(*state, g)
            state[:] = [[o[k] for o in out] for k in range(3)]
        step()
        fns[f"funcgrad {'native' if backend == 'cpu' else 'numpy backend'}"] = step
    fns.update(_others_adam(p, mu, nu, g))
    nbytes = sum(x.nbytes for x in p) * 7  # read p, m, v, g; write p, m, v
    return fns, nbytes


def _others_gelu(x, a, b):
    out = {}
    try:
        import jax
        import jax.numpy as jnp
        jf = jax.jit(lambda x, a, b: gelu(jnp, x, a, b))
        jx, ja, jb = (jax.device_put(v) for v in (x, a, b))
        jf(jx, ja, jb).block_until_ready()
        out["JAX jit"] = lambda: jf(jx, ja, jb).block_until_ready()
    except ImportError:
        pass
    try:
        import torch
        tx, ta, tb = (torch.from_numpy(v) for v in (x, a, b))
        out["PyTorch eager"] = lambda: gelu(torch, tx, ta, tb)
    except ImportError:
        pass
    return out


def _others_adam(p, mu, nu, g):
    out = {}
    try:
        import jax
        import jax.numpy as jnp
        jf = jax.jit(lambda p, mu, nu, g: adam(jnp, jnp.sqrt, p, mu, nu, g),
                     donate_argnums=(0, 1, 2))
        state = [[jax.device_put(x) for x in t] for t in (p, mu, nu)]
        jg = [jax.device_put(x) for x in g]

        def step():
            res = jf(*state, jg)
            state[:] = [[o[k] for o in res] for k in range(3)]
            jax.block_until_ready(state)
        step()
        out["JAX jit"] = step
    except ImportError:
        pass
    return out


def scan_runs(steps=1000, n=256):
    from funcgrad import lax
    rng = np.random.default_rng(2)
    xs = rng.normal(size=(steps, n)).astype(np.float32)
    h0, w = (rng.normal(size=n).astype(np.float32) for _ in range(2))

    def rnn(m, scan, xs, h0, w):
        return scan(lambda h, x: (m.tanh(h * w + x), h), h0, xs)

    def hand():
        h, out = h0, np.empty_like(xs)
        for t in range(steps):
            out[t] = h
            h = np.tanh(h * w + xs[t])
        return h, out
    fns = {"numpy (hand)": hand}
    for backend in ("numpy", "cpu"):
        j = _jit(lambda xs, h0, w: rnn(fnp, lax.scan, xs, h0, w), backend)
        fg.block_until_ready(j(xs, h0, w))
        fns[f"funcgrad {'native' if backend == 'cpu' else 'numpy backend'}"] = (
            lambda j=j: j(xs, h0, w))
    try:
        import jax
        import jax.numpy as jnp
        jf = jax.jit(lambda xs, h0, w: rnn(jnp, jax.lax.scan, xs, h0, w))
        jax.block_until_ready(jf(xs, h0, w))
        fns["JAX jit"] = lambda: jax.block_until_ready(jf(xs, h0, w))
    except ImportError:
        pass
    return fns, xs.nbytes * 2


def rnn_runs(steps=200, n=64):
    from funcgrad import lax
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(steps, n)).astype(np.float32)
    h0 = rng.normal(size=n).astype(np.float32)
    w, u = (rng.normal(size=(n, n)).astype(np.float32) / np.sqrt(n) for _ in range(2))

    def rnn(m, scan, h0, w, u, xs):
        return scan(lambda h, x: (m.tanh(h @ w + x @ u), h), h0, xs)
    fns = {}
    for backend in ("numpy", "cpu"):
        j = _jit(lambda *a: rnn(fnp, lax.scan, *a), backend)
        fg.block_until_ready(j(h0, w, u, xs))
        fns[f"funcgrad {'native' if backend == 'cpu' else 'numpy backend'}"] = (
            lambda j=j: j(h0, w, u, xs))
    try:
        import jax
        import jax.numpy as jnp
        jf = jax.jit(lambda *a: rnn(jnp, jax.lax.scan, *a))
        jax.block_until_ready(jf(h0, w, u, xs))
        fns["JAX jit"] = lambda: jax.block_until_ready(jf(h0, w, u, xs))
    except ImportError:
        pass
    return fns, xs.nbytes * 2


FIRST_CALL = """
import sys, time, numpy as np, funcgrad as fg, funcgrad.numpy as fnp
fg.config.update("native", sys.argv[1]); fg.config.update("native_cache_dir", sys.argv[2])
x, a = np.ones((64, 1024), np.float32), np.ones(1024, np.float32)
fg.jit(lambda x: x + 1)(x)  # imports and the compiler probe, outside the measurement
f = lambda x, a, b: 0.5 * (x * a + b) * (1.0 + fnp.tanh(0.7978845608028654 * (x * a + b)))
t = time.perf_counter(); fg.jit(f)(x, a, a); print((time.perf_counter() - t) * 1e3)
"""


def first_calls():
    """ms of a fresh process's first call of a jitted gelu: per tier, cold and warm cache."""
    import subprocess
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        run = lambda mode: float(subprocess.run(
            [sys.executable, "-c", FIRST_CALL, mode, d], capture_output=True, text=True,
            check=True).stdout)
        return {"numpy only (off)": run("off"), "background": run("background"),
                "sync, empty cache": run("sync"), "sync, module on disk": run("sync")}


def report(title, fns, nbytes, bw, repeat):
    t = interleaved(fns, repeat)
    ref = np.median(t["funcgrad native"])
    print(f"\n{title}\n| implementation | median ms (p25-p75) | / native | GB/s | of copy bw |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for k, v in t.items():
        med = np.median(v)
        gbs = nbytes / (med * 1e-3) / 1e9
        print(f"| {k} | {med:.2f} ({np.percentile(v, 25):.2f}-{np.percentile(v, 75):.2f}) | "
              f"{med / ref:.2f} | {gbs:.1f} | {100 * gbs * 1e9 / bw:.0f}% |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    bw = copy_bandwidth()
    print(f"threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"{os.cpu_count()} CPUs; copy bandwidth {bw / 1e9:.1f} GB/s")
    report(f"gelu(x * a + b), {args.n} float32", *gelu_runs(args.n), bw, args.repeat)
    report("Adam update, 670k float32 parameters (donated)", *adam_runs(), bw, args.repeat)
    report("scan: 1000 steps of h = tanh(h * w + x_t), h f32[256]", *scan_runs(), bw,
           args.repeat)
    report("RNN scan: 200 steps of h = tanh(h @ W + x_t @ U), h f32[64]", *rnn_runs(), bw,
           args.repeat)
    print("\nfirst call of a jitted gelu in a fresh process (trace + compile + run), ms")
    for k, v in first_calls().items():
        print(f"| {k} | {v:.0f} |")


if __name__ == "__main__":
    main()
