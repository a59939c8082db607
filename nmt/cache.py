"""The decoder's incremental state: what `Transformer.decode_step` needs from one step to the next.

A state covers N sentences with K rows (beams) each, rows sentence-major: row r belongs to sentence r // K.
Cross-attention keys/values are computed once per sentence and shared by its K rows; the self-attention
keys/values grow one position per step in buffers that double when full. Search code moves rows with
`reorder` (beam search, which also widens its first step's one row per sentence to the K beams) and drops
whole sentences with `select` (finished ones then cost nothing).

The self-attention buffers are position-major, (capacity, rows, H, Dh): the positions filled so far are
one contiguous block, which a reorder copies alone into a buffer one position larger (room for the next
step), where a row-major buffer made it copy the unused capacity too, and attention reads them as one
block per position (faster, the same translations: benchmarks/EXPERIMENTS.md, "Measurements behind
choices in the code").

With `use_cache=False` the state keeps the token prefix and the encoder memory instead, and every step
recomputes the whole decoder prefix: slow, kept to verify the cache and to benchmark it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class DecoderState:
    cross_mask: Tensor | None  # (N, 1, 1, S) True on real source tokens; None when nothing is padded
    cross_keys: list[Tensor] = field(default_factory=list)  # per layer (N, H, S, Dh)
    cross_values: list[Tensor] = field(default_factory=list)
    self_keys: list[Tensor] = field(default_factory=list)  # per layer (capacity, N*K, H, Dh)
    self_values: list[Tensor] = field(default_factory=list)
    max_positions: int = 1024
    step: int = 0  # tokens already fed: the positional-encoding offset of the next one
    memory: Tensor | None = None  # (N, S, D), without cache only
    prefix: Tensor | None = None  # (N*K, step) tokens fed so far, without cache only
    sentences: Tensor | None = None  # (N,) each open sentence's index in its batch, with a shortlist only

    @property
    def use_cache(self) -> bool:
        return self.prefix is None

    @property
    def n_sentences(self) -> int:
        return (self.memory if self.memory is not None else self.cross_keys[0]).size(0)

    @property
    def beam_size(self) -> int:
        """Rows per sentence: one before beam search's first reorder widens the state, then K."""
        rows = self.prefix.size(0) if self.prefix is not None else self.self_keys[0].size(1)
        return rows // self.n_sentences

    def ensure_capacity(self, length: int) -> None:
        """Grow the self-attention buffers (geometrically) so that `length` positions fit."""
        capacity = self.self_keys[0].size(0)
        if length <= capacity:
            return
        new_capacity = min(max(2 * capacity, length), self.max_positions)
        for cache in (self.self_keys, self.self_values):
            for i, buffer in enumerate(cache):
                grown = buffer.new_empty(new_capacity, *buffer.shape[1:])
                grown[: self.step] = buffer[: self.step]
                cache[i] = grown

    def reorder(self, rows: Tensor) -> DecoderState:
        """Row r takes the decoder history of row `rows[r]` (which must belong to the same sentence).
        `rows` may hold more rows per sentence than the state: beam search widens its first step's one
        row per sentence to the K of the beam."""
        if self.prefix is not None:
            self.prefix = self.prefix.index_select(0, rows)
            return self
        for cache in (self.self_keys, self.self_values):
            for i, buffer in enumerate(cache):
                moved = buffer.new_empty(self.step + 1, rows.size(0), *buffer.shape[2:])
                torch.index_select(buffer[: self.step], 1, rows, out=moved[: self.step])
                cache[i] = moved
        return self

    def select(self, sentences: Tensor, reordered: Tensor | None = None) -> DecoderState:
        """Keep only the given sentences (indices into the current ones), with all of their rows. With
        `reordered` (R,): as reorder(reordered) and then select(sentences), in one copy of the cache."""
        beam = self.beam_size if reordered is None else reordered.size(0) // self.n_sentences
        rows = (sentences[:, None] * beam + torch.arange(beam, device=sentences.device)).reshape(-1)
        self.reorder(rows if reordered is None else reordered.index_select(0, rows))
        if self.cross_mask is not None:
            self.cross_mask = self.cross_mask.index_select(0, sentences)
        if self.sentences is not None:
            self.sentences = self.sentences.index_select(0, sentences)
        if self.memory is not None:
            self.memory = self.memory.index_select(0, sentences)
        for cache in (self.cross_keys, self.cross_values):
            for i, tensor in enumerate(cache):
                cache[i] = tensor.index_select(0, sentences)
        return self
