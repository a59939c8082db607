"""Which decoder layer's cross-attention aligns words best (nmt.decoding.alignment.ALIGNMENT_LAYER).

    python benchmarks/alignment.py [--model MODEL.pt] [--valid multi30k:valid] [--out benchmarks/ALIGNMENT.md]

No gold alignments ship with the embedded corpora; the check is the part of alignment that needs none: a
reference word found exactly once in its source, unchanged, and once in the reference (names, numbers,
"Frisbee"), whose one right link is that source word. Each layer (heads averaged) is scored by the share
of such words linked to it, teacher-forcing the references through the model.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import model_file  # noqa: E402

from nmt.data.corpus import parse_test_set  # noqa: E402
from nmt.decoding.alignment import cross_attention, word_alignment  # noqa: E402
from nmt.model.checkpoint import load_checkpoint  # noqa: E402


def anchors(source: str, target: str) -> dict[int, int]:
    """target word index -> source word index, for words found once on each side (punctuation stripped)."""
    clean = [re.sub(r"^\W+|\W+$", "", word) for word in source.split()]
    found = {}
    for j, word in enumerate(re.sub(r"^\W+|\W+$", "", w) for w in target.split()):
        if len(word) > 1 and clean.count(word) == 1 and target.split().count(target.split()[j]) == 1:
            found[j] = clean.index(word)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A checkpoint, or a shipped model's name; default the default shipped model.")
    parser.add_argument("--valid", default="multi30k:valid")
    parser.add_argument("--out", default=str(Path(__file__).parent / "ALIGNMENT.md"))
    args = parser.parse_args()
    args.model = model_file(args.model)
    checkpoint = load_checkpoint(args.model)
    model, tokenizer = checkpoint.build_model("cpu"), checkpoint.tokenizer()
    pairs = parse_test_set(args.valid)
    layers = checkpoint.config.n_decoder_layers
    right, total = [0] * layers, 0
    for source, target in zip(pairs.source, pairs.target, strict=True):
        if not (found := anchors(source, target)):
            continue
        source_ids, target_ids = tokenizer.encode(source), tokenizer.encode(target)
        source_pieces = [tokenizer.processor.id_to_piece(i) for i in source_ids]
        target_pieces = [tokenizer.processor.id_to_piece(i) for i in target_ids]
        if (sum(p.startswith("\u2581") for p in source_pieces) != len(source.split())
                or sum(p.startswith("\u2581") for p in target_pieces) != len(target.split())):
            continue  # the pieces' words are not the whitespace words (a piece of punctuation alone)
        weights = cross_attention(model, source_ids, target_ids)
        total += len(found)
        for layer in range(layers):
            links = dict((j, i) for i, j in word_alignment(weights[layer].mean(dim=0), source_pieces, target_pieces))
            right[layer] += sum(links.get(j) == i for j, i in found.items())
    rows = [f"| {layer + 1} ({layers - layer} from the top) | {right[layer]} / {total} | "
            f"{100 * right[layer] / total:.1f}% |" for layer in range(layers)]
    text = "\n".join([
        "# Which decoder layer aligns words", "",
        f"`python benchmarks/alignment.py --model {args.model} --valid {args.valid}`, {platform.machine()}.",
        "Words of the reference found exactly once, unchanged, in the source and once in the reference",
        "(names, numbers, loanwords), linked by each decoder layer's head-averaged cross-attention while the",
        "reference is teacher-forced (nmt.decoding.alignment.word_alignment):", "",
        "| decoder layer | linked to their source word | share |", "|---|---|---|", *rows, ""])
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
