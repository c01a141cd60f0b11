"""The char transformer's training step (examples/train_char_transformer.py) in funcgrad (jit),
JAX (jit + optax) and PyTorch (eager), steps per second side by side.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \\
        /work/bench-venv/bin/python benchmarks/bench_char_transformer.py \\
        [--threads both|1|all] [--rounds 7] [--steps 10] [--warmup 3] [--native]

The same model everywhere: the example's default config (2 pre-LayerNorm blocks of width 64,
4 heads, context 64, batch 32, 62 characters, tied output projection, tanh GELU), the same
initial parameters (funcgrad's init, copied), the same batches in the same order, the same
loss (softmax cross-entropy on one-hot targets, mean) and the same optimizer (global-norm
clipping at 1, then AdamW b2=0.99, weight decay 0.1 on the matrices only, warm-up + cosine
schedule). Each library's step donates or updates in place as it does best (funcgrad and JAX:
one jitted program with params and optimizer state donated; PyTorch: autograd, then
`clip_grad_norm_` and `torch.optim.AdamW`, both `foreach=True`). funcgrad runs on its numpy
backend (the generated numpy program that the "cpu" backend runs first); `--native` adds a
row for the "cpu" backend's C tier (config `native="sync"`: built before the first step).

Every thread setting runs in a fresh child process (the thread pools are fixed at import):
"1" pins every library to one thread (OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1,
`torch.set_num_threads(1)`, XLA_FLAGS="--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1"); "all" leaves every library its default. Within a child the
libraries take turns, one timed block of `--steps` steps each per round (the order rotates),
so a change of the machine's load hits all of them alike; the table gives the median steps/s
over the rounds, the slowest and fastest round, and the ratio to funcgrad. The losses of the
steps every library ran on the same batches are compared with funcgrad's (float32 rounding
grows through the updates; a wrong model would differ by ~1). JAX and PyTorch are optional:
install them in a throwaway venv (never as project dependencies); missing ones are skipped
with a note.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


def setup(cfg):
    """(initial params as a numpy pytree, vocabulary size, the batches of every step)."""
    import train_char_transformer as ct

    import funcgrad.numpy as fnp
    from funcgrad import random
    from funcgrad.tree_util import tree_map
    corpus = ct.load_corpus()
    model = ct.GPT(len(corpus.chars), cfg)
    params, _ = model.init(random.PRNGKey(cfg.seed), fnp.zeros((1, cfg.context), fnp.int32))
    rng = np.random.default_rng(cfg.seed)
    batches = [ct.random_batch(rng, corpus.train, cfg.batch_size, cfg.context)
               for _ in range(cfg.steps)]
    return tree_map(np.array, params), len(corpus.chars), batches


# --- the runners: make_X(cfg, params, vocab) -> step(x, y) -> loss (not synchronized) -------

def make_funcgrad(cfg, params, vocab, backend="numpy"):
    import train_char_transformer as ct

    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad.tree_util import tree_map
    if backend == "native":  # the "cpu" backend's C tier, built before the first step returns
        fg.config.update("native", "sync")
        backend = "cpu"
    model, opt = ct.GPT(vocab, cfg), ct.make_optimizer(cfg)
    train_step, _ = ct.make_functions(model, opt, vocab, backend)
    state = {"params": tree_map(fnp.asarray, params)}
    state["opt"] = opt.init(state["params"])

    def step(x, y):
        state["params"], state["opt"], loss = train_step(state["params"], state["opt"], x, y)
        return loss
    return step


def _jax_forward(jax, jnp, params, ids, heads):
    def ln(x, p):
        mean = x.mean(-1, keepdims=True)
        var = jnp.square(x - mean).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]

    lin = lambda x, p: x @ p["w"] + p["b"]
    b, t = ids.shape
    x = params["tokens"]["embedding"][ids] + params["positions"]["embedding"][:t]
    mask = jnp.tril(jnp.ones((t, t), bool))
    for p in params["blocks"]:
        h = ln(x, p["ln1"])
        q, k, v = (lin(h, p["attn"][n]).reshape(b, t, heads, -1) for n in ("query", "key",
                                                                          "value"))
        logits = jnp.einsum("bqhd,bkhd->bhqk", q / np.float32(np.sqrt(q.shape[-1])), k)
        weights = jax.nn.softmax(jnp.where(mask, logits, jnp.finfo(logits.dtype).min), -1)
        y = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, -1)
        x = x + lin(y, p["attn"]["out"])
        x = x + lin(jax.nn.gelu(lin(ln(x, p["ln2"]), p["fc"]), approximate=True), p["proj"])
    return ln(x, params["ln"]) @ params["tokens"]["embedding"].T


def make_jax(cfg, params, vocab):
    import jax
    import jax.numpy as jnp
    import optax
    schedule = optax.warmup_cosine_decay_schedule(0.0, cfg.lr, cfg.warmup, cfg.steps,
                                                  end_value=cfg.lr / 10)
    decay = lambda p: jax.tree_util.tree_map(lambda a: a.ndim >= 2, p)
    opt = optax.chain(optax.clip_by_global_norm(cfg.clip),
                      optax.adamw(schedule, b2=0.99, weight_decay=cfg.weight_decay,
                                  mask=decay))

    def loss_fn(params, x, y):
        logits = _jax_forward(jax, jnp, params, x, cfg.heads)
        return optax.softmax_cross_entropy(logits, jax.nn.one_hot(y, vocab)).mean()

    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    train_step = jax.jit(train_step, donate_argnums=(0, 1))
    state = {"params": jax.tree_util.tree_map(jnp.asarray, params)}
    state["opt"] = opt.init(state["params"])

    def step(x, y):
        state["params"], state["opt"], loss = train_step(state["params"], state["opt"], x, y)
        return loss
    return step


def make_torch(cfg, params, vocab):
    import torch
    import torch.nn.functional as F

    from funcgrad import optim
    from funcgrad.tree_util import tree_flatten, tree_unflatten
    leaves, treedef = tree_flatten(params)
    tensors = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in leaves]
    p = tree_unflatten(treedef, tensors)
    heads = cfg.heads

    def forward(ids):
        ln = lambda x, q: F.layer_norm(x, x.shape[-1:], q["scale"], q["bias"], 1e-5)
        lin = lambda x, q: torch.addmm(q["b"], x.reshape(-1, x.shape[-1]), q["w"]).reshape(
            *x.shape[:-1], -1)
        b, t = ids.shape
        x = p["tokens"]["embedding"][ids] + p["positions"]["embedding"][:t]
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        for blk in p["blocks"]:
            h = ln(x, blk["ln1"])
            q, k, v = (lin(h, blk["attn"][n]).reshape(b, t, heads, -1).transpose(1, 2)
                       for n in ("query", "key", "value"))
            logits = (q / float(np.sqrt(q.shape[-1]))) @ k.transpose(-1, -2)
            weights = torch.softmax(logits.masked_fill(~mask, torch.finfo(q.dtype).min), -1)
            y = (weights @ v).transpose(1, 2).reshape(b, t, -1)
            x = x + lin(y, blk["attn"]["out"])
            x = x + lin(F.gelu(lin(ln(x, blk["ln2"]), blk["fc"]), approximate="tanh"),
                        blk["proj"])
        return ln(x, p["ln"]) @ p["tokens"]["embedding"].T

    groups = [{"params": [t for t in tensors if t.ndim >= 2], "weight_decay": cfg.weight_decay},
              {"params": [t for t in tensors if t.ndim < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.99), eps=1e-8, foreach=True)
    schedule = optim.warmup_cosine_decay_schedule(0.0, cfg.lr, cfg.warmup, cfg.steps,
                                                  end_value=cfg.lr / 10)
    lrs = [float(schedule(i)) for i in range(cfg.steps)]
    count = [0]

    def step(x, y):
        for g in opt.param_groups:
            g["lr"] = lrs[min(count[0], len(lrs) - 1)]
        count[0] += 1
        opt.zero_grad(set_to_none=True)
        logits = forward(torch.from_numpy(x.astype(np.int64)))
        target = F.one_hot(torch.from_numpy(y.astype(np.int64)), vocab).to(logits.dtype)
        loss = -(target * torch.log_softmax(logits, -1)).sum(-1).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tensors, cfg.clip, foreach=True)
        opt.step()
        return loss.detach()
    return step


RUNNERS = {"funcgrad jit": make_funcgrad, "funcgrad jit, native C tier":
           lambda *a: make_funcgrad(*a, backend="native"),
           "jax jit + optax": make_jax, "pytorch": make_torch}
NEEDS = {"jax jit + optax": ("jax", "optax"), "pytorch": ("torch",)}


def _missing(name):
    import importlib.util
    return [m for m in NEEDS.get(name, ()) if importlib.util.find_spec(m) is None]


def _versions():
    import importlib.metadata as md
    out = {}
    for name in ("numpy", "jax", "jaxlib", "optax", "torch"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return out


def child(args):
    """Times every available library in turns; prints one JSON object."""
    import train_char_transformer as ct
    if args.threads == "1":
        try:
            import torch
            torch.set_num_threads(1)
            torch.set_num_interop_threads(1)
        except ImportError:
            pass
    cfg = ct.Config()
    per_block = args.steps
    cfg = cfg._replace(steps=max(cfg.steps, args.warmup + args.rounds * per_block))
    params, vocab, batches = setup(cfg)
    steps, skipped, losses = {}, {}, {}
    for name, make in RUNNERS.items():
        missing = _missing(name)
        if missing or ("native" in name and not args.native):
            skipped[name] = (f"not installed: {', '.join(missing)}" if missing else
                             "not asked (--native)")
            continue
        steps[name] = make(cfg, params, vocab)
        losses[name] = []
    rates = {name: [] for name in steps}
    cursor = dict.fromkeys(steps, 0)

    def run_block(name, n):
        out = [steps[name](*batches[cursor[name] + i]) for i in range(n)]
        losses[name] += [float(v) for v in out]  # synchronizes (JAX dispatches ahead)
        cursor[name] += n

    for name in steps:
        run_block(name, args.warmup)  # compilation, first-call allocations
    names = list(steps)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            run_block(name, per_block)
            rates[name].append(per_block / (time.perf_counter() - t0))
    ref = np.asarray(losses.get("funcgrad jit", []))
    diffs = {name: float(np.max(np.abs(np.asarray(v) - ref))) if len(ref) else None
             for name, v in losses.items()}
    print(json.dumps({"rates": rates, "skipped": skipped, "loss_diff": diffs,
                      "first_loss": {k: v[0] for k, v in losses.items()},
                      "last_loss": {k: v[-1] for k, v in losses.items()},
                      "versions": _versions(), "steps_each": len(ref)}))


def table(result):
    rates = result["rates"]
    ref = statistics.median(rates["funcgrad jit"]) if "funcgrad jit" in rates else None
    lines = ["| library | steps/s (median) | slowest-fastest round | ms/step | vs funcgrad | "
             "max loss diff |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in rates.items():
        med = statistics.median(r)
        ratio = f"{med / ref:.2f}x" if ref else "-"
        diff = result["loss_diff"].get(name)
        diff = "-" if diff is None else f"{diff:.2g}"
        lines.append(f"| {name} | {med:.2f} | {min(r):.2f}-{max(r):.2f} | {1e3 / med:.1f} | "
                     f"{ratio} | {diff} |")
    for name, why in result["skipped"].items():
        lines.append(f"| {name} | skipped: {why} | | | | |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", choices=("both", "1", "all"), default="both")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10, help="steps per timed block")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--native", action="store_true",
                        help="also time funcgrad's native C tier (config native='sync')")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    for threads in ("1", "all") if args.threads == "both" else (args.threads,):
        env = dict(os.environ)
        for k in ONE_THREAD:
            env.pop(k, None)
        if threads == "1":
            env.update(ONE_THREAD)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--threads", threads,
               "--rounds", str(args.rounds), "--steps", str(args.steps),
               "--warmup", str(args.warmup)] + (["--native"] if args.native else [])
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"the {threads}-thread run failed:\n{proc.stdout}\n{proc.stderr}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        load = os.getloadavg()[0]
        print(f"\n{'one thread' if threads == '1' else 'all cores'} per library "
              f"({os.cpu_count()} CPUs, load average {load:.1f} at the end, "
              f"{time.perf_counter() - start:.0f} s): {result['steps_each']} steps each, "
              f"first loss {result['first_loss']}, last loss {result['last_loss']}")
        print(table(result))
        print("versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()))


if __name__ == "__main__":
    main()
