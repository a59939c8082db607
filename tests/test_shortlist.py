"""Lexical shortlists: which target tokens they keep, and decoding over them (nmt.model.shortlist)."""

from __future__ import annotations

import dataclasses
import logging
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from nmt.data.prepare import kept_beside
from nmt.decoding.configuration import DecodingConfig
from nmt.decoding.search import SearchOptions, search
from nmt.decoding.translate import Translator
from nmt.errors import CheckpointError
from nmt.model.backend import Backend
from nmt.model.checkpoint import load_checkpoint, save_checkpoint
from nmt.model.flat_decoder import FlatDecoder
from nmt.model.shortlist import Shortlist, TokenChunk, Vocabularies, build_shortlist, count_chunks, count_cooccurrences
from nmt.text.tokenizer import EOS_ID
from tests.conftest import cast, tiny_model

# Source 10 always comes with target 20 and source 11 with 21; target 30 is in every pair (the most
# frequent, but associated with nothing in particular); source 12 meets only 22, once.
PAIRS = [([10, 5], [20, 30]), ([10], [20, 30, 31]), ([11, 5], [21, 30]), ([11, 10], [21, 20, 30]),
         ([12], [22, 30]), ([5, 5], [30, 31])]


def test_each_source_token_keeps_its_most_associated_targets_then_eos():
    shortlist = build_shortlist(PAIRS, vocab_size=40, per_token=3, frequent=1)
    assert shortlist.table[10, 0] == 20 and shortlist.table[11, 0] == 21
    # 12 met 22 and the shared 30, which no list holds: the other places are EOS
    assert shortlist.table[12].tolist() == [22, EOS_ID, EOS_ID]
    assert (shortlist.table[13] == EOS_ID).all()  # never seen
    assert shortlist.frequent.tolist() == [30]


def test_a_token_keeps_the_targets_met_most_often_not_the_rarest():
    # 7 meets 25 in 3 of its 4 pairs (25 is in 10 more) and 26 once (26's only pair): p(25 | 7) is the
    # higher, though 26 occurs more exclusively with 7
    pairs = [([7], [25])] * 3 + [([7], [26])] + [([8], [25])] * 10
    assert build_shortlist(pairs, vocab_size=40, per_token=1, frequent=0).table[7].tolist() == [25]
    assert build_shortlist(pairs, vocab_size=40, per_token=2, frequent=0).table[7].tolist() == [25, 26]


def test_counting_in_chunks_changes_nothing_and_counts_each_pair_once():
    whole = build_shortlist(PAIRS, vocab_size=40, per_token=4, frequent=3)
    for chunk_pairs in (1, 2, 5):
        chunked = count_cooccurrences(PAIRS, vocab_size=40, chunk_pairs=chunk_pairs).shortlist(4, 3)
        assert torch.equal(chunked.table, whole.table) and torch.equal(chunked.frequent, whole.frequent)
    generator = torch.Generator().manual_seed(3)
    pairs = [(torch.randint(4, 40, (n,), generator=generator).tolist(),
              torch.randint(4, 40, (n + 2,), generator=generator).tolist())
             for n in torch.randint(1, 12, (200,), generator=generator).tolist()]
    expected = {}
    for source, target in pairs:
        for key in {(s, t) for s in source for t in target}:
            expected[key] = expected.get(key, 0) + 1
    counted = count_chunks([TokenChunk.of(*zip(*pairs, strict=True))], vocab_size=40)
    assert dict(zip(zip(counted.source.tolist(), counted.target.tolist(), strict=True), counted.together.tolist(),
                    strict=True)) == expected


