"""Run the exact CUDA text of funcgrad kernels on the CPU (a test and debugging tool).

The rendered modules are compiled by the host C++ compiler with a small emulation header
(`SHIM`): one `std::thread` per CUDA thread, blocks one after another, `__syncthreads` a
block-wide `std::barrier`, `__shfl_down_sync` an exchange through a per-warp buffer between
two warp barriers, `__shared__` a `static` (one block runs at a time); the prelude's
device-only pieces (float16 conversions, special values) are the one C base's portable
ones (`ops.CudaC.emulated_source`). It covers what funcgrad emits: 1-D blocks of whole warps,
full-mask shuffles, static shared memory.
Sanitizers (`sanitize="thread"` or `"address"`) find races and out-of-bounds accesses in
the kernels themselves.

    lib = build([plan, ...])              # one shared library for many kernels
    lib.run(plan, arrays, device)         # launches like the GPU runtime (split: 2 passes)
"""

import ctypes
import hashlib
import math
import os
import shutil
import subprocess
import tempfile

import numpy as np

from funcgrad import dtypes
from funcgrad.backends.cuda import ops, renderer
from funcgrad.backends.cuda.plan import DeviceInfo

# A tiny "GPU": grids stay small, so thread counts stay cheap on a CPU.
EMULATED_DEVICE = DeviceInfo(arch=0, sm_count=1, max_threads_per_sm=512)

SHIM = r"""
#define FG_EMULATION 1
#include <barrier>
#include <cmath>
#include <cstring>
#include <math.h>
#include <string.h>
#include <thread>
#include <vector>
using std::isfinite;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
struct dim3 { unsigned x = 0, y = 0, z = 0; };
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<>* fg_block_barrier;
static std::vector<std::barrier<>*> fg_warp_barriers;
static unsigned long long fg_exchange[64][32];
inline void __syncthreads() { fg_block_barrier->arrive_and_wait(); }
template <typename T> T __shfl_down_sync(unsigned, T v, int delta) {
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    static_assert(sizeof(T) <= 8, "shuffle of a wide type");
    std::memcpy(&fg_exchange[warp][lane], &v, sizeof(T));
    fg_warp_barriers[warp]->arrive_and_wait();
    T out = v;
    if (lane + delta < 32) std::memcpy(&out, &fg_exchange[warp][lane + delta], sizeof(T));
    fg_warp_barriers[warp]->arrive_and_wait();
    return out;
}
""" + ops.CudaC.emulated_source() + r"""inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline double erfinv(double y) {
    if (y <= -1.0 || y >= 1.0) return y == 1.0 ? INFINITY : y == -1.0 ? -INFINITY : NAN;
    double x = 0.0;
    for (int i = 0; i < 60; ++i) x -= (std::erf(x) - y) / (1.1283791670955126 * std::exp(-x * x));
    return x;
}
inline float erfinvf(float y) { return (float)erfinv((double)y); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
struct float4 { float x, y, z, w; };
struct int4 { int x, y, z, w; };
struct uint4 { unsigned x, y, z, w; };
struct uchar4 { unsigned char x, y, z, w; };
struct char4 { signed char x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline uchar4 make_uchar4(unsigned char a, unsigned char b, unsigned char c, unsigned char d) {
    return {a, b, c, d};
}
inline char4 make_char4(signed char a, signed char b, signed char c, signed char d) {
    return {a, b, c, d};
}
template <typename F> void fg_launch(unsigned grid, unsigned block, F kernel) {
    std::barrier<> bar(block);
    std::vector<std::barrier<>*> warps;
    for (unsigned w = 0; w < block / 32; ++w) warps.push_back(new std::barrier<>(32));
    fg_block_barrier = &bar;
    fg_warp_barriers = warps;
    gridDim.x = grid; blockDim.x = block;
    for (unsigned b = 0; b < grid; ++b) {
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < block; ++t)
            threads.emplace_back([=] { blockIdx.x = b; threadIdx.x = t; kernel(); });
        for (auto& th : threads) th.join();
    }
    for (auto* w : warps) delete w;
}
"""


def _launcher(name, sig):
    """`extern "C" void launch_<name>(grid, block, void** args)` for one entry point."""
    casts = ", ".join(f"({t})args[{i}]" for i, (_, t, _) in enumerate(sig))
    return (f'extern "C" void launch_{name}(unsigned grid, unsigned block, void** args) '
            f"{{ fg_launch(grid, block, [=] {{ {name}({casts}); }}); }}\n")


