"""The flattened decoder: the same memory as Transformer.encode and the same log-probabilities as
Transformer.decode_step, step after step, in every precision it runs in, and the same search results."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from nmt.decoding.search import SearchOptions, search
from nmt.model.backend import Backend, machine
from nmt.model.config import ModelConfig
from nmt.model.flat_decoder import FlatDecoder
from nmt.model.transformer import Transformer
from tests.conftest import cast, tiny_model

SRC = torch.tensor([[5, 6, 7, 8, 9, 3], [10, 11, 3, 0, 0, 0], [12, 13, 14, 3, 0, 0]])


def assert_flat_step_equals_decode_step(model: Transformer, backend: Backend, sentences: int, beam: int,
                                        device: str = "cpu"):
    """Exactly equal; with the backend's bf16 caches (reduced precision on a CPU), through nmt.model.native's
    attention kernels over them, which sum in another order than torch's products: equal within a few bf16
    roundings (int8_fp32 quantizes each row of activations, which turns such a rounding into a step of its
    scale: with VNNI, 8 bits; on AVX2 alone, 7 bits, whose step is twice as large)."""
    flat = FlatDecoder(model, backend)
    kernels = backend.bf16_caches
    tolerance = {7: 0.2, 8: 0.1}.get(backend.int8_rows, 0.03) if kernels else 0
    src = SRC.repeat(6, 1)[:sentences].to(device)
    # int8_fp32's encoder layers in one C call (encode_layers): its own norms and attention sums (5e-7 apart
    # on the tiny model; one activation rounded to the other side of a quantization step would be more)
    memory_tolerance = 1e-3 if flat.encoder_step is not None else 0
    torch.testing.assert_close(flat.encode(src), model.encode(src), atol=memory_tolerance, rtol=0)
    reference, state = model.init_state(src, beam), flat.init_state(src, beam)
    tokens = torch.randint(4, 60, (20, src.size(0) * beam), generator=torch.Generator().manual_seed(2)).to(device)
    rows = torch.arange(src.size(0) * beam, device=device) // beam * beam  # each row takes its sentence's first
    for t in range(tokens.size(0)):  # 20 steps: the cache grows past its first 16 positions
        expected, reference = model.decode_step(tokens[t], reference)
        log_probs, state = flat.decode_step(tokens[t], state)
        torch.testing.assert_close(log_probs, expected, atol=tolerance, rtol=0)
        reference.reorder(rows)
        state.reorder(rows)


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "int8_bf16", "int8_fp32", "int8"])
@pytest.mark.parametrize("sentences, beam", [(1, 1), (3, 2), (18, 1)])  # 18 rows: the plain-matmul attention
def test_flat_step_equals_decode_step(pre_norm, precision, sentences, beam):
    if precision == "int8":
        pytest.importorskip("torchao")  # an optional extra
    model, backend = cast(tiny_model(seed=7, pre_norm=pre_norm, tie_embeddings=not pre_norm), precision, exact=True)
    assert_flat_step_equals_decode_step(model, backend, sentences, beam)


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("precision, rows", [("bf16", 0), ("int8_bf16", 0), ("int8_fp32", 8), ("int8_fp32", 7)])
@pytest.mark.parametrize("sentences, beam", [(1, 1), (3, 2), (18, 1), (5, 4)])
def test_flat_step_through_the_c_kernels_stays_close_to_decode_step(pre_norm, precision, rows, sentences, beam):
    """Every int8_fp32 product the machine runs: 8-bit rows where it has VNNI, 7-bit rows (the AVX2 kernel) on
    every machine with the kernels."""
    from nmt.model import native

    if native.library() is None:
        pytest.skip("no C compiler, or neither AVX-512 nor AVX2: the kernels (tests/test_native.py) are not used")
    if rows == 8 and not (machine().vnni and machine().int_mm):
        pytest.skip("8-bit rows need VNNI")
    model, backend = cast(tiny_model(seed=7, pre_norm=pre_norm, tie_embeddings=not pre_norm), precision,
                          int8_rows=rows)
    assert backend.bf16_caches
    assert_flat_step_equals_decode_step(model, backend, sentences, beam)


@pytest.mark.parametrize("rows", [8, 7])
def test_flat_step_equals_decode_step_with_the_torch_int8_product(rows):
    """Without the C kernels (--exact, or no compiler) int8_fp32's product runs in torch's operations, at the
    bits the machine takes: the flat step equals the model's own step."""
    model, backend = cast(tiny_model(seed=7), "int8_fp32", exact=True, int8_rows=rows)
    assert all(module.kernel is None for module in model.modules() if hasattr(module, "kernel"))
    assert_flat_step_equals_decode_step(model, backend, 3, 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run on a GPU machine)")
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_flat_step_equals_decode_step_on_cuda(precision):
    model, backend = cast(tiny_model(seed=7).cuda(), precision)
    for sentences, beam in [(1, 1), (3, 2), (18, 1)]:
        assert_flat_step_equals_decode_step(model, backend, sentences, beam, "cuda")


@pytest.mark.parametrize("tied", [True, False])
def test_every_precision_builds_on_a_cpu_without_vnni(monkeypatch, tied):
    """On an AVX2 CPU (no VNNI, say an AMD Zen 3) int8_fp32 takes 7-bit rows; the other precisions have no int8
    product at all, and their decoders must not look for one (an fp32 model's output projection has none)."""
    from nmt.model import backend

    avx2 = dataclasses.replace(backend.machine(), flags=frozenset({"avx2", "fma"}))
    monkeypatch.setattr(backend, "machine", lambda: avx2)
    for precision in ("fp32", "bf16", "int8_bf16", "int8_fp32"):
        model, chosen = cast(tiny_model(seed=7, tie_embeddings=tied), precision)
        assert chosen.int8_rows == (7 if precision == "int8_fp32" else 0)
        flat = FlatDecoder(model, chosen)
        log_probs, _ = flat.decode_step(SRC[:, 0], flat.init_state(SRC))
        assert log_probs.shape == (SRC.size(0), model.config.vocab_size)