def test_each_sentence_adds_its_sources_and_their_partners_to_the_shared_specials_and_frequent():
    shortlist = build_shortlist(PAIRS, vocab_size=40, per_token=1, frequent=1)
    assert shortlist.shared_ids.tolist() == [0, 1, 2, 3, 30]  # the specials and the frequent 30
    vocabularies = shortlist.vocabularies(torch.tensor([[10, 12, EOS_ID], [5, EOS_ID, 0], [0, 0, 0]]))
    # 10 -> 20 and 12 -> 22; 5 met 20, 21 and 31 once each beside the shared 30: the tie goes to 21 and
    # 31, the rarer; of those two the lower id; the third sentence adds nothing
    assert vocabularies.counts.tolist() == [4, 2, 0]
    assert [vocabularies.extra[start : start + count].tolist()
            for start, count in zip(vocabularies.starts.tolist(), vocabularies.counts.tolist(), strict=True)] == \
        [[10, 12, 20, 22], [5, 21], []]
    assert vocabularies.width == 64  # 5 shared + 4: a whole chunk of beam search's top-k
    table = vocabularies.table(pad_id=0)  # (N, width)
    assert table[:, :5].tolist() == [[0, 1, 2, 3, 30]] * 3
    assert table[0, 5:9].tolist() == [10, 12, 20, 22] and table[1, 5:7].tolist() == [5, 21]
    assert (table[0, 9:] == 0).all() and (table[1, 7:] == 0).all() and (table[2, 5:] == 0).all()
    wide = build_shortlist(PAIRS, vocab_size=200, per_token=1, frequent=1).vocabularies(torch.arange(4, 70)[None])
    assert wide.width == 128  # 5 shared + 65 own (the frequent 30 counts once)


@pytest.mark.parametrize("precision, kernel", [("fp32", False), ("bf16", True), ("bf16", False), ("int8_bf16", True),
                                               ("int8_fp32", True), ("int8_fp32 7-bit", True),
                                               ("int8_fp32 7-bit", False)])
@pytest.mark.parametrize("tied", [True, False])
def test_a_state_over_a_shortlist_gives_each_sentence_the_full_log_probs_over_its_list(precision, tied, kernel):
    seven = precision.endswith("7-bit")  # the AVX2 product, which an AVX-512 machine also runs
    precision = precision.split()[0]
    model, backend = cast(tiny_model(seed=5, tie_embeddings=tied), precision, **({"int8_rows": 7} if seven else {}))
    # int8_fp32 without VNNI (AVX2 alone) quantizes rows to 7 bits (nmt.model.quantize), so that
    # AVX2's pairs of u8 x s8 products summed in int16 cannot saturate: the own tokens' logits, which the kernel
    # computes from the float rows, then differ from the whole projection's by up to 0.031 on an AVX2-only EPYC,
    # against under 0.02 with VNNI's 8-bit rows
    tolerance = 1e-4 if precision == "fp32" else 4e-2 if precision == "int8_fp32" and backend.int8_rows == 7 else 2e-2
    flat = FlatDecoder(model, backend)
    if not kernel:
        flat.sentence_logits = flat.sentence_logits_int7 = None  # the batched product over padded weights
    elif flat.sentence_logits is None:
        pytest.skip("no C kernels on this CPU")
    shared = torch.tensor([0, 1, 2, 3, 7, 11, 19])
    extra, starts, counts = torch.tensor([23, 42, 59, 8, 13]), torch.tensor([0, 3, 5]), torch.tensor([3, 2, 0])
    # the "sample" of unlisted ids is every unshared id, each standing for itself (log weight 0): the mass a
    # list leaves out is then counted exactly, and the log-probabilities are the full vocabulary's
    unshared = torch.ones(model.config.vocab_size, dtype=torch.bool).index_fill_(0, shared, False).nonzero()[:, 0]
    own = [set(extra[start : start + count].tolist()) for start, count in zip(starts, counts, strict=True)]
    rest_bias = torch.tensor([[-math.inf if i in ids else 0.0 for i in unshared.tolist()] for ids in own])
    vocabularies = Vocabularies(shared, extra, starts, counts, 64, torch.cat([shared, unshared]), rest_bias)
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0], [4, 3, 0, 0]])
    ids, lengths = vocabularies.table(pad_id=0), torch.tensor([10, 9, 7])  # (N, 64); shared + own tokens
    full_state, state = flat.init_state(src, 2), flat.init_state(src, 2, vocabularies=vocabularies)
    local = torch.full((6,), 2)  # BOS: the same id in every vocabulary
    for step in range(5):
        rows_ids = ids.repeat_interleave(2, dim=0)[:, :10]  # (R, 10): the ids of each row's sentence's tokens
        full, full_state = flat.decode_step(rows_ids.gather(1, local[:, None]).squeeze(1), full_state)
        log_probs, state = flat.decode_step(local, state)
        assert log_probs.shape == (local.size(0), 64)
        listed = torch.arange(10)[None, :] < lengths.repeat_interleave(2)[:, None]  # (R, 10)
        expected = full.gather(1, rows_ids).float().masked_fill(~listed, -math.inf)
        torch.testing.assert_close(log_probs[:, :10], expected, atol=tolerance, rtol=0)
        assert (log_probs[:, 10:] == -math.inf).all()  # padding
        local = log_probs[:, 4:].argmax(dim=1) + 4  # feed tokens other than the specials, own ones too
        if step == 2:  # a finished sentence leaves the batch: the others keep their own tokens
            keep = torch.tensor([0, 2])
            full_state.select(keep), state.select(keep)
            ids, lengths, local = ids[keep], lengths[keep], local[[0, 1, 4, 5]]


