"""The flagship example (examples/train_char_transformer.py) on a tiny config, and the
examples' training-curve helper (examples/_curves.py), with and without matplotlib."""

import os
import sys

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import random
from funcgrad.tree_util import tree_leaves

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
sys.path.insert(0, EXAMPLES)
import _curves  # noqa: E402
import train_char_transformer as ct  # noqa: E402


@pytest.fixture(scope="module")
def corpus():
    return ct.load_corpus()


@pytest.fixture(scope="module")
def run(corpus):
    cfg = ct.QUICK._replace(steps=40, eval_every=40)
    return ct.train(cfg, corpus, progress=False, verbose=False), cfg


def test_corpus_split_and_unigram_baseline(corpus):
    assert len(corpus.chars) == len(set(corpus.chars)) and "".join(sorted(corpus.chars)) == \
        corpus.chars
    text = corpus.decode(np.concatenate([corpus.train, corpus.val]))
    with open(ct.CORPUS, encoding="utf-8") as f:
        assert text == f.read()
    assert len(corpus.val) == pytest.approx(0.1 * len(text), abs=1)
    # the unigram cross-entropy is at least the validation text's own character entropy
    counts = np.bincount(corpus.val)
    p = counts[counts > 0] / counts.sum()
    assert ct.unigram_bpc(corpus) >= -np.sum(p * np.log2(p)) > 4.0


def test_training_loss_decreases(run):
    result, cfg = run
    losses = np.asarray(result.losses)
    assert len(losses) == cfg.steps and np.all(np.isfinite(losses))
    # starts near log(vocab) nats; the mean of the last 5 is clearly below the first 5
    assert losses[:5].mean() > losses[-5:].mean() + 0.5
    assert result.val[-1][0] == cfg.steps and np.isfinite(result.val[-1][1])


def test_model_is_causal(run, corpus):
    result, cfg = run
    x = corpus.val[:cfg.context][None]
    y = x.copy()
    y[0, -1] = (y[0, -1] + 1) % len(corpus.chars)  # change only the last character
    a = np.asarray(result.model.apply(result.params, {}, fnp.asarray(x))[0])
    b = np.asarray(result.model.apply(result.params, {}, fnp.asarray(y))[0])
    np.testing.assert_allclose(a[0, :-1], b[0, :-1], rtol=1e-5, atol=1e-5)
    assert np.abs(a[0, -1] - b[0, -1]).max() > 1e-4


def test_jitted_sampling_gives_valid_characters(run, corpus):
    result, cfg = run
    sample = ct.make_sampler(result.model)
    window = corpus.val[:cfg.context]
    ids = np.asarray(sample(result.params, random.PRNGKey(1), window, 12, 0.8))
    assert ids.shape == (12,) and ids.dtype == np.int32
    assert ids.min() >= 0 and ids.max() < len(corpus.chars)
    again = np.asarray(sample(result.params, random.PRNGKey(1), window, 12, 0.8))
    np.testing.assert_array_equal(ids, again)  # explicit keys: the same key, the same text
    # at a near-zero temperature sampling is greedy decoding, one step at a time
    greedy = np.asarray(sample(result.params, random.PRNGKey(2), window, 3, 1e-4))
    w = list(window)
    for got in greedy:
        logits = result.model.apply(result.params, {}, fnp.asarray(np.array([w[-cfg.context:]])))
        assert got == int(np.argmax(np.asarray(logits[0])[0, -1]))
        w.append(got)


def test_checkpoint_round_trips(run, tmp_path):
    result, cfg = run
    restored = ct.save_and_reload(str(tmp_path / "ck.npz"), result, cfg)
    for a, b in zip(tree_leaves(result.params), tree_leaves(restored["params"])):
        assert np.asarray(a).dtype == np.asarray(b).dtype == np.float32
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert restored["config"]["width"] == cfg.width and restored["step"] == cfg.steps


def test_remat_gives_the_same_step(corpus):
    cfg = ct.QUICK._replace(steps=3, warmup=1, layers=2, eval_every=3)
    plain = ct.train(cfg, corpus, progress=False, verbose=False)
    remat = ct.train(cfg._replace(remat=True), corpus, progress=False, verbose=False)
    ids = fnp.zeros((2, cfg.context), fnp.int32)
    model = ct.GPT(len(corpus.chars), cfg._replace(remat=True))
    assert str(fg.make_jaxpr(lambda p: model.apply(p, {}, ids)[0])(remat.params)).count(
        "checkpoint[") == cfg.layers
    np.testing.assert_allclose(plain.losses, remat.losses, rtol=1e-5)
    for a, b in zip(tree_leaves(plain.params), tree_leaves(remat.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


PANELS = {"loss": {"train": [2.0, 1.0, 0.5]}, "accuracy": {"test": ([1, 3], [0.5, 0.9])}}


def test_curves_without_matplotlib(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    path = tmp_path / "c.png"
    assert _curves.report_curves(str(path), PANELS) is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "loss: train 2 -> 0.5 (3 points)" in out
    assert "accuracy: test 0.5 -> 0.9 (2 points)" in out and "pip install matplotlib" in out
    assert not path.exists()


def test_curves_png_with_matplotlib(tmp_path, capsys):
    pytest.importorskip("matplotlib")  # the same summary is checked without it above
    path = tmp_path / "sub" / "c.png"
    assert _curves.report_curves(str(path), PANELS, title="t") == str(path)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert f"PNG: {path}" in capsys.readouterr().out


def test_curves_path():
    assert _curves.curves_path("x", "") is None
    assert _curves.curves_path("x", "a.png") == "a.png"
    assert _curves.curves_path("x").endswith(os.path.join("examples", "out", "x_curves.png"))
