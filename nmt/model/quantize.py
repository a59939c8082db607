"""int8 weights for CPU inference: `--precision int8_bf16` and `--precision int8_fp32` (CTranslate2's
int8_bfloat16 and int8_float32).

int8_bf16 (Int8Linear), weight-only, for CPUs with native bf16 (AVX-512 BF16, AMX):

At batch 1 a decoding step is bound by memory traffic, not arithmetic: every step reads every decoder
weight and the whole output projection once. Storing those weights as int8 (symmetric, one scale per
output channel) reads a quarter of the fp32 bytes, and torch's int8-weight kernel multiplies them with
bf16 activations directly. For many rows at once (a batch of 32 sentences, beam 4) the plain bf16 GEMM
is faster on CPU, so the layer also keeps the dequantized weights in bf16 and picks the kernel by the
number of rows; both kernels multiply by the same quantized values. Everything else runs in bf16. The bf16
GEMMs of int8_bf16 and of `--precision bf16` run on weights packed once for oneDNN (`bf16_linear_function`).

int8_fp32 (DynamicInt8Linear), for any x86 CPU, AVX2 included, where bf16 arithmetic is emulated and
slow: float32 activations, and one int8 product (`int8_linear`; in C, nmt.model.native's int8_linear, which
the C layer stacks run too): each row of activations quantized on a scale of its own, as CTranslate2 does,
to 8 bits on CPUs with VNNI (AVX-512 VNNI, AVX-VNNI: int8 products in one instruction) and to 7 bits
without ([-63, 63], so that AVX2's 16-bit pair sums cannot saturate), multiplied with exact int32 sums and
scaled back: a sentence's result does not depend on the rows it is batched with. The bits and whether C or
torch computes it are nmt.model.backend's choice (Backend.int8_rows, Backend.kernels), made once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.model.machine import machine
from nmt.model.native_ops import int8_linear_kernel

# At or below this many rows the int8 kernel wins (measured on a 2-core AVX-512 EPYC; see benchmarks/).
INT8_KERNEL_MAX_ROWS = 16


def quantize_rows(weight: Tensor) -> tuple[Tensor, Tensor]:
    """(out, in) weights -> int8 values (out, in) and bf16 scales (out,): symmetric, one scale per output
    channel. The int8-weight kernel takes its scales in bf16, so the values are rounded with the rounded
    scales, and every kernel multiplies by the same quantized weights."""
    weight = weight.detach().float()
    scale = (weight.abs().amax(dim=1).clamp(min=1e-12) / 127).bfloat16()
    quantized = (weight / scale.float()[:, None]).round().clamp(-127, 127).to(torch.int8)
    return quantized, scale


class Int8Linear(nn.Module):
    def __init__(self, weight: Tensor, bias: Tensor | None):
        super().__init__()
        quantized, scale = quantize_rows(weight)
        self.register_buffer("quantized", quantized)
        self.register_buffer("scale", scale)
        self.register_buffer("dequantized", (quantized.float() * scale.float()[:, None]).bfloat16())
        self.register_buffer("bias", None if bias is None else bias.detach().bfloat16())
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]

    def forward(self, x: Tensor) -> Tensor:
        plain = functools.partial(F.linear, weight=self.dequantized, bias=self.bias)  # nmt.model.flat_decoder packs it
        out = int8_bf16_linear(x.reshape(-1, self.in_features), self.quantized, self.scale, self.bias, plain)
        return out.view(*x.shape[:-1], self.out_features)

    def function(self, outputs: Tensor | None = None, relu: bool = False) -> Callable[[Tensor], Tensor]:
        """This layer as a function of rows (R, in) -> (R, out), without nn.Module's call machinery; with
        `outputs` (O,), of those output channels alone: (R, in) -> (R, O); with `relu`, followed by a ReLU."""
        quantized, scale, dequantized, bias = self.quantized, self.scale, self.dequantized, self.bias
        if outputs is not None:
            quantized, scale, dequantized = (t.index_select(0, outputs) for t in (quantized, scale, dequantized))
            bias = None if bias is None else bias.index_select(0, outputs)
        return functools.partial(int8_bf16_linear, quantized=quantized, scale=scale, bias=bias,
                                 many_rows=bf16_linear_function(dequantized, bias, relu), relu=relu)


def int8_bf16_linear(rows: Tensor, quantized: Tensor, scale: Tensor, bias: Tensor | None,
                     many_rows: Callable[[Tensor], Tensor], relu: bool = False) -> Tensor:
    """(R, in) -> (R, out): the int8 kernel for few rows, `many_rows` (the bf16 GEMM on the same values)
    for many; relu: followed by a ReLU, as `many_rows` is."""
    if rows.size(0) > INT8_KERNEL_MAX_ROWS:
        return many_rows(rows)
    out = torch._weight_int8pack_mm(rows.contiguous(), quantized, scale)
    out = out if bias is None else out.add_(bias)
    return out.relu_() if relu else out


# oneDNN multiplies bf16 matrices in a blocked layout of the weights: F.linear converts a plain weight into
# it at every call, where a weight packed once is used as it is (torch's own CPU compiler packs them so).
PACKING_ROWS = 128  # the row count oneDNN is told to expect: any other runs on the same packed weight
# oneDNN builds its kernel for each new shape, about ten calls' worth of time, and a beam search's row
# count changes as its sentences finish: above ROW_STEP rows, the rows are padded to a multiple of it, so
# that at most 8 row counts above 16 reach each weight.
ROW_STEP = 16


def bf16_linear_function(weight: Tensor, bias: Tensor | None = None, relu: bool = False) -> Callable[[Tensor], Tensor]:
    """rows (R, in) -> (R, out) for a bf16 weight (out, in), followed by a ReLU if `relu`: on a CPU with bf16
    arithmetic, oneDNN's matmul on the weight packed once; elsewhere F.linear."""
    if weight.dtype != torch.bfloat16 or weight.device.type != "cpu" or not machine().onednn_bf16:
        if relu:
            return lambda rows: F.relu(F.linear(rows, weight, bias))
        return lambda rows: F.linear(rows, weight, bias)
    packed = torch.ops.mkldnn._reorder_linear_weight(weight, PACKING_ROWS)
    attribute = "relu" if relu else "none"

    def linear(rows: Tensor) -> Tensor:
        count = rows.size(0)
        if count <= ROW_STEP or count % ROW_STEP == 0:
            return torch.ops.mkldnn._linear_pointwise(rows, packed, bias, attribute, [], "")
        padded = F.pad(rows, (0, 0, 0, ROW_STEP - count % ROW_STEP))
        return torch.ops.mkldnn._linear_pointwise(padded, packed, bias, attribute, [], "")[:count]

    return linear


