"""The one entry point from a model to what decodes it: the precision (`cast_for_inference`, with `auto`
chosen by the device), and the decoder of nmt.decoding.search for the device (`build_decoders`): captured CUDA
graphs (nmt.model.graphs), the flattened CPU step with its C kernels and int8 or bf16 weights
(nmt.model.flat_decoder), or an ensemble (nmt.decoding.ensemble). nmt.decoding.translate asks for decoders
here and knows nothing of how they run; nmt.decoding.search knows them through its Decoder protocol.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from nmt.decoding.ensemble import Ensemble
from nmt.decoding.search import Decoder
from nmt.errors import UsageError
from nmt.model.flat_decoder import FlatDecoder
from nmt.model.graphs import GraphDecoder
from nmt.model.quantize import (
    cpu_flags,
    fbgemm_available,
    quantize_dynamic_int8,
    quantize_weights_int8,
    untie_output_projection,
)
from nmt.model.transformer import Transformer

log = logging.getLogger("nmt")


@dataclass(frozen=True)
class Decoders:
    """`fast`: what searches run; `growing`: a decoder whose states grow, for what fixed shapes cannot hold
    (the uncached reference path, the glossary's constrained search). The same object where they agree."""

    fast: Decoder
    growing: Decoder


def build_decoders(model: Transformer, ensemble: tuple[Transformer, ...] = (), cuda_graphs: bool = True,
                   use_cache: bool = True) -> Decoders:
    """The decoders of `model` (already cast for inference) on its device. On CUDA each step is replayed as
    a captured graph unless cuda_graphs is False; otherwise it runs as the flattened step, the same
    computation with less Python per step. `ensemble`: more models decoding with it (no graphs: a captured
    graph holds one model's step)."""
    if ensemble:
        averaged = Ensemble([FlatDecoder(member) for member in (model, *ensemble)])
        return Decoders(averaged, averaged)
    if cuda_graphs and next(model.parameters()).device.type == "cuda":
        return Decoders(GraphDecoder(model) if use_cache else model, model)
    flat = FlatDecoder(model)
    return Decoders(flat, flat)


PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "int8": None, "int8_bf16": None,
              "int8_fp32": None, "auto": None}


def cast_for_inference(model: Transformer, precision: str) -> Transformer:
    """Weights and activations in `precision`; search scores stay fp32 (decode_step returns fp32).
    int8: dynamic quantization (int8 weights, activations quantized per token) of every linear layer,
    the output projection included, through torchao. int8_bf16: int8 weights, bf16 activations;
    int8_fp32: int8 weights, fp32 activations, int8 GEMMs (nmt.model.quantize). auto: auto_precision's choice."""
    if precision not in PRECISIONS:
        raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    device = next(model.parameters()).device
    if precision == "auto":
        precision = auto_precision(device)
        log.debug("--precision auto: %s", precision)
    if precision == "fp16" and device.type != "cuda":
        raise UsageError("--precision fp16 needs a CUDA device; use bf16 on CPU")
    if precision.startswith("int8") and device.type != "cpu":
        raise UsageError(f"--precision {precision} is for CPUs; use fp16 or bf16 on CUDA")
    if precision in ("bf16", "int8_bf16") and device.type == "cpu" and cpu_has_native_bf16() is False:
        log.warning("this CPU has no bf16 arithmetic (AVX-512 BF16 or AMX): --precision %s is emulated and slower "
                    "than fp32 here; --precision int8_fp32 is the fast mode on such CPUs", precision)
    if precision == "int8":
        return quantize_int8(model)
    if precision == "int8_bf16":
        return quantize_weights_int8(model)
    if precision == "int8_fp32":
        return quantize_dynamic_int8(model)
    return model.to(PRECISIONS[precision])


def cpu_has_native_bf16() -> bool | None:
    """Whether oneDNN finds bf16 instructions on this CPU (None when it cannot tell)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return None


# What `--precision auto` picks on a CPU, by the first of these instruction sets its flags name: of the modes
# that translate a line the same whatever lines share its batch (docs/USAGE.md promises it), the one measured
# fastest on each kind. With AMX (Intel Xeon, issue 65, 300 held-out captions batched against alone): bf16 0
# lines differ, int8_fp32 0, int8_bf16 12 of 300 (its activations share one bf16 scale per call), and bf16
# was the fastest in-process (3,369 target tokens/s at beam 4, batch 32, against 2,835 for int8_bf16 with the
# shortlist); with AVX-512 BF16 alone (AMD Zen 4) and with AVX2, int8_fp32 (benchmarks/MACHINES.md).
AUTO_PRECISION_BY_CPU = (("amx_bf16", "bf16"), ("avx512_bf16", "int8_fp32"), ("avx2", "int8_fp32"))


def auto_precision(device: torch.device) -> str:
    """The fastest mode measured for this kind of device, as CTranslate2's compute_type "auto" picks one:
    fp16 on CUDA; on a CPU, by AUTO_PRECISION_BY_CPU. A CPU it does not name falls back to bf16 where
    oneDNN finds bf16 arithmetic, else int8_fp32 where torch has fbgemm (x86), else fp32: never int8_bf16,
    whose translations change with the lines batched beside them."""
    if device.type == "cuda":
        return "fp16"
    flags = cpu_flags()
    for flag, mode in AUTO_PRECISION_BY_CPU:
        if flag in flags and (mode != "int8_fp32" or fbgemm_available()):
            return mode
    if cpu_has_native_bf16():
        return "bf16"
    return "int8_fp32" if fbgemm_available() else "fp32"


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


def resolve_device(name: str) -> torch.device:
    if name not in ("auto", "cpu", "cuda"):
        raise UsageError(f"--device must be auto, cpu or cuda, not {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda asked for, but no CUDA device is available")
    return torch.device(name)
