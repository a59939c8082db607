"""The decoding configuration a command runs with, resolved once: the flags given, over the checkpoint's
stored defaults (`nmt tune` writes them), over the library's.

    flags = DecodingFlags(beam=5, precision=None)              # what the command line gave; None: not given
    config = DecodingConfig.resolve(flags, checkpoint)         # every value concrete (precision never "auto")
    translator = Translator.from_checkpoint(checkpoint, config)  # nmt.decoding.translate
    log.info("decoding: %s", config.summary())

`nmt translate`, `eval`, `serve` and `score` build one from the flags cli/options.py declares for them all;
`nmt serve` shows it at /health; library users build one the same way (a field of it can be replaced, as
tests do with `dataclasses.replace`). The module imports torch only when it resolves: the command line builds
DecodingFlags before it imports torch.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nmt.errors import UsageError

if TYPE_CHECKING:  # imported where used: the command line reads DecodingFlags before it imports torch
    import torch

    from nmt.decoding.search import SearchOptions
    from nmt.model.backend import Backend
    from nmt.model.checkpoint import Checkpoint
    from nmt.text.conventions import Typography

# The longest piece of a line translated whole unless the model's decoding defaults (or --clause-split) say
# less: sentences of Multi30k, Tatoeba and News Commentary are shorter than a tenth of this; a sentence past
# it is cut at clause punctuation, then at word starts.
MAX_PIECE_TOKENS = 128
# the SearchOptions fields a checkpoint may store (nmt tune) and a flag may give
STORED_SEARCH = ("beam_size", "lenpen", "max_len_a", "max_len_b", "min_len", "no_repeat_ngram", "temperature", "seed")


@dataclass(frozen=True)
class DecodingFlags:
    """The decoding options as given on the command line; None where not given."""

    beam: int | None = None
    nbest: int | None = None
    lenpen: float | None = None
    max_len_a: float | None = None
    max_len_b: int | None = None
    min_len: int | None = None
    no_repeat_ngram: int | None = None
    sampling: str | None = None  # topk:K or topp:P
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    batch_size: int | None = None
    device: str | None = None  # auto, cpu, cuda
    precision: str | None = None
    threads: int | None = None
    workers: int | None = None
    no_cache: bool | None = None
    shortlist: bool | None = None
    exact: bool | None = None
    cuda_graphs: bool | None = None
    no_protect: bool | None = None
    clause_split: int | None = None
    protect_names: bool | None = None
    glossary: Path | None = None
    min_confidence: float | None = None
    alignments: bool | None = None
    formality: str | None = None  # formal, informal, auto
    typography: str | None = None  # fr, fr-CA, none
    apostrophe: str | None = None  # keep, straight, curly
    memory: tuple[Path, ...] | None = None  # translation memories (nmt.data.memory)
    memory_threshold: float | None = None
    no_memory: bool | None = None  # not the shipped interface memory
    verbose: bool | None = None


@dataclass(frozen=True)
class DecodingConfig:
    """Everything that decides how a command decodes, each value as it will be used."""

    search: SearchOptions
    backend: Backend | None  # the precision (never auto) on the device, resolved once (nmt.model.backend); None
    # (a plain config): the model as it is, fp32 on its device
    shortlist: bool
    max_tokens: int
    batch_size: int | None
    threads: int
    workers: int
    cuda_graphs: bool
    ordinary_input: bool
    clause_split: int | None  # None: MAX_PIECE_TOKENS, with a warning when a sentence is cut
    protect_names: bool
    glossary: Path | None = None
    min_confidence: float | None = None
    alignments: bool = False
    formality: str = "auto"  # the register asked of a model trained with register tags (nmt.data.register)
    # how numbers, dates and punctuation are written (nmt.text.conventions, imported when resolving: every command
    # reads DecodingFlags at start)
    typography: Typography = field(default_factory=lambda: typography_of(DecodingFlags()))
    memories: tuple[Path, ...] = ()  # the user's translation memories, before the shipped one
    memory_threshold: float = 0.85  # a fuzzy match of theirs at this similarity or above is offered
    shipped_memory: bool = True  # the shipped interface memory serves short lines' exact matches

    @classmethod
    def plain(cls, search: SearchOptions | None = None, **changes) -> DecodingConfig:
        """The decoding of a model already in memory, without a checkpoint's defaults (training's validation, `nmt
        tune`, tests): `search` (default SearchOptions()) over the whole vocabulary, the model as it is, the text
        protected as `nmt translate` protects it, but no typography, names, memories or glossary; `changes`
        replace any field: DecodingConfig.plain(SearchOptions(beam_size=1), max_tokens=8192)."""
        from nmt.decoding.search import SearchOptions
        from nmt.text.conventions import NO_TYPOGRAPHY

        values = dict(search=search or SearchOptions(), backend=None, shortlist=False, max_tokens=4096,
                      batch_size=None, threads=1, workers=1, cuda_graphs=True, ordinary_input=True, clause_split=None,
                      protect_names=False, typography=NO_TYPOGRAPHY, shipped_memory=False)
        return cls(**{**values, **changes})

    @classmethod
    def resolve(cls, flags: DecodingFlags, checkpoint: Checkpoint, workers: int | None = None,
                ensemble: bool = False) -> DecodingConfig:
        """`flags` over `checkpoint`'s stored defaults over the library's. Sets torch's thread count when
        flags give one. workers: the default when flags give none (else default_workers). ensemble: other
        models decode with this one (no shortlist unless asked for, which then fails)."""
        import torch

        from nmt.model.backend import Backend, resolve_device

        if flags.threads is not None:
            if flags.threads < 1:
                raise UsageError(f"--threads must be at least 1, not {flags.threads}")
            torch.set_num_threads(flags.threads)
        device = resolve_device(flags.device or "auto")
        precision, shortlist = decoding_mode(flags.precision, flags.shortlist, bool(flags.exact))
        backend = Backend.resolve(precision, device, exact=bool(flags.exact))
        if flags.memory_threshold is not None and not 0 < flags.memory_threshold <= 1:
            raise UsageError(f"--memory-threshold is a similarity between 0 and 1, not {flags.memory_threshold}")
        if flags.glossary is not None and flags.sampling is not None:
            raise UsageError("--glossary needs a beam search: drop --sampling")
        text = stored_text_defaults(checkpoint, flags.clause_split, flags.protect_names)
        chosen_workers = flags.workers if flags.workers is not None else workers
        search = search_options(checkpoint, flags)
        if shortlist is None:
            shortlist = shortlist_pays(checkpoint, search, backend, flags.glossary is not None or ensemble)
        return cls(search=search, backend=backend, shortlist=shortlist,
                   max_tokens=4096 if flags.max_tokens is None else flags.max_tokens, batch_size=flags.batch_size,
                   threads=torch.get_num_threads(),
                   workers=default_workers(device) if chosen_workers is None else chosen_workers,
                   cuda_graphs=flags.cuda_graphs is not False, ordinary_input=not flags.no_protect,
                   clause_split=text["max_piece_tokens"], protect_names=text["protect_names"], glossary=flags.glossary,
                   min_confidence=flags.min_confidence, alignments=bool(flags.alignments),
                   formality=resolve_formality(checkpoint, flags.formality),
                   typography=typography_of(flags), memories=tuple(flags.memory or ()),
                   memory_threshold=0.85 if flags.memory_threshold is None else flags.memory_threshold,
                   shipped_memory=not flags.no_memory)

    @property
    def device(self) -> torch.device:
        return self.backend.device

    @property
    def precision(self) -> str:
        return self.backend.precision

    def to_dict(self) -> dict:
        """Plain values (for JSON: /health, logs)."""
        search = {field.name: getattr(self.search, field.name) for field in dataclasses.fields(self.search)}
        record = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)
                  if field.name not in ("search", "backend")}
        record.update(device=str(self.device), precision=self.precision, backend=self.backend.describe(),
                      glossary=str(self.glossary) if self.glossary else None,
                      memories=[str(path) for path in self.memories],
                      typography={"name": self.typography.name, "apostrophe": self.typography.apostrophe})
        return {"search": search, **record}

    def summary(self) -> str:
        """One line of what decodes and how, for --verbose."""
        s = self.search
        search = (f"sampling top-{'k ' + str(s.top_k) if s.top_k else 'p ' + str(s.top_p)} at temperature "
                  f"{s.temperature:g}, seed {s.seed}" if s.sampling else
                  "greedy" if s.beam_size == 1 else f"beam {s.beam_size}")
        parts = [search, f"lenpen {s.lenpen:g}", f"length {s.min_len}..{s.max_len_a:g}x+{s.max_len_b}",
                 f"no-repeat-ngram {s.no_repeat_ngram or 'off'}", f"nbest {s.nbest}",
                 self.backend.describe(), "shortlist" if self.shortlist else "whole vocabulary",
                 f"{self.threads} threads, {self.workers} workers",
                 f"batches of {self.batch_size} sentences" if self.batch_size else f"{self.max_tokens} tokens a batch",
                 f"clause split {self.clause_split or MAX_PIECE_TOKENS}",
                 ("placeholders and names" if self.protect_names else "placeholders") if self.ordinary_input
                 else "text as is"]
        if not s.use_cache:
            parts.append("no cache")
        if self.glossary:
            parts.append(f"glossary {self.glossary}")
        if self.min_confidence is not None:
            parts.append(f"min confidence {self.min_confidence:g}")
        parts.append(f"formality {self.formality}")
        memories = [path.name for path in self.memories] + (["the interface memory"] if self.shipped_memory else [])
        parts.append(f"memory {', '.join(memories)}" if memories else "no memory")
        parts.append(f"typography {self.typography.name}"
                     + (f", {self.typography.apostrophe} apostrophes" if self.typography.active else ""))
        return ", ".join(parts)


def memories_of(config: DecodingConfig) -> tuple:
    """The (memory, most words a line it serves may have) pairs a Translator consults, in order: the user's
    (any line), then the shipped interface memory (lines of SHIPPED_MEMORY_WORDS words at most)."""
    from nmt.data.memory import SHIPPED_MEMORY_WORDS, Deferred, Memory, shipped_memory

    chosen = [(Memory.read(config.memories), None)] if config.memories else []
    if config.shipped_memory:
        chosen.append((Deferred(shipped_memory), SHIPPED_MEMORY_WORDS))
    return tuple(chosen)


def typography_of(flags: DecodingFlags) -> Typography:
    """--typography and --apostrophe as given, else fr with the model's apostrophes."""
    from nmt.text.conventions import Typography

    try:
        return Typography(flags.typography or "fr", flags.apostrophe or "keep")
    except ValueError as exc:
        raise UsageError(f"--{exc}") from None


