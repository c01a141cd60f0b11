"""The dtype policy: canonical dtypes, weak types and JAX's type-promotion lattice.

With `enable_x64` off (the default) 64-bit dtypes canonicalize to 32-bit ones, as in
JAX. Python scalars are *weakly typed*: `x_f32 * 2.0` stays float32. The narrow types
(bfloat16, the float8s, int4...) are ml_dtypes', as JAX's; they compute in `compute_dtype`
(float32, int32) and round once per operation. This module owns those rules and nothing
else; it imports only numpy, funcgrad.config and funcgrad.errors, and ml_dtypes on first
need (`load_narrow`).
"""

import threading

import numpy as np

from funcgrad import errors
from funcgrad.config import config

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

_SHORT = {
    bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
    float16: "f16", float32: "f32", float64: "f64", complex64: "c64", complex128: "c128",
}
_NARROW = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}

# --- the narrow types: ml_dtypes', loaded on first need ----------------------------------------
# Importing ml_dtypes takes ~0.66 s and ~8 MB, more than all of funcgrad, so a program that
# never names a narrow type never imports it. `load_narrow` imports it and adds the types to
# this module (`dtypes.bfloat16` through `__getattr__` until then) and to its tables. It runs
# when a narrow type is named (`__getattr__`, `narrow_type`, `as_dtype`) and when a dtype
# with `num >= 256` (numpy's user dtypes) reaches a table: such a dtype exists only once
# ml_dtypes is imported. numpy calls the types kind "V" (float8_e5m2 "f"), so their kind is
# asked of `kind(dtype)`, never of `dtype.kind`.
_SMALL_FLOAT_NAMES = ("float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e3m4",
                      "float8_e4m3", "float8_e8m0fnu", "float8_e4m3b11fnuz", "float8_e4m3fn",
                      "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")  # JAX's order
_INTN_NAMES = ("int1", "int2", "int4", "uint1", "uint2", "uint4")  # int1/uint1: newer ml_dtypes
NARROW_NAMES = ("bfloat16", *_SMALL_FLOAT_NAMES, *_INTN_NAMES)
# filled by `load_narrow` (empty until then: no dtype of theirs can exist before it)
_SMALL_FLOATS = _CUSTOM_FLOATS = _SIGNED_INTN = _UNSIGNED_INTN = _INTN = ()
_KIND, _COMPUTE = {}, {}
_narrow_loaded = False
_loading = threading.Lock()


def load_narrow():
    """Import ml_dtypes and add its types to this module's names and tables (once; cheap
    after that). Called on first need, never at import.

    Example:
        >>> load_narrow(); short_name(narrow_type("bfloat16"))
        'bf16'
    """
    global _narrow_loaded
    with _loading:
        if _narrow_loaded:
            return
        import ml_dtypes

        _add_narrow({n: np.dtype(getattr(ml_dtypes, n)) for n in NARROW_NAMES
                     if hasattr(ml_dtypes, n)})
        _narrow_loaded = True  # last: another thread finds every table complete
    config.refresh()  # the dtype caches (jit's plain-ndarray dtypes) see the new types


def _add_narrow(types):
    """Add the narrow types `types` (by name) to this module's names and tables."""
    global _SMALL_FLOATS, _CUSTOM_FLOATS, _SIGNED_INTN, _UNSIGNED_INTN, _INTN
    globals().update(types, int1=types.get("int1"), uint1=types.get("uint1"))
    _SMALL_FLOATS = tuple(types[n] for n in _SMALL_FLOAT_NAMES)
    _CUSTOM_FLOATS = _SMALL_FLOATS + (types["bfloat16"],)
    _SIGNED_INTN = tuple(types[n] for n in _INTN_NAMES[:3] if n in types)
    _UNSIGNED_INTN = tuple(types[n] for n in _INTN_NAMES[3:] if n in types)
    _INTN = _SIGNED_INTN + _UNSIGNED_INTN
    globals()["NARROW_TYPES"] = _CUSTOM_FLOATS + _INTN  # every ml_dtypes type funcgrad has
    for t in _CUSTOM_FLOATS + _INTN:  # JAX's short names: bf16, f8_e4m3fn, i4, u2
        _SHORT[t] = (t.name.replace("bfloat", "bf").replace("float", "f")
                     .replace("uint", "u").replace("int", "i"))
    # numpy computes these types itself neither fast nor as XLA does (ml_dtypes' reductions
    # accumulate in the narrow type): funcgrad computes them in this wider type and rounds the
    # result once per operation.
    for group, k, wide in ((_CUSTOM_FLOATS, "f", float32), (_SIGNED_INTN, "i", int32),
                           (_UNSIGNED_INTN, "u", uint32)):
        _KIND.update(dict.fromkeys(group, k))
        _COMPUTE.update(dict.fromkeys(group, wide))
    _UP.update(_upper_sets_all())


