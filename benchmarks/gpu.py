"""nmt on a CUDA GPU: eager decoding against CUDA-graph decoding (nmt.graphs) in fp32, bf16 and fp16, and
HF transformers generate() on the same weights, on the shipped model and the embedded Multi30k test set.

    python benchmarks/gpu.py          # needs a CUDA device; rewrites benchmarks/RESULTS.md's GPU section

In-process rows time `Translator.translate` (tokenization, search, detokenization; graph captures for new
shapes included) after one warm-up call on other sentences; whole-process rows time `nmt translate` from
start to last line (importing torch and starting CUDA count). CTranslate2 is not measured here: see the
section's text.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from functools import partial

import sacrebleu
import torch
from results import write_section

from nmt.checkpoint import load_checkpoint
from nmt.corpus import data_dir, parse_test_set
from nmt.search import SearchOptions
from nmt.translate import Translator


def timed(translate, sources: list[str]) -> tuple[list, float]:
    torch.cuda.synchronize()
    started = time.perf_counter()
    out = translate(sources)
    torch.cuda.synchronize()
    return out, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="checkpoint; default: the shipped model")
    parser.add_argument("--sentences", type=int, default=1000, help="batch-32 rows (batch-1 rows use a tenth)")
    parser.add_argument("--cli", default=f"{sys.executable} -m nmt_cli.main", help="how to run nmt")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/gpu.py needs a CUDA device")
    shown = "the shipped model (data/models/en-fr.pt)" if args.model is None else args.model
    args.model = args.model or str(data_dir() / "models" / "en-fr.pt")
    checkpoint = load_checkpoint(args.model)
    lenpen = checkpoint.decoding.get("lenpen", 1.0)
    tokenizer = checkpoint.tokenizer()
    test = parse_test_set("multi30k:test_2016_flickr")
    warmup = parse_test_set("multi30k:valid").source[:64]
    try:
        from hf_marian import hf_generate, to_marian

        marian = to_marian(checkpoint).cuda()
    except ImportError:
        marian = None
        print("transformers is not installed: no HF generate() rows")
    rows = []
    for beam in (1, 4):
        for batch in (32, 1, None):  # None: nmt translate's default batching, by 4096 padded source tokens
            n = args.sentences // 10 if batch == 1 else args.sentences
            sources, references = test.source[:n], test.target[:n]
            options = SearchOptions(beam_size=beam, lenpen=lenpen)
            measured = []
            for precision in ("fp32", "bf16", "fp16"):
                for graphs in (False, True):
                    translator = Translator.from_checkpoint(checkpoint, options, "cuda", precision, batch_size=batch,
                                                            max_tokens=4096, cuda_graphs=graphs)
                    translator.translate(warmup)
                    results, seconds = timed(translator.translate, sources)
                    out = [t.text for t in results]
                    name = f"nmt {precision} {'CUDA graphs' if graphs else 'eager'}"
                    measured.append((name, out, seconds))
            if marian is not None and batch is not None:
                for dtype, label in ((torch.float32, "fp32"), (torch.float16, "fp16")):
                    translate = partial(hf_generate, marian.to(dtype), tokenizer, beam=beam, batch=batch,
                                        lenpen=lenpen, eos=checkpoint.config.eos_id)
                    translate(warmup[:8])
                    out, seconds = timed(translate, sources)
                    measured.append((f"HF generate() {label}", out, seconds))
            for name, out, seconds in measured:
                tokens = sum(len(ids) for ids in tokenizer.encode_batch(out))
                bleu = sacrebleu.corpus_bleu(out, [references]).score
                search_name = "greedy" if beam == 1 else "beam 4"
                rows.append((name, search_name, batch or "4096 tokens", n, tokens / seconds, bleu))
                print(rows[-1], flush=True)
    whole = []
    text = "".join(line + "\n" for line in test.source[: args.sentences])
    for precision in ("fp32", "fp16"):
        for flag in ("--no-cuda-graphs", "--cuda-graphs"):
            options = ["--device", "cuda", "--beam", "4", "--batch-size", "32", "--precision", precision, flag, "-q"]
            command = [*args.cli.split(), "translate", "--model", args.model, *options]
            started = time.perf_counter()
            out = subprocess.run(command, input=text, capture_output=True, text=True, check=True).stdout
            seconds = time.perf_counter() - started
            tokens = sum(len(ids) for ids in tokenizer.encode_batch(out.split("\n")[:-1]))
            whole.append((" ".join(["translate", *options]), tokens / seconds, seconds))
            print(whole[-1], flush=True)
    device = torch.cuda.get_device_name()
    lines = [
        f"Device: {device}, torch {torch.__version__}. Model: {shown}. Sentences: the first N of "
        f"multi30k:test_2016_flickr. Command: `python benchmarks/gpu.py --sentences {args.sentences}`. "
        "Batch '4096 tokens': `nmt translate`'s default batching by padded source tokens. "
        "In-process target tokens/s (sentencepiece tokens of the output), timing tokenization, search and "
        "detokenization after a warm-up call on 64 validation sentences; captures of graphs for new shapes "
        "count. BLEU: cased sacreBLEU against the references. CTranslate2 is not in this table: its PyPI "
        "wheel is built for CUDA 12, the GPU machine had CUDA 13 libraries only and could fetch nothing.",
        "",
        "| engine | search | batch | sentences | tok/s | ratio to nmt fp32 eager | BLEU |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, search, batch, n, rate, bleu in rows:
        eager = next(r for r in rows if r[0] == "nmt fp32 eager" and r[1:3] == (search, batch))
        lines.append(f"| {name} | {search} | {batch} | {n} | {rate:.0f} | {rate / eager[4]:.2f}x | {bleu:.2f} |")
    lines += ["", "Whole process (`nmt translate` from start to last line, same sentences):", "",
              "| command | tok/s | seconds |", "|---|---|---|"]
    lines += [f"| `nmt {command}` | {rate:.0f} | {seconds:.2f} |" for command, rate, seconds in whole]
    write_section("GPU: eager and CUDA-graph decoding", lines)


if __name__ == "__main__":
    main()