def test_flat_decoder_searches_as_the_model():
    model, backend = cast(tiny_model(seed=3), "fp32")
    for beam in (1, 4):
        options = SearchOptions(beam_size=beam, nbest=beam)
        assert search(FlatDecoder(model, backend), SRC, options) == search(model, SRC, options)
        uncached = SearchOptions(beam_size=beam, nbest=beam, use_cache=False)
        assert search(FlatDecoder(model, backend), SRC, uncached) == search(model, SRC, uncached)


def test_flat_decoder_leaves_a_training_model_to_its_own_step():
    torch.manual_seed(3)
    model = Transformer(ModelConfig.preset("tiny", vocab_size=60, dropout=0.5)).train()
    results = []
    for decoder in (model, FlatDecoder(model, Backend.resolve("fp32", torch.device("cpu")))):
        torch.manual_seed(0)  # the same dropout masks for both
        results.append(decoder.decode_step(SRC[:, 0], decoder.init_state(SRC))[0])
    assert torch.equal(results[0], results[1])


def test_reduced_precision_keeps_bf16_attention_caches_for_the_c_kernels():
    from nmt.model import native

    if native.library() is None:
        pytest.skip("no C compiler, or neither AVX-512 nor AVX2: the kernels (tests/test_native.py) are not used")
    for precision, expected in (("bf16", torch.bfloat16), ("int8_bf16", torch.bfloat16), ("fp32", torch.float32),
                                ("int8_fp32", torch.bfloat16)):
        flat = FlatDecoder(*cast(tiny_model(seed=7), precision))
        state = flat.init_state(SRC, 2)
        caches = state.self_keys + state.self_values + state.cross_keys + state.cross_values
        assert {buffer.dtype for buffer in caches} == {expected}
        assert (flat.self_attention is not None) == (flat.cross_attention is not None) == (expected == torch.bfloat16)
        assert state.kernel_self == state.kernel_cross == (expected == torch.bfloat16)  # what the attention reads
    # a source padded at the start: the cross-attention kernel (which takes lengths) is not used
    flat = FlatDecoder(*cast(tiny_model(seed=7), "bf16"))
    state = flat.init_state(SRC.flip(1), 2)
    assert state.self_keys[0].dtype == torch.bfloat16 and state.cross_keys[0].dtype == torch.float32
    assert state.kernel_self and not state.kernel_cross


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("sentences, beam", [(1, 1), (3, 2), (5, 4)])  # 20 rows: products 8 rows at a time
def test_int8_fp32_layers_in_one_call_equal_the_steps_through_each_kernel(pre_norm, sentences, beam):
    """decode_layers (every decoder layer of a step in one C call) computes bit for bit what the step's
    operations one by one compute with the same kernels (which is what a step takes where a state does not
    suit decode_layers), and writes the same keys and values into the cache."""
    model, backend = cast(tiny_model(seed=7, pre_norm=pre_norm, tie_embeddings=not pre_norm), "int8_fp32")
    fused = FlatDecoder(model, backend)
    if fused.layers_step is None:
        pytest.skip("no C kernels with int8 products here (tests/test_native.py)")
    separate = FlatDecoder(model, backend)
    separate.layers_step = None
    src = SRC.repeat(2, 1)[:sentences]
    states = [decoder.init_state(src, beam) for decoder in (fused, separate)]
    tokens = torch.randint(4, 60, (20, src.size(0) * beam), generator=torch.Generator().manual_seed(2))
    rows = torch.arange(src.size(0) * beam) // beam * beam
    for t in range(tokens.size(0)):
        (expected, states[1]), (log_probs, states[0]) = (separate.decode_step(tokens[t], states[1]),
                                                         fused.decode_step(tokens[t], states[0]))
        assert torch.equal(log_probs, expected)
        for cache in ("self_keys", "self_values"):
            for ours, theirs in zip(getattr(states[0], cache), getattr(states[1], cache), strict=True):
                assert torch.equal(ours[: t + 1], theirs[: t + 1])
        for state in states:
            state.reorder(rows)


def test_int8_fp32_step_gives_a_sentence_what_it_gets_alone():
    """A batch of sentences through encode_layers and decode_layers (products of 8 rows at a time): each
    sentence's memory and log-probabilities bit for bit what it gets decoded alone (nmt serve answers a
    request the same way under any load)."""
    flat = FlatDecoder(*cast(tiny_model(seed=7), "int8_fp32"))
    if flat.layers_step is None:
        pytest.skip("no C kernels with int8 products here (tests/test_native.py)")
    src, beam = SRC[[0, 2, 0, 2, 0, 2]], 2  # 12 rows
    assert torch.equal(flat.encode(src)[:1], flat.encode(src[:1]))  # encode_layers, 6 sources or 1
    tokens = torch.randint(4, 60, (6, len(src) * beam), generator=torch.Generator().manual_seed(3))
    together, alone = flat.init_state(src, beam), flat.init_state(src[:1], beam)
    for t in range(tokens.size(0)):
        batched, together = flat.decode_step(tokens[t], together)
        single, alone = flat.decode_step(tokens[t, :beam], alone)
        assert torch.equal(batched[:beam], single)
