"""Weight-only int8 inference on CPU: `--precision int8_bf16` (CTranslate2's name for the same idea).

At batch 1 a decoding step is bound by memory traffic, not arithmetic: every step reads every decoder
weight and the whole output projection once. Storing those weights as int8 (symmetric, one scale per
output channel) reads a quarter of the fp32 bytes, and torch's int8-weight kernel multiplies them with
bf16 activations directly. For many rows at once (a batch of 32 sentences, beam 4) the plain bf16 GEMM
is faster on CPU, so the layer also keeps the dequantized weights in bf16 and picks the kernel by the
number of rows; both kernels multiply by the same quantized values. Everything else runs in bf16.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# At or below this many rows the int8 kernel wins (measured on a 2-core AVX-512 EPYC; see benchmarks/).
INT8_KERNEL_MAX_ROWS = 16


class Int8Linear(nn.Module):
    def __init__(self, weight: Tensor, bias: Tensor | None):
        super().__init__()
        weight = weight.detach().float()
        # Scales are stored in bf16 (the kernel's activation type): quantize with the rounded ones.
        scale = (weight.abs().amax(dim=1).clamp(min=1e-12) / 127).bfloat16().float()
        quantized = (weight / scale[:, None]).round().clamp(-127, 127).to(torch.int8)
        self.register_buffer("quantized", quantized)
        self.register_buffer("scale", scale.bfloat16())
        self.register_buffer("dequantized", (quantized.float() * scale[:, None]).bfloat16())
        self.register_buffer("bias", None if bias is None else bias.detach().bfloat16())
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]

    def forward(self, x: Tensor) -> Tensor:
        out = int8_linear(x.reshape(-1, self.in_features), self.quantized, self.scale, self.dequantized, self.bias)
        return out.view(*x.shape[:-1], self.out_features)

    def function(self, outputs: Tensor | None = None) -> Callable[[Tensor], Tensor]:
        """This layer as a function of rows (R, in) -> (R, out), without nn.Module's call machinery; with
        `outputs` (O,), of those output channels alone: (R, in) -> (R, O)."""
        quantized, scale, dequantized, bias = self.quantized, self.scale, self.dequantized, self.bias
        if outputs is not None:
            quantized, scale, dequantized = (t.index_select(0, outputs) for t in (quantized, scale, dequantized))
            bias = None if bias is None else bias.index_select(0, outputs)
        return functools.partial(int8_linear, quantized=quantized, scale=scale, dequantized=dequantized, bias=bias)


def int8_linear(rows: Tensor, quantized: Tensor, scale: Tensor, dequantized: Tensor, bias: Tensor | None) -> Tensor:
    """(R, in) -> (R, out): the int8 kernel for few rows, the bf16 GEMM on the same values for many."""
    if rows.size(0) > INT8_KERNEL_MAX_ROWS:
        return F.linear(rows, dequantized, bias)
    out = torch._weight_int8pack_mm(rows.contiguous(), quantized, scale)
    return out if bias is None else out.add_(bias)


def untie_output_projection(model: nn.Module) -> None:
    """Give a tied output projection (a plain matmul with the embeddings) a Linear of its own, so that
    quantization reaches it; the embedding matrix itself stays as it is."""
    if model.output_proj is None:
        model.output_proj = nn.Linear(model.config.d_model, model.config.vocab_size, bias=False)
        model.output_proj.weight = nn.Parameter(model.embed.weight.detach().clone())


def quantize_weights_int8(model: nn.Module) -> nn.Module:
    """Model in bf16 with every nn.Linear replaced by an Int8Linear (in place; returns the model), the
    output projection included."""
    model.to(torch.bfloat16)
    untie_output_projection(model)
    for module in list(model.modules()):
        for name, child in module.named_children():
            if isinstance(child, nn.Linear):
                setattr(module, name, Int8Linear(child.weight, child.bias))
    return model
