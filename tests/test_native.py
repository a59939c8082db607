"""The C attention kernels (nmt.model.native): the same attention as torch's in float32 over the same bf16 values,
whatever the row count, cached length, beam and source lengths; their build, reuse and opt-out."""

from __future__ import annotations

import ctypes
import os
import re
import shutil

import pytest
import torch
import torch.nn.functional as F

from nmt.model import native, native_ops
from nmt.model.machine import machine

COMPILER = native.c_compiler()
pytestmark = [pytest.mark.skipif(shutil.which(COMPILER) is None, reason=f"no C compiler ({COMPILER})"),
              pytest.mark.skipif(not machine().vector_units, reason="the kernels are for CPUs with AVX-512 or AVX2")]


# What nmt.model.native keeps once loaded: the library and the kernels bound to it
CACHED = (native.library, native_ops.best_kernel, native_ops.beam_top_k_kernel, native_ops.sentence_logits_int7_kernel,
          native_ops.int8_linear_kernel, native_ops.dropout_kernel, native_ops.cross_entropy_kernel)


def forget_the_build() -> None:
    for cached in CACHED:
        cached.cache_clear()


@pytest.fixture(params=["native", "avx2"])
def build(request, monkeypatch):
    """The kernels as `make setup` builds them for this CPU (16-float vectors with AVX-512), and built for
    AVX2 alone (8-float vectors), which every CPU that has AVX-512 also runs; every kernel bound to that build."""
    if request.param == "avx2":
        monkeypatch.setattr(native, "FLAG_SETS", native.FLAG_SETS[1:])
    forget_the_build()
    yield request.param
    forget_the_build()


@pytest.fixture
def cross_kernel(build):
    found = native_ops.cross_attention_kernel()
    assert found is not None, "a C compiler and AVX-512 or AVX2 are present, so the kernels must build"
    return found


@pytest.fixture
def kernel(build):
    found = native_ops.self_attention_kernel()
    assert found is not None, "a C compiler and AVX-512 or AVX2 are present, so the kernels must build"
    return found