def narrow_type(name):
    """The ml_dtypes type called `name` ("bfloat16", "int4"; ml_dtypes loaded), or None for any
    other name (int1 included, where ml_dtypes has none).

    Example:
        >>> narrow_type("bfloat16"), narrow_type("float32")
        (dtype(bfloat16), None)
    """
    if name not in NARROW_NAMES:
        return None
    load_narrow()
    return globals()[name]


def as_dtype(x):
    """`np.dtype(x)`, a narrow type's name ("bfloat16") loading ml_dtypes first (numpy knows
    the names only once it is imported).

    Example:
        >>> as_dtype("bfloat16"), as_dtype(np.float32)
        (dtype(bfloat16), dtype('float32'))
    """
    if type(x) is str and x in NARROW_NAMES:
        load_narrow()
    return np.dtype(x)


def _known(dtype):
    """`dtype`, the narrow types loaded first where it is one of numpy's user dtypes."""
    if dtype.num >= 256 and not _narrow_loaded:
        load_narrow()
    return dtype


def short_name(dtype):
    """'f32' for float32, 'bf16' for bfloat16, as printed in the IR."""
    return _SHORT.get(_known(dtype), str(dtype))


def kind(dtype):
    """numpy's kind letter of `dtype` ("b", "i", "u", "f", "c"), also for the ml_dtypes types
    numpy calls "V": "f" for bfloat16 and the float8s, "i"/"u" for int4 & co.

    Example:
        >>> kind(bfloat16), kind(float32)
        ('f', 'f')
    """
    return dtype.kind if dtype.num < 256 else _KIND.get(_known(dtype), dtype.kind)


def compute_dtype(dtype):
    """The dtype an operation on `dtype` computes in: float32 for bfloat16 and the float8s,
    int32/uint32 for int4 & co.; `dtype` itself otherwise (float16 included: numpy computes
    it in float32 and rounds per operation itself)."""
    return dtype if dtype.num < 256 else _COMPUTE.get(_known(dtype), dtype)


def is_custom_float(dtype):
    """bfloat16, the float8s and the other ml_dtypes floats (not float16)."""
    return dtype.num >= 256 and _KIND.get(_known(dtype)) == "f"


def is_float(dtype):
    return kind(dtype) == "f"


def _iinfo(dtype):
    """numpy's `iinfo` of an integer dtype, int4 & co. included (ml_dtypes'); the public
    `iinfo` is funcgrad.numpy's (`__getattr__`)."""
    if dtype.num < 256:
        return np.iinfo(dtype)
    load_narrow()
    import ml_dtypes
    return ml_dtypes.iinfo(dtype)


def _finfo(dtype):
    """numpy's `finfo` of a float dtype, bfloat16 and the float8s included (ml_dtypes')."""
    if dtype.num < 256:
        return np.finfo(dtype)
    load_narrow()
    import ml_dtypes
    return ml_dtypes.finfo(dtype)


def lowest(dtype):
    """The identity of `max` in `dtype`: False, the integer minimum, -inf (the lowest finite
    value in a float without infinities, float8_e4m3fn's -448), as JAX's."""
    k = kind(dtype)
    if k == "b":
        return False
    if k in "iu":
        return int(_iinfo(dtype).min)
    return -np.inf if _has_inf(dtype) else float(_finfo(dtype).min)


def highest(dtype):
    """The identity of `min` in `dtype` (see `lowest`)."""
    k = kind(dtype)
    if k == "b":
        return True
    if k in "iu":
        return int(_iinfo(dtype).max)
    return np.inf if _has_inf(dtype) else float(_finfo(dtype).max)


