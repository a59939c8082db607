"""What the C library of nmt.model.native computes, as torch functions: the decoder's attention over bf16 caches,
log-softmax, the best and the beam's top-k tokens, shortlist logits, int8_fp32's product, layer norm, the
decoder's and encoder's layers of an int8_fp32 step in one call (Int8Layers), and a CPU training step's
dropout and loss. Each factory gives None where the library does not load (nmt.model.native.library): the
callers keep torch's way.

    self_attention = self_attention_kernel()
    out = self_attention(q, keys, values)   # q (N, Dh) bf16, keys/values (T, N, Dh) bf16 -> (N, Dh) bf16
"""

from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import Tensor, nn

from nmt.model.native import HEAD_DIM_STEP, QUERY_DTYPES, library, products_built

log = logging.getLogger(__name__)


def check_inputs(q: Tensor, keys: Tensor, values: Tensor) -> None:
    """The kernels read raw memory: only contiguous CPU tensors, bf16 caches of one shape, bf16 or float32
    queries and head dimensions of whole vectors may reach them. (Checked at every call of every layer and
    step: written to cost little.)"""
    if not (q.dtype in QUERY_DTYPES and keys.dtype == torch.bfloat16 and values.dtype == torch.bfloat16
            and q.is_cpu and keys.is_cpu and values.is_cpu
            and q.is_contiguous() and keys.is_contiguous() and values.is_contiguous()):
        raise ValueError("the attention kernels need contiguous CPU tensors: bf16 caches, bf16 or float32 queries")
    if keys.shape != values.shape or q.size(-1) != keys.size(-1) or q.size(-1) % HEAD_DIM_STEP:
        raise ValueError(f"the attention kernels need keys and values of one shape and a head dimension that is "
                         f"a multiple of {HEAD_DIM_STEP}: q {tuple(q.shape)}, keys {tuple(keys.shape)}")


def self_attention_kernel() -> Callable[[Tensor, Tensor, Tensor], Tensor] | None:
    """decode_self_attention as a function of tensors, or None where the kernels are unavailable."""
    loaded = library()
    if loaded is None:
        return None

    def self_attention(q: Tensor, keys: Tensor, values: Tensor) -> Tensor:
        """softmax(q k^T / sqrt(Dh)) v per row: q (N, Dh) bf16 or float32, keys/values (T, N, Dh) bf16
        -> (N, Dh) in q's dtype."""
        check_inputs(q, keys, values)
        if keys.dim() != 3 or keys.shape[1:] != q.shape:
            raise ValueError(f"self-attention needs q (N, Dh) and keys (T, N, Dh): {tuple(q.shape)}, "
                             f"{tuple(keys.shape)}")
        rows, head_dim = q.shape
        out = torch.empty_like(q)
        if loaded.decode_self_attention(q.data_ptr(), keys.data_ptr(), values.data_ptr(), out.data_ptr(),
                                        keys.size(0), rows, head_dim, head_dim**-0.5, q.dtype == torch.float32):
            raise MemoryError("the self-attention kernel could not allocate its scratch memory")
        return out

    return self_attention


def cross_attention_kernel() -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor] | None:
    """decode_cross_attention as a function of tensors, or None where the kernels are unavailable."""
    loaded = library()
    if loaded is None:
        return None

    def cross_attention(q: Tensor, keys: Tensor, values: Tensor, lengths: Tensor) -> Tensor:
        """The K rows of each sentence over its first lengths[n] encoder positions: q (N, K, H, Dh) bf16 or
        float32, keys/values (N, H, S, Dh) bf16; lengths (N,) int64 -> (N, K, H, Dh) in q's dtype."""
        check_inputs(q, keys, values)
        if q.dim() != 4 or keys.dim() != 4 or keys.size(0) != q.size(0) or keys.size(1) != q.size(2):
            raise ValueError(f"cross-attention needs q (N, K, H, Dh) and keys (N, H, S, Dh): {tuple(q.shape)}, "
                             f"{tuple(keys.shape)}")
        sentences, beam, heads, head_dim = q.shape
        if not (lengths.dtype == torch.int64 and lengths.is_cpu and lengths.is_contiguous() and lengths.dim() == 1
                and lengths.size(0) == sentences):
            raise ValueError("lengths must be a contiguous int64 CPU tensor of one length per sentence")
        out = torch.empty_like(q)
        if loaded.decode_cross_attention(q.data_ptr(), keys.data_ptr(), values.data_ptr(), lengths.data_ptr(),
                                         out.data_ptr(), sentences, beam, heads, keys.size(2), head_dim,
                                         head_dim**-0.5, q.dtype == torch.float32):
            raise MemoryError("the cross-attention kernel could not allocate its scratch memory")
        return out

    return cross_attention