def reference(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(Dh)) v per row in float32: q (N, Dh), keys/values (T, N, Dh)."""
    q, keys, values = q.float(), keys.float(), values.float()
    scores = torch.einsum("nd,tnd->nt", q, keys) / q.size(1) ** 0.5
    return torch.einsum("nt,tnd->nd", scores.softmax(dim=1), values)


@pytest.mark.parametrize("length, rows, head_dim", [(1, 4, 16), (7, 20, 16), (33, 512, 64), (130, 37, 32)])
def test_kernel_equals_attention_in_float32(kernel, length, rows, head_dim):
    generator = torch.Generator().manual_seed(length)
    q, keys, values = (torch.randn(*shape, generator=generator).mul(2).bfloat16()
                       for shape in [(rows, head_dim), (length, rows, head_dim), (length, rows, head_dim)])
    out = kernel(q, keys, values)
    assert out.dtype == torch.bfloat16 and out.shape == (rows, head_dim)
    # the one rounding to bf16 at the end: within half a bf16 step of the float32 result
    torch.testing.assert_close(out.float(), reference(q, keys, values), rtol=8e-3, atol=1e-3)


@pytest.mark.parametrize("sentences, beam, heads, positions, head_dim", [(1, 1, 2, 5, 16), (3, 4, 4, 21, 64),
                                                                        (7, 5, 2, 40, 32)])
def test_cross_kernel_equals_masked_attention_in_float32(cross_kernel, sentences, beam, heads, positions, head_dim):
    generator = torch.Generator().manual_seed(positions)
    q = torch.randn(sentences, beam, heads, head_dim, generator=generator).mul(2).bfloat16()
    keys, values = (torch.randn(sentences, heads, positions, head_dim, generator=generator).mul(2).bfloat16()
                    for _ in range(2))
    lengths = torch.randint(1, positions + 1, (sentences,), generator=generator)
    lengths[0] = positions  # one source fills the batch's length
    out = cross_kernel(q, keys, values, lengths)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape
    scores = torch.einsum("nkhd,nhsd->nhks", q.float(), keys.float()) / head_dim**0.5
    padding = torch.arange(positions) >= lengths[:, None]  # (N, S)
    weights = scores.masked_fill(padding[:, None, None, :], float("-inf")).softmax(dim=-1)
    expected = torch.einsum("nhks,nhsd->nkhd", weights, values.float())
    torch.testing.assert_close(out.float(), expected, rtol=8e-3, atol=1e-3)


@pytest.mark.parametrize("width", [1, 17, 3008])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_log_softmax_kernel_equals_torch(build, width, dtype):
    log_softmax = native_ops.log_softmax_kernel()
    assert log_softmax is not None
    logits = torch.randn(5, width, generator=torch.Generator().manual_seed(width)).mul(4).to(dtype)
    logits[0, -1] = -float("inf")  # a forbidden token stays forbidden (row 0 of width 1: NaN, as torch)
    out = log_softmax(logits)
    expected = torch.log_softmax(logits, dim=-1, dtype=torch.float32)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5, equal_nan=True)
    with pytest.raises(ValueError):
        log_softmax(logits[None])  # (1, R, V): two dimensions only


@pytest.mark.parametrize("beam, counts, dim", [(1, [3], 16), (4, [17, 0, 40], 64), (5, [1, 9], 32), (9, [8, 8], 16)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("with_ids", [True, False])
def test_sentence_logits_kernel_puts_each_sentences_own_logits_after_the_shared(build, beam, counts, dim, dtype,
                                                                              with_bias, with_ids):
    bind = native_ops.sentence_logits_kernel()
    assert bind is not None
    generator = torch.Generator().manual_seed(beam)
    pieces, shared, width = sum(counts) + 3, 21, 21 + max(counts) + 7
    rows_of_weights = 3 * pieces if with_ids else pieces  # with ids: a vocabulary, each sentence's rows by id
    weights = torch.randn(rows_of_weights, dim, generator=generator).bfloat16()
    bias = torch.randn(rows_of_weights, generator=generator) if with_bias else None
    ids = torch.randperm(rows_of_weights, generator=generator)[:pieces] if with_ids else torch.arange(pieces)
    counts = torch.tensor(counts)
    starts = torch.cumsum(counts, 0) - counts + 2  # the first 2 entries belong to no sentence
    sentence_logits = bind(weights, bias, starts, counts, ids if with_ids else None)
    for sentences in (torch.arange(len(counts)), torch.arange(len(counts)).flip(0)[:2]):  # as open sentences go
        rows = torch.randn(len(sentences) * beam, dim, generator=generator).to(dtype)  # a sentence's beams together
        shared_logits = torch.randn(rows.size(0), shared, generator=generator).to(dtype)
        out = sentence_logits(rows, shared_logits, sentences, width)
        assert out.shape == (rows.size(0), width) and out.dtype == torch.float32
        assert torch.equal(out[:, :shared], shared_logits.float())
        for s, n in enumerate(sentences.tolist()):
            start, count = int(starts[n]), int(counts[n])
            own_ids = ids[start : start + count]
            expected = rows[s * beam : (s + 1) * beam].float() @ weights[own_ids].float().T
            expected += 0 if bias is None else bias[own_ids]
            own = out[s * beam : (s + 1) * beam, shared:]
            torch.testing.assert_close(own[:, :count], expected, rtol=1e-5, atol=1e-4)
            assert (own[:, count:] == -float("inf")).all()  # past the sentence's own tokens: never chosen


def test_sentence_logits_kernel_refuses_what_would_read_outside_its_tensors(build):
    bind = native_ops.sentence_logits_kernel()
    weights, starts, counts = torch.randn(10, 16).bfloat16(), torch.tensor([0, 4]), torch.tensor([4, 6])
    for bad in [(weights.float(), None, starts, counts), (weights, None, starts.int(), counts.int()),
                (weights, torch.zeros(3), starts, counts),  # not a bias per piece
                (weights, None, starts, counts, torch.tensor([0, 1, 10])),  # an id past the weights
                (weights, None, starts, counts, torch.tensor([-1, 1, 2]))]:
        with pytest.raises(ValueError):
            bind(*bad)
    rows, shared, sentences = torch.randn(4, 16), torch.randn(4, 10), torch.tensor([0, 1])
    sentence_logits = bind(weights, None, starts, counts)
    assert sentence_logits(rows, shared, sentences, 16).shape == (4, 16)  # 6 pieces at most after the 10 shared
    for bad in [(rows, shared, sentences, 15),  # no room for 6 pieces
                (rows, shared, torch.tensor([0, 2]), 16),  # no sentence 2
                (rows, shared, torch.tensor([-1, 0]), 16),
                (rows, shared.bfloat16(), sentences, 16),
                (rows[:3], shared[:3], sentences, 16)]:  # not whole beams
        with pytest.raises(ValueError):
            sentence_logits(*bad)
    beyond = bind(weights, None, starts, torch.tensor([4, 7]))  # sentence 1's tokens run past the weights
    assert beyond(rows[:2], shared[:2], torch.tensor([0]), 16).shape == (2, 16)  # sentence 0 alone is fine
    with pytest.raises(ValueError):
        beyond(rows, shared, sentences, 20)
    by_id = bind(weights, None, starts, counts, torch.arange(9))  # sentence 1's entries run past the 9 ids
    with pytest.raises(ValueError):
        by_id(rows, shared, sentences, 20)


def test_kernel_softmax_takes_the_one_matching_key_when_scores_are_far_apart(kernel):
    rows, length, head_dim = 18, 9, 16
    q = torch.randn(rows, head_dim).bfloat16()
    keys = torch.randn(length, rows, head_dim).bfloat16()
    keys[4] = (q.float() * 40).bfloat16()  # scores hundreds apart: the others' weights underflow to 0
    values = torch.randn(length, rows, head_dim).bfloat16()
    assert torch.equal(kernel(q, keys, values), values[4])


def test_kernels_take_float32_queries_and_return_float32(kernel, cross_kernel):
    q = torch.randn(24, 32)  # int8_fp32's float32 activations over bf16 caches
    keys, values = torch.randn(11, 24, 32).bfloat16(), torch.randn(11, 24, 32).bfloat16()
    out = kernel(q, keys, values)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, reference(q, keys, values), rtol=1e-4, atol=1e-5)  # no rounding to bf16
    cross_q = q.view(3, 4, 2, 32)  # 3 sentences, 4 beams, 2 heads
    cross_keys, cross_values = torch.randn(3, 2, 11, 32).bfloat16(), torch.randn(3, 2, 11, 32).bfloat16()
    lengths = torch.tensor([11, 11, 11])
    expected = torch.einsum("nkhd,nhsd->nhks", cross_q, cross_keys.float()).div(32**0.5).softmax(dim=-1)
    expected = torch.einsum("nhks,nhsd->nkhd", expected, cross_values.float())
    torch.testing.assert_close(cross_kernel(cross_q, cross_keys, cross_values, lengths), expected, rtol=1e-4,
                               atol=1e-5)


def test_kernel_refuses_other_dtypes_and_strides(kernel):
    q, keys = torch.randn(4, 16).bfloat16(), torch.randn(3, 4, 16).bfloat16()
    with pytest.raises(ValueError):
        kernel(q, keys.float(), keys.float())  # the caches are bf16
    with pytest.raises(ValueError):
        kernel(q.half(), keys, keys)
    with pytest.raises(ValueError):
        kernel(q, keys.transpose(0, 1), keys)
    with pytest.raises(ValueError):  # shapes that would read past the tensors
        kernel(q, keys[:, :2], keys[:, :2])
    with pytest.raises(ValueError):
        kernel(torch.randn(4, 8).bfloat16(), torch.randn(3, 4, 8).bfloat16(), torch.randn(3, 4, 8).bfloat16())


def test_library_is_built_once_per_cpu_into_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = native.compile_library()
    assert built is not None and built.parent == tmp_path / "nmt" and built.is_file()
    modified = built.stat().st_mtime_ns
    assert native.compile_library() == built and built.stat().st_mtime_ns == modified  # reused, not rebuilt


def test_the_cache_folder_is_private_and_a_changed_library_is_rebuilt_not_loaded(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "nmt").mkdir(mode=0o777)
    (tmp_path / "nmt").chmod(0o777)  # as another program may have left it
    built = native.compile_library()
    assert (tmp_path / "nmt").stat().st_mode & 0o777 == 0o700
    assert built.stat().st_mode & 0o077 == 0 and native.trusted(built)
    good = built.read_bytes()
    built.write_bytes(good + b"planted code")  # changed after the build: its checksum no longer matches
    assert not native.trusted(built)
    assert native.compile_library() == built and built.read_bytes() == good and native.trusted(built)
    built.chmod(0o777)  # writable by anyone: whatever it holds, not trusted
    assert not native.trusted(built)


def test_a_cache_folder_of_another_user_is_not_used(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(os, "getuid", lambda: 12345)
    assert native.compile_library() is None
    assert not list((tmp_path / "nmt").iterdir())


def test_no_kernels_without_avx2_or_avx512(monkeypatch):
    from nmt.model.machine import Machine

    def with_flags(flags: str) -> Machine:
        return Machine(flags=frozenset(flags.split()), onednn_bf16=False, int_mm=True)

    assert with_flags("fpu sse2 avx avx2 fma").vector_units  # a Zen 1 EPYC's kind of flags
    assert not with_flags("fpu sse2 avx f16c").vector_units
    assert not with_flags("fp asimd").vector_units  # an Arm CPU's
    monkeypatch.setattr(native, "machine", lambda: with_flags("fpu sse2 avx f16c"))
    native.library.cache_clear()
    try:
        assert native.library() is None and native_ops.self_attention_kernel() is None
    finally:
        native.library.cache_clear()


def test_nmt_native_0_turns_the_kernel_off(monkeypatch):
    monkeypatch.setenv("NMT_NATIVE", "0")
    native.library.cache_clear()
    try:
        assert native_ops.self_attention_kernel() is None
    finally:
        native.library.cache_clear()


def test_kernels_report_scratch_memory_they_cannot_allocate(build):
    loaded = native.library()
    assert loaded is not None
    # 2^60 cached positions: more scratch than any address space holds; the kernel must give up before
    # touching its (null) tensors
    assert loaded.decode_self_attention(None, None, None, None, 2**30, 2**30, 64, 1.0, 1) == 1
    assert loaded.decode_cross_attention(None, None, None, None, None, 1, 2**30, 4, 2**30, 64, 1.0, 1) == 1
    sentences = torch.zeros(2**20, dtype=torch.long)  # 2^20 sentences of 2^30 rows, all sentence 0
    starts, counts = torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long)
    assert loaded.decode_sentence_logits(None, None, None, None, 0, None, starts.data_ptr(), counts.data_ptr(), 1,
                                         sentences.data_ptr(), None, 2**20, 2**30, 64, 0, 1, 1) == 1


def test_int7_sentence_logits_kernel_gives_each_own_token_its_exact_int8_logit(build):
    """Each row quantized to 7 bits on its own scale, times each own token's int8 weights (stored + 128),
    exact int32 sums scaled back by the row's and the token's scales, plus bias: as torch computes it."""
    bind = native_ops.sentence_logits_int7_kernel()
    if bind is None:
        pytest.skip("no AVX2 build of the kernels")
    generator = torch.Generator().manual_seed(4)
    vocab, dim, beam, shared, width = 50, 64, 3, 5, 5 + 9
    quantized = torch.randint(-127, 128, (vocab, dim), dtype=torch.int8, generator=generator)
    scales, bias = torch.rand(vocab, generator=generator), torch.randn(vocab, generator=generator)
    ids, starts, counts = torch.tensor([7, 3, 41, 8, 0, 49, 20]), torch.tensor([0, 3]), torch.tensor([3, 4])
    logits = bind((quantized.short() + 128).to(torch.uint8), scales, bias, starts, counts, ids)
    rows = torch.randn(2 * beam, dim, generator=generator) * torch.linspace(0.1, 5, 2 * beam)[:, None]
    shared_logits = torch.randn(2 * beam, shared, generator=generator)
    out = logits(rows, shared_logits, torch.tensor([0, 1]), width)
    assert torch.equal(out[:, :shared], shared_logits)
    row_scales = rows.abs().amax(dim=1, keepdim=True).clamp(min=1e-30) / 63  # as the kernel quantizes
    q = rows.div(row_scales).round()  # the integers, as floats
    for s in range(2):
        own = ids[starts[s] : starts[s] + counts[s]]
        sums = q[s * beam : (s + 1) * beam].int() @ quantized[own].int().T  # exact
        expected = sums.float() * row_scales[s * beam : (s + 1) * beam] * scales[own] + bias[own]
        torch.testing.assert_close(out[s * beam : (s + 1) * beam, shared : shared + len(own)], expected,
                                   rtol=1e-6, atol=1e-5)
        assert (out[s * beam : (s + 1) * beam, shared + len(own) :] == -float("inf")).all()
    with pytest.raises(ValueError):
        logits(rows, shared_logits, torch.tensor([0, 2]), width)  # no sentence 2


@pytest.mark.parametrize("width", [1, 7, 72, 257])
def test_layer_norm_kernel_is_as_exact_as_float32_allows_row_by_row(build, width):
    """decode_layer_norm (the norm of decode_layers and encode_layers) against layer_norm in float64 and
    torch's float32 one, on adversarial rows: large means with small spreads (where a float32 mean is off by
    spread-sized amounts), spreads from 1e-3 to 1e4, a constant row, widths that are no whole number of
    vectors (AVX-512's 16 and AVX2's 8); a row's result is the same alone and among others."""
    bind = native_ops.layer_norm_kernel()
    assert bind is not None
    torch.manual_seed(5)
    norm = torch.nn.LayerNorm(width)
    torch.nn.init.normal_(norm.weight)
    torch.nn.init.normal_(norm.bias)
    spreads = torch.tensor([1e-3, 1e-2, 1.0, 100.0, 1e4, 1e-2, 1e-3, 0.0])[:, None]
    means = torch.tensor([-3.0, 300.0, 0.0, -5.0, 1e3, -1e3, 50.0, 7.0])[:, None]
    x = torch.randn(8, width) * spreads + means
    out = bind(norm)(x)
    exact = torch.nn.functional.layer_norm(x.double(), (width,), norm.weight.double(), norm.bias.double(), norm.eps)
    ours, torchs = (out.double() - exact).abs(), (norm(x).detach().double() - exact).abs()
    assert ours.max() < 5e-6, ours.max(dim=1).values
    assert (ours <= torchs + 2e-6).all()  # never further from the exact norm than torch's own, but for rounding
    for row in (0, 4, 7):
        assert torch.equal(bind(norm)(x[row : row + 1]), out[row : row + 1])


