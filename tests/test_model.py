"""The Transformer against the paper's own properties."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from nmt.model.transformer import MultiHeadAttention, Transformer, sinusoidal_table
from tests.conftest import reference_attention, tiny_model


def test_sdpa_attention_equals_the_explicit_formula():
    torch.manual_seed(0)
    attention = MultiHeadAttention(d_model=16, n_heads=4, dropout=0.0).eval()
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 4:] = False  # the second sentence has 3 padded keys
    keys, values = attention.project_kv(memory)
    got = attention(x, keys, values, mask)

    q = attention.q_proj(x).view(2, 5, 4, 4).transpose(1, 2)
    out, weights = reference_attention(q, keys, values, mask)
    expected = attention.out_proj(out.transpose(1, 2).reshape(2, 5, 16))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 5))
    assert (weights[1, ..., 4:] == 0).all()


def test_positional_encoding_matches_the_formula():
    table = sinusoidal_table(50, 8)
    for pos, i in [(0, 0), (1, 0), (7, 1), (49, 3)]:
        angle = pos / 10000 ** (2 * i / 8)
        assert math.isclose(table[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
        assert math.isclose(table[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)
    model = tiny_model()
    tokens = torch.tensor([[5, 6, 7]])
    expected = model.embed(tokens) * math.sqrt(32) + model.positions[4:7]
    torch.testing.assert_close(model.embed_tokens(tokens, offset=4), expected)


def test_decoder_is_causal():
    model = tiny_model()
    src = torch.tensor([[5, 6, 7, 3]])
    tgt = torch.tensor([[2, 10, 11, 12, 13, 14]])
    changed = tgt.clone()
    changed[0, 4:] = torch.tensor([40, 41])
    before, after = model(src, tgt), model(src, changed)
    torch.testing.assert_close(before[:, :4], after[:, :4])
    assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_encoder_without_positions_is_permutation_equivariant():
    for pre_norm in (False, True):
        model = tiny_model(positional_encoding=False, pre_norm=pre_norm)
        src = torch.tensor([[5, 6, 7, 8, 9, 3]])
        permutation = torch.tensor([3, 0, 5, 1, 4, 2])
        memory = model.encode(src)
        torch.testing.assert_close(model.encode(src[:, permutation]), memory[:, permutation], atol=1e-5, rtol=1e-5)
    # With positions the same permutation changes the encoding: the switch is what makes the difference.
    model = tiny_model()
    assert not torch.allclose(model.encode(src[:, permutation]), model.encode(src)[:, permutation], atol=1e-3)


def test_padding_does_not_change_real_outputs():
    for pre_norm in (False, True):
        model = tiny_model(pre_norm=pre_norm)
        src = torch.tensor([[5, 6, 7, 3]])
        tgt = torch.tensor([[2, 10, 11]])
        padded_src = F.pad(src, (0, 3), value=0)
        padded_tgt = F.pad(tgt, (0, 2), value=0)
        torch.testing.assert_close(model(padded_src, padded_tgt)[:, :3], model(src, tgt), atol=1e-5, rtol=1e-5)
        # and in a batch beside a longer sentence
        batch_src = torch.tensor([[5, 6, 7, 3, 0, 0], [8, 9, 10, 11, 12, 3]])
        batch_tgt = torch.tensor([[2, 10, 11, 0], [2, 13, 14, 15]])
        torch.testing.assert_close(model(batch_src, batch_tgt)[:1, :3], model(src, tgt), atol=1e-5, rtol=1e-5)


def test_output_projection_is_tied_to_the_embedding():
    model = tiny_model()
    assert model.output_proj is None
    x = torch.randn(3, 32)
    torch.testing.assert_close(model.project(x), x @ model.embed.weight.T)
    untied = tiny_model(tie_embeddings=False)
    assert untied.project(x).shape == (3, 60)


def test_building_from_weights_runs_no_python_reference_kernel():
    """On the meta device torch runs some operations (normal_, arange) through its Python reference kernels,
    which import torch._dynamo (1.4-2 s) in a process that imported torch plainly: from_weights must run
    none of them."""
    code = ("import sys, torch\n"
            "from nmt.model.config import ModelConfig\n"
            "from nmt.model.transformer import Transformer\n"
            "model = Transformer(ModelConfig(vocab_size=64, d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1,"
            " n_decoder_layers=1))\n"
            "Transformer.from_weights(model.config, model.state_dict())\n"
            "print('torch._dynamo' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_a_model_built_from_weights_equals_one_initialized_then_loaded():
    model = tiny_model(vocab_size=50)
    weights = {name: tensor.half() for name, tensor in model.state_dict().items()}
    loaded = tiny_model(vocab_size=50, seed=1)
    loaded.load_state_dict(weights)  # the random initialization overwritten, the weights cast to float32
    built = Transformer.from_weights(model.config, weights).eval()
    assert not any(tensor.is_meta for tensor in [*built.parameters(), *built.buffers()])
    assert all(parameter.dtype == torch.float32 and parameter.requires_grad for parameter in built.parameters())
    torch.testing.assert_close(built.positions, model.positions, atol=0, rtol=0)
    src, tgt = torch.randint(4, 50, (2, 7)), torch.randint(4, 50, (2, 5))
    assert torch.equal(built(src, tgt), loaded(src, tgt))
    with torch.no_grad():
        built.embed.weight.add_(1.0)
    assert torch.equal(weights["embed.weight"], model.state_dict()["embed.weight"].half())  # copies, not views


def test_training_mode_causal_attention_equals_the_explicit_mask_of_inference():
    """Training runs the decoder's self-attention with is_causal (no mask tensor, flash kernels where SDPA
    has them); without dropout it must give the logits of inference, which builds the mask."""
    model = tiny_model(vocab_size=50)
    src = torch.tensor([[5, 6, 7, 3, 0], [8, 9, 10, 11, 3]])
    tgt_in = torch.tensor([[2, 12, 13, 14], [2, 15, 16, 0]])
    expected = model(src, tgt_in)
    model.train()
    assert torch.allclose(model(src, tgt_in), expected, atol=1e-5)


@pytest.mark.parametrize("masks", ["kernel", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_drops_a_p_share_scales_the_rest_and_is_the_identity_in_eval(monkeypatch, masks, dtype):
    """Both ways of drawing the masks: the C kernel's hash of each unit's index (where the kernels build) and
    the random bits of torch's generator."""
    from nmt.model import transformer
    from nmt.model.transformer import Dropout

    if masks == "torch":
        monkeypatch.setattr(transformer, "dropout_kernel", lambda: None)
    elif transformer.dropout_kernel() is None:
        pytest.skip("the C kernels do not build here")
    dropout = Dropout(0.1).train()
    x = (torch.rand(512, 1024) + 0.5).to(dtype).requires_grad_(True)
    torch.manual_seed(3)
    y = dropout(x)
    dropped = y == 0
    assert abs(float(dropped.float().mean()) - 0.1) < 0.003  # 524,288 units: the share is within 0.3 points
    kept = ~dropped
    rtol = 1e-4 if dtype == torch.float32 else 8e-3  # bf16: rounded once
    assert torch.allclose(y[kept].float(), x[kept].float() / 0.9, rtol=rtol)
    y.sum().backward()
    assert torch.equal(x.grad == 0, dropped)
    assert torch.allclose(x.grad[kept].float(), torch.full(x.grad[kept].shape, 1 / 0.9), rtol=rtol)
    torch.manual_seed(3)
    assert torch.equal(dropout(x), y)  # the global generator decides: a resumed run draws the same masks
    assert torch.equal(dropout.eval()(x), x) and torch.equal(Dropout(0.0).train()(x), x)


def test_inference_encoder_equals_the_training_layers_without_dropout():
    for pre_norm in (False, True):
        model = tiny_model(pre_norm=pre_norm)
        src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]])  # the second sentence padded
        inference = model.encode(src)  # encoder_stack over the layers' modules
        with torch.no_grad():
            training = model.train().encode(src)  # EncoderLayer.forward, dropout 0
        model.eval()
        real = src != model.config.pad_id
        torch.testing.assert_close(inference[real], training[real], atol=1e-5, rtol=1e-5)
