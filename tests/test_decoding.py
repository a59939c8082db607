"""The cached incremental decoder: parity with teacher forcing, the state operations, and search
invariants on a real (tiny, random) model."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from nmt.decoding.search import SearchOptions, search
from tests.conftest import cast, tiny_model

SRC = torch.tensor([[5, 6, 7, 8, 9, 3], [10, 11, 3, 0, 0, 0], [12, 13, 14, 3, 0, 0]])


def test_decode_step_reproduces_forward_log_probs_at_every_step():
    for pre_norm in (False, True):
        model = tiny_model(pre_norm=pre_norm)
        src = SRC.repeat(6, 1)  # 18 rows: batched decoding on CPU takes the plain-matmul attention
        tgt = torch.randint(4, 60, (18, 40), generator=torch.Generator().manual_seed(1))
        tgt[:, 0] = 2
        expected = model(src, tgt).log_softmax(-1)
        for use_cache in (True, False):
            state = model.init_state(src, use_cache=use_cache)
            for t in range(tgt.size(1)):  # 40 steps: the cache grows past its first 16 positions
                log_probs, state = model.decode_step(tgt[:, t], state)
                torch.testing.assert_close(log_probs, expected[:, t], atol=1e-5, rtol=0)


def fill(state):
    """Write each row's index into its self-attention cache so moves can be read back."""
    for buffer in state.self_keys + state.self_values:  # position-major: (T, R, H, Dh)
        buffer[: state.step] = torch.arange(buffer.size(1), dtype=buffer.dtype)[None, :, None, None]


def history(buffer, step):
    """Per row, what the first `step` positions of a filled self-attention buffer hold."""
    return buffer[:step, :, 0, 0].T.tolist()


def test_reorder_moves_self_attention_rows_only():
    model = tiny_model()
    state = model.init_state(SRC, beam_size=2)
    state.step = 3
    fill(state)
    cross_before = [k.clone() for k in state.cross_keys]
    state.reorder(torch.tensor([1, 1, 2, 3, 5, 4]))
    for buffer in state.self_keys + state.self_values:
        assert history(buffer, 3) == [[r] * 3 for r in (1, 1, 2, 3, 5, 4)]
    assert all(torch.equal(a, b) for a, b in zip(cross_before, state.cross_keys, strict=True))


def test_select_drops_every_row_of_finished_sentences():
    model = tiny_model()
    state = model.init_state(SRC, beam_size=2)
    state.step = 2
    fill(state)
    cross_before = [k.clone() for k in state.cross_keys]
    mask_before = state.cross_mask.clone()
    state.select(torch.tensor([0, 2]))
    assert state.n_sentences == 2
    for buffer in state.self_keys:
        assert buffer.size(1) == 4
        assert history(buffer, 2) == [[r] * 2 for r in (0, 1, 4, 5)]
    for before, after in zip(cross_before, state.cross_keys, strict=True):
        assert torch.equal(after, before[[0, 2]])
    assert torch.equal(state.cross_mask, mask_before[[0, 2]])


def test_select_with_a_reorder_equals_reorder_then_select():
    model = tiny_model()
    together, apart = model.init_state(SRC, beam_size=2), model.init_state(SRC, beam_size=2)
    for state in (together, apart):
        state.step = 2
        fill(state)
    reordered, sentences = torch.tensor([1, 1, 2, 3, 5, 4]), torch.tensor([0, 2])
    together.select(sentences, reordered)
    apart.reorder(reordered).select(sentences)
    for mine, theirs in zip(together.self_keys, apart.self_keys, strict=True):
        assert torch.equal(mine[:2], theirs[:2])
    for mine, theirs in zip(together.cross_keys, apart.cross_keys, strict=True):
        assert torch.equal(mine, theirs)
    assert history(together.self_keys[0], 2) == [[r] * 2 for r in (1, 1, 5, 4)]


def tokens(results):
    return [[h.tokens for h in hypotheses] for hypotheses in results]


def test_cached_and_uncached_searches_agree():
    model = tiny_model(seed=3)
    for beam in (1, 4):
        cached = search(model, SRC, SearchOptions(beam_size=beam, nbest=beam))
        uncached = search(model, SRC, SearchOptions(beam_size=beam, nbest=beam, use_cache=False))
        assert tokens(cached) == tokens(uncached)


