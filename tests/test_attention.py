"""The choice of attention kernel: each path the decoder takes on a CPU computes the paper's formula."""

from __future__ import annotations

from unittest.mock import patch

import torch

from nmt.model.attention import BMM_LOOP_MAX, PLAIN_ATTENTION_MIN_BATCH, inference_attention
from nmt.model.transformer import MultiHeadAttention
from tests.conftest import reference_attention


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
        blocked = "nmt.model.attention." + ("plain_attention" if path == "broadcast" else "broadcast_attention")
        with (patch(blocked, side_effect=AssertionError(f"not the {path} path")),
              patch("torch.nn.functional.scaled_dot_product_attention", side_effect=AssertionError("fused kernel"))):
            got = inference_attention(q, keys, values, None)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
