"""Decoding with fixed shapes, so that on CUDA the whole decoder step runs as one captured CUDA graph.

At small batches a GPU decoder step is a few hundred tiny kernels whose launch costs more than their
work; replaying a captured graph launches them all at once. A graph needs every tensor it touches at a
fixed address with a fixed shape, so the static state preallocates the self-attention cache for the
longest allowed target, writes each step's keys/values at a position held in a tensor, and masks the
positions not yet written instead of slicing them off.

    decoder = GraphDecoder(model)                                # one per translator: captured steps by shape
    state = decoder.init_state(src, beam_size=4, max_length=60)
    log_probs, state = decoder.decode_step(tokens, state)        # a decoder of nmt.decoding.search, as the model is

Captured steps are kept by shape (rows, source length rounded up to SOURCE_BUCKET, target length rounded
up to TARGET_BUCKET) and reused by later batches of the same shape. Finished sentences keep their rows in
the buffers (the shapes are fixed); the state maps the search's open rows onto them. On a CPU (and with
`capture=False`) the same fixed-shape step runs eagerly: that is how the tests check it.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import Tensor

from nmt.model.cache import CrossAttention, SelfAttention, row_attention, sentence_attention
from nmt.model.shortlist import Vocabularies

SOURCE_BUCKET = 8
TARGET_BUCKET = 16
WARMUP_STEPS = 2  # eager runs on a side stream before capture (cuBLAS handles, kernel choices)


def round_up(value: int, multiple: int, limit: int) -> int:
    return max(value, min(-(-value // multiple) * multiple, limit))


def step_nbytes(config, element_size: int, sentences: int, beam_size: int, src_len: int, max_length: int) -> int:
    """Memory a captured step keeps: its caches, and the logits and fp32 log-probs in the graph's pool."""
    rows = sentences * beam_size
    caches = 2 * config.n_decoder_layers * config.d_model * (rows * max_length + sentences * src_len)
    return caches * element_size + rows * config.vocab_size * (element_size + 4)


class CapturedStep:
    """Static buffers for one shape and the decoder step over them (a CUDA graph when captured)."""

    def __init__(self, model, sentences: int, beam_size: int, src_len: int, max_length: int, capture: bool):
        config = model.config
        weight = model.embed.weight
        heads, head_dim, layers = config.n_heads, config.d_model // config.n_heads, config.n_decoder_layers
        rows = sentences * beam_size
        self.model = model
        self.tokens = torch.full((rows,), config.pad_id, dtype=torch.long, device=weight.device)
        self.position = torch.zeros(1, dtype=torch.long, device=weight.device)
        # (L, 2, R, H, T, Dh): keys and values of every layer in one tensor, so a beam reorder is one copy
        self.self_cache = weight.new_zeros(layers, 2, rows, heads, max_length, head_dim)
        self.cross_cache = weight.new_zeros(layers, 2, sentences, heads, src_len, head_dim)  # (L, 2, N, H, S, Dh)
        self.cross_mask = torch.zeros(sentences, src_len, dtype=torch.bool, device=weight.device)  # True: real token
        self.graph = None
        self.log_probs: Tensor | None = None
        self.nbytes = step_nbytes(config, weight.element_size(), sentences, beam_size, src_len, max_length)
        if capture:
            self._capture()

    def _compute(self) -> Tensor:
        return self.model.run_step(self.tokens, self.position, *fixed_attention(
            self.self_cache, self.cross_cache, self.cross_mask, self.position, self.model.config.n_heads))

    def _capture(self) -> None:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(WARMUP_STEPS):
                self._compute()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.log_probs = self._compute()

    @torch.no_grad()
    def load(self, memory: Tensor, src_mask: Tensor) -> None:
        """Cross-attention keys/values of the encoder memory (N, S, D), and its mask (N, S), into the
        static buffers."""
        for i, layer in enumerate(self.model.decoder_layers):
            keys, values = layer.cross_attn.project_kv(memory)  # (N, H, S, Dh) each
            self.cross_cache[i, 0].copy_(keys)
            self.cross_cache[i, 1].copy_(values)
        self.cross_mask.copy_(src_mask)

    def run(self, tokens: Tensor, rows: Tensor | None, step: int) -> Tensor:
        """Feed tokens to physical `rows` (None: all rows, in order) at position `step`: their log-probs.
        The result of a replayed graph lives in its static output: it is overwritten by the next step."""
        if rows is None:
            self.tokens.copy_(tokens)
        else:
            self.tokens.index_copy_(0, rows, tokens)
        self.position.fill_(step)
        if self.graph is None:
            log_probs = self._compute()
        else:
            self.graph.replay()
            log_probs = self.log_probs
        return log_probs if rows is None else log_probs.index_select(0, rows)


