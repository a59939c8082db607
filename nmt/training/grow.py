"""A trained model made larger to train on (`nmt grow`): a deeper encoder or a wider feed-forward layer, grown
from the trained weights rather than started afresh.

    grown = grown_checkpoint(load_checkpoint("general.pt"), encoder_layers=6)     # layers 0,1,2,0,1,2
    grown = grown_checkpoint(load_checkpoint("general.pt"), d_ff=2048)            # the same function, wider

A deeper encoder stacks copies of the trained layers on top of them (shallow-to-deep training, Li et al. 2020:
3 -> 6 layers is the stack twice). A wider feed-forward layer keeps every trained unit and adds new ones whose
outgoing weights are zero, so the grown model computes exactly what the trained one did and training opens the
new units up from there. What is grown starts without training state, like any --init-from.
"""

from __future__ import annotations

import dataclasses
import re

import torch

from nmt.errors import UsageError
from nmt.model.checkpoint import Checkpoint

ENCODER_LAYER = re.compile(r"encoder_layers\.(\d+)\.(.+)")


def grown_checkpoint(checkpoint: Checkpoint, encoder_layers: int | None = None, d_ff: int | None = None,
                     seed: int = 1) -> Checkpoint:
    """`checkpoint` with `encoder_layers` encoder layers (copies of its own, in order, stacked on top) and a
    feed-forward layer `d_ff` wide in every layer (new units' outgoing weights zero); float32 weights, no
    training state, no shortlist (its tokens are the same, but it is rebuilt for a new model anyway)."""
    config = checkpoint.config
    encoder_layers = config.n_encoder_layers if encoder_layers is None else encoder_layers
    d_ff = config.d_ff if d_ff is None else d_ff
    if encoder_layers < config.n_encoder_layers or d_ff < config.d_ff:
        raise UsageError(f"a model grows, not shrinks: it has {config.n_encoder_layers} encoder layers and d_ff "
                         f"{config.d_ff}, asked for {encoder_layers} and {d_ff}")
    weights = {name: tensor.float() for name, tensor in checkpoint.weights.items()}
    weights = _deeper_encoder(weights, config.n_encoder_layers, encoder_layers)
    weights = _wider_feed_forward(weights, d_ff, torch.Generator().manual_seed(seed))
    grown = dataclasses.replace(config, n_encoder_layers=encoder_layers, d_ff=d_ff)
    training = {"grown_from": {"encoder_layers": config.n_encoder_layers, "d_ff": config.d_ff,
                               "summary": checkpoint.training.get("summary", {})}}
    return Checkpoint(grown, weights, checkpoint.spm_model, dict(checkpoint.decoding), training)


def _deeper_encoder(weights: dict[str, torch.Tensor], layers: int, wanted: int) -> dict[str, torch.Tensor]:
    """Encoder layer i >= layers is a copy of layer i mod layers."""
    grown = dict(weights)
    for name, tensor in weights.items():
        match = ENCODER_LAYER.fullmatch(name)
        if match is None:
            continue
        index, rest = int(match.group(1)), match.group(2)
        for copy in range(index + layers, wanted, layers):
            grown[f"encoder_layers.{copy}.{rest}"] = tensor.clone()
    return grown


def _wider_feed_forward(weights: dict[str, torch.Tensor], d_ff: int, generator: torch.Generator
                        ) -> dict[str, torch.Tensor]:
    """Each feed-forward layer d_ff wide: the trained units first; new units with incoming weights drawn like the
    trained ones' (their standard deviation), zero bias and zero outgoing weights."""
    grown = dict(weights)
    for name, up in weights.items():
        if not name.endswith(".ffn.up.weight") or up.size(0) == d_ff:
            continue
        prefix, added = name[: -len("up.weight")], d_ff - up.size(0)
        fresh = torch.randn(added, up.size(1), generator=generator) * up.std()
        grown[f"{prefix}up.weight"] = torch.cat([up, fresh])
        grown[f"{prefix}up.bias"] = torch.cat([weights[f"{prefix}up.bias"], torch.zeros(added)])
        down = weights[f"{prefix}down.weight"]
        grown[f"{prefix}down.weight"] = torch.cat([down, torch.zeros(down.size(0), added)], dim=1)
    return grown
