"""The training loss: label-smoothed cross-entropy of the model's output projection, computed a chunk of
target tokens at a time so that the logits of the whole batch (tokens x vocabulary, float32) never exist.

    criterion = TranslationLoss(model, label_smoothing=0.1)     # wrap this in DistributedDataParallel
    loss_sum, n_tokens = criterion(src, tgt_in, tgt_out)       # summed over non-padding target tokens

The value and gradients are those of F.cross_entropy(logits, targets, label_smoothing=ls, ignore_index=pad,
reduction="sum") on logits = model.project(decoder output): for each chunk, the forward pass computes the
chunk's log-softmax, its loss, and at once the gradients with respect to the decoder output and the
projection's weights (softmax minus the smoothed target distribution), which backward only scales. A batch of
4096 target tokens over 8000 pieces held five or six float32 copies of its 131 MB of logits at once;
here one chunk's (chunk_tokens x vocabulary). On a CPU with the C kernels (nmt.model.native), a chunk's
softmax, loss and gradient are one kernel call over its logits in their own dtype, with no float32 copy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.model.native_ops import TRAINING_DTYPES, cross_entropy_kernel
from nmt.model.transformer import Transformer

# A chunk's target tokens on a CPU, where the C kernel's pass over a chunk's logits stays in the caches
CHUNK_TOKENS = 1024
# On a GPU a chunk costs a few dozen kernel launches whatever its size, and a step of `base` there waits on the host's
# launches (about 1,500 a step at 16,384 tokens, 2026-11-29): chunks as large as this many logits allow (512 MiB in
# float32; about 1 GiB at a chunk's peak, its float32 logits and their log-softmax), at least CHUNK_TOKENS. At
# 32,000 pieces: 4,096 tokens, 4 chunks for a micro-batch of 16,384 tokens where there were 16.
GPU_CHUNK_LOGITS = 2**27


def chunk_tokens(hidden: Tensor, vocab: int) -> int:
    """How many target tokens of `hidden` (N, D) the loss takes a chunk at a time, over `vocab` logits each."""
    if hidden.is_cpu:
        return CHUNK_TOKENS
    return max(CHUNK_TOKENS, GPU_CHUNK_LOGITS // vocab // 128 * 128)


class _ChunkedOutputCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor, pad_id: int,
                smoothing: float, dtype: torch.dtype) -> Tensor:
        """hidden (N, D), weight (V, D), bias (V,) or None, targets (N,) -> the summed loss (a scalar)."""
        vocab = weight.size(0)
        weight_c = weight.to(dtype)
        # fp16's gradients are formed here, before backward brings the loss scale: softmax minus the target in
        # fp16 would flush the small probabilities to zero, so under fp16 their products run in float32
        fp16 = dtype == torch.float16
        grad_dtype, weight_g = (torch.float32, weight.float()) if fp16 else (dtype, weight_c)
        grad_hidden = torch.empty_like(hidden, dtype=torch.float32 if fp16 else hidden.dtype)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        grad_bias = torch.zeros(vocab, dtype=torch.float32, device=weight.device) if bias is not None else None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        kernel = cross_entropy_kernel() if hidden.is_cpu and dtype in TRAINING_DTYPES else None
        chunk = chunk_tokens(hidden, vocab)
        for start in range(0, hidden.size(0), chunk):
            h = hidden[start : start + chunk].to(dtype)  # (n, D)
            target = targets[start : start + chunk]
            if kernel is not None:  # one pass over the logits for the loss, one for the gradient
                losses, grad = kernel(_logits(h, weight_c, bias), target, pad_id, smoothing, True)
                total += losses.sum()
            else:
                log_probs = _log_probs(h, weight_c, bias)
                real = (target != pad_id).float()  # (n,)
                rows = torch.arange(len(target), device=target.device)
                total += _summed_loss(log_probs, target, real, smoothing)
                grad = log_probs.exp_()  # softmax, in place of the log-probabilities
                grad -= smoothing / vocab
                grad[rows, target] -= 1 - smoothing
                grad *= real[:, None]
            grad_hidden[start : start + chunk] = grad.to(grad_dtype) @ weight_g
            grad_weight += (grad.to(grad_dtype).T @ h.to(grad_dtype)).float()
            if grad_bias is not None:
                grad_bias += grad.sum(dim=0, dtype=torch.float32)
        ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)
        ctx.has_bias = bias is not None
        ctx.weight_dtype, ctx.hidden_dtype = weight.dtype, hidden.dtype
        return total

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        return ((grad_hidden * grad_output).to(ctx.hidden_dtype), (grad_weight * grad_output).to(ctx.weight_dtype),
                grad_bias * grad_output if ctx.has_bias else None, None, None, None, None)


def output_cross_entropy(hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor, pad_id: int,
                         smoothing: float = 0.0) -> Tensor:
    """Summed label-smoothed cross-entropy of logits hidden @ weight.T + bias (hidden (N, D), targets (N,)),
    padding ignored, chunk by chunk. Under autocast, the products run in its dtype, softmax in float32."""
    dtype = torch.get_autocast_dtype(hidden.device.type) if torch.is_autocast_enabled(hidden.device.type) \
        else hidden.dtype
    with torch.autocast(hidden.device.type, enabled=False):
        if not torch.is_grad_enabled():  # validation: the loss alone, still a chunk of logits at a time
            return _chunked_loss(hidden, weight, bias, targets, pad_id, smoothing, dtype)
        return _ChunkedOutputCrossEntropy.apply(hidden, weight, bias, targets, pad_id, smoothing, dtype)


def _log_probs(h: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """A chunk's log-probabilities in float32: h (n, D) @ weight.T (D, V) + bias, in their dtype."""
    logits = (h @ weight.T).float()  # (n, V)
    if bias is not None:
        logits += bias.float()
    return logits.log_softmax(dim=-1)


