"""Translate text with a trained model: lists of lines in Python, streams of lines for the CLI.

    checkpoint = load_checkpoint("model.pt")
    translator = Translator.from_checkpoint(checkpoint)     # as `nmt translate` decodes by default, or:
    config = DecodingConfig.resolve(DecodingFlags(beam=4, precision="int8_fp32"), checkpoint)
    translator = Translator.from_checkpoint(checkpoint, config)
    translator.translate(["A dog runs.", ""])   ->  [Translation(...), Translation(...)]

`Translator(model, tokenizer, DecodingConfig.plain(options))` decodes a model already in memory (training's
validation, `nmt tune`).

Every input line gives exactly one Translation, in order: empty lines give empty translations; a line is
translated a sentence at a time, a sentence longer than MAX_PIECE_TOKENS in pieces (nmt.text.segment), and the
pieces' translations are joined with spaces.
"""

from __future__ import annotations

import copy
import ctypes
import json
import logging
import math
import multiprocessing
import re
import signal
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import torch

from nmt.data.batching import pad_sources, sorted_batches
from nmt.decoding.alignment import align
from nmt.decoding.configuration import MAX_PIECE_TOKENS, DecodingConfig, DecodingFlags, can_fork, memories_of
from nmt.decoding.constraints import Glossary, constrained_search
from nmt.decoding.inference import build_decoders, cast_for_inference
from nmt.decoding.search import SearchOptions, search
from nmt.errors import NmtError, UsageError
from nmt.model.backend import Backend
from nmt.model.checkpoint import Checkpoint
from nmt.model.shortlist import Shortlist
from nmt.model.transformer import Transformer
from nmt.text.casing import case_normalized, copied_word, load_casing, lowered_opening
from nmt.text.conventions import (
    NO_TYPOGRAPHY,
    Typography,
    dates_of_unknown_order,
    day_first_dates,
    digit_centuries,
    english_abbreviations,
    english_days_and_hours,
    english_discounts,
    english_months,
    english_ranges,
    english_short_forms,
    english_thousands,
    english_titles,
    punctuate,
    render_sentence,
)
from nmt.text.flags import load_english_words, lost_numbers, low_confidence, unknown_words, untranslated_words
from nmt.text.metrics import loops
from nmt.text.names import kept_couples, kept_name_spans, missing_names, name_to_keep, names_kept, titled_name_spans
from nmt.text.protect import (
    MAX_PLACEHOLDERS,
    PLACEHOLDERS,
    Protected,
    emoji_runs,
    foreign_runs,
    glued_kept,
    is_foreign,
    numbers_kept,
    protect,
)
from nmt.text.register import FORMALITIES, formal_imperatives, informal_imperatives, register_of
from nmt.text.segment import fit_piece, split_clauses, split_sentences
from nmt.text.tokenizer import REGISTER_MARKS, Tokenizer
from nmt.text.typography import joined_elisions

if TYPE_CHECKING:
    from nmt.data.memory import Match

log = logging.getLogger("nmt")


@dataclass(frozen=True)
class Unit:
    """A sentence (or clause) as translated: its token pieces, its placeholders, whether it was in capitals."""

    pieces: list[list[int]]
    protected: Protected | None
    upper: bool
    terms: list[list[int]] = field(default_factory=list)  # token ids of the glossary terms it must contain
    source: str = ""  # its text as given
    lowered: bool = False  # its first word given to the model in lower case (copies_opening)

    def restore(self, translation: str, typography: Typography = NO_TYPOGRAPHY) -> str:
        """The model's translation with the entities put back, written as `typography` says, in capitals
        where the source was."""
        text = joined_elisions(self.protected.restore(translation) if self.protected else translation)
        text = render_sentence(self.source, text, typography)
        if self.lowered:  # the capital the model was not given: "(contribution de" -> "(Contribution de"
            text = re.sub(r"^[\W\d_]*[^\W\d_]", lambda match: match.group().upper(), text, count=1)
        return text.upper() if self.upper else text


