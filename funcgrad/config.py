"""funcgrad's one options object.

Options are read through `config.<name>` and changed with `config.update(name, value)`.
Environment variables are read here, once, at import (`cpu_device_count`); nothing else in
funcgrad reads them deep inside core logic.
"""

import os
import re


def _cpu_device_count_from_env():
    """`FUNCGRAD_CPU_DEVICE_COUNT=N`, else XLA's `--xla_force_host_platform_device_count=N` in
    `XLA_FLAGS` (so that JAX test scripts that set it get N devices too), else 1."""
    value = os.environ.get("FUNCGRAD_CPU_DEVICE_COUNT", "").strip()
    if not value:
        found = re.findall(r"--xla_force_host_platform_device_count=(\S+)",
                           os.environ.get("XLA_FLAGS", ""))
        value = found[-1] if found else "1"
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"funcgrad: the CPU device count from the environment must be a "
                         f"positive integer, got {value!r}")
    return int(value)


class Config:
    """Global options, as in `jax.config`.

    Example:
        >>> import funcgrad as fg
        >>> fg.config.update("enable_x64", True)
        >>> fg.config.enable_x64
        True
    """

    _defaults = {
        "enable_x64": False,  # 64-bit default dtypes (float64/int64), as JAX's jax_enable_x64
        "debug_nans": False,  # raise at the first primitive that produces a NaN
        "disable_jit": False,  # run jitted functions op by op
        "check_jaxprs": False,  # re-derive types after every transform (tests; JAX: enable_checks)
        "retrace_warn_after": 4,  # warn once per jitted function after this many traces
        "jit_cache_size": 64,  # traces (and derived programs) kept per jitted function; LRU
        "collective_bucket_bytes": 4 << 20,  # jit groups gradient allreduces up to this size
        "cuda_cache_dir": None,  # compiled CUDA kernels on disk (None: ~/.cache/funcgrad/cuda)
        "native": "background",  # CPU C kernels: "background" (numpy tier first), "sync", "off"
        "native_cache_dir": None,  # compiled C modules (None: ~/.cache/funcgrad/native)
        "native_sanitize": None,  # e.g. "address,undefined": C kernels built with sanitizers
        "native_cache_bytes": 1 << 30,  # on-disk C modules beyond this: the least recent go
        "native_build_jobs": None,  # C modules built at once in the background (None: CPUs)
        "cpu_device_count": 1,  # virtual CPU devices per process (XLA's host device count)
        "default_device": None,  # where device_put and creation place arrays (None: the CPU)
        # JAX's options, also set as "jax_<name>" (values checked as JAX checks them):
        "debug_infs": False,  # raise at the first primitive that produces an inf
        "numpy_rank_promotion": "allow",  # "warn"/"raise": funcgrad.numpy broadcasting of ranks
        "numpy_dtype_promotion": "standard",  # "strict": no implicit promotion across dtypes
        "log_compiles": False,  # log every jit compile (logger "funcgrad", level WARNING)
        "explain_cache_misses": False,  # log why each jit cache miss traced again
        "check_tracer_leaks": False,  # accepted: a leaked tracer always raises when used
        "platform_name": "",  # accepted: "cpu" (default), "gpu"/"cuda"; see For JAX users
        "platforms": None,  # accepted, as platform_name (a comma-separated list)
        "default_matmul_precision": None,  # accepted: CPU matmuls are exact in their dtype
        "default_prng_impl": "threefry2x32",  # the only generator funcgrad has
        "threefry_partitionable": True,  # JAX's layout funcgrad follows; False is an error
        "enable_custom_prng": False,  # JAX's; True is an error (raw keys stay raw)
        "compilation_cache_dir": None,  # accepted: compiled C lives in native_cache_dir
        "persistent_cache_min_compile_time_secs": 1.0,  # accepted (no effect)
        "persistent_cache_min_entry_size_bytes": 0,  # accepted (no effect)
        "traceback_filtering": "auto",  # accepted: errors already name the user's line
    }

    def __init__(self):
        self.__dict__["_values"] = dict(self._defaults,
                                        cpu_device_count=_cpu_device_count_from_env())
        self.__dict__["_listeners"] = []

    def __getattr__(self, name):
        try:
            return self._values[_ALIASES.get(name, name)]
        except KeyError:
            if name.startswith("jax_") and name[4:] in self._values | _ALIASES:
                return getattr(self, name[4:])
            raise AttributeError(f"funcgrad.config has no option {name!r}") from None

    def __setattr__(self, name, value):
        raise AttributeError("use funcgrad.config.update(name, value)")

    def update(self, name, value):
        """Set option `name` (e.g. "enable_x64", "debug_nans", "disable_jit") to `value`.

        JAX's spelling "jax_<name>" is the same option. JAX's options are checked as JAX
        checks them (a value outside an option's choices is a ValueError).

        Raises:
            UnknownOptionError: (an AttributeError and a ValueError) for a name that is no
                option, as JAX's "Unrecognized config option".
        """
        key = name[4:] if name.startswith("jax_") else name
        key = _ALIASES.get(key, key)
        if key not in self._values:
            known = ", ".join(sorted(self._values))
            raise UnknownOptionError(f"Unrecognized config option: {name} (funcgrad's options, "
                                     f"also spelled jax_<name>: {known})")
        _check_value(key, value)
        self._values[key] = value
        name = key
        for fn in self._listeners:
            fn(name, value)

    def config_with_absl(self):
        """A no-op, so test files written for JAX (`jax.config.config_with_absl()`) run."""

    def parse_flags_with_absl(self):
        """A no-op, as `config_with_absl` (JAX test files call it before absltest.main)."""

    def on_change(self, fn):
        """Register `fn(name, value)`, called after every update (used by dtype caches)."""
        self._listeners.append(fn)

    def refresh(self):
        """Call every `on_change` function with `(None, None)`: what they cache changed
        without an update (`dtypes.load_narrow` added the narrow types)."""
        for fn in self._listeners:
            fn(None, None)


