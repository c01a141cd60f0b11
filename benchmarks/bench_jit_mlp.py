"""One training step of a 784-512-512-10 ReLU MLP (softmax cross-entropy, Adam), jitted
funcgrad against hand-written NumPy (and JAX / PyTorch when they are installed).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_jit_mlp.py
        [--batches 128 1024] [--steps 30] [--profile]

Columns, per batch size:
- `numpy`: careful hand-written NumPy: preallocated buffers, `out=` everywhere, in-place
  Adam. The baseline: ratios are against it.
- `funcgrad jit`: the same math written with funcgrad.numpy + funcgrad.value_and_grad + a
  hand-rolled Adam, under `funcgrad.jit` with the parameters and optimizer state donated.
- `funcgrad exe`: the compiled program called directly (no pytree handling or cache
  lookup): the cost of the generated code alone.
- `jax`, `torch`: the same step in JAX (jit, donated) and PyTorch (torch.optim.Adam),
  when importable.
Steps are interleaved (numpy, funcgrad, ...) so that the machine's load affects every
column alike; the table shows the median, the 25th-75th percentiles and the minimum in ms,
and three ratios to NumPy: of the medians, the median of per-round ratios (`paired`: each
step against the NumPy step run next to it) and of the minima (`by min`, least disturbed
by other processes on a shared machine).

Also printed: the first-call compile time (trace + optimize + fuse + generate), memory
beyond the model state and batch (buffers kept between steps: NumPy's preallocated ones,
the compiled program's workspace; plus the peak tracemalloc sees during a step), and with
`--profile` the per-kernel timings of the generated program.
"""

import argparse
import time
import tracemalloc

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.compiler import pipeline
from funcgrad.tree_util import tree_leaves, tree_map

try:  # optional comparison tiers
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None
try:
    import torch
except ImportError:
    torch = None

SIZES = (784, 512, 512, 10)
LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(a, b)).astype(np.float32) * np.float32(np.sqrt(2.0 / a)),
             np.zeros(b, np.float32)) for a, b in zip(SIZES[:-1], SIZES[1:])]


def batch(n, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, SIZES[0])).astype(np.float32)
    y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], n)]
    return x, y


# --- (a) hand-written NumPy --------------------------------------------------------------------

class NumpyStep:
    """The training step in careful NumPy: every buffer preallocated, Adam in place."""

    def __init__(self, params, n):
        self.params = [(w.copy(), b.copy()) for w, b in params]
        self.m = [(np.zeros_like(w), np.zeros_like(b)) for w, b in params]
        self.v = [(np.zeros_like(w), np.zeros_like(b)) for w, b in params]
        self.g = [(np.empty_like(w), np.empty_like(b)) for w, b in params]
        self.tmp = [(np.empty_like(w), np.empty_like(b)) for w, b in params]
        self.h = [np.empty((n, s), np.float32) for s in SIZES[1:]]
        self.dh = [np.empty((n, s), np.float32) for s in SIZES[1:]]
        self.mask = [np.empty((n, s), np.bool_) for s in SIZES[1:-1]]
        self.row = np.empty((n, 1), np.float32)
        self.t = 0

    def __call__(self, x, y):
        (w1, b1), (w2, b2), (w3, b3) = self.params
        h1, h2, z = self.h
        np.matmul(x, w1, out=h1)
        h1 += b1
        np.maximum(h1, 0.0, out=h1)
        np.matmul(h1, w2, out=h2)
        h2 += b2
        np.maximum(h2, 0.0, out=h2)
        np.matmul(h2, w3, out=z)
        z += b3
        # softmax cross-entropy: z <- z - max, p = softmax, loss = -mean(sum(y * log p))
        np.max(z, axis=1, keepdims=True, out=self.row)
        z -= self.row
        dz = self.dh[2]
        np.exp(z, out=dz)
        np.sum(dz, axis=1, keepdims=True, out=self.row)
        dz /= self.row
        np.log(self.row, out=self.row)
        loss = -(np.vdot(y, z) - self.row.sum()) / len(x)
        # backward
        dz -= y
        dz *= 1.0 / len(x)
        (gw1, gb1), (gw2, gb2), (gw3, gb3) = self.g
        np.matmul(h2.T, dz, out=gw3)
        np.sum(dz, axis=0, out=gb3)
        dh2, dh1 = self.dh[1], self.dh[0]
        np.matmul(dz, w3.T, out=dh2)
        np.greater(h2, 0.0, out=self.mask[1])
        dh2 *= self.mask[1]
        np.matmul(h1.T, dh2, out=gw2)
        np.sum(dh2, axis=0, out=gb2)
        np.matmul(dh2, w2.T, out=dh1)
        np.greater(h1, 0.0, out=self.mask[0])
        dh1 *= self.mask[0]
        np.matmul(x.T, dh1, out=gw1)
        np.sum(dh1, axis=0, out=gb1)
        # Adam, in place
        self.t += 1
        lr_t = LR * np.sqrt(1.0 - B2 ** self.t) / (1.0 - B1 ** self.t)
        for layer in range(3):
            for k in range(2):
                p, g = self.params[layer][k], self.g[layer][k]
                m, v, tmp = self.m[layer][k], self.v[layer][k], self.tmp[layer][k]
                m *= B1
                np.multiply(g, 1.0 - B1, out=tmp)
                m += tmp
                v *= B2
                np.multiply(g, g, out=tmp)
                tmp *= 1.0 - B2
                v += tmp
                np.sqrt(v, out=tmp)
                tmp += EPS
                np.divide(m, tmp, out=tmp)
                tmp *= lr_t
                p -= tmp
        return loss


