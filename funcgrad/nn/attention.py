"""Multi-head dot-product attention and its masks (Flax's `MultiHeadDotProductAttention`).

Layout as in `jax.nn.dot_product_attention`: inputs (..., length, features); per-head
tensors (..., length, heads, head_dim); masks are boolean and broadcast to
(..., heads, q_length, kv_length). Imports `module`, `layers`, `functions`, `random`.
"""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.errors import FuncgradTypeError, FuncgradValueError
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
    _check_broadcast(mask, weights_shape, where, "mask")
    return mask


def _check_broadcast(x, shape, where, what):
    try:
        fits = fnp.broadcast_shapes(x.shape, tuple(shape)) == tuple(shape)
    except (ValueError, TypeError):
        fits = False
    if not fits:
        raise layer_error(where, f"{what} of shape {tuple(x.shape)} does not broadcast to "
                          f"(..., heads, q_length, kv_length) = {tuple(shape)}")


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


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None, return_residual=False):
    """Scaled dot-product attention, `softmax(q k^T * scale + bias) v` per head, exactly as
    `jax.nn.dot_product_attention` (its "xla" implementation).

    Shapes: B batch (leading axes, or none), T query length, S key/value length, N query
    heads, K key/value heads (N a multiple of K: grouped-query attention), H head size.

    Args:
        query: (B..., T, N, H). key, value: (B..., S, K, H), of query's dtype.
        bias: added to the logits; broadcastable to (B, N, T, S) (made 4-D first).
        mask: boolean (True = attend), broadcastable to (B, N, T, S) (made 4-D first).
        scale: the logits' factor (default 1 / sqrt(H)).
        is_causal: query t attends to keys s <= t.
        query_seq_lengths, key_value_seq_lengths: int32 (B,): positions past a length are
            masked out (and query rows past it give zeros).
        local_window_size: (left, right) or an int for both: query t attends to keys in
            [t - left, t + right].
        implementation: None or "xla" ("cudnn", cuDNN's flash attention, is an error).
        return_residual: also return the logsumexp of the masked logits, (B..., T, N).

    The logits and the softmax are computed in float32 (float64 inputs: in float64, where
    JAX rounds the softmax to float32); masked logits are `-0.7 * max` of float32, so a
    fully masked row is uniform, not NaN.

    Example:
        >>> q = fnp.ones((2, 1, 4))
        >>> dot_product_attention(q, q, q, is_causal=True).shape
        (2, 1, 4)
    """
    if implementation == "cudnn":
        raise layer_error("dot_product_attention", "implementation='cudnn' (cuDNN flash "
                          "attention) is not available in funcgrad",
                          hint="use implementation=None or 'xla' (the same numbers)")
    if implementation not in (None, "xla"):
        raise layer_error("dot_product_attention", f"unsupported implementation "
                          f"{implementation!r}", cls=FuncgradValueError,
                          hint="use None or 'xla'")
    q, k, v = (fnp.asarray(t) for t in (query, key, value))
    out_shape = q.shape
    q, k, v, batch = _attention_4d(q, k, v)
    bias, mask = (None if t is None else _as_4d(fnp.asarray(t)) for t in (bias, mask))
    lengths = [None if n is None else _seq_lengths(n, batch, what)
               for n, what in ((query_seq_lengths, "query_seq_lengths"),
                               (key_value_seq_lengths, "key_value_seq_lengths"))]
    if isinstance(local_window_size, (int, np.integer)):
        local_window_size = (int(local_window_size), int(local_window_size))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    out, lse = _attention_core(q, k, v, bias, mask, is_causal, scale, lengths,
                               local_window_size)
    out = out.reshape(out_shape)
    return (out, lse.reshape(out_shape[:-1])) if return_residual else out


def _as_4d(t):
    return t.reshape((1,) * (4 - t.ndim) + t.shape) if t.ndim < 4 else t


