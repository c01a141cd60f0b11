"""The issue-12 speed targets: whole programs in funcgrad (numpy backend and native C tier)
side by side with JAX (jit) and PyTorch, in one process per thread setting, as ratios.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. \\
        /work/bench-venv/bin/python benchmarks/bench_native_programs.py \\
        [--threads 1|all|both] [--repeat 15] [--only gelu adam ...] [--profile] [--no-first]
        [--alone] [--gomp-spincount N]

Programs (each written once, over a namespace `L` of numpy / lax / transforms, so funcgrad and
JAX run the same math): `gelu` gelu(x*a+b) on 4M f32; `adam` one Adam update of 670k f32
params (donated; PyTorch: torch.optim.Adam fused=True and foreach=True); `mlp128`/`mlp1024`
the 784-512-512-10 MLP Adam step (bench_jit_mlp.py's); `gpt` a 2-layer GPT-style training
step, d_model 128, 4 heads, seq 64, batch 16, AdamW (bench_char_transformer.py's model);
`rnn` value_and_grad of an RNN through `lax.scan` (100 steps, hidden 64, batch 32); `ilqr` a
64-step `fori_loop` of Gauss-Newton steps, each a 4x4 `jacfwd` and a 4x4 `linalg.solve`;
`gp` the gradient of a GP negative log-likelihood (RBF kernel, cholesky + triangular solve,
100 points); `embrnn` value_and_grad of an RNN over token embeddings (a gather in the scan
body, a scatter-add in the reverse scan; 100 steps, vocabulary 64, batch 32) and `pool` the
gradient of a 3x3 stride-2 SAME max pool on f32[32,16,16,32] (overlapping windows:
select_and_scatter_add), both without an issue target; `gp7 logjoint advivmap maml mnist cnn`
are issue 27's programs of many small operations (programs_small.py), each with a target of
<= 1.0x JAX. Rows: median ms (p25-p75) of interleaved
steady-state steps, native / JAX and numpy backend / JAX, GB/s and share of the copy bandwidth
(np.copyto of 256 MiB) where the program is memory-bound, "vs JAX (rel)" (the native result
against JAX's, relative to its largest value; the loss for the training steps), and the issue's
target with met / not met.

`--threads 1` re-executes this script with OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1,
XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" and NPROC=1 (XLA's
CPU thread pool; the flags alone leave JAX on two threads) set before any import, and
torch.set_num_threads(1); `all` leaves every library its defaults. PyTorch's libgomp threads
spin on a core for milliseconds after each of its parallel loops, so in the interleaved
rounds the implementation after it runs beside them. `--gomp-spincount 1000` sets
GOMP_SPINCOUNT on all cores to show that; it also slows PyTorch's foreach optimizers
(RESULTS.md, "Prefetching"), so it is not the default. The
"CPU / wall" column (process CPU time over wall time, per implementation in column order)
shows the threads each one actually used. First calls run in fresh processes sharing one
temporary native cache: the numpy backend's first call (trace + compile + run), the native
first call with an empty cache (the gcc build), and a second process's native first call
from the disk cache. Then the time to native, in two more fresh processes (an empty cache, then
the disk cache) with `config.native="background"`: from the builder's start to the first step
(numpy tier), to every native build done and to 20 steps, the loop stepping meanwhile
(`--only-time-to-native` prints this table alone). `--alone` times each implementation in a
fresh process of its own instead (no other library imported, so no other library's threads
spinning beside it): median ms and process CPU / wall. `--profile` prints `funcgrad.profile`
tables of the native tier. JAX and PyTorch are optional (columns "-").
"""

import argparse
import copy
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "examples")]
from bench_char_transformer import ONE_THREAD  # noqa: E402
from programs_small import SPECS as SMALL  # noqa: E402

PROGRAMS = ("gelu", "adam", "mlp128", "mlp1024", "gpt", "rnn", "ilqr", "gp", "embrnn", "pool",
            "mpc", "advi", *SMALL)
