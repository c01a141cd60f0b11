"""C source -> a loaded shared object, with the system C compiler and a two-level cache.

    cc = compiler()            # a Compiler (path, version, flags, libraries), or None
    lib = load(source)         # ctypes.CDLL, compiled once per (source, compiler, flags)

The compiler is `$CC` when set (a missing `$CC` means no compiler: it is never silently
replaced), else the first of `cc`, `gcc`, `clang` on PATH. Flags: `OPT_LEVEL` (`-O2`), the
host's vector ISA (`-march=native` when the compiler takes it), `-std=c11 -fPIC -shared`,
`-fvect-cost-model=dynamic` and
`-ffp-contract=off -fno-math-errno -fno-trapping-math` (never `-ffast-math`: values stay IEEE,
as numpy's; only FP exception flags, which nothing reads, may differ);
`-fopenmp-simd` (the `omp simd` pragmas; threads are `threads.py`'s pool, not OpenMP's) and
`-fno-semantic-interposition` (calls between a module's functions inline) when a test
program builds with them, and glibc's SIMD math library (libmvec:
`-DFG_VECTOR_MATH ... -lmvec`, so loops calling exp/tanh/... vectorize) when a probe calling
every function `ops.VECTOR_MATH` declares links and loads (both checked once).
`config.native_sanitize` (e.g. "address,undefined") builds with `-fsanitize=...`, `-O1 -g`
instead (the thread pool too). The probe's answer is kept on disk as names of
`PROBE_OPTIONS` only: a file never adds a flag.
Cache: in memory by key, then on disk (`cache.py`: a folder only this user can write,
`<key>.so` loaded only when it matches the sha256 its sidecar recorded), key = sha256 of
(source, compiler and version, flags, CPU features), so a second process pays no compile.
The compiler reads the source from its standard input and writes into a private workspace of
the folder. A folder that fails the checks or cannot be written: the module is built in a
private temporary folder (one warning); when nothing can be built, `NativeUnavailableError`
(the program stays on numpy). Compile errors of the generated code are `NativeCompileError`.
"""

import contextlib
import ctypes
import errno
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
from funcgrad.backends.native import cache
from funcgrad.config import config

stats = Counter()  # "compiles", "memory_hits", "disk_hits", "waits" (for the same module)
_memory = {}
_lock = threading.Lock()
_loading = {}  # key -> a lock its first loader holds while it builds or reads the module


def _forked():
    global _lock, _probe_lock
    _lock = threading.Lock()  # one held by another thread at the fork would stay held
    _probe_lock = threading.Lock()
    _loading.clear()  # (so would theirs)


os.register_at_fork(after_in_child=_forked)
# -O2, not -O3: the modules compile in about half the time (the GPT step's 6.7 s -> 3.5 s) and
# ran as fast on the benchmark programs (issue 27 item 7; benchmarks/RESULTS.md "Issue 27:
# time to native"); the values are the same (no flag that reorders floating point)
OPT_LEVEL = "-O2"
# -fvect-cost-model=dynamic: -O3's vectorizer cost model at -O2 (loops whose vectorization
# needs a runtime check or peeling vectorize: a max-pool gradient 4.5 -> 1.4 ms), without the
# rest of -O3 (gcc 12.2 at -O3 -march=native miscompiled a window sum with conditional loads:
# tests/test_conv_pooling.py; -O3 also doubles a large module's compile time).
BASE_FLAGS = ("-std=c11", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno",
              "-fno-trapping-math", "-fvect-cost-model=dynamic")
SANITIZERS = {"address", "undefined", "bounds"}


class NativeCompileError(errors.FuncgradInternalError):
    """A generated C module did not compile (always a funcgrad bug)."""


