"""Convolutions at GEMM speed (issue 27 item 6): per shape, `conv_general_dilated`'s forward,
input gradient and kernel gradient in funcgrad (numpy backend and native tier, jitted), JAX
(jit) and PyTorch, beside `np.matmul` (sgemm) on the plan's equivalent GEMM shapes, in one
process per thread setting:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. \\
        /work/benchvenv/bin/python benchmarks/bench_conv.py [--threads 1|all|both] \\
        [--repeat 9] [--only cnn1 cnn2 ...]

Shapes: `cnn1`, `cnn2` the two convolutions of the small CNN step (programs_small.py: batch 256,
8x8x1 -> 16 -> pool -> 4x4x16 -> 32, 3x3 SAME, NHWC); `res3`, `res3s2`, `res1` ResNet-like
NHWC layers (3x3 stride 1, 3x3 stride 2, 1x1 bottleneck); `res3nchw` the first in NCHW/OIHW;
`stem` a 7x7 stride-2 first layer on 3 channels (NCHW). Each pass is one jitted function
holding one convolution (the gradient programs as funcgrad's and JAX's transposes make them:
the input gradient convolves the cotangent with the flipped kernel, the kernel gradient the
input with the cotangent). Rows: the best and the median ms of interleaved rounds (each
round times enough calls for 2 ms) and the GFLOP/s of the best (2 * output elements * window
* input features per group; for an input gradient of a strided convolution, whose
cotangent is dilated, the products of its phases, without the dilation's zeros); ratios are
of the best times, the steadiest statistic on a
shared machine. "sgemm" is np.matmul of the plan's (m, k) @ (k, n) per group and
phase (`lax/conv_plan.py`) into a preallocated output, timed in the same rounds; "native / sgemm"
is the native tier's GFLOP/s over sgemm's (target >= 0.5).
`--threads 1` re-executes with OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1, NPROC=1 and XLA's
single-thread flags set before any import, and torch.set_num_threads(1); `all` leaves every
library its defaults. JAX and PyTorch are optional (columns "-").
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE]
from bench_native_programs import ONE_THREAD, funcgrad_jit, have, uptime  # noqa: E402

# name: (layout, lhs (N, H, W, C), kernel (KH, KW, C, O), strides, padding)
SHAPES = {
    "cnn1": ("NHWC", (256, 8, 8, 1), (3, 3, 1, 16), (1, 1), "SAME"),
    "cnn2": ("NHWC", (256, 4, 4, 16), (3, 3, 16, 32), (1, 1), "SAME"),
    "res3": ("NHWC", (8, 28, 28, 128), (3, 3, 128, 128), (1, 1), "SAME"),
    "res3s2": ("NHWC", (8, 56, 56, 64), (3, 3, 64, 128), (2, 2), "SAME"),
    "res1": ("NHWC", (8, 28, 28, 128), (1, 1, 128, 512), (1, 1), "VALID"),
    "res3nchw": ("NCHW", (8, 28, 28, 128), (3, 3, 128, 128), (1, 1), "SAME"),
    "stem": ("NCHW", (8, 224, 224, 3), (7, 7, 3, 64), (2, 2), "SAME"),
}
PASSES = ("fwd", "dx", "dw")
DN = {"NHWC": ("NHWC", "HWIO", "NHWC"), "NCHW": ("NCHW", "OIHW", "NCHW")}


def operands(name):
    """(x, w, cotangent) in the shape's layout, float32."""
    layout, xs, ks, strides, padding = SHAPES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ks) / np.sqrt(np.prod(ks[:3]))).astype(np.float32)
    out_hw = [-(-n // s) if padding == "SAME" else (n - k) // s + 1
              for n, k, s in zip(xs[1:3], ks[:2], strides)]
    ct = rng.standard_normal((xs[0], *out_hw, ks[3])).astype(np.float32)
    if layout == "NCHW":
        x, w, ct = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), ct.transpose(0, 3, 1, 2)
    return [np.ascontiguousarray(a) for a in (x, w, ct)]


def passes(lax, vjp, name):
    """pass -> (function, argument indices into (x, w, ct)) for a library's lax and vjp."""
    layout, _, _, strides, padding = SHAPES[name]

    def conv(x, w):
        return lax.conv_general_dilated(x, w, strides, padding, dimension_numbers=DN[layout])
    return {"fwd": (conv, (0, 1)),
            "dx": (lambda x, w, ct: vjp(lambda v: conv(v, w), x)[1](ct)[0], (0, 1, 2)),
            "dw": (lambda x, w, ct: vjp(lambda v: conv(x, v), w)[1](ct)[0], (0, 1, 2))}


def gemm_shapes(name, which):
    """(groups, m, k, n) of each GEMM of the plan of the pass's convolution (one per phase
    of an input dilation)."""
    import funcgrad as fg
    from funcgrad.lax import conv_plan
    ops = operands(name)
    fn, at = passes(fg.lax, fg.vjp, name)[which]
    closed = fg.make_jaxpr(fn)(*[ops[i] for i in at])
    eqn = [e for e in closed.jaxpr.eqns if e.prim.name == "conv_general_dilated"][-1]
    (la, ra), out = (v.aval for v in eqn.invars), eqn.outvars[0].aval
    return conv_plan.plan_of(la.shape, ra.shape, ra.dtype, out.shape, out.dtype,
                             **eqn.params).gemms()


