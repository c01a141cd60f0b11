"""funcgrad's prepared GPU validation: correctness, bandwidth, reductions, overheads, MLP step.

    python tools/gpu/validate.py --dry-run                 # CI: render + compile all for sm_90
    PYTHONUNBUFFERED=1 timeout 480 python tools/gpu/validate.py --out OUT --budget 400

On a GPU (sections are time-guarded; each appends to OUT/results.json; a failing section is
recorded and the next one runs):
  env          device, SMs, L2, arch, driver/runtime/NVRTC/CuPy/numpy/JAX versions
  correctness  every canonical kernel (tests/cuda_canonical.py; planned for this GPU, and
               for small devices so split reductions run too) on fresh random inputs,
               outputs poisoned with NaN, vs funcgrad's eager (numpy) results; a
               64-bit-index kernel over 3 x 2^30 elements (12 GiB) checked on 10^6 sampled
               indices; the jitted MLP training step on backend="cuda" vs backend="cpu"
  bandwidth    fused tanh(a * b + c) over 2^28 float32 (4 GiB moved per call) vs
               device-to-device copy, CuPy unfused, ElementwiseKernel, cupy.fuse, jax.jit
  reductions   sum(tanh(a * b), -1) for 16384x16384, 2^24x16, 64x2^22 vs CuPy and cupy.fuse
               (and jax.jit)
  overheads    NVRTC cold compile, compile-cache hit, launch latency, jit dispatch
  mlp          one jitted 784-512-512-10 SGD step, batch 1024: funcgrad cuda vs jax.jit
Timing: CUDA events on the current stream, median of 30 after 3 warm-ups.
Prints a table and writes OUT/results.json. Never changes clocks or resets the device.
"""

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # before jax is imported

import numpy as np  # noqa: E402

_REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, _REPO)
sys.path.insert(1, os.path.join(_REPO, "tests"))  # the canonical kernels are test cases

import cuda_canonical as canonical  # noqa: E402

import funcgrad as fg  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402
from funcgrad.backends.cuda import compile as cc  # noqa: E402
from funcgrad.backends.cuda import renderer  # noqa: E402
from funcgrad.backends.cuda.plan import H200, plan_kernel  # noqa: E402
from funcgrad.compiler.fusion import fuse  # noqa: E402
from funcgrad.compiler.pipeline import optimize  # noqa: E402

GIB = 2 ** 30
EW_N = 2 ** 28
RED_SHAPES = [(16384, 16384), (2 ** 24, 16), (64, 2 ** 22)]


class Report:
    def __init__(self, out, budget):
        self.out, self.deadline, self.rows = out, time.time() + budget, []
        self.data = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "sections": {}}

    def section(self, name, fn, *args):
        if time.time() > self.deadline:
            self.data["sections"][name] = {"skipped": "time budget spent"}
            print(f"[{name}] skipped: time budget spent", flush=True)
            return None
        t0 = time.time()
        print(f"[{name}] ...", flush=True)
        try:
            res = fn(self, *args)
            self.data["sections"][name] = {"seconds": round(time.time() - t0, 2), **(res or {})}
        except Exception as e:
            import traceback
            self.data["sections"][name] = {"error": f"{type(e).__name__}: {e}",
                                           "traceback": traceback.format_exc()[-3000:]}
            print(f"[{name}] FAILED: {type(e).__name__}: {e}", flush=True)
        self.save()
        return self.data["sections"][name]

    def row(self, section, what, value, note=""):
        self.rows.append((section, what, value, note))
        print(f"  {what:<46} {value:>14} {note}", flush=True)

    def save(self):
        if self.out:
            os.makedirs(self.out, exist_ok=True)
            with open(os.path.join(self.out, "results.json"), "w") as f:
                json.dump(self.data, f, indent=1, default=str)

    def table(self):
        print("\n| section | measurement | value | note |\n|---|---|---|---|")
        for s, w, v, n in self.rows:
            print(f"| {s} | {w} | {v} | {n} |")


# --- kernels for the measurements (also compiled by --dry-run) ------------------------------

def _spec_of(fn, *shapes):
    closed = optimize(fg.make_jaxpr(fn)(*[np.zeros(s, np.float32) for s in shapes]))
    (node,) = fuse(closed).kernels
    return node.spec


def fused_spec():
    return _spec_of(lambda a, b, c: fnp.tanh(a * b + c), (EW_N,), (EW_N,), (EW_N,))