def test_layers_kernels_refuse_sizes_no_scratch_memory_holds(build):
    loaded = native.library()
    assert loaded is not None
    # 2^40 rows: the kernels must give up before touching their (null) tensors
    assert loaded.encode_layers(None, None, 1, 2**20, 2**20, 4, 64, 1024, 1.0, 1e-5, 0, 7) == 2
    assert loaded.decode_layers(None, None, 1, None, 0, None, None, 2**20, 2**20, 4, 64, 1024, 16, 1.0, 1e-5, 0,
                                7) == 2


@pytest.mark.parametrize("width", [1, 7, 8, 16, 1000, 16003])
def test_best_kernel_equals_torch_max(build, width):
    """decode_best (greedy search's choice on a CPU) as torch.max(dim=-1): values and indices, the first of
    equal values, a row's first NaN, rows of -inf, widths not a whole number of vectors."""
    best = native_ops.best_kernel.__wrapped__()  # this build's library, not the cached function's
    assert best is not None
    generator = torch.Generator().manual_seed(width)
    rows = torch.randn(6, width, generator=generator).log_softmax(dim=-1)
    rows[1, -1] = rows[1].max() + 1  # the last column
    rows[2, width // 2] = rows[2].max()  # a tie: the first of the two
    rows[3] = -float("inf")
    rows[4, width // 3] = float("nan")
    rows[4, -1] = float("nan")
    for got, expected in zip(best(rows), rows.max(dim=-1), strict=True):
        assert torch.equal(got, expected) or torch.allclose(got, expected, equal_nan=True)
    _, indices = best(rows)
    assert torch.equal(indices, rows.max(dim=-1).indices)


def test_log_softmax_rest_kernel_equals_the_shortlist_normalization_in_torch(build):
    """decode_log_softmax_rest against nmt.model.flat_decoder's less_the_rest over log_softmax: each row's
    list normalized, less the estimated mass of what the list leaves out (the sampled logits plus their
    sentence's rest bias, -inf where a sampled id is in the list); an owner outside rest_bias is refused."""
    kernel = native_ops.log_softmax_rest_kernel()
    assert kernel is not None
    generator = torch.Generator().manual_seed(6)
    rows, width, sampled, sentences = 6, 37, 12, 3
    logits = torch.randn(rows, width, generator=generator) * 4
    logits[0, -5:] = -float("inf")  # a shorter list: padded with -inf
    projected = torch.randn(rows, 20 + sampled, generator=generator) * 4  # shared logits, then the sample
    rest_bias = torch.full((sentences, sampled), -2.0)
    rest_bias[1, ::2] = -float("inf")
    rest_bias[2] = -float("inf")  # the whole sample in the list: nothing left out
    owners = torch.tensor([0, 0, 1, 1, 2, 2])
    out = kernel(logits, projected[:, 20:], rest_bias, owners)
    log_probs = logits.log_softmax(dim=1)
    listed = torch.logsumexp(logits, dim=1)
    rest = (projected[:, 20:] + rest_bias.index_select(0, owners)).logsumexp(dim=1)
    expected = log_probs - torch.nn.functional.softplus(rest - listed)[:, None]
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[4:], log_probs[4:], atol=1e-5, rtol=1e-5)  # nothing left out: no correction
    with pytest.raises(ValueError):
        kernel(logits, projected[:, 20:], rest_bias, torch.tensor([0, 0, 1, 1, 2, 3]))


@pytest.mark.parametrize("sentences, width, vocab, k", [(1, 1, 16000, 8), (3, 5, 1003, 10), (2, 4, 3, 10)])
def test_beam_top_k_kernel_equals_topk_over_the_sums(build, sentences, width, vocab, k):
    """decode_beam_top_k (beam search's candidates on a CPU) as torch.topk over scores + log-probabilities:
    the same values, best first, each index naming its value (of equal values the larger first); a sentence
    with fewer candidates above -inf than k gets -inf at distinct indices of its own."""
    kernel = native_ops.beam_top_k_kernel.__wrapped__()
    assert kernel is not None
    generator = torch.Generator().manual_seed(vocab)
    log_probs = torch.randn(sentences * width, vocab, generator=generator).log_softmax(dim=1)
    scores = torch.randn(sentences, width, generator=generator)
    log_probs[0, 1] = log_probs[0, 0] = log_probs[0].max() + 1  # a tie at the top
    log_probs[width:] = log_probs[width:].masked_fill(log_probs[width:] < -1.5, -float("inf"))  # few candidates
    values, indices = kernel(log_probs, scores, k)
    sums = (scores[:, :, None] + log_probs.view(sentences, width, vocab)).view(sentences, -1)
    expected = sums.topk(k, dim=1)
    assert torch.equal(values, expected.values)
    assert torch.equal(sums.gather(1, indices), values)  # every index names its value
    assert all(len(set(row)) == k for row in indices.tolist())
    for row_values, row_indices in zip(values.tolist(), indices.tolist(), strict=True):
        for j in range(k - 1):  # of equal finite values, the larger index first (as the glossary search)
            if row_values[j] == row_values[j + 1] > -float("inf"):
                assert row_indices[j] > row_indices[j + 1]


@pytest.mark.parametrize("bits", [7, 8])
def test_the_int8_product_computes_torchs_integers_in_every_build(build, bits):
    """int8_linear, int8_fp32's one product, in each build this CPU runs (its own, and AVX2 alone, where 8-bit
    rows have no products), against the same op in torch (nmt.model.quantize.int8_linear) on adversarial
    rows: a zero row, huge and tiny values, a row whose largest value is negative, widths and channel counts
    that are not a multiple of the vectors; each row alike alone and among others."""
    from nmt.model.quantize import int8_linear, quantize_rows, vnni_pack

    loaded = native.library()
    if not native.products_built(loaded, bits):
        pytest.skip(f"no {bits}-bit products in this build (8 bits need AVX-512 VNNI)")
    kernel = native_ops.int8_linear_kernel()
    generator = torch.Generator().manual_seed(5)
    for inputs, outputs in ((4, 1), (36, 17), (260, 1000)):
        weight = torch.randn(outputs, inputs, generator=generator)
        quantized, scale = quantize_rows(weight)
        scale, bias = scale.float(), torch.randn(outputs, generator=generator)
        rows = torch.randn(11, inputs, generator=generator)
        rows[0] = 0
        rows[1] *= 1e30
        rows[2] *= 1e-30
        rows[3, 0] = -1e4  # the largest magnitude negative
        rows[4] = 3.0  # every value the same
        packed = vnni_pack(quantized)
        for relu in (False, True):
            ours = kernel(rows, packed, scale, bias, relu, bits)
            theirs = int8_linear(rows, quantized, scale, bias, relu, bits)
            torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-5)  # the same integers, an FMA apart
            for row in range(rows.size(0)):
                assert torch.equal(kernel(rows[row : row + 1], packed, scale, bias, relu, bits), ours[row : row + 1])
        assert torch.equal(ours[0], bias.relu())  # a zero row: the bias alone


