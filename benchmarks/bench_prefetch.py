"""What software prefetching buys the native backend's streaming kernels when their arrays
come from L3 or memory, as they do in a training step after other work.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. \\
        python benchmarks/bench_prefetch.py [--threads 1|all|both] [--flush-mib 0 64 256]

Two programs of bench_native_programs.py, each compiled twice in one process: as the
native backend prints it (elementwise kernels of `kernel.PREFETCH_MIN_BYTES` or more
prefetch `kernel.PREFETCH_BYTES` ahead in every array they read) and with prefetching
off: `adam` (one Adam update of 670k float32 parameters, donated, four streams read) and
`gelu` (gelu(x*a+b) on 4M float32, one stream). Before every timed step the script writes
a buffer of `--flush-mib` MiB (0: none, the arrays stay in cache from the step before),
so the step finds its arrays in L3 (64) or memory (256) with dirty lines of other data in
the caches. Interleaved steps; median ms (p25-p75) and the ratio without / with.
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def programs():
    from bench_native import SHAPES, adam, gelu

    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad.backends.native import kernel
    fg.config.update("native", "sync")
    rng = np.random.default_rng(1)
    p, g = ([rng.normal(size=s).astype(np.float32) for s in SHAPES] for _ in range(2))
    x = rng.normal(size=(4096, 1024)).astype(np.float32)
    a, b = (rng.normal(size=1024).astype(np.float32) for _ in range(2))

    def update(p, mu, nu, g):
        out = adam(fnp, fnp.sqrt, p, mu, nu, g)
        return tuple([o[k] for o in out] for k in range(3))
    out, limit = {}, kernel.PREFETCH_MIN_BYTES
    for fetch in (True, False):
        kernel.PREFETCH_MIN_BYTES = limit if fetch else 1 << 62
        # a new function object per setting: jit shares compiled code per function
        step = fg.jit(lambda *s: update(*s), backend="cpu", donate_argnums=(0, 1, 2))
        state = [[v.copy() for v in p], [np.zeros_like(v) for v in p],
                 [np.zeros_like(v) for v in p]]

        def adam_step(step=step, state=state):
            state[:] = list(step(*state, g))
        act = fg.jit(lambda x, a, b: gelu(fnp, x, a, b), backend="cpu")
        adam_step()
        fg.block_until_ready(act(x, a, b))
        src = act.lower(x, a, b).compile().as_text()
        assert ("FG_PREFETCH(p_" in src) == fetch
        tag = "prefetch" if fetch else "no prefetch"
        out[("adam", tag)] = adam_step
        out[("gelu", tag)] = lambda act=act: fg.block_until_ready(act(x, a, b))
    kernel.PREFETCH_MIN_BYTES = limit
    return out


def child(args):
    fns = programs()
    cell = lambda t: f"{np.median(t):.3f} ({np.percentile(t, 25):.3f}-{np.percentile(t, 75):.3f})"
    print(f"\nthreads: {args.threads}; {args.repeat} interleaved steps per cell, median ms "
          "(p25-p75)\n")
    print("| program | flush MiB | prefetch | no prefetch | no prefetch / prefetch |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for mib in args.flush_mib:
        junk = np.ones(max(mib, 1) << 18, np.float32)
        times = {k: [] for k in fns}
        for _ in range(args.repeat):
            for k, fn in fns.items():
                if mib:
                    junk += 1.0
                t0 = time.perf_counter()
                fn()
                times[k].append((time.perf_counter() - t0) * 1e3)
        for name in ("adam", "gelu"):
            w, wo = times[(name, "prefetch")], times[(name, "no prefetch")]
            print(f"| {name} | {mib} | {cell(w)} | {cell(wo)} | "
                  f"{np.median(wo) / np.median(w):.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", choices=("1", "all", "both"), default="both")
    ap.add_argument("--flush-mib", type=int, nargs="+", default=[0, 64, 256])
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    for threads in ("1", "all") if args.threads == "both" else (args.threads,):
        env = dict(os.environ, **({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
                                  if threads == "1" else {}))
        subprocess.run([sys.executable, __file__, "--child", "--threads", threads,
                        "--repeat", str(args.repeat), "--flush-mib",
                        *map(str, args.flush_mib)], env=env, check=True)


if __name__ == "__main__":
    main()
