"""CUDA source -> cubin for one architecture, with a two-level cache.

NVRTC (through CuPy's low-level binding, which needs no GPU) is the compiler at run time;
nvcc is the alternative for CI and offline checks. Always a cubin (`-arch=sm_XX`), never
PTX: PTX from a newer NVRTC than the driver does not load.

    cubin = compile_source(src, arch=90)                 # NVRTC when importable, else nvcc
    cubin.data, cubin.log, cubin.resources()              # ptxas report with verbose=True

Cache: in memory by the compile key, then on disk under `config.cuda_cache_dir` (default
`~/.cache/funcgrad/cuda`) by sha256 of (source, options, arch, compiler and its version,
funcgrad's codegen version). Files carry a checksum and are written atomically; a corrupt
file is recompiled. `stats` counts compiles and hits (tests read it). A failure raises
`CudaCompileError` with the compiler log, the numbered source and the IR it came from.
"""

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass

from funcgrad import errors
from funcgrad.compiler.fusion import CODEGEN_VERSION
from funcgrad.config import config

stats = Counter()  # "compiles", "nvrtc", "nvcc", "memory_hits", "disk_hits"
_memory = {}
# No contraction of a * b + c into one fused multiply-add (NVRTC and nvcc contract by
# default): each operation rounds once, as numpy's and the C backends' (-ffp-contract=off).
BASE_OPTIONS = ("-std=c++17", "--fmad=false")


class CudaCompileError(errors.FuncgradInternalError):
    """A generated CUDA kernel did not compile (always a funcgrad bug)."""


@dataclass(frozen=True)
class Cubin:
    """A compiled module: the cubin bytes, the compiler's log (the ptxas report when
    compiled with `verbose=True`), and which compiler made it."""

    data: bytes
    arch: int
    compiler: str
    log: str
    key: str

    def resources(self):
        """Per kernel, from the ptxas report: registers, stack bytes, spill stores/loads
        (bytes), shared memory bytes. Empty unless compiled with `verbose=True`."""
        return parse_ptxas(self.log)


def parse_ptxas(log):
    out, current = {}, None
    for line in log.splitlines():
        m = re.search(r"Function properties for (\w+)", line) or re.search(
            r"Compiling entry function '(\w+)'", line)
        if m:
            current = out.setdefault(m.group(1), {"registers": 0, "stack": 0,
                                                  "spill_stores": 0, "spill_loads": 0,
                                                  "smem": 0})
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill "
                      r"loads", line)
        if m:
            current.update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                           spill_loads=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            current["smem"] = int(s.group(1)) if s else 0
    return out


# --- compilers ---------------------------------------------------------------------------------

@functools.cache
def nvrtc_version():
    """NVRTC's (major, minor) through CuPy, or None when CuPy or libnvrtc is missing."""
    try:
        from cupy.cuda import nvrtc
        return tuple(nvrtc.getVersion())
    except Exception:
        return None


def nvrtc_problem():
    """Why NVRTC cannot be used here (a sentence with the fix), or None."""
    try:
        from cupy.cuda import nvrtc
    except Exception as e:
        return (f"CuPy is not importable ({type(e).__name__}: {e}); install it with "
                "`pip install funcgrad[cuda13]` (or [cuda12])")
    try:
        nvrtc.getVersion()
    except Exception as e:
        return (f"libnvrtc was not found ({type(e).__name__}: {str(e).splitlines()[0]}); "
                "install it with `pip install nvidia-cuda-nvrtc` (CUDA 13) or "
                "`pip install nvidia-cuda-nvrtc-cu12` (CUDA 12)")
    return None


def nvcc_path():
    return shutil.which("nvcc")


@functools.cache
def nvcc_version():
    path = nvcc_path()
    if path is None:
        return None
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def available_compilers():
    """The compilers usable here, preferred first: "nvrtc", "nvcc"."""
    return [c for c, ok in (("nvrtc", nvrtc_version()), ("nvcc", nvcc_version())) if ok]


def _options(arch, options, verbose):
    opts = [f"-arch=sm_{arch}", *BASE_OPTIONS, *options]
    return opts + (["--ptxas-options=-v"] if verbose else [])


