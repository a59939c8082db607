"""`nmt grow`: a trained model made deeper or wider to train on, from its own weights."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from nmt.errors import UsageError
from nmt.model.checkpoint import load_checkpoint
from nmt.training.grow import grown_checkpoint


def logits(checkpoint, src, tgt):
    model = checkpoint.build_model()
    with torch.no_grad():
        return model(src, tgt)


def test_a_wider_feed_forward_layer_computes_what_the_trained_one_did(tiny_checkpoint):
    trained = load_checkpoint(tiny_checkpoint)
    wide = grown_checkpoint(trained, d_ff=trained.config.d_ff * 3)
    assert wide.config.d_ff == trained.config.d_ff * 3
    up = wide.weights["decoder_layers.1.ffn.up.weight"]
    assert up.shape == (trained.config.d_ff * 3, trained.config.d_model)
    assert up[trained.config.d_ff:].abs().sum() > 0  # new units that can learn, once their outgoing weights move
    src = torch.randint(4, trained.config.vocab_size, (2, 7))
    tgt = torch.randint(4, trained.config.vocab_size, (2, 5))
    torch.testing.assert_close(logits(wide, src, tgt), logits(trained, src, tgt), atol=1e-5, rtol=1e-5)


def test_a_deeper_encoder_stacks_copies_of_the_trained_layers(tiny_checkpoint):
    trained = load_checkpoint(tiny_checkpoint)
    layers = trained.config.n_encoder_layers
    deep = grown_checkpoint(trained, encoder_layers=2 * layers + 1)
    assert deep.config.n_encoder_layers == 2 * layers + 1 and deep.config.n_decoder_layers == layers
    for index in range(2 * layers + 1):
        for name, tensor in trained.weights.items():
            if name.startswith(f"encoder_layers.{index % layers}."):
                copy = name.replace(f"encoder_layers.{index % layers}.", f"encoder_layers.{index}.", 1)
                assert torch.equal(deep.weights[copy], tensor.float())
    assert deep.build_model() is not None  # names and shapes are the grown config's


def test_a_model_is_not_shrunk(tiny_checkpoint):
    trained = load_checkpoint(tiny_checkpoint)
    with pytest.raises(UsageError, match="grows, not shrinks"):
        grown_checkpoint(trained, encoder_layers=1)


def test_the_command_writes_a_checkpoint_that_loads_with_its_tokenizer(tiny_checkpoint, tmp_path):
    out = tmp_path / "grown.pt"
    result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "grow", "--model", str(tiny_checkpoint),
                             "--output", str(out), "--encoder-layers", "3", "--d-ff", "96"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    grown = load_checkpoint(out)
    assert (grown.config.n_encoder_layers, grown.config.d_ff) == (3, 96)
    assert grown.spm_model == load_checkpoint(tiny_checkpoint).spm_model and grown.train_state is None
    assert "3+2 layers, d_ff 96" in result.stdout