def _has_inf(dtype):
    # ml_dtypes' "fn" (finite), "fnuz" (finite, unsigned zero) and e8m0's "fnu" types lack inf
    return dtype.num < 256 or not dtype.name.endswith(("fn", "fnuz", "fnu"))


# JAX's dtype of the gradient of an integer or bool input under `grad(..., allow_int=True)`:
# a zero-size void, so such a gradient holds no data.
float0 = np.dtype([("float0", np.void, 0)])


def is_inexact(dtype):
    return kind(dtype) in "fc"


def is_integer(dtype):
    return kind(dtype) in "iu"


def default_float():
    return float64 if config.enable_x64 else float32


def default_int():
    return int64 if config.enable_x64 else int32


def default_uint():
    return uint64 if config.enable_x64 else uint32


def default_complex():
    return complex128 if config.enable_x64 else complex64


def to_inexact(dtype):
    """The inexact dtype an integer or bool `dtype` becomes in float arithmetic (JAX's rule:
    float32 for bool and integers up to 32 bits, even with x64; the default float for 64-bit
    integers); an inexact dtype is returned as it is.

    Example:
        >>> to_inexact(int8), to_inexact(float16)
        (dtype('float32'), dtype('float16'))
    """
    if kind(dtype) in "fc":
        return dtype
    return default_float() if dtype.itemsize == 8 else float32


def canonicalize(dtype):
    """The dtype an array of `dtype` gets in funcgrad (64-bit narrowed unless x64)."""
    try:
        dtype = as_dtype(dtype)
    except Exception:  # numpy's message may call a failing __repr__ of the object
        raise TypeError(f"{errors.short_repr(dtype)} ({type(dtype).__name__}) is not a dtype; "
                        f"use one of {_names()}") from None
    if _known(dtype) not in _SHORT:
        raise TypeError(f"funcgrad does not support dtype {dtype}; use one of {_names()}")
    if not config.enable_x64:
        return _NARROW.get(dtype, dtype)
    return dtype


def _names():
    """The dtypes funcgrad has, by name (the narrow ones without loading ml_dtypes)."""
    narrow = [n for n in (*_SMALL_FLOAT_NAMES, "bfloat16", *_INTN_NAMES)
              if not _narrow_loaded or globals()[n] is not None]
    return ", ".join([str(d) for d in _SHORT if d.num < 256] + narrow)


def scalar_dtype(x):
    """(dtype, weak_type) of a Python scalar."""
    t = type(x)
    if t is bool:
        return bool_, False
    if t is int:
        return default_int(), True
    if t is float:
        return default_float(), True
    if t is complex:
        return default_complex(), True
    raise TypeError(f"not a Python scalar: {x!r}")


# --- JAX's type promotion lattice ------------------------------------------------------
# Nodes are dtypes plus the weak kinds "i*", "f*", "c*" of Python scalars; a node's list holds
# the nodes right above it (jax._src.dtypes._type_promotion_lattice, standard mode). The narrow
# types sit alone above the weak ones: bfloat16 + float16 is float32, a float8 or a 4-bit
# integer joins nothing but itself and the weak kinds below it.

def _lattice(x64):
    bf16 = _CUSTOM_FLOATS[-1:]  # (bfloat16,) once the narrow types are loaded, () before
    lattice = {
        bool_: ["i*"],
        "i*": [uint8, int8, *_INTN],
        uint8: [int16, uint16], uint16: [int32, uint32],
        uint32: [int64, uint64] if x64 else [int32, uint64], uint64: ["f*"],
        int8: [int16], int16: [int32], int32: [int64], int64: ["f*"],
        "f*": [*_SMALL_FLOATS, *bf16, float16, "c*"],
        float16: [float32], float32: [float64, complex64],
        float64: [complex128], "c*": [complex64], complex64: [complex128], complex128: [],
    }
    lattice.update({t: [] for t in (*_INTN, *_SMALL_FLOATS)})
    lattice.update({t: [float32] for t in bf16})
    return lattice


