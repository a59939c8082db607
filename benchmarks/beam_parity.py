"""nmt's beam search against CTranslate2's on the same exported weights: BLEU and the share of identical
lines on the validation sets, for each beam size and length penalty, with the same length cap.

    python benchmarks/beam_parity.py                  # the shipped model; rewrites its RESULTS.md section

Both decode in float32 with the full vocabulary (no shortlist), nmt without its loop guard (CTranslate2 has
none). nmt's cap is floor(1.5 x (source tokens + EOS) + 10) target tokens with EOS; CTranslate2's
max_decoding_length counts tokens without EOS, so it gets one less.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import sacrebleu
import torch
from results import cpu_name, decoding, model_file, write_section

from nmt.apps.export import export_ctranslate2
from nmt.data.corpus import parse_test_set
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint


def ctranslate2_translations(translator, tokenizer, sources: list[str], beam: int, lenpen: float) -> list[str]:
    pieces = [tokenizer.processor.encode(source, out_type=str) for source in sources]
    caps = [int(1.5 * (len(p) + 1)) + 10 - 1 for p in pieces]
    found: dict[int, str] = {}
    for cap in sorted(set(caps)):  # one call per cap: max_decoding_length is per call
        rows = [i for i, c in enumerate(caps) if c == cap]
        results = translator.translate_batch([pieces[i] for i in rows], beam_size=beam, length_penalty=lenpen,
                                             max_decoding_length=cap, max_batch_size=64)
        found.update({i: tokenizer.processor.decode(r.hypotheses[0]) for i, r in zip(rows, results, strict=True)})
    return [found[i] for i in range(len(sources))]


def main() -> None:
    import ctranslate2

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="A checkpoint or a shipped model's name; default the "
                        "default shipped model.")
    parser.add_argument("--test-sets", default="multi30k:valid,tatoeba:dev")
    parser.add_argument("--beams", default="4,5")
    parser.add_argument("--lenpens", default="0.6,1.0,1.2")
    args = parser.parse_args()
    torch.set_num_threads(2)
    model = model_file(args.model)
    checkpoint = load_checkpoint(model)
    tokenizer = checkpoint.tokenizer()
    rows, bleu = [], sacrebleu.BLEU()
    with tempfile.TemporaryDirectory() as folder:
        ct2 = ctranslate2.Translator(str(export_ctranslate2(checkpoint, Path(folder) / "ct2")), intra_threads=2)
        for test_set in args.test_sets.split(","):
            pairs = parse_test_set(test_set)
            for beam in map(int, args.beams.split(",")):
                for lenpen in map(float, args.lenpens.split(",")):
                    options = SearchOptions(beam_size=beam, lenpen=lenpen, loop_guard=False)
                    config = decoding(checkpoint, options, ordinary_input=False)
                    ours = [t.text for t in Translator.from_checkpoint(checkpoint, config).translate(pairs.source)]
                    theirs = ctranslate2_translations(ct2, tokenizer, pairs.source, beam, lenpen)
                    bleu_ours = bleu.corpus_score(ours, [pairs.target]).score
                    bleu_theirs = bleu.corpus_score(theirs, [pairs.target]).score
                    same = sum(a == b for a, b in zip(ours, theirs, strict=True)) / len(ours)
                    print(test_set, beam, lenpen, f"{bleu_ours:.2f} {bleu_theirs:.2f} {same:.1%}", flush=True)
                    rows.append(f"| {test_set} | {beam} | {lenpen} | {bleu_ours:.2f} | {bleu_theirs:.2f} | "
                                f"{bleu_ours - bleu_theirs:+.2f} | {same:.1%} |")
    write_section("Beam search: nmt and CTranslate2 on the same weights", [
        f"`python benchmarks/beam_parity.py` on {cpu_name()}, {time.strftime('%Y-%m-%d')}, "
        f"{'model ' + args.model if args.model else 'the default shipped model'}, "
        f"CTranslate2 {ctranslate2.__version__}: cased sacreBLEU ({bleu.get_signature()}), float32, "
        "the same beam, length penalty and length cap. nmt translates a line a sentence at a time, CTranslate2 "
        "the whole line: the few multi-sentence lines of tatoeba:dev differ for that reason.",
        "",
        "| test set | beam | lenpen | nmt BLEU | CTranslate2 BLEU | difference | identical lines |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ], model=model)


if __name__ == "__main__":
    main()
