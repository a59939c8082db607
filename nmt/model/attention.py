"""Which kernel computes scaled dot-product attention, softmax(q k^T / sqrt(Dh)) v, on each device and shape.
The formula is the same everywhere; on a CPU the fastest way to compute a decoding step's attention depends on
how many rows and positions it has, and on CUDA one of torch's kernels is kept out.

    out = inference_attention(q, keys, values, mask)   # q (B, H, T, Dh), keys/values (B, H, S, Dh)
    with attention_backends(q.device, training=True):  # around F.scaled_dot_product_attention in training
        ...

`nmt.model.transformer.MultiHeadAttention` and the flat decoder (`nmt.model.flat_decoder`) call these."""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

# cuDNN's attention builds an execution plan for every new shape, and the dynamic cache makes a new shape
# at every step, so decoding with it ran many times slower (figures for this and the choices below:
# benchmarks/EXPERIMENTS.md, "Measurements behind choices in the code").
CUDA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def attention_backends(device: torch.device, training: bool):
    """The scaled_dot_product_attention kernels to allow: plain matmuls in CPU training (the fused
    kernel's backward is about twice as slow in bf16), no cuDNN on CUDA."""
    if device.type == "cuda":
        return sdpa_kernel(CUDA_BACKENDS)
    return sdpa_kernel(SDPBackend.MATH) if training else contextlib.nullcontext()


# Batched decoding on a CPU (many rows, one query position each, or the K beams of a sentence) runs
# faster as plain matmuls than through the fused CPU kernel, which is tiled for long queries; at a few rows
# the fused kernel wins.
PLAIN_ATTENTION_MIN_BATCH = 16


# torch's batched matmul on a CPU multiplies matrices of under 400 multiply-adds in a plain loop, and a
# cached decoder step's self-attention over its first positions is such matrices (1 x 64 by 64 x S for
# S <= 6): there, broadcast products and sums are faster, from 16 rows up.
BMM_LOOP_MAX = 400


def broadcast_attention(q: Tensor, keys: Tensor, values: Tensor) -> Tensor:
    """softmax(q k^T / sqrt(Dh)) v for one query position: q (B, H, 1, Dh), keys/values (B, H, S, Dh)."""
    scores = (keys * (q * q.size(-1) ** -0.5)).sum(dim=-1, keepdim=True)  # (B, H, S, 1)
    return (scores.softmax(dim=2) * values).sum(dim=2, keepdim=True)  # (B, H, 1, Dh)


def plain_attention(q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q k^T / sqrt(Dh)) v: q (B, H, T, Dh), keys/values (B, H, S, Dh), mask True where allowed.
    As batched products over B*H matrices, the mask added as the products' starting value (faster than
    filling it in after a 4-dimensional matmul, the same outputs)."""
    batch, heads, length, head_dim = q.shape
    size = keys.size(2)
    q = q.reshape(batch * heads, length, head_dim)  # a copy when q is a transposed view: bmm reads it faster
    keys_t = keys.reshape(batch * heads, size, head_dim).transpose(1, 2)  # (B*H, Dh, S)
    if mask is None:
        scores = torch.bmm(q, keys_t).mul_(head_dim**-0.5)  # (B*H, T, S)
    else:
        bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(~mask, -math.inf)
        bias = bias.expand(batch, heads, length, size).reshape(batch * heads, length, size)
        scores = torch.baddbmm(bias, q, keys_t, alpha=head_dim**-0.5)
    probs = scores.softmax(dim=-1, dtype=torch.float32).to(values.dtype)
    return torch.bmm(probs, values.reshape(batch * heads, size, head_dim)).view(batch, heads, length, head_dim)


def inference_attention(q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
    """Attention without dropout through the fastest kernel for the shapes: q (B, H, T, Dh), keys/values
    (B, H, S, Dh), mask broadcasting to (B, H, T, S) -> (B, H, T, Dh). Computed in the keys' dtype and
    returned in the query's (a reduced-precision model's float32 caches: `cache_dtype`)."""
    if q.dtype != keys.dtype:
        return inference_attention(q.to(keys.dtype), keys, values, mask).to(q.dtype)
    # On a CPU there is no kernel to choose at inference, and attention_backends' context costs six entries
    # and exits a step, a measurable share of greedy decoding at batch 1
    if q.is_cpu:
        batch, _, length, head_dim = q.shape
        if batch >= PLAIN_ATTENTION_MIN_BATCH:
            if length == 1 and mask is None and keys.size(2) * head_dim < BMM_LOOP_MAX:
                return broadcast_attention(q, keys, values)
            if length <= 4:
                return plain_attention(q, keys, values, mask)
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
    with attention_backends(q.device, training=False):
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)


# On a CPU the decoder's caches (self-attention keys/values, cross-attention keys/values) are float32
# whatever the model's precision, and attention over them runs in float32: bf16 batched products go
# through oneDNN, which builds a kernel for every new shape, and the self-attention length is new at every
# step, which made bf16 attention several times slower than float32 through MKL.
# Writing new keys and values into the cache converts them; queries are converted, outputs converted back.
# The flat decoder (nmt.model.flat_decoder), which translation runs, keeps bf16 caches instead where nmt.model.native's
# C kernels are built: they read bf16 directly, with no per-shape cost.
def cache_dtype(activations: Tensor) -> torch.dtype:
    return torch.float32 if activations.device.type == "cpu" else activations.dtype
