"""funcgrad.nn layers: values vs NumPy, the init/apply protocol, key and state threading,
error paths, weight sharing, and agreement under jit, grad and vmap."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import nn, random
from funcgrad.errors import FuncgradTypeError, FuncgradValueError
from funcgrad.tree_util import tree_leaves, tree_map

KEY = random.PRNGKey(0)
RNG = np.random.default_rng(0)


def _rand(*shape):
    return fnp.asarray(RNG.standard_normal(shape).astype(np.float32))


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _trees_close(a, b, tol=1e-5):
    for x, y in zip(tree_leaves(a), tree_leaves(b), strict=True):
        _close(x, y, tol)


# --- numpy references ---------------------------------------------------------------------------
def _np_conv(x, w, stride, pad, dilation=(1, 1), groups=1):
    """Direct NCHW x OIHW cross-correlation with explicit (lo, hi) padding pairs."""
    x = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), *pad))
    w = np.asarray(w, np.float64)
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    oh = (x.shape[2] - (kh - 1) * dh - 1) // sh + 1
    ow = (x.shape[3] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((x.shape[0], o, oh, ow))
    og = o // groups
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * sh:i * sh + (kh - 1) * dh + 1:dh,
                      j * sw:j * sw + (kw - 1) * dw + 1:dw]
            for g in range(groups):
                out[:, g * og:(g + 1) * og, i, j] = np.einsum(
                    "nchw,ochw->no", patch[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og])
    return out


def _np_pool(x, k, reduce):
    n, c, h, w = x.shape
    x = np.asarray(x)[:, :, :h // k * k, :w // k * k].reshape(n, c, h // k, k, w // k, k)
    return reduce(x, axis=(3, 5))


# --- leaf layers --------------------------------------------------------------------------------
def test_linear_values_init_and_options():
    layer = nn.Linear(5)
    params, state = layer.init(KEY, _rand(2, 7))
    assert state == {} and params["w"].shape == (7, 5) and params["b"].shape == (5,)
    np.testing.assert_array_equal(params["b"], np.zeros(5))
    kw, _ = random.split(KEY)
    np.testing.assert_array_equal(params["w"], nn.initializers.lecun_normal()(kw, (7, 5)))
    x = _rand(3, 4, 7)
    y, _ = layer.apply(params, state, x)
    _close(y, np.asarray(x) @ np.asarray(params["w"]) + np.asarray(params["b"]))
    nobias = nn.Linear(2, use_bias=False, w_init=nn.initializers.ones)
    p, _ = nobias.init(KEY, x)
    assert set(p) == {"w"}
    _close(nobias.apply(p, {}, x)[0], np.asarray(x).sum(-1, keepdims=True).repeat(2, -1))


@pytest.mark.parametrize("stride, padding, dilation, groups", [
    (1, "SAME", 1, 1), (2, "VALID", 1, 1), (1, 1, 2, 1), ((2, 1), ((1, 0), (2, 1)), 1, 2),
])
def test_conv2d_matches_numpy(stride, padding, dilation, groups):
    conv = nn.Conv2d(4, 3, stride=stride, padding=padding, dilation=dilation, groups=groups)
    x = _rand(2, 4, 9, 8)
    params, _ = conv.init(KEY, x)
    assert params["w"].shape == (4, 4 // groups, 3, 3)
    params["b"] = _rand(4)
    y, _ = conv.apply(params, {}, x)
    s = (stride, stride) if isinstance(stride, int) else stride
    d = (dilation, dilation)
    if padding == "SAME":
        pad = [(1, 1), (1, 1)]
    elif padding == "VALID":
        pad = [(0, 0), (0, 0)]
    elif isinstance(padding, int):
        pad = [(padding, padding)] * 2
    else:
        pad = list(padding)
    want = _np_conv(x, params["w"], s, pad, d, groups) + np.asarray(params["b"])[:, None, None]
    _close(y, want, 1e-4)
    _close(conv.apply(params, {}, x[0])[0], want[0], 1e-4)  # an unbatched CHW image


def test_conv2d_default_init_uses_oihw_fans():
    w, _ = nn.Conv2d(64, 3).init(KEY, fnp.ones((1, 32, 5, 5)))
    std = float(np.asarray(w["w"]).std())
    assert abs(std / np.sqrt(1 / (32 * 9)) - 1) < 0.05


def test_pooling():
    x = _rand(2, 3, 8, 7)
    _close(nn.MaxPool2d(2).apply({}, {}, x)[0], _np_pool(x, 2, np.max))
    _close(nn.AvgPool2d(2).apply({}, {}, x)[0], _np_pool(x, 2, np.mean))
    y, _ = nn.MaxPool2d(3, stride=1, padding="SAME").apply({}, {}, x)
    assert y.shape == x.shape
    xp = np.pad(np.asarray(x), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    _close(y[:, :, 2, 3], xp[:, :, 2:5, 3:6].max(axis=(2, 3)))
    avg, _ = nn.AvgPool2d(3, stride=1, padding=1).apply({}, {}, x)
    _close(avg[:, :, 0, 0], np.asarray(x)[:, :, :2, :2].sum(axis=(2, 3)) / 9)
    assert nn.MaxPool2d((2, 3)).apply({}, {}, x[0])[0].shape == (3, 4, 2)


def test_batchnorm_train_and_eval():
    bn = nn.BatchNorm(momentum=0.8)
    x = _rand(6, 3, 4, 4) * 2 + 1
    params, state = bn.init(None, x)
    assert set(params) == {"scale", "bias"} and set(state) == {"mean", "var"}
    params = {"scale": _rand(3), "bias": _rand(3)}
    y, new = bn.apply(params, state, x, train=True)
    xn = np.asarray(x, np.float64)
    mean, var = xn.mean(axis=(0, 2, 3)), xn.var(axis=(0, 2, 3))
    sh = (1, 3, 1, 1)
    want = ((xn - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-5)
            * np.asarray(params["scale"]).reshape(sh) + np.asarray(params["bias"]).reshape(sh))
    _close(y, want, 1e-4)
    _close(new["mean"], 0.2 * mean)
    _close(new["var"], 0.8 + 0.2 * var)
    y_eval, same = bn.apply(params, new, x, train=False)
    assert same is new
    want_eval = ((xn - 0.2 * mean.reshape(sh)) / np.sqrt(0.8 + 0.2 * var.reshape(sh) + 1e-5)
                 * np.asarray(params["scale"]).reshape(sh)
                 + np.asarray(params["bias"]).reshape(sh))
    _close(y_eval, want_eval, 1e-4)
    # channels-last and (N, C) features
    y2, s2 = nn.BatchNorm(axis=-1).apply(*nn.BatchNorm(axis=-1).init(None, x), x, train=True)
    _close(s2["mean"], 0.1 * xn.mean(axis=(0, 1, 2)))
    g = fg.grad(lambda p: bn.apply(p, state, x, train=True)[0].sum())(params)
    _close(g["bias"], np.full(3, 6 * 16.0), 1e-3)


def test_layernorm():
    x = _rand(4, 5, 6)
    ln = nn.LayerNorm()
    params, _ = ln.init(None, x)
    assert params["scale"].shape == (6,)
    xn = np.asarray(x, np.float64)
    want = (xn - xn.mean(-1, keepdims=True)) / np.sqrt(xn.var(-1, keepdims=True) + 1e-5)
    _close(ln.apply(params, {}, x)[0], want, 1e-4)
    ln2 = nn.LayerNorm(axis=(-2, -1), eps=1e-6)
    p2, _ = ln2.init(None, x)
    assert p2["bias"].shape == (5, 6)
    m, v = xn.mean((1, 2), keepdims=True), xn.var((1, 2), keepdims=True)
    _close(ln2.apply(p2, {}, x)[0], (xn - m) / np.sqrt(v + 1e-6), 1e-4)


def test_dropout():
    drop = nn.Dropout(0.25)
    x = fnp.ones((200, 50))
    np.testing.assert_array_equal(drop.apply({}, {}, x)[0], x)
    y = np.asarray(drop.apply({}, {}, x, train=True, key=KEY)[0])
    assert set(np.unique(y).tolist()) == {0.0, float(np.float32(1 / 0.75))}
    assert abs((y == 0).mean() - 0.25) < 0.02
    mask = np.asarray(random.bernoulli(KEY, 0.75, (200, 50)))
    np.testing.assert_array_equal(y, np.where(mask, np.float32(1 / 0.75), 0))
    assert float(nn.Dropout(1.0).apply({}, {}, x, train=True, key=KEY)[0].sum()) == 0
    np.testing.assert_array_equal(nn.Dropout(0.0).apply({}, {}, x, train=True)[0], x)
    with pytest.raises(FuncgradTypeError, match="Dropout: train=True needs a PRNG key"):
        drop.apply({}, {}, x, train=True)
    with pytest.raises(ValueError, match="rate"):
        nn.Dropout(1.5)


def test_embedding_and_attend():
    emb = nn.Embedding(10, 4)
    params, _ = emb.init(KEY)
    table = np.asarray(params["embedding"])
    assert table.shape == (10, 4) and abs(table.std() - 0.5) < 0.25
    ids = fnp.array([[1, 2], [9, 0]])
    np.testing.assert_array_equal(emb.apply(params, {}, ids)[0], table[np.asarray(ids)])
    q = _rand(3, 4)
    _close(emb.attend(params, q), np.asarray(q) @ table.T)
    with pytest.raises(FuncgradTypeError, match="Embedding: expected integer ids"):
        emb.apply(params, {}, fnp.ones((2,)))


# --- containers: keys, state, paths -----------------------------------------------------------
def test_sequential_threads_keys_and_state():
    model = nn.Sequential([nn.Linear(8), nn.BatchNorm(), nn.ReLU(), nn.Dropout(0.5),
                           nn.Linear(3)])
    x = _rand(16, 5)
    params, state = model.init(KEY, x)
    assert len(params) == len(state) == 5 and params[2] == {} and state[0] == {}
    np.testing.assert_array_equal(params[0]["w"],
                                  nn.Linear(8).init(random.fold_in(KEY, 0), x)[0]["w"])
    np.testing.assert_array_equal(params[4]["w"], nn.Linear(3).init(
        random.fold_in(KEY, 4), fnp.ones((1, 8)))[0]["w"])
    step_key = random.PRNGKey(5)
    y, new_state = model.apply(params, state, x, train=True, key=step_key)
    h, _ = model.layers[0].apply(params[0], {}, x)
    h, bn_state = model.layers[1].apply(params[1], state[1], h, train=True)
    h = nn.relu(h)
    h, _ = model.layers[3].apply({}, {}, h, train=True, key=random.fold_in(step_key, 3))
    want, _ = model.layers[4].apply(params[4], {}, h)
    _close(y, want)
    _trees_close(new_state[1], bn_state)
    y_eval, same = model.apply(params, new_state, x)
    _trees_close(same, new_state)
    assert not np.allclose(np.asarray(y_eval), np.asarray(y))


def test_residual():
    block = nn.Residual(nn.Sequential(nn.Linear(6), nn.Tanh()))
    x = _rand(3, 6)
    params, state = block.init(KEY, x)
    assert set(params) == {"inner"}
    inner, _ = block.inner.apply(params["inner"], state["inner"], x)
    _close(block.apply(params, state, x)[0], np.asarray(inner) + np.asarray(x))
    proj = nn.Residual(nn.Linear(4), shortcut=nn.Linear(4, use_bias=False))
    p, s = proj.init(KEY, x)
    np.testing.assert_array_equal(p["shortcut"]["w"], nn.Linear(4, use_bias=False).init(
        random.fold_in(KEY, 1), x)[0]["w"])
    want = np.asarray(x) @ (np.asarray(p["inner"]["w"]) + np.asarray(p["shortcut"]["w"]))
    _close(proj.apply(p, s, x)[0], want)
    with pytest.raises(FuncgradValueError, match=r"Residual: the inner branch gives shape "
                                                  r"\(3, 4\) but the shortcut gives \(3, 6\)"):
        nn.Residual(nn.Linear(4)).apply(p, s, x)


def test_errors_name_the_layer_path():
    model = nn.Sequential(nn.Linear(64), nn.ReLU(),
                          nn.Residual(nn.Sequential(nn.Linear(32), nn.GELU(), nn.Linear(64))),
                          nn.Dropout(0.1))
    params, state = model.init(KEY, fnp.ones((1, 16)))
    with pytest.raises(FuncgradValueError, match=r"^Sequential\[0\] Linear: expected input "
                                                  r"with last dimension 16, got \(8, 32\)"):
        model.apply(params, state, fnp.ones((8, 32)))
    bad = list(params)
    bad[2] = {"inner": [{"w": fnp.ones((32, 32)), "b": fnp.ones(32)}, {}, params[2]["inner"][2]]}
    msg = (r"^Sequential\[2\]\.inner\[0\] Linear: expected input with last dimension 32, "
           r"got \(8, 64\)")
    with pytest.raises(FuncgradValueError, match=msg):
        model.apply(bad, state, fnp.ones((8, 16)))
    with pytest.raises(FuncgradValueError, match=msg):  # the same message under jit
        fg.jit(lambda p, x: model.apply(p, state, x)[0])(bad, fnp.ones((8, 16)))
    with pytest.raises(FuncgradTypeError, match=r"^Sequential\[3\] Dropout: train=True needs"):
        model.apply(params, state, fnp.ones((8, 16)), train=True)
    with pytest.raises(FuncgradTypeError, match=r"^Sequential\[0\] Linear: expected a "
                                                 r"floating-point input, got int32"):
        model.apply(params, state, fnp.ones((8, 16), fnp.int32))
    with pytest.raises(FuncgradValueError, match=r"Sequential: params must be a list with one "
                                                  r"entry per layer \(4\)"):
        model.apply(params[:2], state, fnp.ones((8, 16)))
    conv = nn.Sequential(nn.Conv2d(4, 3), nn.MaxPool2d(2))
    cp, cs = conv.init(KEY, fnp.ones((1, 3, 8, 8)))
    with pytest.raises(FuncgradValueError, match=r"Sequential\[0\] Conv2d: expected input with "
                                                  r"3 channels .* got shape \(2, 1, 8, 8\)"):
        conv.apply(cp, cs, fnp.ones((2, 1, 8, 8)))
    with pytest.raises(FuncgradValueError, match=r"Sequential\[0\] Conv2d: expected an NCHW"):
        conv.apply(cp, cs, fnp.ones((8, 8)))


# --- attention ----------------------------------------------------------------------------------
def _np_mha(params, q, kv, heads, mask=None):
    lin = lambda p, x: np.asarray(x, np.float64) @ np.asarray(p["w"]) + np.asarray(p["b"])
    split = lambda t: t.reshape(*t.shape[:-1], heads, -1)
    qh, kh, vh = split(lin(params["query"], q)), split(lin(params["key"], kv)), \
        split(lin(params["value"], kv))
    logits = np.einsum("bqhd,bkhd->bhqk", qh, kh) / np.sqrt(qh.shape[-1])
    if mask is not None:
        logits = np.where(mask, logits, -1e30)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    out = np.einsum("bhqk,bkhd->bqhd", w, vh).reshape(*qh.shape[:2], -1)
    return lin(params["out"], out)


def test_multi_head_attention():
    mha = nn.MultiHeadAttention(num_heads=2, qkv_features=8, out_features=5)
    q, kv = _rand(3, 4, 6), _rand(3, 7, 10)
    params, state = mha.init(KEY, q, kv)
    assert params["query"]["w"].shape == (6, 8) and params["key"]["w"].shape == (10, 8)
    assert params["out"]["w"].shape == (8, 5)
    y, _ = mha.apply(params, state, q, kv)
    _close(y, _np_mha(params, q, kv, 2), 1e-4)
    self_attn = nn.MultiHeadAttention(num_heads=3)
    x = _rand(2, 5, 6)
    p, s = self_attn.init(KEY, x)
    causal = nn.make_causal_mask(5)
    assert causal.shape == (1, 5, 5) and causal.dtype == np.bool_
    y, _ = self_attn.apply(p, s, x, mask=causal)
    _close(y, _np_mha(p, x, x, 3, np.asarray(causal)), 1e-4)
    # causality: changing the last position leaves the earlier outputs unchanged
    x2 = fnp.concatenate([x[:, :4], x[:, 4:] + 10], axis=1)
    _close(self_attn.apply(p, s, x2, mask=causal)[0][:, :4], y[:, :4])
    pad = nn.make_attention_mask(fnp.array([[1, 1, 1, 0, 0]]) > 0,
                                 fnp.array([[1, 1, 1, 0, 0]]) > 0)
    assert pad.shape == (1, 1, 5, 5)
    # per-example vmap agrees with the batched call
    _close(fg.vmap(lambda e: self_attn.apply(p, s, e, mask=causal)[0])(x), y)
    with pytest.raises(FuncgradValueError, match="mask of shape"):
        self_attn.apply(p, s, x, mask=fnp.ones((4, 5, 5), bool))
    with pytest.raises(FuncgradTypeError, match="mask must be boolean"):
        self_attn.apply(p, s, x, mask=fnp.ones((5, 5)))
    drop = nn.MultiHeadAttention(num_heads=3, dropout=0.5)
    with pytest.raises(FuncgradTypeError, match=r"MultiHeadAttention\.dropout Dropout"):
        drop.apply(p, s, x, train=True)
    yd, _ = drop.apply(p, s, x, train=True, key=KEY)
    assert yd.shape == y.shape and not np.allclose(np.asarray(yd), np.asarray(y))


# --- weight sharing -----------------------------------------------------------------------------
def test_tied_embedding_gradients_accumulate():
    emb = nn.Embedding(7, 4)
    params, _ = emb.init(KEY)
    ids, targets = fnp.array([1, 3, 3, 6]), fnp.array([2, 0, 5, 1])

    def loss(p_in, p_out):
        h, _ = emb.apply(p_in, {}, ids)
        logits = emb.attend(p_out, fnp.tanh(h))
        return nn.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    tied = fg.grad(lambda p: loss(p, p))(params)["embedding"]
    g_in, g_out = fg.grad(loss, argnums=(0, 1))(params, params)
    _close(tied, np.asarray(g_in["embedding"]) + np.asarray(g_out["embedding"]))
    assert np.abs(np.asarray(g_in["embedding"])).sum() > 0
    assert np.abs(np.asarray(g_out["embedding"])).sum() > 0


class TiedTwice(nn.Module):
    """A custom layer applying one Linear's parameters twice (a shared params subtree)."""

    uses_key = False

    def __init__(self, features):
        self.inner = nn.Linear(features)

    def init(self, key, x):
        p, s = self.inner.init(nn.child_key(key, 0), x)
        return {"shared": p}, {}

    def apply(self, params, state, x, train=False, key=None):
        with nn.scope(self, ".inner", self.inner):
            h, _ = self.inner.apply(params["shared"], {}, x)
            y, _ = self.inner.apply(params["shared"], {}, fnp.tanh(h))
        return y, state