def _strict_lattice():
    # `numpy_dtype_promotion="strict"`: a weak kind joins the dtypes of its kind (or higher);
    # dtypes join nothing but themselves
    ints = [t for t in _SHORT if _KIND.get(t, t.kind) in "iu"]
    floats = [t for t in _SHORT if _KIND.get(t, t.kind) == "f"]
    return {**{t: [] for t in _SHORT}, "i*": ["f*", *ints], "f*": ["c*", *floats],
            "c*": [complex64, complex128]}


def _upper_sets(lattice):
    ups = {}
    for node in lattice:
        seen, stack = set(), [node]
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(lattice[n])
        ups[node] = frozenset(seen)
    return ups


def _upper_sets_all():
    return {"x32": _upper_sets(_lattice(False)), "x64": _upper_sets(_lattice(True)),
            "strict": _upper_sets(_strict_lattice())}


_UP = _upper_sets_all()  # the narrow types' nodes join when they are loaded (`load_narrow`)


class TypePromotionError(errors.FuncgradValueError):
    """Operands whose dtypes have no implicit promotion (a float8 with another float, a
    4-bit integer with another integer, anything but equal dtypes under
    `numpy_dtype_promotion="strict"`), as JAX's `jax.dtypes.TypePromotionError`."""


def _lattice_name():
    if getattr(config, "_values", {}).get("numpy_dtype_promotion") == "strict":
        return "strict"
    return "x64" if config.enable_x64 else "x32"


def _least_upper_bound(nodes, which=None):
    """JAX's least upper bound of lattice nodes (`_least_upper_bound`)."""
    which = which or _lattice_name()
    for n in nodes:
        if isinstance(n, np.dtype):
            _known(n)
    ups = _UP[which]
    common = frozenset.intersection(*(ups[n] for n in nodes))
    least = (common & set(nodes)) or {c for c in common if common <= ups[c]}
    if len(least) == 1:
        return next(iter(least))
    raise TypePromotionError(_no_promotion(nodes, which))


def _no_promotion(nodes, which):
    names = tuple(_NODE_NAME.get(n, str(n)) for n in nodes)
    head = f"Input dtypes {names} have no available implicit dtype promotion path"
    if which == "strict":
        return (f"{head} when jax_numpy_dtype_promotion=strict. Try explicitly casting inputs "
                "to the desired output type, or set jax_numpy_dtype_promotion=standard.")
    float8 = tuple(n for n in _SMALL_FLOAT_NAMES if n.startswith("float8"))
    for group, what, cast in ((float8, "8-bit floats", "float32"),
                              (("float6_e2m3fn", "float6_e3m2fn"), "6-bit floats", "float32"),
                              (("float4_e2m1fn",), "4-bit floats", "float32"),
                              (_INTN_NAMES, "1-bit, 2-bit and 4-bit integers", "int32")):
        if any(isinstance(n, np.dtype) and n.name in group for n in nodes):
            return (f"{head}. To avoid unintended promotion, {what} do not support implicit "
                    "promotion. If you'd like your inputs to be promoted to another type, you "
                    f"can do so explicitly using e.g. x.astype('{cast}')")
    return f"{head}. Try explicitly casting inputs to the desired output type."


_NODE_NAME = {"i*": "<class 'int'>", "f*": "<class 'float'>", "c*": "<class 'complex'>"}
_WEAK_NODE = {"i": "i*", "u": "i*", "f": "f*", "c": "c*"}
_NODE_DTYPE = {"i*": default_int, "f*": default_float, "c*": default_complex}


def _node(dtype, weak):
    return _WEAK_NODE.get(kind(dtype), dtype) if weak and dtype != bool_ else dtype


def join_nodes(a, b):
    """The least upper bound of two lattice nodes (dtypes, or "i*"/"f*"/"c*" for the weak
    kinds of Python scalars), uncanonicalized, as `jnp.promote_types`; raises
    `TypePromotionError` where there is none."""
    return _least_upper_bound((a, b))


_promote_cache = {}
config.on_change(lambda name, value: _promote_cache.clear())


