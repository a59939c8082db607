"""The one entry point from a model to what decodes it: the weights in the format of the backend that
nmt.model.backend resolved (`cast_for_inference`), and the decoder of nmt.decoding.search for the device
(`build_decoders`): captured CUDA graphs (nmt.model.graphs), the flattened CPU step with its C kernels and
int8 or bf16 weights (nmt.model.flat_decoder), or an ensemble (nmt.decoding.ensemble). nmt.decoding.translate
asks for decoders here and knows nothing of how they run; nmt.decoding.search knows them through its Decoder
protocol.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from nmt.decoding.ensemble import Ensemble
from nmt.decoding.search import Decoder
from nmt.errors import UsageError
from nmt.model.backend import Backend
from nmt.model.flat_decoder import FlatDecoder
from nmt.model.graphs import GraphDecoder
from nmt.model.quantize import quantize_dynamic_int8, quantize_weights_int8, untie_output_projection
from nmt.model.transformer import Transformer

log = logging.getLogger("nmt")


@dataclass(frozen=True)
class Decoders:
    """`fast`: what searches run; `growing`: a decoder whose states grow, for what fixed shapes cannot hold
    (the uncached reference path, the glossary's constrained search). The same object where they agree."""

    fast: Decoder
    growing: Decoder


def build_decoders(model: Transformer, backend: Backend, ensemble: tuple[Transformer, ...] = (),
                   cuda_graphs: bool = True, use_cache: bool = True) -> Decoders:
    """The decoders of `model` (already cast for `backend`) on its device. On CUDA each step is replayed as
    a captured graph unless cuda_graphs is False; otherwise it runs as the flattened step, the same
    computation with less Python per step. `ensemble`: more models decoding with it (no graphs: a captured
    graph holds one model's step)."""
    if ensemble:
        averaged = Ensemble([FlatDecoder(member, backend) for member in (model, *ensemble)])
        return Decoders(averaged, averaged)
    if cuda_graphs and backend.device.type == "cuda":
        return Decoders(GraphDecoder(model) if use_cache else model, model)
    flat = FlatDecoder(model, backend)
    return Decoders(flat, flat)


def cast_for_inference(model: Transformer, backend: Backend) -> Transformer:
    """Weights and activations in the backend's precision; search scores stay fp32 (decode_step returns fp32).
    int8: dynamic quantization (int8 weights, activations quantized per token) of every linear layer,
    the output projection included, through torchao. int8_bf16: int8 weights, bf16 activations;
    int8_fp32: int8 weights, fp32 activations, the backend's int8 product (nmt.model.quantize)."""
    if backend.precision == "int8":
        return quantize_int8(model)
    if backend.precision == "int8_bf16":
        return quantize_weights_int8(model)
    if backend.precision == "int8_fp32":
        return quantize_dynamic_int8(model, backend.int8_rows, backend.kernels)
    return model.to(backend.dtype)


def quantize_int8(model: Transformer) -> Transformer:
    # torchao reports GPU kernels it cannot load on a CPU, and torch a deprecation inside torchao
    for noisy in ("torchao", "torch.utils._pytree"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except ImportError:
        raise UsageError("--precision int8 needs torchao: pip install 'nmt-transformer[int8]'") from None
    untie_output_projection(model)
    quantize_(model, Int8DynamicActivationInt8WeightConfig())
    return model
