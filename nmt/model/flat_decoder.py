"""The decoder for CPUs: nmt.model.transformer's decoder_step, the one step every decoder runs, over faster functions of
the same weights, and the encoder (`Transformer.encode`) without the nn.Module calls.

At batch 1 a decoder step of the shipped model is close to a hundred small tensor operations, and
nn.Module's call machinery (hooks, attribute lookups, dropout calls that do nothing in evaluation) cost
about as much as the operations themselves. FlatDecoder looks every layer's weights up once, as plain
functions (oneDNN's packed bf16 products, nmt.model.quantize's int8 products), and gives them to decoder_step; the
search sees it as a decoder (`config`, `init_state`, `decode_step`).

    backend = Backend.resolve("auto", torch.device("cpu"))     # nmt.model.backend
    decoder = FlatDecoder(cast_for_inference(model.eval(), backend), backend)   # nmt.decoding.inference
    hypotheses = search(decoder, src, SearchOptions(beam_size=4))

In reduced precision on a CPU (bf16, int8_bf16, int8_fp32) it keeps its attention caches in bf16 and
attends over them through nmt.model.native's C kernels, where they are built (nmt.model.cache.cached_attention). In
int8_fp32 the kernels also run all of a step's decoder layers in one call (`layers_step`, decode_layers) and the
encoder's (`encoder_step`, encode_layers), the same arithmetic as the step's operations one by one. Given a
shortlist's vocabularies (`init_state`), it embeds and projects each sentence's own target tokens.

The tests check its memory against `Transformer.encode` and its log-probabilities against
`Transformer.decode_step`. A state without cache and a model in training mode go to the model's own step
(and encoder).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.model.backend import Backend
from nmt.model.cache import DecoderState, cached_attention, source_lengths
from nmt.model.native import HEAD_DIM_STEP
from nmt.model.native_ops import (
    EncoderLayers,
    Int8Layers,
    LayersStep,
    cross_attention_kernel,
    layer_norm_kernel,
    log_softmax_kernel,
    log_softmax_rest_kernel,
    self_attention_kernel,
    sentence_logits_int7_kernel,
    sentence_logits_kernel,
)
from nmt.model.quantize import bf16_linear_function
from nmt.model.shortlist import ListedTokens, Vocabularies
from nmt.model.transformer import (
    DECODER_LAYER,
    ENCODER_LAYER,
    EncoderWeights,
    LayerPart,
    StepWeights,
    Transformer,
    decoder_step,
    encode_each_length,
    encoder_stack,
    layer_functions,
    layer_modules,
)

Linear = Callable[[Tensor], Tensor]  # rows (R, in) -> (R, out)


# The precisions whose linear layers are nmt.model.quantize's (Int8Linear, DynamicInt8Linear: `function`)
QUANTIZED_LAYERS = ("int8_bf16", "int8_fp32")


def linear_function(module: nn.Module, backend: Backend, outputs: Tensor | None = None) -> Linear:
    """A linear layer of a model cast for `backend` as a plain function of its input rows; with `outputs` (O,),
    of those output channels alone."""
    if backend.precision in QUANTIZED_LAYERS:
        return module.function(outputs)
    if outputs is None:
        return weight_function(module.weight, backend, module.bias)
    bias = None if module.bias is None else module.bias.index_select(0, outputs)
    return weight_function(plain_weight(module, backend).index_select(0, outputs), backend, bias)


def plain_weight(module: nn.Module, backend: Backend) -> Tensor:
    """An nn.Linear's weight, where a shortlist may take some of its rows (ValueError for torchao's int8)."""
    if backend.precision == "int8":  # torchao's quantized weights
        raise ValueError("a shortlist needs plain, int8_bf16 or int8_fp32 weights, not torchao's int8")
    return module.weight


def output_rows(model: Transformer, backend: Backend, ids: Tensor) -> tuple[Tensor, Tensor | None]:
    """The output projection's weights (n, D) and bias (n,) (None without one) of vocabulary ids (n,), in
    float32; int8 weights as their int8 values times their scales."""
    projection = model.output_proj
    if projection is None:  # tied embeddings
        return model.embed.weight.index_select(0, ids).float(), None
    if backend.precision in QUANTIZED_LAYERS:
        scale = projection.scale.index_select(0, ids).float()[:, None]  # (n, 1)
        weight = projection.quantized.index_select(0, ids).float() * scale
    else:
        weight = plain_weight(projection, backend).index_select(0, ids).float()
    return weight, None if projection.bias is None else projection.bias.index_select(0, ids).float()


def relu_linear_function(module: nn.Module, backend: Backend) -> Linear:
    """relu(module(rows)) as one function; int8_fp32's product and oneDNN's bf16 product apply the ReLU as they
    write their output, which saves a pass over the rows."""
    if backend.precision in QUANTIZED_LAYERS:
        return module.function(relu=True)
    if backend.precision == "bf16":
        return bf16_linear_function(module.weight, module.bias, relu=True)
    linear = linear_function(module, backend)
    return lambda rows: F.relu(linear(rows))


def weight_function(weight: Tensor, backend: Backend, bias: Tensor | None = None) -> Linear:
    if backend.dtype == torch.bfloat16:
        return bf16_linear_function(weight, bias)  # oneDNN's packed weights on CPUs with bf16 arithmetic

    def linear(rows: Tensor) -> Tensor:  # positional: torchao's int8 weights (--precision int8) take no keywords
        return F.linear(rows, weight, bias)

    return linear


def norm_function(module: nn.Module) -> Callable[[Tensor], Tensor]:
    if isinstance(module, nn.Identity):
        return lambda x: x
    return functools.partial(torch.layer_norm, normalized_shape=module.normalized_shape, weight=module.weight,
                             bias=module.bias, eps=module.eps)


class FlatDecoder:
    fixed_rows = False  # as a decoder of nmt.decoding.search

    def __init__(self, model: Transformer, backend: Backend):
        """model: cast for `backend` (nmt.decoding.inference.cast_for_inference), which says what runs it."""
        self.model = model
        self.backend = backend
        self.config = model.config
        self.embedding = model.embed.weight
        self.embedding_scale = math.sqrt(model.config.d_model)
        self.positions = model.positions
        flat = {"linear": functools.partial(linear_function, backend=backend),
                "relu_linear": functools.partial(relu_linear_function, backend=backend), "norm": norm_function}
        self.encoder_layers = [EncoderWeights(*layer_functions(layer, ENCODER_LAYER, flat))
                               for layer in model.encoder_layers]
        self.encoder_norm = norm_function(model.encoder_norm)
        # int8_fp32 on a CPU: every decoder layer of a step in one C call (nmt.model.native.decode_layers), and
        # where a step cannot take it (sources not padded at the end), its norms in the steps of decoder_step
        self.layers_step = decoder_layers(model) if backend.fused_layers else None
        self.encoder_step = encoder_layers(model) if backend.fused_layers else None  # the encoder's in one call
        if self.layers_step is not None:
            flat = {**flat, "norm": layer_norm_kernel()}
        self.layers = [StepWeights(*layer_functions(layer, DECODER_LAYER, flat)) for layer in model.decoder_layers]
        self.final_norm = norm_function(model.decoder_norm)
        self.project = (weight_function(model.embed.weight, backend) if model.output_proj is None  # tied embeddings
                        else linear_function(model.output_proj, backend))
        self.shared_projections: dict[int, tuple[Tensor, Linear]] = {}  # id(shared ids) -> (ids, projection)
        # bf16 attention caches and the C kernels over them (nmt.model.native) where the backend keeps them
        head_dim = model.config.d_model // model.config.n_heads
        native = backend.bf16_caches and head_dim % HEAD_DIM_STEP == 0
        self.self_attention = self_attention_kernel() if native else None
        self.cross_attention = cross_attention_kernel() if native else None
        self.log_softmax = log_softmax_kernel() if native else None
        self.log_softmax_rest = log_softmax_rest_kernel() if native else None  # a shortlist's, in one call
        self.sentence_logits = sentence_logits_kernel() if native else None
        # int8_fp32 without VNNI (rows on 7 bits, nmt.model.quantize): each sentence's own tokens from the
        # output projection's int8 weights, as the shared ones are
        int7 = backend.int8_rows == 7 and model.config.d_model % 32 == 0
        self.sentence_logits_int7 = sentence_logits_int7_kernel() if native and int7 else None

    def listed_tokens(self, vocabularies: Vocabularies) -> ListedTokens:
        """A batch's vocabularies (nmt.model.shortlist) bound for this decoder's steps: the shared tokens of all
        rows take one product (packed once: the shared ids are the same for every batch), each sentence's own
        tokens a product of their own (nmt.model.native's kernel on bf16 or int7 weights, or a batched
        product over weights padded to the longest list)."""
        scored = self.shared_projection(vocabularies.scored)
        vocabularies = vocabularies.to(self.embedding.device)
        return ListedTokens(vocabularies, vocabularies.table(self.config.pad_id), scored,
                            self.own_tokens_product(vocabularies))

    def own_tokens_product(self, vocabularies: Vocabularies) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        """ListedTokens.own for a batch's vocabularies: the C kernel bound to their weights where it is
        built, else padded_own_product."""
        if self.sentence_logits_int7 is not None:
            projection = self.model.output_proj
            kernel = self.sentence_logits_int7(  # each sentence's rows read where they are
                self.output_rows_u8, projection.column_scale, projection.bias, vocabularies.starts,
                vocabularies.counts, vocabularies.extra)
        elif self.sentence_logits is not None:
            weights, bias = self.output_rows_bf16  # (V, D), (V,): each sentence's rows read where they are
            kernel = self.sentence_logits(weights, bias, vocabularies.starts, vocabularies.counts, vocabularies.extra)
        else:
            return padded_own_product(*output_rows(self.model, self.backend, vocabularies.extra), vocabularies,
                                      self.embedding.dtype)
        return lambda rows, shared_logits, sentences: kernel(rows, shared_logits.to(rows.dtype), sentences,
                                                             vocabularies.width)

    @functools.cached_property
    def output_rows_bf16(self) -> tuple[Tensor, Tensor | None]:
        """output_rows of the whole vocabulary, the weights (V, D) in bf16, which the sentence logits kernel
        reads each sentence's own tokens from (16 MB for the general model: a step's working set, where
        copying each sentence's rows out, as before, made a batch of 32 greedy sentences stream 68 MB a step
        and decode at half the speed of the whole vocabulary)."""
        weights, bias = output_rows(self.model, self.backend,
                                     torch.arange(self.config.vocab_size, device=self.embedding.device))
        return weights.bfloat16(), bias

    @functools.cached_property
    def output_rows_u8(self) -> Tensor:
        """The output projection's int8 weights (V, D) + 128, as unsigned bytes: what the int7 sentence logits
        kernel multiplies each row's 7-bit values by (8 MB for the general model)."""
        return (self.model.output_proj.quantized.short() + 128).to(torch.uint8)

    def shared_projection(self, ids: Tensor) -> Linear:
        """The output projection onto the vocabulary ids `ids` (F,) (a shortlist's shared ids, which every
        batch passes as the same tensor), built (and packed) once per ids tensor."""
        cached = self.shared_projections.get(id(ids))
        if cached is None or cached[0] is not ids:
            on_device = ids.to(self.embedding.device)
            projection = (weight_function(self.embedding.index_select(0, on_device), self.backend)
                          if self.model.output_proj is None
                          else linear_function(self.model.output_proj, self.backend, on_device))
            cached = self.shared_projections[id(ids)] = (ids, projection)
        return cached[1]

    def init_state(self, src: Tensor, beam_size: int = 1, use_cache: bool = True, max_length: int | None = None,
                   vocabularies: Vocabularies | None = None) -> DecoderState:
        """With `vocabularies` (a shortlist's, nmt.model.shortlist): token i of a row's input and of its
        log-probabilities (R, width) is local token i of the row's sentence."""
        if vocabularies is not None and (self.model.training or not use_cache):
            raise ValueError("a shortlist needs the cached decoder in evaluation, not --no-cache")
        memory = None if self.model.training else self.encode(src)
        state = self.model.init_state(src, beam_size=beam_size, use_cache=use_cache, memory=memory)
        if vocabularies is not None:
            state.listed = self.listed_tokens(vocabularies)
            state.sentences = torch.arange(src.size(0), device=src.device)
        if self.self_attention is None or not use_cache or self.model.training:
            return state
        state.self_keys = [buffer.bfloat16() for buffer in state.self_keys]
        state.self_values = [buffer.bfloat16() for buffer in state.self_values]
        state.kernel_self = True
        if padded_at_the_end(state.cross_mask):  # the cross kernel takes each source's length
            state.cross_keys = [tensor.bfloat16() for tensor in state.cross_keys]
            state.cross_values = [tensor.bfloat16() for tensor in state.cross_values]
            state.kernel_cross = True
        return state

    @torch.inference_mode()  # as nmt.decoding.search
    def encode(self, src: Tensor) -> Tensor:
        """Transformer.encode, its encoder_stack over this decoder's functions of the weights: source (N, S),
        padded at the end -> memory (N, S, D); on a CPU each length apart (encode_each_length)."""
        if not src.is_cpu:
            return self._encode(src)
        return encode_each_length(self._encode, src, self.config.pad_id)

    def _encode(self, src: Tensor) -> Tensor:
        config = self.config
        length = src.size(1)
        x = F.embedding(src, self.model.embed.weight) * self.embedding_scale  # the source's whole vocabulary
        if config.positional_encoding:
            x = x + self.positions[:length]
        mask = self.model.source_mask(src)
        if self.encoder_step is not None and mask is None:
            x = self.encoder_step(x.contiguous())
        else:
            x = encoder_stack(self.encoder_layers, x, mask, config.n_heads, config.pre_norm)
        return self.encoder_norm(x)

    @torch.inference_mode()  # as nmt.decoding.search
    def decode_step(self, tokens: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """Transformer.decode_step: one token per row (R,) -> log-probabilities (R, V) of the next."""
        if self.model.training or not state.use_cache:
            return self.model.decode_step(tokens, state)
        config = self.config
        step, rows, sentences, listed = state.step, tokens.size(0), state.n_sentences, state.listed
        state.ensure_capacity(step + 1)
        if listed is not None:  # each sentence's local token ids -> vocabulary ids
            owners = state.sentences if rows == sentences else state.sentences.repeat_interleave(rows // sentences)
            tokens = listed.token_ids[owners, tokens]  # owners (R,): each row's sentence in the batch
        x = F.embedding(tokens, self.embedding) * self.embedding_scale  # (R, D)
        if config.positional_encoding:
            x = x + self.positions[step]
        if self.layers_step is not None and state.kernel_cross:
            x = self.layers_step(x.contiguous(), state.self_keys, state.self_values, state.cross_keys,
                                 state.cross_values, source_lengths(state), step)
        else:
            attention = cached_attention(state, config.n_heads, self.self_attention, self.cross_attention)
            x = decoder_step(self.layers, x, *attention, config.n_heads, config.pre_norm)
        state.step += 1
        x = self.final_norm(x)
        if listed is None:
            return self.normalized(self.project(x)), state  # (R, V)
        scored = listed.scored(x)  # (R, F + K) the shared tokens and the sample
        shared, rest_bias = listed.vocabularies.shared.size(0), listed.vocabularies.rest_bias
        logits = listed.own(x, scored[:, :shared].contiguous(), state.sentences)  # (R, width)
        if self.log_softmax_rest is not None and self.backend.dtype == torch.float32:
            return self.log_softmax_rest(logits, scored[:, shared:], rest_bias, owners), state
        return self.less_the_rest(self.normalized(logits), logits, scored[:, shared:], rest_bias[owners]), state

    def normalized(self, logits: Tensor) -> Tensor:
        if self.log_softmax is not None:
            return self.log_softmax(logits)
        return F.log_softmax(logits, dim=-1, dtype=torch.float32)

    def less_the_rest(self, log_probs: Tensor, logits: Tensor, sample: Tensor, rest_bias: Tensor) -> Tensor:
        """Log-probabilities (R, width) normalized over each row's list -> as if normalized over the whole
        vocabulary: the mass of the ids a list leaves out is estimated from the logits of the sample of
        unshared ids (R, K) (Shortlist.sample_ids) that are not in the row's list, each standing for
        unshared / K ids (`rest_bias` (R, K): Vocabularies.rest_bias of each row's sentence). Normalized over
        its list alone, a row whose list misses likely tokens would score too high, and beam search would
        favour it: beam 4 lost 0.3 BLEU that way (benchmarks/SPEED.md).
        (nmt.model.native's decode_log_softmax_rest computes the same in one call, for float32 logits.)"""
        eos = self.config.eos_id  # a shared id, at its own column
        listed = logits[:, eos].float() - log_probs[:, eos]  # (R,) log of the list's mass
        rest = (sample.float() + rest_bias).logsumexp(dim=1)  # (R,)
        return log_probs - F.softplus(rest - listed)[:, None]


def padded_own_product(weight: Tensor, bias: Tensor | None, vocabularies: Vocabularies, dtype: torch.dtype
                       ) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """ListedTokens.own as a batched product: output_rows (total, D) and (total,) of each sentence's own ids,
    padded to the longest list (N, E, D) with -inf bias on the padding."""
    listed = vocabularies.owned()  # (N, E)
    sentences, own = listed.shape
    weights = weight.new_zeros(sentences, own, weight.size(1)).index_put_(  # (N, E, D)
        torch.nonzero(listed, as_tuple=True), weight).to(dtype)
    biases = weight.new_full((sentences, own), -math.inf).masked_scatter_(  # (N, E)
        listed, torch.zeros_like(weight[:, 0]) if bias is None else bias).to(dtype)

    def own_logits(rows: Tensor, shared_logits: Tensor, open_sentences: Tensor) -> Tensor:
        count, n = rows.size(0), open_sentences.size(0)
        own = torch.baddbmm(biases.index_select(0, open_sentences)[:, None, :],  # (N, K, E)
                            rows.view(n, count // n, -1), weights.index_select(0, open_sentences).transpose(1, 2))
        return torch.cat([shared_logits, own.view(count, -1).to(shared_logits.dtype)], dim=1)

    return own_logits


def int8_layers(model: Transformer, kind: type[Int8Layers], layers: nn.ModuleList,
                description: tuple[LayerPart, ...]) -> Int8Layers | None:
    """A stack of an int8_fp32 model's layers (each layer's weights in the description's order, which the
    kernel's is) bound to nmt.model.native's kernel that runs them all in one call (`kind`), or None: for the
    backend's fused_layers, where every int8 layer's rows are quantized on their own scales and its shape suits
    the few-rows kernels (7-bit rows without VNNI, 8-bit with it), and affine layer norms of one eps."""
    if model.training or model.embed.weight.device.type != "cpu":
        return None
    modules = [layer_modules(layer, description) for layer in layers]
    parts = [(part, module) for layer_parts in modules for part, module in zip(description, layer_parts, strict=True)]
    every_linear = [module for part, module in parts if part.kind != "norm"]
    every_norm = [module for part, module in parts if part.kind == "norm"]
    if not (all(module.vnni is not None and module.rows in (7, 8) for module in every_linear)
            and all(isinstance(norm, nn.LayerNorm) and norm.weight is not None and norm.bias is not None
                    for norm in every_norm)
            and len({norm.eps for norm in every_norm}) == 1):
        return None  # a layer whose shape the C products do not take, or norms the C norm does not compute
    bits = {module.rows for module in every_linear}  # 7 without VNNI, 8 with it
    if len(bits) != 1:
        return None
    weights = [tuple(kernel_weight(module) for module in layer_parts) for layer_parts in modules]
    config = model.config
    return kind.bind(weights, config.n_heads, config.d_model, config.d_ff, every_norm[0].eps, config.pre_norm,
                     bits.pop())


def kernel_weight(module: nn.Module) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """A weight as the C stacks take it (nmt_kernels.h): an int8 layer's packed weights, scales and bias, a norm's
    weight, bias and None."""
    if isinstance(module, nn.LayerNorm):
        return module.weight.detach(), module.bias.detach(), None
    return module.vnni, module.column_scale, module.bias


def decoder_layers(model: Transformer) -> LayersStep | None:
    """int8_layers of the decoder (decode_layers)."""
    return int8_layers(model, LayersStep, model.decoder_layers, DECODER_LAYER)


def encoder_layers(model: Transformer) -> EncoderLayers | None:
    """int8_layers of the encoder (encode_layers)."""
    return int8_layers(model, EncoderLayers, model.encoder_layers, ENCODER_LAYER)


def padded_at_the_end(mask: Tensor | None) -> bool:
    """Whether a source mask (N, 1, 1, S), True on real tokens, holds each source's tokens first (None:
    nothing padded)."""
    if mask is None:
        return True
    mask = mask.view(mask.size(0), -1)  # (N, S)
    lengths = mask.sum(dim=1, keepdim=True)
    return torch.equal(mask, torch.arange(mask.size(1)) < lengths)

