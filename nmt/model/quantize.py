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
slow: float32 activations. On CPUs with VNNI (AVX-512 VNNI, AVX-VNNI), where int8 products are one
instruction, each row of activations is quantized to int8 on a scale of its own, as CTranslate2 does, and
multiplied with exact int32 sums (torch._int_mm; a C kernel for a step's few rows): a sentence's result
does not depend on the rows it is batched with. On CPUs with AVX2 and no VNNI the same holds with 7-bit
rows ([-63, 63], so that AVX2's 16-bit pair sums cannot saturate), through a C kernel for any number of
rows (`int7_rows_linear`). Which of these a layer runs is nmt.model.backend's choice (Backend.int8_rows),
made once for the machine. With NMT_INT8_ROWS=0, or without the C kernels on AVX2: fbgemm's GEMM on its own
quantization (one scale per call, 7 bits) for large products, and for small ones (a step at batch 1,
bound by reading the weights) the int8-weight kernel on bf16 rows: results there move with the batch.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.errors import UsageError
from nmt.model.backend import machine
from nmt.model.native import int7_rows_kernel, int8_rows_kernels

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
        out = int8_linear(x.reshape(-1, self.in_features), self.quantized, self.scale, self.bias, plain)
        return out.view(*x.shape[:-1], self.out_features)

    def function(self, outputs: Tensor | None = None, relu: bool = False) -> Callable[[Tensor], Tensor]:
        """This layer as a function of rows (R, in) -> (R, out), without nn.Module's call machinery; with
        `outputs` (O,), of those output channels alone: (R, in) -> (R, O); with `relu`, followed by a ReLU."""
        quantized, scale, dequantized, bias = self.quantized, self.scale, self.dequantized, self.bias
        if outputs is not None:
            quantized, scale, dequantized = (t.index_select(0, outputs) for t in (quantized, scale, dequantized))
            bias = None if bias is None else bias.index_select(0, outputs)
        return functools.partial(int8_linear, quantized=quantized, scale=scale, bias=bias,
                                 many_rows=bf16_linear_function(dequantized, bias, relu), relu=relu)


def int8_linear(rows: Tensor, quantized: Tensor, scale: Tensor, bias: Tensor | None,
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


# At or above this many multiply-adds (rows x in x out) fbgemm's int8 GEMM wins over torch's int8-weight
# kernel; below it, fbgemm's fixed cost per call dominates.
FBGEMM_MIN_PRODUCT = 1 << 19


class DynamicInt8Linear(nn.Module):
    """An nn.Linear for `--precision int8_fp32`: int8 weights (symmetric, one scale per output channel),
    float32 in and out. rows: the product nmt.model.backend resolved (Backend.int8_rows): 8 or 7 bits a row on
    its own scale, or 0, fbgemm's GEMM; kernels: nmt's C kernels may run (7-bit rows need them)."""

    def __init__(self, weight: Tensor, bias: Tensor | None, rows: int = 0, kernels: bool = False):
        super().__init__()
        quantized, scale = quantize_rows(weight)
        self.register_buffer("quantized", quantized)
        self.register_buffer("scale", scale)
        self.register_buffer("bias", None if bias is None else bias.detach().float())
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        whole_groups = self.in_features % 4 == 0  # what the C products take
        self.rows = rows if rows == 8 or (rows == 7 and kernels and whole_groups) else 0
        self.column_scale = scale.float()
        # torch._int_mm's layout (in, out), and the C few-rows kernels' (vnni_pack) where they run
        self.columns = quantized.t().contiguous() if self.rows == 8 else None
        self.kernels = int8_rows_kernels() if kernels and self.rows == 8 else None
        self.vnni = vnni_pack(quantized) if (self.rows == 7 or self.kernels is not None) and whole_groups else None
        self.packed = FbgemmWeights(quantized, scale.float(), self.bias) if self.rows == 0 else None

    @property
    def int7(self) -> bool:
        return self.rows == 7

    def forward(self, x: Tensor) -> Tensor:
        return self.function()(x.reshape(-1, self.in_features)).view(*x.shape[:-1], self.out_features)

    def function(self, outputs: Tensor | None = None, relu: bool = False) -> Callable[[Tensor], Tensor]:
        """This layer as a function of rows (R, in) -> (R, out); with `outputs` (O,), of those output
        channels alone; with `relu`, followed by a ReLU (all channels only)."""
        if outputs is None:
            if self.rows == 8:
                return functools.partial(rows_int8_linear, columns=self.columns, scale=self.column_scale,
                                         bias=self.bias, relu=relu, packed=self.vnni, kernels=self.kernels)
            if self.rows == 7:
                return functools.partial(int7_rows_linear, packed=self.vnni, scale=self.column_scale, bias=self.bias,
                                         relu=relu)
            return functools.partial(dynamic_int8_linear, packed=self.packed, quantized=self.quantized,
                                     scale=self.scale, bias=self.bias, relu=relu)
        if relu:
            raise ValueError("a ReLU is fused over all output channels only")
        quantized = self.quantized.index_select(0, outputs)
        bias = None if self.bias is None else self.bias.index_select(0, outputs)
        if self.rows == 8:
            return functools.partial(rows_int8_linear, columns=self.columns.index_select(1, outputs),
                                     scale=self.column_scale.index_select(0, outputs), bias=bias,
                                     packed=None if self.vnni is None else vnni_pack(quantized), kernels=self.kernels)
        if self.rows == 7:
            return functools.partial(int7_rows_linear, packed=vnni_pack(quantized),
                                     scale=self.column_scale.index_select(0, outputs), bias=bias)
        # Packing with one scale per channel is several times slower in fbgemm's prepack than with one
        # scale: pack the int8 values with scale 1 and apply the channels' scales to the output. Packed on
        # first use: a greedy step at batch 1 never needs it.
        return functools.partial(dynamic_int8_linear, packed=FbgemmWeights(quantized), quantized=quantized,
                                 scale=self.scale.index_select(0, outputs), bias=bias, scale_outputs=True)


def rows_int8_linear(rows: Tensor, columns: Tensor, scale: Tensor, bias: Tensor | None, relu: bool = False,
                     packed: Tensor | None = None, kernels: tuple | None = None) -> Tensor:
    """(R, in) float32 -> (R, out) float32: each row quantized to int8 (symmetric) on a scale of its own,
    multiplied by the int8 weights `columns` (in, out) with int32 sums, scaled back by the row's scale and
    the output channels' `scale` (out,); relu: followed by a ReLU. Every row's result is what it would be
    alone. The C kernels (nmt.model.native) quantize and scale back in a pass each, and multiply up to 8 rows
    (a step at batch 1) by the weights `packed` (vnni_pack) faster than torch._int_mm; the int32 products
    are exact either way. torch's operations do the same without `kernels` (native.int8_rows_kernels)."""
    if kernels is None:
        row_scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-30).div_(127.0)  # (R, 1)
        quantized = rows.div(row_scale).round_().to(torch.int8)
        out = torch._int_mm(quantized, columns).float().mul_(row_scale).mul_(scale)
        out = out if bias is None else out.add_(bias)
        return out.relu_() if relu else out
    quantize, scale_back, few_rows = kernels
    quantized, row_scale = quantize(rows)
    products = few_rows(quantized, packed, columns.size(1)) if packed is not None else None
    if products is None:
        products = torch._int_mm(quantized, columns)
    return scale_back(products, row_scale, scale, bias, relu)


def int7_rows_linear(rows: Tensor, packed: Tensor, scale: Tensor, bias: Tensor | None, relu: bool = False) -> Tensor:
    """rows_int8_linear for CPUs without VNNI: (R, in) float32 -> (R, out) float32, each row quantized to
    [-63, 63] on a scale of its own, the products exact int32 sums (the AVX2 C kernel, on the weights `packed`
    by vnni_pack), scaled back by the row's scale and the output channels' `scale`, plus bias, then a ReLU if
    `relu`, in one call. Every row's result is what it would be alone."""
    return int7_rows_kernel()(rows, packed, scale, bias, relu)


def vnni_pack(quantized: Tensor) -> Tensor:
    """int8 weights (out, in) in the layout of the few-rows kernel (nmt.model.native): for each block of 16
    output channels (padded with zeros) and each 4 inputs, 64 bytes: the 16 channels' 4 values + 128, as
    unsigned bytes."""
    outputs, inputs = quantized.shape
    padded = torch.zeros((outputs + 15) // 16 * 16, inputs, dtype=torch.int16)
    padded[:outputs] = quantized
    unsigned = (padded + 128).to(torch.uint8)
    return unsigned.view(-1, 16, inputs // 4, 4).permute(0, 2, 1, 3).contiguous()


def dynamic_int8_linear(rows: Tensor, packed: FbgemmWeights, quantized: Tensor, scale: Tensor, bias: Tensor | None,
                        scale_outputs: bool = False, relu: bool = False) -> Tensor:
    """(R, in) -> (R, out) float32: fbgemm's int8 GEMM for large products; for small ones (a step at
    batch 1, bound by reading the weights) the int8-weight kernel on bf16 rows. scale_outputs: `packed`
    holds the int8 values with scale 1 (and no bias). relu: followed by a ReLU (not with scale_outputs)."""
    if rows.size(0) * quantized.numel() < FBGEMM_MIN_PRODUCT:
        out = torch._weight_int8pack_mm(rows.bfloat16(), quantized, scale)
        out = out.float() if bias is None else torch.add(bias, out)  # float32 + bf16: float32, one operation
        return out.relu_() if relu else out
    # Without __torch_function__: torch looks for it on every argument of a torch.ops call, and on fbgemm's
    # packed weights (a TorchScript object) the lookup throws and catches a C++ exception, which made a
    # 4 x 256 x 256 product cost 26-28 us of CPU time instead of 11 (one thread, an AVX2 EPYC). The rows are
    # plain tensors: nothing here has a __torch_function__ to honour.
    with torch._C.DisableTorchFunction():
        if relu:  # fbgemm applies it as it writes the output, where a ReLU of its own reads and writes it again
            return torch.ops.quantized.linear_relu_dynamic.default(rows, packed.get(), True)
        out = torch.ops.quantized.linear_dynamic.default(rows, packed.get(), True)  # True: 7-bit activations
    if not scale_outputs:
        return out
    out.mul_(scale)
    return out if bias is None else out.add_(bias)


class FbgemmWeights:
    """fbgemm's packed layout (a C++ object, not a tensor) of int8 values (out, in) with one scale per
    output channel, or scale 1; made by the first `get`."""

    def __init__(self, quantized: Tensor, scale: Tensor | None = None, bias: Tensor | None = None):
        if not machine().fbgemm:
            raise UsageError("--precision int8_fp32 needs torch's fbgemm kernels (x86 CPUs); use fp32 or int8_bf16")
        self.quantized, self.scale, self.bias = quantized, scale, bias
        self.packed = None

    def get(self):
        if self.packed is None:
            self.packed = fbgemm_pack(self.quantized, self.scale, self.bias)
        return self.packed


def fbgemm_pack(quantized: Tensor, scale: Tensor | None, bias: Tensor | None):
    """fbgemm's packed weight for int8 values (out, in) with one scale per output channel, or scale 1."""
    # fbgemm takes its weights as a quantized tensor, a kind of tensor torch 2.13 deprecates (with a
    # warning at every creation). torch's other int8 GEMMs were slower on an AVX2 CPU (one thread):
    # oneDNN's qlinear, with the activations quantized by torch operations, lost to fbgemm at every shape
    # measured and to float32 at 32 rows; torchao's int8 goes through torch._int_mm, many times slower than
    # float32 there.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if scale is None:
            weight = torch._make_per_tensor_quantized_tensor(quantized, 1.0, 0)
        else:
            zero_points = torch.zeros(scale.shape, dtype=torch.long)
            weight = torch._make_per_channel_quantized_tensor(quantized, scale.double(), zero_points, 0)
        return torch.ops.quantized.linear_prepack(weight, bias)


def quantize_dynamic_int8(model: nn.Module, rows: int, kernels: bool) -> nn.Module:
    """Model in float32 with every nn.Linear replaced by a DynamicInt8Linear of the product `rows` (in place;
    returns the model), the output projection included."""
    model.float()
    replace_linear_layers(model, functools.partial(DynamicInt8Linear, rows=rows, kernels=kernels))
    # Packed now, in the parent, so that forked workers share them; the output projection on first use:
    # with a shortlist each batch packs its own rows and the whole matrix, slow to pack, is never used
    for module in model.modules():
        if isinstance(module, DynamicInt8Linear) and module is not model.output_proj:
            if module.packed is not None:
                module.packed.get()
    return model
