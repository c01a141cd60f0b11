"""What a compiled GPU program needs at run time, through CuPy.

`CupyRuntime` queries the device (`DeviceInfo`), compiles and loads kernel modules (cubin
for the device's arch, cached per device), allocates from CuPy's memory pool (an
out-of-memory error reports the requested size and the pool's state) and launches on the
current stream with the exact block size the kernel was rendered for (sizes are baked into
the source, so kernels take pointers only; nothing is synchronized).

Library calls (`call_primitive`) run everything that is not a fused kernel: `dot_general`
as `xp.matmul` (cuBLAS), and every other primitive through its eager implementation on
device arrays (numpy's dispatch protocols route `np.*` to CuPy: gathers and scatters,
convolutions (im2col + matmul), sorts); a primitive CuPy cannot run falls back to the CPU
with a `DeviceFallbackWarning`. The runtime object is also the seam for testing: the CPU
emulation (`emulate.EmulatedRuntime`) has the same methods over numpy arrays.
"""

import math

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.backends.cuda import compile as cuda_compile
from funcgrad.backends.cuda import linalg as cuda_linalg
from funcgrad.backends.cuda import renderer
from funcgrad.backends.cuda.plan import DeviceInfo
from funcgrad.core import Array, set_trace, widened


class CudaOutOfMemoryError(errors.FuncgradError, MemoryError):
    """A GPU allocation failed."""


class CupyRuntime:
    """Kernels and library calls on the current CuPy device."""

    def __init__(self):
        import cupy
        self.xp = cupy
        self.cupy = cupy
        self._modules = {}  # (device id, cubin key) -> {kernel name: Function}
        self._info = {}

    @property
    def device_id(self):
        return self.cupy.cuda.runtime.getDevice()

    def device_info(self):
        dev = self.device_id
        if dev not in self._info:
            attrs = self.cupy.cuda.Device(dev).attributes
            cc = self.cupy.cuda.Device(dev).compute_capability
            self._info[dev] = DeviceInfo(int(cc), attrs["MultiProcessorCount"],
                                         attrs["MaxThreadsPerMultiProcessor"])
        return self._info[dev]

    def prepare(self, plans, contexts=None):
        """Compile (cached) and load the modules of `plans` for the current device."""
        arch = self.device_info().arch
        handles = []
        for k, plan in enumerate(plans):
            src = renderer.render(plan)
            ctx = contexts[k] if contexts else plan.spec.to_json()
            cubin = cuda_compile.compile_source(src, arch, name=plan.name, context=ctx)
            handles.append((plan, self._load(cubin, plan.kernel_names)))
        return handles

    def _load(self, cubin, names):
        key = (self.device_id, cubin.key)
        fns = self._modules.get(key)
        if fns is None:
            module = self.cupy.cuda.function.Module()
            module.load(cubin.data)
            fns = self._modules[key] = {n: module.get_function(n) for n in names}
        return fns

    def empty(self, shape, dtype):
        _check_cupy_dtype(dtype)
        try:
            return self.cupy.empty(shape, dtype)
        except self.cupy.cuda.memory.OutOfMemoryError as e:
            pool = self.cupy.get_default_memory_pool()
            nbytes = math.prod(shape) * np.dtype(dtype).itemsize
            raise CudaOutOfMemoryError(
                f"out of GPU memory allocating {nbytes / 2**20:.1f} MiB for an array "
                f"{np.dtype(dtype).name}{list(shape)} on device {self.device_id} (CuPy's pool "
                f"holds {pool.used_bytes() / 2**20:.1f} MiB in use, "
                f"{pool.total_bytes() / 2**20:.1f} MiB reserved).\n  hint: smaller batches, "
                "or free arrays you no longer need; cupy.get_default_memory_pool()."
                f"free_all_blocks() returns cached blocks to the driver. ({e})") from None

    def to_device(self, value):
        _check_cupy_dtype(np.asarray(value).dtype)
        return self.cupy.asarray(value)

    @staticmethod
    def aligned(x):
        return x.data.ptr % 16 == 0

    @staticmethod
    def fallback(prim, vals, params, exc):
        from funcgrad.devices import run_on_devices
        return run_on_devices(prim, vals, params, exc)

    def launch(self, handle, inputs, outputs):
        """Run one kernel plan: its main kernel and, for a split reduction, the final pass
        over partial results allocated here (from the pool)."""
        plan, fns = handle
        if plan.n == 0:
            return
        stream = self.cupy.cuda.get_current_stream()
        info = self.device_info()
        args = tuple(inputs) + tuple(outputs)
        if plan.splits > 1:
            parts = tuple(self.empty((plan.rows * plan.splits,), r.acc)
                          for r in plan.reductions)
            fns[plan.name]((plan.grid(info),), (plan.block,), args + parts, stream=stream)
            names = [o.name for o in plan.spec.outputs]
            reds = tuple(outputs[names.index(r.out)] for r in plan.reductions)
            fns[plan.name + "_final"]((plan.grid(info, final=True),), (plan.block,),
                                      parts + reds, stream=stream)
        else:
            fns[plan.name]((plan.grid(info),), (plan.block,), args, stream=stream)