# --- (b) funcgrad ---------------------------------------------------------------------------

@fg.custom_jvp
def relu(x):
    """ReLU as jax.nn.relu defines it: max(x, 0), with derivative where(x > 0, t, 0)."""
    return fnp.maximum(x, 0.0)


@relu.defjvp
def _relu_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return relu(x), fnp.where(x > 0, t, 0.0)


def loss_fn(params, x, y):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i < len(params) - 1:
            x = relu(x)
    m = fg.lax.stop_gradient(fnp.max(x, axis=-1, keepdims=True))  # as jax.nn.log_softmax
    logp = x - m - fnp.log(fnp.sum(fnp.exp(x - m), axis=-1, keepdims=True))
    return -fnp.mean(fnp.sum(y * logp, axis=-1))


def train_step(params, opt_state, x, y):
    loss, grads = fg.value_and_grad(loss_fn)(params, x, y)
    m, v, t = opt_state
    t = t + 1.0
    lr_t = LR * fnp.sqrt(1.0 - B2 ** t) / (1.0 - B1 ** t)
    m = tree_map(lambda m, g: B1 * m + (1.0 - B1) * g, m, grads)
    v = tree_map(lambda v, g: B2 * v + (1.0 - B2) * g * g, v, grads)
    params = tree_map(lambda p, m, v: p - lr_t * m / (fnp.sqrt(v) + EPS), params, m, v)
    return params, (m, v, t), loss


def funcgrad_state(params):
    zeros = [(np.zeros_like(w), np.zeros_like(b)) for w, b in params]
    to = lambda tree: tree_map(fnp.asarray, tree)
    return to([(w.copy(), b.copy()) for w, b in params]), (to(zeros), to(zeros),
                                                             fnp.asarray(np.float32(0)))


class FuncgradJit:
    def __init__(self, params):
        self.fn = fg.jit(train_step, donate_argnums=(0, 1))
        self.params, self.state = funcgrad_state(params)

    def __call__(self, x, y):
        self.params, self.state, loss = self.fn(self.params, self.state, x, y)
        return loss