def test_batch_gives_the_same_tokens_as_each_sentence_alone():
    model = tiny_model(seed=4)
    for beam in (1, 3):
        options = SearchOptions(beam_size=beam, nbest=beam)
        batched = tokens(search(model, SRC, options))
        for row in range(SRC.size(0)):
            alone = SRC[row : row + 1, : int((SRC[row] != 0).sum())]
            assert tokens(search(model, alone, options)) == [batched[row]]


def test_greedy_equals_beam_of_one():
    model = tiny_model(seed=5)
    for lenpen in (0.0, 1.0):
        greedy = search(model, SRC, SearchOptions(beam_size=1, lenpen=lenpen))
        from nmt.decoding.search import beam_search

        assert beam_search(model, SRC, SearchOptions(beam_size=1, lenpen=lenpen)) == greedy


def test_bf16_decoding_stays_close_to_fp32_and_fp16_needs_cuda():
    from nmt.errors import UsageError

    model = tiny_model(seed=6)
    tgt = torch.tensor([[2, 10, 11, 12], [2, 13, 14, 15], [2, 16, 17, 18]])
    expected = model(SRC, tgt).log_softmax(-1)
    cast(model, "bf16")
    state = model.init_state(SRC)
    # on a CPU the decoder's caches are float32 (attention over them is faster there)
    caches = state.self_keys + state.self_values + state.cross_keys + state.cross_values
    assert {buffer.dtype for buffer in caches} == {torch.float32}
    for t in range(tgt.size(1)):
        log_probs, state = model.decode_step(tgt[:, t], state)
        assert log_probs.dtype == torch.float32
        torch.testing.assert_close(log_probs, expected[:, t], atol=0.1, rtol=0)
    with pytest.raises(UsageError, match="CUDA"):
        cast(tiny_model(), "fp16")


def test_int8_quantizes_every_linear_layer_and_stays_close_to_fp32():
    pytest.importorskip("torchao")  # an optional extra (in dev, so CI runs this test)
    model = tiny_model(seed=7)
    tgt = torch.tensor([[2, 10, 11, 12], [2, 13, 14, 15], [2, 16, 17, 18]])
    expected = model(SRC, tgt).log_softmax(-1)
    cast(model, "int8")
    weights = {name: type(module.weight) for name, module in model.named_modules()
               if isinstance(module, torch.nn.Linear)}
    assert len(weights) == 2 * 5 + 2 * 8 + 1  # encoder and decoder layers, and the output projection
    assert all(kind not in (torch.nn.Parameter, torch.Tensor) for kind in weights.values())  # quantized
    state = model.init_state(SRC)
    for t in range(tgt.size(1)):
        log_probs, state = model.decode_step(tgt[:, t], state)
        torch.testing.assert_close(log_probs, expected[:, t], atol=0.2, rtol=0)


def assert_rounded_to_the_nearest_step(layer, linear):
    """An int8 layer's values times its per-channel scales are `linear`'s weights, rounded to a step each."""
    scale = layer.scale.float()[:, None]
    error = (layer.quantized.float() * scale - linear.weight).abs()
    assert bool((error <= scale / 2 + 1e-6).all())


def test_int8_weight_only_layer_matches_its_float_weights_on_both_kernels():
    from nmt.model.quantize import INT8_KERNEL_MAX_ROWS, Int8Linear

    torch.manual_seed(8)
    linear = torch.nn.Linear(64, 48)
    layer = Int8Linear(linear.weight, linear.bias)
    assert_rounded_to_the_nearest_step(layer, linear)
    x = torch.randn(INT8_KERNEL_MAX_ROWS + 8, 64)
    few = layer(x[:4].bfloat16())  # int8 kernel
    many = layer(x.bfloat16())  # bf16 matmul on the dequantized weights
    torch.testing.assert_close(few.float(), many[:4].float(), atol=0.05, rtol=0.02)
    torch.testing.assert_close(many.float(), linear(x).detach(), atol=0.1, rtol=0.05)


