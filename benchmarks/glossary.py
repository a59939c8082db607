"""Glossaries at work: the share of matched terms whose French appears in the translation, and BLEU, with
and without `--glossary`, on a glossary built from the validation sets themselves.

    python benchmarks/glossary.py [--model MODEL.pt] [--sets multi30k:valid,tatoeba:dev] [--out ...]

The glossary: English and French words (lowercased, 4 letters or more) that each occur in at least 5 pairs
of the set and co-occur in at least 80% of the pairs of either (Dice coefficient 0.8 or more), each
English word with its best French one: the set's own consistent terminology ("dog" -> "chien").
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import decoding, model_file  # noqa: E402

from nmt.data.corpus import parse_test_set  # noqa: E402
from nmt.decoding.constraints import Glossary  # noqa: E402
from nmt.decoding.search import SearchOptions  # noqa: E402
from nmt.decoding.translate import Translator  # noqa: E402
from nmt.model.checkpoint import load_checkpoint  # noqa: E402

WORD = re.compile(r"\w{4,}")


def build(sources: list[str], targets: list[str]) -> list[tuple[str, str]]:
    english = [set(WORD.findall(s.lower())) for s in sources]
    french = [set(WORD.findall(t.lower())) for t in targets]
    counts_en = Counter(w for words in english for w in words)
    counts_fr = Counter(w for words in french for w in words)
    both = Counter((e, f) for es, fs in zip(english, french, strict=True) for e in es if counts_en[e] >= 5
                   for f in fs if counts_fr[f] >= 5)
    best: dict[str, tuple[float, str]] = {}
    for (e, f), count in both.items():
        dice = 2 * count / (counts_en[e] + counts_fr[f])
        if dice >= 0.8 and e != f and dice > best.get(e, (0.0, ""))[0]:
            best[e] = (dice, f)
    return sorted((e, f) for e, (_, f) in best.items())


def main() -> None:
    from sacrebleu.metrics import BLEU

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A checkpoint, or a shipped model's name; default the default shipped model.")
    parser.add_argument("--sets", default="multi30k:valid,tatoeba:dev")
    parser.add_argument("--out", default=str(Path(__file__).parent / "GLOSSARY.md"))
    args = parser.parse_args()
    args.model = model_file(args.model)
    checkpoint = load_checkpoint(args.model)
    options = SearchOptions(**{k: v for k, v in checkpoint.decoding.items() if k in ("beam_size", "lenpen")})
    rows = []
    for name in args.sets.split(","):
        pairs = parse_test_set(name)
        terms = build(pairs.source, pairs.target)
        with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as file:
            file.write("".join(f"{e}\t{f}\n" for e, f in terms))
        glossary = Glossary.read(file.name)
        matched = [glossary.matches(source) for source in pairs.source]
        results = []
        for used in (None, Path(file.name)):
            translator = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options, glossary=used))
            outputs = [t.text for t in translator.translate(pairs.source)]
            hits = sum(f.lower() in out.lower() for found, out in zip(matched, outputs, strict=True) for f in found)
            results.append((hits, BLEU().corpus_score(outputs, [pairs.target]).score))
        total = sum(map(len, matched))
        rows.append(f"| {name} | {len(terms)} | {total} | {100 * results[0][0] / total:.1f}% | "
                    f"{100 * results[1][0] / total:.1f}% | {results[0][1]:.2f} | {results[1][1]:.2f} |")
    text = "\n".join([
        "# Glossaries: terms kept and BLEU", "",
        f"`python benchmarks/glossary.py --model {args.model}`, beam {options.beam_size}, length penalty "
        f"{options.lenpen}, fp32, {platform.machine()}. Each set's glossary is built from the set itself (its",
        "consistent word pairs: see the script); a term counts as kept when its French appears in the line's",
        "translation (lowercased). BLEU: sacreBLEU, cased, 13a.", "",
        "| set | terms | matched in the sources | kept without | kept with `--glossary` | BLEU without | BLEU with |",
        "|---|---|---|---|---|---|---|", *rows, ""])
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
