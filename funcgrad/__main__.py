"""`python -m funcgrad doctor`: what this machine offers funcgrad's native C and CUDA backends.

Native: the C compiler, its flags, the thread pool, the on-disk cache (directory, modules, size) and
a smoke kernel compiled and run against numpy. CUDA: the NVIDIA driver, the CUDA runtime,
NVRTC, nvcc and CuPy versions and the GPUs; compiles a smoke kernel for the GPU's
architecture (sm_90 when there is none), runs it on the GPU when there is one, and ends
with exactly what is missing and how to fix it.
Exit status: 0 when the report is complete (with or without a GPU), 1 when a GPU is
present but the smoke kernel fails.
"""

import platform
import sys

import numpy as np


def _line(name, value):
    print(f"  {name:<22} {value}")


def _cupy():
    try:
        import cupy
        return cupy, None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


def _versions(cupy, fixes):
    from funcgrad.backends.cuda import compile as cc
    if cupy is None:
        return None
    rt = cupy.cuda.runtime
    try:
        driver = rt.driverGetVersion()
    except Exception as e:
        driver = f"unknown ({type(e).__name__})"
    _line("NVIDIA driver (CUDA)", _cuda_version(driver) if driver else "none found")
    _line("CUDA runtime (CuPy)", _cuda_version(rt.runtimeGetVersion()))
    nvrtc = cc.nvrtc_version()
    _line("NVRTC", ".".join(map(str, nvrtc)) if nvrtc else f"missing: {cc.nvrtc_problem()}")
    if not nvrtc:
        fixes.append("install NVRTC: `pip install nvidia-cuda-nvrtc` (CUDA 13) or "
                     "`pip install nvidia-cuda-nvrtc-cu12` (CUDA 12)")
    if not driver:
        fixes.append("no NVIDIA driver: this machine can compile kernels (NVRTC/nvcc) but not "
                     "run them; use a machine with an NVIDIA GPU and driver >= 580 (CUDA 13) "
                     "or >= 525 (CUDA 12, with funcgrad[cuda12])")
    return driver


def _cuda_version(v):
    return f"{v // 1000}.{(v % 1000) // 10} ({v})"


def _gpus(cupy):
    if cupy is None or not cupy.is_available():
        _line("GPUs", "no GPU")
        return []
    out = []
    for i in range(cupy.cuda.runtime.getDeviceCount()):
        props = cupy.cuda.runtime.getDeviceProperties(i)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        cc = f"{props['major']}{props['minor']}"
        _line(f"GPU {i}", f"{name}, sm_{cc}, {props['multiProcessorCount']} SMs, "
                          f"{props['totalGlobalMem'] / 2**30:.1f} GiB")
        out.append(int(cc))
    return out


def _smoke(arch, on_gpu, fixes):
    """Render, compile and (on a GPU) run tanh(a * b + c) with a row broadcast."""
    from funcgrad.backends.cuda import compile as cc
    from funcgrad.backends.cuda import renderer
    from funcgrad.backends.cuda.plan import DeviceInfo, plan_kernel
    from funcgrad.compiler.fusion import Instr, KernelInput, KernelOutput, KernelSpec
    spec = KernelSpec("smoke", (64, 1000), (
        KernelInput("in0", "float32", (64, 1000), (0, 1)),
        KernelInput("in1", "float32", (1000,), (1,))),
        (Instr("t0", "mul", ("in0", "in1"), "float32"), Instr("t1", "tanh", ("t0",), "float32")),
        (KernelOutput("out0", "t1", "float32", (64, 1000)),))
    plan = plan_kernel(spec, DeviceInfo(arch=arch))
    compilers = cc.available_compilers()
    if not compilers:
        _line("smoke kernel", "not compiled: no NVRTC and no nvcc")
        fixes.append("install a CUDA compiler: `pip install funcgrad[cuda13]` brings CuPy and "
                     "NVRTC")
        return True
    try:
        cubin = cc.compile_source(renderer.render(plan), arch, compilers[0], name=plan.name)
    except Exception as e:
        _line("smoke kernel", f"compile FAILED: {e}")
        return False
    _line("smoke kernel", f"compiled for sm_{arch} with {cubin.compiler} ({len(cubin.data)} "
                          "bytes of cubin)")
    if not on_gpu:
        return True
    try:
        import cupy

        from funcgrad.backends.cuda.runtime import CupyRuntime
        rt = CupyRuntime()
        (handle,) = rt.prepare([plan_kernel(spec, rt.device_info())])
        a, b = np.random.rand(64, 1000).astype(np.float32), np.random.rand(1000).astype(
            np.float32)
        out = cupy.full((64, 1000), np.nan, np.float32)
        rt.launch(handle, [cupy.asarray(a), cupy.asarray(b)], [out])
        err = float(np.abs(out.get() - np.tanh(a * b)).max())
        _line("smoke kernel run", f"max abs error vs numpy {err:.1e}")
        return err < 1e-5
    except Exception as e:
        _line("smoke kernel run", f"FAILED: {type(e).__name__}: {e}")
        return False