def untie_output_projection(model: nn.Module) -> None:
    """Give a tied output projection (a plain matmul with the embeddings) a Linear of its own, so that
    quantization reaches it; the embedding matrix itself stays as it is."""
    if model.output_proj is None:  # built without storage: its weight is replaced at once
        model.output_proj = nn.Linear(model.config.d_model, model.config.vocab_size, bias=False, device="meta")
        model.output_proj.weight = nn.Parameter(model.embed.weight.detach().clone())


def quantize_weights_int8(model: nn.Module) -> nn.Module:
    """Model in bf16 with every nn.Linear replaced by an Int8Linear (in place; returns the model), the
    output projection included."""
    model.to(torch.bfloat16)
    return replace_linear_layers(model, Int8Linear)


def replace_linear_layers(model: nn.Module, layer_type: Callable[[Tensor, Tensor | None], nn.Module]) -> nn.Module:
    """Replace every nn.Linear of `model`, the output projection included (untied first), by
    layer_type(weight, bias), in place; returns the model."""
    untie_output_projection(model)
    for module in list(model.modules()):
        for name, child in module.named_children():
            if isinstance(child, nn.Linear):
                setattr(module, name, layer_type(child.weight, child.bias))
    return model


class DynamicInt8Linear(nn.Module):
    """An nn.Linear for `--precision int8_fp32`: int8 weights (symmetric, one scale per output channel),
    float32 in and out, through the one int8 product (int8_linear). rows: the bits each row of activations is
    quantized to on its own scale (nmt.model.backend's Backend.int8_rows: 8 with VNNI, 7 without); kernels:
    nmt's C kernels run it (else torch's operations, the same integers)."""

    def __init__(self, weight: Tensor, bias: Tensor | None, rows: int = 8, kernels: bool = False):
        super().__init__()
        quantized, scale = quantize_rows(weight)
        self.register_buffer("quantized", quantized)
        self.register_buffer("scale", scale)
        self.register_buffer("bias", None if bias is None else bias.detach().float())
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.rows = rows
        self.column_scale = scale.float()
        # the C product's one packed layout (vnni_pack), where it runs: widths of whole groups of 4
        self.kernel = int8_linear_kernel() if kernels and self.in_features % 4 == 0 else None
        self.vnni = vnni_pack(quantized) if self.kernel is not None else None

    def forward(self, x: Tensor) -> Tensor:
        return self.function()(x.reshape(-1, self.in_features)).view(*x.shape[:-1], self.out_features)

    def function(self, outputs: Tensor | None = None, relu: bool = False) -> Callable[[Tensor], Tensor]:
        """This layer as a function of rows (R, in) -> (R, out); with `outputs` (O,), of those output
        channels alone; with `relu`, followed by a ReLU."""
        quantized, scale, bias, packed = self.quantized, self.column_scale, self.bias, self.vnni
        if outputs is not None:
            quantized, scale = quantized.index_select(0, outputs), scale.index_select(0, outputs)
            bias = None if bias is None else bias.index_select(0, outputs)
            packed = None if packed is None else vnni_pack(quantized)
        if self.kernel is not None:
            return functools.partial(self.kernel, packed=packed, scale=scale, bias=bias, relu=relu, bits=self.rows)
        return functools.partial(int8_linear, quantized=quantized, scale=scale, bias=bias, relu=relu, bits=self.rows)