def source(plans):
    """One C++ translation unit: the shim, then each module in its own namespace (the
    modules' helpers would clash otherwise) followed by its launchers."""
    parts, seen = [SHIM], set()
    for k, plan in enumerate(plans):
        if plan.name in seen:
            continue
        seen.add(plan.name)
        parts.append(f"namespace fg_module_{k} {{\n{renderer.render(plan)}\n")
        for name, sig in zip(plan.kernel_names, renderer.signature(plan)):
            parts.append(_launcher(name, sig))
        parts.append("}\n")
    return "".join(parts)


def probe_source(plan, count):
    """A module whose kernel `probe_<name>` computes, for `count` indices, the offset of
    every operand of `plan` exactly as the plan's kernel does (`p_where` holds linear indices
    for elementwise plans, (row, k) pairs for reductions; `p_offsets` receives one int64 per
    operand: inputs, then elementwise outputs)."""
    r = renderer._Renderer(plan)
    idx = renderer.INDEX_TYPES[plan.index]
    operands = list(plan.inputs) + list(plan.outputs)
    if plan.strategy == "elementwise":
        lines = [f"const {idx} _i = ({idx})p_where[_j];"]
        body, offs = r.decompose("_i", plan.outer + plan.inner,
                                 [(o.name, o.strides) for o in operands], "o_")
    else:
        n = len(plan.outer)
        lines = [f"const {idx} _row = ({idx})p_where[2 * _j];",
                 f"const {idx} _k = ({idx})p_where[2 * _j + 1];"]
        body, base = r.decompose("_row", plan.outer, [(o.name, o.strides[:n]) for o in operands],
                                 "ob_")
        more, offs = r.decompose("_k", plan.inner, [(o.name, o.strides[n:]) for o in operands],
                                 "o_", base)
        body += more
    lines += body
    lines += [f"p_offsets[_j * {len(operands)} + {k}] = (long long)({offs[o.name]});"
              for k, o in enumerate(operands)]
    kernel = renderer.ENV.get_template("probe.cu.j2").render(
        name=f"probe_{plan.name}", block=plan.block, count=count, lines=lines)
    return renderer.prelude() + "\n" + kernel


