"""C source -> a loaded shared object, with the system C compiler and a two-level cache.

    cc = compiler()            # a Compiler (path, version, flags, libraries), or None
    lib = load(source)         # ctypes.CDLL, compiled once per (source, compiler, flags)

The compiler is `$CC` when set (a missing `$CC` means no compiler: it is never silently
replaced), else the first of `cc`, `gcc`, `clang` on PATH. Flags: `-O3`, the host's vector
ISA (`-march=native` when the compiler takes it), `-std=c11 -fPIC -shared`, and
`-ffp-contract=off -fno-math-errno -fno-trapping-math` (never `-ffast-math`: values stay IEEE,
as numpy's; only FP exception flags, which nothing reads, may differ);
`-fopenmp-simd` (the `omp simd` pragmas; threads are `threads.py`'s pool, not OpenMP's) and
`-fno-semantic-interposition` (calls between a module's functions inline) when a test
program builds with them, and glibc's SIMD math library (libmvec:
`-DFG_VECTOR_MATH ... -lmvec`, so loops calling exp/tanh/... vectorize) when a probe calling
every function `ops.VECTOR_MATH` declares links and loads (both checked once).
`config.native_sanitize` (e.g. "address,undefined") builds with `-fsanitize=...`, `-O1 -g`
instead (the thread pool too).
Cache: in memory by key, then on disk under `cache_dir()` (`config.native_cache_dir`, else
`$XDG_CACHE_HOME/funcgrad/native`, else `~/.cache/funcgrad/native`) as `<key>.so` next to
its `<key>.c`, key = sha256 of (source, compiler and version, flags, CPU features), written
atomically (a temporary file renamed into place), so a second process pays no compile.
"""

import contextlib
import ctypes
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass

from funcgrad import errors
from funcgrad.config import config

stats = Counter()  # "compiles", "memory_hits", "disk_hits"
_memory = {}
_lock = threading.Lock()
BASE_FLAGS = ("-std=c11", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno",
              "-fno-trapping-math")
SANITIZERS = {"address", "undefined", "bounds"}


class NativeCompileError(errors.FuncgradInternalError):
    """A generated C module did not compile (always a funcgrad bug)."""


@dataclass(frozen=True)
class Compiler:
    """The C compiler funcgrad uses and how: path, version line, flags, libraries."""

    path: str
    version: str
    flags: tuple
    libs: tuple = ()


def _candidates():
    cc = os.environ.get("CC")
    if cc:
        return [cc]
    return ["cc", "gcc", "clang"]


def find_compiler():
    """The path of the C compiler to use, or None (see the module docstring)."""
    for name in _candidates():
        path = shutil.which(name)
        if path:
            return path
    return None


def _builds(path, flags, text="int fg_probe(void) { return 0; }\n", load=False, libs=()):
    """True when `text` compiles with `flags` (and, with `load`, the library loads)."""
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "probe.c"), os.path.join(d, "probe.so")
        with open(src, "w") as f:
            f.write(text)
        try:
            done = subprocess.run([path, *flags, src, "-o", out, *libs, "-lm"],
                                  capture_output=True, timeout=120)
            if done.returncode == 0 and load:
                ctypes.CDLL(out)
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0


PROBE_VERSION = "4"  # what `_probe_flags` tries: a change must not reuse old answers


@functools.cache
def _probe(path, sanitize):
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    return _probe_on_disk(path, version, sanitize)