class FuncgradExe:
    """The compiled program alone, on numpy leaves (params and state donated)."""

    def __init__(self, params, x, y):
        p, s = funcgrad_state(params)
        closed = fg.make_jaxpr(train_step)(p, s, x, y)
        n_state = len(tree_leaves((p, s)))
        self.exe = pipeline.compile_jaxpr(closed, donate_argnums=tuple(range(n_state)))
        self.leaves = [np.array(leaf) for leaf in tree_leaves((p, s))]

    def __call__(self, x, y):
        out = self.exe(*self.leaves, x, y)
        self.leaves = out[:-1]
        return out[-1]


# --- (c) JAX and PyTorch ---------------------------------------------------------------------

def jax_step_fn():
    def loss(params, x, y):
        for i, (w, b) in enumerate(params):
            x = x @ w + b
            if i < len(params) - 1:
                x = jax.nn.relu(x)
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(x), axis=-1))

    def step(params, opt_state, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        m, v, t = opt_state
        t = t + 1.0
        lr_t = LR * jnp.sqrt(1.0 - B2 ** t) / (1.0 - B1 ** t)
        tm = jax.tree_util.tree_map
        m = tm(lambda m, g: B1 * m + (1.0 - B1) * g, m, grads)
        v = tm(lambda v, g: B2 * v + (1.0 - B2) * g * g, v, grads)
        params = tm(lambda p, m, v: p - lr_t * m / (jnp.sqrt(v) + EPS), params, m, v)
        return params, (m, v, t), value
    return jax.jit(step, donate_argnums=(0, 1))


class JaxStep:
    def __init__(self, params):
        self.fn = jax_step_fn()
        self.params = jax.tree_util.tree_map(jnp.asarray, params)
        zeros = jax.tree_util.tree_map(jnp.zeros_like, self.params)
        self.state = (zeros, jax.tree_util.tree_map(jnp.zeros_like, self.params),
                      jnp.float32(0))

    def __call__(self, x, y):
        self.params, self.state, loss = self.fn(self.params, self.state, x, y)
        return loss.block_until_ready()


class TorchStep:
    def __init__(self, params):
        layers = []
        for i, (w, b) in enumerate(params):
            lin = torch.nn.Linear(*w.shape)
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(w.T.copy()))
                lin.bias.copy_(torch.from_numpy(b))
            layers.append(lin)
            if i < len(params) - 1:
                layers.append(torch.nn.ReLU())
        self.model = torch.nn.Sequential(*layers)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=LR, betas=(B1, B2), eps=EPS)

    def __call__(self, x, y):
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        self.opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(self.model(x), y.argmax(1))
        loss.backward()
        self.opt.step()
        return loss.item()


# --- measuring ------------------------------------------------------------------------------

def interleaved(runners, x, y, steps):
    times = {name: [] for name in runners}
    for _ in range(steps):
        for name, run in runners.items():
            t0 = time.perf_counter()
            run(x, y)
            times[name].append(time.perf_counter() - t0)
    return {k: np.array(v) * 1e3 for k, v in times.items()}


def step_memory(run, x, y):
    """Peak bytes traced during one step (after a warm-up step) beyond what it started with."""
    run(x, y)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    run(x, y)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def numpy_workspace(params, n):
    """Bytes NumPyStep preallocates beyond the model state (parameters, m, v)."""
    state = sum(a.nbytes for a in tree_leaves(params)) * 3
    tracemalloc.start()
    step = NumpyStep(params, n)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del step
    return held - state


def first_call_ms(params, x, y):
    """Time of the first jitted call: trace, then optimize + fuse + generate, then one run;
    wall-clock and CPU time of this process (the latter is robust to a loaded machine)."""
    p, s = funcgrad_state(params)
    clocks = [(time.perf_counter(), time.process_time())]
    closed = fg.make_jaxpr(train_step)(p, s, x, y)
    clocks.append((time.perf_counter(), time.process_time()))
    exe = pipeline.compile_jaxpr(closed)
    clocks.append((time.perf_counter(), time.process_time()))
    leaves = [np.asarray(a) for a in tree_leaves((p, s))]
    exe(*leaves, x, y)
    clocks.append((time.perf_counter(), time.process_time()))
    wall = [(b[0] - a[0]) * 1e3 for a, b in zip(clocks, clocks[1:])]
    cpu = [(b[1] - a[1]) * 1e3 for a, b in zip(clocks, clocks[1:])]
    return wall, cpu, exe, closed


