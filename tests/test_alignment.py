"""Cross-attention weights, word alignments from them, and the attention heatmap."""

from __future__ import annotations

import json
import subprocess
import sys

import torch

from nmt.decoding.alignment import cross_attention, word_alignment, word_starts
from tests.conftest import tiny_model

NMT = [sys.executable, "-m", "nmt_cli.main"]


def test_weights_are_each_target_position_s_distribution_over_the_source():
    model = tiny_model()
    weights = cross_attention(model, [5, 6, 7], [8, 9])
    config = model.config
    assert weights.shape == (config.n_decoder_layers, config.n_heads, 3, 4)  # (L, H, T+1, S+1)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(weights.shape[:-1]))
    assert torch.equal(cross_attention(model, [5, 6, 7], [8, 9]), weights)


def test_words_are_linked_through_their_pieces_attention():
    source, target = ["\u2581A", "\u2581do", "g", "."], ["\u2581Un", "\u2581chi", "en", "."]
    assert word_starts(source) == [0, 1, 1, 1]
    weights = torch.zeros(5, 5)  # (T+1, S+1): "chi" and "en" look at "do" and "g", "Un" at "A"
    weights[0, 0] = weights[1, 1] = weights[2, 2] = weights[3, 3] = 1.0
    assert word_alignment(weights, source, target) == [(0, 0), (1, 1)]
    weights[1] = weights[2] = torch.tensor([0.9, 0.0, 0.0, 0.1, 0.0])  # word 1 now looks mostly at "A"
    assert word_alignment(weights, source, target) == [(0, 0), (0, 1)]


def test_translate_prints_alignments_and_attention_draws_a_picture(tiny_checkpoint, tmp_path):
    lines = "A dog runs in the park.\n\nTwo men talk.\n"
    result = subprocess.run(NMT + ["translate", "--model", str(tiny_checkpoint), "--format", "jsonl",
                                   "--alignments"], input=lines, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 3 and records[1]["alignment"] == ""
    for record in (records[0], records[2]):
        pairs = [tuple(map(int, pair.split("-"))) for pair in record["alignment"].split()]
        assert [j for _, j in pairs] == list(range(len(record["translation"].split())))
        assert all(0 <= i < len(record["source"].split()) for i, _ in pairs)
    refused = subprocess.run(NMT + ["translate", "--model", str(tiny_checkpoint), "--alignments"], input=lines,
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "--format jsonl" in refused.stderr
    picture = tmp_path / "heat.png"
    drawn = subprocess.run(NMT + ["attention", "--model", str(tiny_checkpoint), "--text", "A dog runs.", "--grid",
                                  "--output", str(picture)], capture_output=True, text=True)
    assert drawn.returncode == 0, drawn.stderr
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
