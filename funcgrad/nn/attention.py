"""Multi-head dot-product attention and its masks (Flax's `MultiHeadDotProductAttention`).

Layout as in `jax.nn.dot_product_attention`: inputs (..., length, features); per-head
tensors (..., length, heads, head_dim); masks are boolean and broadcast to
(..., heads, q_length, kv_length). Imports `module`, `layers`, `functions`, `random`.
"""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradTypeError
from funcgrad.nn import functions as F
from funcgrad.nn.layers import Dropout, Linear
from funcgrad.nn.module import Module, check_float, child_key, layer_error, scope

__all__ = [
    "MultiHeadAttention", "dot_product_attention", "dot_product_attention_weights",
    "make_attention_mask", "make_causal_mask",
]


def make_attention_mask(query_input, key_input, pairwise_fn=fnp.logical_and):
    """A (..., 1, q_len, kv_len) boolean mask `pairwise_fn(query_input[..., q, None],
    key_input[..., None, k])` (e.g. from padding flags `tokens != pad_id`).

    Example:
        >>> make_attention_mask(fnp.array([True, False]), fnp.array([True, True, False])).shape
        (1, 2, 3)
    """
    q, k = fnp.asarray(query_input), fnp.asarray(key_input)
    mask = pairwise_fn(fnp.expand_dims(q, -1), fnp.expand_dims(k, -2))
    return fnp.expand_dims(mask, -3).astype(bool)


def make_causal_mask(x):
    """A causal (lower-triangular) mask: position q may attend to positions k <= q.

    Args:
        x: an int length L, or an array (..., L) (e.g. the token ids).

    Returns:
        A boolean mask of shape (..., 1, L, L) ((1, L, L) for an int).

    Example:
        >>> make_causal_mask(3)[0].astype(int).tolist()
        [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    """
    shape = (int(x),) if isinstance(x, (int, np.integer)) else tuple(fnp.shape(x))
    idx = fnp.broadcast_to(fnp.arange(shape[-1]), shape)
    return make_attention_mask(idx, idx, fnp.greater_equal)


def _check_mask(mask, weights_shape, where):
    mask = fnp.asarray(mask)
    if mask.dtype != np.dtype(bool):
        raise layer_error(where, f"the mask must be boolean (True = attend), got {mask.dtype}",
                          cls=FuncgradTypeError, hint="use mask.astype(bool)")
    try:
        fnp.broadcast_shapes(mask.shape, weights_shape)
    except (ValueError, TypeError):
        raise layer_error(where, f"mask of shape {tuple(mask.shape)} does not broadcast to "
                          f"(..., heads, q_length, kv_length) = {tuple(weights_shape)}") from None
    return mask


def dot_product_attention_weights(query, key, mask=None):
    """softmax(q k^T / sqrt(head_dim)) of shape (..., heads, q_len, kv_len); masked-out
    logits are set to the dtype's lowest value (a fully masked row is uniform, not NaN).

    Args:
        query: (..., q_len, heads, head_dim).
        key: (..., kv_len, heads, head_dim).
        mask: optional boolean mask broadcastable to (..., heads, q_len, kv_len).

    Example:
        >>> dot_product_attention_weights(fnp.ones((2, 1, 4)), fnp.ones((3, 1, 4))).shape
        (1, 2, 3)
    """
    query, key = fnp.asarray(query), fnp.asarray(key)
    query = query / np.sqrt(query.shape[-1]).astype(query.dtype)
    logits = fnp.einsum("...qhd,...khd->...hqk", query, key)
    if mask is not None:
        mask = _check_mask(mask, logits.shape, "dot_product_attention")
        logits = fnp.where(mask, logits, fnp.finfo(logits.dtype).min)
    return F.softmax(logits, axis=-1)


def dot_product_attention(query, key, value, mask=None):
    """Scaled dot-product attention: (..., q_len, heads, head_dim) from query, key and value
    in the layout of `jax.nn.dot_product_attention` (..., length, heads, head_dim).

    Example:
        >>> q = fnp.ones((2, 1, 4))
        >>> dot_product_attention(q, q, q).shape
        (2, 1, 4)
    """
    weights = dot_product_attention_weights(query, key, mask)
    return fnp.einsum("...hqk,...khd->...qhd", weights, value)