class NativeUnavailableError(errors.BackendUnavailableError):
    """No C module can be built or loaded here (a full disk, no usable folder); the message
    says why, and programs run on the numpy backend."""


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
    """The path of the C compiler to use, or None (see the module docstring). Looked up
    once per ($CC, $PATH): every program's compile asks, and a PATH search costs ~2 ms."""
    where = (os.environ.get("CC"), os.environ.get("PATH"))
    found = _found.get(where, _found)
    if found is _found:
        found = _found[where] = next(filter(None, map(shutil.which, _candidates())), None)
    return found


_found = {}  # ($CC, $PATH) -> the compiler's path, or None


def _builds(path, flags, text="int fg_probe(void) { return 0; }\n", load=False, libs=()):
    """True when `text` compiles with `flags` (and, with `load`, the library loads); a
    failure's reason is kept in `_last_failure`."""
    try:
        with tempfile.TemporaryDirectory() as d:
            src, out = os.path.join(d, "probe.c"), os.path.join(d, "probe.so")
            with open(src, "w") as f:
                f.write(text)
            done = subprocess.run([path, *flags, src, "-o", out, *libs, "-lm"],
                                  capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "LC_ALL": "C"})
            if done.returncode == 0 and load:
                ctypes.CDLL(out)
    except (OSError, subprocess.SubprocessError) as e:
        _last_failure[0] = str(e)
        return False
    _last_failure[0] = done.stderr.strip()[-300:]
    return done.returncode == 0


_last_failure = [""]
PROBE_VERSION = "5"  # what `_probe_options` tries: a change must not reuse old answers
# What a probe may find, by name: a probe file on disk selects among these and can name no
# other flag (flags are never read from a file as text).
PROBE_OPTIONS = {
    "march_native": ("-march=native",),
    # gcc 12 picks its vector size by the narrowest type of a loop and then fails on loops
    # mixing bytes with floats and doubles (a bool mask with a double-accumulated column
    # sum: 2 GB/s); with 512-bit vectors allowed they vectorize (a no-op without AVX-512)
    "prefer_vector_width_512": ("-mprefer-vector-width=512",),
    "openmp_simd": ("-fopenmp-simd",),
    # -fPIC alone lets another library interpose any global function, so gcc calls a C
    # loop's kernels through the PLT and never inlines them (clang assumes this already)
    "no_semantic_interposition": ("-fno-semantic-interposition",),
    "vector_math": ("-DFG_VECTOR_MATH",),  # and libmvec
}
_why_not = {}  # compiler path -> why it cannot build here (for the warning)


@functools.cache
def _probe(path, sanitize):
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    return _probe_on_disk(path, version, sanitize)


def probe_file(path, version, sanitize):
    """The name of the file keeping the probe's answer for this compiler and host."""
    text = "\0".join([PROBE_VERSION, path, version, sanitize or "", cpu_features(),
                      _vector_math_probe()])
    return "probe-" + hashlib.sha256(text.encode()).hexdigest()[:24] + ".json"


def _probe_on_disk(path, version, sanitize):
    """`_probe_options`'s answer, kept on disk beside the modules (up to five compiler runs,
    a few hundred ms, that a second process then skips). Only a compiler that builds is
    kept; the file is read under the cache's checks and may only name `PROBE_OPTIONS`."""
    name = probe_file(path, version, sanitize)
    try:
        folder = cache.open_folder()
    except cache.Unusable as e:
        _untrusted_folder(e)
        options = _probe_options(path, version, sanitize)
    else:
        with folder:
            try:
                options = _valid_options(folder.read_json(name), sanitize)
            except cache.Unusable as e:
                cache.warn_once(e.path, f"{e.reason}; not read, the compiler is probed again")
                options = None
            if options is None:
                options = _probe_options(path, version, sanitize)
                if options is not None:
                    with contextlib.suppress(OSError):
                        folder.write(name, json.dumps({"options": options}).encode())
    return None if options is None else _compiler(path, version, sanitize, options)