# program -> (max native/JAX, max native/PyTorch, min share of copy bandwidth), from issue 12
TARGETS = {"gelu": (1.0, None, 0.7), "adam": (1.0, 1.0, 0.7), "mlp128": (0.8, None, None),
           "mlp1024": (1.0, None, None), "gpt": (1.0, None, None), "rnn": (1.5, None, None),
           "ilqr": (1.5, None, None), "gp": (1.5, None, None),
           "embrnn": (None, None, None), "pool": (None, None, None),  # no issue target
           "mpc": (None, None, None), "advi": (None, None, None),
           **{name: (1.0, None, None) for name in SMALL}}  # issue 27: each <= 1.0x JAX
# XLA's CPU client sizes its thread pool from NPROC: without it, XLA_FLAGS alone still leaves
# JAX 0.10 on two threads (process CPU time 1.85x wall on gelu).
ONE_THREAD = dict(ONE_THREAD, NPROC="1")
NATIVE, NUMPY, JAX = "funcgrad native", "funcgrad numpy backend", "JAX jit"


def have(name):
    return importlib.util.find_spec(name) is not None


def namespace(lib):
    """numpy, lax and transforms of `lib` ("funcgrad" or "jax") under one set of names."""
    if lib == "jax":
        import jax
        import jax.numpy as jnp
        import jax.scipy.linalg as sl
        from jax.scipy.special import logsumexp
        return SimpleNamespace(np=jnp, lax=jax.lax, value_and_grad=jax.value_and_grad,
                               grad=jax.grad, jacfwd=jax.jacfwd, sl=sl, random=jax.random,
                               vmap=jax.vmap, tree_map=jax.tree_util.tree_map,
                               logsumexp=logsumexp)
    import funcgrad as fg
    import funcgrad.numpy as fnp
    import funcgrad.scipy.linalg as sl
    from funcgrad.scipy.special import logsumexp
    return SimpleNamespace(np=fnp, lax=fg.lax, value_and_grad=fg.value_and_grad, grad=fg.grad,
                           jacfwd=fg.jacfwd, sl=sl, random=fg.random, vmap=fg.vmap,
                           tree_map=fg.tree_util.tree_map, logsumexp=logsumexp)


# --- runners: step() runs one synchronized step; the first n_state outputs feed back ------------

NATIVE_MODE = ["sync"]  # config.native of the "native" builders ("background": time to native)


def funcgrad_jit(fn, backend, donate=()):
    import funcgrad as fg
    if backend == "native":
        fg.config.update("native", NATIVE_MODE[0])
    return fg.jit(fn, backend="cpu" if backend == "native" else "numpy", donate_argnums=donate)


def runner(jitted, args, n_state=0, block=None):
    if block is None:
        import funcgrad as fg
        block = fg.block_until_ready
    args = list(args)

    def step():
        out = jitted(*args)
        if n_state:
            args[:n_state] = out[:n_state]
        block(out)
        step.last = out
    step.jitted, step.args = jitted, args
    return step


def jax_runner(fn, args, donate=(), n_state=0):
    import jax
    return runner(jax.jit(fn, donate_argnums=donate), [jax.device_put(a) for a in args],
                  n_state, jax.block_until_ready)


# --- the programs: spec(rng) -> (fn(L) -> math, args, donate, n_state, bytes moved) -----------

def gelu_spec():
    from bench_native import gelu
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 1024)).astype(np.float32)
    a, b = (rng.normal(size=1024).astype(np.float32) for _ in range(2))
    return lambda L: (lambda x, a, b: gelu(L.np, x, a, b)), [x, a, b], (), 0, 2 * x.nbytes


def adam_spec():
    from bench_native import SHAPES, adam
    rng = np.random.default_rng(1)
    p, g = ([rng.normal(size=s).astype(np.float32) for s in SHAPES] for _ in range(2))
    zeros = [np.zeros_like(x) for x in p]

    def make(L):
        def update(p, mu, nu, g):
            out = adam(L.np, L.np.sqrt, p, mu, nu, g)
            return tuple([o[k] for o in out] for k in range(3))
        return update
    return make, [p, zeros, [z.copy() for z in zeros], g], (0, 1, 2), 3, 7 * sum(
        x.nbytes for x in p)


