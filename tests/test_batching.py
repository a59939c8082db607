from pathlib import Path

import numpy as np

from nmt.data.batching import (
    bucket_length,
    collate,
    pad_sources,
    sorted_batches,
    static_collate,
    static_rows,
    token_batches,
)


def lengths(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Pairs like English-French: targets 5-40 tokens, sources 60-110% as long, either side the longer."""
    rng = np.random.default_rng(seed)
    tgt = rng.integers(5, 40, n)
    src = np.maximum(1, (tgt * rng.uniform(0.6, 1.1, n)).astype(np.int64))
    return src, tgt


def padded_share(batches, lengths_) -> float:
    padded = sum(len(b) * (lengths_[b].max() + 1) for b in batches)
    return 1 - sum((lengths_[b] + 1).sum() for b in batches) / padded


def test_every_pair_once_within_the_budget_and_the_same_for_the_same_seed_and_epoch():
    src, tgt = lengths(5000)
    src[7] = 900  # longer than the budget allows with another pair: a batch alone
    batches = token_batches(src, tgt, 1024, seed=3, epoch=2)
    assert sorted(np.concatenate(batches).tolist()) == list(range(5000))
    for batch in batches:
        assert len(batch) * (max(src[batch].max(), tgt[batch].max()) + 1) <= 1024 or len(batch) == 1
    assert [b.tolist() for b in token_batches(src, tgt, 1024, seed=3, epoch=2)] == [b.tolist() for b in batches]
    assert [b.tolist() for b in token_batches(src, tgt, 1024, seed=3, epoch=3)] != [b.tolist() for b in batches]


def test_neither_side_pads_much_when_the_sides_differ_in_length():
    src, tgt = lengths(50000)
    batches = token_batches(src, tgt, 4096, seed=1, epoch=0)
    # sorted by the longer side alone, the sources of a batch span 60-110% of one length: about 20% padding
    assert padded_share(batches, src) < 0.05
    assert padded_share(batches, tgt) < 0.05


def test_collate_adds_eos_to_sources_and_shifts_targets():
    src, tgt_in, tgt_out = collate([[5, 6], [7]], [[8], [9, 10, 11]], 0, 2, 3)
    assert src.tolist() == [[5, 6, 3], [7, 3, 0]]
    assert tgt_in.tolist() == [[2, 8, 0, 0], [2, 9, 10, 11]]
    assert tgt_out.tolist() == [[8, 3, 0, 0], [9, 10, 11, 3]]


def test_inference_batches_take_the_longest_first_and_fill_the_budget_from_it():
    lengths = [3, 9, 3, 1, 9, 4]
    batches = [batch.tolist() for batch in sorted_batches(lengths, max_tokens=20)]
    assert batches == [[1, 4], [5, 0, 2, 3]]  # 2 x (9 + 1) tokens, then 4 x (4 + 1); ties in input order
    assert [batch.tolist() for batch in sorted_batches(lengths, max_tokens=20, batch_size=4)] == [[1, 4, 5, 0],
                                                                                                 [2, 3]]
    assert [batch.tolist() for batch in sorted_batches([30, 2], max_tokens=8)] == [[0], [1]]  # one alone if too long
    assert sorted_batches([], max_tokens=8) == []


def test_pad_sources_is_the_source_side_of_collate():
    sources, targets = [[5, 6, 7], [8]], [[9], [10, 11]]
    assert pad_sources(sources, 0, 3).tolist() == collate(sources, targets, 0, 2, 3)[0].tolist() == [[5, 6, 7, 3],
                                                                                                    [8, 3, 0, 0]]


def wmt_lengths() -> tuple[np.ndarray, np.ndarray]:
    """benchmarks/wmt-lengths.tsv: the pieces of 4,000 Europarl and WMT news pairs."""
    table = Path(__file__).parent.parent / "benchmarks" / "wmt-lengths.tsv"
    rows = [line.split("\t") for line in table.read_text().splitlines() if not line.startswith("#")]
    return np.array([int(s) for s, _ in rows]), np.array([int(t) for _, t in rows])


def test_bucket_lengths_are_few_and_pad_by_under_8_or_a_quarter():
    lengths_ = np.arange(1, 513)
    padded = bucket_length(lengths_)
    assert (padded >= lengths_).all() and (padded - lengths_ < np.maximum(8, lengths_ / 4)).all()
    assert padded[:64].tolist() == [8 * (1 + (n - 1) // 8) for n in range(1, 65)]
    assert len(set(padded[:256].tolist())) == 16  # 8..64 by 8, 80..128 by 16, 160..256 by 32
    assert bucket_length(129) == 160 and isinstance(bucket_length(129), int)


def test_static_batches_fit_their_shape_and_make_few_shapes_of_wmt_lengths():
    """A static batch of padded length L holds at most max_tokens // L sentences, so every batch of one L has
    one shape: CUDA graphs record one a shape (torch warns past 50), and the padding stays about that of
    lengths padded to 8 (the compiled step's)."""
    src, tgt = wmt_lengths()
    for max_tokens in (4096, 16384):
        batches = token_batches(src, tgt, max_tokens, seed=1, epoch=0, static_shapes=True)
        assert sorted(np.concatenate(batches).tolist()) == list(range(len(src)))
        shapes, padded = set(), 0
        for batch in batches:
            s, t = bucket_length(src[batch].max() + 1), bucket_length(tgt[batch].max() + 1)
            assert len(batch) <= static_rows(max_tokens, max(s, t))
            shapes.add((static_rows(max_tokens, max(s, t)), s, t))
            padded += static_rows(max_tokens, max(s, t)) * (s + t)
        eights = sum(len(b) * (-(-(src[b].max() + 1) // 8) * 8 + -(-(tgt[b].max() + 1) // 8) * 8)
                     for b in token_batches(src, tgt, max_tokens, seed=1, epoch=0))
        assert len(shapes) <= 50
        assert padded < 1.1 * eights


def test_static_collate_pads_to_the_shape_with_filler_rows_the_loss_ignores():
    src, tgt_in, tgt_out = static_collate([[5, 6], [7]], [[8], [9, 10, 11]], 0, 2, 3, max_tokens=40)
    assert src.shape == tgt_in.shape == tgt_out.shape == (5, 8)  # 40 // 8 rows, lengths to 8
    plain = collate([[5, 6], [7]], [[8], [9, 10, 11]], 0, 2, 3)
    for padded, unpadded in zip((src, tgt_in, tgt_out), plain, strict=True):
        assert padded[:2, : unpadded.size(1)].tolist() == unpadded.tolist()
        assert (padded[:2, unpadded.size(1):] == 0).all()
    assert src[2:].tolist() == [[3] + [0] * 7] * 3  # EOS alone: an attention row is never all masked
    assert tgt_in[2:, 0].tolist() == [2] * 3 and (tgt_in[2:, 1:] == 0).all() and (tgt_out[2:] == 0).all()