class MultiHeadAttention(Module):
    """Multi-head attention with learned query/key/value/output projections.

    `apply(params, state, q, kv=None, mask=None, train=False, key=None)`: `q` is
    (..., q_len, q_features), `kv` (..., kv_len, kv_features) (default `q`: self-attention),
    `mask` boolean, broadcastable to (..., heads, q_len, kv_len) (True = attend; see
    `make_causal_mask`). Dropout on the attention weights in training needs `key`.

    Args:
        num_heads: the number of heads; it must divide `qkv_features`.
        qkv_features: the projected size of queries/keys/values (default: q's features).
        out_features: the output size (default: q's features).
        dropout: dropout rate on the attention weights.
        use_bias: biases in the projections.

    Params: `{'query', 'key', 'value', 'out'}`, each a `Linear` params dict.

    Example:
        >>> mha = MultiHeadAttention(num_heads=2)
        >>> x = fnp.ones((3, 5, 8))
        >>> params, state = mha.init(random.PRNGKey(0), x)
        >>> mha.apply(params, state, x, mask=make_causal_mask(5))[0].shape
        (3, 5, 8)
    """

    def __init__(self, num_heads, qkv_features=None, out_features=None, dropout=0.0,
                 use_bias=True):
        self.num_heads = int(num_heads)
        self.qkv_features = qkv_features
        self.out_features = out_features
        self.dropout = dropout
        self.use_bias = use_bias
        self._drop = Dropout(dropout)

    @property
    def uses_key(self):
        return self.dropout > 0

    def _projections(self, q):
        f = self.qkv_features or q.shape[-1]
        if f % self.num_heads:
            raise layer_error(self, f"qkv_features={f} is not divisible by num_heads="
                              f"{self.num_heads}")
        out = self.out_features or q.shape[-1]
        lin = lambda n: Linear(n, use_bias=self.use_bias)
        return {"query": lin(f), "key": lin(f), "value": lin(f), "out": lin(out)}

    def _inputs(self, q, kv):
        q = check_float(self, q)
        kv = q if kv is None else check_float(self, kv)
        if q.ndim < 2 or kv.ndim < 2:
            raise layer_error(self, f"expected inputs (..., length, features), got q "
                              f"{tuple(q.shape)} and kv {tuple(kv.shape)}")
        return q, kv

    def init(self, key, q, kv=None):
        q, kv = self._inputs(q, kv)
        projections = self._projections(q)
        heads_out = fnp.zeros((*q.shape[:-1], projections["query"].out_features), q.dtype)
        inputs = {"query": q, "key": kv, "value": kv, "out": heads_out}
        params = {}
        for i, (name, layer) in enumerate(projections.items()):
            with scope(self, f".{name}", layer):
                params[name], _ = layer.init(child_key(key, i), inputs[name])
        return params, {}

    def apply(self, params, state, q, kv=None, mask=None, train=False, key=None):
        q, kv = self._inputs(q, kv)
        if "query" not in params or params["query"]["w"].shape[0] != q.shape[-1]:
            want = params["query"]["w"].shape[0] if "query" in params else "?"
            raise layer_error(self, f"expected q with last dimension {want}, got "
                              f"{tuple(q.shape)}")
        proj = {}
        for name, x in (("query", q), ("key", kv), ("value", kv)):
            layer = Linear(params[name]["w"].shape[1], use_bias=self.use_bias)
            with scope(self, f".{name}", layer):
                y, _ = layer.apply(params[name], {}, x)
            proj[name] = y.reshape(*y.shape[:-1], self.num_heads, -1)
        if mask is not None:
            mask = _check_mask(mask, (*q.shape[:-2], self.num_heads, q.shape[-2],
                                      kv.shape[-2]), self)
        weights = dot_product_attention_weights(proj["query"], proj["key"], mask)
        with scope(self, ".dropout", self._drop):
            weights, _ = self._drop.apply({}, {}, weights, train=train, key=key)
        y = fnp.einsum("...hqk,...khd->...qhd", weights, proj["value"])
        y = y.reshape(*y.shape[:-2], -1)
        out = Linear(params["out"]["w"].shape[1], use_bias=self.use_bias)
        with scope(self, ".out", out):
            y, _ = out.apply(params["out"], {}, y)
        return y, state