def reduction_spec(shape):
    return _spec_of(lambda a, b: fnp.tanh(a * b).sum(-1), shape, shape)


def all_plans(device):
    rng = np.random.default_rng(0)
    plans = [case.build(rng, dev)[0] for case in canonical.CASES
             for dev in {device, case.device}]
    plans.append(plan_kernel(fused_spec(), device))
    plans += [plan_kernel(reduction_spec(s), device) for s in RED_SHAPES]
    return list({p.name: p for p in plans}.values())


def dry_run(out):
    """Render and compile every kernel this script would run, for sm_90."""
    plans = all_plans(H200)
    compilers = cc.available_compilers()
    if not compilers:
        print(f"dry run: no CUDA compiler ({cc.nvrtc_problem()}; no nvcc)")
        return 1
    t0, worst = time.time(), {}
    for p in plans:
        cubin = cc.compile_source(renderer.render(p), 90, compilers[0], verbose=True,
                                  name=p.name)
        for name in p.kernel_names:
            r = cubin.resources()[name]
            worst[name] = r
            if r["spill_stores"] or r["spill_loads"]:
                print(f"dry run: {name} spills registers: {r}")
                return 1
    regs = max(r["registers"] for r in worst.values())
    print(f"dry run: {len(plans)} modules ({len(worst)} kernels) rendered and compiled for "
          f"sm_90 with {compilers[0]} in {time.time() - t0:.1f} s; no spills; at most "
          f"{regs} registers")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "dry_run.json"), "w") as f:
            json.dump({"kernels": worst, "compiler": compilers[0]}, f, indent=1)
    return 0


# --- GPU sections --------------------------------------------------------------------------

def timed(cp, fn, reps=30, warm=3):
    """Median milliseconds of `fn()` on the current stream (CUDA events)."""
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def env_section(rep, cp, rt):
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    info = rt.device_info()
    d = {"device": name, "sms": props["multiProcessorCount"], "l2_bytes": props["l2CacheSize"],
         "arch": info.arch, "memory_gib": round(props["totalGlobalMem"] / GIB, 1),
         "driver": cp.cuda.runtime.driverGetVersion(),
         "runtime": cp.cuda.runtime.runtimeGetVersion(), "nvrtc": cc.nvrtc_version(),
         "cupy": cp.__version__, "numpy": np.__version__, "python": platform.python_version()}
    try:
        import jax
        d["jax"] = jax.__version__
    except Exception as e:
        d["jax"] = f"absent ({type(e).__name__})"
    for k, v in d.items():
        rep.row("env", k, str(v))
    return d


def _device_view(x):
    """`x` as CuPy can hold it: a bfloat16 array (which CuPy lacks) as its 16 bits, the
    layout the kernels' `fg_bf16` pointers read."""
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.num >= 256 else x


def correctness_section(rep, cp, rt):
    rng = np.random.default_rng(int(time.time()))
    device, failures, checked = rt.device_info(), [], 0
    for case in canonical.CASES:
        for dev in dict.fromkeys([device, case.device]):
            plan, inputs, expected = case.build(rng, dev)
            (handle,) = rt.prepare([plan])
            ins = [cp.asarray(_device_view(x)) for x in inputs]
            outs = [cp.full(o.shape, np.nan, o.dtype) if np.dtype(o.dtype).kind == "f"
                    else cp.full(o.shape, 0x5A, _device_view(np.empty(0, o.dtype)).dtype)
                    for o in plan.spec.outputs]
            rt.launch(handle, ins, outs)
            for g, w in zip(outs, expected):
                checked += 1
                if not canonical.tolerance_ok(g.get().view(w.dtype), w, case.rtol):
                    failures.append(f"{case.name} ({plan.strategy}, splits {plan.splits})")
    rep.row("correctness", "canonical kernels checked", checked,
            "all match" if not failures else f"FAIL: {failures}")
    res = {"checked": checked, "failures": failures}
    res.update(int64_check(rep, cp, rt))
    res.update(mlp_check(rep, cp))
    return res