def _cache_lines(fixes):
    """The native cache folder: where, whose, which mode, whether it passes the checks."""
    import pwd

    from funcgrad.backends.native import cache
    info = cache.describe()
    _line("native cache", info["path"])
    if info["owner"] is not None:
        try:
            name = pwd.getpwuid(info["owner"]).pw_name
        except KeyError:
            name = "?"
        _line("  owner, mode", f"{name} (uid {info['owner']}), {info['mode']:04o}"
                               f"{', funcgrad marker' if info['marker'] else ''}")
    if info["ok"]:
        _line("  checks", f"pass (owned by this user, not writable by group or others); "
                          f"{info['modules']} modules, {info['bytes'] / 2**20:.1f} MiB")
    elif info["ok"] is None:
        _line("  checks", info["reason"])
    else:
        _line("  checks", f"FAIL: {info['reason']}")
        fixes.append(f"the native cache {info['path']} is not used ({info['reason']}): "
                     "modules are built in a private temporary folder each time; make it "
                     "yours and private (`chmod 700`) or set config native_cache_dir")


def _native(fixes):
    """The native C backend: compiler, flags, threads, cache; a smoke kernel run vs numpy."""
    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad.backends.native import build, kernel, threads, tiers
    cc = build.compiler()
    if cc is None:
        _line("C compiler", f"none ({', '.join(build._candidates())} not found)")
        fixes.append(tiers.no_compiler_message())
        return
    _line("C compiler", f"{cc.path} ({cc.version})")
    _line("C flags", " ".join(cc.flags + cc.libs))
    pool = threads.address(cc) and threads.threads()
    _line("threads", f"{pool} (funcgrad's pool; OMP_NUM_THREADS sets it), for kernels of "
          f"{kernel.PARALLEL_MIN_ELEMENTS} elements or more" if pool else
          "none (the thread pool did not build: kernels run on one thread)")
    _line("native mode", f"{fg.config.native!r} (config.update('native', ...))")
    _cache_lines(fixes)
    x = np.linspace(-2, 2, 1000, dtype=np.float32)
    try:
        saved = fg.config.native
        fg.config.update("native", "sync")
        try:
            f = fg.jit(lambda a: fnp.tanh(a * 1.5) + 1.0)
            got = np.asarray(f(x))
            native = "C module" in f.lower(x).compile().as_text()
        finally:
            fg.config.update("native", saved)
        err = float(np.abs(got - (np.tanh(x * 1.5) + 1.0)).max())
        _line("native smoke kernel", f"{'ran in C' if native else 'NOT native'}, max abs "
                                     f"error vs numpy {err:.1e}")
    except Exception as e:
        _line("native smoke kernel", f"FAILED: {type(e).__name__}: {e}")


def doctor():
    import funcgrad
    from funcgrad.backends.cuda import compile as cc
    fixes = []
    print("funcgrad doctor")
    _line("funcgrad", funcgrad.__version__)
    _line("Python", platform.python_version())
    _line("numpy", np.__version__)
    _native(fixes)
    cupy, problem = _cupy()
    _line("CuPy", cupy.__version__ if cupy else f"not importable ({problem})")
    if cupy is None:
        fixes.append("install CuPy: `pip install funcgrad[cuda13]` (NVIDIA driver >= 580) or "
                      "`pip install funcgrad[cuda12]`; pick one, both provide `cupy`")
    _versions(cupy, fixes)
    nvcc = cc.nvcc_version()
    _line("nvcc", f"{'.'.join(map(str, nvcc))} at {cc.nvcc_path()}" if nvcc
          else "not on PATH (optional)")
    archs = _gpus(cupy)
    ok = _smoke(archs[0] if archs else 90, bool(archs), fixes)
    print()
    if archs and ok:
        print("The CUDA backend is ready: jit(..., backend='cuda') and device_put(x, 'cuda').")
    elif not archs:
        print("no GPU: funcgrad runs on the CPU (backend 'cpu'); CUDA kernels can still be "
              "rendered and compiled here.")
    for fix in fixes:
        print(f"  missing: {fix}")
    return 0 if ok or not archs else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["doctor"]:
        print("usage: python -m funcgrad doctor", file=sys.stderr)
        return 2
    return doctor()


if __name__ == "__main__":
    sys.exit(main())
