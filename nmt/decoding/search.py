"""Greedy and beam search, batched over sentences, knowing the decoder only through the Decoder protocol
below: `init_state` (which encodes) and `decode_step`, over states that `reorder` and `select`. The model
itself, nmt.model.flat_decoder's FlatDecoder, nmt.model.graphs' GraphDecoder and nmt.decoding.ensemble's
Ensemble are such decoders.

    hypotheses = search(decoder, src, SearchOptions(beam_size=4))   # per sentence, best first

Scores: a hypothesis of n tokens (its EOS included) with summed log-probability L is ranked by
L / n ** lenpen (lenpen 0: raw log-probability; 1: per-token average). Lengths: at most
floor(max_len_a * source_tokens + max_len_b) target tokens including EOS, and EOS is forbidden before
`min_len` tokens. Without a length penalty, a sentence stops once it has `nbest` finished hypotheses and no
open one scores better than the worst of them (exact); with one, once `beam_size` hypotheses have finished,
as CTranslate2 does (finished_searching). A hypothesis that loops (the same few tokens over and over) can
only end there (stop_loops).
"""

from __future__ import annotations

import array
import math
import zlib
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from nmt.model.config import ModelConfig
from nmt.model.native_ops import beam_top_k_kernel, best_kernel
from nmt.model.shortlist import TOP_K_CHUNK, Vocabularies


class State(Protocol):
    """A decoder's state for a batch of sentences of `beam_size` rows each, in the search's row order."""

    def reorder(self, rows: Tensor) -> State:
        """Row r takes the history of row `rows[r]` (of the same sentence); `rows` may widen one row per
        sentence to the beam's K."""

    def select(self, sentences: Tensor, reordered: Tensor | None = None) -> State:
        """Keep only the given sentences, with all their rows; with `reordered`, reorder(reordered) first."""


