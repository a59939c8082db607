"""Several models decoding as one: at each step, the average of their log-probabilities (as Marian's
ensembles weigh theirs), for the search it looks like one model (`config`, `init_state`, `decode_step`).

    ensemble = Ensemble([FlatDecoder(a, backend), FlatDecoder(b, backend)])     # models with the same vocabulary
    hypotheses = search(ensemble, src, SearchOptions(beam_size=4))
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from nmt.model.shortlist import Vocabularies


@dataclass
class EnsembleState:
    """One decoder state per model, moved together."""

    states: list

    def reorder(self, rows: Tensor) -> EnsembleState:
        self.states = [state.reorder(rows) for state in self.states]
        return self

    def select(self, sentences: Tensor, reordered: Tensor | None = None) -> EnsembleState:
        self.states = [state.select(sentences, reordered) for state in self.states]
        return self


class Ensemble:
    fixed_rows = False  # as a decoder of nmt.decoding.search

    def __init__(self, decoders: list):
        if len({decoder.config.vocab_size for decoder in decoders}) != 1:
            raise ValueError("the models of an ensemble must share one vocabulary")
        self.decoders = decoders
        self.config = decoders[0].config

    def init_state(self, src: Tensor, beam_size: int = 1, use_cache: bool = True, max_length: int | None = None,
                   vocabularies: Vocabularies | None = None) -> EnsembleState:
        return EnsembleState([decoder.init_state(src, beam_size=beam_size, use_cache=use_cache, max_length=max_length,
                                                 vocabularies=vocabularies) for decoder in self.decoders])

    def decode_step(self, tokens: Tensor, state: EnsembleState) -> tuple[Tensor, EnsembleState]:
        """The models' mean log-probabilities (R, V) of the next token, and the state after `tokens` (R,)."""
        steps = [decoder.decode_step(tokens, own) for decoder, own in zip(self.decoders, state.states, strict=True)]
        state.states = [own for _, own in steps]
        return torch.stack([log_probs.float() for log_probs, _ in steps]).mean(dim=0), state
