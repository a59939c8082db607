"""Lexical shortlists: the decoder scores only the target tokens a sentence's source makes likely.

At batch 32 and beam 4 on the shipped model, the output projection onto all 8,000 pieces, its
log-softmax and the top-k over them are about a third of a decoding step. Most of those pieces can never
be the next French token of a given sentence: English-only pieces of the joint vocabulary, and French words
unrelated to the source. As with Marian's lexical shortlists and CTranslate2's vocabulary maps, a sentence
is decoded over
- the special tokens and the `frequent` most frequent target tokens of the training data (function words,
  punctuation), shared by every sentence,
- its own source tokens (names, numbers and symbols are copied),
- for each of its source tokens, the `per_token` target tokens beyond the shared ones that occur in the
  most training pairs with it (the highest p(t | s), counted over sentence pairs).

    shortlist = build_shortlist(tokenized_pairs, vocab_size)       # once, stored in the checkpoint
    vocabularies = shortlist.vocabularies(src)                     # per batch: each sentence's ids

`nmt shortlist` builds one from training pairs and stores it in a checkpoint; `nmt translate --shortlist`
decodes with it: the search hands each batch's vocabularies to the decoder's init_state (the Decoder protocol of
nmt.decoding.search), which binds them into the state every step takes (ListedTokens); the decoder scores the
shared tokens of every row with one product and each sentence's own tokens with a product per sentence
(nmt.model.flat_decoder), and the search maps each sentence's local tokens back to vocabulary ids.

Log-probabilities are normalized as over the whole vocabulary, the mass of the tokens a sentence's list
leaves out estimated from a fixed random sample of REST_SAMPLE unshared tokens that every row also scores.
Normalized over the list alone, a beam whose likely next tokens are not in the list scores too high: on the
general model's update 12,000, beam 4 over a list of 2,000 shared and 200 per source piece lost 0.3 BLEU
on tatoeba:dev that way, where forbidding the same tokens without renormalizing changed 9 of 500
translations and no BLEU (benchmarks/SPEED.md).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from nmt.text.tokenizer import EOS_ID, Tokenizer

# nmt.decoding.search takes the top k of a score row in chunks of this many (chunked_topk): a shortlist's
# width is padded to a multiple, so that the chunked path applies
TOP_K_CHUNK = 64

# The default sizes: the most frequent target tokens every sentence shares, and the target tokens each source
# token adds. Chosen on the general model's update 12,000 (beam 4, int8_fp32, 500 sentences each of
# europarl:dev, tatoeba:dev, multi30k:valid, against the full vocabulary's 30.47, 42.48, 41.67 BLEU):
# 3,000 and 300 scored 30.47, 42.67, 41.72; 2,000 and 200 30.51, 42.57, 41.60; 1,000 and 100 30.50, 42.98,
# 41.72 and changed the most translations (137 of 500 on europarl:dev, against 53 with 3,000 and 300).
FREQUENT, PER_TOKEN = 3000, 300

# How many ids outside the shared ones every row also scores, to estimate the probability mass that a
# sentence's list leaves out (Shortlist.sample_ids)
REST_SAMPLE = 128


@dataclass(frozen=True)
class Vocabularies:
    """The target tokens each sentence of a batch is decoded over: the `shared` ids (F,) that every sentence
    shares, then its own: sentence s adds extra[starts[s] : starts[s] + counts[s]]. Local token i of sentence
    s is shared[i] for i < F, else its extra id i - F; past them, up to `width`, padding (-inf scores)."""

    shared: Tensor  # (F,) sorted ids, the special tokens first (each keeps its id)
    extra: Tensor  # (total,) each sentence's own ids, sorted, sentence after sentence
    starts: Tensor  # (N,) int64
    counts: Tensor  # (N,) int64
    width: int  # F + the most extra ids of a sentence, rounded up to a multiple of 64
    # The shared ids, then the sample of unlisted ids (Shortlist.sample_ids) whose logits estimate the mass
    # of the ids a sentence's list leaves out: every row scores these F + K ids with one product
    scored: Tensor  # (F + K,)
    rest_bias: Tensor  # (N, K) float32: log(unshared ids / K) where a sampled id is not in the sentence's list,
    # else -inf (its mass is counted exactly)

    def to(self, device: torch.device) -> Vocabularies:
        return Vocabularies(self.shared.to(device), self.extra.to(device), self.starts.to(device),
                            self.counts.to(device), self.width, self.scored.to(device), self.rest_bias.to(device))

    def owned(self) -> Tensor:
        """(N, width - F) bool: which of the columns after the shared ones hold a sentence's own tokens (the
        first counts[s]; the rest are padding)."""
        within = torch.arange(self.width - self.shared.size(0), device=self.extra.device)  # (E,)
        return within[None, :] < self.counts[:, None]

    def table(self, pad_id: int) -> Tensor:
        """(N, width) int64: the vocabulary id of each sentence's local tokens (pad_id for its padding)."""
        shared = self.shared.size(0)
        table = torch.full((self.counts.size(0), self.width), pad_id, dtype=torch.long, device=self.extra.device)
        table[:, :shared] = self.shared
        table[:, shared:][self.owned()] = self.extra
        return table

    def repeated(self, times: int) -> Vocabularies:
        """Each sentence's vocabulary `times` times in a row, as a batch whose rows repeat so (sampling's)."""
        counts = self.counts.repeat_interleave(times)
        firsts = counts.cumsum(0) - counts
        within = torch.arange(int(counts.sum()), device=counts.device) - firsts.repeat_interleave(counts)
        extra = self.extra[self.starts.repeat_interleave(times).repeat_interleave(counts) + within]
        return Vocabularies(self.shared, extra, firsts, counts, self.width, self.scored,
                            self.rest_bias.repeat_interleave(times, dim=0))


