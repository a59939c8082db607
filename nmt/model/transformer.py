"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), batch-first.

Three entry points, one job each, all on the same modules and weights:
    memory = model.encode(src)                            # (B, S) -> (B, S, D)
    logits = model(src, tgt_in)                           # teacher forcing: (B, T, V)
    state = model.init_state(src, beam_size)              # then, one token per row and step:
    log_probs, state = model.decode_step(tokens, state)   # (R,) -> (R, V) log-probabilities
Padding is `config.pad_id`, trailing; masks are built from the tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.model.attention import attention_backends, cache_dtype, inference_attention
from nmt.model.cache import CrossAttention, DecoderState, SelfAttention, cached_attention
from nmt.model.config import ModelConfig
from nmt.model.native_ops import TRAINING_DTYPES, dropout_kernel
from nmt.model.shortlist import Vocabularies

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


class _HashedDropout(torch.autograd.Function):
    """Dropout by the C kernel train_dropout: the mask is a hash of each unit's index and a seed, so backward
    draws it again instead of keeping it."""

    @staticmethod
    def forward(ctx, x: Tensor, dropped: int, scale: float, kernel) -> Tensor:
        # the seed from torch's generator: a run's masks follow torch.manual_seed and resume with its state; kept
        # in a tensor the kernel reads, never read by Python (the trainer counts the host's reads of tensors)
        seed = torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64, device=x.device)
        ctx.arguments = (dropped, scale, seed, kernel)
        return kernel(x, dropped, scale, seed)

    @staticmethod
    def backward(ctx, grad: Tensor):
        dropped, scale, seed, kernel = ctx.arguments
        return kernel(grad, dropped, scale, seed), None, None, None


class Dropout(nn.Module):
    """nn.Dropout, with the masks drawn faster on a CPU. A unit is dropped when a 16-bit draw falls below
    p x 2^16: p is rounded to a multiple of 2^-16, and the kept units are scaled by the exact inverse of the
    rate kept. With the C kernels (nmt.model.native), the draw is a hash of the unit's index and a seed, and
    the dropout one pass in each direction; without them, 16-bit integers read from int64s filled with random
    bits (torch's Bernoulli sampling there was a large share of a `small` training step, benchmarks/TRAINING.md).
    On other devices, and compiled, F.dropout."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        # compiled (nmt train --compile), F.dropout: Inductor draws its masks in the fused kernel, where the
        # in-place random_ would cut the graph at every dropout
        if not self.training or self.p == 0 or x.device.type != "cpu" or torch.compiler.is_compiling():
            return F.dropout(x, self.p, self.training)
        dropped = round(self.p * 2**16)
        scale = 2**16 / (2**16 - dropped)
        kernel = dropout_kernel()
        if kernel is not None and x.dtype in TRAINING_DTYPES and x.numel() <= 2**32:
            return _HashedDropout.apply(x, dropped, scale, kernel)
        bits = torch.empty((x.numel() + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2**63), 2**63 - 1)
        keep = bits.view(torch.int16)[: x.numel()].view(x.shape) >= dropped - 2**15
        return x * keep.to(x.dtype).mul_(scale)


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

    def forward(self, x: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, causal: bool = False) -> Tensor:
        """Queries from x (B, T, D) attend to keys/values (B, H, S, Dh); mask broadcasts to (B, H, T, S).
        causal (training, no mask): query t sees keys 0..t, which lets SDPA pick its flash kernels."""
        batch, length, d_model = x.shape
        q = self.q_proj(x).view(batch, length, self.n_heads, d_model // self.n_heads).transpose(1, 2)
        if not self.training:
            if causal:
                mask = torch.ones(length, keys.size(2), dtype=torch.bool, device=x.device).tril()
            out = inference_attention(q, keys, values, mask)
        else:
            with attention_backends(q.device, training=True):
                out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=self.dropout,
                                                     is_causal=causal)
        return self.out_proj(out.transpose(1, 2).reshape(batch, length, d_model))  # (B, T, D)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.dropout(F.relu(self.up(x))))


class Sublayer(nn.Module):
    """Residual connection and LayerNorm around a sublayer: post-norm LayerNorm(x + f(x)) as in the
    paper, or pre-norm x + f(LayerNorm(x))."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, fn) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(fn(self.norm(x)))
        return self.norm(x + self.dropout(fn(x)))


