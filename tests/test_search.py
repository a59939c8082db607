"""Beam and greedy search against a scripted fake model whose next-token probabilities are written by
hand, so the expected hypotheses and scores are known exactly (fairseq's test_sequence_generator style)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest
import torch

from nmt.decoding.search import (
    LOOP_SPAN,
    SearchOptions,
    beam_search,
    greedy_search,
    loops,
    repeated_continuations,
    search,
    top_k,
)

PAD, UNK, BOS, EOS, A, B = 0, 1, 2, 3, 4, 5
VOCAB = 6
LARGE_VOCAB = 4096  # wide enough for search's chunked top-k (nmt.decoding.search.top_k) to take over from torch.topk
TINY = 1e-6  # probability of everything not listed

# next-token probabilities given the prefix generated so far
SCRIPT = {
    (): {A: 0.6, B: 0.4},
    (A,): {EOS: 0.4, A: 0.1, B: 0.5},
    (B,): {EOS: 0.9, A: 0.05, B: 0.05},
    (A, B): {EOS: 0.9, A: 0.05, B: 0.05},
    (A, A): {EOS: 0.9, A: 0.05, B: 0.05},
}


@dataclass(frozen=True)
class FakeConfig:
    pad_id: int = PAD
    bos_id: int = BOS
    eos_id: int = EOS
    max_positions: int = 64


class FakeState:
    """Holds each row's prefix, so a wrong reorder/select gives wrong probabilities."""

    def __init__(self, n_sentences: int, beam_size: int):
        self.n_sentences, self.beam_size = n_sentences, beam_size
        self.prefixes = [() for _ in range(n_sentences * beam_size)]

    def reorder(self, rows):  # as DecoderState: the rows may widen the state (the first beam step)
        self.prefixes = [self.prefixes[r] for r in rows.tolist()]
        self.beam_size = len(self.prefixes) // self.n_sentences
        return self

    def select(self, sentences, reordered=None):
        if reordered is not None:
            self.reorder(reordered)
        k = self.beam_size
        self.prefixes = [self.prefixes[s * k + j] for s in sentences.tolist() for j in range(k)]
        self.n_sentences = len(sentences)
        return self


class ScriptedModel:
    config = FakeConfig()
    fixed_rows = False

    def __init__(self, vocab: int = VOCAB):
        self.vocab = vocab

    def init_state(self, src, beam_size=1, use_cache=True, max_length=None, vocabularies=None):
        return FakeState(src.size(0), beam_size)

    def decode_step(self, tokens, state):
        rows = []
        for row, token in enumerate(tokens.tolist()):
            prefix = state.prefixes[row] + ((token,) if token != BOS else ())
            state.prefixes[row] = prefix
            probs = torch.full((self.vocab,), TINY, dtype=torch.float64)
            for t, p in SCRIPT.get(prefix, {EOS: 0.9}).items():
                probs[t] = p
            rows.append(probs.log())
        return torch.stack(rows).float(), state


SRC = torch.tensor([[7, 8, EOS]])


def logp(*probs):
    return sum(math.log(p) for p in probs)


@pytest.mark.parametrize("vocab", [VOCAB, LARGE_VOCAB])
def test_beam_hypotheses_order_and_scores_without_length_penalty(vocab):
    result = beam_search(ScriptedModel(vocab), SRC, SearchOptions(beam_size=2, nbest=2, lenpen=0.0))[0]
    assert [h.tokens for h in result] == [[B], [A, B]]
    assert math.isclose(result[0].score, logp(0.4, 0.9), abs_tol=1e-5)
    assert math.isclose(result[1].score, logp(0.6, 0.5, 0.9), abs_tol=1e-5)
    assert math.isclose(result[1].log_prob, result[1].score, abs_tol=1e-9)


@pytest.mark.parametrize("vocab", [VOCAB, LARGE_VOCAB])
def test_length_penalty_reorders_the_same_hypotheses(vocab):
    result = beam_search(ScriptedModel(vocab), SRC, SearchOptions(beam_size=2, nbest=2, lenpen=1.0))[0]
    assert [h.tokens for h in result] == [[A, B], [B]]
    assert math.isclose(result[0].score, logp(0.6, 0.5, 0.9) / 3, abs_tol=1e-5)  # 3 tokens with EOS
    assert math.isclose(result[1].score, logp(0.4, 0.9) / 2, abs_tol=1e-5)
    assert math.isclose(result[0].log_prob, logp(0.6, 0.5, 0.9), abs_tol=1e-5)