def copies_opening(units: list[Unit], text: str) -> bool:
    """Whether `text` holds the first word of one of `units` as the model copies a word it did not know with
    the capital that opened the English sentence (nmt.text.casing.copied_word): "Sales rose 12%." -> "Les
    Sales ont augmenté de 12 %.", where "sales rose" gives "Les ventes"."""
    casing, english = load_casing(), load_english_words()
    # at a sentence's start too where French has no such word, but for interjections it shares: "Oh", "Ah"
    return any((word := lowered_opening(unit.source, casing)) is not None
               and copied_word(word, text, anywhere=len(word) > 2 and word.lower() in english) for unit in units)


def keeps_entities(units: list[Unit], text: str) -> bool:
    """Whether `text` holds the digits of every number that `units` left to the model, in order, every
    ordinal and decade as French writes it, every first name and company, and both people of every couple."""
    text = digit_centuries(text)  # "XXIe siècle" keeps the 21st
    protected = [unit.protected for unit in units if unit.protected]
    numbers = [number for p in protected for number in p.numbers]
    glued = [pair for p in protected for pair in p.glued]
    names = [name for p in protected for name in p.kept_names]
    return (numbers_kept(numbers, text) == len(numbers) and glued_kept(glued, text) == len(glued)
            and names_kept(names, text) == len(names) and kept_couples(" ".join(u.source for u in units), text))


@dataclass
class Translation:
    source: str
    text: str
    score: float | None  # None for an empty line, which is not searched
    nbest: list[tuple[str, float]] = field(default_factory=list)
    alignment: list[tuple[int, int]] | None = None  # Pharaoh (source word, target word) pairs, when asked for
    confidence: float | None = None  # mean log-probability of the best hypothesis's tokens, EOS included
    flags: list[str] = field(default_factory=list)  # failures seen: copy, loop, max_length, empty
    memory: dict | None = None  # the translation memory's match (nmt.data.memory.Match.to_dict): used or offered

    def to_dict(self) -> dict:
        """The record `--format jsonl` prints."""
        nbest = [{"translation": text, "score": score} for text, score in self.nbest]
        record = {"source": self.source, "translation": self.text, "score": self.score, "nbest": nbest,
                  "confidence": self.confidence, "flags": self.flags}
        if self.alignment is not None:
            record["alignment"] = " ".join(f"{i}-{j}" for i, j in self.alignment)
        if self.memory is not None:
            record["memory"] = self.memory
        return record

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)


# Several batches at once are decoded in worker processes forked from the translator: each has its own
# interpreter, so the Python of the search and of each step (most of a step at batch 1) runs in parallel
# too, which threads of one process could not do under the GIL. Forked workers share the weights with the
# parent (copy-on-write) and need nothing pickled but the batches and their hypotheses. Each runs one torch
# thread: the OpenMP runtime of a parent that has used several threads hangs in a forked child that asks for
# several again.
_worker_translator: Translator | None = None
# Small batches go to a worker several at a time, at least this many sentences per task: at batch 1, one batch
# per task spent more on the round trip between the processes than on decoding (16 and 32 were no faster).
TASK_SENTENCES = 8
PR_SET_PDEATHSIG = 1  # prctl(2)


def _start_worker(translator: Translator) -> None:
    global _worker_translator
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    for stop in (signal.SIGTERM, signal.SIGHUP):  # the parent's handlers, inherited through fork, are not ours
        signal.signal(stop, signal.SIG_DFL)
    _end_with_parent()
    torch.set_num_threads(1)
    _worker_translator = translator


def _end_with_parent() -> None:
    """Have Linux end this process when the process that forked it ends, however it ends (kill -9 too)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the parent's own clean-up (_stop_workers) still runs
        pass


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's processes without waiting for the batches they are decoding."""
    for process in list((pool._processes or {}).values()):  # CPython's record of the pool's processes
        process.terminate()


def _search_in_worker(batch: tuple) -> list:
    return _worker_translator._search_batch(*batch)


