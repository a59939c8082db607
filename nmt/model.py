"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), batch-first.

Three entry points, one job each, all on the same modules and weights:
    memory = model.encode(src)                            # (B, S) -> (B, S, D)
    logits = model(src, tgt_in)                           # teacher forcing: (B, T, V)
    state = model.init_state(src, beam_size)              # then, one token per row and step:
    log_probs, state = model.decode_step(tokens, state)   # (R,) -> (R, V) log-probabilities
Padding is `config.pad_id`, trailing; masks are built from the tokens.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from nmt.cache import DecoderState
from nmt.config import ModelConfig
from nmt.graphs import StaticDecoderState

INITIAL_CACHE_LENGTH = 16


def sinusoidal_table(n_positions: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)): (n_positions, d).
    Always computed on the CPU, also while a model is built on the meta device (Transformer.from_weights)."""
    position = torch.arange(n_positions, dtype=torch.float64, device="cpu")[:, None]
    frequency = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64, device="cpu") / d_model)
    table = torch.zeros(n_positions, d_model, dtype=torch.float64, device="cpu")
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table.float()


# cuDNN's attention builds an execution plan for every new shape, and the dynamic cache makes a new shape
# at every step: on an H100 (torch 2.11) an fp16 beam-4 step over 32 sentences took 100 ms on first sight
# of its shapes and 3.5 ms without cuDNN; greedy fp16 translation ran at 289 tok/s against 6285 in fp32.
CUDA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def attention_backends(device: torch.device, training: bool):
    """The scaled_dot_product_attention kernels to allow: plain matmuls in CPU training (the fused
    kernel's backward is about twice as slow in bf16), no cuDNN on CUDA."""
    if device.type == "cuda":
        return sdpa_kernel(CUDA_BACKENDS)
    return sdpa_kernel(SDPBackend.MATH) if training else contextlib.nullcontext()


# Batched decoding on a CPU (many rows, one query position each, or the K beams of a sentence) runs
# faster as plain matmuls than through the fused CPU kernel, which is tiled for long queries: measured
# with 4 heads of 64, 128 rows and 30 keys, 382 us against 1560 in bf16 and 271 against 336 in fp32; at
# a few rows the fused kernel wins (B=1: 23 us against 83 in bf16).
PLAIN_ATTENTION_MIN_BATCH = 16


# torch's batched matmul on a CPU multiplies matrices of under 400 multiply-adds in a plain loop, and a
# cached decoder step's self-attention over its first positions is such matrices (1 x 64 by 64 x S for
# S <= 6): there, broadcast products and sums are faster. One thread, 4 heads of 64, over position-major
# caches: 128 rows, S = 1-5: 80-190 us against 260-730 (S = 7: 183-198 against 225-281, where the
# matmuls leave the loop); 16-64 rows: 34-103 us against sdpa's 31-183 (under 16 rows sdpa wins).
BMM_LOOP_MAX = 400


def broadcast_attention(q: Tensor, keys: Tensor, values: Tensor) -> Tensor:
    """softmax(q k^T / sqrt(Dh)) v for one query position: q (B, H, 1, Dh), keys/values (B, H, S, Dh)."""
    scores = (keys * (q * q.size(-1) ** -0.5)).sum(dim=-1, keepdim=True)  # (B, H, S, 1)
    return (scores.softmax(dim=2) * values).sum(dim=2, keepdim=True)  # (B, H, 1, Dh)


def plain_attention(q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q k^T / sqrt(Dh)) v: q (B, H, T, Dh), keys/values (B, H, S, Dh), mask True where allowed.
    As batched products over B*H matrices, the mask added as the products' starting value: cross-attention
    of 128 rows (32 sentences of 4 beams, 20 source tokens, 4 heads of 64) 250-329 us against 291-352 with
    the mask filled in after a 4-dimensional matmul, self-attention over 8-30 cached positions 7-15% faster
    (one thread, the same outputs)."""
    batch, heads, length, head_dim = q.shape
    size = keys.size(2)
    q = q.reshape(batch * heads, length, head_dim)  # a copy when q is a transposed view: bmm reads it faster
    keys_t = keys.reshape(batch * heads, size, head_dim).transpose(1, 2)  # (B*H, Dh, S)
    if mask is None:
        scores = torch.bmm(q, keys_t).mul_(head_dim**-0.5)  # (B*H, T, S)
    else:
        bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(~mask, -math.inf)
        bias = bias.expand(batch, heads, length, size).reshape(batch * heads, length, size)
        scores = torch.baddbmm(bias, q, keys_t, alpha=head_dim**-0.5)
    probs = scores.softmax(dim=-1, dtype=torch.float32).to(values.dtype)
    return torch.bmm(probs, values.reshape(batch * heads, size, head_dim)).view(batch, heads, length, head_dim)


def inference_attention(q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
    """Attention without dropout through the fastest kernel for the shapes: q (B, H, T, Dh), keys/values
    (B, H, S, Dh), mask broadcasting to (B, H, T, S) -> (B, H, T, Dh). Computed in the keys' dtype and
    returned in the query's (a reduced-precision model's float32 caches: `cache_dtype`)."""
    if q.dtype != keys.dtype:
        return inference_attention(q.to(keys.dtype), keys, values, mask).to(q.dtype)
    # On a CPU there is no kernel to choose at inference, and attention_backends' context costs six entries
    # and exits a step: without it greedy decoding at batch 1 ran 7-8% faster (150 sentences, int8_fp32
    # --shortlist, one thread, in-process, alternating: 4.14 s median against 4.44, then 3.40 against 3.70)
    if q.is_cpu:
        batch, _, length, head_dim = q.shape
        if batch >= PLAIN_ATTENTION_MIN_BATCH:
            if length == 1 and mask is None and keys.size(2) * head_dim < BMM_LOOP_MAX:
                return broadcast_attention(q, keys, values)
            if length <= 4:
                return plain_attention(q, keys, values, mask)
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
    with attention_backends(q.device, training=False):
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)


# On a CPU the decoder's caches (self-attention keys/values, cross-attention keys/values) are float32
# whatever the model's precision, and attention over them runs in float32. Over a bf16 self-attention
# cache every step's attention was 2.5-3x slower (one thread, 128 rows, 4 heads of 64: 348-592 us against
# 130-194 in float32 over 8-30 positions; at 1-4 rows 9-46 us against 7-13). bf16 batched products go
# through oneDNN, which builds a kernel for every new shape, and the self-attention length is new at every
# step: 512 products (1x64)(64xT) took 834 us on first sight of T, 216 us after, 110-118 us in float32
# (MKL, no per-shape cost). Cross-attention in float32 took 0.125 s of a 1.38 s translation (320
# sentences, beam 4, batch 32, int8_bf16 --shortlist, one thread) against 0.15.
# Writing new keys and values into the cache converts them; queries are converted, outputs converted back.
def cache_dtype(activations: Tensor) -> torch.dtype:
    return torch.float32 if activations.device.type == "cpu" else activations.dtype


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over `n_heads` heads; the same class for self- and cross-attention."""

    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.kv_proj = nn.Linear(d_model, 2 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(B, S, D) -> keys, values, each (B, H, S, Dh)."""
        batch, length, d_model = x.shape
        kv = self.kv_proj(x).view(batch, length, 2, self.n_heads, d_model // self.n_heads)
        kv = kv.permute(2, 0, 3, 1, 4)  # (2, B, H, S, Dh)
        return kv[0], kv[1]

    def forward(self, x: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
        """Queries from x (B, T, D) attend to keys/values (B, H, S, Dh); mask broadcasts to (B, H, T, S)."""
        batch, length, d_model = x.shape
        q = self.q_proj(x).view(batch, length, self.n_heads, d_model // self.n_heads).transpose(1, 2)
        if not self.training:
            out = inference_attention(q, keys, values, mask)
        else:
            with attention_backends(q.device, training=True):
                out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=self.dropout)
        return self.out_proj(out.transpose(1, 2).reshape(batch, length, d_model))  # (B, T, D)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.dropout(F.relu(self.up(x))))


class Sublayer(nn.Module):
    """Residual connection and LayerNorm around a sublayer: post-norm LayerNorm(x + f(x)) as in the
    paper, or pre-norm x + f(LayerNorm(x))."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, fn) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(fn(self.norm(x)))
        return self.norm(x + self.dropout(fn(x)))


class EncoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.attention_dropout)
        self.ffn = FeedForward(config.d_model, config.d_ff, config.dropout)
        self.attn_sublayer = Sublayer(config.d_model, config.dropout, config.pre_norm)
        self.ffn_sublayer = Sublayer(config.d_model, config.dropout, config.pre_norm)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = self.attn_sublayer(x, lambda h: self.self_attn(h, *self.self_attn.project_kv(h), mask))
        return self.ffn_sublayer(x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.attention_dropout)
        self.cross_attn = MultiHeadAttention(config.d_model, config.n_heads, config.attention_dropout)
        self.ffn = FeedForward(config.d_model, config.d_ff, config.dropout)
        self.self_sublayer = Sublayer(config.d_model, config.dropout, config.pre_norm)
        self.cross_sublayer = Sublayer(config.d_model, config.dropout, config.pre_norm)
        self.ffn_sublayer = Sublayer(config.d_model, config.dropout, config.pre_norm)

    def forward(
        self,
        x: Tensor,
        cross_keys: Tensor,
        cross_values: Tensor,
        self_mask: Tensor | None,
        cross_mask: Tensor | None,
        cache: tuple[Tensor, Tensor, int | Tensor] | None = None,
    ) -> Tensor:
        """x (R, T, D) for R = N*K rows over N sentences; cross keys/values (N, H, S, Dh) are shared by
        the K rows of a sentence. With `cache` = (keys, values, step), the new positions' keys/values are
        written into the buffers at `step` and attention runs over all positions so far. A step given as
        a tensor (1,) is the fixed-shape form (nmt.graphs): one position written, attention over the
        whole buffers, `self_mask` hiding the positions after it."""

        def self_attention(h: Tensor) -> Tensor:
            keys, values = self.self_attn.project_kv(h)
            if cache is not None and isinstance(cache[2], Tensor):
                key_buffer, value_buffer, position = cache
                key_buffer.index_copy_(2, position, keys)
                value_buffer.index_copy_(2, position, values)
                keys, values = key_buffer, value_buffer
            elif cache is not None:  # position-major buffers (T, R, H, Dh) (nmt.cache)
                key_buffer, value_buffer, step = cache
                end = step + h.size(1)
                key_buffer[step:end] = keys.permute(2, 0, 1, 3)
                value_buffer[step:end] = values.permute(2, 0, 1, 3)
                keys, values = key_buffer[:end].permute(1, 2, 0, 3), value_buffer[:end].permute(1, 2, 0, 3)
            return self.self_attn(h, keys, values, self_mask)

        def cross_attention(h: Tensor) -> Tensor:
            rows, length, d_model = h.shape
            sentences = cross_keys.size(0)
            # The K rows of a sentence query the same keys: fold them into the query length.
            folded = h.reshape(sentences, rows // sentences * length, d_model)  # (N, K*T, D)
            out = self.cross_attn(folded, cross_keys, cross_values, cross_mask)
            return out.reshape(rows, length, d_model)

        x = self.self_sublayer(x, self_attention)
        x = self.cross_sublayer(x, cross_attention)
        return self.ffn_sublayer(x, self.ffn)


class Transformer(nn.Module):
    """Encoder-decoder Transformer with one embedding matrix shared by source, target and (tied) output."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        # initialized by reset_parameters alone (nn.Embedding's own N(0, 1) is replaced there anyway)
        self.embed = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id,
                                  _weight=torch.empty(config.vocab_size, config.d_model))
        self.register_buffer("positions", sinusoidal_table(config.max_positions, config.d_model), persistent=False)
        self.dropout = nn.Dropout(config.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        final_norm = (lambda: nn.LayerNorm(config.d_model)) if config.pre_norm else nn.Identity
        self.encoder_norm = final_norm()
        self.decoder_norm = final_norm()
        self.output_proj = None if config.tie_embeddings else nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.reset_parameters()

    @classmethod
    def from_weights(cls, config: ModelConfig, weights: dict[str, Tensor]) -> Transformer:
        """A model holding float32 copies of `weights`, built without the random initialization they
        replace: on the meta device (tensors without storage), then given the copies. For the shipped
        model on 2 cores, 0.01-0.02 s against 0.10-0.15 to build it initialized and load the weights."""
        with torch.device("meta"):
            model = cls(config)
        model.load_state_dict({name: tensor.to(torch.float32, copy=True) for name, tensor in weights.items()},
                              assign=True)
        return model

    def reset_parameters(self) -> None:
        """Xavier for projections; embeddings N(0, 1/d_model), so that after the sqrt(d_model) scaling
        they have unit variance and the tied output projection starts with small logits. Nothing to do on
        the meta device (Transformer.from_weights), where torch would run normal_ through its Python
        reference kernels and import torch._dynamo for them: 1.4-2 s in a process that imported torch
        plainly."""
        if self.embed.weight.is_meta:
            return
        for name, parameter in self.named_parameters():
            if parameter.dim() == 2 and name != "embed.weight":
                nn.init.xavier_uniform_(parameter)
            elif name.endswith(".bias") and "norm" not in name:
                nn.init.zeros_(parameter)
        nn.init.normal_(self.embed.weight, mean=0.0, std=self.config.d_model**-0.5)
        with torch.no_grad():
            self.embed.weight[self.config.pad_id].zero_()

    def embed_tokens(self, tokens: Tensor, offset: int | Tensor = 0) -> Tensor:
        """(B, T) -> (B, T, D): scaled embeddings plus the sinusoidal encoding of positions offset..
        (an offset tensor (1,) takes one token per row at that position)."""
        x = self.embed(tokens) * math.sqrt(self.config.d_model)
        if self.config.positional_encoding:
            if isinstance(offset, Tensor):
                x = x + self.positions.index_select(0, offset)
            else:
                x = x + self.positions[offset : offset + tokens.size(1)]
        return self.dropout(x)

    def source_mask(self, src: Tensor) -> Tensor | None:
        """(B, S) -> (B, 1, 1, S), True on real tokens; None when no token is padding."""
        real = src != self.config.pad_id
        return None if bool(real.all()) else real[:, None, None, :]

    def encode(self, src: Tensor) -> Tensor:
        """Source tokens (B, S) -> memory (B, S, D)."""
        x = self.embed_tokens(src)
        mask = self.source_mask(src)
        for layer in self.encoder_layers:
            x = layer(x, mask)
        return self.encoder_norm(x)

    def project(self, x: Tensor) -> Tensor:
        """Decoder output (.., D) -> vocabulary logits (.., V)."""
        if self.output_proj is None:
            return F.linear(x, self.embed.weight)
        return self.output_proj(x)

    def decode(self, tgt_in: Tensor, memory: Tensor, cross_mask: Tensor | None) -> Tensor:
        """Whole target prefix (R, T) over memory (N, S, D), R = N*K -> decoder output (R, T, D)."""
        length = tgt_in.size(1)
        causal = torch.ones(length, length, dtype=torch.bool, device=tgt_in.device).tril()
        x = self.embed_tokens(tgt_in)
        for layer in self.decoder_layers:
            cross_keys, cross_values = layer.cross_attn.project_kv(memory)
            x = layer(x, cross_keys, cross_values, causal, cross_mask)
        return self.decoder_norm(x)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: source (B, S) and shifted target (B, T) -> logits (B, T, V)."""
        memory = self.encode(src)
        return self.project(self.decode(tgt_in, memory, self.source_mask(src)))

    @torch.no_grad()
    def init_state(self, src: Tensor, beam_size: int = 1, use_cache: bool = True,
                   memory: Tensor | None = None) -> DecoderState:
        """Encode the source (N, S) and build the decoder state for N sentences of `beam_size` rows.
        `memory`: the source already encoded (nmt.flat_decoder's encoder)."""
        memory = self.encode(src) if memory is None else memory
        state = DecoderState(cross_mask=self.source_mask(src),
                             max_positions=self.config.max_positions)
        rows = src.size(0) * beam_size
        if not use_cache:
            state.memory = memory
            state.prefix = src.new_empty(rows, 0)
            return state
        heads = self.config.n_heads
        shape = (INITIAL_CACHE_LENGTH, rows, heads, self.config.d_model // heads)  # position-major (nmt.cache)
        dtype = cache_dtype(memory)
        for layer in self.decoder_layers:
            keys, values = layer.cross_attn.project_kv(memory)
            state.cross_keys.append(keys.to(dtype).contiguous())
            state.cross_values.append(values.to(dtype).contiguous())
            state.self_keys.append(memory.new_empty(shape, dtype=dtype))
            state.self_values.append(memory.new_empty(shape, dtype=dtype))
        return state

    @torch.no_grad()
    def decode_step(self, tokens: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """Feed one token per row (R,) at position `state.step`: log-probabilities (R, V) of the next."""
        if isinstance(state, StaticDecoderState):
            return state.advance(tokens), state
        if not state.use_cache:
            state.prefix = torch.cat([state.prefix, tokens[:, None]], dim=1)
            x = self.decode(state.prefix, state.memory, state.cross_mask)[:, -1:]
        else:
            state.ensure_capacity(state.step + 1)
            x = self.embed_tokens(tokens[:, None], offset=state.step)  # (R, 1, D)
            for i, layer in enumerate(self.decoder_layers):
                cache = (state.self_keys[i], state.self_values[i], state.step)
                x = layer(x, state.cross_keys[i], state.cross_values[i], None, state.cross_mask, cache)
            x = self.decoder_norm(x)
        state.step += 1
        return F.log_softmax(self.project(x[:, 0]), dim=-1, dtype=torch.float32), state

    @torch.no_grad()
    def static_step(self, tokens: Tensor, position: Tensor, self_cache: Tensor, cross_cache: Tensor,
                    cross_mask: Tensor) -> Tensor:
        """decode_step on fixed shapes (nmt.graphs): tokens (R,) at `position` (1,); self_cache
        (L, 2, R, H, T, Dh) receives this position's keys/values; cross_cache (L, 2, N, H, S, Dh) and
        cross_mask (N, S) as computed from the memory. Returns log-probabilities (R, V)."""
        times = torch.arange(self_cache.size(4), device=tokens.device)
        self_mask = (times <= position)[None, None, None, :]  # (1, 1, 1, T)
        x = self.embed_tokens(tokens[:, None], offset=position)  # (R, 1, D)
        for i, layer in enumerate(self.decoder_layers):
            cache = (self_cache[i, 0], self_cache[i, 1], position)
            x = layer(x, cross_cache[i, 0], cross_cache[i, 1], self_mask, cross_mask[:, None, None, :], cache)
        return F.log_softmax(self.project(self.decoder_norm(x)[:, 0]), dim=-1, dtype=torch.float32)
