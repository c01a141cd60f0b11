"""Data-parallel collectives and training steps over MPI processes (mpi4py + MPICH).

    python benchmarks/bench_distributed.py [--rounds 5] [--steps 10]

launches, with OPENBLAS_NUM_THREADS=1 and UCX_TLS=self,sm (shared memory only):

1. `mpiexec -n 2 ... --worker allreduce`: an allreduce of 1M float32 (4 MiB) through
   funcgrad (`jit(shard_map(lambda x: lax.psum(x, "data")))`, called like any jitted
   function) against raw mpi4py on the same data (`comm.Allreduce(x, y)` into a fresh `y`,
   as a functional psum must return a new array, and into a preallocated `y`). The three
   are interleaved; each iteration starts after a barrier and counts as the slowest
   process's time; medians and minima of `--iters` iterations.
2. the training step of a 784-1024-1024-10 ReLU MLP (softmax cross-entropy, SGD; 1.86M
   parameters, 7.5 MB of gradients), per-process batch 256: one process without
   collectives (`python ... --worker mlp`), then `mpiexec -n 2 ... --worker mlp` with the
   gradient allreduces bucketed (config.collective_bucket_bytes = 4 MiB, the default), as
   one allreduce after the backward pass (bucket size 1 GiB) and one per array (0). Modes
   are interleaved round by round; weak-scaling efficiency E2 = T1 / T2 (ideal 1.0).
3. the same with many small arrays: a 64-wide, 48-layer tanh MLP (96 gradient arrays of
   16 KiB or 256 B), 2 processes, bucketed against one allreduce per array.
Prints a markdown summary for benchmarks/RESULTS.md.
"""

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


# --- worker side ----------------------------------------------------------------------------------

def _timed(comm, fn, iters, warmup=3):
    """Per-iteration seconds (the slowest process's) of `fn()` after a barrier."""
    from mpi4py import MPI
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        comm.Barrier()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times = np.array(times)
    if comm.size > 1:
        comm.Allreduce(MPI.IN_PLACE, times, op=MPI.MAX)
    return times


def worker_allreduce(args):
    from mpi4py import MPI

    import funcgrad as fg
    from funcgrad import lax
    from funcgrad.distributed import Mesh, P, shard_map
    comm = MPI.COMM_WORLD
    mesh = Mesh(("data",))
    x_np = np.random.default_rng(comm.rank).normal(size=1 << 20).astype(np.float32)
    x = fg.numpy.asarray(x_np)
    psum = fg.jit(shard_map(lambda v: lax.psum(v, "data"), mesh, P("data"), P()))
    y_pre = np.empty_like(x_np)

    def raw_fresh():
        y = np.empty_like(x_np)
        comm.Allreduce(x_np, y, op=MPI.SUM)

    def raw_pre():
        comm.Allreduce(x_np, y_pre, op=MPI.SUM)
    got = np.asarray(psum(x))
    raw_fresh()
    comm.Allreduce(x_np, y_pre, op=MPI.SUM)
    assert np.array_equal(got, y_pre), "funcgrad psum differs from the raw allreduce"
    modes = {"funcgrad jit psum": lambda: psum(x), "mpi4py Allreduce, fresh output": raw_fresh,
             "mpi4py Allreduce, preallocated output": raw_pre}
    times = {m: [] for m in modes}
    for _ in range(args.rounds):
        for m, fn in modes.items():
            times[m] += list(_timed(comm, fn, args.iters))
    return {m: (float(np.median(t)), float(np.min(t))) for m, t in times.items()}


def _mlp_problem(batch, seed, sizes=(784, 1024, 1024, 10)):
    import funcgrad.numpy as fnp
    rng = np.random.default_rng(0)
    params = [{"w": fnp.asarray(rng.normal(0, (2 / a) ** 0.5, (a, b)).astype(np.float32)),
               "b": fnp.zeros(b)} for a, b in zip(sizes[:-1], sizes[1:])]
    data = np.random.default_rng(seed)
    x = data.normal(size=(batch, sizes[0])).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[data.integers(0, 10, batch)]
    return params, fnp.asarray(x), fnp.asarray(y)


def _local_loss(params, x, y, act=None):
    import funcgrad.numpy as fnp
    from funcgrad import nn
    act = act or (lambda v: fnp.maximum(v, 0.0))
    h = x
    for layer in params[:-1]:
        h = act(h @ layer["w"] + layer["b"])
    logits = h @ params[-1]["w"] + params[-1]["b"]
    return nn.softmax_cross_entropy(logits, y).mean()


def _sgd(params, grads):
    return [{k: p[k] - 0.01 * g[k] for k in p} for p, g in zip(params, grads)]