def test_the_layer_stacks_equal_the_steps_kernel_by_kernel_in_every_build(build):
    """decode_layers and encode_layers (int8_fp32's layers in one C call) in each build this CPU runs: the same
    floats as the step's kernels one by one, the same keys and values cached, and close to torch's own step."""
    from nmt.model.flat_decoder import FlatDecoder
    from tests.conftest import cast, tiny_model

    bits = 8 if native.products_built(native.library(), 8) else 7  # the AVX2 build has 7-bit products alone
    model, backend = cast(tiny_model(seed=7), "int8_fp32", int8_rows=bits)
    fused, separate = FlatDecoder(model, backend), FlatDecoder(model, backend)
    assert fused.layers_step is not None and fused.encoder_step is not None
    separate.layers_step = None
    src = torch.tensor([[5, 6, 7, 8, 9, 3], [10, 11, 3, 0, 0, 0], [12, 13, 14, 3, 0, 0]])
    beam = 2
    states = [decoder.init_state(src, beam) for decoder in (fused, separate)]
    reference = model.init_state(src, beam)
    tokens = torch.randint(4, 60, (12, src.size(0) * beam), generator=torch.Generator().manual_seed(2))
    for t in range(tokens.size(0)):
        (ours, states[0]), (theirs, states[1]) = fused.decode_step(tokens[t], states[0]), \
            separate.decode_step(tokens[t], states[1])
        expected, reference = model.decode_step(tokens[t], reference)
        assert torch.equal(ours, theirs)
        assert torch.equal(states[0].self_keys[0][: t + 1], states[1].self_keys[0][: t + 1])
        torch.testing.assert_close(ours, expected, atol=0.2, rtol=0)  # bf16 caches, rows on their own scales