def int8_linear(rows: Tensor, quantized: Tensor, scale: Tensor, bias: Tensor | None, relu: bool = False,
                bits: int = 8) -> Tensor:
    """int8_fp32's one product in torch's operations (nmt.model.native's int8_linear computes the same in C):
    (R, in) float32 -> (R, out) float32, each row quantized to `bits` (to [-127, 127] or [-63, 63]) on a scale
    of its own, multiplied by the int8 weights `quantized` (out, in) with exact int32 sums (torch._int_mm),
    scaled back by the row's scale and the output channels' `scale` (out,), plus bias, then a ReLU if `relu`.
    Every row's result is what it would be alone."""
    levels = 127.0 if bits == 8 else 63.0
    row_scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-30).div_(levels)  # (R, 1)
    integers = rows.div(row_scale).round_().to(torch.int8)
    out = torch._int_mm(integers, quantized.t()).float().mul_(row_scale).mul_(scale)
    out = out if bias is None else out.add_(bias)
    return out.relu_() if relu else out


def vnni_pack(quantized: Tensor) -> Tensor:
    """int8 weights (out, in) in the layout of the C product (nmt.model.native's int8_linear): for each block of 16
    output channels (padded with zeros) and each 4 inputs, 64 bytes: the 16 channels' 4 values + 128, as
    unsigned bytes."""
    outputs, inputs = quantized.shape
    padded = torch.zeros((outputs + 15) // 16 * 16, inputs, dtype=torch.int16)
    padded[:outputs] = quantized
    unsigned = (padded + 128).to(torch.uint8)
    return unsigned.view(-1, 16, inputs // 4, 4).permute(0, 2, 1, 3).contiguous()


def quantize_dynamic_int8(model: nn.Module, rows: int, kernels: bool) -> nn.Module:
    """Model in float32 with every nn.Linear replaced by a DynamicInt8Linear of rows of `rows` bits (in place;
    returns the model), the output projection included."""
    model.float()
    return replace_linear_layers(model, functools.partial(DynamicInt8Linear, rows=rows, kernels=kernels))