def _logits(h: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """A chunk's logits in h's dtype, for the C kernel: h (n, D) @ weight.T (D, V) + bias."""
    return F.linear(h, weight, None if bias is None else bias.to(h.dtype))


def _summed_loss(log_probs: Tensor, target: Tensor, real: Tensor, smoothing: float) -> Tensor:
    """The label-smoothed cross-entropy of a chunk's rows (n, V), summed over its real (1.0) tokens."""
    nll = -log_probs.gather(1, target[:, None]).squeeze(1)
    uniform = -log_probs.mean(dim=-1)
    return (((1 - smoothing) * nll + smoothing * uniform) * real).sum()


def _chunked_loss(hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor, pad_id: int,
                  smoothing: float, dtype: torch.dtype) -> Tensor:
    """output_cross_entropy's value alone (no autograd), a chunk at a time as _ChunkedOutputCrossEntropy."""
    weight_c = weight.to(dtype)
    total = torch.zeros((), dtype=torch.float32, device=hidden.device)
    kernel = cross_entropy_kernel() if hidden.is_cpu and dtype in TRAINING_DTYPES else None
    chunk = chunk_tokens(hidden, weight.size(0))
    for start in range(0, hidden.size(0), chunk):
        target = targets[start : start + chunk]
        h = hidden[start : start + chunk].to(dtype)
        if kernel is not None:
            total += kernel(_logits(h, weight_c, bias), target, pad_id, smoothing, False)[0].sum()
        else:
            total += _summed_loss(_log_probs(h, weight_c, bias), target, (target != pad_id).float(), smoothing)
    return total


class TranslationLoss(nn.Module):
    """The model and its training loss as one module, for DistributedDataParallel to wrap (its hooks see
    every parameter used, the tied output projection included)."""

    def __init__(self, model: Transformer, label_smoothing: float = 0.0, compiled: bool = False,
                 graphs: bool = False):
        """compiled: the encoder and decoder through torch.compile (Inductor: the dropout, residual and norm
        chains fused into a few kernels; shapes marked dynamic, so that batches of every length share one
        graph); the loss's chunks stay eager. graphs (CUDA, batches of a few shapes: static_collate): the
        compiled forward and backward replayed from a CUDA graph recorded at each shape's first batch
        (torch.compile's reduce-overhead mode), not launched kernel by kernel."""
        super().__init__()
        self.model = model
        self.label_smoothing = label_smoothing
        self.graphs = graphs and compiled
        mode = "reduce-overhead" if self.graphs else None
        self.compiled = torch.compile(self._hidden, dynamic=True, mode=mode) if compiled else None

    def mask(self, src: Tensor) -> Tensor | None:
        """The source mask the encoder and decoder take: the model's (on a CPU, None for a batch without padding:
        asked outside the graph); compiled, always a tensor, so that a batch without padding after one with
        does not compile the graph again for a mask that is None."""
        if self.compiled is None:
            return self.model.source_mask(src)
        return (src != self.model.config.pad_id)[:, None, None, :]

    def hidden(self, src: Tensor, tgt_in: Tensor, mask: Tensor | None) -> Tensor:
        if self.compiled is None:
            return self._hidden(src, tgt_in, mask)
        import torch.fx.experimental._config as fx_config

        # Duck sizing would give the source and target lengths one symbol where a first batch has them equal,
        # and compile again at the first batch where they differ (on an H200: 70 s each time)
        if self.graphs:  # the last batch's outputs are spent (its backward ran): their memory may be reused
            torch.compiler.cudagraph_mark_step_begin()
        with fx_config.patch(use_duck_shape=False):
            return self.compiled(src, tgt_in, mask)

    def _hidden(self, src: Tensor, tgt_in: Tensor, mask: Tensor | None) -> Tensor:
        model = self.model
        return model.decode(tgt_in, model.encode(src, mask), mask)  # (B, T, D)

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        """Source (B, S), target input (B, T), target output (B, T) -> the loss summed over real tokens."""
        model = self.model
        hidden = self.hidden(src, tgt_in, self.mask(src))
        weight, bias = model.output_weights()
        return output_cross_entropy(hidden.reshape(-1, hidden.size(-1)), weight, bias, tgt_out.reshape(-1),
                                    model.config.pad_id, self.label_smoothing)
