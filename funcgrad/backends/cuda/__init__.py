"""The CUDA backend: fused kernels rendered as CUDA C from jinja2 templates, compiled with
NVRTC to a cubin for the device's arch, launched through CuPy; library calls through CuPy.

    plan.py       KernelSpec -> KernelPlan: the shared layout (`backends/layout.py`) plus
                  every CUDA decision (index width, vector width, block size, reduction
                  strategy, launch geometry)
    ops.py        the CUDA dialect `CudaC` of the one C base (`backends/cstyle.py`)
    renderer.py   KernelPlan -> CUDA source (`_Renderer(CudaC)`; templates/*.cu.j2 only
                  arrange the lines)
    compile.py    NVRTC/nvcc -> cubin, cached in memory and on disk
    runtime.py    CuPy: device queries, module loading, allocation, launches, library calls
    program.py    a fused Program -> CudaExecutable (the host glue of jit(backend="cuda"))
    emulate.py    the same CUDA text run on the CPU (tests, debugging)

Importing this package does not import CuPy; compiling a program does where CuPy is
installed (without it, or without a GPU, a program is rendered but not run).
"""

from funcgrad.backends.cuda.plan import DeviceInfo, KernelPlan, plan_kernel
from funcgrad.backends.cuda.program import CudaExecutable, compile_program
from funcgrad.backends.cuda.renderer import render

TAKES_DONATED_BUFFERS = False  # CuPy's memory pool reuses buffers; donation is only checked

__all__ = ["CudaExecutable", "DeviceInfo", "KernelPlan", "compile_program", "plan_kernel",
           "render"]

from funcgrad.backends.cuda import collectives as _collectives  # noqa: E402,F401  (NCCL)