def torch_passes(name):
    import torch
    import torch.nn.functional as F
    layout, _, ks, strides, padding = SHAPES[name]
    pad = [(k - 1) // 2 for k in ks[:2]] if padding == "SAME" else [0, 0]
    x, w, ct = (torch.from_numpy(a) for a in operands(name))
    if layout == "NHWC":  # the same memory, as PyTorch's channels_last tensors
        x, ct = (t.permute(0, 3, 1, 2) for t in (x, ct))
        w = w.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
    size = list(x.shape)
    return {"fwd": lambda: F.conv2d(x, w, stride=strides, padding=pad),
            "dx": lambda: torch.nn.grad.conv2d_input(size, w, ct, strides, pad),
            "dw": lambda: torch.nn.grad.conv2d_weight(x, list(w.shape), ct, strides, pad)}


def implementations(name, which):
    """label -> a function of no arguments running the pass once (synchronized)."""
    import funcgrad as fg
    ops = operands(name)
    fn, at = passes(fg.lax, fg.vjp, name)[which]
    args = [ops[i] for i in at]
    impls = {}
    for backend, label in (("numpy", "numpy backend"), ("native", "native")):
        f = funcgrad_jit(fn, backend)
        fg.block_until_ready(f(*args))
        impls[label] = lambda f=f: fg.block_until_ready(f(*args))
    if have("jax"):
        import jax
        jfn, _ = passes(jax.lax, jax.vjp, name)[which]
        jf = jax.jit(jfn)
        jargs = [jax.device_put(a) for a in args]
        jf(*jargs).block_until_ready()
        impls["JAX"] = lambda: jf(*jargs).block_until_ready()
    if have("torch"):
        impls["PyTorch"] = torch_passes(name)[which]
    gemms = gemm_shapes(name, which)
    rng = np.random.default_rng(0)
    mats = [(rng.standard_normal((g, m, k)).astype(np.float32),
             rng.standard_normal((g, k, n)).astype(np.float32),
             np.empty((g, m, n), np.float32)) for g, m, k, n in gemms]

    def sgemm():
        for a, b, c in mats:
            if len(a) > 1:
                np.matmul(a, b, out=c)
            else:
                np.matmul(a[0], b[0], out=c[0])
    impls["sgemm"] = sgemm
    return impls, sum(2 * g * m * k * n for g, m, k, n in gemms), gemms


def _time(fn, min_s=2e-3):
    """Seconds per call: enough calls to last `min_s`."""
    calls, t = 0, 0.0
    t0 = time.perf_counter()
    while t < min_s:
        fn()
        calls += 1
        t = time.perf_counter() - t0
    return t / calls


def child(args):
    if args.threads == "1" and have("torch"):
        import torch
        torch.set_num_threads(1)
    rows = []
    for name in args.only:
        for which in PASSES:
            impls, flops, gemm = implementations(name, which)
            times = {k: [] for k in impls}
            for _ in range(args.repeat):
                for k, fn in impls.items():
                    times[k].append(_time(fn) * 1e3)
            rows.append({"shape": name, "pass": which, "gemm": gemm, "flops": flops,
                         "ms": {k: [float(np.min(v)), float(np.median(v))]
                                for k, v in times.items()}})
            print(json.dumps(rows[-1]), flush=True)


COLUMNS = ("sgemm", "numpy backend", "native", "JAX", "PyTorch")


def table(rows, threads):
    print(f"\nthreads: {threads}; {uptime()}; best ms / median ms, and GFLOP/s of the best\n")
    print("| shape | pass | gemms (g x m x k x n) | " + " | ".join(COLUMNS)
          + " | native / sgemm | native / JAX | target |")
    print("| --- | --- | --- |" + " ---: |" * (len(COLUMNS) + 2) + " --- |")
    for r in rows:
        ms = r["ms"]

        def cell(k, ms=ms, flops=r["flops"]):
            if k not in ms:
                return "-"
            best, med = ms[k]
            return f"{best:.3f} / {med:.3f} {flops / best * 1e-6:.1f}"
        ratio = ms["sgemm"][0] / ms["native"][0]
        jax = f"{ms['native'][0] / ms['JAX'][0]:.2f}" if "JAX" in ms else "-"
        shapes = {tuple(s) for s in r["gemm"]}
        gemms = "; ".join(f"{g} x {m} x {k} x {n}" for g, m, k, n in sorted(shapes))
        if len(r["gemm"]) > 1:
            gemms = f"{len(r['gemm'])} phases: {gemms}"
        print(f"| {r['shape']} | {r['pass']} | {gemms} | "
              + " | ".join(cell(c) for c in COLUMNS)
              + f" | {ratio:.2f} | {jax} | {'met' if ratio >= 0.5 else '**not met**'} |",
              flush=True)


def parent(args):
    settings = ("1", "all") if args.threads == "both" else (args.threads,)
    for threads in settings:
        env = dict(os.environ)
        for k in ONE_THREAD:
            env.pop(k, None)
        if threads == "1":
            env.update(ONE_THREAD)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--threads", threads,
               "--repeat", str(args.repeat), "--only", *args.only]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(proc.stderr)
        rows = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
        table(rows, threads)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", choices=("1", "all", "both"), default="both")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--only", nargs="+", choices=tuple(SHAPES), default=list(SHAPES))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    (child if args.child else parent)(args)


if __name__ == "__main__":
    main()
