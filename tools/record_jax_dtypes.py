"""Records JAX's dtype policy for `tests/test_dtype_lattice.py`: type promotion over every
pair of dtypes (weak types included), the machine limits of the narrow types, and the bits of
`jax.random` samples in bfloat16 and float16.

Run it in a throwaway virtual environment (JAX is never a funcgrad dependency):

    /work/jaxvenv/bin/python tools/record_jax_dtypes.py

It writes `tests/golden/jax/dtypes.json`:
- `dtypes`: the dtype names `jax.numpy` exposes; `python_types`: `int`, `float`, `complex`.
- `promote_types[x64]`: `jnp.promote_types(a, b)` (Python types are weak), or "!" for a
  `TypePromotionError`, as a table (below).
- `lattice[x64]`: the (dtype, weak) that JAX's binary operations promote two arrays to
  (`dtypes.lattice_result_type`), canonicalized as an array of it would be, written `name`
  or `name*` (weakly typed), or "!"; operands are named so too (`name*`: a weakly typed
  array). With x64 off only the dtypes an array can have are paired.
- `result_type[x64]`: `jnp.result_type(a, b)` on the same arrays (an exception's name where
  JAX raises another one).
A table is `{"names": [a, ...], "rows": [row, ...]}`: row i holds the outcomes of
`(names[i], names[j])` for every j, joined by spaces.
- `finfo[name]` / `iinfo[name]`: the fields of `jnp.finfo` / `jnp.iinfo`.
- `random`: `uniform`/`normal` samples per dtype as unsigned integers of their bits.
- `jnp_bfloat16`: for every `jax.numpy` function that takes one (or else two) bfloat16
  arrays (`BF16_INPUT`, and the same twice), its result's dtype and values as float64
  lists, for `tests/test_bfloat16.py` to check the result dtypes of funcgrad.numpy.
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import dtypes as jdtypes
from jax._src.core import ShapedArray

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "golden", "jax", "dtypes.json")

NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float16", "float32", "float64", "complex64", "complex128", "bfloat16",
         "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
         "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
         "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
         "int1", "int2", "int4", "uint1", "uint2", "uint4"]
PYTHON_TYPES = {"int": int, "float": float, "complex": complex}
WIDE = {"int64", "uint64", "float64", "complex128"}


def _promote_types():
    names = NAMES + list(PYTHON_TYPES)
    spec = lambda n: PYTHON_TYPES.get(n) or jnp.dtype(n)
    return _table(names, lambda a, b: _outcome(lambda: str(
        jnp.promote_types(spec(a), spec(b)))))


def _table(names, fn):
    return {"names": names, "rows": [" ".join(fn(a, b) for b in names) for a in names]}


class _Abstract:
    """An array as JAX's promotion sees it (a dtype and a weak type), of any dtype: some
    (float6, float4) cannot be arrays on the CPU."""

    def __init__(self, dtype, weak):
        self.dtype, self.aval = dtype, ShapedArray((), dtype, weak_type=weak)


def _arrays(x64):
    out = {}
    for n in NAMES:
        if not x64 and n in WIDE:
            continue
        dt = jnp.dtype(n)
        out[n] = _Abstract(dt, False)
        if n != "bool":
            out[n + "*"] = _Abstract(dt, True)
    return out


def _text(dtype, weak):
    return str(jdtypes.canonicalize_dtype(dtype)) + ("*" if weak else "")


def _lattice(x64):
    arrays = _arrays(x64)
    names = list(arrays)
    lattice = _table(names, lambda a, b: _outcome(
        lambda: _text(*jdtypes.lattice_result_type(arrays[a], arrays[b]))))
    result = _table(names, lambda a, b: _outcome(
        lambda: _text(jnp.result_type(arrays[a], arrays[b]), False)))
    return lattice, result


def _outcome(fn):
    """`fn()`, "!" for a TypePromotionError, or the name of another exception (JAX's
    `result_type` of two weak 4-bit integers raises a KeyError)."""
    try:
        return fn()
    except jdtypes.TypePromotionError:
        return "!"
    except Exception as e:  # noqa: BLE001 - recorded as JAX's outcome
        return type(e).__name__


def _limits():
    finfo, iinfo = {}, {}
    for n in NAMES:
        dt = jnp.dtype(n)
        if jnp.issubdtype(dt, jnp.floating):
            f = jnp.finfo(dt)
            finfo[n] = {k: float(getattr(f, k)) for k in (
                "eps", "epsneg", "max", "min", "tiny", "smallest_normal", "smallest_subnormal",
                "resolution")}
            finfo[n].update({k: int(getattr(f, k)) for k in (
                "bits", "nmant", "nexp", "maxexp", "minexp", "machep", "negep", "iexp",
                "precision")})
            finfo[n]["dtype"] = str(f.dtype)
        elif jnp.issubdtype(dt, jnp.integer):
            i = jnp.iinfo(dt)
            iinfo[n] = {"bits": int(i.bits), "min": int(i.min), "max": int(i.max),
                        "dtype": str(i.dtype)}
    return finfo, iinfo


RANDOM_DTYPES = ["bfloat16", "float16", "float32"]


def _random():
    out = {}
    key = jax.random.PRNGKey(42)
    for n in RANDOM_DTYPES:
        dt = jnp.dtype(n)
        bits = f"uint{dt.itemsize * 8}"
        for name, fn in (("uniform", jax.random.uniform), ("normal", jax.random.normal)):
            x = np.asarray(fn(key, (64,), dtype=dt))
            out[f"{name}/{n}"] = x.view(bits).tolist()
        x = np.asarray(jax.random.uniform(key, (16,), dtype=dt, minval=-2.0, maxval=3.0))
        out[f"uniform_bounds/{n}"] = x.view(bits).tolist()
    return out


BF16_INPUT = [[0.125, 0.25, 0.5, 0.875], [0.375, 0.625, 0.75, 0.1875], [0.3125, 0.5625,
                                                                        0.6875, 0.9375]]
_SKIP = {"array_equal", "array_equiv", "bartlett", "blackman", "hamming", "hanning",
         "kaiser", "eye", "identity", "arange", "empty", "ones", "zeros", "full", "tri",
         "linspace", "logspace", "geomspace", "indices", "iinfo", "finfo", "dtype",
         "result_type", "promote_types", "can_cast", "issubdtype", "isdtype", "frompyfunc",
         "vectorize", "from_dlpack", "fromfunction", "fromiter", "frombuffer", "fromstring",
         "fromfile", "load", "save", "savez", "printoptions", "set_printoptions",
         "get_printoptions", "ndim", "shape", "size", "iscomplexobj", "isrealobj", "isscalar"}


def _jnp_bfloat16():
    x = jnp.asarray(BF16_INPUT, jnp.bfloat16)
    out = {}
    for name in sorted(dir(jnp)):
        fn = getattr(jnp, name)
        if name.startswith("_") or name in _SKIP or not callable(fn) or isinstance(fn, type):
            continue
        for args in ((x,), (x, x)):
            try:
                r = fn(*args)
            except Exception:  # noqa: BLE001 - not a function of bfloat16 arrays like this
                continue
            if isinstance(r, jax.Array) and jnp.issubdtype(r.dtype, jnp.inexact) and (
                    not jnp.issubdtype(r.dtype, jnp.complexfloating)):
                out[name] = {"nargs": len(args), "dtype": str(r.dtype),
                             "values": np.asarray(r, np.float64).ravel().tolist()}
            break
    return out


def main():
    record = {"jax": jax.__version__, "dtypes": NAMES, "python_types": list(PYTHON_TYPES),
              "promote_types": {}, "lattice": {}, "result_type": {}}
    for x64 in (False, True):
        jax.config.update("jax_enable_x64", x64)
        key = "x64" if x64 else "x32"
        record["promote_types"][key] = _promote_types()
        record["lattice"][key], record["result_type"][key] = _lattice(x64)
    jax.config.update("jax_enable_x64", False)
    record["finfo"], record["iinfo"] = _limits()
    record["random"] = _random()
    record["jnp_bfloat16"] = _jnp_bfloat16()
    with open(OUT, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
