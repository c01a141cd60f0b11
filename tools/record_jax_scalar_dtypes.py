"""Records the result dtypes JAX gives the functions that take Python scalars (bounds, fill
values, exponents, steps) next to arrays, into tests/golden/jax_scalar_dtypes.json.

Run it with JAX installed (a throwaway environment: JAX is never a funcgrad dependency):

    /work/jaxvenv/bin/python tools/record_jax_scalar_dtypes.py

Each case is an expression over `xp` (the library: jax.numpy here, funcgrad.numpy in
tests/test_scalar_dtypes.py), `onp` (NumPy, for NumPy scalars) and the operands below (made
with `xp.asarray`). The file keeps, per x64 mode, the case's dtype and weak type (a list of
them for tuple results), or "error" when JAX refuses it; the test checks funcgrad against the
file always and against JAX too where JAX is importable.
"""

import json
import os
import sys

import numpy as np

OPERANDS = {  # name: (dtype, values)
    "i32": ("int32", [-2, 0, 3]),
    "i8": ("int8", [-2, 0, 3]),
    "u8": ("uint8", [0, 1, 200]),
    "f16": ("float16", [-1.5, 0.0, 2.0]),
    "f32": ("float32", [-1.5, 0.0, 2.0]),
    "c64": ("complex64", [1 + 1j, 0, -2j]),
    "b": ("bool", [True, False, True]),
    "idx": ("int32", [0, 2]),
    "fnan": ("float32", [np.nan, np.inf, -np.inf]),
    "hnan": ("float16", [np.nan, np.inf, -np.inf]),
}