class Decoder(Protocol):
    config: ModelConfig
    fixed_rows: bool  # states keep beam_size rows per sentence from the first step (fixed shapes)

    def init_state(self, src: Tensor, beam_size: int = 1, use_cache: bool = True, max_length: int | None = None,
                   vocabularies: Vocabularies | None = None) -> State:
        """Encode the source (N, S); a state for N sentences of `beam_size` rows and up to `max_length`
        target tokens (a bound only fixed-shape decoders need). With `vocabularies` (a shortlist's, where the
        decoder takes one: ValueError where not), each sentence's steps are over its own list: the tokens fed
        and scored are local ids, token i of a sentence's list its vocabularies.table() entry i."""

    def decode_step(self, tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """Feed one token per row (R,): log-probabilities (R, V) of the next (R, width with vocabularies),
        and the state after it."""


@dataclass(frozen=True)
class SearchOptions:
    beam_size: int = 4
    lenpen: float = 1.0
    max_len_a: float = 1.5
    max_len_b: int = 10
    min_len: int = 0
    nbest: int = 1
    use_cache: bool = True
    loop_guard: bool = True  # end a hypothesis that repeats itself (stop_loops)
    kernels: bool = True  # the C top-k and max on a CPU (nmt.model.native); False (--exact): torch alone
    no_repeat_ngram: int = 0  # N > 0: no n-gram of N tokens twice in a hypothesis (block_repeats)
    # Sampling instead of search (beam size 1): from the top_k most probable tokens, or the fewest whose
    # probabilities sum to top_p, at `temperature`; nbest independent samples per sentence, drawn from a
    # generator seeded by `seed` and the batch's tokens, so that the same input and options give the same output
    top_k: int = 0
    top_p: float = 0.0
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError("beam size must be at least 1")
        if self.sampling:
            if self.beam_size != 1 or self.top_k and self.top_p:
                raise ValueError("sampling takes beam size 1 and one of top-k or top-p")
            if self.top_k < 0 or not 0 <= self.top_p <= 1 or self.temperature <= 0:
                raise ValueError("top-k must be positive, top-p between 0 and 1, the temperature above 0")
        elif not 1 <= self.nbest <= self.beam_size:
            raise ValueError(f"nbest must be between 1 and the beam size ({self.beam_size})")
        if self.lenpen < 0 or self.min_len < 0 or self.max_len_a < 0 or self.no_repeat_ngram < 0:
            raise ValueError("lenpen, min_len, max_len_a and no_repeat_ngram must not be negative")


    @property
    def sampling(self) -> bool:
        return bool(self.top_k or self.top_p)


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # log_prob / length ** lenpen: what the search ranks by
    log_prob: float  # summed log-probability, EOS included


def length_penalty(length: int, lenpen: float) -> float:
    return length**lenpen


def finalize(tokens: list[int], log_prob: float, lenpen: float) -> Hypothesis:
    """A finished hypothesis of `tokens` followed by EOS."""
    return Hypothesis(tokens, log_prob / length_penalty(len(tokens) + 1, lenpen), log_prob)




def top_k(scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The k largest entries of each row of `scores` (B, W) and their indices, largest first, as
    scores.topk(k) (among equal values the index may differ). On a CPU, torch.topk over a row of beam x
    vocabulary candidates is a slow partial sort while a max over chunks is fast, so this takes the k
    chunks of 64 with the largest maxima (the k largest entries lie in them) and runs topk over those
    alone, several times faster at beam 4 over the shipped vocabulary. Greedy search keeps max(): there
    the chunks gained nothing measurable."""
    rows, width = scores.shape
    if scores.device.type != "cpu" or width % TOP_K_CHUNK or width < 4 * k * TOP_K_CHUNK:
        return scores.topk(k, dim=1)
    chunks = scores.view(rows, -1, TOP_K_CHUNK)  # (B, C, 64)
    best_chunks = chunks.amax(dim=2).topk(k, dim=1).indices  # (B, k)
    candidates = chunks.gather(1, best_chunks[:, :, None].expand(-1, -1, TOP_K_CHUNK)).view(rows, -1)  # (B, k*64)
    values, within = candidates.topk(k, dim=1)
    return values, best_chunks.gather(1, within // TOP_K_CHUNK) * TOP_K_CHUNK + within % TOP_K_CHUNK


def best_candidates(log_probs: Tensor, scores: Tensor, k: int, kernels: bool = True) -> tuple[Tensor, Tensor]:
    """Beam search's k best continuations of each sentence: of scores (N, W) + log_probs (N*W, V) viewed as
    (N, W, V), flattened to (N, W*V): (values, indices) (N, k), best first. On a CPU through
    nmt.model.native's decode_beam_top_k, one pass over the log-probabilities (at beam 5, batch 1 a tenth of
    the search went to the sums and top_k's operations), where the rows are as wide as top_k's chunks need;
    elsewhere (and without `kernels`: torch alone) top_k over the sums. Of equal values either may come first
    (the kernel: the larger index).
    """
    n, width = scores.shape
    wide = width * log_probs.size(-1) >= 4 * k * TOP_K_CHUNK  # as top_k's chunks: a model's vocabulary
    kernel = beam_top_k_kernel() if kernels and log_probs.is_cpu and k <= 64 and wide else None
    if (kernel is not None and log_probs.dtype == scores.dtype == torch.float32 and log_probs.is_contiguous()
            and scores.is_contiguous()):
        return kernel(log_probs, scores, k)
    return top_k((scores[:, :, None] + log_probs.view(n, width, -1)).view(n, -1), k)


def max_lengths(src: Tensor, pad_id: int, options: SearchOptions, max_positions: int) -> list[int]:
    """(N, S) source -> per sentence, the most target tokens (EOS included)."""
    src_lengths = (src != pad_id).sum(dim=1)
    limits = (options.max_len_a * src_lengths.double()).floor().long() + options.max_len_b
    return limits.clamp(1, max_positions).tolist()


def constrain(log_probs: Tensor, step: int, max_lens: list[int], min_len: int, eos_id: int) -> Tensor:
    """Forbid EOS before `min_len` tokens and force it at each row's last allowed step (in place).
    log_probs (N*K, V) hold the K rows of each of N sentences; max_lens has one entry per sentence."""
    if step < min_len:
        log_probs[:, eos_id] = -math.inf
    if step + 1 in max_lens:
        beam = log_probs.size(0) // len(max_lens)
        last = torch.tensor([limit == step + 1 for limit in max_lens for _ in range(beam)], device=log_probs.device)
        eos = log_probs[:, eos_id].clone()
        log_probs[last] = -math.inf
        log_probs[:, eos_id] = torch.where(last, eos.masked_fill(eos == -math.inf, 0.0), eos)
    return log_probs


# A hypothesis loops once its last LOOP_SPAN tokens (or three periods, if longer) repeat a unit of at most
# MAX_LOOP_PERIOD tokens: "N N N N N N N N", "tré vé tré vé tré vé tré vé", "de l'étation" three times.
# Shorter repeats occur in real text ("1 000 000 000", "non, non, non").
MAX_LOOP_PERIOD = 8
LOOP_SPAN = 8


def loops(tokens: list[int]) -> bool:
    """Whether `tokens` ends in a loop (see LOOP_SPAN)."""
    if len(tokens) < LOOP_SPAN or tokens[-1] not in tokens[-1 - MAX_LOOP_PERIOD : -1]:  # no unit ends here
        return False
    for period in range(1, MAX_LOOP_PERIOD + 1):
        span = max(LOOP_SPAN, 3 * period)
        if (len(tokens) >= span and tokens[-1] == tokens[-1 - period]
                and tokens[-span:-period] == tokens[len(tokens) - span + period:]):
            return True
    return False


def stop_loops(log_probs: Tensor, histories: list[list[int]], eos_id: int) -> Tensor:
    """Leave EOS as the only continuation of each row whose history loops (in place), so a model that
    repeats itself ends there instead of at the length cap; log_probs (R, V), histories one per row."""
    looping = [row for row, tokens in enumerate(histories) if loops(tokens)]
    if looping:
        rows = torch.tensor(looping, device=log_probs.device)
        eos = log_probs[rows, eos_id].clone()
        log_probs[rows] = -math.inf
        log_probs[rows, eos_id] = eos.masked_fill(eos == -math.inf, 0.0)
    return log_probs


def repeated_continuations(tokens: list[int], n: int) -> list[int]:
    """The tokens that would end a second occurrence of an n-gram of `tokens`: those that followed an
    earlier occurrence of its last n-1 tokens."""
    if len(tokens) < n or (n > 1 and tokens[-1] not in tokens[:-1]):  # no earlier (n-1)-gram can match
        return []
    tail = tokens[len(tokens) - n + 1:] if n > 1 else []
    return [tokens[i + n - 1] for i in range(len(tokens) - n + 1) if tokens[i : i + n - 1] == tail]


def block_repeats(log_probs: Tensor, histories: list[list[int]], n: int) -> Tensor:
    """Forbid, in each row, every token that would repeat an n-gram of its history (in place), as fairseq's
    and CTranslate2's no_repeat_ngram_size do; log_probs (R, V), histories one per row."""
    rows, tokens = [], []
    for row, history in enumerate(histories):
        for token in repeated_continuations(history, n):
            rows.append(row)
            tokens.append(token)
    if rows:
        device = log_probs.device
        log_probs[as_tensor(rows, torch.int64, device), as_tensor(tokens, torch.int64, device)] = -math.inf
    return log_probs


ARRAY_TYPECODES = {torch.int64: "q", torch.float32: "f"}  # as_tensor's dtypes and their array.array codes


def as_tensor(values: list, dtype: torch.dtype, device: torch.device) -> Tensor:
    """A 1-D int64 or float32 tensor of Python numbers, through an array's buffer: several times faster than
    torch.tensor, which checks every element's type; a beam step builds three such tensors."""
    if not values:
        return torch.empty(0, dtype=dtype, device=device)
    numbers = array.array(ARRAY_TYPECODES[dtype], values)  # KeyError for any other dtype
    return torch.frombuffer(numbers, dtype=dtype).to(device)


def search(model: Decoder, src: Tensor, options: SearchOptions, prefixes: list[list[int]] | None = None,
           vocabularies: Vocabularies | None = None) -> list[list[Hypothesis]]:
    """Translate a batch of source token ids (N, S), padded: per sentence, up to nbest hypotheses.
    With `prefixes` (target token ids per sentence, [] for none), each sentence's hypotheses start with
    its own. With `vocabularies` (a shortlist's, nmt.model.shortlist), each sentence is decoded over its own
    list of target tokens (not with prefixes, whose tokens need not be in the list)."""
    if vocabularies is not None and prefixes is not None:
        raise ValueError("a prefix's tokens need not be in a shortlist: search with prefixes without one")
    if options.sampling:
        found = sample(model, src, options, prefixes, vocabularies)
    elif options.beam_size == 1:
        choose = most_probable if options.kernels else torch_most_probable
        found = greedy_search(model, src, options, choose=choose, prefixes=prefixes, vocabularies=vocabularies)
    else:
        found = beam_search(model, src, options, prefixes, vocabularies)
    if vocabularies is None:
        return found
    table = vocabularies.table(model.config.pad_id).tolist()  # sentence s's local token i is table[s][i]
    return [[replace(h, tokens=[ids[t] for t in h.tokens]) for h in hypotheses]
            for ids, hypotheses in zip(table, found, strict=True)]


def prefix_values(log_probs: Tensor, step: int, row_prefixes: list[list[int]] | None
                  ) -> tuple[Tensor, Tensor, Tensor] | None:
    """(rows, tokens, log-probabilities) of the prefix tokens due at `step`, one per row that has one, taken
    before any other constraint (None if no row has one)."""
    if row_prefixes is None:
        return None
    rows = [row for row, prefix in enumerate(row_prefixes) if step < len(prefix)]
    if not rows:
        return None
    device = log_probs.device
    row_ids = as_tensor(rows, torch.int64, device)
    tokens = as_tensor([row_prefixes[row][step] for row in rows], torch.int64, device)
    return row_ids, tokens, log_probs[row_ids, tokens].clone()


def force_prefixes(log_probs: Tensor, due: tuple[Tensor, Tensor, Tensor] | None) -> None:
    """Leave each row that prefix_values found its prefix's token alone, at the log-probability it had
    before the other constraints, in place; log_probs (R, V)."""
    if due is None:
        return
    rows, tokens, values = due
    log_probs[rows] = -math.inf
    log_probs[rows, tokens] = values


def with_prefixes(max_lens: list[int], prefixes: list[list[int]] | None) -> list[int]:
    """Length caps that leave room for each prefix and an EOS after it."""
    if prefixes is None:
        return max_lens
    return [max(limit, len(prefix) + 1) for limit, prefix in zip(max_lens, prefixes, strict=True)]


def sample(model: Decoder, src: Tensor, options: SearchOptions, prefixes: list[list[int]] | None = None,
           vocabularies: Vocabularies | None = None) -> list[list[Hypothesis]]:
    """options.nbest samples per sentence, best first: greedy search's loop choosing by sampling_choice."""
    generator = np.random.default_rng([options.seed, zlib.crc32(src.cpu().numpy().tobytes())])
    rows = src.repeat_interleave(options.nbest, dim=0)  # (N*n, S): each sample a row of its own
    row_prefixes = None if prefixes is None else [prefix for prefix in prefixes for _ in range(options.nbest)]
    drawn = greedy_search(model, rows, options, choose=lambda log_probs: sampling_choice(
        log_probs, options, generator), prefixes=row_prefixes,
        vocabularies=None if vocabularies is None else vocabularies.repeated(options.nbest))
    return [_top_finished([h for found in drawn[i : i + options.nbest] for h in found], options.nbest)
            for i in range(0, len(drawn), options.nbest)]


def sampling_choice(log_probs: Tensor, options: SearchOptions, generator: np.random.Generator
                    ) -> tuple[Tensor, Tensor]:
    """(the model's log-probability of each row's sampled token, the token): log_probs (R, V) -> (R,), (R,).
    Drawn from the top_k most probable tokens, or the fewest whose probabilities sum to top_p, their
    log-probabilities divided by the temperature, by inverting each row's distribution function at a
    uniform number from `generator` (numpy's: the same numbers on every device)."""
    scaled = log_probs / options.temperature
    if options.top_k:
        threshold = scaled.topk(min(options.top_k, scaled.size(-1)), dim=-1).values[:, -1:]  # (R, 1)
        scaled = scaled.masked_fill(scaled < threshold, -math.inf)
    else:
        ordered, order = scaled.sort(dim=-1, descending=True)
        before = ordered.softmax(dim=-1).cumsum(dim=-1) - ordered.softmax(dim=-1)  # mass of the better tokens
        ordered = ordered.masked_fill(before >= options.top_p, -math.inf)  # the best token always stays
        scaled = torch.full_like(scaled, -math.inf).scatter(-1, order, ordered)
    cumulative = scaled.double().softmax(dim=-1).cumsum(dim=-1)  # (R, V)
    uniform = torch.from_numpy(1.0 - generator.random(log_probs.size(0))).to(cumulative.device)  # (R,) in (0, 1]
    # the first token whose cumulative mass reaches u x the total: never one of zero mass, since u > 0
    tokens = (cumulative < uniform[:, None] * cumulative[:, -1:]).sum(dim=-1)
    return log_probs.gather(1, tokens[:, None])[:, 0], tokens


def initial_state(model: Decoder, src: Tensor, beam_size: int, options: SearchOptions, max_lens: list[int],
                  vocabularies: Vocabularies | None = None) -> State:
    return model.init_state(src, beam_size=beam_size, use_cache=options.use_cache, max_length=max(max_lens),
                            vocabularies=vocabularies)


def next_log_probs(model: Decoder, tokens: Tensor, state: State, step: int, options: SearchOptions,
                   caps: list[int], histories: list[list[int]], row_prefixes: list[list[int]] | None = None
                   ) -> tuple[Tensor, State]:
    """The one step every search takes (greedy, sampling, beam, constrained): the decoder's log-probabilities
    (R, V) of each row's next token, then its rules in this order: the length caps and min_len (`caps`, one
    per open sentence), the loop guard, no repeated n-grams, and each row's prefix token due at `step`,
    which overrides the others."""
    log_probs, state = model.decode_step(tokens, state)
    eos = model.config.eos_id
    due = prefix_values(log_probs, step, row_prefixes)
    constrain(log_probs, step, caps, options.min_len, eos)
    if options.loop_guard and step >= max(LOOP_SPAN, options.min_len):
        stop_loops(log_probs, histories, eos)
    if options.no_repeat_ngram:
        block_repeats(log_probs, histories, options.no_repeat_ngram)
    force_prefixes(log_probs, due)
    return log_probs, state


# Both searches bring each step's few winners (tokens, rows, scores) back as Python numbers and keep the
# bookkeeping (histories, finished hypotheses, stopping) in Python: at batch 1 the tensor form of that
# bookkeeping was a third of a beam step, dozens of tiny operations per step.
#
# They run in inference mode, not merely without gradients: torch then skips its autograd bookkeeping of
# views and in-place writes (version counters) on every operation, and a step at batch 1 is about a
# hundred small operations (greedy decoding at batch 1 ran a fifth faster). Their tensors are
# inference tensors: they cannot be recorded by autograd afterwards, which no caller does.


def torch_most_probable(log_probs: Tensor) -> tuple[Tensor, Tensor]:
    """log_probs.max(dim=-1), torch alone (--exact)."""
    return log_probs.max(dim=-1)


def most_probable(log_probs: Tensor) -> tuple[Tensor, Tensor]:
    """log_probs.max(dim=-1): each row's largest log-probability and its token (the first of equal ones); on a
    CPU through nmt.model.native's decode_best, where torch's max with indices is slow (0.5 ms a step at
    batch 32 over 16,000 pieces, 19 us at batch 1, against 0.15 ms and 3 us)."""
    best = best_kernel() if log_probs.is_cpu and log_probs.dtype == torch.float32 else None
    if best is None or not log_probs.is_contiguous() or log_probs.dim() != 2 or not log_probs.size(1):
        return log_probs.max(dim=-1)
    return best(log_probs)


@torch.inference_mode()
def greedy_search(model: Decoder, src: Tensor, options: SearchOptions, choose=most_probable,
                  prefixes: list[list[int]] | None = None, vocabularies: Vocabularies | None = None
                  ) -> list[list[Hypothesis]]:
    """The most probable token at each step, or what `choose` (log_probs (R, V) -> (log_prob, token),
    each (R,)) picks; a sentence's prefix tokens first."""
    config = model.config
    max_lens = with_prefixes(max_lengths(src, config.pad_id, options, config.max_positions), prefixes)
    state = initial_state(model, src, 1, options, max_lens, vocabularies)
    active = list(range(src.size(0)))  # sentence index of each row
    tokens = torch.full((len(active),), config.bos_id, dtype=torch.long, device=src.device)
    history: list[list[int]] = [[] for _ in active]  # tokens so far, per row
    log_prob = torch.zeros(len(active), device=src.device)
    results: list[list[Hypothesis]] = [[] for _ in active]
    for step in range(max(max_lens)):
        row_prefixes = None if prefixes is None else [prefixes[i] for i in active]
        log_probs, state = next_log_probs(model, tokens, state, step, options, [max_lens[i] for i in active],
                                          history, row_prefixes)
        best, tokens = choose(log_probs)
        log_prob += best
        chosen = tokens.tolist()
        if config.eos_id in chosen:
            keep = [row for row, token in enumerate(chosen) if token != config.eos_id]
            for row, token in enumerate(chosen):
                if token == config.eos_id:
                    results[active[row]].append(finalize(history[row], float(log_prob[row]), options.lenpen))
            if not keep:
                break
            keep_rows = as_tensor(keep, torch.int64, src.device)
            state.select(keep_rows)
            tokens, log_prob = tokens[keep_rows], log_prob[keep_rows]
            active, history, chosen = [active[i] for i in keep], [history[i] for i in keep], [chosen[i] for i in keep]
        for row, token in enumerate(chosen):
            history[row].append(token)
    return results


def finished_searching(finished: list[Hypothesis], best_open: float, beam: int, options: SearchOptions) -> bool:
    """Whether a sentence's search is over. Without a length penalty, once no open hypothesis (the best of
    them at log-probability `best_open`) can beat its n-best finished ones: scores only fall as tokens are
    added. With one, an open hypothesis's normalized score can still rise, so
    the search goes on until `beam` hypotheses have finished, as CTranslate2's beam search does (patience 1):
    stopping at the first moment the best open one ranked below the n-best finished lost 0.2-0.3 BLEU
    against it on the same weights."""
    if options.lenpen == 0:
        kept = _top_finished(finished, options.nbest)
        return len(kept) >= options.nbest and best_open <= kept[-1].score
    return len(finished) >= beam


def _top_finished(hypotheses: list[Hypothesis], n: int) -> list[Hypothesis]:
    return sorted(hypotheses, key=lambda h: h.score, reverse=True)[:n]


@torch.inference_mode()
def beam_search(model: Decoder, src: Tensor, options: SearchOptions, prefixes: list[list[int]] | None = None,
                vocabularies: Vocabularies | None = None) -> list[list[Hypothesis]]:
    config = model.config
    beam = options.beam_size
    max_lens = with_prefixes(max_lengths(src, config.pad_id, options, config.max_positions), prefixes)
    # All K beams of a sentence start from the same BOS, so the first step runs one row per sentence and
    # its K best continuations then fill the beam (CUDA graphs keep the K rows: their shapes are fixed)
    width = beam if model.fixed_rows else 1  # rows per sentence
    state = initial_state(model, src, width, options, max_lens, vocabularies)
    active = list(range(src.size(0)))  # sentence index of each open sentence
    scores = torch.full((len(active), width), -math.inf, device=src.device)
    scores[:, 0] = 0.0  # identical rows: keep one
    tokens = torch.full((len(active) * width,), config.bos_id, dtype=torch.long, device=src.device)
    history: list[list[int]] = [[] for _ in range(len(active) * width)]  # tokens so far, per row
    finished: list[list[Hypothesis]] = [[] for _ in active]
    for step in range(max(max_lens)):
        n = len(active)
        row_prefixes = None if prefixes is None else [prefixes[i] for i in active for _ in range(width)]
        log_probs, state = next_log_probs(model, tokens, state, step, options, [max_lens[i] for i in active],
                                          history, row_prefixes)  # (n*width, V)
        vocab = log_probs.size(-1)
        top = best_candidates(log_probs, scores, min(2 * beam, width * vocab), options.kernels)  # (n, 2K), best first
        top_scores, top_index = (t.tolist() for t in top)
        rows, next_tokens, next_scores, keep = [], [], [], []
        for i, sentence in enumerate(active):
            # An EOS among the K best candidates finishes that hypothesis; the K best others go on (a row
            # has one EOS, so 2K candidates hold at least K others, but for a vocabulary under 2K pieces).
            taken = 0
            for j, (score, index) in enumerate(zip(top_scores[i], top_index[i], strict=True)):
                row, token = i * width + index // vocab, index % vocab
                if token != config.eos_id:
                    rows.append(row)
                    next_tokens.append(token)
                    next_scores.append(score)
                    taken += 1
                    if taken == beam:
                        break
                elif j < beam and score > -math.inf:
                    finished[sentence].append(finalize(history[row], score, options.lenpen))
            for _ in range(beam - taken):  # a tiny vocabulary: dead rows fill the beam
                rows.append(rows[-1])
                next_tokens.append(next_tokens[-1])
                next_scores.append(-math.inf)
            if not finished_searching(finished[sentence], next_scores[i * beam], beam, options):
                keep.append(i)
        if not keep:
            break
        reordered = as_tensor(rows, torch.int64, src.device)
        if len(keep) == n:
            state.reorder(reordered)
        else:
            state.select(as_tensor(keep, torch.int64, src.device), reordered)
            kept_rows = [i * beam + k for i in keep for k in range(beam)]
            rows, next_tokens, next_scores = ([column[r] for r in kept_rows]
                                              for column in (rows, next_tokens, next_scores))
            active = [active[i] for i in keep]
        history = [history[row] + [token] for row, token in zip(rows, next_tokens, strict=True)]
        tokens = as_tensor(next_tokens, torch.int64, src.device)
        scores = as_tensor(next_scores, torch.float32, src.device).view(len(active), beam)
        width = beam
    return [_top_finished(hypotheses, options.nbest) for hypotheses in finished]