@dataclass(frozen=True)
class ListedTokens:
    """A batch's Vocabularies as a decoder binds them for its steps (FlatDecoder.init_state keeps them in the
    state it returns): what a step embeds and scores, over each sentence's own tokens."""

    vocabularies: Vocabularies  # on the decoder's device
    token_ids: Tensor  # (N, width): the vocabulary id of each sentence's local tokens (Vocabularies.table)
    scored: Callable[[Tensor], Tensor]  # final states (R, D) -> logits (R, F + K) of the ids every row scores
    # (final states (R, D), their shared logits (R, F), each open sentence's index in the batch (N,)) -> the logits
    # (R, width) of each row's sentence vocabulary: the shared tokens, then the sentence's own, then -inf
    own: Callable[[Tensor, Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class Shortlist:
    table: Tensor  # (V, per_token) target ids per source id, int64 (int16 or int32 in checkpoints)
    frequent: Tensor  # (F,) the most frequent target ids, int64 (int16 or int32 in checkpoints)

    @functools.cached_property
    def shared_ids(self) -> Tensor:
        """(F',) sorted: the special tokens (ids 0..EOS_ID) and the frequent target tokens, which every
        sentence is decoded over."""
        listed = torch.zeros(self.table.size(0), dtype=torch.bool)
        listed[: EOS_ID + 1] = True
        listed[self.frequent] = True
        return listed.nonzero().squeeze(1)

    @functools.cached_property
    def sample_ids(self) -> Tensor:
        """(K,) sorted: REST_SAMPLE ids drawn once, at random but the same every time, from those not shared:
        their logits estimate how much probability a sentence's list leaves out (vocabularies)."""
        unshared = self.unshared.nonzero().squeeze(1)
        drawn = torch.randperm(unshared.size(0), generator=torch.Generator().manual_seed(0))[:REST_SAMPLE]
        return unshared[drawn].sort().values

    @functools.cached_property
    def sample_weight(self) -> float:
        """log(unshared ids / K): how many ids each sampled one stands for, as a log."""
        sampled = self.sample_ids.size(0)
        return math.log(self.unshared.sum().item() / sampled) if sampled else 0.0

    @functools.cached_property
    def scored_ids(self) -> Tensor:
        """(F + K,): the shared ids, then the sample: what every row of every batch scores."""
        return torch.cat([self.shared_ids, self.sample_ids])

    @functools.cached_property
    def unshared(self) -> Tensor:
        """(V,) bool: True where a token is not among the shared ids."""
        return torch.ones(self.table.size(0), dtype=torch.bool).index_fill_(0, self.shared_ids, False)

    def vocabularies(self, src: Tensor) -> Vocabularies:
        """Source ids (N, S) (padding included: it is a special token) -> each sentence's vocabulary: the
        shared ids, then the sentence's own source tokens (names, numbers and symbols are copied) and the
        target tokens associated with them, less the shared ones. Each sentence is decoded over its own
        list, not over the union of the batch's: a sentence's translation does not depend on the batch it
        is in, and at batch 32 the union held 2,000-3,800 pieces where a sentence adds 40-170 of its own
        to the 1,000 shared (multi30k valid)."""
        src = src.long().cpu()
        sentences, vocab_size = src.size(0), self.table.size(0)
        listed = torch.zeros(sentences, vocab_size, dtype=torch.bool)  # (N, V)
        listed.scatter_(1, src, True)
        listed.scatter_(1, self.table[src].view(sentences, -1), True)
        listed &= self.unshared
        sentence, extra = listed.nonzero().unbind(1)  # sorted by sentence, then id
        counts = torch.bincount(sentence, minlength=sentences)
        shared = self.shared_ids.size(0)
        width = shared + int(counts.max()) if sentences else shared
        left_out = ~listed[:, self.sample_ids]  # (N, K)
        rest_bias = torch.full(left_out.shape, -math.inf).masked_fill_(left_out, self.sample_weight)
        return Vocabularies(self.shared_ids, extra, counts.cumsum(0) - counts, counts, width + -width % TOP_K_CHUNK,
                            self.scored_ids, rest_bias)

    def to_dict(self) -> dict[str, Tensor]:
        """As stored in checkpoints: ids in int16 where the vocabulary allows (300 per piece of 16,000 pieces
        take 9.6 MB), else int32."""
        dtype = torch.int16 if self.table.size(0) <= torch.iinfo(torch.int16).max + 1 else torch.int32
        return {"table": self.table.to(dtype), "frequent": self.frequent.to(dtype)}

    @classmethod
    def from_dict(cls, stored: dict) -> Shortlist:
        return cls(stored["table"].long(), stored["frequent"].long())


def shortlist_from_text(tokenizer: Tokenizer, sources: list[str], targets: list[str], vocab_size: int,
                        per_token: int = PER_TOKEN, frequent: int = FREQUENT) -> Shortlist:
    """build_shortlist over sentence pairs given as text."""
    pairs = zip(tokenizer.encode_batch(sources), tokenizer.encode_batch(targets), strict=True)
    return build_shortlist(pairs, vocab_size, per_token, frequent)


def build_shortlist(pairs: Iterable[tuple[list[int], list[int]]], vocab_size: int, per_token: int = PER_TOKEN,
                    frequent: int = FREQUENT) -> Shortlist:
    """Count over tokenized (source ids, target ids) pairs which tokens occur in the same pair, and keep the
    `frequent` most frequent target ids and for each source id the `per_token` target ids met most often
    with it beyond those (EOS where it has fewer)."""
    return count_cooccurrences(pairs, vocab_size).shortlist(per_token, frequent)


@dataclass(frozen=True)
class Cooccurrences:
    """In how many training pairs each (source id, target id) occurs together, and each id alone."""

    source: Tensor  # (L,) the source id of each linked (source, target) pair of ids
    target: Tensor  # (L,)
    together: Tensor  # (L,) pairs holding both
    source_count: Tensor  # (V,) pairs holding each source id
    target_count: Tensor  # (V,) pairs holding each target id

    def shortlist(self, per_token: int, frequent: int) -> Shortlist:
        """The `frequent` most frequent target ids, and for each source id the `per_token` target ids beyond
        them that occur in the most pairs with it (the highest p(t | s)); ties go to the rarer target id."""
        vocab_size = self.source_count.size(0)
        common = self.target_count.topk(min(frequent, vocab_size)).indices
        shared = torch.zeros(vocab_size, dtype=torch.bool)
        shared[: EOS_ID + 1] = True
        shared[common] = True
        own = ~shared[self.target]
        source, target, together = self.source[own], self.target[own], self.together[own]
        # together counts first, then the cosine of the two ids' occurrences (below 1) breaks ties
        association = together + together / (self.source_count[source] * self.target_count[target]).double().sqrt()
        # group the pairs (s, t) by s, most associated first; rank = position within its group
        order = association.argsort(descending=True, stable=True)
        order = order[source[order].argsort(stable=True)]
        source, target = source[order], target[order]
        per_source = torch.bincount(source, minlength=vocab_size)
        rank = torch.arange(len(source)) - (per_source.cumsum(0) - per_source)[source]
        kept = rank < per_token
        table = torch.full((vocab_size, per_token), EOS_ID, dtype=torch.long)
        table[source[kept], rank[kept]] = target[kept]
        return Shortlist(table, common)


def count_cooccurrences(pairs: Iterable[tuple[Sequence[int], Sequence[int]]], vocab_size: int,
                        chunk_pairs: int = 200_000) -> Cooccurrences:
    """The co-occurrence counts of tokenized (source ids, target ids) pairs, a chunk of pairs at a time."""
    pairs = iter(pairs)
    chunks = (TokenChunk.of([source for source, _ in chunk], [target for _, target in chunk])
              for chunk in iter(lambda: list(itertools.islice(pairs, chunk_pairs)), []))
    return count_chunks(chunks, vocab_size)


@dataclass(frozen=True)
class TokenChunk:
    """Pairs given flat: each side's ids, sentence after sentence, and each sentence's length (int64)."""

    source_ids: Tensor
    source_lengths: Tensor
    target_ids: Tensor
    target_lengths: Tensor

    @classmethod
    def of(cls, sources: list[Sequence[int]], targets: list[Sequence[int]]) -> TokenChunk:
        def flat(sentences: list[Sequence[int]]) -> tuple[Tensor, Tensor]:
            lengths = torch.tensor([len(ids) for ids in sentences], dtype=torch.long)
            return torch.tensor([i for ids in sentences for i in ids], dtype=torch.long), lengths
        return cls(*flat(sources), *flat(targets))


def count_chunks(chunks: Iterable[TokenChunk], vocab_size: int) -> Cooccurrences:
    """count_cooccurrences over chunks of pairs given flat (TokenChunk). A chunk's counts are the sparse
    product of its two incidence matrices, sources (V, P) by targets (P, V), each 1 where a sentence holds
    an id: many times faster than listing every (source id, target id) of every pair (and in COO layout
    faster than in CSR: 1.6 s against 2.2 for 100k Europarl pairs)."""
    keys, counts = torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)
    source_count = torch.zeros(vocab_size, dtype=torch.long)
    target_count = torch.zeros(vocab_size, dtype=torch.long)
    for chunk in chunks:
        sentences = chunk.source_lengths.size(0)
        source_pair, source_id = _occurrences(chunk.source_ids, chunk.source_lengths, vocab_size)
        target_pair, target_id = _occurrences(chunk.target_ids, chunk.target_lengths, vocab_size)
        source_count += torch.bincount(source_id, minlength=vocab_size)
        target_count += torch.bincount(target_id, minlength=vocab_size)
        by_id = (source_id * sentences + source_pair).argsort()  # the source incidence transposed: rows are ids
        sources = _incidence(source_id[by_id], source_pair[by_id], vocab_size, sentences)
        targets = _incidence(target_pair, target_id, sentences, vocab_size)
        with warnings.catch_warnings():  # torch multiplies through its CSR layout, which it calls beta
            warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta", UserWarning)
            product = torch.sparse.mm(sources, targets).coalesce()  # (V, V): pairs of the chunk holding (s, t)
        source, target = product.indices()
        keys, merged = torch.cat([keys, source * vocab_size + target]).unique(return_inverse=True)
        counts = torch.zeros(len(keys), dtype=torch.long).index_add_(
            0, merged, torch.cat([counts, product.values().round().long()]))
    return Cooccurrences(keys // vocab_size, keys % vocab_size, counts, source_count, target_count)


def count_prepared(folder: Path, vocab_size: int) -> Cooccurrences:
    """count_chunks over every pair of a prepared token cache (nmt.data.prepare), kept in the folder: counting
    the general model's 4.5M pairs takes minutes, reading the counts back (673 MB) a few seconds."""
    from nmt.data.prepare import TokenCorpus, kept_beside  # here: translating imports this module, not the cache

    def count() -> dict:
        corpus = TokenCorpus(folder)
        counted = count_chunks((TokenChunk(*map(torch.from_numpy, arrays)) for arrays in corpus.flat_chunks()),
                               vocab_size)
        # int32 on disk (ids below the vocabulary size, counts below the number of pairs): half the size
        return {field.name: getattr(counted, field.name).int().numpy() for field in dataclasses.fields(counted)}

    arrays = kept_beside(folder, "cooccurrences.npz", count)
    return Cooccurrences(**{name: torch.from_numpy(array).long() for name, array in arrays.items()})


def _occurrences(ids: Tensor, lengths: Tensor, vocab_size: int) -> tuple[Tensor, Tensor]:
    """Flat ids and sentence lengths -> (sentence, id) of each distinct id of each sentence, sorted."""
    sentence = torch.repeat_interleave(torch.arange(lengths.size(0)), lengths)
    distinct = (sentence * vocab_size + ids).unique()
    return distinct // vocab_size, distinct % vocab_size


def _incidence(rows: Tensor, columns: Tensor, height: int, width: int) -> Tensor:
    """A 0/1 float32 sparse COO matrix (height, width) with ones at (rows, columns), sorted by row then
    column. float32 counts stay exact up to 2**24 pairs a chunk."""
    return torch.sparse_coo_tensor(torch.stack([rows, columns]), torch.ones(columns.size(0)), (height, width),
                                   is_coalesced=True, check_invariants=False)