def _attention_4d(q, k, v):
    """query, key, value as (B, T|S, N|K, H), checked as JAX checks them, and the batch
    shape (leading axes beyond one are flattened into B)."""
    where = "dot_product_attention"
    if q.ndim < 3 or k.ndim != q.ndim or v.shape != k.shape:
        raise layer_error(where, f"expected query (B..., T, N, H) and key = value (B..., S, K,"
                          f" H) shapes, got {q.shape}, {k.shape}, {v.shape}",
                          cls=FuncgradValueError)
    batch = q.shape[:-3]
    if k.shape[:-3] != batch or q.shape[-1] != k.shape[-1] or q.shape[-2] % k.shape[-2]:
        raise layer_error(where, f"query {q.shape} and key {k.shape} need the same batch and "
                          "head size, and query heads a multiple of key/value heads",
                          cls=FuncgradValueError)
    if not q.dtype == k.dtype == v.dtype:
        raise layer_error(where, f"query, key and value need one dtype, got {q.dtype}, "
                          f"{k.dtype}, {v.dtype}", hint="cast them with .astype")
    b = int(np.prod(batch, dtype=np.int64))
    return (*(t.reshape((b,) + t.shape[-3:]) for t in (q, k, v)), batch)


def _seq_lengths(n, batch, what):
    n = fnp.asarray(n)
    if n.dtype != np.dtype(np.int32) or n.shape != tuple(batch):
        raise layer_error("dot_product_attention", f"{what} must be int32 of shape "
                          f"{tuple(batch)} (the batch), got {n.dtype}{list(n.shape)}")
    return n.reshape(-1)


def _attention_core(q, k, v, bias, mask, is_causal, scale, lengths, window):
    """(encoded (B, T, N, H), logsumexp (B, T, N)) of 4-D operands, JAX's XLA path."""
    (b, t, n, h), (s, kh) = q.shape, k.shape[1:3]
    dt = fnp.promote_types(q.dtype, np.float32)
    grouped = q.reshape(b, t, kh, n // kh, h)
    logits = fnp.einsum("BTKGH,BSKH->BKGTS", grouped, k, preferred_element_type=dt)
    logits = logits.reshape(b, n, t, s) * fnp.asarray(scale, dt)
    if bias is not None:
        _check_broadcast(bias, logits.shape, "dot_product_attention", "bias")
        logits = (logits + bias).astype(dt)
    keep = _attention_mask(mask, is_causal, lengths, window, (b, n, t, s))
    if keep is not None:
        big = -0.7 * min(float(fnp.finfo(dt).max), float(fnp.finfo(np.float32).max))
        logits = fnp.where(keep, logits, fnp.asarray(big, dt))
    probs = F.softmax(logits, axis=-1).astype(k.dtype).reshape(b, kh, n // kh, t, s)
    out = fnp.einsum("BKGTS,BSKH->BTKGH", probs, v).reshape(b, t, n, h)
    if lengths[0] is not None:
        rows = fnp.arange(t)[None, :] < lengths[0][:, None]
        out = out * rows[:, :, None, None].astype(out.dtype)
    lse = F.logsumexp(logits, axis=-1).astype(k.dtype).transpose(0, 2, 1)
    return out, lax.stop_gradient(lse)


def _attention_mask(mask, is_causal, lengths, window, shape):
    """The boolean mask (broadcastable to (B, N, T, S)) of every constraint given, or None."""
    t, s = shape[2:]
    q_pos, k_pos = fnp.arange(t)[:, None], fnp.arange(s)[None, :]
    parts = [] if mask is None else [_check_mask(mask, shape, "dot_product_attention")]
    if is_causal:
        parts.append((q_pos >= k_pos)[None, None])
    if window is not None:
        left, right = window
        parts.append(((q_pos <= k_pos + left) & (q_pos >= k_pos - right))[None, None])
    q_len, kv_len = lengths
    if q_len is not None:
        parts.append((fnp.arange(t)[None, :] < q_len[:, None])[:, None, :, None])
    if kv_len is not None:
        parts.append((fnp.arange(s)[None, :] < kv_len[:, None])[:, None, None, :])
    if not parts:
        return None
    keep = parts[0]
    for p in parts[1:]:
        keep = keep & p
    return keep


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