Rows = Callable[[Tensor], Tensor]  # (R, in) -> (R, out)


def residual(x: Tensor, update: Tensor, norm: Rows, pre_norm: bool) -> Tensor:
    """x + update (pre-norm; the update was computed from norm(x)), or norm(x + update) (post-norm)."""
    return x + update if pre_norm else norm(x + update)


@dataclass(frozen=True)
class LayerPart:
    """One weight of a layer as decoding runs it: `name`, its field in EncoderWeights or StepWeights; `path`, its
    module in the layer; `kind`: "linear", "relu_linear" (a linear layer followed by its ReLU) or "norm"."""

    name: str
    path: str
    kind: str


# The one description of a layer's weights, in the order of EncoderWeights' and StepWeights' fields and of the C
# stacks' enums (nmt/model/kernels/nmt_kernels.h; tests/test_native.py compares them). Every decoder builds its
# functions of the weights from it (layer_functions); changing the layer changes it, these dataclasses and the
# C functions that run a layer (encode_layers, decode_layers).
ENCODER_LAYER = (
    LayerPart("q", "self_attn.q_proj", "linear"),
    LayerPart("kv", "self_attn.kv_proj", "linear"),
    LayerPart("out", "self_attn.out_proj", "linear"),
    LayerPart("attention_norm", "attn_sublayer.norm", "norm"),
    LayerPart("ffn_up", "ffn.up", "relu_linear"),
    LayerPart("ffn_down", "ffn.down", "linear"),
    LayerPart("ffn_norm", "ffn_sublayer.norm", "norm"),
)
DECODER_LAYER = (
    LayerPart("self_q", "self_attn.q_proj", "linear"),
    LayerPart("self_kv", "self_attn.kv_proj", "linear"),
    LayerPart("self_out", "self_attn.out_proj", "linear"),
    LayerPart("self_norm", "self_sublayer.norm", "norm"),
    LayerPart("cross_q", "cross_attn.q_proj", "linear"),
    LayerPart("cross_out", "cross_attn.out_proj", "linear"),
    LayerPart("cross_norm", "cross_sublayer.norm", "norm"),
    LayerPart("ffn_up", "ffn.up", "relu_linear"),
    LayerPart("ffn_down", "ffn.down", "linear"),
    LayerPart("ffn_norm", "ffn_sublayer.norm", "norm"),
)


def layer_modules(layer: nn.Module, description: Sequence[LayerPart]) -> list[nn.Module]:
    """The layer's modules in the description's order."""
    return [layer.get_submodule(part.path) for part in description]


def layer_functions(layer: nn.Module, description: Sequence[LayerPart],
                    functions: dict[str, Callable[[nn.Module], Rows]]) -> list[Rows]:
    """The layer's weights as functions of rows, in the description's order: functions[kind](module) of each."""
    return [functions[part.kind](module) for part, module in zip(description, layer_modules(layer, description),
                                                                  strict=True)]


def module_functions() -> dict[str, Callable[[nn.Module], Rows]]:
    """The functions of layer_functions over a layer's own modules (training's, the reference decoder's)."""
    return {"linear": lambda module: module, "norm": lambda module: module,
            "relu_linear": lambda module: lambda rows: F.relu(module(rows))}


@dataclass(frozen=True, slots=True)
class EncoderWeights:
    """One encoder layer's weights as functions of rows, for inference (encoder_stack): the layer's own modules
    (EncoderLayer.inference_weights), or faster functions over the same weights (nmt.model.flat_decoder)."""

    q: Rows
    kv: Rows  # (R, D) -> (R, 2*D): keys, then values
    out: Rows
    attention_norm: Rows
    ffn_up: Rows  # followed by its ReLU
    ffn_down: Rows
    ffn_norm: Rows