@pytest.mark.parametrize("vocab", [VOCAB, LARGE_VOCAB])
def test_batched_sentences_are_independent_and_select_keeps_the_right_rows(vocab):
    src = torch.tensor([[7, 8, EOS], [9, EOS, PAD], [5, 6, EOS]])
    results = beam_search(ScriptedModel(vocab), src, SearchOptions(beam_size=2, nbest=2, lenpen=0.0))
    assert all([h.tokens for h in r] == [[B], [A, B]] for r in results)


@pytest.mark.parametrize("vocab", [VOCAB, LARGE_VOCAB])
def test_greedy_follows_the_most_probable_token_and_equals_beam_one(vocab):
    options = SearchOptions(beam_size=1, lenpen=0.0)
    greedy = greedy_search(ScriptedModel(vocab), SRC, options)[0]
    assert [h.tokens for h in greedy] == [[A, B]]
    assert math.isclose(greedy[0].score, logp(0.6, 0.5, 0.9), abs_tol=1e-5)
    assert beam_search(ScriptedModel(vocab), SRC, options) == [greedy]
    assert search(ScriptedModel(vocab), SRC, options) == [greedy]


@pytest.mark.parametrize("vocab", [VOCAB, LARGE_VOCAB])
def test_min_len_forbids_early_eos_and_max_len_forces_it(vocab):
    options = SearchOptions(beam_size=2, nbest=1, lenpen=0.0, min_len=2)
    assert beam_search(ScriptedModel(vocab), SRC, options)[0][0].tokens == [A, B]
    capped = SearchOptions(beam_size=2, nbest=1, lenpen=0.0, max_len_a=0.0, max_len_b=1)
    result = beam_search(ScriptedModel(vocab), SRC, capped)[0][0]
    assert result.tokens == []  # one token allowed: it must be EOS
    assert math.isclose(result.log_prob, math.log(TINY), rel_tol=1e-4)
    forced = SearchOptions(beam_size=1, lenpen=0.0, min_len=5, max_len_a=0.0, max_len_b=6)
    assert len(greedy_search(ScriptedModel(vocab), SRC, forced)[0][0].tokens) == 5


def test_beam_search_starts_on_one_row_per_sentence_and_widens_to_the_beam():
    """All beams start from BOS, so the first step runs one row per sentence. Here the first sentence
    ends at step 1 (its length cap forces EOS) while the second goes on: dropping it right after the
    state widened must keep the second sentence's rows."""
    rows_per_step = []

    class RecordingModel(ScriptedModel):
        def decode_step(self, tokens, state):
            rows_per_step.append(tokens.numel())
            return super().decode_step(tokens, state)

    src = torch.tensor([[9, EOS, PAD], [7, 8, EOS]])  # at most 2 and 3 target tokens below
    options = SearchOptions(beam_size=2, nbest=2, lenpen=0.0, max_len_a=1.0, max_len_b=0)
    first, second = beam_search(RecordingModel(), src, options)
    assert rows_per_step == [2, 4, 2]
    assert [h.tokens for h in first] == [[B], [A]]  # EOS forced after one token
    assert [h.tokens for h in second] == [[B], [A, B]]
    assert math.isclose(second[1].score, logp(0.6, 0.5, 0.9), abs_tol=1e-5)


def test_a_beam_wider_than_half_the_vocabulary_still_fills():
    """Six beams over six pieces: the first step's one row has five continuations that are not EOS, and
    a dead row (score -inf) takes the sixth place."""
    result = beam_search(ScriptedModel(), SRC, SearchOptions(beam_size=6, nbest=3, lenpen=0.0))[0]
    assert [h.tokens for h in result] == [[B], [A, B], [A]]
    assert math.isclose(result[2].score, logp(0.6, 0.4), abs_tol=1e-5)