def log_softmax_kernel() -> Callable[[Tensor], Tensor] | None:
    """decode_log_softmax as a function of tensors, or None where the kernels are unavailable; faster than
    F.log_softmax on a decoding step's rows, the same log-probabilities within 2e-6."""
    loaded = library()
    if loaded is None:
        return None

    def log_softmax(logits: Tensor) -> Tensor:
        """F.log_softmax(logits, dim=-1, dtype=torch.float32) of contiguous bf16 or float32 CPU logits (R, V)."""
        shape_ok = logits.dim() == 2 and logits.is_contiguous() and logits.is_cpu
        if logits.dtype not in (torch.bfloat16, torch.float32) or not shape_ok:
            raise ValueError("decode_log_softmax needs contiguous 2-dimensional bf16 or float32 CPU logits")
        out = torch.empty(logits.shape, dtype=torch.float32)
        loaded.decode_log_softmax(logits.data_ptr(), out.data_ptr(), logits.size(0), logits.size(1),
                                  logits.dtype == torch.float32)
        return out

    return log_softmax


@functools.cache
def best_kernel() -> Callable[[Tensor], tuple[Tensor, Tensor]] | None:
    """decode_best as a function of tensors, or None where the kernels are unavailable."""
    loaded = library()
    if loaded is None:
        return None

    def best(rows: Tensor) -> tuple[Tensor, Tensor]:
        """torch.max(rows, dim=-1) of contiguous float32 CPU rows (R, V), V >= 1: (values (R,), indices (R,))."""
        if not (rows.dtype == torch.float32 and rows.is_cpu and rows.is_contiguous() and rows.dim() == 2
                and rows.size(1) > 0):
            raise ValueError("decode_best needs contiguous float32 CPU rows (R, V)")
        values, indices = torch.empty(rows.size(0)), torch.empty(rows.size(0), dtype=torch.int64)
        loaded.decode_best(rows.data_ptr(), values.data_ptr(), indices.data_ptr(), rows.size(0), rows.size(1))
        return values, indices

    return best


@functools.cache
def beam_top_k_kernel() -> Callable[[Tensor, Tensor, int], tuple[Tensor, Tensor]] | None:
    """decode_beam_top_k as a function of tensors, or None where the kernels are unavailable."""
    loaded = library()
    if loaded is None:
        return None

    def beam_top_k(log_probs: Tensor, scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """log_probs (N*width, V) and scores (N, width) float32, contiguous CPU tensors -> the k best of each
        sentence's scores[:, :, None] + log_probs.view(N, width, V), flattened: (values (N, k), indices (N, k)),
        best first, as torch.topk gives them (of equal values, the larger index first)."""
        sentences, width = scores.shape
        if not (log_probs.dtype == scores.dtype == torch.float32 and log_probs.is_cpu and scores.is_cpu
                and log_probs.is_contiguous() and scores.is_contiguous() and log_probs.dim() == 2
                and log_probs.size(0) == sentences * width and 1 <= k <= min(64, width * log_probs.size(1))):
            raise ValueError("decode_beam_top_k needs contiguous float32 CPU tensors, log_probs (N*width, V) and "
                             "scores (N, width), and 1 <= k <= 64 candidates")
        values, indices = torch.empty(sentences, k), torch.empty(sentences, k, dtype=torch.int64)
        loaded.decode_beam_top_k(log_probs.data_ptr(), scores.data_ptr(), values.data_ptr(), indices.data_ptr(),
                                 sentences, width, log_probs.size(1), k)
        return values, indices

    return beam_top_k


def log_softmax_rest_kernel() -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor] | None:
    """decode_log_softmax_rest as a function of tensors, or None where the kernels are unavailable."""
    loaded = library()
    if loaded is None:
        return None

    def log_softmax_rest(logits: Tensor, sample: Tensor, rest_bias: Tensor, owners: Tensor) -> Tensor:
        """A shortlist step's log-probabilities (R, width) float32 as if over the whole vocabulary: logits
        (R, width) of each row's list, contiguous; the logits of the sampled unshared ids (R, K), rows of
        unit stride (a column slice of the projection's output); rest_bias (N, K) and each row's sentence
        owners (R,) int64, as nmt.model.flat_decoder's less_the_rest takes them. All float32 CPU tensors."""
        rows, width = logits.shape
        count, sampled = sample.shape
        if not (logits.dtype == sample.dtype == rest_bias.dtype == torch.float32 and owners.dtype == torch.int64
                and logits.is_cpu and sample.is_cpu and rest_bias.is_cpu and owners.is_cpu
                and logits.is_contiguous() and rest_bias.is_contiguous() and owners.is_contiguous()
                and count == rows and owners.shape == (rows,) and rest_bias.dim() == 2
                and rest_bias.size(1) == sampled and (sampled == 0 or (sample.stride(1) == 1
                                                                       and sample.stride(0) >= sampled))):
            raise ValueError("decode_log_softmax_rest needs float32 CPU tensors: logits (R, width) and rest_bias "
                             "(N, K) contiguous, sample (R, K) of unit column stride, int64 owners (R,)")
        out = torch.empty(rows, width)
        failed = loaded.decode_log_softmax_rest(logits.data_ptr(), sample.data_ptr(), sample.stride(0),
                                                rest_bias.data_ptr(), owners.data_ptr(), rest_bias.size(0),
                                                out.data_ptr(), rows, width, sampled)
        if failed == 2:
            raise ValueError("decode_log_softmax_rest: a row's sentence outside rest_bias")
        if failed:
            raise MemoryError("decode_log_softmax_rest could not allocate its scratch memory")
        return out

    return log_softmax_rest


