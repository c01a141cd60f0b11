"""Eager `grad` overhead per call on small functions, against HIPS autograd and JAX (op by op,
and jitted for reference) when they are installed: one line per function, microseconds per call.

    python benchmarks/bench_eager_grad.py [--number N]

The arrays are tiny, so the time is the cost of tracing, linearizing and transposing, not of
arithmetic. `fwd` is the plain eager call; `grad/fwd` is the price of a gradient in forward
calls (define-by-run reverse mode is typically 3-6 forward calls).
"""

import argparse
import functools
import timeit

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp

try:  # optional comparison tiers
    import autograd
    import autograd.numpy as anp
except ImportError:
    autograd = anp = None
try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None


def _functions(lib):
    """(name, f, args maker) triples written once against a numpy-like `lib`."""
    def poly(x):
        return 3.0 * x ** 3 - 2.0 * x ** 2 + x

    def sin_exp(x):
        return lib.sum(lib.sin(lib.exp(lib.cos(x)) * x))

    def mlp(w1, x, y):
        h = lib.tanh(x @ w1)
        logits = h @ lib.ones((16, 4))
        m = lib.max(logits, axis=-1, keepdims=True)
        logp = logits - m - lib.log(lib.sum(lib.exp(logits - m), axis=-1, keepdims=True))
        return -lib.mean(lib.sum(logp * y, axis=-1))

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 16)).astype(np.float32) * 0.3
    x = rng.standard_normal((32, 8)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 32)]
    vec = rng.standard_normal(8).astype(np.float32)
    return [
        ("poly (scalar)", poly, (np.float32(0.7),)),
        ("sin(exp(cos x)*x) (8,)", sin_exp, (vec,)),
        ("mlp softmax-CE 32x8x16x4", mlp, (w1, x, y)),
    ]


def _time(fn, number):
    fn()
    return min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6


def _row(name, cells):
    return f"{name:<26}" + "".join(f"{c:>14}" for c in cells)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200, help="calls per timing")
    n = parser.parse_args().number
    cols = ["funcgrad fwd", "funcgrad grad", "grad/fwd"]
    cols += ["autograd grad"] if autograd else []
    cols += ["jax grad", "jax jit grad"] if jax else []
    print(_row("function (us per call)", cols))
    tiers = [("fg", fnp)] + ([("ag", anp)] if autograd else []) + ([("jax", jnp)] if jax else [])
    table = {tier: _functions(lib) for tier, lib in tiers}
    for k, (name, f, args) in enumerate(table["fg"]):
        fargs = [fnp.asarray(a) for a in args]
        fwd = _time(functools.partial(f, *fargs), n)
        grad = _time(functools.partial(fg.grad(f), *fargs), n)
        cells = [f"{fwd:.1f}", f"{grad:.1f}", f"{grad / fwd:.1f}x"]
        if autograd:
            _, af, aargs = table["ag"][k]
            cells.append(f"{_time(functools.partial(autograd.grad(af), *aargs), n):.1f}")
        if jax:
            _, jf, jargs = table["jax"][k]
            jargs = [jnp.asarray(a) for a in jargs]
            for g in (jax.grad(jf), jax.jit(jax.grad(jf))):
                run = functools.partial(lambda g, a: g(*a).block_until_ready(), g, jargs)
                cells.append(f"{_time(run, n):.1f}")
        print(_row(name, cells))
    if not (autograd and jax):
        missing = [m for m, ok in (("autograd", autograd), ("jax", jax)) if not ok]
        print(f"({', '.join(missing)} not installed: those columns are left out)")


if __name__ == "__main__":
    main()