def _probe_on_disk(path, version, sanitize):
    """`_probe_flags`'s answer, kept on disk beside the modules (up to five compiler runs, a
    few hundred ms, that a second process then skips)."""
    text = "\0".join([PROBE_VERSION, path, version, sanitize or "", cpu_features(),
                      _vector_math_probe()])
    file = os.path.join(cache_dir(), "probe-" + hashlib.sha256(text.encode()).hexdigest()[:24]
                        + ".json")
    try:
        with open(file) as f:
            kept = json.load(f)
        return None if kept is None else Compiler(path, version, tuple(kept["flags"]),
                                                  tuple(kept["libs"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    cc = _probe_flags(path, version, sanitize)
    kept = None if cc is None else {"flags": cc.flags, "libs": cc.libs}
    try:
        os.makedirs(os.path.dirname(file), exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".json", dir=os.path.dirname(file))
        with os.fdopen(fd, "w") as f:
            json.dump(kept, f)
        os.replace(tmp, file)
    except OSError:
        pass  # an unwritable cache: probed again next time
    return cc


def _probe_flags(path, version, sanitize):
    flags = list(BASE_FLAGS)
    if not _builds(path, flags):
        return None
    if sanitize:
        flags += ["-O1", "-g", "-fno-omit-frame-pointer", f"-fsanitize={sanitize}",
                  "-fno-sanitize-recover=all"]
        return Compiler(path, version, tuple(flags)) if _builds(path, flags) else None
    flags.insert(0, "-O3")
    if _builds(path, flags + ["-march=native"]):
        flags.append("-march=native")
        # gcc 12 picks its vector size by the narrowest type of a loop and then fails on
        # loops mixing bytes with floats and doubles (a bool mask with a double-accumulated
        # column sum: 2 GB/s); with 512-bit vectors allowed they vectorize (a no-op without
        # AVX-512)
        if _builds(path, flags + ["-mprefer-vector-width=512"]):
            flags.append("-mprefer-vector-width=512")
    if _builds(path, flags + ["-fopenmp-simd"]):
        flags.append("-fopenmp-simd")
    # -fPIC alone lets another library interpose any global function, so gcc calls a C
    # loop's kernels through the PLT and never inlines them (clang assumes this already)
    if _builds(path, flags + ["-fno-semantic-interposition"]):
        flags.append("-fno-semantic-interposition")
    libs = ("-lmvec",)
    if _builds(path, flags + ["-DFG_VECTOR_MATH"], _vector_math_probe(), True, libs):
        return Compiler(path, version, tuple(flags + ["-DFG_VECTOR_MATH"]), libs)
    return Compiler(path, version, tuple(flags))


def _vector_math_probe():
    """A loop calling every function `ops.VECTOR_MATH` declares `simd` (it loads only when
    libmvec has all of them)."""
    from funcgrad.backends.native import ops
    calls = " + ".join(f"{n}f(x[i]{', x[i]' if n in ops.BINARY_MATH else ''})"
                       for n in ops.VECTOR_MATH)
    dcalls = calls.replace("f(x[i]", "(d[i]").replace(", x[i]", ", d[i]")
    return (f"#include <math.h>\n{ops.vector_math_declarations()}\n"
            "void fg_probe(const float *restrict x, float *restrict y, const double *restrict d,"
            " double *restrict e, long long n) {\n#pragma omp simd\n"
            f"for (long long i = 0; i < n; ++i) y[i] = {calls};\n#pragma omp simd\n"
            f"for (long long i = 0; i < n; ++i) e[i] = {dcalls};\n}}\n")


def sanitize_option():
    value = config.native_sanitize
    if not value:
        return None
    parts = str(value).split(",")
    if not set(parts) <= SANITIZERS:
        raise errors.FuncgradValueError(
            f"config native_sanitize={value!r}: expected a comma-separated subset of "
            f"{sorted(SANITIZERS)}")
    return ",".join(parts)


def compiler():
    """The `Compiler` for the current configuration, or None when there is none."""
    path = find_compiler()
    return None if path is None else _probe(path, sanitize_option())


@functools.cache
def cpu_features():
    """A short fingerprint of the host CPU's instruction set (part of every cache key)."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    flags = line
                    break
    except OSError:
        pass
    text = f"{platform.machine()} {platform.processor()} {flags}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_dir():
    """Where compiled modules are kept on disk."""
    if config.native_cache_dir:
        return os.path.expanduser(str(config.native_cache_dir))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "funcgrad", "native")


def cache_key(source, cc):
    text = "\0".join([source, cc.path, cc.version, " ".join(cc.flags + cc.libs),
                      cpu_features()])
    return hashlib.sha256(text.encode()).hexdigest()


def load(source, cc=None):
    """The shared object compiled from C `source` (see the module docstring)."""
    cc = cc or compiler()
    if cc is None:
        raise errors.BackendUnavailableError("native backend: no C compiler found")
    key = cache_key(source, cc)
    with _lock:
        lib = _memory.get(key)
        if lib is not None:
            stats["memory_hits"] += 1
            return lib
    d = cache_dir()
    path = os.path.join(d, key + ".so")
    if os.path.exists(path):
        try:
            lib = ctypes.CDLL(path)
            stats["disk_hits"] += 1
            with contextlib.suppress(OSError):
                os.utime(path)  # recently used: `prune` keeps it longest
        except OSError:
            lib = None  # a damaged file: compiled again below
    if lib is None:
        _compile(source, cc, d, key)
        lib = ctypes.CDLL(path)
        stats["compiles"] += 1
    if hasattr(lib, "fg_set_gemm"):  # a module whose loops call BLAS: hand it numpy's gemm
        gemm = blas_gemm()
        lib.fg_set_gemm(ctypes.c_void_p(gemm.get("float32")), ctypes.c_void_p(gemm.get("float64")))
    if hasattr(lib, "fg_set_parallel"):  # a module's large kernels: hand it the thread pool
        from funcgrad.backends.native import threads
        lib.fg_set_parallel(ctypes.c_void_p(threads.address(cc)))
    with _lock:
        _memory[key] = lib
    return lib


@functools.cache
def blas_gemm():
    """{"float32": address, "float64": address} of the ILP64 `cblas_[sd]gemm` of the OpenBLAS
    numpy itself loaded (numpy's wheels ship `scipy_openblas64_`), or {} when there is none
    (the C loops then multiply with their own code)."""
    import numpy  # noqa: F401  (numpy has loaded its BLAS)
    try:
        with open("/proc/self/maps") as f:
            paths = {ln.split()[-1] for ln in f if "openblas" in ln.lower() and "/" in ln}
    except OSError:
        return {}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_cblas_", "cblas_"):
            fns = [getattr(lib, f"{prefix}{c}gemm64_", None) for c in "sd"]
            if all(fns):
                return {dt: ctypes.cast(fn, ctypes.c_void_p).value
                        for dt, fn in zip(("float32", "float64"), fns)}
    return {}


def _compile(source, cc, d, key):
    os.makedirs(d, exist_ok=True)
    fd, tmp_c = tempfile.mkstemp(prefix=key[:16], suffix=".c", dir=d)
    with os.fdopen(fd, "w") as f:
        f.write(source)
    tmp = tmp_c[:-2] + ".so"
    try:
        done = subprocess.run([cc.path, *cc.flags, tmp_c, "-o", tmp, *cc.libs, "-lm"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            numbered = "\n".join(f"{i + 1:4d} {ln}" for i, ln in enumerate(source.splitlines()))
            raise NativeCompileError(
                f"native backend: the generated C module did not compile (a funcgrad bug, "
                f"please report it)\n  compiler: {cc.path} {' '.join(cc.flags)}\n"
                f"{done.stderr[-4000:]}\n  source:\n{numbered[:20000]}")
        os.replace(tmp_c, os.path.join(d, key + ".c"))
        os.replace(tmp, os.path.join(d, key + ".so"))
    finally:
        for t in (tmp_c, tmp):
            if os.path.exists(t):
                os.unlink(t)
    prune(d, keep=key)


def prune(d, limit=None, keep=None):
    """Deletes the least recently used modules (`<key>.so` with its `<key>.c`; a disk hit
    touches its module) of cache folder `d` until it holds at most `limit` bytes
    (`config.native_cache_bytes`); `keep` (a key) stays. A module already loaded by a
    process keeps working (its mapping outlives the file)."""
    limit = config.native_cache_bytes if limit is None else limit
    try:
        entries = [(e.stat().st_mtime, e.stat().st_size, e.path) for e in os.scandir(d)]
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    for _, _, path in sorted(e for e in entries if e[2].endswith(".so")):
        if total <= limit:
            break
        stem = path[:-3]
        if os.path.basename(stem) == keep:
            continue
        for f in (path, stem + ".c"):
            try:
                total -= os.path.getsize(f)
                os.unlink(f)
            except OSError:
                pass


def cache_size():
    """(files, bytes) of the on-disk cache."""
    d = cache_dir()
    if not os.path.isdir(d):
        return 0, 0
    names = [n for n in os.listdir(d) if n.endswith(".so")]
    return len(names), sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
