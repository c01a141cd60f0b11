"""Train a small GPT-style character language model on Shakespeare with funcgrad.

    pip install funcgrad[examples]      # tqdm (progress) and matplotlib (the loss curve)
    python examples/train_char_transformer.py [--steps 600] [--layers 2] [--width 64]
        [--heads 4] [--context 64] [--batch-size 32] [--lr 6e-3] [--remat] [--quick]
        [--backend numpy] [--no-progress] [--curves PATH] [--checkpoint PATH]

The model: token and position embeddings, `--layers` pre-LayerNorm blocks (causal multi-head
self-attention, a GELU MLP, residual connections), a final LayerNorm and an output projection
tied to the token embedding (`nn.Embedding.attend`). AdamW (decay on matrices only, a mask by
parameter rank) with a warm-up + cosine learning rate, after global-norm clipping. The whole
step (forward, backward, clipping, AdamW) is one `funcgrad.jit` program with the parameters
and the optimizer state donated. `--remat` wraps every block in `funcgrad.checkpoint`: its
activations are recomputed in the backward pass instead of stored.

Every `--eval-every` steps the validation loss (bits per character, on every non-overlapping
window of the held-out 10%) is printed; the last lines compare it with the unigram baseline
(the entropy of the validation characters under the training set's character frequencies).
Then the parameters and optimizer state are saved with `funcgrad.io`, loaded back and checked
equal, and text is sampled from the reloaded model: a jitted `lax.scan` over a fixed context
window, temperature sampling with one explicit PRNG key per character. The loss curve goes
to `examples/out/train_char_transformer_curves.png` (a one-line summary without matplotlib).

The corpus, `examples/data/tinyshakespeare_excerpt.txt`, is the first 262,006 characters of
"tiny Shakespeare" (Andrej Karpathy's char-rnn, `data/tinyshakespeare/input.txt`), a
concatenation of passages from Shakespeare's plays. Shakespeare's works are in the public
domain; the excerpt is committed so that the example works offline.
"""

import argparse
import math
import os
import sys
import time
from typing import Any, NamedTuple

import numpy as np
from _curves import OUT, curves_path, report_curves

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import io, lax, nn, optim, random
from funcgrad.tree_util import tree_leaves, tree_map

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                      "tinyshakespeare_excerpt.txt")
LN2 = math.log(2.0)


class Config(NamedTuple):
    steps: int = 600
    batch_size: int = 32
    context: int = 64
    width: int = 64
    heads: int = 4
    layers: int = 2
    lr: float = 6e-3
    warmup: int = 50
    weight_decay: float = 0.1
    clip: float = 1.0
    remat: bool = False
    eval_every: int = 100
    seed: int = 0


QUICK = Config(steps=40, batch_size=16, context=32, width=32, heads=2, layers=1, lr=1e-2,
               warmup=5, eval_every=20)


# --- data -------------------------------------------------------------------------------

class Corpus(NamedTuple):
    chars: str  # the vocabulary, sorted: id i is chars[i]
    train: np.ndarray  # int32 ids
    val: np.ndarray

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)