SentenceLogits = Callable[[Tensor, Tensor, Tensor, int], Tensor]  # (rows, shared_logits, sentences, width)


def ids_within(ids: Tensor, rows: int) -> bool:
    """Whether every id of a batch's own tokens names one of `rows` weight rows (checked once a batch)."""
    return ids.numel() == 0 or 0 <= int(ids.min()) <= int(ids.max()) < rows


def step_inputs_fit(rows: Tensor, shared_logits: Tensor, sentences: Tensor, width: int, dim: int,
                    dtypes: tuple[torch.dtype, ...]) -> bool:
    """Whether a step's rows (N*K, dim), shared logits (N*K, F) of the same dtype (one of `dtypes`) and
    sentences (N,) int64 are what a sentence logits kernel may read: contiguous CPU tensors, whole beams,
    the shared tokens within `width`."""
    count, shared = shared_logits.shape
    return (rows.dtype in dtypes and shared_logits.dtype == rows.dtype and sentences.dtype == torch.int64
            and rows.is_contiguous() and shared_logits.is_contiguous() and sentences.is_contiguous()
            and rows.is_cpu and shared_logits.is_cpu and sentences.is_cpu and rows.dim() == 2
            and sentences.dim() == 1 and rows.size(1) == dim and rows.size(0) == count
            and sentences.size(0) and count % sentences.size(0) == 0 and shared <= width)


def raise_for(failed: int, kernel: str) -> None:
    """A sentence logits kernel's failure as an exception: 2 bad indices, 1 no scratch memory."""
    if failed == 2:
        raise ValueError(f"{kernel}: a sentence outside the batch, or its tokens outside the weights or the width")
    if failed:
        raise MemoryError("the sentence logits kernel could not allocate its scratch memory")


