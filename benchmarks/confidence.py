"""How well `confidence` (nmt translate --format jsonl) ranks translations by quality: Spearman's rank
correlation between each line's confidence and its sentence-level chrF, on the validation sets.

    python benchmarks/confidence.py [--model MODEL.pt] [--sets multi30k:valid,tatoeba:dev] [--out ...]
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import decoding, model_file  # noqa: E402

from nmt.data.corpus import parse_test_set  # noqa: E402
from nmt.decoding.search import SearchOptions  # noqa: E402
from nmt.decoding.translate import Translator  # noqa: E402
from nmt.model.checkpoint import load_checkpoint  # noqa: E402


def ranks(values: list[float]) -> np.ndarray:
    """Ranks with ties averaged, as Spearman's coefficient takes them."""
    values = np.asarray(values)
    order = values.argsort(kind="stable")
    ranked = np.empty(len(values))
    ranked[order] = np.arange(len(values))
    for value in np.unique(values):
        tied = values == value
        ranked[tied] = ranked[tied].mean()
    return ranked


def spearman(x: list[float], y: list[float]) -> float:
    return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def main() -> None:
    from sacrebleu.metrics import CHRF

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A checkpoint, or a shipped model's name; default the default shipped model.")
    parser.add_argument("--sets", default="multi30k:valid,tatoeba:dev")
    parser.add_argument("--out", default=str(Path(__file__).parent / "CONFIDENCE.md"))
    args = parser.parse_args()
    args.model = model_file(args.model)
    checkpoint = load_checkpoint(args.model)
    options = SearchOptions(**{k: v for k, v in checkpoint.decoding.items() if k in ("beam_size", "lenpen")})
    translator = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options))
    chrf = CHRF()
    rows = []
    for name in args.sets.split(","):
        pairs = parse_test_set(name)
        translations = translator.translate(pairs.source)
        quality = [chrf.sentence_score(t.text, [ref]).score for t, ref in zip(translations, pairs.target, strict=True)]
        confidence = [t.confidence for t in translations]
        score = [t.score for t in translations]
        correlations = spearman(confidence, quality), spearman(score, quality)
        rows.append(f"| {name} | {len(quality)} | {correlations[0]:.3f} | {correlations[1]:.3f} |")
    text = "\n".join([
        "# How well confidence ranks translations", "",
        f"`python benchmarks/confidence.py --model {args.model}`, beam {options.beam_size}, length penalty "
        f"{options.lenpen}, fp32, {platform.machine()}. Spearman's rank correlation between each line's value",
        "and its sentence-level chrF (sacreBLEU CHRF defaults) against the reference:", "",
        "| set | lines | confidence (mean token log-probability) | score (log-probability / length ** lenpen) |",
        "|---|---|---|---|", *rows, ""])
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
