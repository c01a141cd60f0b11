"""Per-op eager overhead of funcgrad.numpy on small arrays, against NumPy (and JAX when
installed), as a markdown table of microseconds per call.

    python benchmarks/bench_eager_overhead.py [--number N]

Columns: `numpy` (NumPy itself), `funcgrad` (a funcgrad.numpy call), `lax` (binding the
same primitives directly, i.e. what the core and funcgrad.lax cost), `fnp layer`
(funcgrad - lax: what funcgrad.numpy adds: promotion, broadcasting, argument handling),
`ratio` (funcgrad / numpy). Arrays are tiny ((8,), (8, 8)), so time is all dispatch.
Times are CPU time of this process (`time.process_time`, best of 7), which keeps them
stable on a shared machine.
"""

import argparse
import time
import timeit

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.core import Literal

try:  # optional comparison tier
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None

# name, function of (lib, x, y, m, w, i): x, y f32[8]; m, w f32[8,8]; i i32[8]
CASES = [
    ("x + y", lambda lib, x, y, m, w, i: x + y),
    ("x * 2.0", lambda lib, x, y, m, w, i: x * 2.0),
    ("1.0 - x", lambda lib, x, y, m, w, i: 1.0 - x),
    ("i / i (int -> float)", lambda lib, x, y, m, w, i: i / i),
    ("maximum(x, 0.0)", lambda lib, x, y, m, w, i: lib.maximum(x, 0.0)),
    ("x > y", lambda lib, x, y, m, w, i: x > y),
    ("exp(x)", lambda lib, x, y, m, w, i: lib.exp(x)),
    ("tanh(x)", lambda lib, x, y, m, w, i: lib.tanh(x)),
    ("-x", lambda lib, x, y, m, w, i: -x),
    ("m + x (broadcast)", lambda lib, x, y, m, w, i: m + x),
    ("where(x > 0, x, y)", lambda lib, x, y, m, w, i: lib.where(x > 0, x, y)),
    ("sum(x)", lambda lib, x, y, m, w, i: lib.sum(x)),
    ("m.sum(axis=0)", lambda lib, x, y, m, w, i: m.sum(axis=0)),
    ("mean(m)", lambda lib, x, y, m, w, i: lib.mean(m)),
    ("max(m, axis=1)", lambda lib, x, y, m, w, i: lib.max(m, axis=1)),
    ("reshape(m, (4, 16))", lambda lib, x, y, m, w, i: lib.reshape(m, (4, 16))),
    ("m.T", lambda lib, x, y, m, w, i: m.T),
    ("m @ w", lambda lib, x, y, m, w, i: m @ w),
    ("matmul(m, x)", lambda lib, x, y, m, w, i: lib.matmul(m, x)),
    ("concatenate([x, y])", lambda lib, x, y, m, w, i: lib.concatenate([x, y])),
]


def _time(fn, number):
    fn()
    return min(timeit.repeat(fn, number=number, repeat=7, timer=time.process_time)) / number * 1e6


def _lax_time(case, args, number):
    """Sum over the traced equations of the time to bind each primitive directly."""
    closed = fg.make_jaxpr(lambda *a: case(fnp, *a))(*args)
    env = dict(zip(closed.jaxpr.invars, args))
    env.update(zip(closed.jaxpr.constvars, closed.consts))
    total = 0.0
    for eqn in closed.jaxpr.eqns:
        vals = [a.val if type(a) is Literal else env[a] for a in eqn.invars]
        bind = lambda p=eqn.prim, v=vals, kw=eqn.params: p.bind(*v, **kw)  # noqa: E731
        total += _time(bind, number)
        outs = bind()
        env.update(zip(eqn.outvars, outs if eqn.prim.multiple_results else [outs]))
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    arrays = (rng.standard_normal(8, np.float32), rng.standard_normal(8, np.float32),
              rng.standard_normal((8, 8), np.float32), rng.standard_normal((8, 8), np.float32),
              np.arange(1, 9, dtype=np.int32))
    fg_arrays = tuple(fnp.asarray(a) for a in arrays)
    header = "| op | numpy us | funcgrad us | lax us | fnp layer us | ratio |"
    if jnp is not None:
        jax_arrays = tuple(jax.device_put(a) for a in arrays)
        header += " jax us |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    layer = []
    for name, case in CASES:
        t_np = _time(lambda c=case: c(np, *arrays), args.number)
        t_fg = _time(lambda c=case: c(fnp, *fg_arrays), args.number)
        t_lax = _lax_time(case, fg_arrays, args.number)
        layer.append(t_fg - t_lax)
        row = (f"| {name} | {t_np:.2f} | {t_fg:.2f} | {t_lax:.2f} | {t_fg - t_lax:.2f} | "
               f"{t_fg / t_np:.1f} |")
        if jnp is not None:
            t_jax = _time(lambda c=case: c(jnp, *jax_arrays).block_until_ready(),
                          max(args.number // 20, 100))
            row += f" {t_jax:.1f} |"
        print(row)
    layer.sort()
    print(f"\nfuncgrad.numpy layer (funcgrad - lax): median {layer[len(layer) // 2]:.2f} us, "
          f"max {layer[-1]:.2f} us" + ("" if jnp is not None else "; jax not installed"))


if __name__ == "__main__":
    main()