def int64_check(rep, cp, rt):
    free, _ = cp.cuda.runtime.memGetInfo()
    shape = (3, 2 ** 30)
    if free < 14 * GIB:
        rep.row("correctness", "int64 indexing (3 x 2^30)", "skipped", "less than 14 GiB free")
        return {"int64": "skipped"}
    spec = _spec_of(lambda a, b: a * b + 1.0, (shape[1],), (3, 1))
    plan = plan_kernel(spec, rt.device_info())
    (handle,) = rt.prepare([plan])
    a = cp.random.standard_normal(shape[1], dtype=cp.float32)
    b = cp.asarray(np.array([[1.5], [-2.0], [0.25]], np.float32))
    out = cp.full(shape, cp.nan, cp.float32)
    rt.launch(handle, [a, b], [out])
    idx = np.random.default_rng(0).integers(0, 3 * 2 ** 30, 10 ** 6)
    r, c = np.unravel_index(idx, shape)
    got = out.ravel()[cp.asarray(idx)].get()
    want = a[cp.asarray(c)].get() * b.get()[r, 0] + 1.0
    ok = bool(np.allclose(got, want, rtol=1e-6)) and bool(cp.isfinite(out).all())
    del out
    cp.get_default_memory_pool().free_all_blocks()
    rep.row("correctness", f"int64 indexing ({plan.index})", "ok" if ok else "FAIL",
            "3 x 2^30 output, 10^6 samples")
    return {"int64": ok}


def mlp_step():
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = fg.nn.relu(h @ w + b)
        w, b = params[-1]
        return -(fg.nn.log_softmax(h @ w + b) * y).sum(1).mean()

    def step(params, x, y):
        val, g = fg.value_and_grad(loss)(params, x, y)
        return fg.tree_util.tree_map(lambda p, gp: p - 0.01 * gp, params, g), val
    return step