def test_shared_params_subtree():
    layer = TiedTwice(3)
    x = _rand(4, 3)
    params, state = layer.init(KEY, x)
    g = fg.grad(lambda p: layer.apply(p, state, x)[0].sum())(params)["shared"]
    lin = layer.inner

    def two(p1, p2):
        h, _ = lin.apply(p1, {}, x)
        return lin.apply(p2, {}, fnp.tanh(h))[0].sum()

    g1, g2 = fg.grad(two, argnums=(0, 1))(params["shared"], params["shared"])
    _trees_close(g, tree_map(lambda a, b: a + b, g1, g2))
    with pytest.raises(FuncgradValueError, match=r"^TiedTwice\.inner Linear: expected input"):
        layer.apply(params, state, _rand(4, 5))


# --- transforms -----------------------------------------------------------------------------------
def _cnn():
    return nn.Sequential(nn.Conv2d(4, 3), nn.BatchNorm(), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 3, stride=2, padding=1), nn.AvgPool2d(2), nn.Flatten(),
                         nn.Linear(16), nn.Dropout(0.3), nn.Residual(nn.Sequential(
                             nn.Linear(16), nn.GELU())), nn.LayerNorm(), nn.Linear(5))


def test_model_under_jit_grad_and_vmap():
    model = _cnn()
    x, labels = _rand(4, 2, 8, 8), fnp.array([0, 1, 4, 2])
    params, state = model.init(KEY, x)

    def loss(p, s, x, y, k):
        logits, s = model.apply(p, s, x, train=True, key=k)
        return nn.softmax_cross_entropy_with_integer_labels(logits, y).mean(), s

    (l_e, s_e), g_e = fg.value_and_grad(loss, has_aux=True)(params, state, x, labels, KEY)
    (l_j, s_j), g_j = fg.jit(fg.value_and_grad(loss, has_aux=True))(params, state, x, labels,
                                                                     KEY)
    _close(l_e, l_j)
    _trees_close(g_e, g_j, 1e-4)
    _trees_close(s_e, s_j)
    assert len(tree_leaves(g_e)) == len(tree_leaves(params))

    # per-example gradients of the eval-mode model: vmap agrees with a Python loop
    def ex_loss(p, xi, yi):
        logits, _ = model.apply(p, state, xi[None])
        return nn.softmax_cross_entropy_with_integer_labels(logits, yi[None])[0]

    per_ex = fg.vmap(fg.grad(ex_loss), in_axes=(None, 0, 0))(params, x, labels)
    for i in range(4):
        _trees_close(tree_map(lambda a, i=i: a[i], per_ex), fg.grad(ex_loss)(params, x[i],
                                                                            labels[i]), 1e-4)