CASES = [
    # clip: bounds promote with the operand (JAX: maximum(min, x), minimum(max, x))
    "xp.clip(i32, -1.5, 2)", "xp.clip(i32, 1, 2)", "xp.clip(i32, None, 2.5)",
    "xp.clip(i32, -1.5)", "xp.clip(i32, min=0.5)", "xp.clip(i32, max=2)", "xp.clip(u8, 1, 2)",
    "xp.clip(u8, 0.5, 2)", "xp.clip(i8, -1, 2)", "xp.clip(f16, 0, 1.5)", "xp.clip(f16, -1e5, 1e5)",
    "xp.clip(f32, 0, 1)", "xp.clip(b, 0, 1)", "xp.clip(i32, f32[0], 2)",
    "xp.clip(i32, onp.float32(0.5), 2)", "xp.clip(f16, f32[:1], None)", "xp.clip(1, 0, 2.5)",
    "xp.clip(i32, i8[0], u8[0])", "xp.clip(c64, 0, 1)",
    # where with scalars
    "xp.where(b, i32, 1.5)", "xp.where(b, 1, 2)", "xp.where(b, 1.0, 2)", "xp.where(b, i32, 2)",
    "xp.where(b, f16, 2.5)", "xp.where(b, 1.5, f16)", "xp.where(b, u8, 3)",
    "xp.where(i32 > 0, i32, 0.0)", "xp.where(b, 1j, f32)", "xp.where(b, True, i8)",
    "xp.where(b, onp.float16(1), i32)",
    # maximum, minimum and friends with scalars
    "xp.maximum(i32, 1.5)", "xp.maximum(u8, 1)", "xp.minimum(f16, 2)", "xp.minimum(i8, 2.5)",
    "xp.maximum(1, 2)", "xp.maximum(b, 1)", "xp.fmax(i32, 1.5)", "xp.fmin(f16, 1)",
    "xp.maximum(i32, onp.float32(1))", "xp.maximum(f16, onp.float64(1))",
    # arithmetic with scalars
    "i32 + 1.5", "u8 * 2", "1.5 - i8", "f16 * 2.0", "f32 * 1j", "i32 / 2", "u8 // 2.5",
    "i32 % 2.5", "b + 1", "b * 1.5", "xp.power(i32, 2)", "xp.power(i32, 2.5)",
    "xp.power(2, i32)", "xp.power(f16, 2)", "i32 ** 2.0", "2.0 ** i8", "xp.float_power(i32, 2)",
    "xp.fmod(u8, 3)", "xp.remainder(i32, 2.5)", "xp.copysign(i32, -1.0)",
    "xp.heaviside(i32, 0.5)", "xp.heaviside(1.5, 0.5)", "xp.hypot(i32, 1)", "xp.hypot(f16, 1)",
    "xp.arctan2(i32, 1.0)",
    "xp.logaddexp(f16, 1.0)", "xp.divmod(i32, 2.5)", "xp.divmod(u8, 3)",
    "xp.true_divide(i8, 2)", "xp.floor_divide(i32, 2)", "xp.equal(i32, 1.5)",
    "xp.isclose(i32, 1.5)", "xp.isclose(f16, 1)",
    # filled arrays
    "xp.full((2,), 1)", "xp.full((2,), 1.5)", "xp.full((2,), True)", "xp.full((2,), 1j)",
    "xp.full((2,), 1.5, 'int32')", "xp.full((2,), onp.float16(1))", "xp.full((2,), i32[0])",
    "xp.full((2, 3), i8)", "xp.full_like(i32, 1.5)", "xp.full_like(f16, 3)",
    "xp.full_like(i32, 1.5, 'float32')", "xp.full_like(b, 2)", "xp.full_like(u8, f32[0])",
    "xp.zeros_like(i8)", "xp.ones_like(b)", "xp.zeros((2,))", "xp.ones((2,), 'int8')",
    "xp.empty_like(f16)",
    # nan_to_num
    "xp.nan_to_num(hnan)", "xp.nan_to_num(hnan, nan=1.5, posinf=1e10)",
    "xp.nan_to_num(fnan, nan=1, posinf=2, neginf=-2)", "xp.nan_to_num(i32, nan=1.5)",
    "xp.nan_to_num(c64)", "xp.nan_to_num(b)",
    # pad with constant values
    "xp.pad(i32, 1, constant_values=1.5)", "xp.pad(f16, 1, constant_values=2)",
    "xp.pad(b, 1, constant_values=1)", "xp.pad(u8, 1, constant_values=7)",
    "xp.pad(i32, (1, 2), constant_values=(1, 2.5))",
    # appending scalars, updates with scalars
    "xp.append(i32, 1.5)", "xp.append(u8, 1)", "xp.append(f16, 2)", "i32.at[0].set(1.5)",
    "u8.at[0].add(1)", "f16.at[1].set(2.5)", "i32.at[0].min(-1.5)", "b.at[0].set(0)",
    "i32.at[5].get(mode='fill', fill_value=-1)", "f16.at[5].get(mode='fill', fill_value=2.5)",
    "xp.take(i32, idx, mode='fill', fill_value=7)",
    "xp.take_along_axis(f16, idx, axis=0, mode='fill', fill_value=1.5)",
    "xp.put_along_axis(i32, idx, 1.5, axis=0, inplace=False)",
    "xp.put_along_axis(f16, idx, 2, axis=0, inplace=False)",
    # ranges
    "xp.arange(5)", "xp.arange(0.5, 3)", "xp.arange(1, 5, 0.5)", "xp.arange(5, dtype='float16')",
    "xp.arange(onp.int16(3))", "xp.arange(onp.float32(3))", "xp.arange(i32[2])",
    "xp.arange(1.0, 4, dtype='int32')", "xp.arange(True, 3)", "xp.arange(1j)",
    "xp.linspace(0, 1, 3)",
    "xp.linspace(0, 10, 3, dtype='int32')", "xp.linspace(i32, 5, 3)", "xp.linspace(f16, 5, 3)",
    "xp.logspace(0, 2, 3)", "xp.logspace(f16, 2, 3)", "xp.eye(2)", "xp.eye(2, dtype='int8')",
    # reductions and rounding with scalar arguments
    "xp.sum(i32, initial=1)", "xp.sum(b)", "xp.sum(u8)", "xp.sum(i8)", "xp.prod(f16, initial=2)",
    "xp.max(i32, initial=-1)", "xp.mean(i32)", "xp.mean(f16)", "xp.var(u8)", "xp.std(i8)",
    "xp.round(i32, 1)", "xp.round(f16, 1)", "xp.around(u8, 1)", "xp.cumsum(b)",
    "xp.cumsum(u8)", "xp.cumsum(i8)", "xp.cumprod(i8)", "xp.cumulative_sum(i8)",
    "xp.cumulative_sum(u8)", "xp.cumulative_prod(i8)", "xp.sqrt(i8)", "xp.sin(u8)",
    "xp.rint(i32)", "xp.angle(i8)", "xp.linalg.norm(i32)", "xp.mean(b)",
    "xp.searchsorted(i32, 1.5)", "xp.nansum(f16, initial=1)",
]


def record(jax, jnp, x64):
    jax.config.update("jax_enable_x64", x64)
    env = {"xp": jnp, "onp": np}
    env.update({k: jnp.asarray(np.array(v, dt)) for k, (dt, v) in OPERANDS.items()})
    out = {}
    for case in CASES:
        try:
            r = eval(case, env)  # noqa: S307 (the expressions are this file's constants)
        except Exception as e:  # JAX refuses it: funcgrad must refuse it too
            print(f"x64={x64}: {case}: {type(e).__name__}: {e}", file=sys.stderr)
            out[case] = "error"
            continue
        parts = r if isinstance(r, tuple) else (r,)
        got = [[str(p.dtype), bool(getattr(p, "weak_type", False))] for p in parts]
        out[case] = got if isinstance(r, tuple) else got[0]
    return out


def main():
    import jax
    import jax.numpy as jnp

    data = {"jax": jax.__version__,
            "operands": {k: [dt, [str(x) if isinstance(x, complex) else x for x in v]]
                         for k, (dt, v) in OPERANDS.items()},
            "x32": record(jax, jnp, False), "x64": record(jax, jnp, True)}
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "tests", "golden", "jax_scalar_dtypes.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(f"{len(CASES)} cases -> {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
