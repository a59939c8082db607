"""Scoring with sacreBLEU: BLEU and chrF with their signatures, cased on raw text by default.

    score(hypotheses, references)                 -> Scores(bleu=.., chrf=.., signatures={...})
    score(hypotheses, references, lc_tok=True)    # lowercased, Moses-tokenized French, as Multi30k papers
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nmt.errors import UsageError


@dataclass
class Scores:
    bleu: float
    chrf: float
    lines: int
    signatures: dict[str, str] = field(default_factory=dict)
    bleu_lc_tok: float | None = None

    def to_dict(self) -> dict:
        record = {"bleu": round(self.bleu, 2), "chrf": round(self.chrf, 2), "lines": self.lines,
                  "signatures": self.signatures}
        if self.bleu_lc_tok is not None:
            record["bleu_lc_tok"] = round(self.bleu_lc_tok, 2)
        return record


def moses_lc_tok(lines: list[str], lang: str = "fr") -> list[str]:
    """Lowercase, normalize punctuation and Moses-tokenize with its escapes (`l&apos; herbe`)."""
    try:
        from sacremoses import MosesPunctNormalizer, MosesTokenizer
    except ImportError:
        raise UsageError("--lc-tok needs sacremoses: pip install 'nmt-transformer[moses]'") from None
    normalizer, tokenizer = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    return [tokenizer.tokenize(normalizer.normalize(line.lower()), return_str=True, escape=True) for line in lines]


def score(hypotheses: list[str], references: list[str], lc_tok: bool = False) -> Scores:
    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references):
        raise UsageError(f"{len(hypotheses)} hypotheses but {len(references)} references: line counts differ")
    if not hypotheses:
        raise UsageError("nothing to score: the files have no lines")
    bleu, chrf = BLEU(), CHRF()
    result = Scores(
        bleu=bleu.corpus_score(hypotheses, [references]).score,
        chrf=chrf.corpus_score(hypotheses, [references]).score,
        lines=len(hypotheses),
        signatures={"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())},
    )
    if lc_tok:
        tokenized = BLEU(tokenize="none", force=True)
        result.bleu_lc_tok = tokenized.corpus_score(moses_lc_tok(hypotheses), [moses_lc_tok(references)]).score
        result.signatures["bleu_lc_tok"] = f"moses-lc-tok(fr)+{tokenized.get_signature()}"
    return result


# a phrase said four times running, or a character six times: a translation that loops
LOOP = re.compile(r"(\S.+?)\1{3,}|(\S)\2{5,}")


def loops(text: str) -> bool:
    return LOOP.search(text) is not None