def test_top_k_matches_torch_topk_on_wide_rows():
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(6, 32000, generator=generator)
    scores[1, 100:] = -math.inf  # few finite entries, as when EOS is forced
    scores[2, 5000:5010] = 10.0  # ties at the top
    for k in (1, 8):
        values, indices = top_k(scores, k)
        expected, _ = scores.topk(k, dim=1)
        assert torch.equal(values, expected)
        assert torch.equal(scores.gather(1, indices), values)
        assert bool((indices < scores.size(1)).all())
    assert torch.equal(top_k(scores[:, :1000], 8)[1], scores[:, :1000].topk(8, dim=1)[1])  # too narrow: torch.topk


def test_searches_run_the_model_in_inference_mode():
    """Not only without gradients: a step at batch 1 is about a hundred small operations, and torch's
    autograd bookkeeping of them took 16-21% of greedy decoding's time at batch 1 (nmt.decoding.search)."""
    modes = []

    class RecordingModel(ScriptedModel):
        def decode_step(self, tokens, state):
            modes.append(torch.is_inference_mode_enabled())
            return super().decode_step(tokens, state)

    for beam in (1, 2):
        search(RecordingModel(), SRC, SearchOptions(beam_size=beam))
    assert modes and all(modes)


def test_loops_finds_a_repeated_unit_at_the_end_and_not_short_repeats():
    assert loops([9] * 8) and not loops([9] * 7)
    assert loops([6, 7, 8] + [4, 5] * 4) and not loops([4, 5] * 3 + [4])
    assert loops([6] + [4, 5, 6, 7, 8] * 3) and not loops([4, 5, 6, 7, 8] * 2)  # a unit of 5: three times
    assert not loops([1, 4, 4, 4, 3, 3, 3, 5])  # "1 000 000 000", "non, non, non" stay
    assert not loops([4, 5, 6, 7] * 10 + [8])  # the loop ended


class LoopingModel(ScriptedModel):
    """Prefers A, B, A, B, ... forever; EOS is as unlikely as any other token."""

    def decode_step(self, tokens, state):
        log_probs, state = super().decode_step(tokens, state)
        for row, prefix in enumerate(state.prefixes):
            probs = torch.full((self.vocab,), TINY)
            probs[B if prefix and prefix[-1] == A else A] = 0.9
            log_probs[row] = probs.log()
        return log_probs, state


