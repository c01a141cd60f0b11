"""Compile time against program size: trace, optimize, fuse and render phases.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \
        python benchmarks/bench_compile_scaling.py [--case chain grad gradchain many]
        [--sizes 100 1000] [--max-seconds 60] [--jax-only]

Four programs, each built by a Python loop inside the traced function and compiled with
`fg.jit(f).lower(x).compile()`:

- chain: an elementwise chain of n ops on a f32[64] array (sin, *, +, tanh, exp(-x*x)...);
- grad: `grad` of a mixed chain of n steps on a f32[8,8] array: elementwise steps, a row
  mean subtracted (a reduction and a broadcast) and a small matmul every 10 steps;
- gradchain: `grad` of the sum of the chain (forward and backward kernels fuse together);
- many: n independent short chains on one input, each reduced to a scalar, summed.

A row gives the steps n, the equations traced, the seconds of each phase (`trace` is the
`lower` call, the others come from `pipeline.stats["last_seconds"]`), the total, and the
exponent k of total ~ n^k fitted between consecutive sizes. Sizes up to 300 are the best
of 3 runs, larger ones one run; a column stops (`-`) before a size that would take over
--max-seconds, extrapolated from the last two sizes. When JAX is importable, a `jax`
column gives `jax.jit(f).lower(x).compile()` for the same program; --jax-only runs just
that, e.g. from a venv that has JAX but not funcgrad's dependencies.
"""

import argparse
import math
import time

import numpy as np

try:  # optional comparison tier
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None

try:
    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad.compiler import pipeline
except ImportError:  # --jax-only from a venv without funcgrad
    fg = fnp = pipeline = None

SIZES = {"chain": (100, 300, 1000, 3000, 10000), "grad": (100, 300, 1000, 3000),
         "gradchain": (100, 300, 1000, 3000, 10000), "many": (100, 300, 1000, 3000)}


def chain(lib, n):
    def f(x):
        for i in range(n):
            k = i % 4
            if k == 0:
                x = lib.sin(x) * 1.0001 + 0.5
            elif k == 1:
                x = lib.tanh(x)
            elif k == 2:
                x = lib.exp(-x * x)
            else:
                x = x * 0.9 - 0.1
        return x
    return f, np.linspace(-1, 1, 64, dtype=np.float32)


def mixed_grad(lib, grad, n):
    def f(x):
        for i in range(n):
            k = i % 10
            if k == 9:
                x = lib.tanh(x @ x.T * 0.1)
            elif k == 4:
                x = x - lib.mean(x, axis=1, keepdims=True)
            elif k % 2:
                x = lib.sin(x) * 0.9
            else:
                x = lib.tanh(x) + 0.1
        return lib.sum(x * x)
    return grad(f), np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)


def grad_chain(lib, grad, n):
    f, x = chain(lib, n)
    return grad(lambda x: lib.sum(f(x))), x


def many(lib, n):
    def f(x):
        total = 0.0
        for i in range(n):
            total = total + lib.sum(lib.tanh(x * (1.0 + i / n)) + 0.1 * i)
        return total
    return f, np.linspace(-1, 1, 64, dtype=np.float32)


def program(case, lib, grad, n):
    if case == "chain":
        return chain(lib, n)
    if case == "grad":
        return mixed_grad(lib, grad, n)
    if case == "gradchain":
        return grad_chain(lib, grad, n)
    return many(lib, n)


def time_funcgrad(case, n):
    """Seconds per phase of the best of 3 (n <= 300) or of one compilation."""
    best = None
    for _ in range(3 if n <= 300 else 1):
        f, x = program(case, fnp, fg.grad, n)
        jitted = fg.jit(f)
        t0 = time.perf_counter()
        lowered = jitted.lower(x)
        t1 = time.perf_counter()
        lowered.compile()
        t2 = time.perf_counter()
        phases = dict(pipeline.stats["last_seconds"])
        row = {"eqns": len(lowered.jaxpr.jaxpr.eqns), "trace": t1 - t0, **phases,
               "total": t2 - t0}
        if best is None or row["total"] < best["total"]:
            best = row
    return best