class Translator:
    def __init__(self, model: Transformer, tokenizer: Tokenizer, config: DecodingConfig, *, ensemble: tuple = (),
                 shortlist: Shortlist | None = None, confidence_floors: dict | None = None):
        """`model` (already cast for config.backend) decoding as `config` says (nmt.decoding.configuration:
        DecodingConfig.resolve of a checkpoint and the options given; DecodingConfig.plain for a model in memory).
        ensemble: more models of the same vocabulary, decoding with `model` as one (nmt.decoding.ensemble).
        shortlist: each batch is decoded over its lexical shortlist's target tokens alone (nmt.model.shortlist).
        confidence_floors: by kind of line (nmt.text.flags.kind_of), the confidence under which a translation is
        flagged (default: nmt.text.flags.CONFIDENCE_FLOORS, measured with the shipped general model).

        What the config's values do here: workers > 1 (CPU only), that many batches decoded at once in forked
        processes of one torch thread each, when a window of lines makes several batches; ordinary_input,
        ALL-CAPS sentences translated in sentence case and put back in capitals, and with a model that has
        placeholders, URLs, e-mails, codes, numbers and emoji protected (nmt.text.protect), with protect_names
        names too (capitalized words the vocabulary holds only in pieces); alignments, word alignments from the
        cross-attention on each Translation (nmt.decoding.alignment); min_confidence, translations less confident
        left empty (counted in self.withheld); glossary, the French of each of its terms found in a sentence in
        its translation (constrained beam search, nmt.decoding.constraints); clause_split, a sentence longer than
        this cut at clause punctuation (then at word starts) and its pieces translated apart (None:
        MAX_PIECE_TOKENS, with a warning when it happens); formality, formal or informal opens every source with
        that register's tag (a model trained with --register-tags, nmt.data.register), auto with none; typography,
        titles, numbers, amounts, dates, elisions and punctuation written as French does (nmt.text.conventions);
        memories, a line with an exact match in one of them (or in the shipped memory) takes its translation, the
        others get the best fuzzy match at memory_threshold or above offered (nmt.data.memory)."""
        self.model = model
        self.config = config
        self.device = next(model.parameters()).device
        workers = config.workers
        if workers < 1:
            raise UsageError("--workers must be at least 1")
        if workers > 1 and self.device.type != "cpu":
            raise UsageError("--workers above 1 is for CPU decoding")
        if workers > 1 and not can_fork():
            raise UsageError("--workers above 1 needs processes started by fork, which this system lacks")
        self.workers = workers
        if ensemble and shortlist is not None:
            raise UsageError("--shortlist decodes one model: give one --model, or drop --shortlist")
        options = config.search
        backend = config.backend
        if backend is None:
            backend = Backend.resolve("fp32", self.device, exact=not options.kernels)
        self.backend = backend
        decoders = build_decoders(model, backend, ensemble, config.cuda_graphs, options.use_cache)
        self.decoder, self.growing = decoders.fast, decoders.growing
        if shortlist is not None and (self.decoder.fixed_rows or not options.use_cache):
            raise UsageError("--shortlist needs the cached decoder without CUDA graphs: drop --no-cache, "
                             "add --no-cuda-graphs on CUDA")
        self.shortlist = shortlist
        self.ordinary_input = config.ordinary_input
        self.alignments = config.alignments
        self.min_confidence = config.min_confidence
        self.glossary = Glossary.read(config.glossary) if config.glossary else None
        self.withheld = 0  # translations left empty for their confidence
        self.tokenizer = tokenizer
        self.options = options
        self.max_tokens = config.max_tokens
        self.batch_size = config.batch_size
        # Longer sentences are translated in pieces (nmt.text.segment); the model's positions leave room for EOS
        if config.clause_split is not None and config.clause_split < 1:
            raise UsageError("--clause-split must be at least 1")
        self.max_piece_tokens = min(config.clause_split or MAX_PIECE_TOKENS, self.model.config.max_positions - 1)
        self._warned_long = config.clause_split is not None  # a cut asked for is no surprise
        self.protect_names = config.protect_names
        self.formality = config.formality
        self.typography = config.typography
        self.confidence_floors = confidence_floors
        self.memories = memories_of(config)
        self.fuzzy_threshold = config.memory_threshold if config.memories else None
        self._noted_prefix = False

    @classmethod
    def from_checkpoint(cls, checkpoint: Checkpoint, config: DecodingConfig | None = None,
                        others: tuple[Checkpoint, ...] = ()) -> Translator:
        """`checkpoint`'s translator, decoding as `config` says (nmt.decoding.configuration: DecodingConfig.resolve
        of DecodingFlags, the options `nmt translate` takes; None: its defaults on this machine). others:
        checkpoints of the same sentencepiece model, decoding with this one as an ensemble."""
        if config is None:
            config = DecodingConfig.resolve(DecodingFlags(), checkpoint, ensemble=bool(others))
        backend = config.backend
        if config.shortlist and checkpoint.shortlist is None:
            raise UsageError("this model holds no shortlist: `nmt shortlist` adds one")
        if config.shortlist and backend.precision == "int8":
            raise UsageError("--shortlist works with --precision fp32, bf16, fp16, int8_bf16 or int8_fp32, not int8")
        if any(other.spm_model != checkpoint.spm_model for other in others):
            raise UsageError("the models of an ensemble must share one sentencepiece model; these do not")
        model = cast_for_inference(checkpoint.build_model(backend.device), backend)
        ensemble = tuple(cast_for_inference(other.build_model(backend.device), backend) for other in others)
        return cls(model, checkpoint.tokenizer(), config, ensemble=ensemble,
                   shortlist=checkpoint.shortlist if config.shortlist else None,
                   confidence_floors=checkpoint.decoding.get("confidence_floors"))

    @property
    def formality(self) -> str:
        return self._formality

    @formality.setter
    def formality(self, value: str) -> None:
        """formal, informal or auto; the tag's id (None for auto) is what each source opens with."""
        if value not in FORMALITIES:
            raise UsageError(f"formality must be {', '.join(FORMALITIES)}, not {value!r}")
        self._formality = value
        self._register_ids = [] if value == "auto" else [self.tokenizer.register_id(REGISTER_MARKS[value])]

    def _units(self, line: str, strict: bool = False, lowered: bool = False) -> list[Unit]:
        """`line` as the units it is translated in: its sentences, and the clauses of a sentence too long to
        translate whole (nmt.text.segment); a clause still too long is cut into runs of tokens at word starts.
        strict: numbers and first names go behind placeholders too (nmt.text.protect); lowered: a first word
        capitalized only for opening its sentence is given to the model in lower case (copies_opening)."""
        limit = self.max_piece_tokens
        units = []
        if self.typography.active and self.ordinary_input:
            line = self._as_the_model_knows(line, strict)
        for sentence in split_sentences(line):
            unit = self._unit(sentence, strict, lowered)
            if len(unit.pieces) <= 1:  # not cut: at most max_piece_tokens
                units.append(unit)
                continue
            if not self._warned_long:
                log.warning("a sentence is longer than %d tokens: it is translated in pieces", limit)
                self._warned_long = True
            units.extend(self._unit(clause, strict, lowered) for clause in split_clauses(
                sentence, lambda text: len(self.tokenizer.encode(text)), limit))
        return [unit for unit in units if unit.pieces]

    @staticmethod
    def _as_the_model_knows(line: str, strict: bool = False) -> str:
        """An English line with its abbreviated months, days, units and words, ranges of days and hours, titles,
        couples, country abbreviations and month-first dates in digits written as the model translates them right
        (nmt.text.conventions); in the retry (strict), a couple stays as written, for one placeholder to hold it."""
        line = english_ranges(english_thousands(english_short_forms(english_days_and_hours(english_months(line)))))
        line = english_discounts(line)
        return day_first_dates(english_abbreviations(english_titles(line, couples=not strict)))

    def _unit(self, text: str, strict: bool = False, lowered: bool = False) -> Unit:
        """`text` in sentence case if it is in capitals, with its entities behind placeholders where the model
        has them (nmt.text.protect), as token ids of at most max_piece_tokens; `lowered`: its first word in
        lower case where English has it capitalized only for opening the sentence."""
        upper, source, opening = False, text, None
        terms = [self.tokenizer.encode(term) for term in self.glossary.matches(text)] if self.glossary else []
        if self.ordinary_input:
            text, upper = case_normalized(text, load_casing(), self._is_whole_word)
            opening = lowered_opening(text, load_casing()) if lowered and not upper else None
            if opening:
                text = text.replace(opening, opening.lower(), 1)
        names = self._is_rare if self.protect_names else None
        protected = (protect(text, names=names, strict=strict, titles=self.typography.active)
                     if self.ordinary_input and self.tokenizer.has_placeholders
                     else None)
        ids = self.tokenizer.encode(protected.text if protected else text)
        tag = self._register_ids  # opens every piece: the register asked for
        limit = max(1, self.max_piece_tokens - len(tag))
        pieces = [ids] if len(ids) <= limit else self._cut_at_word_starts(ids, limit)
        return Unit([tag + piece for piece in pieces if piece], protected, upper, [term for term in terms if term],
                    source, lowered=opening is not None)

    def cost(self, line: str) -> int:
        """About the tokens the model reads to translate `line`, at least 1, counted in a time linear in its
        length: what a server's turns and limits count. Runs of emoji and of another script go behind a
        placeholder each (nmt.text.protect), where there are placeholders enough: 8,000 Chinese characters cost 1,
        not the 24,000 tokens of their bytes."""
        if is_foreign(line):
            return 1
        runs = sorted(emoji_runs(line) + foreign_runs(line))
        if len(runs) > MAX_PLACEHOLDERS:  # the model reads those past the placeholders as they are
            runs = []
        kept, start = [], 0
        for run_start, run_end in runs:
            kept += [line[start:run_start], PLACEHOLDERS[0]]
            start = run_end
        return max(1, len(self.tokenizer.encode("".join(kept) + line[start:])))

    def _is_whole_word(self, word: str) -> bool:
        """Whether the vocabulary holds `word` as one piece."""
        return bool(word) and len(self.tokenizer.encode(word)) == 1

    def _is_rare(self, word: str) -> bool:
        """Whether the vocabulary holds `word` only in pieces (nmt.text.protect.name_spans' test of a name)."""
        return len(self.tokenizer.encode(word)) >= 2

    def _cut_at_word_starts(self, ids: list[int], limit: int) -> list[list[int]]:
        """`ids` in runs of at most `limit`, cut at a word start in the second half of each run."""
        pieces, start = [], 0
        while start < len(ids):
            end = min(start + limit, len(ids))
            if end < len(ids):
                word_starts = [i for i in range(end, start + limit // 2, -1)
                               if self.tokenizer.processor.id_to_piece(ids[i]).startswith("\u2581")]
                end = word_starts[0] if word_starts else end
            pieces.append(ids[start:end])
            start = end
        return pieces

    def read_memories(self) -> Translator:
        """This translator with its memories read now, and indexed for fuzzy matches if it offers them (the
        shipped one is read on first use, a second or so): a server reads them while it loads, so that no request
        waits for them."""
        for memory, most_words in self.memories:
            memory.exact("")
            if self.fuzzy_threshold is not None and most_words is None:
                memory.index()
        return self

    def with_options(self, options: SearchOptions, formality: str | None = None,
                     glossary: Glossary | None = None) -> Translator:
        """This translator searching with `options` (and, given, in the register `formality`, with the terms of
        `glossary` in place of its own): a copy that shares the model, decoders and tokenizer, for one call (the
        server's requests each bring theirs)."""
        chosen = copy.copy(self)
        chosen.options = options
        if formality is not None:
            chosen.formality = formality
        if glossary is not None:
            chosen.glossary = glossary
        return chosen

    def search_tokens(self, sources: list[list[int]]) -> list[list]:
        """The search's hypotheses (nmt.decoding.search.Hypothesis, best first) for sources given as token ids, as
        they are: no sentence split, placeholders or casing (`nmt attention` draws what the model did)."""
        return self._search_batch(sources)

    def _search_batch(self, sources: list[list[int]], prefixes: list[list[int]] | None = None,
                      terms: list[list[list[int]]] | None = None):
        """The search's hypotheses for each source; prefixes: target token ids each must start with; terms:
        token ids of the terms each must contain."""
        eos, pad = self.model.config.eos_id, self.model.config.pad_id
        src = pad_sources(sources, pad, eos)
        if terms is not None:  # a sentence without terms is searched as it would be without a glossary
            held = [row for row, own in enumerate(terms) if own]
            free = [row for row, own in enumerate(terms) if not own]
            found = dict(zip(free, self._search_batch([sources[row] for row in free]) if free else [], strict=True))
            # over the whole vocabulary: a term's tokens need not be in the shortlist
            found.update(zip(held, constrained_search(self.growing, src[held].to(self.device), self.options,
                                                      [terms[row] for row in held]), strict=True))
            return [found[row] for row in range(len(sources))]
        if self.shortlist is None or prefixes is not None:  # a prefix's tokens need not be in the shortlist
            return search(self.decoder if self.options.use_cache else self.growing, src.to(self.device), self.options,
                          prefixes)
        # the lists are made on the CPU, where the shortlist is
        return search(self.decoder, src.to(self.device), self.options, vocabularies=self.shortlist.vocabularies(src))

    def _search_batches(self, batches: list[tuple]) -> Iterator[list]:
        """_search_batch(*batch) of each batch, in order; with several workers and batches, `workers`
        batches at once in forked processes of one thread each."""
        if self.workers == 1 or len(batches) <= 1:
            yield from (self._search_batch(*batch) for batch in batches)
            return
        # concurrent.futures rather than multiprocessing.Pool: a worker that dies ends the translation with
        # BrokenProcessPool, where Pool waited for its results forever
        pool = ProcessPoolExecutor(min(self.workers, len(batches)), multiprocessing.get_context("fork"),
                                   _start_worker, (self,))
        try:
            chunk = max(1, TASK_SENTENCES // max(len(batch[0]) for batch in batches))  # batches per task
            yield from pool.map(_search_in_worker, batches, chunksize=chunk)
        except BrokenProcessPool:
            raise NmtError("a decoding worker process died (killed, or out of memory); --workers 1 decodes in "
                           "this process") from None
        except BaseException:  # an interrupt, an error, or a caller that stopped reading: end the workers now
            _stop_workers(pool)
            raise
        finally:  # batches not yet started are dropped
            pool.shutdown(cancel_futures=True)

    def translate(self, lines: list[str], prefixes: list[str | None] | None = None) -> list[Translation]:
        """One Translation per line, in order; a line's prefix (French) starts its translation."""
        results: list[Translation | None] = [None] * len(lines)
        for index, translation in self.translate_as_ready(lines, prefixes):
            results[index] = translation
        return results

    def translate_as_ready(self, lines: list[str], prefixes: list[str | None] | None = None,
                           strict: bool = False) -> Iterator[tuple[int, Translation]]:
        """(line index, Translation) pairs as batches finish: the lines the translation memory serves first, then
        the model's (_translate_as_ready)."""
        if not self.memories or strict:
            yield from self._translate_as_ready(lines, prefixes, strict)
            return
        ties: dict[int, list[Match]] = {}
        left = []
        for index, line in enumerate(lines):
            matches = [] if prefixes and prefixes[index] else self._memory_matches(line)
            if len(matches) == 1:
                text = self._written(line, matches[0].translation)
                yield index, Translation(line, text, None, [(text, 0.0)], memory=matches[0].to_dict())
                continue
            if matches:
                ties[index] = matches
            left.append(index)
        found = self._translate_as_ready([lines[i] for i in left], [prefixes[i] for i in left] if prefixes else None)
        for position, translation in found:
            index = left[position]
            if index in ties:  # the memory's translations disagree as often: the one nearest the model's
                from sacrebleu import sentence_chrf

                best = max(ties[index], key=lambda match: sentence_chrf(match.translation, [translation.text]).score)
                text = self._written(translation.source, best.translation)
                translation = replace(translation, text=text, nbest=[(text, 0.0)], memory=best.to_dict(),
                                      flags=[])
            elif self.fuzzy_threshold is not None and translation.text:
                # the user's memories: the shipped one serves short strings exactly, and offers nothing
                offers = [memory.fuzzy(translation.source, self.fuzzy_threshold)
                          for memory, most_words in self.memories if most_words is None]
                offered = max((offer for offer in offers if offer), key=lambda offer: offer.score, default=None)
                translation = replace(translation, memory=offered.to_dict() if offered else None)
            yield index, translation

    def _written(self, line: str, french: str) -> str:
        """A memory's translation of `line` written as the typography says, as the model's are."""
        return punctuate(render_sentence(line, french, self.typography), self.typography)

    def _memory_matches(self, line: str) -> list[Match]:
        """The exact matches of `line` that may serve it, of the first memory that has some: a line short enough
        for the memory, a translation in the register asked for (or addressing no one)."""
        unwanted = {"formal": ("informal", "mixed"), "informal": ("formal", "mixed")}.get(self.formality, ())
        for memory, most_words in self.memories:
            if not line.strip() or (most_words is not None and len(line.split()) > most_words):
                continue
            matches = [match for match in memory.exact(line) if register_of(match.translation) not in unwanted]
            if matches:
                return matches
        return []

    def _translate_as_ready(self, lines: list[str], prefixes: list[str | None] | None = None,
                            strict: bool = False, lowered: bool = False) -> Iterator[tuple[int, Translation]]:
        """(line index, Translation) pairs as batches finish: empty lines first, then by length. A line's
        prefix starts the translation of its first sentence. Numbers ("35", "1,249.99", "1980s",
        "35-year-old") and first names ("Bob") are left to the model; a line whose translation loses a number's
        digits or a first name is translated again at the end with them behind placeholders (`strict`), as
        codes are (nmt.text.protect). One whose translation copies a sentence's first word, capital and all
        (copies_opening), is translated again with that word in lower case (`lowered`), and keeps the second
        translation where it does not copy the word."""
        retry: list[int] = []
        relower: dict[int, Translation] = {}  # line index -> its first translation, which copied a first word
        sources: list[list[int]] = []
        owners: list[int] = []  # line index of each source piece
        forced: list[list[int]] = []  # prefix token ids of each source piece
        required: list[list[list[int]]] = []  # token ids of the glossary terms of each source piece
        units: list[list[Unit]] = []
        for index, line in enumerate(lines):
            if self.ordinary_input and is_foreign(line):  # nothing in it the model reads: kept as written
                units.append([])
                yield index, Translation(line, line, None, [(line, 0.0)], flags=["copy"],
                                         alignment=[] if self.alignments else None)
                continue
            units.append(self._units(line, strict, lowered))
            pieces = [piece for unit in units[-1] for piece in unit.pieces]
            if not pieces:
                yield index, Translation(line, "", None, alignment=[] if self.alignments else None)
            prefix = self.tokenizer.encode(prefixes[index]) if prefixes and prefixes[index] else []
            forced.extend([prefix] + [[]] * (len(pieces) - 1) if pieces else [])  # the first piece starts with it
            required.extend(terms for unit in units[-1] for terms in [unit.terms] + [[]] * (len(unit.pieces) - 1))
            sources.extend(pieces)
            owners.extend([index] * len(pieces))
        pieces_left = [0] * len(lines)
        for owner in owners:
            pieces_left[owner] += 1
        done: dict[int, list] = {}
        batches = [batch.tolist() for batch in sorted_batches([len(ids) for ids in sources], self.max_tokens,
                                                              self.batch_size)]
        if (any(forced) or any(required)) and self.shortlist is not None and not self._noted_prefix:
            log.warning("lines with a target prefix or glossary terms are decoded over the whole vocabulary, "
                        "not the shortlist")
            self._noted_prefix = True
        if any(forced) and any(required):
            raise UsageError("target prefixes and a glossary do not combine: give one or the other")
        searched = self._search_batches([([sources[i] for i in batch],
                                          [forced[i] for i in batch] if any(forced[i] for i in batch) else None,
                                          [required[i] for i in batch] if any(required[i] for i in batch) else None)
                                         for batch in batches])
        for batch, results in zip(batches, searched, strict=True):
            for source_index, result in zip(batch, results, strict=True):
                owner = owners[source_index]
                done.setdefault(owner, []).append((source_index, result))
                pieces_left[owner] -= 1
                if pieces_left[owner] == 0:
                    translation = self._join(lines[owner], units[owner], [r for _, r in sorted(done.pop(owner))])
                    if self.alignments:
                        translation = replace(translation, alignment=align(self.model, self.tokenizer,
                                                                           translation.source, translation.text))
                    if not strict and not keeps_entities(units[owner], translation.text):
                        retry.append(owner)
                        continue
                    if self.min_confidence is not None and translation.confidence < self.min_confidence:
                        translation = replace(translation, text="", nbest=[])
                        self.withheld += 1
                    if not lowered and self.typography.active and self.ordinary_input \
                            and copies_opening(units[owner], translation.text):  # as _as_the_model_knows
                        relower[owner] = translation
                        continue
                    yield owner, translation
        if retry:
            again = self._translate_as_ready([lines[i] for i in retry],
                                             [prefixes[i] for i in retry] if prefixes else None, strict=True,
                                             lowered=lowered)
            yield from ((retry[index], translation) for index, translation in again)
        if relower:
            owners = list(relower)
            again = self._translate_as_ready([lines[i] for i in owners],
                                             [prefixes[i] for i in owners] if prefixes else None, strict=strict,
                                             lowered=True)
            for index, translation in again:
                owner = owners[index]
                yield owner, relower[owner] if copies_opening(units[owner], translation.text) else translation

    def _join(self, line: str, units: list[Unit], results: list) -> Translation:
        """The Translation of `line` from its units and the search's results, one per piece, in order."""
        if not results:
            return Translation(line, "", None)
        keep = tuple(original for unit in units if unit.protected for original in unit.protected.originals)
        if len(results) == 1:
            nbest = [(self._finished(units[0].restore(self.tokenizer.decode(h.tokens), self.typography), keep), h.score)
                     for h in results[0]]
            text, score = nbest[0]
        else:
            texts, start = [], 0
            for unit in units:
                hypotheses = results[start : start + len(unit.pieces)]
                translated = unit.restore(" ".join(self.tokenizer.decode(h[0].tokens) for h in hypotheses),
                                          self.typography)
                texts.append(fit_piece(unit.source, translated))  # a clause's capital and final mark
                start += len(unit.pieces)
            text = self._finished(" ".join(texts), keep)
            score = sum(r[0].score for r in results) / len(results)
            nbest = [(text, score)]
        best = [r[0] for r in results]
        confidence = sum(h.log_prob for h in best) / sum(len(h.tokens) + 1 for h in best)
        pieces = [piece for unit in units for piece in unit.pieces]
        return Translation(line, text, score, nbest, confidence=confidence,
                           flags=self._flags(line, text, best, pieces, units, confidence))

    def _finished(self, text: str, keep: tuple[str, ...]) -> str:
        """A line's translation, its units put together, in the register asked for (the vous imperatives the
        model wrote though asked for tu, as tu's: nmt.text.register.informal_imperatives; a tu imperative with its
        pronoun though asked for vous, as vous's: formal_imperatives) and punctuated as the typography says,
        `keep` (what placeholders carried) as it is."""
        if self._formality == "informal":
            text = informal_imperatives(text)
        elif self._formality == "formal":
            text = formal_imperatives(text)
        return punctuate(text, self.typography, keep)

    def _flags(self, line: str, text: str, best: list, pieces: list[list[int]], units: list[Unit],
               confidence: float) -> list[str]:
        """The failures a translation shows, a user's reasons to check it: it copies the source, loops, reached
        the length cap, is empty; it keeps English words, loses a number or a name, holds a date in digits that may
        be month or day first, or is less confident than most translations of its kind (nmt.text.flags)."""
        flags = []
        if text.strip() and normalized(text) == normalized(line):
            flags.append("copy")
        elif text.strip():
            kept = [original for unit in units if unit.protected for original in unit.protected.originals]
            prose, french = line, text
            for original in kept:  # what went behind placeholders comes back as written, rightly
                prose, french = prose.replace(original, " "), french.replace(original, " ")
            if words := untranslated_words(prose, french):
                flags.append("untranslated: " + ", ".join(words))
            if words := unknown_words(prose, french):
                flags.append("not French: " + ", ".join(words))
        rewritten = self.typography.active and self.ordinary_input
        if numbers := lost_numbers(self._as_the_model_knows(line) if rewritten else line, digit_centuries(text)):
            flags.append("number lost: " + ", ".join(numbers))
        names = [name_to_keep(unit.source[start:end]) for unit in units
                 for start, end in kept_name_spans(unit.source) + titled_name_spans(unit.source)]
        if names := missing_names(list(dict.fromkeys(names)), text):
            flags.append("name lost: " + ", ".join(names))
        if dates := dates_of_unknown_order(line):  # a French reader reads them day first
            flags.append("date order unknown: " + ", ".join(dates))
        floor = low_confidence(line, self.confidence_floors)
        if floor is not None and text.strip() and confidence < floor:
            flags.append(f"low confidence: {confidence:.2f} < {floor:.2f}")
        if loops(text):
            flags.append("loop")
        options = self.options
        caps = [min(math.floor(options.max_len_a * (len(ids) + 1)) + options.max_len_b, self.model.config.max_positions)
                for ids in pieces]
        if any(len(h.tokens) + 1 >= cap for h, cap in zip(best, caps, strict=True)):
            flags.append("max_length")
        if not text.strip():
            flags.append("empty")
        return flags


def normalized(text: str) -> str:
    """Letters and digits alone, lowercased: what a copied source has in common with the source."""
    return "".join(char for char in text.lower() if char.isalnum())