@pytest.mark.parametrize("relu", [False, True])
def test_bf16_linear_function_computes_f_linear_at_every_row_count(relu):
    """On a CPU with bf16 arithmetic, oneDNN's matmul on packed weights with the rows padded to a multiple
    of ROW_STEP; elsewhere F.linear itself: either way F.linear's values, for row counts on and off the
    steps, with the ReLU fused where asked for."""
    from nmt.model.quantize import ROW_STEP, bf16_linear_function

    torch.manual_seed(9)
    weight, bias = torch.randn(40, 24).bfloat16(), torch.randn(40).bfloat16()
    linear = bf16_linear_function(weight, bias, relu=relu)
    for rows in (1, ROW_STEP - 1, ROW_STEP, ROW_STEP + 1, 3 * ROW_STEP + 5, 4 * ROW_STEP):
        x = torch.randn(rows, 24).bfloat16()
        expected = F.linear(x, weight, bias)
        expected = F.relu(expected) if relu else expected
        out = linear(x)
        assert out.shape == (rows, 40) and out.dtype == torch.bfloat16
        torch.testing.assert_close(out.float(), expected.float(), atol=0.02, rtol=0.01)


def test_int8_weight_only_function_fuses_relu_and_selects_outputs_on_both_kernels():
    from nmt.model.quantize import INT8_KERNEL_MAX_ROWS, Int8Linear

    torch.manual_seed(10)
    linear = torch.nn.Linear(32, 48)
    layer = Int8Linear(linear.weight, linear.bias)
    outputs = torch.tensor([3, 0, 47, 20])
    for rows in (2, INT8_KERNEL_MAX_ROWS + 3):  # the int8 kernel, then the bf16 GEMM
        x = torch.randn(rows, 32).bfloat16()
        full = layer(x).float()
        torch.testing.assert_close(layer.function(relu=True)(x).float(), F.relu(full), atol=0.02, rtol=0.01)
        torch.testing.assert_close(layer.function(outputs)(x).float(), full[:, outputs], atol=0.02, rtol=0.01)


@pytest.mark.parametrize("precision, layer_type", [("int8_bf16", "Int8Linear"), ("int8_fp32", "DynamicInt8Linear")])
def test_int8_weights_quantize_every_linear_layer_and_stay_close_to_fp32(precision, layer_type):
    from nmt.model import quantize

    model = tiny_model(seed=9)
    tgt = torch.tensor([[2, 10, 11, 12], [2, 13, 14, 15], [2, 16, 17, 18]])
    expected = model(SRC, tgt).log_softmax(-1)
    cast(model, precision)
    assert not any(isinstance(module, torch.nn.Linear) for module in model.modules())
    assert sum(isinstance(module, getattr(quantize, layer_type)) for module in model.modules()) == 2 * 5 + 2 * 8 + 1
    state = model.init_state(SRC)
    for t in range(tgt.size(1)):
        log_probs, state = model.decode_step(tgt[:, t], state)
        assert log_probs.dtype == torch.float32
        torch.testing.assert_close(log_probs, expected[:, t], atol=0.2, rtol=0)


def test_int8_fp32_rows_give_each_row_what_it_would_get_alone(monkeypatch):
    """With VNNI: each row quantized on its own scale, exact int32 products (the one-row kernel at batch 1,
    torch._int_mm above): a row's output is bit for bit the same alone and in any batch, and torch's
    operations (no C kernels) compute it as the kernels do."""
    from nmt.model import native
    from nmt.model.backend import machine
    from nmt.model.quantize import DynamicInt8Linear

    if not (machine().vnni and machine().int_mm):
        pytest.skip("no VNNI: int8_fp32 takes 7-bit rows here")
    torch.manual_seed(8)
    for inputs, outputs in ((256, 512), (1024, 256), (256, 1000)):  # 1000: not a multiple of 16 channels
        linear = torch.nn.Linear(inputs, outputs)
        layer = DynamicInt8Linear(linear.weight, linear.bias, rows=8, kernels=native.library() is not None)
        assert_rounded_to_the_nearest_step(layer, linear)
        x = torch.randn(40, inputs) * torch.linspace(0.1, 10, 40)[:, None]  # rows of very different scales
        many = layer(x)
        for row in (0, 17, 39):
            assert torch.equal(layer(x[row : row + 1]), many[row : row + 1])
            assert torch.equal(layer(x[row : row + 5]), many[row : row + 5])
        torch.testing.assert_close(many, linear(x).detach(), atol=0.05 * 10, rtol=0.03)
        channels = torch.tensor([0, 7, 100, outputs - 1])  # a shortlist's output channels
        assert torch.equal(layer.function(channels)(x), many[:, channels])
        assert torch.equal(layer.function(channels)(x[:1]), many[:1, channels])
        relu = layer.function(relu=True)
        assert torch.equal(relu(x), many.relu())
        torch_alone = DynamicInt8Linear(linear.weight, linear.bias, rows=8, kernels=False)
        torch.testing.assert_close(torch_alone(x), many, atol=1e-4, rtol=1e-5)  # an FMA apart, at most