@pytest.mark.parametrize("beam", [1, 3])
def test_a_looping_hypothesis_ends_at_the_loop_not_at_the_length_cap(beam):
    long_cap = SearchOptions(beam_size=beam, max_len_a=0.0, max_len_b=60)
    guarded = search(LoopingModel(), SRC, long_cap)[0][0]
    unguarded = search(LoopingModel(), SRC, SearchOptions(beam_size=beam, max_len_a=0.0, max_len_b=60,
                                                          loop_guard=False))[0][0]
    assert guarded.tokens == [A, B] * (LOOP_SPAN // 2) and loops(guarded.tokens)
    assert len(unguarded.tokens) == 59  # EOS forced at the cap
    at_least = SearchOptions(beam_size=beam, max_len_a=0.0, max_len_b=60, min_len=20)
    assert len(search(LoopingModel(), SRC, at_least)[0][0].tokens) == 20  # min_len comes first


@pytest.mark.parametrize("beam", [1, 3])
def test_no_repeat_ngram_never_lets_an_n_gram_occur_twice(beam):
    options = SearchOptions(beam_size=beam, max_len_a=0.0, max_len_b=12, loop_guard=False)
    for n in (1, 2, 3):
        tokens = search(LoopingModel(), SRC, replace(options, no_repeat_ngram=n))[0][0].tokens
        grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
        assert len(grams) == len(set(grams)) and tokens[:n] == [A, B, A][:n]
    assert search(LoopingModel(), SRC, options)[0][0].tokens == [A, B] * 5 + [A]  # unblocked: the loop


def test_repeated_continuations_are_what_followed_the_last_n_minus_one_tokens_before():
    assert repeated_continuations([A, B, EOS, A, B], 3) == [EOS]
    assert repeated_continuations([A, B, A, B], 2) == [A]
    assert repeated_continuations([A, B, UNK], 2) == [] and repeated_continuations([A, B], 1) == [A, B]


def first_tokens(options: SearchOptions, seeds=range(40)) -> set[int]:
    return {search(ScriptedModel(), SRC, replace(options, seed=seed))[0][0].tokens[0] for seed in seeds}


def test_sampling_draws_from_the_top_k_or_the_nucleus_and_a_seed_repeats_it():
    sampled = SearchOptions(beam_size=1, top_k=2)
    assert first_tokens(sampled) == {A, B}  # A 0.6, B 0.4 at the first step
    assert first_tokens(replace(sampled, top_k=1)) == {A}
    assert search(ScriptedModel(), SRC, replace(sampled, top_k=1))[0][0] == search(
        ScriptedModel(), SRC, SearchOptions(beam_size=1))[0][0]  # top-1 sampling is greedy search
    assert first_tokens(SearchOptions(beam_size=1, top_p=0.5)) == {A}  # A alone holds half the mass
    assert first_tokens(SearchOptions(beam_size=1, top_p=0.7)) == {A, B}
    assert first_tokens(SearchOptions(beam_size=1, top_k=2, temperature=0.05)) == {A}  # sharpened
    again = [search(ScriptedModel(), SRC.repeat(6, 1), replace(sampled, seed=7)) for _ in range(2)]
    assert again[0] == again[1]


def test_n_samples_per_sentence_come_best_first_and_sampling_takes_beam_one():
    samples = search(ScriptedModel(), SRC, SearchOptions(beam_size=1, top_k=3, nbest=5, seed=1))[0]
    assert len(samples) == 5 and [h.score for h in samples] == sorted((h.score for h in samples), reverse=True)
    with pytest.raises(ValueError, match="beam size 1"):
        SearchOptions(beam_size=4, top_k=5)


@pytest.mark.parametrize("beam", [1, 2, 3])
def test_each_sentence_starts_with_its_own_prefix_scored_by_the_model(beam):
    options = SearchOptions(beam_size=beam, nbest=beam, max_len_a=0.0, max_len_b=3)
    src = SRC.repeat(3, 1)
    found = search(ScriptedModel(), src, options, prefixes=[[B], [B, A, A, B], []])
    assert all(h.tokens[:1] == [B] for h in found[0]) and found[0][0].tokens == [B]
    assert found[0][0].log_prob == pytest.approx(logp(0.4, 0.9), abs=1e-5)  # B's own 0.4, then EOS
    assert all(h.tokens[:4] == [B, A, A, B] for h in found[1])  # longer than the cap: the cap makes room
    assert found[2][0].tokens == search(ScriptedModel(), SRC, options)[0][0].tokens  # no prefix: as before


class LateBloomer(ScriptedModel):
    """B then EOS is likely at once; A is unlikely at first, then each of eight more A's and EOS almost
    certain, which makes A's hypothesis the best per token in the end. Nothing else ever ends."""

    def decode_step(self, tokens, state):
        log_probs, state = super().decode_step(tokens, state)
        for row, prefix in enumerate(state.prefixes):
            probs = torch.full((self.vocab,), TINY)
            if not prefix:
                probs[A], probs[B] = 0.3, 0.7
            elif prefix == (B,):
                probs[EOS] = 0.9
            elif set(prefix) == {A} and len(prefix) == 8:
                probs[EOS] = 0.99
            else:
                probs[A] = 0.99
            log_probs[row] = probs.log()
        return log_probs, state


def test_with_a_length_penalty_the_search_goes_on_until_a_beam_of_hypotheses_has_finished():
    """At step 2, [B] has finished (-0.23 a token) and the best open hypothesis, [A, A], scores -0.61 a
    token: stopping there, as nmt did, loses [A] * 8, which ends at -0.14 a token; CTranslate2 goes on
    until as many hypotheses as the beam has finished."""
    options = SearchOptions(beam_size=2, lenpen=1.0, max_len_a=0.0, max_len_b=20)
    best = beam_search(LateBloomer(), SRC, options)[0][0]
    assert best.tokens == [A] * 8
    assert math.isclose(best.score, (math.log(0.3) + 7 * math.log(0.99) + math.log(0.99)) / 9, abs_tol=1e-5)
    exact = SearchOptions(beam_size=2, lenpen=0.0, max_len_a=0.0, max_len_b=20)  # no penalty: the bound is exact
    assert beam_search(LateBloomer(), SRC, exact)[0][0].tokens == [B]