@pytest.mark.parametrize("flags", native.FLAG_SETS, ids=["native", "avx2"])
def test_the_kernels_compile_without_a_warning_in_every_build(tmp_path, flags):
    """Each instruction-set build as native.py compiles it, with -Wall -Wextra as errors (issue 65)."""
    import subprocess

    c_files = [str(path) for path in native.sources() if path.suffix == ".c"]
    result = subprocess.run([COMPILER, *flags, *native.COMMON_FLAGS, "-Werror", "-o",
                             str(tmp_path / "kernels.so"), *c_files, "-lm"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


C_TYPES = {"int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "int32_t": ctypes.c_int32, "float": ctypes.c_float,
           "void": None}


def header_prototypes() -> dict[str, tuple[object, list[object]]]:
    """nmt_kernels.h's functions: name -> (result, arguments) as ctypes types, every pointer a c_void_p."""
    text = re.sub(r"/\*.*?\*/", "", native.HEADER.read_text(), flags=re.S)
    found = {}
    for result, name, arguments in re.findall(r"NMT_API\s+(\w+)\s+(\w+)\(([^)]*)\);", text):
        types = []
        for argument in arguments.split(","):
            declared = argument.rsplit(None, 1)[0] if "*" not in argument else "*"
            types.append(ctypes.c_void_p if declared == "*" else C_TYPES[declared.replace("const", "").strip()])
        found[name] = (C_TYPES[result], types)
    return found


def test_the_bindings_match_the_header():
    """Every prototype of the library's one header is bound, with its result and arguments (issue 65)."""
    prototypes = header_prototypes()
    assert len(prototypes) == 16
    assert prototypes == native.SIGNATURES


def test_the_library_exports_the_header_alone(build):
    """The built library has every function of the header and none of its files' own (they are hidden)."""
    loaded = native.library()
    assert loaded is not None
    for name in header_prototypes():
        assert hasattr(loaded, name), name
    for hidden in ("quantize_rows", "scale_products", "attend_cached", "attend_source", "unsigned_weight_corrections",
                   "int8_product"):
        assert not hasattr(loaded, hidden), hidden


def enum_names(name: str) -> list[str]:
    body = re.search(r"enum " + name + r" \{([^}]*)\}", native.HEADER.read_text()).group(1)
    return [entry.strip() for entry in body.split(",") if entry.strip()]


def test_one_layer_description_for_python_and_c():
    """The layer's weights are described once (nmt.model.transformer): StepWeights' and EncoderWeights' fields and
    the C stacks' enums follow it, so the pointers the stacks read are the weights the Python step uses."""
    import dataclasses

    from nmt.model.transformer import DECODER_LAYER, ENCODER_LAYER, EncoderWeights, StepWeights

    decoder = [part.name for part in DECODER_LAYER]
    encoder = [part.name for part in ENCODER_LAYER]
    assert [field.name for field in dataclasses.fields(StepWeights)] == decoder
    assert [field.name for field in dataclasses.fields(EncoderWeights)] == encoder
    assert enum_names("nmt_decoder_weight") == [name.upper() for name in decoder] + ["DECODER_WEIGHTS"]
    assert enum_names("nmt_encoder_weight") == ["ENCODER_" + name.upper() for name in encoder] + ["ENCODER_WEIGHTS"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_train_dropout_drops_p_scales_the_rest_and_draws_a_mask_per_seed(build, dtype):
    """train_dropout (issue 64): the share dropped is p, the rest is scaled, the same seed draws the same mask
    (backward's), another seed another; the mask does not depend on how the work is split between threads;
    neighbouring units are drawn independently."""
    dropout = native_ops.dropout_kernel()
    assert dropout is not None
    dropped, scale = round(0.1 * 2**16), 2**16 / (2**16 - round(0.1 * 2**16))
    x = torch.randn(1021, 1023).to(dtype)  # no size of whole vectors: the tail is drawn as well
    x[x == 0] = 1  # (randn gives a few zeros a million)
    seed, other = torch.tensor(7), torch.tensor(-(2**62))
    y = dropout(x, dropped, scale, seed)
    mask = y == 0
    assert abs(float(mask.float().mean()) - 0.1) < 0.002  # 1.04M units
    torch.testing.assert_close(y[~mask].float(), (x[~mask].float() * scale).to(dtype).float(), rtol=0, atol=0)
    assert torch.equal(dropout(torch.ones_like(x), dropped, 1.0, seed) == 0, mask)
    assert (dropout(torch.ones_like(x), dropped, 1.0, other) == 0).logical_xor(mask).float().mean() > 0.15
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(dropout(x, dropped, scale, seed), y)
    finally:
        torch.set_num_threads(threads)
    flat = mask.flatten().float()
    for lag in (1, 2, 16, 1023):  # units side by side, a vector apart, a row apart
        both = float((flat[:-lag] * flat[lag:]).mean())
        assert abs(both - 0.01) < 0.001, lag  # independent: p * p
    assert float(mask[:, :512].float().mean()) == pytest.approx(float(mask[:, 512:].float().mean()), abs=0.003)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [8000, 37])
def test_train_cross_entropy_equals_torch_in_value_and_gradient(build, dtype, width):
    kernel = native_ops.cross_entropy_kernel()
    assert kernel is not None
    torch.manual_seed(0)
    logits = (4 * torch.randn(333, width)).to(dtype)
    targets = torch.randint(1, width, (333,))
    targets[::5] = 0  # padding
    x = logits.float().requires_grad_(True)
    expected = F.cross_entropy(x, targets, ignore_index=0, label_smoothing=0.1, reduction="none")
    expected.sum().backward()
    losses, grad = kernel(logits, targets, 0, 0.1, True)
    torch.testing.assert_close(losses, expected.detach(), atol=2e-5, rtol=1e-5)
    assert grad.dtype == dtype and torch.equal(grad[::5].float(), torch.zeros(grad[::5].shape))
    tolerance = 2e-5 if dtype == torch.float32 else 4e-3  # bf16: the gradient rounded once
    torch.testing.assert_close(grad.float(), x.grad, atol=tolerance, rtol=0)
    assert torch.equal(kernel(logits, targets, 0, 0.1, False)[0], losses)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        kernel(logits, torch.full((333,), width), 0, 0.1, True)
