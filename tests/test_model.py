"""The Transformer against the paper's own properties."""

from __future__ import annotations

import math
import subprocess
import sys
from unittest.mock import patch

import torch
import torch.nn.functional as F

from nmt.model import (
    BMM_LOOP_MAX,
    PLAIN_ATTENTION_MIN_BATCH,
    MultiHeadAttention,
    Transformer,
    inference_attention,
    sinusoidal_table,
)
from tests.conftest import tiny_model


def reference_attention(q, k, v, mask):
    """softmax(Q K^T / sqrt(d)) V with the weights returned."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


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


def test_batched_decoding_attention_takes_the_plain_path_and_equals_the_formula():
    torch.manual_seed(1)
    attention = MultiHeadAttention(d_model=16, n_heads=4, dropout=0.0).eval()
    rows = PLAIN_ATTENTION_MIN_BATCH  # one query position per row: the CPU decoding shape
    x, memory = torch.randn(rows, 1, 16), torch.randn(rows, 6, 16)
    mask = torch.ones(rows, 1, 1, 6, dtype=torch.bool)
    mask[::2, ..., 3:] = False
    keys, values = attention.project_kv(memory)
    q = attention.q_proj(x).view(rows, 1, 4, 4).transpose(1, 2)
    out, _ = reference_attention(q, keys, values, mask)
    expected = attention.out_proj(out.transpose(1, 2).reshape(rows, 1, 16))
    with patch("torch.nn.functional.scaled_dot_product_attention", side_effect=AssertionError("fused kernel")):
        got = attention(x, keys, values, mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_short_self_attention_takes_the_broadcast_path_and_equals_the_formula():
    """A cached step's self-attention over its first positions (one query per row, no mask) skips the
    matmuls, which torch runs as a slow loop for such small matrices; from BMM_LOOP_MAX on it is theirs."""
    torch.manual_seed(2)
    rows, heads, head_dim = PLAIN_ATTENTION_MIN_BATCH, 4, 8
    everything = torch.ones(rows, 1, 1, BMM_LOOP_MAX, dtype=torch.bool)
    q = torch.randn(rows, heads, 1, head_dim)
    longest_broadcast = (BMM_LOOP_MAX - 1) // head_dim
    for length, path in ((1, "broadcast"), (longest_broadcast, "broadcast"), (longest_broadcast + 1, "plain")):
        # position-major caches, as the decoder keeps them: (T, R, H, Dh) seen as (R, H, T, Dh)
        keys, values = (torch.randn(length, rows, heads, head_dim).permute(1, 2, 0, 3) for _ in range(2))
        expected, _ = reference_attention(q, keys, values, everything[..., :length])
        blocked = "nmt.model.plain_attention" if path == "broadcast" else "nmt.model.broadcast_attention"
        with (patch(blocked, side_effect=AssertionError(f"not the {path} path")),
              patch("torch.nn.functional.scaled_dot_product_attention", side_effect=AssertionError("fused kernel"))):
            got = inference_attention(q, keys, values, None)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


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
            "from nmt.config import ModelConfig\n"
            "from nmt.model import Transformer\n"
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