def rnn_spec(steps=100, hidden=64, batch=32, features=32):
    rng = np.random.default_rng(4)
    xs = rng.normal(size=(steps, batch, features)).astype(np.float32)
    w = (rng.normal(size=(hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    u = (rng.normal(size=(features, hidden)) / np.sqrt(features)).astype(np.float32)
    b = np.zeros(hidden, np.float32)

    def make(L):
        def loss(params, xs):
            w, u, b = params
            cell = lambda h, x: (L.np.tanh(h @ w + x @ u + b),) * 2
            _, hs = L.lax.scan(cell, L.np.zeros((batch, hidden), xs.dtype), xs)
            return L.np.mean(hs * hs)
        return L.value_and_grad(loss)
    return make, [(w, u, b), xs], (), 0, None


def ilqr_spec(steps=64, n=4):
    rng = np.random.default_rng(5)
    a = (rng.normal(size=(n, n)) / np.sqrt(n)).astype(np.float32)
    c = (0.3 * rng.normal(size=n)).astype(np.float32)
    x0 = np.zeros(n, np.float32)

    def make(L):
        def solve(a, c, x0):
            residual = lambda x: L.np.tanh(a @ x) + 0.1 * x * x * x - c

            def body(i, x):  # one damped Gauss-Newton step
                j = L.jacfwd(residual)(x)
                lhs = j.T @ j + 1e-3 * L.np.eye(n, dtype=x.dtype)
                return x - L.np.linalg.solve(lhs, j.T @ residual(x))
            return L.lax.fori_loop(0, steps, body, x0)
        return solve
    return make, [a, c, x0], (), 0, None


def gp_spec(n=100):
    rng = np.random.default_rng(6)
    x = np.sort(rng.uniform(-3, 3, size=(n, 1)), axis=0).astype(np.float32)
    y = (np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=n)).astype(np.float32)
    theta = np.log(np.array([0.7, 1.0, 0.1], np.float32))  # log lengthscale, scale, noise

    def make(L):
        def nll(theta, x, y):
            ls, sf, sn = L.np.exp(theta[0]), L.np.exp(theta[1]), L.np.exp(theta[2])
            d2 = L.np.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
            k = sf * sf * L.np.exp(-0.5 * d2 / (ls * ls)) + sn * sn * L.np.eye(n, dtype=x.dtype)
            chol = L.sl.cholesky(k, lower=True)
            alpha = L.sl.solve_triangular(chol, y, lower=True)
            return 0.5 * alpha @ alpha + L.np.sum(L.np.log(L.np.diagonal(chol)))
        return L.value_and_grad(nll)
    return make, [theta, x, y], (), 0, None


def embrnn_spec(steps=100, vocab=64, emb=32, hidden=64, batch=32):
    """value_and_grad of an RNN over token embeddings: a gather (`emb[tokens]`) in the scan
    body and a scatter-add (its gradient) in the reverse one."""
    rng = np.random.default_rng(7)
    toks = rng.integers(0, vocab, size=(steps, batch)).astype(np.int32)
    e = (rng.normal(size=(vocab, emb)) * 0.3).astype(np.float32)
    w = (rng.normal(size=(hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    u = (rng.normal(size=(emb, hidden)) / np.sqrt(emb)).astype(np.float32)

    def make(L):
        def loss(params, toks):
            e, w, u = params
            cell = lambda h, t: (L.np.tanh(h @ w + e[t] @ u),) * 2
            _, hs = L.lax.scan(cell, L.np.zeros((batch, hidden), e.dtype), toks)
            return L.np.mean(hs * hs)
        return L.value_and_grad(loss)
    return make, [(e, w, u), toks], (), 0, None


def pool_spec(shape=(32, 16, 16, 32)):
    """The gradient of a 3x3 stride-2 SAME max pool (overlapping windows: a scatter)."""
    x = np.random.default_rng(8).normal(size=shape).astype(np.float32)

    def make(L):
        def loss(x):
            y = L.lax.reduce_window(x, -np.inf, L.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
            return L.np.sum(y * y)
        return L.value_and_grad(loss)
    return make, [x], (), 0, None


def mpc_spec(horizon=50, iters=20, n=4):
    """A receding-horizon controller's shape: for each of 50 steps an inner fori_loop of 20
    gradient steps on a small quadratic (nested loops)."""
    rng = np.random.default_rng(9)
    a = (np.eye(n) * 2 + 0.1 * rng.normal(size=(n, n))).astype(np.float32)
    b = rng.normal(size=n).astype(np.float32)
    x0 = np.zeros(n, np.float32)

    def make(L):
        def control(a, b, x0):
            inner = lambda j, u: u - 0.1 * (a.T @ (a @ u - b))
            outer = lambda i, x: L.lax.fori_loop(0, iters, inner, x) * 0.99 + 0.01 * b
            return L.lax.fori_loop(0, horizon, outer, x0)
        return control
    return make, [a, b, x0], (), 0, None


def advi_spec(steps=100, samples=10, dim=2):
    """ADVI on a 2-D Gaussian: each of 100 steps draws `samples` normals (threefry in the
    loop), takes the ELBO's gradient and an SGD step."""
    prec = np.array([[2.0, 0.6], [0.6, 1.0]], np.float32)
    params = (np.zeros(dim, np.float32), np.zeros(dim, np.float32))  # mean, log-scale
    key = np.array([0, 7], np.uint32)

    def make(L):
        def fit(params, key):
            def neg_elbo(p, eps):
                z = p[0] + L.np.exp(p[1]) * eps
                return 0.5 * L.np.mean(L.np.sum((z @ prec) * z, axis=-1)) - L.np.sum(p[1])

            def step(i, carry):
                p, k = carry
                k, sub = L.random.split(k)
                g = L.grad(neg_elbo)(p, L.random.normal(sub, (samples, dim)))
                return (p[0] - 0.05 * g[0], p[1] - 0.05 * g[1]), k
            return L.lax.fori_loop(0, steps, step, (params, key))[0]
        return fit
    return make, [params, key], (), 0, None


def plain_program(spec):
    """{implementation: builder() -> step} for a program written once over `L`."""
    make, args, donate, n_state, nbytes = spec()
    fresh = lambda: copy.deepcopy(args)
    out = {b: (lambda b=b: runner(funcgrad_jit(make(namespace("funcgrad")), b, donate),
                                  fresh(), n_state)) for b in ("numpy", "native")}
    if have("jax"):
        out["jax"] = lambda: jax_runner(make(namespace("jax")), fresh(), donate, n_state)
    return out, nbytes


def adam_torch(fused):
    import torch
    from bench_native import SHAPES
    rng = np.random.default_rng(1)
    p = [torch.nn.Parameter(torch.from_numpy(rng.normal(size=s).astype(np.float32)))
         for s in SHAPES]
    for t in p:
        t.grad = torch.from_numpy(rng.normal(size=t.shape).astype(np.float32))
    kind = {"fused": True} if fused else {"foreach": True}
    opt = torch.optim.Adam(p, lr=1e-3, **kind)
    return lambda: opt.step()


def mlp_program(n):
    import bench_jit_mlp as mlp
    params, (x, y) = mlp.init_params(), mlp.batch(n)

    def fg_build(backend):
        p, s = mlp.funcgrad_state(params)
        return runner(funcgrad_jit(mlp.train_step, backend, (0, 1)), [p, s, x, y], 2)
    out = {b: (lambda b=b: fg_build(b)) for b in ("numpy", "native")}
    if have("jax"):
        out["jax"] = lambda: _loss_step(mlp.JaxStep(params), x, y)
    if have("torch"):
        out["PyTorch Adam (foreach)"] = lambda: _loss_step(mlp.TorchStep(params), x, y)
    return out, None


def _loss_step(step_xy, x, y):
    def step():
        step.last = float(step_xy(x, y))
    return step


def gpt_program():
    import bench_char_transformer as bct
    import train_char_transformer as ct
    cfg = ct.Config(batch_size=16, context=64, width=128, heads=4, layers=2, steps=100)
    params, vocab, batches = bct.setup(cfg)
    x, y = batches[0]

    def fg_build(backend):
        import funcgrad.numpy as fnp
        from funcgrad.tree_util import tree_map
        if backend == "native":
            funcgrad_jit(None, backend)  # native="sync"
        model, opt = ct.GPT(vocab, cfg), ct.make_optimizer(cfg)
        train_step, _ = ct.make_functions(model, opt, vocab,
                                          "cpu" if backend == "native" else "numpy")
        p = tree_map(fnp.asarray, params)
        return runner(train_step, [p, opt.init(p), x, y], 2)
    out = {b: (lambda b=b: fg_build(b)) for b in ("numpy", "native")}
    if have("jax") and have("optax"):
        out["jax"] = lambda: _loss_step(bct.make_jax(cfg, params, vocab), x, y)
    if have("torch"):
        out["PyTorch AdamW (foreach)"] = lambda: _loss_step(
            bct.make_torch(cfg, params, vocab), x, y)
    return out, None


def builders(name):
    """({implementation: builder}, bytes the step must move or None) of program `name`."""
    if name == "gelu":
        out, nbytes = plain_program(gelu_spec)
        if have("torch"):
            out["PyTorch eager"] = lambda: _torch_gelu()
        return out, nbytes
    if name == "adam":
        out, nbytes = plain_program(adam_spec)
        if have("torch"):
            out["PyTorch Adam (fused)"] = lambda: adam_torch(True)
            out["PyTorch Adam (foreach)"] = lambda: adam_torch(False)
        return out, nbytes
    if name.startswith("mlp"):
        return mlp_program(int(name[3:]))
    if name == "gpt":
        return gpt_program()
    return plain_program({"rnn": rnn_spec, "ilqr": ilqr_spec, "gp": gp_spec,
                          "embrnn": embrnn_spec, "pool": pool_spec, "mpc": mpc_spec,
                          "advi": advi_spec, **SMALL}[name])


def _torch_gelu():
    import torch
    from bench_native import gelu
    _, (x, a, b), *_ = gelu_spec()
    tx, ta, tb = (torch.from_numpy(v) for v in (x, a, b))
    return lambda: gelu(torch, tx, ta, tb)


LABELS = {"numpy": NUMPY, "native": NATIVE, "jax": JAX}


# --- timing and the table ----------------------------------------------------------------------

def _cell(v):
    d = 3 if np.median(v) < 1 else 2  # sub-millisecond steps to the microsecond
    return f"{np.median(v):.{d}f} ({np.percentile(v, 25):.{d}f}-{np.percentile(v, 75):.{d}f})"


def _verdict(name, med, bw, nbytes):
    vs_jax, vs_torch, share = TARGETS[name]
    checks, ok = [], True
    if JAX in med and vs_jax:
        checks.append(f"<= {vs_jax}x JAX")
        ok &= med[NATIVE] <= vs_jax * med[JAX]
    torch_key = next((k for k in med if k.startswith("PyTorch")), None)
    if vs_torch and torch_key:
        checks.append(f"<= {vs_torch}x {torch_key}")
        ok &= med[NATIVE] <= vs_torch * med[torch_key]
    if share and nbytes:
        checks.append(f">= {share:.0%} copy bw")
        ok &= nbytes / (med[NATIVE] * 1e-3) >= share * bw
    return ", ".join(checks) or "-", ("met" if ok else "**not met**") if checks else "-"


def time_program(name, repeat, bw, profile):
    from bench_native import interleaved
    built, nbytes = builders(name)
    fns = {LABELS.get(k, k): b() for k, b in built.items()}
    for fn in fns.values():  # warm-up: builds, first-call caches, allocator
        fn()
        fn()
    acc = dict.fromkeys(fns, (0.0, 0))
    t = interleaved({k: _cpu_timed(fn, acc, k) for k, fn in fns.items()}, repeat)
    med = {k: float(np.median(v)) for k, v in t.items()}
    par = {k: acc[k][0] / (v.sum() * 1e-3) for k, v in t.items()}
    faults = " / ".join(f"{acc[k][1] / repeat:.0f}" for k in t)
    ratio = lambda a, b: f"{med[a] / med[b]:.2f}" if a in med and b in med else "-"
    torch_keys = [k for k in t if k.startswith("PyTorch")]
    gbs = "-"
    if nbytes:
        rate = nbytes / (med[NATIVE] * 1e-3)
        gbs = f"{rate / 1e9:.1f} ({rate / bw:.0%})"
    target, met = _verdict(name, med, bw, nbytes)
    diff = _diff(fns.get(NATIVE), fns.get(JAX))
    torch_cell = f"{_cell(t[torch_keys[0]])} {torch_keys[0][8:]}" if torch_keys else "-"
    cores = " / ".join(f"{par[k]:.1f}" for k in t)
    print(f"| {name} | {_cell(t[NUMPY])} | {_cell(t[NATIVE])} | "
          f"{_cell(t[JAX]) if JAX in t else '-'} | {torch_cell} | {cores} | {faults} | "
          f"{ratio(NATIVE, JAX)} | "
          f"{ratio(NUMPY, JAX)} | {ratio(NATIVE, torch_keys[0]) if torch_keys else '-'} | "
          f"{gbs} | {diff} | {target} | {met} |", flush=True)
    for k in torch_keys[1:]:
        print(f"|  | | | | {_cell(t[k])} {k[8:]} | | | | | {ratio(NATIVE, k)} | | | | |",
              flush=True)
    if profile:
        import funcgrad as fg
        step = fns[NATIVE]
        prof = fg.profile(step.jitted, *step.args, repeat=profile)
        print(f"\nprofile of {name} (native tier, {profile} steps):\n{prof.table()}\n",
              flush=True)


def _diff(a, b):
    """Largest |native - JAX| / max|JAX| over the outputs of the last step (same math check);
    for the MLP and GPT training steps, of the losses after the same number of steps."""
    from funcgrad.tree_util import tree_leaves
    if not (hasattr(a, "last") and hasattr(b, "last")):
        return "-"
    rel = lambda x, y: np.abs(x - y).max() / (np.abs(y).max() + 1e-30)
    pairs = list(zip(tree_leaves(a.last), tree_leaves(b.last)))
    if len(tree_leaves(a.last)) != len(tree_leaves(b.last)):  # a training step: the losses
        pairs = [(tree_leaves(a.last)[-1], tree_leaves(b.last)[-1])]
    return f"{max(rel(np.asarray(x), np.asarray(y)) for x, y in pairs):.0e}"


def _cpu_timed(fn, acc, key):
    """fn, adding the process CPU time (all threads) and minor page faults it takes to
    acc[key] (fresh output buffers fault in page by page: 4096 faults per 16 MiB)."""
    import resource

    def run():
        f0, c0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
        fn()
        cpu, faults = acc[key]
        acc[key] = (cpu + time.process_time() - c0,
                    faults + resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    return run


def uptime():
    with open("/proc/loadavg") as f:
        return "load average " + ", ".join(f.read().split()[:3])


def child(args):
    if args.threads == "1" and have("torch"):
        import torch
        torch.set_num_threads(1)
    from bench_native import copy_bandwidth
    bw = copy_bandwidth()
    print(f"\nthreads: {args.threads} (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"
          f", GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', 'unset')}"
          f", {os.cpu_count()} CPUs); copy bandwidth {bw / 1e9:.1f} GB/s; {uptime()} at start; "
          f"{time.strftime('%H:%M UTC', time.gmtime())}; medians of {args.repeat} interleaved "
          "steps, ms (p25-p75)\n", flush=True)
    print("| program | numpy backend | native | JAX jit | PyTorch | CPU / wall (each column) | "
          "page faults / step (each) | native / JAX | "
          "numpy / JAX | native / PyTorch | native GB/s (of copy) | vs JAX (rel) | target | |")
    print("| --- " + "| ---: " * 11 + "| --- | --- |")
    for name in args.only:
        time_program(name, args.repeat, bw, args.profile)
    print(f"\n{uptime()} at the end", flush=True)


FIRST = ("numpy", "native")


def first_calls(args):
    """ms of builder() + first step per program, numpy backend then native (sync)."""
    import funcgrad as fg
    fg.config.update("native_cache_dir", args.first_calls)
    fg.jit(lambda x: x + 1, backend="numpy")(np.ones(3, np.float32))  # imports, outside
    t0 = time.perf_counter()  # the compiler probe (OpenMP, libmvec): once per process
    funcgrad_jit(lambda x: x + 1, "native")(np.ones(3, np.float32))
    out = {"probe native": (time.perf_counter() - t0) * 1e3}
    for name in args.only:
        built, _ = builders(name)
        for b in FIRST:
            t0 = time.perf_counter()
            built[b]()()
            out[f"{name} {b}"] = (time.perf_counter() - t0) * 1e3
    print(json.dumps(out))


STEPS = 20  # steps of a training loop from a cold start, in the time-to-native table


def time_to_native(args):
    """Per program, from a cold start with `config.native="background"` (ms from the builder's
    start): the first step (numpy tier), every native build done (`tiers.drain()` returning,
    watched by a thread while the loop keeps stepping, as a training loop does), and STEPS
    steps; then whether the program's entries run native."""
    import threading

    import funcgrad as fg
    from funcgrad.backends.native import tiers
    fg.config.update("native_cache_dir", args.time_to_native)
    fg.jit(lambda x: x + 1, backend="numpy")(np.ones(3, np.float32))  # imports, outside
    NATIVE_MODE[0] = "background"
    tiny = lambda: runner(funcgrad_jit(lambda x: x + 1, "native"), [np.ones(3, np.float32)])
    out = {}
    for name in ["x + 1", *args.only]:
        build = tiny if name == "x + 1" else builders(name)[0]["native"]
        t0 = time.perf_counter()
        step = build()
        step()
        first, native = time.perf_counter(), []
        watcher = threading.Thread(target=lambda done=native: (
            tiers.drain(), done.append(time.perf_counter())))
        watcher.start()
        n = 1
        while n < STEPS or watcher.is_alive():
            step()
            n += 1
            if n == STEPS:
                steps = time.perf_counter()
        watcher.join()
        out[name] = {"first": (first - t0) * 1e3, "native": (native[0] - t0) * 1e3,
                     "steps": (steps - t0) * 1e3, "all native": _all_native(step.jitted)}
    print(json.dumps(out))


def _all_native(jitted):
    """Whether every compiled entry of `jitted` runs its native tier now."""
    exes = [e.exe for e in jitted._cache.entries.values() if e.exe is not None]
    return bool(exes) and all(getattr(e, "native", hasattr(e, "c_source")) for e in exes)


def parent(args):
    settings = ("1", "all") if args.threads == "both" else (args.threads,)
    rest = ["--repeat", str(args.repeat), "--only", *args.only]
    if args.profile:
        rest += ["--profile", str(args.profile)]
    for threads in settings:
        env = dict(os.environ, **(ONE_THREAD if threads == "1" else {}))
        if threads == "all" and args.gomp_spincount is not None:
            env["GOMP_SPINCOUNT"] = str(args.gomp_spincount)
        subprocess.run([sys.executable, __file__, "--child", "--threads", threads, *rest],
                       env=env, check=True)
    if args.no_first:
        return
    env = dict(os.environ, **(ONE_THREAD if settings[0] == "1" else {}))
    with tempfile.TemporaryDirectory() as cache:
        runs = [json.loads(subprocess.run(
            [sys.executable, __file__, "--first-calls", cache, "--only", *args.only], env=env,
            check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(2)]
    print(f"\nfirst calls, fresh processes (threads {settings[0]}; {uptime()}): builder + "
          "first step (trace, compile, native build, run), ms\n")
    print("| program | numpy backend | native, empty cache (gcc) | native, 2nd process "
          "(disk cache) |\n| --- | ---: | ---: | ---: |")
    print(f"| compiler probe + x + 1 (once per process) | - | {runs[0]['probe native']:.0f} | "
          f"{runs[1]['probe native']:.0f} |")
    for name in args.only:
        print(f"| {name} | {runs[0][name + ' numpy']:.0f} | {runs[0][name + ' native']:.0f} | "
              f"{runs[1][name + ' native']:.0f} |")
    print_time_to_native(args, env)


def print_time_to_native(args, env):
    with tempfile.TemporaryDirectory() as cache:
        runs = [json.loads(subprocess.run(
            [sys.executable, __file__, "--time-to-native", cache, "--only", *args.only],
            env=env, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(2)]
    print(f"\ntime to native, config.native=\"background\" ({uptime()}): ms from the "
          f"builder's start to the first step (numpy tier), to every native build done (the "
          f"loop stepping meanwhile) and to {STEPS} steps; fresh process with an empty cache, "
          f"then a second process with the disk cache\n")
    print(f"| program | first step | native | {STEPS} steps | first step (disk) | native (disk) "
          f"| {STEPS} steps (disk) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in runs[0]:
        cells = [f"{r[name][k]:.0f}" + ("" if r[name]["all native"] or k != "native" else " (!)")
                 for r in runs for k in ("first", "native", "steps")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("(!): a program whose entries did not all run native at the end")


def alone_child(args):
    """Time the one implementation `args.impl` of program `args.only[0]`, alone."""
    from bench_native import interleaved
    name = args.only[0]
    if args.threads == "1" and args.impl.startswith("PyTorch"):
        import torch
        torch.set_num_threads(1)
    fn = builders(name)[0][args.impl]()
    fn(), fn()
    acc = {args.impl: (0.0, 0)}
    t = interleaved({args.impl: _cpu_timed(fn, acc, args.impl)}, args.repeat)[args.impl]
    print(json.dumps({"cell": _cell(t), "median": float(np.median(t)),
                      "cpu": acc[args.impl][0] / (t.sum() * 1e-3)}))


def alone(args):
    """`--alone`: every implementation of every program in a fresh process of its own."""
    settings = ("1", "all") if args.threads == "both" else (args.threads,)
    for threads in settings:
        env = dict(os.environ, **(ONE_THREAD if threads == "1" else {}))
        print(f"\neach implementation alone in a fresh process, threads {threads}; {uptime()}; "
              f"medians of {args.repeat} steps, ms (p25-p75)\n")
        print("| program | implementation | ms | CPU / wall | / native |\n"
              "| --- | --- | ---: | ---: | ---: |", flush=True)
        for name in args.only:
            rows = {}
            for impl in builders(name)[0]:
                out = subprocess.run([sys.executable, __file__, "--alone-impl", impl, "--threads",
                                      threads, "--repeat", str(args.repeat), "--only", name],
                                     env=env, check=True, capture_output=True, text=True)
                rows[impl] = json.loads(out.stdout.splitlines()[-1])
            for impl, r in rows.items():
                rel = r["median"] / rows["native"]["median"]
                print(f"| {name} | {LABELS.get(impl, impl)} | {r['cell']} | {r['cpu']:.1f} | "
                      f"{rel:.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", choices=("1", "all", "both"), default="both")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", nargs="+", choices=PROGRAMS, default=list(PROGRAMS))
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS")
    ap.add_argument("--no-first", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--first-calls", metavar="CACHE_DIR", help=argparse.SUPPRESS)
    ap.add_argument("--time-to-native", metavar="CACHE_DIR", help=argparse.SUPPRESS)
    ap.add_argument("--only-time-to-native", action="store_true",
                    help="only the time-to-native table (fresh processes)")
    ap.add_argument("--alone", action="store_true")
    ap.add_argument("--gomp-spincount", type=int, metavar="N",
                    help="GOMP_SPINCOUNT on all cores (default: libgomp's)")
    ap.add_argument("--alone-impl", dest="impl", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.impl:
        alone_child(args)
    elif args.alone:
        alone(args)
    elif args.first_calls:
        first_calls(args)
    elif args.time_to_native:
        time_to_native(args)
    elif args.only_time_to_native:
        env = dict(os.environ, **(ONE_THREAD if args.threads != "all" else {}))
        print_time_to_native(args, env)
    elif args.child:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