def encoder_stack(layers: Sequence[EncoderWeights], x: Tensor, mask: Tensor | None, n_heads: int,
                  pre_norm: bool) -> Tensor:
    """The encoder at inference, the one every decoder runs (Transformer.encode in evaluation mode, the CPU's
    flat decoder): embedded sources x (N, S, D) and their mask (N, 1, 1, S) or None -> the last layer's
    output (N, S, D), before the final norm. The weights are passed in, as in decoder_step."""
    batch, length, _ = x.shape
    x = x.reshape(batch * length, -1)  # (N*S, D)
    for layer in layers:
        h = layer.attention_norm(x) if pre_norm else x
        q = layer.q(h).view(batch, length, n_heads, -1).transpose(1, 2)  # (N, H, S, Dh)
        keys, values = layer.kv(h).view(batch, length, 2, n_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        out = inference_attention(q, keys, values, mask)  # (N, H, S, Dh)
        x = residual(x, layer.out(out.transpose(1, 2).reshape(batch * length, -1)), layer.attention_norm, pre_norm)
        h = layer.ffn_norm(x) if pre_norm else x
        x = residual(x, layer.ffn_down(layer.ffn_up(h)), layer.ffn_norm, pre_norm)
    return x.view(batch, length, -1)


def encode_each_length(encode: Callable[[Tensor], Tensor], src: Tensor, pad_id: int) -> Tensor:
    """Memory (N, S, D) of sources (N, S) padded at the end, `encode` (unpadded sources (n, L) -> (n, L, D))
    run on the sentences of each length together, without padding: a sentence's memory is then what it
    would be alone (attention over padded keys sums in another order, and int8 activations can turn such a
    last-bit difference into another word). Padded positions are zeros. At inference on a CPU."""
    lengths = (src != pad_id).sum(dim=1)
    if bool((lengths == src.size(1)).all()):
        return encode(src)
    memory = None
    for length in lengths.unique().tolist():
        rows = (lengths == length).nonzero().squeeze(1)
        encoded = encode(src.index_select(0, rows)[:, : max(1, length)])
        if memory is None:
            memory = encoded.new_zeros(src.size(0), src.size(1), encoded.size(2))
        memory[rows, : max(1, length)] = encoded
    return memory


class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward network: forward in training (dropout), encoder_stack over the same
    weights at inference."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.attention_dropout)
        self.ffn = FeedForward(config.d_model, config.d_ff, config.dropout)
        self.attn_sublayer = Sublayer(config.d_model, config.dropout, config.pre_norm)
        self.ffn_sublayer = Sublayer(config.d_model, config.dropout, config.pre_norm)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = self.attn_sublayer(x, lambda h: self.self_attn(h, *self.self_attn.project_kv(h), mask))
        return self.ffn_sublayer(x, self.ffn)

    def inference_weights(self) -> EncoderWeights:
        """This layer's modules as the functions of encoder_stack."""
        return EncoderWeights(*layer_functions(self, ENCODER_LAYER, module_functions()))


@dataclass(frozen=True, slots=True)
class StepWeights:
    """One decoder layer's weights as functions of rows, for the incremental step (decoder_step): the layer's
    own modules (DecoderLayer.step_weights), or faster functions over the same weights (nmt.model.flat_decoder's
    packed bf16 and int8 products)."""

    self_q: Rows
    self_kv: Rows  # (R, D) -> (R, 2*D): keys, then values
    self_out: Rows
    self_norm: Rows
    cross_q: Rows
    cross_out: Rows
    cross_norm: Rows
    ffn_up: Rows  # followed by its ReLU
    ffn_down: Rows
    ffn_norm: Rows


def decoder_step(layers: Sequence[StepWeights], x: Tensor, self_attention: SelfAttention,
                 cross_attention: CrossAttention, n_heads: int, pre_norm: bool) -> Tensor:
    """The decoder's incremental step, the one every decoder runs (the model's cached decode_step, the CPU's
    flat decoder, the CUDA graphs): the embedded tokens x (R, D), one per row, through every layer ->
    the last layer's output (R, D), before the final norm. What differs between them is passed in: the
    weights (`layers`), and where the cache lives and which kernel attends (`self_attention`, which also
    stores the position's keys and values, and `cross_attention`; nmt.model.cache, nmt.model.graphs)."""
    rows = x.size(0)
    for i, layer in enumerate(layers):
        h = layer.self_norm(x) if pre_norm else x
        keys, values = layer.self_kv(h).view(rows, 2, n_heads, -1).unbind(1)  # (R, H, Dh) each
        x = residual(x, layer.self_out(self_attention(i, layer.self_q(h), keys, values)), layer.self_norm, pre_norm)
        h = layer.cross_norm(x) if pre_norm else x
        x = residual(x, layer.cross_out(cross_attention(i, layer.cross_q(h))), layer.cross_norm, pre_norm)
        h = layer.ffn_norm(x) if pre_norm else x
        x = residual(x, layer.ffn_down(layer.ffn_up(h)), layer.ffn_norm, pre_norm)
    return x


class DecoderLayer(nn.Module):
    """Self-attention (causal), cross-attention over the encoder memory and a feed-forward network: forward
    runs whole target sequences (training, teacher forcing); decoding runs the same weights one position at
    a time through decoder_step."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.attention_dropout)
        self.cross_attn = MultiHeadAttention(config.d_model, config.n_heads, config.attention_dropout)
        self.ffn = FeedForward(config.d_model, config.d_ff, config.dropout)
        self.self_sublayer = Sublayer(config.d_model, config.dropout, config.pre_norm)
        self.cross_sublayer = Sublayer(config.d_model, config.dropout, config.pre_norm)
        self.ffn_sublayer = Sublayer(config.d_model, config.dropout, config.pre_norm)

    def forward(self, x: Tensor, cross_keys: Tensor, cross_values: Tensor, cross_mask: Tensor | None) -> Tensor:
        """x (R, T, D), each position attending to itself and those before it, for R = N*K rows over N
        sentences; cross keys/values (N, H, S, Dh) are shared by the K rows of a sentence."""

        def cross_attention(h: Tensor) -> Tensor:
            rows, length, d_model = h.shape
            sentences = cross_keys.size(0)
            # The K rows of a sentence query the same keys: fold them into the query length.
            folded = h.reshape(sentences, rows // sentences * length, d_model)  # (N, K*T, D)
            out = self.cross_attn(folded, cross_keys, cross_values, cross_mask)
            return out.reshape(rows, length, d_model)

        x = self.self_sublayer(x, lambda h: self.self_attn(h, *self.self_attn.project_kv(h), None, causal=True))
        x = self.cross_sublayer(x, cross_attention)
        return self.ffn_sublayer(x, self.ffn)

    def step_weights(self) -> StepWeights:
        """This layer's modules as the functions of decoder_step (their weights as they are now: a
        quantized model's quantized layers)."""
        return StepWeights(*layer_functions(self, DECODER_LAYER, module_functions()))


class Transformer(nn.Module):
    """Encoder-decoder Transformer with one embedding matrix shared by source, target and (tied) output."""

    fixed_rows = False  # as a decoder of nmt.decoding.search: its states start with one row per sentence

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        # initialized by reset_parameters alone (nn.Embedding's own N(0, 1) is replaced there anyway)
        self.embed = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id,
                                  _weight=torch.empty(config.vocab_size, config.d_model))
        self.register_buffer("positions", sinusoidal_table(config.max_positions, config.d_model), persistent=False)
        self.dropout = Dropout(config.dropout)
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
        replace: on the meta device (tensors without storage), then given the copies (several times faster
        than building it initialized and loading the weights)."""
        with torch.device("meta"):
            model = cls(config)
        model.load_state_dict({name: tensor.to(torch.float32, copy=True) for name, tensor in weights.items()},
                              assign=True)
        return model

    def reset_parameters(self) -> None:
        """Xavier for projections; embeddings N(0, 1/d_model), so that after the sqrt(d_model) scaling
        they have unit variance and the tied output projection starts with small logits. Nothing to do on
        the meta device (Transformer.from_weights), where torch would run normal_ through its Python
        reference kernels and import torch._dynamo for them, which takes seconds."""
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
        """(B, S) -> (B, 1, 1, S), True on real tokens; on a CPU, None when no token is padding (asking a GPU
        would wait for it at every batch)."""
        real = src != self.config.pad_id
        return None if src.device.type == "cpu" and bool(real.all()) else real[:, None, None, :]

    def encode(self, src: Tensor, mask: Tensor | None = None) -> Tensor:
        """Source tokens (B, S) -> memory (B, S, D); mask: source_mask(src), when the caller has it. In
        training through the layers' forward (dropout), else through encoder_stack."""
        if not self.training:
            if src.is_cpu:
                return encode_each_length(self._inference_encode, src, self.config.pad_id)
            return self._inference_encode(src, mask)
        x = self.embed_tokens(src)
        mask = self.source_mask(src) if mask is None else mask
        for layer in self.encoder_layers:
            x = layer(x, mask)
        return self.encoder_norm(x)

    def _inference_encode(self, src: Tensor, mask: Tensor | None = None) -> Tensor:
        mask = self.source_mask(src) if mask is None else mask
        return self.encoder_norm(encoder_stack([layer.inference_weights() for layer in self.encoder_layers],
                                               self.embed_tokens(src), mask, self.config.n_heads,
                                               self.config.pre_norm))

    def project(self, x: Tensor) -> Tensor:
        """Decoder output (.., D) -> vocabulary logits (.., V)."""
        if self.output_proj is None:
            return F.linear(x, self.embed.weight)
        return self.output_proj(x)  # a quantized layer for inference (nmt.model.quantize) has no plain weight

    def output_weights(self) -> tuple[Tensor, Tensor | None]:
        """The output projection's weight (V, D) and bias, for the training loss (nmt.model.loss): the embeddings
        when they are tied."""
        if self.output_proj is None:
            return self.embed.weight, None
        return self.output_proj.weight, self.output_proj.bias

    def decode(self, tgt_in: Tensor, memory: Tensor, cross_mask: Tensor | None) -> Tensor:
        """Whole target prefix (R, T) over memory (N, S, D), R = N*K -> decoder output (R, T, D)."""
        x = self.embed_tokens(tgt_in)
        for layer in self.decoder_layers:
            cross_keys, cross_values = layer.cross_attn.project_kv(memory)
            x = layer(x, cross_keys, cross_values, cross_mask)
        return self.decoder_norm(x)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: source (B, S) and shifted target (B, T) -> logits (B, T, V)."""
        mask = self.source_mask(src)
        return self.project(self.decode(tgt_in, self.encode(src, mask), mask))

    @torch.no_grad()
    def init_state(self, src: Tensor, beam_size: int = 1, use_cache: bool = True, max_length: int | None = None,
                   vocabularies: Vocabularies | None = None, memory: Tensor | None = None) -> DecoderState:
        """Encode the source (N, S) and build the decoder state for N sentences of `beam_size` rows (its
        caches grow as needed: max_length is not used). `memory`: the source already encoded (nmt.model.flat_decoder's
        encoder)."""
        if vocabularies is not None:
            raise ValueError("the model's own step scores the whole vocabulary: a shortlist needs FlatDecoder")
        memory = self.encode(src) if memory is None else memory
        state = DecoderState(cross_mask=self.source_mask(src),
                             max_positions=self.config.max_positions)
        rows = src.size(0) * beam_size
        if not use_cache:
            state.memory = memory
            state.prefix = src.new_empty(rows, 0)
            return state
        heads = self.config.n_heads
        shape = (INITIAL_CACHE_LENGTH, rows, heads, self.config.d_model // heads)  # position-major (nmt.model.cache)
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
        if not state.use_cache:
            state.prefix = torch.cat([state.prefix, tokens[:, None]], dim=1)
            x = self.decode(state.prefix, state.memory, state.cross_mask)[:, -1:]
            state.step += 1
            return F.log_softmax(self.project(x[:, 0]), dim=-1, dtype=torch.float32), state
        state.ensure_capacity(state.step + 1)
        log_probs = self.run_step(tokens, state.step, *cached_attention(state, self.config.n_heads))
        state.step += 1
        return log_probs, state

    @torch.no_grad()
    def run_step(self, tokens: Tensor, position: int | Tensor, self_attention: SelfAttention,
                 cross_attention: CrossAttention) -> Tensor:
        """decoder_step over this model's modules: tokens (R,) at `position` (an int, or a tensor (1,) for
        the fixed shapes of nmt.model.graphs), the cache and kernels of the attention functions given ->
        log-probabilities (R, V) of the next token, in fp32."""
        x = self.embed_tokens(tokens[:, None], offset=position)[:, 0]  # (R, D)
        x = decoder_step([layer.step_weights() for layer in self.decoder_layers], x, self_attention, cross_attention,
                         self.config.n_heads, self.config.pre_norm)
        return F.log_softmax(self.project(self.decoder_norm(x)), dim=-1, dtype=torch.float32)