class UnknownOptionError(AttributeError, ValueError):
    """`config.update` of a name that is no option (JAX raises AttributeError for it)."""


_ALIASES = {"enable_checks": "check_jaxprs"}  # JAX's name -> funcgrad's option

# JAX's checks of its options' values (its messages); funcgrad's own options take any value.
_PRECISIONS = (None, "default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
               "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
               "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16",
               "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9",
               "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32", "F64_F64_F64")
_CHOICES = {
    "numpy_rank_promotion": ("allow", "warn", "raise"),
    "numpy_dtype_promotion": ("standard", "strict"),
    "default_matmul_precision": _PRECISIONS,
    "traceback_filtering": ("off", "tracebackhide", "remove_frames", "quiet_remove_frames",
                            "auto"),
    "default_prng_impl": ("threefry2x32", "threefry4x32", "rbg", "unsafe_rbg", "philox2x32",
                          "philox4x32"),
}
_PLATFORMS = ("cpu", "gpu", "cuda")  # what funcgrad runs on
_JAX_PLATFORMS = ("tpu", "rocm", "metal", "METAL", "neuron", "")  # JAX's other names


def _check_value(name, value):
    choices = _CHOICES.get(name)
    if choices is not None and value not in choices:
        listed = [c for c in choices if c is not None]
        raise ValueError(f"new enum value must be {'None or ' if None in choices else ''}in "
                         f"{listed}, got {value!r} of type {type(value)}.")
    if name == "default_prng_impl" and value != "threefry2x32":
        raise ValueError(f"config.update('jax_default_prng_impl', {value!r}): funcgrad "
                         "implements only the 'threefry2x32' generator")
    if name == "threefry_partitionable" and not value:
        raise ValueError("config.update('jax_threefry_partitionable', False): funcgrad draws "
                         "random bits with JAX's partitionable layout only (JAX's default)")
    if name == "enable_custom_prng" and value:
        raise ValueError("config.update('jax_enable_custom_prng', True): funcgrad has no custom "
                         "generators, and `random.PRNGKey` keys stay raw uint32 arrays; use "
                         "`random.key` for typed keys (JAX's default since 0.4.16)")
    if name in ("platform_name", "platforms") and value:
        for p in str(value).split(","):
            if p not in _PLATFORMS:
                what = "a JAX platform funcgrad cannot run on" if p in _JAX_PLATFORMS else \
                    "an unknown platform"
                raise ValueError(f"config.update('jax_{name}', {value!r}): {p!r} is {what}; "
                                 f"funcgrad's platforms are {', '.join(_PLATFORMS)}")


config = Config()
