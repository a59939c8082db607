"""One count of a training step's work, used by `nmt train`'s progress line and by every benchmark: the model
FLOPs of the real tokens, never of padding.

    flops = training_flops(config, source_lengths, target_lengths)    # a batch's forward and backward
    name, peak = peak_flops(device)                                    # the device's dense bf16 peak, or None
    utilization = flops_per_second / peak

A forward pass does 2 FLOPs a multiply-add of each product with a weight matrix (the attention projections,
the feed-forward layers, the output projection) and of the attention itself (scores and the weighted sum),
counted at each sentence's own source length S and target length T (EOS and BOS included: the positions the
model computes). The decoder's causal self-attention counts the T(T+1)/2 query-key pairs a position may see,
as FlashAttention counts it, not the T^2 of a full square. A training step is three forward passes (the
backward computes the gradients of the inputs and of the weights, two products for each one forward). What is
not counted: embeddings (a lookup), layer norms, softmax, dropout, the optimizer (all elementwise). The
batch's padding, and what a padded kernel computes for it, is not work done: utilization on padded FLOPs
read about 1.7 times too high on the H200 runs of 2026-11 (issue 81).
"""

from __future__ import annotations

import torch

from nmt.model.config import ModelConfig

# dense bf16 tensor-core peaks (FLOP/s, without sparsity) from the vendors' data sheets, by a name torch reports;
# the longer names first ("H100 PCIe" before "H100")
PEAK_BF16 = {"H100 PCIe": 756e12, "H100": 989e12, "H200": 989e12, "GH200": 989e12, "B200": 2250e12,
             "A100": 312e12, "A10G": 70e12, "L40S": 362e12, "L4": 121e12}


def forward_flops(config: ModelConfig, source_length: int, target_length: int) -> int:
    """FLOPs of one forward pass over a sentence pair of these lengths (the positions the model computes)."""
    d, s, t = config.d_model, source_length, target_length
    encoder = 8 * s * d * d + 4 * s * d * config.d_ff + 4 * s * s * d  # q, k, v, o; feed-forward; attention
    decoder = (8 * t * d * d + 4 * d * (t * (t + 1) // 2)  # self-attention: projections, causal pairs
               + 4 * t * d * d + 4 * s * d * d + 4 * t * s * d  # cross-attention: q and o; k and v; attention
               + 4 * t * d * config.d_ff)  # feed-forward
    return config.n_encoder_layers * encoder + config.n_decoder_layers * decoder + 2 * t * d * config.vocab_size


def training_flops(config: ModelConfig, source_lengths, target_lengths) -> int:
    """FLOPs of a training step's forward and backward over pairs of these lengths."""
    return 3 * sum(forward_flops(config, int(s), int(t)) for s, t in zip(source_lengths, target_lengths,
                                                                         strict=True))


def batch_flops(config: ModelConfig, src: torch.Tensor, tgt_out: torch.Tensor) -> int:
    """training_flops of a collated batch, its lengths read from the padding (host tensors: no device sync)."""
    return training_flops(config, (src != config.pad_id).sum(1).tolist(), (tgt_out != config.pad_id).sum(1).tolist())


def peak_flops(device: torch.device) -> tuple[str, float | None]:
    """The device's name and dense bf16 peak in FLOP/s; None where it is not known (a CPU, a GPU not in the
    table: then no utilization is claimed)."""
    if device.type != "cuda":
        return "CPU", None
    name = torch.cuda.get_device_name(device)
    return name, next((peak for key, peak in PEAK_BF16.items() if key in name), None)
