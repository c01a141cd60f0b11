"""What a jitted optimizer step costs beyond its arithmetic: an Adam update over the seven
arrays of the MLP's parameters, scaled down to 4-64 floats each, so the time is the call.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. \\
        python benchmarks/bench_step_overhead.py [--repeat 3000]

funcgrad's native tier (synchronous build) with the parameters and both moments donated
(28 arrays in, 21 out: jit's donation checks, the C calls) and without donation, the numpy
tier, and JAX's jit with the same donation when JAX is installed. Median and p10-p90 of
single steps, in microseconds, in one process.
"""

import argparse
import time

import numpy as np
from bench_native import adam

SHAPES = [(8, 8), (8, 8), (8,), (8, 4), (4,), (8, 4), (4,)]  # bench_native.SHAPES, scaled


def update_of(m):
    def update(p, mu, nu, g):
        out = adam(m, m.sqrt, p, mu, nu, g)
        return tuple([o[k] for o in out] for k in range(3))
    return update


def state():
    rng = np.random.default_rng(1)
    p, g = ([rng.normal(size=s).astype(np.float32) for s in SHAPES] for _ in range(2))
    return [p, [np.zeros_like(x) for x in p], [np.zeros_like(x) for x in p]], g


def funcgrad_steps():
    import funcgrad as fg
    import funcgrad.numpy as fnp
    fg.config.update("native", "sync")
    out = {}
    for label, backend, donate in (("funcgrad native, donated", "cpu", (0, 1, 2)),
                                   ("funcgrad native", "cpu", ()),
                                   ("funcgrad numpy tier, donated", "numpy", (0, 1, 2))):
        # a new function object each: jit shares compiled code per function
        step = fg.jit(lambda *a: update_of(fnp)(*a), backend=backend, donate_argnums=donate)
        s, g = state()

        def run(step=step, s=s, g=g):
            s[:] = list(step(*s, g))
        out[label] = run
    return out


def jax_steps():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    step = jax.jit(update_of(jnp), donate_argnums=(0, 1, 2))
    s, g = state()
    s, g = [[jnp.asarray(x) for x in t] for t in s], [jnp.asarray(x) for x in g]

    def run():
        s[:] = list(step(*s, g))
        jax.block_until_ready(s)
    return {"JAX jit, donated": run}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3000)
    args = ap.parse_args()
    fns = {**funcgrad_steps(), **jax_steps()}
    for fn in fns.values():
        for _ in range(20):
            fn()
    times = {k: [] for k in fns}
    for _ in range(args.repeat):  # interleaved
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - t0) * 1e6)
    print("| step (7 arrays, 4-64 floats each) | median us | p10-p90 us |\n| --- | ---: | ---: |")
    for k, t in times.items():
        print(f"| {k} | {np.median(t):.1f} | {np.percentile(t, 10):.1f}-"
              f"{np.percentile(t, 90):.1f} |")


if __name__ == "__main__":
    main()
