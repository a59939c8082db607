"""Glossaries: terms that must appear in the translation, by lexically constrained beam search.

    glossary = Glossary.read("terms.tsv")                 # English term TAB French term, one pair a line
    glossary.matches("The cat sat.")  ->  ["le chat"]     # whole words, case-insensitive
    constrained_search(model, src, options, [[ids_of("le chat")]])   # per sentence, its constraints' ids

The search is dynamic beam allocation (Post and Vilar 2018) over subword tokens: besides each hypothesis's
best continuations, the next token of the constraint it is inside, and the first token of each constraint
it has not met, are candidates; a hypothesis may end only once it has met all of its constraints; and
the K places of the beam are shared out among "banks" of hypotheses by how many constraint tokens they
have produced, so that hypotheses that have met more constraints are not crowded out by those that are
merely more probable. A sentence whose constraints cannot be met within the length cap keeps the
unconstrained search's result.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from nmt.decoding.search import (
    Hypothesis,
    SearchOptions,
    as_tensor,
    finalize,
    finished_searching,
    initial_state,
    max_lengths,
    next_log_probs,
    search,
)
from nmt.errors import UsageError


@dataclass(frozen=True)
class Glossary:
    terms: tuple[tuple[str, str], ...]  # (English, French)

    @classmethod
    def read(cls, path: str | Path) -> Glossary:
        """A TSV file of English term TAB French term; blank lines skipped; anything else is one error line."""
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the glossary {path}: {getattr(exc, 'strerror', None) or exc}") from None
        terms = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            parts = [part.strip() for part in line.split("\t")]
            if len(parts) != 2 or not all(parts):
                raise UsageError(f"{path}, line {number}: expected an English term, a tab, a French term")
            terms.append((parts[0], parts[1]))
        return cls(tuple(terms))

    def matches(self, sentence: str) -> list[str]:
        """The French terms whose English term occurs in `sentence` as whole words, case-insensitive, in the
        glossary's order, each once."""
        found = []
        for english, french in self.terms:
            if re.search(rf"(?<!\w){re.escape(english)}(?!\w)", sentence, re.IGNORECASE) and french not in found:
                found.append(french)
        return found


@dataclass(frozen=True)
class Progress:
    """Which of a hypothesis's constraints it has met, and how far it is into the one it is inside."""

    met: frozenset[int] = frozenset()
    inside: int | None = None  # index of the constraint being produced
    position: int = 0  # tokens of it produced so far

    def after(self, token: int, constraints: list[list[int]]) -> Progress:
        if self.inside is not None and constraints[self.inside][self.position] == token:
            if self.position + 1 == len(constraints[self.inside]):
                return Progress(self.met | {self.inside})
            return Progress(self.met, self.inside, self.position + 1)
        for index, constraint in enumerate(constraints):  # (re)start one whose first token this is
            if index not in self.met and constraint[0] == token:
                return Progress(self.met | {index}) if len(constraint) == 1 else Progress(self.met, index, 1)
        return Progress(self.met)

    def bank(self, constraints: list[list[int]]) -> int:
        """Constraint tokens produced: the hypothesis's bank."""
        return sum(len(constraints[index]) for index in self.met) + self.position

    def next_tokens(self, constraints: list[list[int]]) -> set[int]:
        """The tokens that advance a constraint: the next of the one it is inside, the first of the unmet."""
        tokens = {constraint[0] for index, constraint in enumerate(constraints) if index not in self.met}
        if self.inside is not None:
            tokens.add(constraints[self.inside][self.position])
        return tokens


def constrained_search(model, src: Tensor, options: SearchOptions, constraints: list[list[list[int]]]
                       ) -> list[list[Hypothesis]]:
    """Beam search (N, S) -> per sentence, up to nbest hypotheses holding every one of its constraints
    (lists of target token ids); a sentence without constraints is searched as beam_search does. `model`: a
    decoder of nmt.decoding.search whose states grow (dynamic beam allocation changes rows per sentence)."""
    if model.fixed_rows:
        raise ValueError("constrained search needs a decoder whose states grow, not fixed shapes")
    found = _search(model, src, options, constraints)
    unmet = [i for i, hypotheses in enumerate(found) if not hypotheses]
    if unmet:  # constraints that did not fit: the unconstrained result rather than none
        for i, hypotheses in zip(unmet, search(model, src[unmet], options), strict=True):
            found[i] = hypotheses
    return found