def sentence_logits_kernel() -> Callable[[Tensor, Tensor | None, Tensor, Tensor], SentenceLogits] | None:
    """decode_sentence_logits for one batch's vocabularies, or None where the kernels are unavailable:
    bind(weights, bias, starts, counts) checks a batch's own tokens once and returns the function that its
    decoding steps call, whose checks of indices are the kernel's own (checked in Python at every call,
    they cost more than the call at batch 1)."""
    loaded = library()
    if loaded is None:
        return None

    def bind(weights: Tensor, bias: Tensor | None, starts: Tensor, counts: Tensor,
             ids: Tensor | None = None) -> SentenceLogits:
        """Sentence n of the batch owns the weight rows (V, D) bf16 ids[starts[n] : starts[n] + counts[n]]
        (ids (pieces,) int64; None: the rows starts[n] .. themselves) and the same entries of bias (V,)
        float32 (or no bias); starts, counts (N,) int64. (The kernel checks the indices of the sentences it is
        given; the ids are checked here, once a batch.)"""
        tensors = (weights, starts, counts) + (() if bias is None else (bias,)) + (() if ids is None else (ids,))
        if not (all(t.is_cpu and t.is_contiguous() for t in tensors) and weights.dtype == torch.bfloat16
                and weights.dim() == 2 and weights.size(1) % HEAD_DIM_STEP == 0
                and starts.dtype == counts.dtype == torch.int64 and starts.dim() == 1 and counts.shape == starts.shape
                and (bias is None or (bias.dtype == torch.float32 and bias.shape == weights.shape[:1]))
                and (ids is None or (ids.dtype == torch.int64 and ids.dim() == 1 and ids_within(ids, len(weights))))):
            raise ValueError("decode_sentence_logits needs contiguous CPU tensors: bf16 weights (V, D), a float32 "
                             "bias (V,), int64 starts and counts (N,), int64 ids (pieces,) of weight rows")
        pieces = weights.size(0) if ids is None else ids.size(0)

        def sentence_logits(rows: Tensor, shared_logits: Tensor, sentences: Tensor, width: int) -> Tensor:
            """Rows (N*K, D) bf16 or float32, the K of each sentence sentences[s] of the batch, and their logits
            of the shared tokens (N*K, F) in the same dtype -> logits (N*K, width) float32: the shared ones,
            each sentence's own, then -inf."""
            if not step_inputs_fit(rows, shared_logits, sentences, width, weights.size(1), QUERY_DTYPES):
                raise ValueError("decode_sentence_logits needs contiguous CPU tensors of one dtype, bf16 or float32: "
                                 "rows (N*K, D), shared logits (N*K, F); int64 sentences (N,)")
            count, shared = shared_logits.shape
            out = torch.empty(count, width)
            failed = loaded.decode_sentence_logits(
                rows.data_ptr(), shared_logits.data_ptr(), weights.data_ptr(), 0 if ids is None else ids.data_ptr(),
                pieces, 0 if bias is None else bias.data_ptr(), starts.data_ptr(), counts.data_ptr(), starts.size(0),
                sentences.data_ptr(), out.data_ptr(), sentences.size(0), count // sentences.size(0), rows.size(1),
                shared, width, rows.dtype == torch.float32)
            raise_for(failed, "decode_sentence_logits")
            return out

        return sentence_logits

    return bind


@functools.cache
def sentence_logits_int7_kernel() -> Callable[..., SentenceLogits] | None:
    """decode_sentence_logits_int7 for one batch's vocabularies, as sentence_logits_kernel binds
    decode_sentence_logits, over int8 weights: bind(weights, scales, bias, starts, counts, ids) with weights
    (V, D) uint8 (the int8 values + 128), scales (V,) and bias (V,) float32; or None where the kernels are
    unavailable or built without AVX2. The rows and shared logits are float32 (int8_fp32's activations)."""
    loaded = library()
    if loaded is None or not products_built(loaded, 7):
        return None

    def bind(weights: Tensor, scales: Tensor, bias: Tensor | None, starts: Tensor, counts: Tensor,
             ids: Tensor) -> SentenceLogits:
        tensors = (weights, scales, starts, counts, ids) + (() if bias is None else (bias,))
        if not (all(t.is_cpu and t.is_contiguous() for t in tensors) and weights.dtype == torch.uint8
                and weights.dim() == 2 and weights.size(1) % 32 == 0 and scales.dtype == torch.float32
                and scales.shape == weights.shape[:1] and starts.dtype == counts.dtype == ids.dtype == torch.int64
                and starts.dim() == 1 and counts.shape == starts.shape and ids.dim() == 1
                and (bias is None or (bias.dtype == torch.float32 and bias.shape == weights.shape[:1]))
                and ids_within(ids, len(weights))):
            raise ValueError("decode_sentence_logits_int7 needs contiguous CPU tensors: uint8 weights (V, D), "
                             "float32 scales and bias (V,), int64 starts, counts (N,) and ids of weight rows")

        def sentence_logits(rows: Tensor, shared_logits: Tensor, sentences: Tensor, width: int) -> Tensor:
            if not step_inputs_fit(rows, shared_logits, sentences, width, weights.size(1), (torch.float32,)):
                raise ValueError("decode_sentence_logits_int7 needs contiguous float32 CPU tensors: rows (N*K, D), "
                                 "shared logits (N*K, F); int64 sentences (N,)")
            count, shared = shared_logits.shape
            out = torch.empty(count, width)
            failed = loaded.decode_sentence_logits_int7(
                rows.data_ptr(), shared_logits.data_ptr(), weights.data_ptr(), scales.data_ptr(), ids.data_ptr(),
                ids.size(0), 0 if bias is None else bias.data_ptr(), starts.data_ptr(), counts.data_ptr(),
                starts.size(0), sentences.data_ptr(), out.data_ptr(), sentences.size(0), count // sentences.size(0),
                rows.size(1), shared, width)
            raise_for(failed, "decode_sentence_logits_int7")
            return out

        return sentence_logits

    return bind