def test_init_under_jit_and_vmap():
    model = nn.Sequential(nn.Conv2d(4, 3), nn.BatchNorm(), nn.ReLU(), nn.Flatten(),
                          nn.Linear(3))
    x = fnp.ones((2, 1, 5, 5))
    eager = model.init(KEY, x)
    _trees_close(fg.jit(model.init)(KEY, x), eager, 0)
    keys = random.split(KEY, 3)
    ensemble, _ = fg.vmap(lambda k: model.init(k, x))(keys)  # three independent models
    assert ensemble[4]["w"].shape == (3, 100, 3)
    _trees_close(tree_map(lambda a: a[2], ensemble), model.init(keys[2], x)[0], 0)


def test_summary():
    model = nn.Sequential(nn.Linear(3), nn.ReLU(), nn.Linear(2))
    params, state = model.init(KEY, fnp.ones((1, 4)))
    text = nn.summary(params)
    lines = text.splitlines()
    assert lines[0].split() == ["params", "shape", "dtype", "count", "bytes"]
    assert lines[1].split() == ["[0]['b']", "(3,)", "float32", "3", "12", "B"]
    assert lines[2].split()[:5] == ["[0]['w']", "(4,", "3)", "float32", "12"]
    assert lines[-1].split() == ["total", "23", "92", "B"]
    assert nn.count_params(params) == 23
    assert nn.summary(state, title="state").splitlines()[-1].split() == ["total", "0", "0", "B"]