def run_probe(plan, where, workdir=None):
    """Offsets of `plan`'s operands at `where` (int64 [count] or [count, 2]), computed by the
    rendered index arithmetic on the CPU: an int64 array [count, operands]."""
    where = np.ascontiguousarray(where, np.int64)
    count = where.shape[0]
    src = SHIM + probe_source(plan, count)
    sig = [("p_where", "const long long*", "in"), ("p_offsets", "long long*", "out")]
    src += _launcher(f"probe_{plan.name}", sig)
    lib = ctypes.CDLL(_build_source(src, None, workdir, ()))
    out = np.full((count, len(plan.inputs) + len(plan.outputs)), -1, np.int64)
    fn = getattr(lib, f"launch_probe_{plan.name}")
    ptrs = (ctypes.c_void_p * 2)(where.ctypes.data, out.ctypes.data)
    fn(ctypes.c_uint(min(8, -(-count // plan.block))), ctypes.c_uint(plan.block), ptrs)
    return out


def sanitizer_run(plan, sanitize, device=EMULATED_DEVICE, patch=None, workdir=None):
    """Build `plan`'s kernels with the emulation header into a standalone program under
    `-fsanitize={sanitize}` ("thread" or "address"), run it on zero-filled buffers of the
    exact sizes the runtime allocates, and return (exit code, sanitizer output). `patch`
    may edit the CUDA text first (tests plant bugs that way)."""
    module = renderer.render(plan)
    module = patch(module) if patch else module
    sigs = renderer.signature(plan)
    sizes = {f"p_{inp.name}": math.prod(inp.shape) for inp in plan.spec.inputs}
    sizes.update({f"p_{o.name}": math.prod(o.shape) for o in plan.spec.outputs})
    sizes.update({f"p_part{j}": plan.rows * plan.splits for j in range(len(plan.reductions))})
    lines = [SHIM, module, "#include <vector>", "int main() {"]
    for name, ctype, _ in dict.fromkeys(a for sig in sigs for a in sig):
        base = ctype.replace("const ", "").rstrip("*")
        lines.append(f"    std::vector<{base}> {name}({max(1, sizes[name])});")
    grids = [plan.grid(device), plan.grid(device, final=True)]
    for name, sig, grid in zip(plan.kernel_names, sigs, grids):
        args = ", ".join(f"{n}.data()" for n, _, _ in sig)
        lines.append(f"    fg_launch({grid}, {plan.block}, [&] {{ {name}({args}); }});")
    lines += ["    return 0;", "}"]
    workdir = workdir or tempfile.mkdtemp(prefix="funcgrad-sanitize-")
    cpp, exe = os.path.join(workdir, "kernel.cpp"), os.path.join(workdir, "kernel")
    with open(cpp, "w") as f:
        f.write("\n".join(lines))
    flags = ["-std=c++20", "-O1", "-g", "-pthread", f"-fsanitize={sanitize}", "-w"]
    res = subprocess.run([compiler(), *flags, cpp, "-o", exe], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"sanitizer build failed:\n{res.stderr[-4000:]}")
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", TSAN_OPTIONS="halt_on_error=1")
    res = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=300)
    return res.returncode, res.stdout + res.stderr


def compiler():
    """The host C++ compiler (g++ or clang++), or None."""
    return shutil.which("g++") or shutil.which("clang++")


class Library:
    """A compiled emulation library; `run` launches a plan's kernels on numpy arrays."""

    def __init__(self, path, plans):
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.plans = {p.name: p for p in plans}

    def launch(self, name, grid, block, arrays):
        fn = getattr(self.lib, f"launch_{name}")
        ptrs = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        fn(ctypes.c_uint(grid), ctypes.c_uint(block), ptrs)

    def run(self, plan, inputs, outputs, device=EMULATED_DEVICE):
        """Launch `plan` (inputs and outputs as contiguous numpy arrays in signature order),
        with partial buffers for a split reduction; returns `outputs`."""
        args = list(inputs) + list(outputs)
        if plan.splits > 1:
            parts = [np.full(plan.rows * plan.splits, np.nan if np.dtype(r.acc).kind == "f"
                             else 0, r.acc) for r in plan.reductions]
            self.launch(plan.name, plan.grid(device), plan.block, args + parts)
            names = [o.name for o in plan.spec.outputs]
            reds = [outputs[names.index(r.out)] for r in plan.reductions]
            self.launch(plan.name + "_final", plan.grid(device, final=True), plan.block,
                        parts + reds)
        elif plan.n:
            self.launch(plan.name, plan.grid(device), plan.block, args)
        return outputs


def build(plans, sanitize=None, workdir=None, extra_flags=()):
    """Compile `plans` into one `Library` (cached by source hash in `workdir`)."""
    return Library(_build_source(source(plans), sanitize, workdir, extra_flags), plans)


def _build_source(src, sanitize, workdir, extra_flags):
    flags = ["-std=c++20", "-O1", "-pthread", "-shared", "-fPIC", "-ffp-contract=off",
             "-w", *extra_flags]
    if sanitize:
        flags += [f"-fsanitize={sanitize}", "-g", "-fno-omit-frame-pointer"]
    key = hashlib.sha256((src + " ".join(flags)).encode()).hexdigest()[:16]
    workdir = workdir or os.path.join(tempfile.gettempdir(), "funcgrad-cuda-emulation")
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, f"fg_emu_{key}.so")
    if not os.path.exists(path):
        cpp = os.path.join(workdir, f"fg_emu_{key}.cpp")
        with open(cpp, "w") as f:
            f.write(src)
        res = subprocess.run([compiler(), *flags, cpp, "-o", path + ".tmp"],
                             capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError(f"emulation build failed:\n{res.stderr[-4000:]}")
        os.replace(path + ".tmp", path)
    return path


class EmulatedRuntime:
    """The GPU runtime's interface over numpy arrays, launching kernels through the CPU
    emulation: `program.set_runtime(EmulatedRuntime())` runs `jit(backend="cuda")` programs
    with the exact CUDA text of their kernels on the CPU. Fresh buffers are poisoned (NaN,
    or 0x5a bytes for integers) so unwritten elements show."""

    xp = np

    def __init__(self, device=EMULATED_DEVICE, sanitize=None):
        self.device, self.sanitize = device, sanitize
        self.launches = 0

    def device_info(self):
        return self.device

    def prepare(self, plans, contexts=None):
        lib = build(plans, sanitize=self.sanitize) if plans else None
        return [(p, lib) for p in plans]

    @staticmethod
    def empty(shape, dtype):
        dt = np.dtype(dtype)
        if dtypes.kind(dt) == "f":
            return np.full(shape, np.nan, dt)
        out = np.empty(shape, dt)
        out.reshape(-1).view(np.uint8)[...] = 0x5A  # (a 0-d array has no byte view)
        return out

    @staticmethod
    def to_device(value):
        return np.asarray(value)

    @staticmethod
    def aligned(x):
        return x.ctypes.data % 16 == 0

    def launch(self, handle, inputs, outputs):
        plan, lib = handle
        self.launches += len(plan.kernel_names) if plan.n else 0
        lib.run(plan, inputs, outputs, self.device)

    @staticmethod
    def fallback(prim, vals, params, exc):
        raise exc