def fixed_attention(self_cache: Tensor, cross_cache: Tensor, cross_mask: Tensor, position: Tensor,
                    n_heads: int) -> tuple[SelfAttention, CrossAttention]:
    """The attention of nmt.model.transformer.decoder_step over fixed buffers: the self-attention cache
    (L, 2, R, H, T, Dh) receives the step's keys and values at `position` (1,), and attention runs over all T
    positions with those after `position` masked; cross keys/values (L, 2, N, H, S, Dh) with cross_mask (N, S)."""
    times = torch.arange(self_cache.size(4), device=position.device)
    self_mask = (times <= position)[None, None, None, :]  # (1, 1, 1, T)
    source_mask = cross_mask[:, None, None, :]  # (N, 1, 1, S)

    def self_attention(layer: int, q: Tensor, keys: Tensor, values: Tensor) -> Tensor:
        cached_keys, cached_values = self_cache[layer, 0], self_cache[layer, 1]  # (R, H, T, Dh)
        cached_keys.index_copy_(2, position, keys[:, :, None])
        cached_values.index_copy_(2, position, values[:, :, None])
        return row_attention(q, cached_keys, cached_values, self_mask, n_heads)

    def cross_attention(layer: int, q: Tensor) -> Tensor:
        return sentence_attention(q, cross_cache[layer, 0], cross_cache[layer, 1], source_mask, n_heads)

    return self_attention, cross_attention


class StaticDecoderState:
    """A decoder state over a CapturedStep: the search's open rows are physical rows `rows` of the buffers
    (None while every row is open, in order)."""

    def __init__(self, beam_size: int, captured: CapturedStep):
        self.beam_size = beam_size
        self.captured = captured
        self.rows: Tensor | None = None
        self.step = 0
        self._all_rows = torch.arange(captured.tokens.numel(), device=captured.tokens.device)

    @property
    def open_rows(self) -> Tensor:
        """The physical rows of the open hypotheses, in the search's order."""
        return self._all_rows if self.rows is None else self.rows

    @property
    def n_sentences(self) -> int:
        return self.open_rows.numel() // self.beam_size

    def advance(self, tokens: Tensor) -> Tensor:
        """One decoder step for the open rows: (R,) tokens -> (R, V) log-probabilities."""
        log_probs = self.captured.run(tokens, self.rows, self.step)
        self.step += 1
        return log_probs

    def reorder(self, rows: Tensor) -> StaticDecoderState:
        """Open row r takes the history of open row `rows[r]` (of the same sentence)."""
        current = self.open_rows
        cache = self.captured.self_cache  # (L, 2, R, H, T, Dh)
        if self.step > 0:
            cache[:, :, current, :, : self.step] = cache[:, :, current[rows], :, : self.step]
        return self

    def select(self, sentences: Tensor, reordered: Tensor | None = None) -> StaticDecoderState:
        """Keep only the given open sentences (indices into the open ones); the others' rows go idle.
        With `reordered`, reorder(reordered) comes first."""
        if reordered is not None:
            self.reorder(reordered)
        self.rows = self.open_rows.view(-1, self.beam_size)[sentences].reshape(-1)
        return self


class StepGraphs:
    """Captured decoder steps by shape: the most recently used ones, up to `capacity` steps and about
    `max_bytes` of device memory (a new step always fits: older ones make room)."""

    def __init__(self, capture: bool | None = None, capacity: int = 8, max_bytes: int = 2 << 30):
        self.capture = torch.cuda.is_available() if capture is None else capture
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.steps: OrderedDict[tuple, CapturedStep] = OrderedDict()

    @property
    def nbytes(self) -> int:
        return sum(step.nbytes for step in self.steps.values())

    @torch.no_grad()
    def init_state(self, model, src: Tensor, beam_size: int, max_length: int) -> StaticDecoderState:
        """Encode the source (N, S) and build a static state for N sentences of `beam_size` rows and up
        to `max_length` target tokens."""
        config = model.config
        src_len = round_up(src.size(1), SOURCE_BUCKET, config.max_positions)
        src = F.pad(src, (0, src_len - src.size(1)), value=config.pad_id)
        max_length = round_up(max_length, TARGET_BUCKET, config.max_positions)
        memory = model.encode(src)
        key = (src.size(0), beam_size, src_len, max_length, memory.dtype, str(memory.device))
        captured = self.steps.pop(key, None)
        if captured is None:
            needed = step_nbytes(config, memory.element_size(), src.size(0), beam_size, src_len, max_length)
            while self.steps and (len(self.steps) >= self.capacity or self.nbytes + needed > self.max_bytes):
                self.steps.popitem(last=False)  # before allocating, so that the memory is reused
            capture = self.capture and memory.device.type == "cuda"
            captured = CapturedStep(model, src.size(0), beam_size, src_len, max_length, capture)
        self.steps[key] = captured
        captured.load(memory, src != config.pad_id)
        return StaticDecoderState(beam_size, captured)


class GraphDecoder:
    """A decoder of nmt.decoding.search whose every step runs on fixed shapes (as a captured CUDA graph on a GPU): its
    states hold beam_size rows per sentence from the first step."""

    fixed_rows = True

    def __init__(self, model, graphs: StepGraphs | None = None):
        self.model = model
        self.config = model.config
        self.graphs = StepGraphs() if graphs is None else graphs

    def init_state(self, src: Tensor, beam_size: int = 1, use_cache: bool = True, max_length: int | None = None,
                   vocabularies: Vocabularies | None = None) -> StaticDecoderState:
        if not use_cache or max_length is None:
            raise ValueError("fixed-shape decoding needs the cache and a target length bound")
        if vocabularies is not None:
            raise ValueError("fixed-shape decoding scores the whole vocabulary: a shortlist needs FlatDecoder")
        return self.graphs.init_state(self.model, src, beam_size, max_length)

    def decode_step(self, tokens: Tensor, state: StaticDecoderState) -> tuple[Tensor, StaticDecoderState]:
        return state.advance(tokens), state