def check_agreement(params, x, y):
    """The funcgrad step and the NumPy step give the same loss and parameters."""
    ref = NumpyStep(params, len(x))
    got = FuncgradJit(params)
    for _ in range(3):
        a, b = ref(x, y), float(got(x, y))
    np.testing.assert_allclose(b, a, rtol=1e-4)
    for (w, _), (fw, _) in zip(ref.params, got.params):
        np.testing.assert_allclose(np.asarray(fw), w, rtol=1e-3, atol=1e-5)


def run_batch(n, steps, profile):
    params = init_params()
    x, y = batch(n)
    check_agreement(params, x, y)
    wall, cpu, exe, closed = first_call_ms(params, x, y)
    runners = {"numpy": NumpyStep(params, n), "funcgrad jit": FuncgradJit(params),
               "funcgrad exe": FuncgradExe(params, x, y)}
    if jax is not None:
        runners["jax"] = JaxStep(params)
    if torch is not None:
        runners["torch"] = TorchStep(params)
    interleaved(runners, x, y, 3)  # warm up (JAX compiles here)
    times = interleaved(runners, x, y, steps)
    print(f"\n## batch {n}: {steps} interleaved steps, ms per step")
    print(f"{'':14} {'median':>8} {'p25':>8} {'p75':>8} {'min':>8} {'vs numpy':>9} "
          f"{'paired':>7} {'by min':>7}")
    for name, t in times.items():
        q1, q3 = np.percentile(t, [25, 75])
        ratio = np.median(t) / np.median(times["numpy"])
        paired = np.median(t / times["numpy"])  # each step against the numpy step beside it
        by_min = t.min() / times["numpy"].min()
        print(f"{name:14} {np.median(t):8.2f} {q1:8.2f} {q3:8.2f} {t.min():8.2f} {ratio:9.2f} "
              f"{paired:7.2f} {by_min:7.2f}")
    print(f"first call ({len(closed.eqns)} traced equations): trace {wall[0]:.1f} ms + "
          f"optimize/fuse/generate {wall[1]:.1f} ms = {wall[0] + wall[1]:.1f} ms wall "
          f"({cpu[0] + cpu[1]:.1f} ms CPU; target < 50), then the first run {wall[2]:.1f} ms; "
          "phases " + ", ".join(f"{k} {v * 1e3:.1f} ms"
                                for k, v in pipeline.stats["last_seconds"].items()))
    fj = runners["funcgrad jit"]
    mem = fj.fn.lower(fj.params, fj.state, x, y).compile().memory_analysis()
    kept = {"numpy": numpy_workspace(params, n), "funcgrad jit": mem.workspace_bytes}
    step = {"numpy": step_memory(runners["numpy"], x, y), "funcgrad jit": step_memory(fj, x, y)}
    print("memory beyond model state and batch: "
          + ", ".join(f"{k} {(kept[k] + step[k]) / 2**20:.2f} MiB (kept between steps "
                      f"{kept[k] / 2**20:.2f} + allocated in a step {step[k] / 2**20:.2f})"
                      for k in kept))
    print(f"compiler's plan (donated): {mem}")
    if profile:
        leaves = [np.asarray(a) for a in tree_leaves(funcgrad_state(params))]
        prof = exe.profile(*leaves, x, y, repeat=steps)
        print("per kernel / library call (us per step):")
        for label, sec in prof.by_label()[:15]:
            print(f"  {label:36} {sec * 1e6:9.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, nargs="+", default=[128, 1024])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    print("# MLP 784-512-512-10 training step (ReLU, softmax cross-entropy, Adam)")
    print(f"numpy {np.__version__}; jax {'not installed' if jax is None else jax.__version__}; "
          f"torch {'not installed' if torch is None else torch.__version__}")
    for n in args.batches:
        run_batch(n, args.steps, args.profile)


if __name__ == "__main__":
    main()
