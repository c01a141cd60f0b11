"""Loops with small linear algebra: funcgrad's numpy backend and native C backend against
JAX (jit) when importable, on one thread (set below, before numpy/JAX load).

    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/bench_native_loops.py [--repeat 50]

Workloads: `ilqr` a 64-step `fori_loop` of damped Gauss-Newton steps, each a 4x4 `jacfwd`
and a 4x4 `linalg.solve` (the native backend runs the whole loop as one C loop, its LU and
triangular solves as C routines); `ilqr_grad` its value and gradient with respect to the
model (reverse mode through the loop: two C loops); `gp` the value and gradient of a GP negative
log-likelihood on 100 points (RBF kernel, cholesky + triangular solves: C routines up to
128 rows); `solve8` one top-level `linalg.solve` of 16 stacked 8x8 systems (C LU and solves).
Each row: median ms (p25-p75) over interleaved steady-state calls, and the ratio to JAX.
"""

import argparse
import os

for _k, _v in {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false "
                            "intra_op_parallelism_threads=1"}.items():
    os.environ.setdefault(_k, _v)

import importlib.util  # noqa: E402
import time  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402


def namespace(lib):
    """numpy, lax, scipy.linalg and transforms of `lib` ("funcgrad" or "jax")."""
    if lib == "jax":
        import jax
        import jax.numpy as jnp
        import jax.scipy.linalg as sl
        return SimpleNamespace(np=jnp, lax=jax.lax, sl=sl, jacfwd=jax.jacfwd,
                               value_and_grad=jax.value_and_grad, jit=jax.jit,
                               block=jax.block_until_ready)
    import funcgrad as fg
    import funcgrad.numpy as fnp
    import funcgrad.scipy.linalg as sl
    return SimpleNamespace(np=fnp, lax=fg.lax, sl=sl, jacfwd=fg.jacfwd,
                           value_and_grad=fg.value_and_grad, jit=fg.jit,
                           block=fg.block_until_ready)


def ilqr(L, steps=64, n=4):
    def solve(a, c, x0):
        residual = lambda x: L.np.tanh(a @ x) + 0.1 * x * x * x - c

        def body(i, x):  # one damped Gauss-Newton step
            j = L.jacfwd(residual)(x)
            lhs = j.T @ j + 1e-3 * L.np.eye(n, dtype=x.dtype)
            return x - L.np.linalg.solve(lhs, j.T @ residual(x))
        return L.lax.fori_loop(0, steps, body, x0)
    rng = np.random.default_rng(5)
    args = [(rng.normal(size=(n, n)) / np.sqrt(n)).astype(np.float32),
            (0.3 * rng.normal(size=n)).astype(np.float32), np.zeros(n, np.float32)]
    return solve, args


def ilqr_grad(L):
    solve, (a, c, x0) = ilqr(L)
    loss = lambda a, c: L.np.sum(solve(a, c, x0) ** 2)  # noqa: E731
    return L.value_and_grad(loss, argnums=(0, 1)), [a, c]


def gp(L, n=100):
    def nll(theta, x, y):
        ls, sf, sn = L.np.exp(theta[0]), L.np.exp(theta[1]), L.np.exp(theta[2])
        d2 = L.np.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
        k = sf * sf * L.np.exp(-0.5 * d2 / (ls * ls)) + sn * sn * L.np.eye(n, dtype=x.dtype)
        chol = L.sl.cholesky(k, lower=True)
        alpha = L.sl.solve_triangular(chol, y, lower=True)
        return 0.5 * alpha @ alpha + L.np.sum(L.np.log(L.np.diagonal(chol)))
    rng = np.random.default_rng(6)
    x = np.sort(rng.uniform(-3, 3, size=(n, 1)), axis=0).astype(np.float32)
    y = (np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=n)).astype(np.float32)
    theta = np.log(np.array([0.7, 1.0, 0.1], np.float32))
    return L.value_and_grad(nll), [theta, x, y]


def solve8(L, n=8):
    rng = np.random.default_rng(7)
    a = (rng.normal(size=(16, n, n)) + 3 * np.eye(n)).astype(np.float32)
    return (lambda a, b: L.np.linalg.solve(a, b)), [a, rng.normal(size=(16, n, 2)).astype(
        np.float32)]


def steps(program):
    """{implementation: a no-argument call of one synchronized step}, each checked to agree
    with the numpy backend's result."""
    import funcgrad as fg
    L = namespace("funcgrad")
    fn, args = program(L)
    out = {}
    for name, backend, mode in (("numpy backend", "numpy", "off"), ("native", "cpu", "sync")):
        fg.config.update("native", mode)
        jitted = L.jit(fn, backend=backend)
        out[name] = (lambda j=jitted: L.block(j(*args)))
    if importlib.util.find_spec("jax"):
        import jax
        J = namespace("jax")
        jfn, jargs = program(J)
        jitted_jax, jargs = J.jit(jfn), [jax.device_put(a) for a in jargs]
        out["JAX jit"] = lambda: J.block(jitted_jax(*jargs))
    results = {k: [np.asarray(v) for v in fg.tree_util.tree_leaves(f())] for k, f in out.items()}
    for k, got in results.items():
        for g, w in zip(got, results["numpy backend"]):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5, err_msg=k)
    return out


def interleaved(fns, repeat):
    times = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - t0) * 1e3)
    return {k: np.percentile(v, [25, 50, 75]) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--only", nargs="*", default=list(PROGRAMS))
    opts = ap.parse_args()
    print("| program | implementation | median ms (p25-p75) | / JAX |")
    print("| --- | --- | --- | --- |")
    for name in opts.only:
        fns = steps(PROGRAMS[name])
        for fn in fns.values():  # warm up
            fn()
        t = interleaved(fns, opts.repeat)
        jax_ms = t["JAX jit"][1] if "JAX jit" in t else None
        for impl, (p25, p50, p75) in t.items():
            ratio = f"{p50 / jax_ms:.2f}x" if jax_ms else "-"
            print(f"| {name} | {impl} | {p50:.3f} ({p25:.3f}-{p75:.3f}) | {ratio} |")


PROGRAMS = {"ilqr": ilqr, "ilqr_grad": ilqr_grad, "gp": gp, "solve8": solve8}

if __name__ == "__main__":
    main()