@functools.cache
def int8_linear_kernel() -> Callable[..., Tensor] | None:
    """int8_linear, int8_fp32's one product, as a function of tensors, or None where the kernels are unavailable."""
    loaded = library()
    if loaded is None:
        return None

    def int8_linear(rows: Tensor, packed: Tensor, scale: Tensor, bias: Tensor | None, relu: bool, bits: int) -> Tensor:
        """float32 rows (R, K) -> float32 (R, N): each row quantized to `bits` (8 or 7) on its own scale, times the
        int8 weights `packed` by vnni_pack, scaled back by the row's scale and `scale` (N,), plus bias (N,),
        ReLU if `relu`. scale and bias float32 and contiguous (the layer's own)."""
        count, width = rows.shape
        outputs = scale.size(0)
        if not (rows.dtype == torch.float32 and rows.is_cpu and packed.dtype == torch.uint8 and packed.is_contiguous()
                and packed.numel() == (outputs + 15) // 16 * 16 * width and count and bits in (7, 8)):
            raise ValueError("int8_linear needs float32 CPU rows (R, K) and weights packed by vnni_pack")
        rows = rows.contiguous()
        out = torch.empty(count, outputs)
        failed = loaded.int8_linear(rows.data_ptr(), packed.data_ptr(), scale.data_ptr(),
                                    0 if bias is None else bias.data_ptr(), out.data_ptr(), count, outputs, width,
                                    relu, bits)
        if failed == 2:
            raise MemoryError("the int8 kernel could not allocate its scratch memory")
        if failed:
            raise ValueError(f"int8_linear has no {bits}-bit products on this build, or K is not a multiple of 4")
        return out

    return int8_linear


def layer_norm_kernel() -> Callable[[nn.LayerNorm], Callable[[Tensor], Tensor]] | None:
    """decode_layer_norm bound to an nn.LayerNorm's weight, bias and eps (float32, over the last dimension), or
    None where the kernels are unavailable: the norm decode_layers computes, for the steps that do not call it."""
    loaded = library()
    if loaded is None:
        return None

    def bind(norm: nn.LayerNorm) -> Callable[[Tensor], Tensor]:
        weight, bias, eps = norm.weight.detach().contiguous(), norm.bias.detach().contiguous(), norm.eps

        def layer_norm(x: Tensor) -> Tensor:
            if not (x.dtype == torch.float32 and x.is_cpu and x.size(-1) == weight.size(0)):
                raise ValueError("decode_layer_norm needs float32 CPU rows of the norm's width")
            x = x.contiguous()
            out = torch.empty_like(x)
            loaded.decode_layer_norm(x.data_ptr(), weight.data_ptr(), bias.data_ptr(), out.data_ptr(),
                                     x.numel() // x.size(-1), x.size(-1), eps)
            return out

        return layer_norm

    return bind


# A layer's weights as the C stacks take them, in the order of the layer's description (nmt.model.transformer's
# ENCODER_LAYER and DECODER_LAYER, the enums of nmt_kernels.h): three tensors each, an int8 layer's weights packed
# by nmt.model.quantize.vnni_pack, its float32 channel scales (out,) and bias (out,) or None; a norm's float32
# weight and bias (D,) and None.
KernelLayer = tuple[tuple[Tensor | None, Tensor | None, Tensor | None], ...]


class Int8Layers:
    """A stack of int8_fp32 layers bound to one of the kernels that run them all in one call (decode_layers,
    encode_layers): the layers' weights as one array of pointers, held with the tensors they point into."""

    def __init__(self, loaded: ctypes.CDLL, layers: list[KernelLayer], heads: int, d_model: int, d_ff: int,
                 eps: float, pre_norm: bool, bits: int):
        self.loaded, self.layers, self.heads, self.eps, self.pre_norm, self.bits = (loaded, layers, heads, eps,
                                                                                     pre_norm, bits)
        self.d_model, self.d_ff = d_model, d_ff
        self.head_dim = d_model // heads
        self.scale = self.head_dim**-0.5
        pointers = [None if t is None else t.data_ptr() for layer in layers for weight in layer for t in weight]
        self.pointers = (ctypes.c_void_p * len(pointers))(*pointers)

    @classmethod
    def bind(cls, layers: list[KernelLayer], heads: int, d_model: int, d_ff: int, eps: float, pre_norm: bool,
             bits: int) -> Int8Layers | None:
        """The layers bound, or None where the kernels are unavailable or have no products of `bits` (7: AVX2,
        8: AVX-512 VNNI) on this build, or the shapes do not suit them."""
        loaded = library()
        if loaded is None or not layers:
            return None
        if d_model % heads or (d_model // heads) % HEAD_DIM_STEP or d_model % 4 or d_ff % 4:
            return None
        if not products_built(loaded, bits):
            return None
        return cls(loaded, layers, heads, d_model, d_ff, eps, pre_norm, bits)

    def raise_for(self, failed: int) -> None:
        if failed == 2:
            raise MemoryError("the int8 layers kernel could not allocate its scratch memory")
        if failed:
            raise RuntimeError(f"the int8 layers kernel has no {self.bits}-bit products on this build")


class LayersStep(Int8Layers):
    """decode_layers bound to a model's decoder layers: step(x, self_keys, self_values, cross_keys,
    cross_values, lengths, step) runs the embedded tokens x (R, D) float32 through every layer in place,
    writing this position's keys and values into the self caches."""

    def __call__(self, x: Tensor, self_keys: list[Tensor], self_values: list[Tensor], cross_keys: list[Tensor],
                 cross_values: list[Tensor], lengths: Tensor, step: int) -> Tensor:
        count = len(self.layers)
        rows, sentences = x.size(0), lengths.size(0)
        source = cross_keys[0].size(2)
        self_shape = (rows, self.heads, self.head_dim)
        cross_shape = (sentences, self.heads, source, self.head_dim)
        caches = (*self_keys, *self_values)
        crosses = (*cross_keys, *cross_values)
        if not (x.dtype == torch.float32 and x.is_cpu and x.is_contiguous() and x.shape == (rows, self.d_model)
                and lengths.dtype == torch.int64 and lengths.is_contiguous() and sentences and rows % sentences == 0
                and len(caches) == len(crosses) == 2 * count
                and all(t.dtype == torch.bfloat16 and t.is_contiguous() and t.shape[1:] == self_shape
                        and t.size(0) > step for t in caches)
                and all(t.dtype == torch.bfloat16 and t.is_contiguous() and t.shape == cross_shape for t in crosses)):
            raise ValueError("decode_layers needs contiguous CPU tensors: float32 rows (R, D), bf16 self caches "
                             "(capacity > step, R, H, Dh), bf16 cross caches (N, H, S, Dh), int64 lengths (N,)")
        self_pointers = [t.data_ptr() for pair in zip(self_keys, self_values, strict=True) for t in pair]
        cross_pointers = [t.data_ptr() for pair in zip(cross_keys, cross_values, strict=True) for t in pair]
        self.raise_for(self.loaded.decode_layers(
            x.data_ptr(), self.pointers, count, (ctypes.c_void_p * (2 * count))(*self_pointers), step,
            (ctypes.c_void_p * (2 * count))(*cross_pointers), lengths.data_ptr(), sentences, rows // sentences,
            self.heads, self.head_dim, self.d_ff, source, self.scale, self.eps, self.pre_norm, self.bits))
        return x


class EncoderLayers(Int8Layers):
    """encode_layers bound to a model's encoder layers: encoder(x) runs embedded sources x (N, S, D) float32,
    none of them padded, through every layer in place."""

    def __call__(self, x: Tensor) -> Tensor:
        if not (x.dtype == torch.float32 and x.is_cpu and x.is_contiguous() and x.dim() == 3
                and x.size(2) == self.d_model):
            raise ValueError("encode_layers needs contiguous float32 CPU sources (N, S, D)")
        sentences, length, _ = x.shape
        self.raise_for(self.loaded.encode_layers(
            x.data_ptr(), self.pointers, len(self.layers), sentences, length, self.heads, self.head_dim, self.d_ff,
            self.scale, self.eps, self.pre_norm, self.bits))
        return x


TRAINING_DTYPES = (torch.bfloat16, torch.float32)


SPLIT_MIN_ELEMENTS = 1 << 16  # below this a kernel call runs whole on the calling thread


@functools.cache
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(workers, thread_name_prefix="nmt-kernels")


def in_parts(run: Callable[[int, int], None], count: int, elements_each: int) -> None:
    """run(start, stop) over count items in as many contiguous parts as torch's threads (ctypes lets go of
    the GIL in the kernels, so the parts run at once); small work in one call on this thread."""
    parts = min(torch.get_num_threads(), count)
    if parts <= 1 or count * elements_each < SPLIT_MIN_ELEMENTS:
        run(0, count)
        return
    bounds = [count * k // parts for k in range(parts + 1)]
    futures = [_pool(parts).submit(run, start, stop) for start, stop in zip(bounds[1:-1], bounds[2:], strict=True)]
    run(bounds[0], bounds[1])
    for future in futures:
        future.result()


@functools.cache
def dropout_kernel() -> Callable[[Tensor, int, float, Tensor], Tensor] | None:
    """train_dropout as a function of tensors, or None where the kernels are unavailable."""
    loaded = library()
    if loaded is None:
        return None

    def dropout(x: Tensor, dropped: int, scale: float, seed: Tensor) -> Tensor:
        """x with the units whose 16-bit draw under `seed` (one int64 on the CPU, which the kernel reads: the
        seed never passes through Python) falls below `dropped` zeroed and the rest times `scale`: a new tensor of
        x's shape, bf16 or float32 on the CPU. The same seed, the same mask."""
        if not (x.dtype in TRAINING_DTYPES and x.is_cpu and x.numel() <= 2**32 and 0 <= dropped < 2**16
                and seed.dtype == torch.int64 and seed.is_cpu and seed.numel() == 1):
            raise ValueError("train_dropout needs a bf16 or float32 CPU tensor of at most 2^32 units, 16-bit rates "
                             "and a seed in one int64 CPU tensor")
        x = x.contiguous()
        out = torch.empty_like(x)
        f32 = x.dtype == torch.float32
        source, target, width, seed_at = x.data_ptr(), out.data_ptr(), x.element_size(), seed.data_ptr()

        def run(start: int, stop: int) -> None:
            loaded.train_dropout(source + start * width, target + start * width, stop - start, start, seed_at,
                                 dropped, scale, f32)

        in_parts(run, x.numel(), 1)
        return out

    return dropout


@functools.cache
def cross_entropy_kernel() -> Callable[[Tensor, Tensor, int, float, bool], tuple[Tensor, Tensor | None]] | None:
    """train_cross_entropy as a function of tensors, or None where the kernels are unavailable."""
    loaded = library()
    if loaded is None:
        return None

    def cross_entropy(logits: Tensor, targets: Tensor, pad_id: int, smoothing: float,
                      gradient: bool) -> tuple[Tensor, Tensor | None]:
        """Label-smoothed cross-entropy of logits (R, V), bf16 or float32, against targets (R,) int64: each
        row's loss (R,) float32 (0 at padding), and with `gradient` its gradient with respect to the logits
        in their dtype."""
        if not (logits.dtype in TRAINING_DTYPES and logits.is_cpu and logits.dim() == 2
                and targets.dtype == torch.int64 and targets.is_cpu and targets.shape == logits.shape[:1]):
            raise ValueError("train_cross_entropy needs bf16 or float32 CPU logits (R, V) and int64 targets (R,)")
        logits, targets = logits.contiguous(), targets.contiguous()
        rows, width = logits.shape
        losses = torch.empty(rows, device=logits.device)
        grad = torch.empty_like(logits) if gradient else None
        f32 = logits.dtype == torch.float32
        failed = []
        row_bytes = width * logits.element_size()

        def run(start: int, stop: int) -> None:
            failed.append(loaded.train_cross_entropy(
                logits.data_ptr() + start * row_bytes, targets.data_ptr() + start * 8, losses.data_ptr() + start * 4,
                None if grad is None else grad.data_ptr() + start * row_bytes, stop - start, width, pad_id,
                smoothing, f32))

        in_parts(run, rows, width)
        if any(failed):
            raise ValueError(f"train_cross_entropy: a target outside the vocabulary of {width}")
        return losses, grad

    return cross_entropy
