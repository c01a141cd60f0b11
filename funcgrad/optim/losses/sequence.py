"""The CTC loss (Graves et al. 2006) with optax's interface: padded batches of logit frames
and label sequences, the forward (alpha) recursion run by `lax.scan`, so `grad`, `jit` and
`vmap` go through it.

Imports `funcgrad.numpy`, `funcgrad.lax` and `funcgrad.nn`.
"""

import funcgrad.numpy as fnp
from funcgrad import lax, nn
from funcgrad.errors import FuncgradValueError, op_error

__all__ = ["ctc_loss", "ctc_loss_with_forward_probs"]


def _check(logits, logit_paddings, labels, label_paddings):
    op = "ctc_loss"
    if logits.ndim != 3 or labels.ndim != 2:
        raise op_error(op, f"expected logits [batch, time, classes] and labels [batch, length], "
                           f"got {tuple(logits.shape)} and {tuple(labels.shape)}",
                       cls=FuncgradValueError)
    if labels.shape != label_paddings.shape or logits.shape[:2] != logit_paddings.shape:
        raise op_error(op, f"paddings {tuple(logit_paddings.shape)}, "
                           f"{tuple(label_paddings.shape)} must match logits "
                           f"{tuple(logits.shape[:2])} and labels {tuple(labels.shape)}",
                       cls=FuncgradValueError)
    if labels.shape[0] != logits.shape[0]:
        raise op_error(op, f"labels have batch size {labels.shape[0]}, logits "
                           f"{logits.shape[0]}", cls=FuncgradValueError)


def ctc_loss_with_forward_probs(logits, logit_paddings, labels, label_paddings, *,
                                blank_id: int = 0, log_epsilon=-1e5):
    """The CTC loss per sequence and the forward log-probabilities.

    Args:
        logits: [batch, time, classes] unnormalized log-probabilities.
        logit_paddings: [batch, time], 1.0 on padded frames.
        labels: [batch, length] integer labels.
        label_paddings: [batch, length], 1.0 on padded labels.
        blank_id: the class of the blank symbol.
        log_epsilon: the log-probability standing for 0.

    Returns:
        `(per_seq_loss [batch], logalpha_phi [time, batch, length+1],
        logalpha_emit [time, batch, length])`.
    """
    logits, labels = fnp.asarray(logits), fnp.asarray(labels)
    logit_paddings, label_paddings = fnp.asarray(logit_paddings), fnp.asarray(label_paddings)
    _check(logits, logit_paddings, labels, label_paddings)
    batch, _, num_classes = logits.shape
    max_label_len = labels.shape[1]
    logprobs = nn.log_softmax(logits)
    label_lens = max_label_len - fnp.sum(label_paddings, axis=1).astype(fnp.int32)
    repeat = fnp.pad((labels[:, :-1] == labels[:, 1:]).astype(fnp.float32), ((0, 0), (0, 1)))
    logprobs_phi = fnp.transpose(logprobs[:, :, blank_id:blank_id + 1], (1, 0, 2))
    one_hot = nn.one_hot(labels, num_classes)
    logprobs_emit = fnp.transpose(fnp.einsum("btk,bnk->btn", logprobs, one_hot), (1, 0, 2))
    phi_init = (fnp.ones((batch, max_label_len + 1)) * log_epsilon).at[:, 0].set(0.0)
    emit_init = fnp.ones((batch, max_label_len)) * log_epsilon

    def add_to_phi(phi, added):
        return fnp.concatenate([phi[:, :1], fnp.logaddexp(phi[:, 1:], added)], axis=-1)

    def step(carry, x):
        prev_phi, prev_emit = carry
        logprob_emit, logprob_phi, pad = x
        phi = add_to_phi(prev_phi, prev_emit + log_epsilon * repeat)
        next_emit = fnp.logaddexp(phi[:, :-1] + logprob_emit, prev_emit + logprob_emit)
        next_phi = add_to_phi(phi + logprob_phi,
                              prev_emit + logprob_phi + log_epsilon * (1.0 - repeat))
        pad = pad.reshape((batch, 1))
        next_emit = pad * prev_emit + (1.0 - pad) * next_emit
        next_phi = pad * prev_phi + (1.0 - pad) * next_phi
        return (next_phi, next_emit), (next_phi, next_emit)

    xs = (logprobs_emit, logprobs_phi, fnp.transpose(logit_paddings, (1, 0)))
    _, (logalpha_phi, logalpha_emit) = lax.scan(step, (phi_init, emit_init), xs)
    last = add_to_phi(logalpha_phi[-1], logalpha_emit[-1])
    logalpha_phi = logalpha_phi.at[-1].set(last)
    per_seq_loss = -fnp.einsum("bn,bn->b", last, nn.one_hot(label_lens, max_label_len + 1))
    return per_seq_loss, logalpha_phi, logalpha_emit


def ctc_loss(logits, logit_paddings, labels, label_paddings, *, blank_id: int = 0,
             log_epsilon=-1e5):
    """The CTC loss per sequence: `-log p(labels | logits)` summed over the alignments.

    Example:
        >>> loss = ctc_loss(logits, fnp.zeros(logits.shape[:2]), labels,
        ...                 fnp.zeros(labels.shape))
    """
    return ctc_loss_with_forward_probs(logits, logit_paddings, labels, label_paddings,
                                       blank_id=blank_id, log_epsilon=log_epsilon)[0]