def _nvrtc(source, name, opts):
    from cupy.cuda import nvrtc
    prog = nvrtc.createProgram(source, f"{name}.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError:
            return None, nvrtc.getProgramLog(prog).rstrip("\x00")
        return nvrtc.getCUBIN(prog), nvrtc.getProgramLog(prog).rstrip("\x00")
    finally:
        nvrtc.destroyProgram(prog)


def _nvcc(source, name, opts):
    opts = [o.replace("--ptxas-options=-v", "-Xptxas=-v") for o in opts]
    with tempfile.TemporaryDirectory(prefix="funcgrad-nvcc-") as d:
        src, out = os.path.join(d, f"{name}.cu"), os.path.join(d, f"{name}.cubin")
        with open(src, "w") as f:
            f.write(source)
        res = subprocess.run([nvcc_path(), "-cubin", *opts, "-o", out, src],
                             capture_output=True, text=True)
        log = (res.stdout + res.stderr).strip()
        if res.returncode:
            return None, log
        with open(out, "rb") as f:
            return f.read(), log


_COMPILERS = {"nvrtc": (_nvrtc, nvrtc_version), "nvcc": (_nvcc, nvcc_version)}


# --- the cache ---------------------------------------------------------------------------------

def cache_dir():
    d = config.cuda_cache_dir
    return os.path.expanduser(d if d else os.path.join("~", ".cache", "funcgrad", "cuda"))


def _disk_read(path):
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        return None
    head, _, rest = blob.partition(b"\n")
    if hashlib.sha256(rest).hexdigest().encode() != head:
        return None  # torn or corrupt: recompile
    meta, _, data = rest.partition(b"\n")
    return json.loads(meta), data


def _disk_write(path, meta, data):
    rest = json.dumps(meta).encode() + b"\n" + data
    blob = hashlib.sha256(rest).hexdigest().encode() + b"\n" + rest
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache directory only costs recompiles


def compile_source(source, arch=90, compiler=None, options=(), verbose=False, name="kernel",
                   context=""):
    """Compile CUDA `source` to a `Cubin` for `sm_{arch}` (cached; see the module doc).

    Args:
        compiler: "nvrtc", "nvcc" or None (the first of `available_compilers()`).
        options: extra compiler options. verbose: add the ptxas report to the log.
        name: the module's name in messages. context: the IR the source came from, for
            error messages.

    Raises:
        CudaCompileError: the compiler rejected the source.
        funcgrad.errors.FuncgradValueError: no CUDA compiler is available.
    """
    if compiler is None:
        found = available_compilers()
        if not found:
            raise errors.FuncgradValueError(
                f"no CUDA compiler available: {nvrtc_problem()}; nvcc is not on PATH either")
        compiler = found[0]
    fn, version = _COMPILERS[compiler]
    opts = _options(arch, options, verbose)
    key = hashlib.sha256(json.dumps([source, opts, arch, compiler, version(),
                                     CODEGEN_VERSION]).encode()).hexdigest()
    hit = _memory.get(key)
    if hit is not None:
        stats["memory_hits"] += 1
        return hit
    path = os.path.join(cache_dir(), key[:2], key + ".cubin")
    found = _disk_read(path)
    if found is not None:
        stats["disk_hits"] += 1
        cubin = _memory[key] = Cubin(found[1], arch, found[0]["compiler"], found[0]["log"], key)
        return cubin
    data, log = fn(source, name, opts)
    if data is None:
        raise CudaCompileError(_failure(name, compiler, opts, log, source, context))
    stats["compiles"] += 1
    stats[compiler] += 1
    _disk_write(path, {"compiler": compiler, "log": log}, data)
    cubin = _memory[key] = Cubin(data, arch, compiler, log, key)
    return cubin


def _failure(name, compiler, opts, log, source, context):
    numbered = "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(source.splitlines()))
    msg = [f"CUDA compilation of {name} failed ({compiler} {' '.join(opts)}):", log.strip(),
           "--- generated source ---", numbered]
    if context:
        msg += ["--- the IR it was generated from ---", context]
    msg.append("This is a funcgrad bug (generated code must always compile); please report it "
               "with this message. Workaround: jit(..., backend='cpu').")
    return "\n".join(msg)


def clear_memory_cache():
    """Forget compiled modules held in memory (the disk cache stays)."""
    _memory.clear()