def knows_registers(checkpoint: Checkpoint) -> bool:
    """Whether the model was trained with register tags (`nmt train --register-tags`)."""
    return bool(checkpoint.training.get("config", {}).get("register_tags"))


def resolve_formality(checkpoint: Checkpoint, formality: str | None) -> str:
    """--formality as given, else formal (as French interfaces and business text write) for a model that knows
    the register tags and auto (the model's own choice) for one that does not; formal or informal asked of a
    model that does not know them is an error, not a silent no."""
    from nmt.text.register import FORMALITIES

    if formality is not None and formality not in FORMALITIES:
        raise UsageError(f"--formality must be {', '.join(FORMALITIES)}, not {formality!r}")
    if not knows_registers(checkpoint):
        if formality not in (None, "auto"):
            raise UsageError(f"--formality {formality}: this model was not trained with register tags (nmt train "
                             "--register-tags), so it cannot be asked for one; use --formality auto or another model")
        return "auto"
    return formality or "formal"


def default_workers(device: torch.device) -> int:
    """How many batches to decode at once: on a CPU where processes can be forked, one per torch thread
    (faster than one process on all the threads at every batch size but beam 4, batch 32, where they tie)."""
    import torch

    if device.type != "cpu" or not can_fork():
        return 1
    return torch.get_num_threads()


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def decoding_mode(precision: str | None, shortlist: bool | None, exact: bool = False) -> tuple[str, bool | None]:
    """The precision and shortlist use: by default precision auto, the fastest mode that kept BLEU within 0.3
    of fp32 on every test set (benchmarks/PRECISION.md), and the shortlist None, for shortlist_pays to
    decide. exact: fp32 over the whole vocabulary, the reference path."""
    if exact:
        if precision not in (None, "fp32") or shortlist:
            raise UsageError("--exact decodes in fp32 without the shortlist: drop --precision and --shortlist")
        return "fp32", False
    return precision or "auto", shortlist