def _valid_options(record, sanitize):
    """The options a probe file names, or None when it is not one funcgrad wrote."""
    options = record.get("options") if isinstance(record, dict) else None
    if (not isinstance(options, list) or len(set(map(str, options))) != len(options)
            or not set(options) <= (set() if sanitize else set(PROBE_OPTIONS))):
        return None
    return [o for o in PROBE_OPTIONS if o in options]  # in funcgrad's order


def _compiler(path, version, sanitize, options):
    flags = list(BASE_FLAGS)
    if sanitize:
        flags += _sanitizer_flags(sanitize)
        return Compiler(path, version, tuple(flags))
    flags.insert(0, OPT_LEVEL)
    for o in options:
        flags += PROBE_OPTIONS[o]
    libs = ("-lmvec",) if "vector_math" in options else ()
    return Compiler(path, version, tuple(flags), libs)


def _sanitizer_flags(sanitize):
    return ["-O1", "-g", "-fno-omit-frame-pointer", f"-fsanitize={sanitize}",
            "-fno-sanitize-recover=all"]


def _probe_options(path, version, sanitize):
    """The `PROBE_OPTIONS` compiler `path` takes here, or None when it builds nothing. The
    test programs compile at once (`_at_once`): the base flags, each option alone and all
    of them together; with every option taken, the combination is the answer (and libmvec
    is tried with all of them in the same round); otherwise each option is tried again on
    top of the ones kept so far, in order, as one after another they would be."""
    flags = list(BASE_FLAGS)
    if sanitize:
        tries = [flags, flags + _sanitizer_flags(sanitize)]
        ok = _at_once([(path, f) for f in tries])
        return [] if all(ok) else _cannot_build(path, tries[ok.index(False)])
    optimized = [OPT_LEVEL, *flags]
    singles = {o: optimized + list(PROBE_OPTIONS[o]) for o in _OPTION_ORDER}
    singles["prefer_vector_width_512"] = singles["march_native"] + list(
        PROBE_OPTIONS["prefer_vector_width_512"])
    every = optimized + [f for o in _OPTION_ORDER for f in PROBE_OPTIONS[o]]
    base_ok, all_ok, math_ok, *single_ok = _at_once(
        [(path, flags), (path, every), _vector_math_try(path, every)]
        + [(path, f) for f in singles.values()])
    if not base_ok:
        return _cannot_build(path, flags)
    taken = dict(zip(singles, single_ok))
    if all_ok and all(taken.values()):
        return list(_OPTION_ORDER) + (["vector_math"] if math_ok else [])
    found = []
    for option in _OPTION_ORDER:  # some option failed: keep them one at a time
        if option == "prefer_vector_width_512" and "march_native" not in found:
            continue
        if taken[option] and _builds(path, optimized + list(PROBE_OPTIONS[option])):
            optimized += PROBE_OPTIONS[option]
            found.append(option)
    if _builds(*_vector_math_try(path, optimized)):
        found.append("vector_math")
    return found


_OPTION_ORDER = ("march_native", "prefer_vector_width_512", "openmp_simd",
                 "no_semantic_interposition")


def _vector_math_try(path, flags):
    return (path, flags + ["-DFG_VECTOR_MATH"], _vector_math_probe(), True, ("-lmvec",))


def _cannot_build(path, flags):
    """Records why compiler `path` builds nothing here (the test program that failed with
    `flags`, built again alone for its message); None."""
    _builds(path, flags)
    _why_not[path] = f"it did not build a test program ({_last_failure[0] or 'no message'})"
    return None