def mlp_data(batch=1024):
    rng = np.random.default_rng(0)
    sizes = (784, 512, 512, 10)
    params = [(rng.normal(size=(a, b)).astype(np.float32) * np.float32(np.sqrt(2 / a)),
               np.zeros(b, np.float32)) for a, b in zip(sizes[:-1], sizes[1:])]
    x = rng.normal(size=(batch, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    return params, x, y


def mlp_check(rep, cp):
    params, x, y = mlp_data(256)
    step = mlp_step()
    pc, lc = fg.jit(step)(params, x, y)
    pg, lg = fg.jit(step, backend="cuda")(fg.device_put(params, "cuda"),
                                          fg.device_put(x, "cuda"), fg.device_put(y, "cuda"))
    err = max(float(np.abs(np.asarray(a) - np.asarray(b)).max())
              for a, b in zip(fg.tree_util.tree_leaves(pg), fg.tree_util.tree_leaves(pc)))
    ok = err < 1e-4 and abs(float(lg) - float(lc)) < 1e-4
    rep.row("correctness", "jitted MLP step cuda vs cpu", f"{err:.1e}", "ok" if ok else "FAIL")
    return {"mlp_max_abs_diff": err, "mlp_ok": ok}


def _jax():
    try:
        import jax
        import jax.numpy as jnp
        if not any(d.platform == "gpu" for d in jax.devices()):
            return None, None
        return jax, jnp
    except Exception:
        return None, None


def _jax_time(jax, fn, args, n=20, reps=5):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            out = fn(*args)
        jax.block_until_ready(out)
        times.append((time.perf_counter() - t0) / n * 1e3)
    return statistics.median(times)


def bandwidth_section(rep, cp, rt):
    n, nbytes = EW_N, EW_N * 4
    a, b, c = (cp.random.standard_normal(n, dtype=cp.float32) for _ in range(3))
    out = cp.empty(n, cp.float32)
    res = {}

    def row(name, ms, moved):
        tbs = moved / (ms * 1e-3) / 1e12
        res[name] = {"ms": round(ms, 4), "TB/s": round(tbs, 3)}
        rep.row("bandwidth", name, f"{tbs:.2f} TB/s", f"{ms:.3f} ms")
    row("copy (memcpy D2D)", timed(cp, lambda: cp.cuda.runtime.memcpyAsync(
        out.data.ptr, a.data.ptr, nbytes, 3, cp.cuda.get_current_stream().ptr)), 2 * nbytes)
    row("copy (cupy.copyto kernel)", timed(cp, lambda: cp.copyto(out, a)), 2 * nbytes)
    plan = plan_kernel(fused_spec(), rt.device_info())
    (handle,) = rt.prepare([plan])
    row(f"funcgrad fused ({plan.index}, vec {plan.vec})",
        timed(cp, lambda: rt.launch(handle, [a, b, c], [out])), 4 * nbytes)
    for vec in (1, 4):
        other = dataclasses.replace(plan, vec=vec, name=f"{plan.name}_v{vec}")
        (h2,) = rt.prepare([other])
        row(f"funcgrad fused, vec {vec} forced", timed(cp, lambda h2=h2: rt.launch(
            h2, [a, b, c], [out])), 4 * nbytes)
    jf = fg.jit(lambda x, y, z: fnp.tanh(x * y + z), backend="cuda")
    fa, fb, fc = (fg.Array(v) for v in (a, b, c))
    row("funcgrad jit (incl. dispatch + alloc)", timed(cp, lambda: jf(fa, fb, fc)), 4 * nbytes)
    row("cupy unfused tanh(a*b+c)", timed(cp, lambda: cp.tanh(a * b + c)), 8 * nbytes)
    ek = cp.ElementwiseKernel("float32 a, float32 b, float32 c", "float32 y",
                              "y = tanhf(a * b + c)", "fg_validate_ew")
    row("cupy ElementwiseKernel", timed(cp, lambda: ek(a, b, c, out)), 4 * nbytes)
    fused = cp.fuse()(lambda x, y, z: cp.tanh(x * y + z))
    row("cupy.fuse", timed(cp, lambda: fused(a, b, c)), 4 * nbytes)
    jax, jnp = _jax()
    if jax is not None:
        ja, jb, jc = (jnp.from_dlpack(v) for v in (a, b, c))
        f = jax.jit(lambda x, y, z: jnp.tanh(x * y + z))
        row("jax.jit", _jax_time(jax, f, (ja, jb, jc)), 4 * nbytes)
    return res


def reductions_section(rep, cp, rt):
    res = {}
    for shape in RED_SHAPES:
        res[f"{shape[0]}x{shape[1]}"] = _reduction(rep, cp, rt, shape)
        cp.get_default_memory_pool().free_all_blocks()
    return res


def _reduction(rep, cp, rt, shape):
    a = cp.random.standard_normal(shape, dtype=cp.float32)
    b = cp.random.standard_normal(shape, dtype=cp.float32)
    out = cp.empty(shape[0], cp.float32)
    moved = 2 * a.nbytes
    plan = plan_kernel(reduction_spec(shape), rt.device_info())
    (handle,) = rt.prepare([plan])
    label = f"{shape[0]}x{shape[1]}"
    rt.launch(handle, [a, b], [out])
    want = np.tanh(a[:64].get().astype(np.float64) * b[:64].get()).sum(-1)
    ok = bool(np.allclose(out[:64].get(), want, rtol=1e-4, atol=1e-3))
    entry = {"strategy": plan.strategy, "splits": plan.splits, "ok": ok}
    fused = cp.fuse()(lambda x, y: cp.sum(cp.tanh(x * y), axis=-1))
    runs = [("funcgrad", lambda: rt.launch(handle, [a, b], [out])),
            ("cupy unfused", lambda: cp.tanh(a * b).sum(-1)),
            ("cupy.fuse", lambda: fused(a, b))]
    jax, jnp = _jax()
    for name, fn in runs:
        ms = timed(cp, fn, reps=10)
        entry[name] = {"ms": round(ms, 3), "TB/s": round(moved / (ms * 1e-3) / 1e12, 3)}
        note = f"{plan.strategy}/{plan.splits} {'ok' if ok else 'WRONG'}" if (
            name == "funcgrad") else ""
        rep.row("reductions", f"{label} {name}", f"{entry[name]['TB/s']:.2f} TB/s",
                f"{ms:.3f} ms {note}")
    if jax is not None:
        ja, jb = jnp.from_dlpack(a), jnp.from_dlpack(b)
        ms = _jax_time(jax, jax.jit(lambda x, y: jnp.tanh(x * y).sum(-1)), (ja, jb), n=5)
        entry["jax"] = {"ms": round(ms, 3), "TB/s": round(moved / (ms * 1e-3) / 1e12, 3)}
        rep.row("reductions", f"{label} jax.jit", f"{entry['jax']['TB/s']:.2f} TB/s",
                f"{ms:.3f} ms")
    return entry


def overheads_section(rep, cp, rt):
    res = {}
    spec = _spec_of(lambda x: x * 2.0 + 1.0, (1024,))
    plan = plan_kernel(spec, rt.device_info())
    src = renderer.render(plan).replace("2.0f", f"{1 + time.time() % 1:.6f}f")  # fresh text
    t0 = time.perf_counter()
    cc.compile_source(src, rt.device_info().arch, name="cold")
    res["nvrtc_cold_ms"] = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    cc.clear_memory_cache()
    cc.compile_source(src, rt.device_info().arch, name="cold")
    res["disk_cache_hit_ms"] = (time.perf_counter() - t0) * 1e3
    (handle,) = rt.prepare([plan])
    x, out = cp.ones(1024, cp.float32), cp.empty(1024, cp.float32)
    rt.launch(handle, [x], [out])
    cp.cuda.get_current_stream().synchronize()
    t0 = time.perf_counter()
    for _ in range(1000):
        rt.launch(handle, [x], [out])
    cp.cuda.get_current_stream().synchronize()
    res["launch_us"] = (time.perf_counter() - t0) * 1e3
    jf = fg.jit(lambda v: v * 2.0 + 1.0, backend="cuda")
    fx = fg.Array(x)
    jf(fx)
    cp.cuda.get_current_stream().synchronize()
    t0 = time.perf_counter()
    for _ in range(1000):
        jf(fx)
    cp.cuda.get_current_stream().synchronize()
    res["jit_call_us"] = (time.perf_counter() - t0) * 1e3
    ek = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * 2.0f + 1.0f", "fg_val_small")
    ek(x, out)
    t0 = time.perf_counter()
    for _ in range(1000):
        ek(x, out)
    cp.cuda.get_current_stream().synchronize()
    res["cupy_elementwise_us"] = (time.perf_counter() - t0) * 1e3
    for k, v in res.items():
        rep.row("overheads", k, f"{v:.1f}")
    return res


def mlp_section(rep, cp, rt):
    params, x, y = mlp_data(1024)
    step = mlp_step()
    dp, dx, dy = (fg.device_put(v, "cuda") for v in (params, x, y))
    jf = fg.jit(step, backend="cuda")
    t0 = time.perf_counter()
    fg.block_until_ready(jf(dp, dx, dy))
    res = {"first_call_s": round(time.perf_counter() - t0, 2)}
    res["funcgrad_ms"] = timed(cp, lambda: jf(dp, dx, dy), reps=20)
    rep.row("mlp", "funcgrad cuda step (ms)", f"{res['funcgrad_ms']:.3f}",
            f"first call {res['first_call_s']} s")
    jax, jnp = _jax()
    if jax is not None:
        def jloss(params, x, y):
            h = x
            for w, b in params[:-1]:
                h = jax.nn.relu(h @ w + b)
            w, b = params[-1]
            return -(jax.nn.log_softmax(h @ w + b) * y).sum(1).mean()

        @jax.jit
        def jstep(params, x, y):
            val, g = jax.value_and_grad(jloss)(params, x, y)
            return jax.tree_util.tree_map(lambda p, gp: p - 0.01 * gp, params, g), val
        jp = jax.tree_util.tree_map(jnp.asarray, params)
        res["jax_ms"] = _jax_time(jax, jstep, (jp, jnp.asarray(x), jnp.asarray(y)))
        rep.row("mlp", "jax.jit step (ms)", f"{res['jax_ms']:.3f}")
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="render + compile only (CI)")
    ap.add_argument("--out", default=None, help="folder for results.json")
    ap.add_argument("--budget", type=float, default=400, help="seconds for all sections")
    ap.add_argument("--cache-dir", default=None, help="compiled-kernel cache (config option)")
    args = ap.parse_args(argv)
    if args.cache_dir:
        fg.config.update("cuda_cache_dir", args.cache_dir)
    if args.dry_run:
        return dry_run(args.out)
    import cupy as cp
    if not cp.is_available():
        print("no GPU: run with --dry-run on machines without one")
        return 1
    from funcgrad.backends.cuda.runtime import CupyRuntime
    rt = CupyRuntime()
    rep = Report(args.out, args.budget)
    rep.section("env", env_section, cp, rt)
    for name, fn in (("correctness", correctness_section), ("bandwidth", bandwidth_section),
                     ("reductions", reductions_section), ("overheads", overheads_section),
                     ("mlp", mlp_section)):
        rep.section(name, fn, cp, rt)
        cp.get_default_memory_pool().free_all_blocks()
    rep.table()
    rep.save()
    bad = [k for k, v in rep.data["sections"].items() if "error" in v or v.get("failures")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