def time_jax(case, n):
    best = None
    for _ in range(3 if n <= 300 else 1):
        f, x = program(case, jnp, jax.grad, n)
        t0 = time.perf_counter()
        jax.jit(f).lower(x).compile()
        t = time.perf_counter() - t0
        best = t if best is None else min(best, t)
    return best


def exponent(prev, row):
    if prev is None or prev["total"] <= 0 or row["total"] <= 0:
        return ""
    return f"{math.log(row['total'] / prev['total']) / math.log(row['n'] / prev['n']):.2f}"


def run_case(case, sizes, max_seconds, jax_only):
    cols = ["n", "eqns", "trace", "optimize", "fuse", "render", "total", "k"]
    if jax_only:
        cols = ["n"]
    if jax is not None:
        cols.append("jax")
    print(f"\n{case}\n| " + " | ".join(cols) + " |\n|" + " ---: |" * len(cols))
    prev = prev_jax = None
    for n in sizes:
        row = {"n": n}
        if not jax_only and not _too_long(prev, n, max_seconds):
            row.update(time_funcgrad(case, n))
            row["k"] = exponent(prev, row)
            prev = {"n": n, "total": row["total"], "k": row["k"]}
        if jax is not None and not _too_long(prev_jax, n, max_seconds):
            row["jax"] = time_jax(case, n)
            prev_jax = {"n": n, "total": row["jax"], "k": exponent(prev_jax, {
                "n": n, "total": row["jax"]})}
        if len(row) == 1:
            break
        cells = [_cell(row.get(c, "-")) for c in cols]
        print("| " + " | ".join(cells) + " |", flush=True)


def _cell(v):
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _too_long(prev, n, max_seconds):
    """Whether the last size took over `max_seconds` or, extrapolated with the exponent
    measured last (at least 1), size n would."""
    if prev is None:
        return False
    k = max(float(prev["k"] or 1.0), 1.0)
    return prev["total"] > max_seconds or prev["total"] * (n / prev["n"]) ** k > max_seconds


def pytrees(max_seconds):
    """First jitted call (trace, compile, run) of the identity plus one on wide and deep
    pytrees: n leaves in a list or a dict, or one leaf nested n lists deep."""
    print("\n## pytrees: first call of jit(lambda t: tree_map(lambda x: x + 1, t))")
    print("| tree | n | seconds | k |\n| --- | ---: | ---: | ---: |")
    for kind in ("list", "dict", "depth"):
        prev = None
        for n in (100, 1000, 10000) if kind != "depth" else (100, 500, 1000, 5000):
            leaf = fg.numpy.ones(2)
            if kind == "list":
                tree = [leaf] * n
            elif kind == "dict":
                tree = {f"p{i:05d}": leaf for i in range(n)}
            else:
                tree = leaf
                for _ in range(n):
                    tree = [tree]
            f = fg.jit(lambda t: fg.tree_util.tree_map(lambda x: x + 1, t))
            t0 = time.perf_counter()
            try:
                f(tree)
                cell = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001 - an older funcgrad fails at depth
                cell = type(e).__name__
            k = (f"{math.log(cell / prev[1]) / math.log(n / prev[0]):.2f}"
                 if prev and isinstance(cell, float) and isinstance(prev[1], float) else "")
            print(f"| {kind} | {n} | {_cell(cell) if isinstance(cell, float) else cell} | {k} |")
            prev = (n, cell)
            if isinstance(cell, float) and cell > max_seconds:
                break


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pytrees", action="store_true", help="only the pytree first calls")
    p.add_argument("--case", nargs="+", default=list(SIZES), choices=list(SIZES))
    p.add_argument("--sizes", nargs="+", type=int, default=None)
    p.add_argument("--max-seconds", type=float, default=60.0)
    p.add_argument("--jax-only", action="store_true")
    args = p.parse_args()
    if args.jax_only and jax is None:
        raise SystemExit("--jax-only needs JAX")
    if fg is None and not args.jax_only:
        raise SystemExit("funcgrad is not importable; --jax-only runs only the JAX column")
    if args.pytrees:
        return pytrees(args.max_seconds)
    for case in args.case:
        run_case(case, args.sizes or SIZES[case], args.max_seconds, args.jax_only)


if __name__ == "__main__":
    main()