def _check_cupy_dtype(dtype):
    """CuPy has no arrays of the ml_dtypes types (bfloat16, float8, int4): a clear error
    instead of CuPy's (the kernels themselves render and compile for bfloat16)."""
    dtype = np.dtype(dtype)
    if dtype.num >= 256:
        raise errors.FuncgradTypeError(
            f"the CUDA backend keeps device arrays as CuPy arrays, and CuPy has no {dtype.name} "
            f"arrays\n  hint: run {dtype.name} programs on the CPU backends (jit(backend="
            "'cpu')), or convert to float16/float32 for the GPU")


# --- library calls ---------------------------------------------------------------------------

def _matmul_operand(xp, x, batch, first, second):
    """`x` transposed to (batch, first, second) axes and reshaped to 2 or 3 dims."""
    perm = tuple(batch) + tuple(first) + tuple(second)
    if perm != tuple(range(x.ndim)):
        x = xp.transpose(x, perm)
    nb, nf = len(batch), len(first)
    shape = ((math.prod(x.shape[:nb]),) if batch else ()) + (
        math.prod(x.shape[nb:nb + nf]), math.prod(x.shape[nb + nf:]))
    return x.reshape(shape)


def dot_general(xp, lhs, rhs, *, dimension_numbers, precision=None,
                preferred_element_type=None):
    """lax.dot_general as one batched `xp.matmul` (cuBLAS under CuPy)."""
    if preferred_element_type is not None:
        # computed in float32 for a bfloat16 result (rounded once by the caller)
        wide = dtypes.compute_dtype(np.dtype(preferred_element_type))
        lhs, rhs = lhs.astype(wide, copy=False), rhs.astype(wide, copy=False)
    (lc, rc), (lb, rb) = dimension_numbers
    lf = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    a = _matmul_operand(xp, lhs, lb, lf, lc)
    b = _matmul_operand(xp, rhs, rb, rc, rf)
    out_shape = ([lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lf]
                 + [rhs.shape[d] for d in rf])
    return xp.matmul(a, b).reshape(out_shape)


LIBRARY = {"dot_general": dot_general, **cuda_linalg.LIBRARY}


def call_primitive(xp, eqn, vals, fallback):
    """Run equation `eqn` on device arrays `vals` (a library call); results have the IR's
    dtypes. `fallback(prim, vals, params, exc)` handles a primitive that fails on them."""
    prim, params = eqn.prim, eqn.params
    lib = LIBRARY.get(prim.name)
    if lib is not None:
        out = lib(xp, *widened(prim, vals), **params)
    elif not prim.raw_impl:  # higher-order: its own eager evaluation, on device arrays
        with set_trace(None):
            res = prim.impl_rule(*[Array(v) for v in vals], **params)
        out = [r._value for r in res] if prim.multiple_results else res._value
    else:
        try:
            out = prim.impl_rule(*widened(prim, vals), **params)
        except Exception as e:
            out = fallback(prim, vals, params, e)
    outs = out if prim.multiple_results else [out]
    res = [_as_dtype(xp, o, v.aval.dtype) for o, v in zip(outs, eqn.outvars)]
    return res


def _as_dtype(xp, o, dtype):
    if isinstance(o, xp.ndarray) and o.dtype == dtype:
        return o
    return xp.asarray(o).astype(dtype, copy=False)