def load_corpus(path=CORPUS, val_fraction=0.1):
    """The text as int32 ids, split into the first 90% (training) and the last 10%."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    chars = "".join(sorted(set(text)))
    ids = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    lookup = np.zeros(ids.max() + 1, np.int32)
    lookup[[ord(c) for c in chars]] = np.arange(len(chars))
    ids = lookup[ids]
    cut = int(len(ids) * (1 - val_fraction))
    return Corpus(chars, ids[:cut], ids[cut:])


def random_batch(rng, ids, batch_size, context):
    """(inputs, targets), each (batch_size, context), from random offsets into `ids`."""
    starts = rng.integers(0, len(ids) - context - 1, batch_size)
    windows = np.stack([ids[s:s + context + 1] for s in starts])
    return windows[:, :-1], windows[:, 1:]


def unigram_bpc(corpus):
    """Bits per character of the validation text under the training character frequencies
    (add-one smoothed): what a model that ignores all context achieves."""
    counts = np.bincount(corpus.train, minlength=len(corpus.chars)) + 1.0
    p = counts / counts.sum()
    return float(-np.mean(np.log2(p[corpus.val])))


# --- the model --------------------------------------------------------------------------

class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, width, heads):
        self.ln1, self.ln2 = nn.LayerNorm(), nn.LayerNorm()
        self.attn = nn.MultiHeadAttention(heads)
        self.fc, self.proj = nn.Linear(4 * width), nn.Linear(width)  # the MLP

    def init(self, key, x):
        hidden = fnp.zeros((*x.shape[:-1], self.fc.out_features), x.dtype)
        parts = {"ln1": (self.ln1, x), "attn": (self.attn, x), "ln2": (self.ln2, x),
                 "fc": (self.fc, x), "proj": (self.proj, hidden)}
        return {name: layer.init(nn.child_key(key, i), sample)[0]
                for i, (name, (layer, sample)) in enumerate(parts.items())}, {}

    def apply(self, params, state, x, train=False, key=None):
        mask = nn.make_causal_mask(x.shape[-2])
        h = self.ln1.apply(params["ln1"], {}, x)[0]
        x = x + self.attn.apply(params["attn"], {}, h, mask=mask)[0]
        h = self.ln2.apply(params["ln2"], {}, x)[0]
        h = nn.gelu(self.fc.apply(params["fc"], {}, h)[0])
        return x + self.proj.apply(params["proj"], {}, h)[0], state


class GPT(nn.Module):
    """ids (batch, length) -> next-character logits (batch, length, vocab)."""

    def __init__(self, vocab, cfg: Config):
        self.context, self.remat = cfg.context, cfg.remat
        self.tokens = nn.Embedding(vocab, cfg.width)
        self.positions = nn.Embedding(cfg.context, cfg.width)
        self.blocks = [Block(cfg.width, cfg.heads) for _ in range(cfg.layers)]
        self.ln = nn.LayerNorm()

    def init(self, key, ids):
        params = {"tokens": self.tokens.init(nn.child_key(key, 0))[0],
                  "positions": self.positions.init(nn.child_key(key, 1))[0]}
        x = self.tokens.apply(params["tokens"], {}, ids)[0]
        params["blocks"] = [b.init(nn.child_key(key, 2 + i), x)[0]
                            for i, b in enumerate(self.blocks)]
        params["ln"] = self.ln.init(None, x)[0]
        return params, {}

    def apply(self, params, state, ids, train=False, key=None):
        x = self.tokens.apply(params["tokens"], {}, ids)[0]
        x = x + self.positions.apply(params["positions"], {}, fnp.arange(ids.shape[-1]))[0]
        for block, p in zip(self.blocks, params["blocks"]):
            run = lambda p, x, block=block: block.apply(p, {}, x)[0]
            x = (fg.checkpoint(run) if self.remat else run)(p, x)
        x = self.ln.apply(params["ln"], {}, x)[0]
        return self.tokens.attend(params["tokens"], x), state


def make_optimizer(cfg: Config):
    """Global-norm clipping, then AdamW: weight decay on the matrices (kernels and embeddings,
    rank >= 2, as nanoGPT does), none on biases and LayerNorm parameters."""
    schedule = optim.warmup_cosine_decay_schedule(0.0, cfg.lr, cfg.warmup,
                                                  max(cfg.steps, cfg.warmup + 1),
                                                  end_value=cfg.lr / 10)
    decay_matrices = lambda params: tree_map(lambda p: p.ndim >= 2, params)
    return optim.chain(optim.clip_by_global_norm(cfg.clip),
                       optim.adamw(schedule, b2=0.99, weight_decay=cfg.weight_decay,
                                   mask=decay_matrices))


def make_functions(model, opt, vocab, backend=None):
    """The jitted training step (params and optimizer state donated) and evaluation loss."""
    def loss_fn(params, x, y):
        logits, _ = model.apply(params, {}, x)
        # One-hot targets keep the loss elementwise (fused), as in train_digits_mlp.py.
        return nn.softmax_cross_entropy(logits, nn.one_hot(y, vocab)).mean()

    def train_step(params, opt_state, x, y):
        loss, grads = fg.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss

    return (fg.jit(train_step, donate_argnums=(0, 1), backend=backend),
            fg.jit(loss_fn, backend=backend))


def validation_bpc(eval_loss, params, ids, context, batch_size=64):
    """Mean bits per character over every non-overlapping window of `ids`."""
    n = (len(ids) - 1) // context
    x = ids[:n * context].reshape(n, context)
    y = ids[1:n * context + 1].reshape(n, context)
    total = 0.0
    for i in range(0, n - batch_size + 1, batch_size):  # full batches: one compiled shape
        total += float(eval_loss(params, x[i:i + batch_size], y[i:i + batch_size]))
    return total / (n // batch_size) / LN2


# --- sampling ---------------------------------------------------------------------------

def make_sampler(model, backend=None):
    """`sample(params, key, window, num, temperature)`: `num` new ids after `window` (the
    last `context` ids), one `lax.scan` step per character, compiled once per `num`."""
    def sample(params, key, window, num, temperature):
        def step(window, key):
            logits, _ = model.apply(params, {}, window[None])
            nxt = random.categorical(key, logits[0, -1] / temperature)
            return fnp.concatenate([window[1:], nxt[None]]), nxt
        _, ids = lax.scan(step, window, random.split(key, num))
        return ids
    return fg.jit(sample, static_argnums=(3, 4), backend=backend)


# --- training ---------------------------------------------------------------------------

class Run(NamedTuple):
    params: Any
    opt_state: Any
    model: GPT
    corpus: Corpus
    losses: list  # training loss (nats) per step
    val: list  # (step, validation bpc)
    seconds: float  # the whole loop: compilation, evaluation and progress included
    steps_per_second: float  # training steps only, the first (compiling) one excluded


def _progress(steps, enabled):
    if enabled:
        try:
            from tqdm import tqdm
            return tqdm(total=steps, unit="step", dynamic_ncols=True)
        except ImportError:
            pass
    return None


def train(cfg: Config = Config(), corpus=None, progress=True, verbose=True,
          backend=None) -> Run:
    """Trains the GPT for `cfg.steps` steps; returns the final state and the curves."""
    corpus = corpus or load_corpus()
    model, opt = GPT(len(corpus.chars), cfg), make_optimizer(cfg)
    params, _ = model.init(random.PRNGKey(cfg.seed), fnp.zeros((1, cfg.context), fnp.int32))
    opt_state = opt.init(params)
    train_step, eval_loss = make_functions(model, opt, len(corpus.chars), backend)
    rng = np.random.default_rng(cfg.seed)
    bar, losses, val = _progress(cfg.steps, progress), [], []
    step_seconds, start = 0.0, time.perf_counter()
    for step in range(1, cfg.steps + 1):
        x, y = random_batch(rng, corpus.train, cfg.batch_size, cfg.context)
        t0 = time.perf_counter()
        params, opt_state, loss = train_step(params, opt_state, x, y)
        losses.append(float(loss))
        step_seconds += (time.perf_counter() - t0) if step > 1 else 0.0
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            val.append((step, validation_bpc(eval_loss, params, corpus.val, cfg.context)))
            message = (f"step {step:5d}  train {np.mean(losses[-cfg.eval_every:]) / LN2:.3f} "
                       f"bpc  val {val[-1][1]:.3f} bpc")
            if verbose:
                (bar.write if bar is not None else print)(message)
    if bar is not None:
        bar.close()
    seconds = time.perf_counter() - start
    rate = (cfg.steps - 1) / step_seconds if cfg.steps > 1 else float("nan")
    return Run(params, opt_state, model, corpus, losses, val, seconds, rate)


def save_and_reload(path, run: Run, cfg: Config):
    """Saves params, optimizer state and config; loads them back and checks every leaf."""
    tree = {"params": run.params, "opt_state": run.opt_state, "step": cfg.steps,
            "config": dict(cfg._asdict())}
    io.save(path, tree)
    restored = io.load(path, like=tree)
    for a, b in zip(tree_leaves(tree), tree_leaves(restored)):
        if not np.array_equal(np.asarray(a), np.asarray(b)):
            raise RuntimeError(f"checkpoint {path}: a reloaded leaf differs")
    return restored


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Config()
    for field, value in defaults._asdict().items():
        flag = "--" + field.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=type(value), default=None,
                                help=f"default {value} ({getattr(QUICK, field)} with --quick)")
    parser.add_argument("--quick", action="store_true", help="a tiny model, a few dozen steps")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--sample-length", type=int, default=300)
    parser.add_argument("--checkpoint", default=os.path.join(OUT, "char_transformer.npz"))
    parser.add_argument("--curves", default=None, help='PNG path ("" for none)')
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--backend", default=None, help="jit backend (default: funcgrad's)")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else defaults
    cfg = base._replace(**{f: getattr(args, f) for f in base._fields
                           if getattr(args, f) not in (None, False)})

    corpus = load_corpus()
    baseline = unigram_bpc(corpus)
    print(f"corpus: {len(corpus.train):,} training and {len(corpus.val):,} validation "
          f"characters, vocabulary {len(corpus.chars)}; unigram baseline {baseline:.3f} bpc")
    run = train(cfg, corpus, progress=not args.no_progress, backend=args.backend)
    print(nn.summary(run.params))
    best = run.val[-1][1]
    print(f"training: {cfg.steps} steps in {run.seconds:.1f} s (compilation and evaluation "
          f"included), {run.steps_per_second:.2f} steps/s after the first")
    print(f"validation: {best:.3f} bits per character vs unigram {baseline:.3f} "
          f"({baseline - best:+.3f} better)")

    os.makedirs(os.path.dirname(os.path.abspath(args.checkpoint)), exist_ok=True)
    restored = save_and_reload(args.checkpoint, run, cfg)
    print(f"checkpoint: {args.checkpoint} saved and reloaded, every leaf equal")

    sample = make_sampler(run.model, args.backend)
    window = corpus.val[:cfg.context]
    ids = sample(restored["params"], random.PRNGKey(cfg.seed + 1), window,
                 args.sample_length, args.temperature)
    print(f"sample (temperature {args.temperature}, after a validation prompt):\n"
          f"{corpus.decode(window)}|{corpus.decode(np.asarray(ids))}")

    report_curves(curves_path("train_char_transformer", args.curves),
                  {"bits per character": {
                      "train": [v / LN2 for v in run.losses],
                      "validation": tuple(zip(*run.val)),
                      "unigram": ([1, cfg.steps], [baseline, baseline])}},
                  title=f"char transformer: {cfg.layers} layers, width {cfg.width}")
    return run


if __name__ == "__main__":
    main(sys.argv[1:])
