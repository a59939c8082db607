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

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from nmt.model.attention import inference_attention
from nmt.model.shortlist import ListedTokens

# The attention of nmt.model.transformer.decoder_step, which each decoder builds over its own cache:
# self-attention (layer, queries (R, D), this position's keys and values (R, H, Dh)) -> (R, D), storing the
# keys and values in the cache and attending over every position so far; cross-attention (layer, queries
# (R, D)) -> (R, D), over the layer's cross keys and values.
SelfAttention = Callable[[int, Tensor, Tensor, Tensor], Tensor]
CrossAttention = Callable[[int, Tensor], Tensor]
# Kernels that read bf16 caches directly (nmt.model.native): self-attention (queries (R*H, Dh), keys and values
# (T, R*H, Dh)) -> (R*H, Dh); cross-attention (queries (N, K, H, Dh), keys and values (N, H, S, Dh), source
# lengths (N,)) -> (N, K, H, Dh)
SelfKernel = Callable[[Tensor, Tensor, Tensor], Tensor]
CrossKernel = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


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
    # With a shortlist (FlatDecoder.init_state's vocabularies): the batch's lists as the decoder bound them, and
    # each open sentence's index (N,) in the batch
    listed: ListedTokens | None = None
    sentences: Tensor | None = None
    # The caches in the layout of nmt.model.native's attention kernels (bf16; the cross caches also with each
    # source's tokens first), as the decoder that made the state keeps them (FlatDecoder.init_state)
    kernel_self: bool = False
    kernel_cross: bool = False

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


def row_attention(q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, n_heads: int) -> Tensor:
    """One query position per row: queries (R, D) over each row's keys and values (R, H, T, Dh) -> (R, D)."""
    rows = q.size(0)
    return inference_attention(q.view(rows, n_heads, 1, -1), keys, values, mask).reshape(rows, -1)


def sentence_attention(q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, n_heads: int) -> Tensor:
    """The K rows of each of N sentences query their sentence's keys and values (N, H, S, Dh) as K query
    positions of one batch entry: queries (N*K, D) -> (N*K, D)."""
    rows, sentences = q.size(0), keys.size(0)
    q = q.view(sentences, rows // sentences, n_heads, -1).transpose(1, 2)  # (N, H, K, Dh)
    return inference_attention(q, keys, values, mask).transpose(1, 2).reshape(rows, -1)


def source_lengths(state: DecoderState) -> Tensor:
    """Each sentence's source tokens (N,) int64, for kernels that read sources padded at the end."""
    if state.cross_mask is None:
        return torch.full((state.n_sentences,), state.cross_keys[0].size(2))
    return state.cross_mask.view(state.n_sentences, -1).sum(dim=1)


def cached_attention(state: DecoderState, n_heads: int, self_kernel: SelfKernel | None = None,
                     cross_kernel: CrossKernel | None = None) -> tuple[SelfAttention, CrossAttention]:
    """The attention of one decoder step over a DecoderState's caches, at position `state.step` (which the
    caller advances after the step): through the kernels where given and the state keeps its caches in their
    layout (kernel_self, kernel_cross), else through nmt.model.attention's inference_attention."""
    step, sentences = state.step, state.n_sentences
    if not state.kernel_self:
        self_kernel = None
    if not state.kernel_cross:
        cross_kernel = None
    if cross_kernel is not None:
        lengths = source_lengths(state)

    def self_attention(layer: int, q: Tensor, keys: Tensor, values: Tensor) -> Tensor:
        rows, head_dim = q.size(0), keys.size(-1)
        state.self_keys[layer][step] = keys  # position-major buffers (T, R, H, Dh)
        state.self_values[layer][step] = values
        cached_keys, cached_values = state.self_keys[layer][: step + 1], state.self_values[layer][: step + 1]
        if self_kernel is not None:
            return self_kernel(q.view(rows * n_heads, head_dim), cached_keys.view(step + 1, rows * n_heads, head_dim),
                               cached_values.view(step + 1, rows * n_heads, head_dim)).view(rows, -1)
        return row_attention(q, cached_keys.permute(1, 2, 0, 3), cached_values.permute(1, 2, 0, 3), None, n_heads)

    def cross_attention(layer: int, q: Tensor) -> Tensor:
        keys, values = state.cross_keys[layer], state.cross_values[layer]
        if cross_kernel is None:
            return sentence_attention(q, keys, values, state.cross_mask, n_heads)
        rows = q.size(0)
        return cross_kernel(q.view(sentences, rows // sentences, n_heads, -1), keys, values, lengths).reshape(rows, -1)

    return self_attention, cross_attention