@torch.inference_mode()
def _search(model, src: Tensor, options: SearchOptions, constraints: list[list[list[int]]]) -> list[list[Hypothesis]]:
    """beam_search's loop (rows sentence-major, `beam` rows a sentence after the first step), step
    (next_log_probs) and stopping rule (finished_searching), with the candidates, endings and allocation of
    dynamic beam allocation; hypotheses are (score, tokens, progress)."""
    config = model.config
    beam, eos = options.beam_size, config.eos_id
    max_lens = [min(limit + sum(map(len, own)), config.max_positions) for limit, own in   # room for the terms
                zip(max_lengths(src, config.pad_id, options, config.max_positions), constraints, strict=True)]
    state = initial_state(model, src, 1, options, max_lens)
    active = list(range(src.size(0)))  # sentence index of each open sentence
    beams = [[(0.0, [], Progress())] for _ in active]  # per open sentence, its rows' hypotheses
    tokens = torch.full((len(active),), config.bos_id, dtype=torch.long, device=src.device)
    finished: list[list[Hypothesis]] = [[] for _ in active]
    for step in range(max(max_lens)):
        histories = [tokens_so_far for rows in beams for _, tokens_so_far, _ in rows]
        log_probs, state = next_log_probs(model, tokens, state, step, options, [max_lens[i] for i in active],
                                          histories)  # (rows, V)
        top_tokens = log_probs.topk(min(beam, log_probs.size(-1)), dim=-1).indices.tolist()
        width = len(beams[0])
        # each row's choices, its best tokens and those that advance its constraints, read in one gather
        row_choices = [set(top_tokens[row]) | progress.next_tokens(constraints[active[row // width]])
                       for row, (_, _, progress) in enumerate(h for rows in beams for h in rows)]
        pairs = [(row, token) for row, tokens_of_row in enumerate(row_choices) for token in tokens_of_row]
        gathered = log_probs[as_tensor([row for row, _ in pairs], torch.int64, src.device),
                             as_tensor([token for _, token in pairs], torch.int64, src.device)].tolist()
        values = dict(zip(pairs, gathered, strict=True))
        rows, next_tokens, next_beams, keep = [], [], [], []
        for i, sentence in enumerate(active):
            own = constraints[sentence]
            candidates: dict[tuple[int, int], tuple[float, list[int], Progress]] = {}
            for k, (score, history, progress) in enumerate(beams[i]):
                row = i * width + k
                for token in row_choices[row]:
                    total = score + values[(row, token)]
                    if total == -math.inf:
                        continue
                    if token == eos:
                        if len(progress.met) == len(own):  # constrain() bans EOS before min_len
                            finished[sentence].append(finalize(history, total, options.lenpen))
                        continue
                    candidates[(row, token)] = (total, history + [token], progress.after(token, own))
            chosen = _allocate(candidates, beam, own)
            if chosen and not finished_searching(finished[sentence], max(candidates[key][0] for key in chosen), beam,
                                                 options):  # the beam search's rule
                keep.append(i)
            fill = beam - len(chosen)  # dead rows fill the beam: the state holds `beam` rows a sentence
            row, token = chosen[-1] if chosen else (i * width, eos)
            next_beams.append([candidates[key] for key in chosen] + [(-math.inf, [], Progress())] * fill)
            rows.extend([key[0] for key in chosen] + [row] * fill)
            next_tokens.extend([key[1] for key in chosen] + [token] * fill)
        if not keep:
            break
        reordered = as_tensor(rows, torch.int64, src.device)
        if len(keep) == len(active):
            state.reorder(reordered)
        else:
            state.select(as_tensor(keep, torch.int64, src.device), reordered)
            rows = [r for i in keep for r in range(i * beam, (i + 1) * beam)]
            next_tokens = [next_tokens[r] for r in rows]
            next_beams = [next_beams[i] for i in keep]
            active = [active[i] for i in keep]
        beams = next_beams
        tokens = as_tensor(next_tokens, torch.int64, src.device)
    return [sorted(hypotheses, key=lambda h: h.score, reverse=True)[: options.nbest] for hypotheses in finished]


def _allocate(candidates: dict, beam: int, constraints: list[list[int]]) -> list[tuple[int, int]]:
    """The `beam` candidates kept: taken in turn from each bank (constraint tokens produced), the fullest
    bank first, each bank's best first (dynamic beam allocation)."""
    banks: dict[int, list] = {}
    for key, (score, _, progress) in candidates.items():
        banks.setdefault(progress.bank(constraints), []).append((score, key))
    queues = [sorted(banks[bank], reverse=True) for bank in sorted(banks, reverse=True)]
    chosen: list[tuple[int, int]] = []
    while len(chosen) < beam and any(queues):
        for queue in queues:
            if queue and len(chosen) < beam:
                chosen.append(queue.pop(0)[1])
    return chosen
