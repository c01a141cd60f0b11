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
        "check_jaxprs": False,  # re-derive every type after each transform (on in tests)
        "retrace_warn_after": 4,  # warn once per jitted function after this many traces
        "jit_cache_size": 64,  # traces (and derived programs) kept per jitted function; LRU
        "collective_bucket_bytes": 4 << 20,  # jit groups gradient allreduces up to this size
        "cuda_cache_dir": None,  # compiled CUDA kernels on disk (None: ~/.cache/funcgrad/cuda)
        "native": "background",  # CPU C kernels: "background" (numpy tier first), "sync", "off"
        "native_cache_dir": None,  # compiled C modules (None: ~/.cache/funcgrad/native)
        "native_sanitize": None,  # e.g. "address,undefined": C kernels built with sanitizers
        "native_cache_bytes": 1 << 30,  # on-disk C modules beyond this: the least recent go
        "cpu_device_count": 1,  # virtual CPU devices per process (XLA's host device count)
        "default_device": None,  # where device_put and creation place arrays (None: the CPU)
    }

    def __init__(self):
        self.__dict__["_values"] = dict(self._defaults,
                                        cpu_device_count=_cpu_device_count_from_env())
        self.__dict__["_listeners"] = []

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"funcgrad.config has no option {name!r}") from None

    def __setattr__(self, name, value):
        raise AttributeError("use funcgrad.config.update(name, value)")

    def update(self, name, value):
        """Set option `name` (e.g. "enable_x64", "debug_nans", "disable_jit") to `value`."""
        if name.startswith("jax_"):
            name = name[4:]
        if name not in self._values:
            known = ", ".join(sorted(self._values))
            raise ValueError(f"config.update: unknown option {name!r}; known options: {known}")
        self._values[name] = value
        for fn in self._listeners:
            fn(name, value)

    def config_with_absl(self):
        """A no-op, so test files written for JAX (`jax.config.config_with_absl()`) run."""

    def parse_flags_with_absl(self):
        """A no-op, as `config_with_absl` (JAX test files call it before absltest.main)."""

    def on_change(self, fn):
        """Register `fn(name, value)`, called after every update (used by dtype caches)."""
        self._listeners.append(fn)


config = Config()
