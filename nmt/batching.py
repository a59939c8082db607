"""Batches by token budget: sentences of similar length together, batches in random order.

    batches = token_batches(src_lengths, tgt_lengths, max_tokens=4096, seed=1, epoch=0)
    src, tgt_in, tgt_out = collate([src_ids[i] for i in batch], [tgt_ids[i] for i in batch], pad, bos, eos)
"""

from __future__ import annotations

import random

import torch
from torch import Tensor


def token_batches(src_lengths: list[int], tgt_lengths: list[int], max_tokens: int, seed: int,
                  epoch: int) -> list[list[int]]:
    """Index batches whose padded size (sentences x longest side, +1 for EOS/BOS) stays within
    `max_tokens`; sorted by length with random tie-breaks, then shuffled, both by (seed, epoch)."""
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(len(src_lengths)))
    rng.shuffle(order)
    order.sort(key=lambda i: (tgt_lengths[i], src_lengths[i]))  # stable: ties stay shuffled
    batches, batch, longest = [], [], 0
    for index in order:
        length = max(src_lengths[index], tgt_lengths[index]) + 1
        if batch and (len(batch) + 1) * max(longest, length) > max_tokens:
            batches.append(batch)
            batch, longest = [], 0
        batch.append(index)
        longest = max(longest, length)
    if batch:
        batches.append(batch)
    rng.shuffle(batches)
    return batches


def pad_batch(sequences: list[list[int]], pad_id: int) -> Tensor:
    length = max(len(s) for s in sequences)
    out = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        out[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
    return out


def collate(src: list[list[int]], tgt: list[list[int]], pad_id: int, bos_id: int,
            eos_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """Source ids + EOS (B, S); target input BOS + ids (B, T); target output ids + EOS (B, T)."""
    return (
        pad_batch([s + [eos_id] for s in src], pad_id),
        pad_batch([[bos_id] + t for t in tgt], pad_id),
        pad_batch([t + [eos_id] for t in tgt], pad_id),
    )
