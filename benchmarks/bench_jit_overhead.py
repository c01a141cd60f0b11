"""Call overhead of a jitted function on a cache hit: funcgrad.jit against a plain Python
call of the same function, against running the compiled executable directly, and against
jax.jit when JAX is installed.

    python benchmarks/bench_jit_overhead.py [--number N]

The functions are trivial (identity, x + 1 on a tiny array, a 12-leaf pytree), so the time
is dispatch: flattening, the cache key, the lookup, unwrapping, wrapping, unflattening.
"overhead" is the jitted call minus the executable alone.
"""

import argparse
import functools
import timeit

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp

try:  # optional comparison tier
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None


def _tree(lib_array, x):
    leaf = lib_array(x)
    return {"w": [leaf] * 4, "b": (leaf,) * 4, "s": {"m": leaf, "v": leaf, "n": leaf, "c": leaf}}


def _cases(jit, lib_array, lib):
    """(name, jitted function, arguments, plain function)."""
    x = np.ones(4, np.float32)

    def identity(a):
        return a

    def add_one(a):
        return a + 1.0

    def tree_identity(t):
        return t

    def tree_update(t):
        return lib.tree_util.tree_map(lambda a: a * 0.5, t) if hasattr(lib, "tree_util") \
            else t
    return [
        ("identity(x)", jit(identity), (lib_array(x),), identity),
        ("x + 1.0", jit(add_one), (lib_array(x),), add_one),
        ("identity(12-leaf tree)", jit(tree_identity), (_tree(lib_array, x),), tree_identity),
        ("0.5 * (12-leaf tree)", jit(tree_update), (_tree(lib_array, x),), tree_update),
    ]


def _time(fn, number):
    """Microseconds per call: the best of many short runs of 100 calls (robust to other
    processes sharing the CPU, whose time slices would inflate long runs)."""
    fn()
    fn()
    return min(timeit.repeat(fn, number=100, repeat=max(number // 100, 20))) / 100 * 1e6


def _executable_time(jitted, args, number):
    """The compiled executable alone, on the unwrapped values of `args`."""
    entry = next(iter(jitted._cache.entries.values()))
    leaves = fg.tree_util.tree_leaves(args)
    vals = [c._value for c in entry.consts] + [x._value for x in leaves]
    exe = entry.exe
    return _time(lambda: exe(*vals), number)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=40000, help="calls per measurement")
    args = parser.parse_args()
    n = args.number
    rows = []
    for name, jitted, call_args, plain in _cases(fg.jit, fnp.asarray, fg):
        t_plain = _time(functools.partial(plain, *call_args), n)
        t_jit = _time(functools.partial(jitted, *call_args), n)
        t_exe = _executable_time(jitted, call_args, n)
        rows.append([name, t_plain, t_exe, t_jit, t_jit - t_exe])
    if jax is not None:
        for row, (_, jitted, call_args, _) in zip(rows, _cases(jax.jit, jnp.asarray, jax)):
            run = functools.partial(jitted, *call_args)
            row.append(_time(lambda run=run: jax.block_until_ready(run()), n // 4))
    header = ("| function                | plain Python us | executable us | funcgrad.jit us |"
              " overhead us |")
    header += " jax.jit us |" if jax is not None else ""
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    for name, t_plain, t_exe, t_jit, over, *jax_t in rows:
        line = (f"| {name:<23} | {t_plain:15.2f} | {t_exe:13.2f} | {t_jit:15.2f} |"
                f" {over:11.2f} |")
        line += f" {jax_t[0]:9.2f} |" if jax_t else ""
        print(line)
    if jax is None:
        print("(JAX is not installed: no jax.jit column)")
    print("plain Python: the function called eagerly (for 'x + 1.0', one eager funcgrad op); "
          "overhead: funcgrad.jit minus the executable alone")


if __name__ == "__main__":
    main()
