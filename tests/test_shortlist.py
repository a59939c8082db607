"""Lexical shortlists: which target tokens they keep, and decoding over them (nmt.shortlist)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest
import torch

from nmt.checkpoint import load_checkpoint, save_checkpoint
from nmt.errors import CheckpointError
from nmt.flat_decoder import FlatDecoder
from nmt.search import SearchOptions, search
from nmt.shortlist import Shortlist, build_shortlist
from nmt.tokenizer import EOS_ID
from nmt.translate import Translator, cast_for_inference
from tests.conftest import tiny_model

# Source 10 always comes with target 20 and source 11 with 21; target 30 is in every pair (the most
# frequent, but associated with nothing in particular); source 12 meets only 22, once.
PAIRS = [([10, 5], [20, 30]), ([10], [20, 30, 31]), ([11, 5], [21, 30]), ([11, 10], [21, 20, 30]),
         ([12], [22, 30]), ([5, 5], [30, 31])]


def test_each_source_token_keeps_its_most_associated_targets_then_eos():
    shortlist = build_shortlist(PAIRS, vocab_size=40, per_token=3, frequent=1)
    assert shortlist.table[10, 0] == 20 and shortlist.table[11, 0] == 21
    assert shortlist.table[12].tolist() == [22, 30, EOS_ID]  # met 2 targets: the third place is EOS
    assert (shortlist.table[13] == EOS_ID).all()  # never seen
    assert shortlist.frequent.tolist() == [30]


def test_counting_in_chunks_changes_nothing():
    whole = build_shortlist(PAIRS, vocab_size=40, per_token=4, frequent=3)
    for chunk_pairs in (1, 2, 5):
        chunked = build_shortlist(PAIRS, vocab_size=40, per_token=4, frequent=3, chunk_pairs=chunk_pairs)
        assert torch.equal(chunked.table, whole.table) and torch.equal(chunked.frequent, whole.frequent)


def test_target_ids_are_specials_sources_frequent_and_associated_sorted_in_multiples_of_64():
    shortlist = build_shortlist(PAIRS, vocab_size=40, per_token=1, frequent=1)
    ids = shortlist.target_ids(torch.tensor([[10, 12, EOS_ID], [5, EOS_ID, 0]]))
    assert ids.tolist() == [0, 1, 2, 3, 5, 10, 12, 20, 22, 30]  # 5's best partner is 30, the frequent one
    large = build_shortlist(PAIRS, vocab_size=200, per_token=1, frequent=1)
    # 0-3, 150 and the frequent 30, filled up to 64 with the lowest unlisted ids
    assert large.target_ids(torch.tensor([[150, EOS_ID]])).tolist() == list(range(63)) + [150]


@pytest.mark.parametrize("precision", ["fp32", "bf16", "int8_bf16", "int8_fp32", "int8_fp32 fbgemm"])
@pytest.mark.parametrize("tied", [True, False])
def test_restricted_decoder_gives_the_full_log_probs_renormalized_over_the_shortlist(precision, tied, monkeypatch):
    if precision.endswith("fbgemm"):  # the tiny model's products are all small
        monkeypatch.setattr("nmt.quantize.FBGEMM_MIN_PRODUCT", 0)
        precision = precision.split()[0]
    model = cast_for_inference(tiny_model(seed=5, tie_embeddings=tied), precision)
    flat = FlatDecoder(model)
    target_ids = torch.tensor([0, 1, 2, 3, 7, 11, 19, 23, 42, 59])
    restricted = flat.restricted(target_ids)
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    full_state, state = flat.init_state(src, 2), restricted.init_state(src, 2)
    local = torch.tensor([2, 2, 2, 2])  # BOS: the same id in both vocabularies
    for _ in range(5):
        full, full_state = flat.decode_step(target_ids[local], full_state)
        log_probs, state = restricted.decode_step(local, state)
        expected = full[:, target_ids].float()
        torch.testing.assert_close(log_probs, expected - expected.logsumexp(dim=1, keepdim=True),
                                   atol=1e-4 if precision == "fp32" else 2e-2, rtol=0)
        local = log_probs[:, 4:].argmax(dim=1) + 4  # feed shortlist tokens other than the specials


@pytest.fixture(scope="module")
def checkpoint(tiny_checkpoint):
    return load_checkpoint(tiny_checkpoint)


LINES = ["A dog runs in the park.", "Two men are talking.", "A girl in a red coat.", ""]


def test_a_shortlist_of_the_whole_vocabulary_translates_as_without(checkpoint):
    vocab = checkpoint.config.vocab_size
    everything = Shortlist(torch.arange(vocab)[:, None].expand(-1, 2), torch.arange(vocab))
    options = SearchOptions(beam_size=2, max_len_a=1.0, max_len_b=5)
    model, tokenizer = checkpoint.build_model(), checkpoint.tokenizer()
    plain = Translator(model, tokenizer, options).translate(LINES)
    listed = Translator(model, tokenizer, options, shortlist=everything).translate(LINES)
    assert [t.text for t in listed] == [t.text for t in plain]
    assert [t.score for t in listed] == pytest.approx([t.score for t in plain], abs=1e-4)


class Masked:
    """The full model with every token outside `target_ids` forbidden: what a shortlist must decode as."""

    def __init__(self, decoder: FlatDecoder, target_ids: torch.Tensor):
        self.decoder, self.config = decoder, decoder.config
        self.forbidden = torch.ones(decoder.config.vocab_size, dtype=torch.bool)
        self.forbidden[target_ids] = False

    def init_state(self, src, beam_size=1, use_cache=True):
        return self.decoder.init_state(src, beam_size, use_cache)

    def decode_step(self, tokens, state):
        log_probs, state = self.decoder.decode_step(tokens, state)
        return log_probs.masked_fill(self.forbidden, -math.inf).log_softmax(dim=-1), state


@pytest.mark.parametrize("beam", [1, 3])
def test_translations_over_a_shortlist_are_the_full_search_with_other_tokens_forbidden(checkpoint, beam):
    options = SearchOptions(beam_size=beam, max_len_a=1.0, max_len_b=5)
    model, tokenizer = checkpoint.build_model(), checkpoint.tokenizer()
    vocab = checkpoint.config.vocab_size
    some = torch.randperm(vocab - EOS_ID - 1, generator=torch.Generator().manual_seed(0))[:100] + EOS_ID + 1
    shortlist = Shortlist(torch.full((vocab, 1), EOS_ID), some)
    sources = tokenizer.encode_batch(LINES[:3])
    src = torch.tensor([ids + [EOS_ID] + [0] * (max(map(len, sources)) - len(ids)) for ids in sources])
    target_ids = shortlist.target_ids(src)
    assert len(target_ids) < vocab // 2
    expected = search(Masked(FlatDecoder(model), target_ids), src, options)
    found = Translator(model, tokenizer, options, shortlist=shortlist)._search_batch(sources)
    assert [[h.tokens for h in hypotheses] for hypotheses in found] == \
        [[h.tokens for h in hypotheses] for hypotheses in expected]
    assert {t for hypotheses in found for t in hypotheses[0].tokens} - set(range(64))  # ids the mapping moves


def nmt(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nmt_cli.main", *args], input=stdin, capture_output=True)


def test_cli_builds_a_shortlist_into_the_checkpoint_and_translates_with_it(tiny_checkpoint, tmp_path):
    without = nmt("translate", "--model", str(tiny_checkpoint), "--shortlist", stdin=b"A dog.\n")
    assert without.returncode == 2
    assert without.stderr.decode() == "error: this model holds no shortlist: `nmt shortlist` adds one\n"
    out = tmp_path / "listed.pt"
    built = nmt("shortlist", "--model", str(tiny_checkpoint), "--data", "multi30k", "--out", str(out),
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


def test_a_shortlist_of_another_vocabulary_is_a_checkpoint_error(checkpoint, tmp_path):
    path = tmp_path / "mismatched.pt"
    wrong = Shortlist(torch.full((checkpoint.config.vocab_size + 1, 2), EOS_ID), torch.tensor([5]))
    save_checkpoint(path, dataclasses.replace(checkpoint, shortlist=wrong))
    with pytest.raises(CheckpointError, match="shortlist does not cover the model's"):
        load_checkpoint(path)