def _at_once(tries):
    """`_builds(*args)` for each of `tries`, every one in a thread of its own: compiler runs
    are processes, so they use as many cores as there are (the probe's six test programs cost
    one round where cores allow, instead of six in a row). Whatever one raises is raised."""
    results = [None] * len(tries)

    def run(i, args):
        try:
            results[i] = _builds(*args)
        except BaseException as e:  # (SystemExit too: raised again in the caller)
            results[i] = e
    workers = [threading.Thread(target=run, args=(i, args), name="funcgrad-probe")
               for i, args in enumerate(tries)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def why_not(path):
    """Why compiler `path` was found but cannot build here (None when it can)."""
    return _why_not.get(path)


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
    """The `Compiler` for the current configuration, or None when there is none. Probed
    once: build workers asking at once wait for the first one's probe (`_probe_lock`)."""
    path = find_compiler()
    if path is None:
        return None
    with _probe_lock:
        return _probe(path, sanitize_option())


_probe_lock = threading.Lock()


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
    """Where compiled modules are kept on disk (`cache.cache_dir`)."""
    return cache.cache_dir()


def cache_key(source, cc):
    text = "\0".join([source, cc.path, cc.version, " ".join(cc.flags + cc.libs),
                      cpu_features()])
    return hashlib.sha256(text.encode()).hexdigest()


def load(source, cc=None):
    """The shared object compiled from C `source` (see the module docstring). Raises
    `NativeUnavailableError` when no module can be built or loaded here."""
    cc = cc or compiler()
    if cc is None:
        raise errors.BackendUnavailableError("native backend: no C compiler found")
    key = cache_key(source, cc)
    with _lock:
        lib = _memory.get(key)
        if lib is not None:
            stats["memory_hits"] += 1
            return lib
        loading = _loading.get(key)
        mine = loading is None
        if mine:
            loading = _loading[key] = threading.Lock()
            loading.acquire()
        else:
            stats["waits"] += 1
    if not mine:  # the same module is being built by another thread (two programs, one
        with loading:  # kernel): wait for it, then take it from memory (or build it when
            pass  # that build failed)
        return load(source, cc)
    try:
        lib = _from_disk_or_built(source, cc, key)
        _connect(lib, cc)
        with _lock:
            _memory[key] = lib
    finally:
        with _lock:
            del _loading[key]
        loading.release()
    return lib


def _connect(lib, cc):
    """Hands a loaded module what it asks for: numpy's BLAS routines, the thread pool, the
    count of SIGINTs its loops poll."""
    if hasattr(lib, "fg_set_blas"):  # a module that multiplies matrices: numpy's BLAS
        from funcgrad.backends.native import blas
        blas.bind(lib)
    if hasattr(lib, "fg_set_parallel"):  # a module's large kernels: hand it the thread pool
        from funcgrad.backends.native import threads
        lib.fg_set_parallel(ctypes.c_void_p(threads.address(cc)))
    if hasattr(lib, "fg_set_interrupt"):  # loops and pool kernels stop on Ctrl-C
        from funcgrad.backends.native import interrupt
        lib.fg_set_interrupt(ctypes.c_void_p(interrupt.state_address(cc)))


def _prepare(source, cc):
    """Starts building the runtime modules that module `source` asks for when it loads
    (`_connect`: the thread pool, the Ctrl-C runtime), so they compile beside it, not after
    it. A module asks by declaring the setter `_connect` calls."""
    from funcgrad.backends.native import interrupt, threads
    if "void fg_set_parallel(" in source:
        threads.prepare(cc)
    if "void fg_set_interrupt(" in source:
        interrupt.prepare(cc)


def _untrusted_folder(e):
    cache.warn_once(e.path, f"{e.reason}; nothing is loaded from it, modules are built in a "
                            "private temporary folder and not kept")


def _from_disk_or_built(source, cc, key):
    """The module from the cache folder when it passes the checks, else built there; built
    in a private temporary folder when the cache folder fails the checks or cannot be
    written (one warning), and `NativeUnavailableError` when that fails too."""
    try:
        folder = cache.open_folder()
    except cache.Unusable as e:
        problem = e
    else:
        with folder:
            lib = folder.load_module(key)
            if lib is not None:
                stats["disk_hits"] += 1
                folder.touch(key + ".so")
                return lib
            problem = _unwritable.get(folder.path)
            if problem is None:
                try:
                    lib = _build(source, cc, key, folder, publish=True)
                except _PlaceError as e:
                    problem = _unwritable[folder.path] = cache.Unusable(
                        folder.path, f"cannot be written ({e})")
                else:
                    with contextlib.suppress(OSError):
                        folder.prune(config.native_cache_bytes, keep=key)
                    return lib
    try:
        with cache.private_folder() as private:
            lib = _build(source, cc, key, private, publish=False)
    except (_PlaceError, OSError) as e:
        raise NativeUnavailableError(
            f"funcgrad: the native backend cannot build a C module here: the cache folder "
            f"{problem.path} {problem.reason}, and a private temporary folder failed too "
            f"({e}); programs run on the numpy backend") from None
    _untrusted_folder(problem)
    return lib


def _build(source, cc, key, folder, publish):
    """Compiles `source` in a workspace of `folder`, moves it into the folder (`publish`)
    and loads it (both reached through the folders' descriptors)."""
    _prepare(source, cc)
    try:
        with folder.workspace() as (work_fd, work_path):
            path = f"{work_path}/{key}.so"
            _run_compiler(cc, source, path, work_fd)
            if publish:
                try:
                    folder.publish(work_fd, key, source)
                    path = folder.loadable(key + ".so")
                except OSError as e:  # still loaded, not kept
                    problem = _unwritable[folder.path] = cache.Unusable(
                        folder.path, f"cannot be written ({e.strerror or e})")
                    _untrusted_folder(problem)
            lib = ctypes.CDLL(path)
    except OSError as e:
        raise _PlaceError(e.strerror or str(e)) from None
    stats["compiles"] += 1
    return lib


def _run_compiler(cc, source, out, work_fd):
    """Runs the compiler on `source` (its standard input, so the module's bytes depend on
    nothing else) writing `out`; raises `_PlaceError` for a failure of the machine (a full
    disk, a read-only folder, a killed compiler), `NativeCompileError` for one of the code."""
    try:
        done = subprocess.run(
            [cc.path, *cc.flags, "-x", "c", "-", "-x", "none", "-o", out, *cc.libs, "-lm"],
            input=source, capture_output=True, text=True, timeout=600,
            pass_fds=(work_fd,) if cache.FD_PATHS else (), env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        raise _PlaceError("the compiler ran for 600 s") from None
    if done.returncode == 0:
        return
    if done.returncode < 0:
        raise _PlaceError(f"the compiler was killed by signal {-done.returncode}")
    for text in _MACHINE_FAILURES:
        if text in done.stderr:
            line = next(ln for ln in done.stderr.splitlines() if text in ln)
            raise _PlaceError(f"the compiler says: {line.strip()[-200:]}")
    numbered = "\n".join(f"{i + 1:4d} {ln}" for i, ln in enumerate(source.splitlines()))
    raise NativeCompileError(
        f"native backend: the generated C module did not compile (a funcgrad bug, please "
        f"report it)\n  compiler: {cc.path} {' '.join(cc.flags)}\n{done.stderr[-4000:]}\n"
        f"  source:\n{numbered[:20000]}")


# What a compiler (in the C locale) says when the machine, not the code, failed it
_MACHINE_FAILURES = tuple(os.strerror(e) for e in (
    errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
    errno.EIO, errno.ENOMEM)) + ("cannot open output file", "virtual memory exhausted",
                                 "signal terminated program", "terminated with signal")


class _PlaceError(Exception):
    """The folder or the machine could not hold a build (a full disk, a read-only folder)."""


_unwritable = {}  # cache folder -> `cache.Unusable`: a write there failed in this process


def prune(limit=None, keep=None):
    """Deletes the least recently used modules of the cache folder until funcgrad's files
    there hold at most `limit` bytes (`config.native_cache_bytes`; see `cache.Folder.prune`)."""
    with cache.open_folder() as folder:
        folder.prune(config.native_cache_bytes if limit is None else limit, keep)


def cache_size():
    """(modules, bytes) of funcgrad's files in the on-disk cache."""
    info = cache.describe()
    return info["modules"], info["bytes"]
