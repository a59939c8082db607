"""How often a lexical shortlist holds every token of the full-vocabulary translation, by shortlist size.

    python benchmarks/shortlist_coverage.py --model runs/general/tuned.pt --prepared DIR \\
        --valid europarl:dev,tatoeba:dev,multi30k:valid --limit 500

Decoding over a sentence's shortlist gives the same greedy translation as over the whole vocabulary
whenever the shortlist holds every token of that translation (the best token of each step is then in the
list), and nearly always the same beam translation (log-probabilities are normalized as over the whole
vocabulary, the mass the list leaves out estimated from a fixed sample of unlisted tokens). So
the share of sentences whose full-vocabulary translation lies within their list bounds what a shortlist
can cost, without decoding once per candidate size: the sentences outside it are the only ones whose
translation can change. This counts the co-occurrences of `--pairs` training pairs drawn at random from
a prepared corpus once, then reports for each (frequent, per token) pair the mean number of target
tokens a sentence is decoded over and the share of sentences covered on each validation set.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from results import decoding

from nmt.data.corpus import parse_test_set
from nmt.data.prepare import TokenCorpus, open_prepared
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint
from nmt.model.shortlist import count_cooccurrences

FREQUENT = (1000, 2000, 3000)
PER_TOKEN = (20, 100, 200, 300)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--prepared", required=True, help="the folder `nmt prepare` wrote for the model")
    parser.add_argument("--valid", default="europarl:dev,tatoeba:dev,multi30k:valid")
    parser.add_argument("--limit", type=int, default=500, help="the first N sentences of each set")
    parser.add_argument("--pairs", type=int, default=1_000_000, help="training pairs counted, drawn at random")
    parser.add_argument("--hypotheses", help="a JSON file keeping the full-vocabulary translations between runs")
    parser.add_argument("--precision", default="int8_fp32")
    args = parser.parse_args()
    torch.set_num_threads(1)
    checkpoint = load_checkpoint(args.model)
    tokenizer = checkpoint.tokenizer()
    names = args.valid.split(",")
    sources = {name: parse_test_set(name).source[: args.limit] for name in names}
    translations = _translations(args, checkpoint, sources)

    folder = open_prepared(args.prepared)
    if folder.tokenizer.model_bytes != checkpoint.spm_model:
        raise SystemExit(f"{args.prepared} was tokenized with another sentencepiece model than {args.model}'s")
    corpus = TokenCorpus(folder.folder)
    chosen = np.sort(np.random.default_rng(1).choice(len(corpus), min(args.pairs, len(corpus)), replace=False))
    started = time.perf_counter()
    source_ids, target_ids = corpus.pairs(chosen)
    counts = count_cooccurrences(zip((s.tolist() for s in source_ids), (t.tolist() for t in target_ids),
                                     strict=True), checkpoint.config.vocab_size)
    print(f"counted {len(chosen)} pairs in {time.perf_counter() - started:.0f} s", flush=True)

    encoded = {name: (tokenizer.encode_batch(sources[name]), tokenizer.encode_batch(translations[name]))
               for name in names}
    print("| frequent | per token | " + " | ".join(f"{name} tokens | {name} covered" for name in names) + " |")
    print("|---|---|" + "---|---|" * len(names))
    for frequent in FREQUENT:
        for per_token in PER_TOKEN:
            shortlist = counts.shortlist(per_token, frequent)
            cells = []
            for name in names:
                size, covered = _coverage(shortlist, *encoded[name])
                cells += [f"{size:.0f}", f"{100 * covered:.1f}%"]
            print(f"| {frequent} | {per_token} | " + " | ".join(cells) + " |", flush=True)


def _translations(args, checkpoint, sources: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each set's full-vocabulary translations with the model's stored search settings, kept in
    --hypotheses when given."""
    kept = Path(args.hypotheses) if args.hypotheses else None
    done = json.loads(kept.read_text()) if kept and kept.exists() else {}
    translator = None
    for name, lines in sources.items():
        if len(done.get(name, [])) != len(lines):
            translator = translator or Translator.from_checkpoint(
                checkpoint, decoding(checkpoint, SearchOptions(**checkpoint.decoding), args.precision))
            started = time.perf_counter()
            done[name] = [t.text for t in translator.translate(lines)]
            print(f"translated {name} in {time.perf_counter() - started:.0f} s", flush=True)
            if kept:
                kept.write_text(json.dumps(done, ensure_ascii=False))
    return done


def _coverage(shortlist, sources: list[list[int]], translations: list[list[int]]) -> tuple[float, float]:
    """The mean number of target tokens the sentences are decoded over, and the share of sentences whose
    translation's tokens all lie within their list."""
    shared = set(shortlist.shared_ids.tolist())
    sizes, covered = [], 0
    for source, translation in zip(sources, translations, strict=True):
        own = set(source) | set(shortlist.table[source].flatten().tolist()) if source else set()
        listed = shared | own
        sizes.append(len(listed))
        covered += set(translation) <= listed
    return sum(sizes) / len(sizes), covered / len(sources)


if __name__ == "__main__":
    main()