@pytest.fixture(scope="module")
def checkpoint(tiny_checkpoint):
    return load_checkpoint(tiny_checkpoint)


LINES = ["A dog runs in the park.", "Two men are talking.", "A girl in a red coat.", ""]


def test_a_shortlist_of_the_whole_vocabulary_translates_as_without(checkpoint):
    vocab = checkpoint.config.vocab_size
    everything = Shortlist(torch.arange(vocab)[:, None].expand(-1, 2), torch.arange(vocab))
    options = SearchOptions(beam_size=2, max_len_a=1.0, max_len_b=5)
    model, tokenizer = checkpoint.build_model(), checkpoint.tokenizer()
    plain = Translator(model, tokenizer, DecodingConfig.plain(options)).translate(LINES)
    listed = Translator(model, tokenizer, DecodingConfig.plain(options), shortlist=everything).translate(LINES)
    assert [t.text for t in listed] == [t.text for t in plain]
    assert [t.score for t in listed] == pytest.approx([t.score for t in plain], abs=1e-4)


class Masked:
    """The full model with every token outside each sentence's vocabulary forbidden, normalized over the list
    and the sampled estimate of what it leaves out: what a shortlist must decode as."""

    def __init__(self, decoder: FlatDecoder, vocabularies: Vocabularies):
        self.decoder, self.config = decoder, decoder.config
        table = vocabularies.table(pad_id=0)  # (N, width)
        listed = torch.arange(vocabularies.width)[None, :] < vocabularies.shared.size(0) + vocabularies.counts[:, None]
        self.forbidden = torch.ones(table.size(0), decoder.config.vocab_size, dtype=torch.bool)  # (N, V)
        self.forbidden[torch.arange(table.size(0))[:, None].expand_as(table)[listed], table[listed]] = False
        self.sample = vocabularies.scored[vocabularies.shared.size(0):]  # (K,)
        self.rest_bias = vocabularies.rest_bias  # (N, K)

    fixed_rows = False

    def init_state(self, src, beam_size=1, use_cache=True, max_length=None, vocabularies=None):
        state = self.decoder.init_state(src, beam_size, use_cache)
        state.sentences = torch.arange(src.size(0))
        return state

    def decode_step(self, tokens, state):
        log_probs, state = self.decoder.decode_step(tokens, state)
        owners = state.sentences.repeat_interleave(tokens.size(0) // state.sentences.size(0))
        listed = log_probs.masked_fill(self.forbidden[owners], -math.inf)
        rest = log_probs[:, self.sample] + self.rest_bias[owners]  # the sampled estimate of what is left out
        return listed - torch.cat([listed, rest], dim=1).logsumexp(dim=1, keepdim=True), state


def test_the_sample_of_unlisted_ids_stands_for_what_each_sentence_s_list_leaves_out(monkeypatch):
    monkeypatch.setattr("nmt.model.shortlist.REST_SAMPLE", 8)
    shortlist = build_shortlist(PAIRS, vocab_size=40, per_token=2, frequent=1)  # shared: 0-3 and 30
    sample = shortlist.sample_ids
    assert len(sample) == 8 and sample.tolist() == sorted(set(sample.tolist()))
    assert not set(sample.tolist()) & {0, 1, 2, 3, 30}
    assert torch.equal(build_shortlist(PAIRS, vocab_size=40, per_token=2, frequent=1).sample_ids, sample)  # fixed
    src = torch.tensor([sample[:2].tolist(), [5, 5]])  # sentence 0 lists two sampled ids itself
    vocabularies = shortlist.vocabularies(src)
    assert torch.equal(vocabularies.scored, torch.cat([shortlist.shared_ids, sample]))
    listed = [set(vocabularies.extra[start : start + count].tolist())
              for start, count in zip(vocabularies.starts.tolist(), vocabularies.counts.tolist(), strict=True)]
    weight = math.log(35 / 8)  # 35 unshared ids, 8 drawn
    for row, ids in enumerate(listed):
        expected = [-math.inf if i in ids else weight for i in sample.tolist()]
        assert vocabularies.rest_bias[row].tolist() == pytest.approx(expected)
    assert (vocabularies.rest_bias[0, :2] == -math.inf).all()


@pytest.mark.parametrize("beam", [1, 3])
def test_translations_over_a_shortlist_are_the_full_search_with_other_tokens_forbidden(checkpoint, beam):
    options = SearchOptions(beam_size=beam, max_len_a=1.0, max_len_b=5, loop_guard=False)  # a random model loops
    model, tokenizer = checkpoint.build_model(), checkpoint.tokenizer()
    vocab = checkpoint.config.vocab_size
    some = torch.tensor([10, 20, 30, 40, 50])  # few shared tokens: the sentences choose among their own
    partners = torch.randint(EOS_ID + 1, vocab, (vocab, 3), generator=torch.Generator().manual_seed(0))
    shortlist = Shortlist(partners, some)
    sources = tokenizer.encode_batch(LINES[:3])
    src = torch.tensor([ids + [EOS_ID] + [0] * (max(map(len, sources)) - len(ids)) for ids in sources])
    vocabularies = shortlist.vocabularies(src)
    assert vocabularies.width < vocab // 2 and len(set(vocabularies.counts.tolist())) > 1
    expected = search(Masked(FlatDecoder(model, Backend.resolve("fp32", torch.device("cpu"))), vocabularies), src,
                      options)
    found = Translator(model, tokenizer, DecodingConfig.plain(options), shortlist=shortlist).search_tokens(sources)
    assert [[h.tokens for h in hypotheses] for hypotheses in found] == \
        [[h.tokens for h in hypotheses] for hypotheses in expected]
    own = {int(t) for t in vocabularies.extra}
    if beam > 1:  # a beam reaches the sentences' own tokens (a random model's greedy path may stay in the shared)
        assert {t for hypotheses in found for h in hypotheses for t in h.tokens} & own


def test_samples_over_a_shortlist_draw_each_sentence_s_own_tokens_nbest_times(checkpoint):
    # sampling repeats each sentence's row nbest times: its list must repeat with it (an IndexError before)
    options = SearchOptions(beam_size=1, nbest=3, top_k=50, max_len_a=1.0, max_len_b=5, loop_guard=False)
    model, tokenizer = checkpoint.build_model(), checkpoint.tokenizer()
    partners = torch.randint(EOS_ID + 1, checkpoint.config.vocab_size, (checkpoint.config.vocab_size, 3),
                             generator=torch.Generator().manual_seed(0))
    shortlist = Shortlist(partners, torch.tensor([10, 20, 30]))
    sources = tokenizer.encode_batch(LINES[:3])
    src = torch.tensor([ids + [EOS_ID] + [0] * (max(map(len, sources)) - len(ids)) for ids in sources])
    found = Translator(model, tokenizer, DecodingConfig.plain(options), shortlist=shortlist).search_tokens(sources)
    table = shortlist.vocabularies(src).table(pad_id=0)
    assert [len(hypotheses) for hypotheses in found] == [3, 3, 3]
    for row, hypotheses in enumerate(found):
        assert {t for h in hypotheses for t in h.tokens} <= set(table[row].tolist())  # specials included
    assert len({tuple(h.tokens) for hypotheses in found for h in hypotheses}) > 3  # drawn, not copied


def test_a_repeated_batch_of_vocabularies_lists_each_sentence_s_tokens_again():
    shortlist = build_shortlist(PAIRS, vocab_size=40, per_token=2, frequent=1)
    vocabularies = shortlist.vocabularies(torch.tensor([[10, 12, EOS_ID], [5, EOS_ID, 0], [11, EOS_ID, 0]]))
    twice = vocabularies.repeated(2)
    assert torch.equal(twice.table(pad_id=0), vocabularies.table(pad_id=0).repeat_interleave(2, dim=0))
    assert torch.equal(twice.rest_bias, vocabularies.rest_bias.repeat_interleave(2, dim=0))
    assert twice.width == vocabularies.width


def test_decoders_that_score_the_whole_vocabulary_refuse_a_shortlist(checkpoint):
    model = checkpoint.build_model().eval()
    src = torch.tensor([[10, 11, EOS_ID]])
    vocabularies = build_shortlist(PAIRS, vocab_size=checkpoint.config.vocab_size).vocabularies(src)
    with pytest.raises(ValueError, match="shortlist"):
        model.init_state(src, vocabularies=vocabularies)
    with pytest.raises(ValueError, match="shortlist"):
        FlatDecoder(*cast(model, "fp32")).init_state(src, use_cache=False, vocabularies=vocabularies)


def test_a_sentence_s_vocabulary_and_log_probabilities_do_not_depend_on_its_batch(checkpoint):
    partners = torch.randint(EOS_ID + 1, checkpoint.config.vocab_size, (checkpoint.config.vocab_size, 4),
                             generator=torch.Generator().manual_seed(1))
    partners[: EOS_ID + 1] = EOS_ID  # as build_shortlist leaves them: padding brings no partners into a batch
    shortlist = Shortlist(partners, torch.arange(40))
    decoder, tokenizer = FlatDecoder(*cast(checkpoint.build_model(), "fp32")), checkpoint.tokenizer()
    sources = tokenizer.encode_batch(LINES[:3])
    src = torch.tensor([ids + [EOS_ID] + [0] * (max(map(len, sources)) - len(ids)) for ids in sources])

    def first_step(src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        state = decoder.init_state(src, vocabularies=shortlist.vocabularies(src))
        log_probs, _ = decoder.decode_step(torch.full((src.size(0),), checkpoint.config.bos_id), state)
        return state.listed.token_ids, log_probs  # (N, width) each

    ids, together = first_step(src)
    for row, own in enumerate(sources):
        alone_ids, alone = first_step(torch.tensor([own + [EOS_ID]]))
        width = alone.size(1)
        kept = alone[0] > -math.inf
        assert torch.equal(alone_ids[0][kept], ids[row][: width][kept])  # the same tokens, in the same places
        torch.testing.assert_close(alone[0][kept], together[row][: width][kept], atol=1e-5, rtol=0)
        assert (together[row][width:] == -math.inf).all()  # the batch's wider table: padding only
    translator = Translator(decoder.model, tokenizer, DecodingConfig.plain(SearchOptions(beam_size=2)),
                            shortlist=shortlist)
    assert [t.text for t in translator.translate(LINES)] == [translator.translate([line])[0].text for line in LINES]


def nmt(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nmt_cli.main", *args], input=stdin, capture_output=True)


@pytest.mark.slow
def test_cli_builds_a_shortlist_into_the_checkpoint_and_translates_with_it(tiny_checkpoint, tmp_path):
    without = nmt("translate", "--model", str(tiny_checkpoint), "--shortlist", stdin=b"A dog.\n")
    assert without.returncode == 2
    assert without.stderr.decode() == "error: this model holds no shortlist: `nmt shortlist` adds one\n"
    out = tmp_path / "listed.pt"
    built = nmt("shortlist", "--model", str(tiny_checkpoint), "--data", "multi30k", "--output", str(out),
                "--per-token", "5", "--frequent", "50")
    assert built.returncode == 0, built.stderr.decode()
    stored = load_checkpoint(out).shortlist
    assert stored.table.shape == (load_checkpoint(tiny_checkpoint).config.vocab_size, 5)
    assert len(stored.frequent) == 50
    lines = b"A dog runs.\n\nTwo men talk.\n"
    result = nmt("translate", "--model", str(out), "--shortlist", "--precision", "int8_bf16", "-q", stdin=lines)
    assert result.returncode == 0, result.stderr.decode()
    assert len(result.stdout.decode().split("\n")) == 4  # one line per input line
    no_cache = nmt("translate", "--model", str(out), "--shortlist", "--no-cache", stdin=lines)
    assert no_cache.returncode == 2 and no_cache.stderr.decode().startswith("error: --shortlist needs")


def test_a_checkpoint_stores_its_shortlist_in_int16_and_loads_it_whole(checkpoint, tmp_path):
    shortlist = build_shortlist(PAIRS, vocab_size=checkpoint.config.vocab_size, per_token=3, frequent=2)
    save_checkpoint(tmp_path / "listed.pt", dataclasses.replace(checkpoint, shortlist=shortlist))
    stored = torch.load(tmp_path / "listed.pt", weights_only=True)["shortlist"]
    assert stored["table"].dtype == stored["frequent"].dtype == torch.int16
    loaded = load_checkpoint(tmp_path / "listed.pt").shortlist
    assert torch.equal(loaded.table, shortlist.table) and torch.equal(loaded.frequent, shortlist.frequent)
    assert loaded.table.dtype == torch.int64


def test_a_shortlist_of_another_vocabulary_is_a_checkpoint_error(checkpoint, tmp_path):
    path = tmp_path / "mismatched.pt"
    wrong = Shortlist(torch.full((checkpoint.config.vocab_size + 1, 2), EOS_ID), torch.tensor([5]))
    save_checkpoint(path, dataclasses.replace(checkpoint, shortlist=wrong))
    with pytest.raises(CheckpointError, match="shortlist does not cover the model's"):
        load_checkpoint(path)


@pytest.mark.slow
def test_a_shortlist_from_a_prepared_folder_counts_the_same_pairs_as_from_their_text(tiny_checkpoint, tmp_path):
    """At WMT size, `nmt shortlist --prepared` counts the cache's token ids instead of tokenizing again."""
    import os

    from nmt.data.corpus import load_embedded

    pairs = load_embedded("multi30k", "valid")
    (tmp_path / "a.en").write_text("\n".join(pairs.source[:300]) + "\n")
    (tmp_path / "a.fr").write_text("\n".join(pairs.target[:300]) + "\n")
    checkpoint = load_checkpoint(tiny_checkpoint)
    (tmp_path / "spm.model").write_bytes(checkpoint.spm_model)
    made = subprocess.run([sys.executable, "-m", "nmt_cli.main", "prepare", "--src-file", str(tmp_path / "a.en"),
                           "--tgt-file", str(tmp_path / "a.fr"), "--spm", str(tmp_path / "spm.model"),
                           "--valid-src", str(tmp_path / "a.en"), "--valid-tgt", str(tmp_path / "a.fr")],
                          capture_output=True, text=True, env={**os.environ, "NMT_CACHE_DIR": str(tmp_path / "c")})
    assert made.returncode == 0, made.stderr
    folder = made.stdout.strip().splitlines()[-1]
    options = ("--per-token", "5", "--frequent", "50")
    from_text = nmt("shortlist", "--model", str(tiny_checkpoint), "--src-file", str(tmp_path / "a.en"), "--tgt-file",
                    str(tmp_path / "a.fr"), "--output", str(tmp_path / "text.pt"), *options)
    from_ids = nmt("shortlist", "--model", str(tiny_checkpoint), "--prepared", folder, "--output",
                   str(tmp_path / "ids.pt"), *options)
    assert from_text.returncode == 0 and from_ids.returncode == 0, from_ids.stderr.decode()
    assert b"from 300 pairs" in from_ids.stdout
    text, ids = load_checkpoint(tmp_path / "text.pt").shortlist, load_checkpoint(tmp_path / "ids.pt").shortlist
    assert torch.equal(text.table, ids.table) and torch.equal(text.frequent, ids.frequent)
    # the counts are kept in the folder: lists of other sizes come from them, the same as counted afresh
    assert (Path(folder) / "cooccurrences.npz").is_file()
    other = ("--per-token", "3", "--frequent", "20")
    again = nmt("shortlist", "--model", str(tiny_checkpoint), "--prepared", folder, "-o", str(tmp_path / "kept.pt"),
                *other)
    afresh = nmt("shortlist", "--model", str(tiny_checkpoint), "--src-file", str(tmp_path / "a.en"), "--tgt-file",
                 str(tmp_path / "a.fr"), "--output", str(tmp_path / "afresh.pt"), *other)
    assert again.returncode == 0 and afresh.returncode == 0, again.stderr.decode()
    kept, counted = (load_checkpoint(tmp_path / name).shortlist for name in ("kept.pt", "afresh.pt"))
    assert torch.equal(kept.table, counted.table) and torch.equal(kept.frequent, counted.frequent)
    both = nmt("shortlist", "--model", str(tiny_checkpoint), "--prepared", folder, "--data", "multi30k", "--output",
               str(tmp_path / "x.pt"))
    assert both.returncode == 2 and b"not both" in both.stderr


def test_arrays_kept_beside_a_prepared_folder_are_made_once_and_remade_when_unreadable(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="nmt")  # whatever level a command run in this process left
    made = []

    def make():
        made.append(1)
        return {"counts": np.arange(5, dtype=np.int64)}

    first, second = (kept_beside(tmp_path, "counts.npz", make) for _ in range(2))
    assert len(made) == 1 and np.array_equal(first["counts"], second["counts"])
    (tmp_path / "counts.npz").write_bytes(b"half a file")
    assert np.array_equal(kept_beside(tmp_path, "counts.npz", make)["counts"], np.arange(5))
    assert len(made) == 2 and "unreadable" in caplog.text
    assert np.array_equal(np.load(tmp_path / "counts.npz")["counts"], np.arange(5))  # rewritten whole
    assert [p.name for p in tmp_path.iterdir()] == ["counts.npz"]  # no temporary file left


def test_nmt_shortlist_defaults_to_the_chosen_sizes():
    import inspect

    from cli.training import build_shortlist as command
    from nmt.model.shortlist import FREQUENT, PER_TOKEN

    parameters = inspect.signature(command).parameters
    assert (parameters["per_token"].default.default, parameters["frequent"].default.default) == (PER_TOKEN, FREQUENT)