def test_int8_fp32_without_vnni_gives_each_row_what_it_would_get_alone(monkeypatch):
    """Without VNNI (AVX2): 7-bit rows on their own scales, exact products from the C kernel (any number of
    rows): a row's output is bit for bit the same alone and in any batch, what torch computes from the same
    integers (within an FMA), and close to the float layer's."""
    from nmt.model import native
    from nmt.model.quantize import DynamicInt8Linear

    if native.library() is None or not native.products_built(native.library(), 7):
        pytest.skip("no AVX2 kernels")
    torch.manual_seed(8)
    for inputs, outputs in ((256, 512), (1024, 256), (256, 1000)):
        linear = torch.nn.Linear(inputs, outputs)
        layer = DynamicInt8Linear(linear.weight, linear.bias, rows=7, kernels=True)
        assert layer.rows == 7 and layer.kernel is not None
        x = torch.randn(40, inputs) * torch.linspace(0.1, 10, 40)[:, None]  # rows of very different scales
        many = layer(x)
        torch_alone = DynamicInt8Linear(linear.weight, linear.bias, rows=7, kernels=False)
        torch.testing.assert_close(torch_alone(x), many, atol=1e-4, rtol=1e-5)  # the same integers, an FMA apart
        for row in (0, 17, 35):
            assert torch.equal(layer(x[row : row + 1]), many[row : row + 1])
            assert torch.equal(layer(x[row : row + 5]), many[row : row + 5])
            assert torch.equal(layer(x[row : row + 12]), many[row : row + 12])  # 8 rows, then 4
        row_scale = x.abs().amax(dim=1, keepdim=True).clamp(min=1e-30) / 63
        sums = x.div(row_scale).round().int() @ layer.quantized.int().t()  # exact
        expected = sums.float().mul(row_scale).mul(layer.column_scale).add(layer.bias)
        torch.testing.assert_close(many, expected, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(many, linear(x).detach(), atol=0.05 * 10, rtol=0.05)
        channels = torch.tensor([0, 7, 100, outputs - 1])
        assert torch.equal(layer.function(channels)(x), many[:, channels])
        assert torch.equal(layer.function(channels)(x[:1]), many[:1, channels])
        assert torch.equal(layer.function(relu=True)(x), many.relu())


def test_int8_fp32_translates_a_sentence_alike_alone_and_in_a_batch():
    from nmt.model.flat_decoder import FlatDecoder

    model, backend = cast(tiny_model(seed=4), "int8_fp32")
    decoder = FlatDecoder(model, backend)
    generator = torch.Generator().manual_seed(3)
    lengths = torch.randint(2, 12, (48,), generator=generator).tolist()  # 48 sentences x beam 4: large products
    src = torch.zeros(len(lengths), max(lengths) + 1, dtype=torch.long)
    for row, length in enumerate(lengths):
        src[row, :length] = torch.randint(4, 60, (length,), generator=generator)
        src[row, length] = 3  # EOS, then padding
    options = SearchOptions(beam_size=4)
    batched = search(decoder, src, options)
    for row, length in enumerate(lengths):
        assert search(decoder, src[row : row + 1, : length + 1], options) == [batched[row]]  # tokens and scores


def test_bf16_on_a_cpu_without_bf16_arithmetic_warns_and_names_the_fast_mode(monkeypatch, caplog):
    from nmt.model import backend

    without_bf16 = dataclasses.replace(backend.machine(), onednn_bf16=False)
    monkeypatch.setattr(backend, "machine", lambda: without_bf16)
    caplog.set_level(logging.WARNING, logger="nmt")  # a CLI run in this process may have left it at ERROR (-q)
    backend.Backend.resolve("bf16", torch.device("cpu"))
    assert "emulated" in caplog.text and "int8_fp32" in caplog.text
    caplog.clear()
    backend.Backend.resolve("int8_fp32", torch.device("cpu"))
    assert caplog.text == ""


@pytest.mark.parametrize("flags, native_bf16, expected", [
    ({"avx2", "avx512_bf16", "amx_bf16"}, True, "bf16"), ({"avx2", "avx512_bf16"}, True, "DynamicInt8Linear"),
    ({"avx2"}, False, "DynamicInt8Linear"), (set(), True, "bf16"), (set(), False, "DynamicInt8Linear")])
def test_auto_precision_picks_the_fastest_batch_independent_mode_for_the_cpu_kind(monkeypatch, flags, native_bf16,
                                                                                  expected):
    """Never int8_bf16, whose translations changed with their batch on an Intel Xeon with AMX (issue 65)."""
    from nmt.model import backend, quantize

    kind = backend.Machine(flags=frozenset(flags), onednn_bf16=native_bf16, int_mm=True)
    monkeypatch.setattr(backend, "machine", lambda: kind)
    model, _ = cast(tiny_model(seed=1), "auto")
    if expected == "bf16":
        assert not any(isinstance(module, quantize.Int8Linear) for module in model.modules())
        assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    else:
        assert sum(isinstance(module, getattr(quantize, expected)) for module in model.modules()) == 2 * 5 + 2 * 8 + 1
    assert backend.auto_precision(torch.device("cuda"), kernels=False) == "fp16"
    # without the C kernels, int8_fp32 only where VNNI computes torch's int8 products fast (none of these has it)
    assert backend.auto_precision(torch.device("cpu"), kernels=False) == ("bf16" if native_bf16 else "fp32")
    with_vnni = dataclasses.replace(kind, flags=kind.flags | {"avx512_vnni"})
    monkeypatch.setattr(backend, "machine", lambda: with_vnni)
    named = "bf16" if "amx_bf16" in flags else "int8_fp32" if flags else None
    assert backend.auto_precision(torch.device("cpu"), kernels=False) == (named or ("bf16" if native_bf16
                                                                                     else "int8_fp32"))


def test_cpu_flags_are_read_from_proc_cpuinfo_on_linux():
    from nmt.model.machine import cpu_flags

    if not Path("/proc/cpuinfo").exists():
        pytest.skip("no /proc/cpuinfo on this system")
    assert cpu_flags() and all(flag == flag.strip() for flag in cpu_flags())


def test_decoding_is_fast_by_default_and_exact_on_request():
    from nmt.decoding.configuration import decoding_mode
    from nmt.errors import UsageError

    assert decoding_mode(None, None) == ("auto", None)  # the shortlist: decided by shortlist_pays
    assert decoding_mode("bf16", True) == ("bf16", True)
    assert decoding_mode(None, None, exact=True) == decoding_mode("fp32", False, exact=True) == ("fp32", False)
    for precision, shortlist in (("int8_fp32", None), (None, True)):
        with pytest.raises(UsageError, match="--exact"):
            decoding_mode(precision, shortlist, exact=True)


def test_the_shortlist_is_on_by_default_for_beam_search_in_reduced_precision(tiny_checkpoint, tmp_path):
    import dataclasses

    from nmt.decoding.configuration import DecodingConfig, DecodingFlags
    from nmt.model.checkpoint import load_checkpoint
    from nmt.model.native import library
    from nmt.model.shortlist import Shortlist

    checkpoint = load_checkpoint(tiny_checkpoint)  # stores beam 2
    vocab = checkpoint.config.vocab_size
    listed = dataclasses.replace(checkpoint, shortlist=Shortlist(torch.zeros(vocab, 2, dtype=torch.long),
                                                                 torch.arange(4, 9)))

    def shortlist(chosen, **flags) -> bool:
        return DecodingConfig.resolve(DecodingFlags(device="cpu", **flags), chosen, workers=1).shortlist

    assert not shortlist(checkpoint) and not shortlist(checkpoint, precision="int8_fp32")  # none to use
    assert shortlist(listed, precision="int8_fp32") == (library() is not None)  # the C kernels score the lists
    assert not shortlist(listed, precision="int8_fp32", beam=1)  # greedy: slower over per-sentence lists
    assert not shortlist(listed, precision="fp32") and not shortlist(listed, exact=True)
    assert not shortlist(listed, precision="int8_fp32", shortlist=False)  # --no-shortlist
    assert shortlist(listed, precision="fp32", beam=1, shortlist=True)  # --shortlist, wherever asked
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("cat\tchat\n")
    assert not shortlist(listed, precision="int8_fp32", glossary=glossary)
    assert not DecodingConfig.resolve(DecodingFlags(device="cpu", precision="int8_fp32"), listed, workers=1,
                                      ensemble=True).shortlist


def test_the_decoding_configuration_is_flags_over_the_models_defaults_over_the_librarys(tiny_checkpoint):
    from nmt.decoding.configuration import MAX_PIECE_TOKENS, DecodingConfig, DecodingFlags
    from nmt.model.backend import auto_precision
    from nmt.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(tiny_checkpoint)  # stores beam 2 and a 1.0 x source + 5 length cap
    stored = DecodingConfig.resolve(DecodingFlags(), checkpoint, workers=1)
    assert (stored.search.beam_size, stored.search.max_len_a, stored.search.lenpen) == (2, 1.0, 1.0)
    assert stored.precision == auto_precision(torch.device("cpu"), stored.backend.kernels) != "auto"
    assert not stored.shortlist
    assert stored.clause_split is None and f"clause split {MAX_PIECE_TOKENS}" in stored.summary()
    given = DecodingConfig.resolve(DecodingFlags(beam=3, lenpen=0.6, exact=True, clause_split=20, workers=2),
                                   checkpoint, workers=1)
    assert (given.search.beam_size, given.search.max_len_a, given.search.lenpen) == (3, 1.0, 0.6)
    assert (given.precision, given.clause_split, given.workers) == ("fp32", 20, 2)
    assert given.to_dict()["search"]["beam_size"] == 3 and given.to_dict()["device"] == "cpu"


@pytest.mark.parametrize("beam", [1, 3])
def test_exact_decoding_runs_torch_alone_and_finds_what_the_kernels_find(monkeypatch, beam):
    """--exact (SearchOptions.kernels False) is the reference path: the search's top-k and max are torch's,
    never the C kernels (issue 65), and they choose the same hypotheses as the kernels do."""
    from nmt.decoding import search as search_module
    from nmt.decoding.search import SearchOptions, search

    model = tiny_model(vocab_size=2000, seed=3)  # wide enough rows for the top-k kernel
    src = torch.randint(4, 2000, (3, 7))
    asked = []
    for name in ("beam_top_k_kernel", "best_kernel"):
        real = getattr(search_module, name)
        monkeypatch.setattr(search_module, name, lambda real=real, name=name: asked.append(name) or real())
    with torch.inference_mode():
        fast = search(model, src, SearchOptions(beam_size=beam, max_len_a=1.0, max_len_b=3))
    assert asked  # the default path takes a kernel (where the machine builds them)

    def refused(*args, **kwargs):
        raise AssertionError("a C kernel was asked for under --exact")

    monkeypatch.setattr(search_module, "beam_top_k_kernel", refused)
    monkeypatch.setattr(search_module, "best_kernel", refused)
    with torch.inference_mode():
        exact = search(model, src, SearchOptions(beam_size=beam, max_len_a=1.0, max_len_b=3, kernels=False))
    assert [[h.tokens for h in hs] for hs in exact] == [[h.tokens for h in hs] for hs in fast]