def shortlist_pays(checkpoint: Checkpoint, search: SearchOptions, backend: Backend, whole_vocabulary: bool) -> bool:
    """Whether to decode over the model's lexical shortlist when neither --shortlist nor --no-shortlist is
    given: where it was measured to cost nothing and to pay. With the general model's shortlist, beam 5 on a
    CPU scored within 0.1 BLEU of the whole vocabulary on every test set and ran up to 1.3x as fast; greedy
    search over the same lists ran at half the speed at batch 32 (each sentence's own tokens' weights are
    read once a step for its one row), so it stays on the whole vocabulary (benchmarks/SPEED.md).
    whole_vocabulary: a glossary or an ensemble, which decode over the whole vocabulary."""
    return (checkpoint.shortlist is not None and search.beam_size > 1 and not search.sampling and search.use_cache
            and backend.bf16_caches and not whole_vocabulary)


def search_options(checkpoint: Checkpoint, flags: DecodingFlags) -> SearchOptions:
    """The search: flags over the checkpoint's stored defaults over SearchOptions' own."""
    from nmt.decoding.search import SearchOptions

    given = dict(beam_size=flags.beam, lenpen=flags.lenpen, max_len_a=flags.max_len_a, max_len_b=flags.max_len_b,
                 min_len=flags.min_len, no_repeat_ngram=flags.no_repeat_ngram, temperature=flags.temperature,
                 seed=flags.seed)
    if flags.sampling is not None:
        given.update(parse_sampling(flags.sampling), beam_size=1 if flags.beam is None else flags.beam)
    elif flags.temperature is not None or flags.seed is not None:
        raise UsageError("--temperature and --seed go with --sampling topk:K or topp:P")
    stored = {key: value for key, value in checkpoint.decoding.items() if key in STORED_SEARCH}
    chosen = {**stored, **{key: value for key, value in given.items() if value is not None}}
    try:
        return SearchOptions(**chosen, nbest=flags.nbest or 1, use_cache=not flags.no_cache,
                             kernels=not flags.exact)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def parse_sampling(value: str) -> dict:
    """'topk:K' or 'topp:P' -> SearchOptions' top_k or top_p."""
    kind, _, number = value.partition(":")
    try:
        if kind == "topk" and int(number) > 0:
            return {"top_k": int(number)}
        if kind == "topp" and 0 < float(number) <= 1:
            return {"top_p": float(number)}
    except ValueError:
        pass
    raise UsageError(f"--sampling must be topk:K (K a whole number above 0) or topp:P (0 < P <= 1), not {value!r}")


def stored_text_defaults(checkpoint: Checkpoint, max_piece_tokens: int | None = None,
                         protect_names: bool | None = None) -> dict:
    """max_piece_tokens (--clause-split) and protect_names as given, else the checkpoint's; else None (the
    library's MAX_PIECE_TOKENS, with a warning when a sentence is cut) and False."""
    stored = checkpoint.decoding
    return {"max_piece_tokens": max_piece_tokens if max_piece_tokens is not None else stored.get("max_piece_tokens"),
            "protect_names": protect_names if protect_names is not None else bool(stored.get("protect_names", False))}