def promote_types(*dtypes_weak):
    """Result (dtype, weak) of combining `(dtype, weak)` pairs by JAX's lattice, as its binary
    operations do (`lattice_result_type`), canonicalized; raises `TypePromotionError`.

    Example:
        >>> promote_types((float32, False), (float32, True))
        (dtype('float32'), False)
        >>> promote_types((bfloat16, False), (float16, False))
        (dtype('float32'), False)
    """
    r = _promote_cache.get(dtypes_weak)
    if r is None:
        r = _promote(dtypes_weak)
        _promote_cache[dtypes_weak] = r
    return r


def _promote(pairs):
    dts = [dt for dt, _ in pairs]
    weak = [w for _, w in pairs]
    if len(pairs) == 1:
        dt, w = dts[0], weak[0]
    elif len(set(dts)) == 1 and not all(weak):
        dt, w = dts[0], False
    elif all(weak) and _lattice_name() != "strict":
        # the join of the strong dtypes, weakly typed (no weak int16 from weak kinds)
        node = _least_upper_bound(tuple(dict.fromkeys(dts)))
        dt, w = _NODE_DTYPE[node]() if isinstance(node, str) else node, True
    else:
        node = _least_upper_bound(tuple(dict.fromkeys(_node(d, w) for d, w in pairs)))
        dt, w = (_NODE_DTYPE[node](), True) if isinstance(node, str) else (node, False)
    return canonicalize(dt), w and dt != bool_


def result_type(*args, return_weak_type_flag=False):
    """The promoted dtype of arrays, dtypes and Python scalars (or the Python types `int`,
    `float`, `complex`, which are weak), as `jnp.result_type`: a weakly typed result is the
    default dtype of its kind. With `return_weak_type_flag`, `(dtype, weak_type)`.

    Example:
        >>> result_type(1.0), result_type(1.0, return_weak_type_flag=True)
        (dtype('float32'), (dtype('float32'), True))
    """
    from funcgrad.core import get_aval

    if not args:
        raise ValueError("at least one array or dtype is required")
    pairs = []
    for a in args:
        if a is None:
            pairs.append((default_float(), False))
        elif a is int or a is float or a is complex:
            pairs.append((scalar_dtype(a())[0], True))
        elif isinstance(a, (np.dtype, type, str)):
            pairs.append((canonicalize(a), False))
        else:
            aval = get_aval(a)
            pairs.append((aval.dtype, aval.weak_type))
    dt, weak = promote_types(*pairs)
    if weak:
        dt = {"i": default_int, "u": default_uint, "f": default_float,
              "c": default_complex}[kind(dt)]()
    return (dt, weak) if return_weak_type_flag else dt


# --- jax.dtypes: the public names -----------------------------------------------------------
# (`float0`, `result_type` and `TypePromotionError` are above; `finfo`/`iinfo` are
# funcgrad.numpy's, reached through the module's `__getattr__`.)

class extended(np.generic):  # noqa: N801  (JAX's name)
    """The category of dtypes that are not NumPy's (typed PRNG keys): for `issubdtype`."""


class prng_key(extended):  # noqa: N801  (JAX's name)
    """The category of the dtypes of typed PRNG keys (`random.key`): for `issubdtype`.

    Example:
        >>> issubdtype(fnp.float32, prng_key)
        False
    """


def is_extended(dtype):
    """Whether `dtype` is an extended (non-NumPy) dtype, such as a typed key's."""
    return category_of(dtype) is not None


def category_of(dtype):
    """The `extended` subclass an extended dtype belongs to (`prng_key` for a typed key's,
    which names its generator in `.impl`), or None for anything else."""
    if isinstance(dtype, (np.dtype, type, str)) or dtype is None:
        return None
    kind = getattr(dtype, "type", None)
    if isinstance(kind, type) and issubclass(kind, extended):
        return kind
    return prng_key if isinstance(getattr(dtype, "impl", None), str) else None


def _dtype_or_kind(x):
    """A NumPy dtype or abstract kind (`np.floating`) for `issubdtype`: funcgrad's scalar
    types (`fnp.float32`) by their dtype, arrays by theirs."""
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    dt = getattr(x, "dtype", None)
    return dt if isinstance(dt, np.dtype) else as_dtype(x)