def worker_mlp(args, deep=False):
    from mpi4py import MPI

    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad import lax
    from funcgrad.distributed import Mesh, P, shard_map
    comm = MPI.COMM_WORLD
    sizes = (64,) * 48 + (10,) if deep else (784, 1024, 1024, 10)
    params, x, y = _mlp_problem(args.batch, comm.rank, sizes)
    loss = functools.partial(_local_loss, act=fnp.tanh if deep else None)
    if comm.size == 1:
        def make():
            return fg.jit(lambda p, x, y: _sgd(p, fg.grad(loss)(p, x, y)))
        modes = {"1 process, no collectives": (make(), None)}
    else:
        mesh = Mesh(("data",))

        def make():
            def step(p, x, y):
                grads = fg.grad(lambda p: lax.pmean(loss(p, x, y), "data"))(p)
                return _sgd(p, grads)
            return fg.jit(shard_map(step, mesh, in_specs=(P(), P("data"), P("data")),
                                    out_specs=P()))
        modes = {"bucketed (4 MiB)": (make(), 4 << 20),
                 "one allreduce after backward": (make(), 1 << 30),
                 "one allreduce per array": (make(), 0)}
        if deep:
            del modes["one allreduce after backward"]
    calls = {}
    for name, (step, bucket) in modes.items():
        if bucket is not None:
            fg.config.update("collective_bucket_bytes", bucket)
        step(params, x, y)  # compile under this bucket size
        text = step.lower(params, x, y).compile().ir_text()
        calls[name] = sum(1 for line in text.splitlines() if "= psum[" in line)
    fg.config.update("collective_bucket_bytes", 4 << 20)
    times = {m: [] for m in modes}
    for _ in range(args.rounds):
        for name, (step, _) in modes.items():
            times[name] += list(_timed(comm, lambda s=step: s(params, x, y), args.steps, 1))
    return {m: (float(np.median(t)), float(np.min(t)), calls[m]) for m, t in times.items()}


# --- launcher side --------------------------------------------------------------------------------

def _env():
    return dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", UCX_TLS="self,sm",
                PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))


def _launch(n, worker, args):
    near = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = near if os.path.exists(near) else shutil.which("mpiexec")
    cmd = [sys.executable, "-m", "mpi4py", __file__, "--worker", worker,
           "--rounds", str(args.rounds), "--steps", str(args.steps), "--iters", str(args.iters),
           "--batch", str(args.batch)]
    if n > 1:
        cmd = [mpiexec, "-n", str(n)] + cmd
    out = subprocess.run(cmd, env=_env(), cwd=REPO, capture_output=True, text=True,
                         timeout=1200)
    if out.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=["allreduce", "mlp", "deep"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    if args.worker:
        workers = {"allreduce": worker_allreduce, "mlp": worker_mlp,
                   "deep": functools.partial(worker_mlp, deep=True)}
        result = workers[args.worker](args)
        from mpi4py import MPI
        if MPI.COMM_WORLD.rank == 0:
            print(json.dumps(result))
        return

    ar = _launch(2, "allreduce", args)
    print("Allreduce of 1M float32 (4 MiB), 2 processes; ms per call, slowest process\n")
    print("| | median ms | min ms |\n| --- | ---: | ---: |")
    for m, (med, lo) in ar.items():
        print(f"| {m} | {med * 1e3:.3f} | {lo * 1e3:.3f} |")
    fg_med, raw_med = ar["funcgrad jit psum"][0], ar["mpi4py Allreduce, fresh output"][0]
    fg_min, raw_min = ar["funcgrad jit psum"][1], ar["mpi4py Allreduce, fresh output"][1]
    print(f"\nfuncgrad over raw (fresh output): median {fg_med / raw_med - 1:+.1%}, "
          f"min {fg_min / raw_min - 1:+.1%}\n")

    one = _launch(1, "mlp", args)
    two = _launch(2, "mlp", args)
    (t1_med, t1_min, _), = one.values()
    print(f"MLP 784-1024-1024-10 step (SGD), {args.batch} examples per process; ms per step\n")
    print("| mode | allreduces | median ms | min ms | E2 by median | E2 by min |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(f"| 1 process, no collectives | 0 | {t1_med * 1e3:.2f} | {t1_min * 1e3:.2f} | | |")
    for m, (med, lo, calls) in two.items():
        print(f"| 2 processes, {m} | {calls} | {med * 1e3:.2f} | {lo * 1e3:.2f} | "
              f"{t1_med / med:.2f} | {t1_min / lo:.2f} |")

    deep = _launch(2, "deep", args)
    print(f"\n48-layer 64-wide tanh MLP (96 gradient arrays), {args.batch} examples per "
          "process, 2 processes; ms per step\n")
    print("| mode | allreduces | median ms | min ms |\n| --- | ---: | ---: | ---: |")
    for m, (med, lo, calls) in deep.items():
        print(f"| {m} | {calls} | {med * 1e3:.2f} | {lo * 1e3:.2f} |")


if __name__ == "__main__":
    main()
