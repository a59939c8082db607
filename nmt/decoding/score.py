"""The model's log-probability of given translations: for filtering noisy corpora (dual cross-entropy),
reranking n-best lists, or checking a decoder.

    scorer = Scorer(model, tokenizer, lenpen=1.0)
    scorer.score(["A dog runs."], ["Un chien court."])   ->  [PairScore(log_prob=-1.9, score=-0.38, tokens=[...])]

Each pair is scored by teacher forcing over the full vocabulary (no shortlist): log P(target, EOS | source)
summed over the target's pieces and EOS, and normalized as nmt.decoding.search ranks a finished hypothesis
(log_prob / length ** lenpen, EOS counted), so the score of a beam hypothesis equals the score
`nmt translate --format jsonl` printed for it. The text is scored as it is: no sentence splitting, no
placeholders (`nmt translate --no-protect` on single sentences decodes the same text).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from nmt.data.batching import collate, sorted_batches
from nmt.decoding.search import length_penalty
from nmt.model.transformer import Transformer
from nmt.text.tokenizer import REGISTER_MARKS, Tokenizer


@dataclass(frozen=True)
class PairScore:
    log_prob: float | None  # None for a pair with an empty source, which is not scored (as translate does)
    score: float | None  # log_prob / (pieces + 1) ** lenpen
    tokens: list[float]  # per target piece, EOS last

    def to_json(self, per_token: bool) -> str:
        record = {"log_prob": self.log_prob, "score": self.score}
        if per_token:
            record["tokens"] = self.tokens
        return json.dumps(record)

    def to_text(self, per_token: bool) -> str:
        if self.log_prob is None:
            return ""
        text = f"{self.log_prob:.6f}"
        return text + "\t" + " ".join(f"{value:.6f}" for value in self.tokens) if per_token else text


class Scorer:
    def __init__(self, model: Transformer, tokenizer: Tokenizer, lenpen: float = 1.0, max_tokens: int = 4096,
                 formality: str = "auto"):
        """formality: the register tag each source opens with (nmt.decoding.translate.Translator's), none for auto."""
        self.model = model.eval()
        self.mark = REGISTER_MARKS.get(formality, "")
        self.tokenizer = tokenizer
        self.lenpen = lenpen
        self.max_tokens = max_tokens
        self.device = next(model.parameters()).device

    def score(self, sources: list[str], targets: list[str]) -> list[PairScore]:
        """One PairScore per pair, in order; pairs are batched by length up to max_tokens padded tokens."""
        source_ids = self.tokenizer.encode_batch([self.mark + source if source else "" for source in sources])
        target_ids = self.tokenizer.encode_batch(targets)
        results = [PairScore(None, None, [])] * len(sources)  # kept for the pairs with an empty source
        kept = [i for i in range(len(sources)) if source_ids[i]]
        lengths = [len(source_ids[i]) + len(target_ids[i]) + 1 for i in kept]  # + 1: EOS and BOS on both sides
        for batch in ([kept[k] for k in batch] for batch in sorted_batches(lengths, self.max_tokens)):
            scored = self._score_batch([source_ids[i] for i in batch], [target_ids[i] for i in batch])
            for index, pair in zip(batch, scored, strict=True):
                results[index] = pair
        return results

    @torch.inference_mode()
    def _score_batch(self, sources: list[list[int]], targets: list[list[int]]) -> list[PairScore]:
        config = self.model.config
        pad, bos, eos = config.pad_id, config.bos_id, config.eos_id
        src, tgt_in, tgt_out = collate(sources, targets, pad, bos, eos)
        logits = self.model(src.to(self.device), tgt_in.to(self.device))  # (B, T, V)
        log_probs = F.log_softmax(logits.float(), dim=-1).gather(2, tgt_out.to(self.device)[:, :, None])[:, :, 0]
        scores = []
        for row, target in enumerate(targets):
            tokens = log_probs[row, : len(target) + 1].tolist()
            total = sum(tokens)
            scores.append(PairScore(total, total / length_penalty(len(tokens), self.lenpen), tokens))
        return scores