def issubdtype(a, b):
    """Whether dtype `a` is `b` or lies below it in NumPy's hierarchy of dtypes and kinds,
    extended dtypes included (`issubdtype(key.dtype, prng_key)` is True).

    Example:
        >>> issubdtype(fnp.float32, fnp.floating), issubdtype(fnp.int8, fnp.floating)
        (True, False)
    """
    cat_a, cat_b = category_of(a), category_of(b)
    if cat_a is not None or cat_b is not None:
        if cat_a is None:
            return False
        if cat_b is not None:  # two extended dtypes
            return a == b
        return isinstance(b, type) and issubclass(cat_a, b)
    a, b = _dtype_or_kind(a), _dtype_or_kind(b)
    if isinstance(a, np.dtype) and a.num >= 256:  # an ml_dtypes type, below its kind's
        if isinstance(b, np.dtype) or b not in _ABSTRACT:
            return a == b if isinstance(b, np.dtype) else b is a.type
        return issubclass(STAND_IN[kind(a)], b)
    return bool(np.issubdtype(a, b))


# numpy's abstract kinds, and a numpy type standing in for an ml_dtypes type below them
_ABSTRACT = (np.generic, np.number, np.inexact, np.floating, np.integer, np.signedinteger,
             np.unsignedinteger)
STAND_IN = {"f": np.float32, "i": np.int8, "u": np.uint8}


def canonicalize_dtype(dtype, allow_extended_dtype=False):
    """The dtype funcgrad gives arrays of `dtype`: 64-bit types narrowed to 32 bits unless
    `enable_x64`, Python types to their defaults (`float` -> float32), as JAX's.

    Raises:
        ValueError: an extended dtype (a typed key's) without `allow_extended_dtype`.

    Example:
        >>> canonicalize_dtype(np.float64), canonicalize_dtype(int)
        (dtype('float32'), dtype('int32'))
    """
    if is_extended(dtype):
        if not allow_extended_dtype:
            raise ValueError(f"Internal: canonicalize_dtype called on extended dtype {dtype} "
                             "with allow_extended_dtype=False")
        return dtype
    if dtype is bool or dtype is int or dtype is float or dtype is complex:
        return scalar_dtype(dtype())[0]
    dt = as_dtype(dtype)
    return _NARROW.get(dt, dt) if not config.enable_x64 else dt


def scalar_type_of(x):
    """The Python scalar type (bool, int, float or complex) of the values of `x`.

    Example:
        >>> scalar_type_of(fnp.ones(2)), scalar_type_of(np.int8(1))
        (<class 'float'>, <class 'int'>)
    """
    dt = x.dtype if isinstance(getattr(x, "dtype", None), np.dtype) else None
    if dt is None:
        dt = scalar_dtype(x)[0] if type(x) in (bool, int, float, complex) else np.asarray(x).dtype
    kinds = {"b": bool, "i": int, "u": int, "f": float, "c": complex}
    if kind(dt) not in kinds:
        raise TypeError(f"Value {errors.short_repr(x)} with dtype {dt} is not a valid funcgrad "
                        "array type. Only arrays of numeric types are supported.")
    return kinds[kind(dt)]


def itemsize_bits(dtype):
    """The bits one element of `dtype` occupies (8 for bool).

    Example:
        >>> itemsize_bits(float32), itemsize_bits(bool_), itemsize_bits(int4)
        (32, 8, 4)
    """
    if is_extended(dtype):
        raise ValueError(f"unexpected input: dtype={dtype}")
    dt = np.dtype(_dtype_or_kind(dtype))
    if dt.num >= 256:  # int4 is 4 bits, float4_e2m1fn 4, bfloat16 16
        return int((_finfo if kind(dt) == "f" else _iinfo)(dt).bits)
    return dt.itemsize * 8


def __getattr__(name):
    if name in ("finfo", "iinfo"):  # one home: funcgrad.numpy's (loaded on first use)
        from funcgrad.numpy import dtype_api
        return getattr(dtype_api, name)
    if name in NARROW_NAMES or name == "NARROW_TYPES":  # `dtypes.bfloat16`: ml_dtypes loaded
        load_narrow()
        return globals()[name]
    raise AttributeError(f"module 'funcgrad.dtypes' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *NARROW_NAMES, "NARROW_TYPES", "finfo", "iinfo"})
