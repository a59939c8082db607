"""nmt on a CUDA GPU: eager decoding against CUDA-graph decoding (nmt.model.graphs) in fp32, bf16 and fp16, and
HF transformers generate() on the same weights, on the shipped model and the embedded Multi30k test set.

    python benchmarks/gpu.py          # needs a CUDA device; rewrites benchmarks/RESULTS.md's GPU section

In-process rows time `Translator.translate` (tokenization, search, detokenization; graph captures for new
shapes included) after one warm-up call on other sentences; whole-process rows time `nmt translate` from
start to last line (importing torch and starting CUDA count). CTranslate2 rows (the model exported with
`nmt export`) appear where the installed ctranslate2 can use the CUDA device; the section says otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import sacrebleu
import torch
from results import cpu_name, decoding, model_file, translate_options, write_section

from nmt.apps.export import export_ctranslate2
from nmt.data.corpus import parse_test_set
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint

# CTranslate2's compute types against nmt's precisions
CT2_TYPES = (("float32", "fp32"), ("float16", "fp16"), ("int8_float16", "int8 weights, fp16"))


def ct2_on_cuda(checkpoint) -> tuple[Path | None, str]:
    """The model exported for CTranslate2 and the ctranslate2 release, or None and why CTranslate2 cannot run
    it on the CUDA device."""
    try:
        import ctranslate2
    except ImportError:
        return None, "ctranslate2 is not installed"
    try:
        if ctranslate2.get_cuda_device_count() == 0:
            return None, f"ctranslate2 {ctranslate2.__version__} sees no CUDA device"
        exported = export_ctranslate2(checkpoint, Path(tempfile.mkdtemp()) / "ct2")
        # a wheel built for another CUDA release fails only once it loads its CUDA libraries
        ctranslate2.Translator(str(exported), device="cuda").translate_batch([["\u2581a"]])
        return exported, ctranslate2.__version__
    except (RuntimeError, OSError) as exc:
        return None, f"ctranslate2 {ctranslate2.__version__} cannot use the CUDA device ({exc})"


def ct2_translate(translator, tokenizer, sources: list[str], beam: int, batch: int | None, lenpen: float) -> list[str]:
    """CTranslate2 on sentencepiece pieces; batch None: by 4096 tokens, as nmt's default batching."""
    pieces = [tokenizer.processor.encode(line, out_type=str) for line in sources]
    results = translator.translate_batch(pieces, beam_size=beam, max_batch_size=batch or 4096,
                                         batch_type="examples" if batch else "tokens", length_penalty=lenpen,
                                         max_decoding_length=256)
    return [tokenizer.processor.decode(result.hypotheses[0]) for result in results]


def timed(translate, sources: list[str], repeats: int) -> tuple[list, float]:
    """The output and the median seconds of `repeats` calls (on the H100's host the slowest of 3 calls of
    0.1-1 s took up to 2.4x as long as the fastest)."""
    seconds = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        started = time.perf_counter()
        out = translate(sources)
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
    return out, statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A checkpoint, or a shipped model's name; default the default shipped model.")
    parser.add_argument("--sentences", type=int, default=1000, help="batch-32 rows (batch-1 rows use a tenth)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per in-process row (median)")
    parser.add_argument("--cli", default=f"{sys.executable} -m nmt_cli.main", help="how to run nmt")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/gpu.py needs a CUDA device")
    shown = "the default shipped model" if args.model is None else args.model
    args.model = model_file(args.model)
    checkpoint = load_checkpoint(args.model)
    tokenizer = checkpoint.tokenizer()
    test = parse_test_set("multi30k:test_2016_flickr")
    warmup = parse_test_set("multi30k:valid").source[:64]
    try:
        from hf_marian import hf_generate, to_marian

        marian = to_marian(checkpoint).cuda()
    except Exception as exc:  # not installed, or a release whose MarianMT our weights do not fit: a finding
        marian = None
        print(f"no HF generate() rows: {type(exc).__name__}: {exc}")
    ct2_model, ct2_about = ct2_on_cuda(checkpoint)
    print(f"CTranslate2: {ct2_about}")
    rows = []
    for beam in (1, 4):
        for batch in (32, 1, None):  # None: nmt translate's default batching, by 4096 padded source tokens
            n = args.sentences // 10 if batch == 1 else args.sentences
            sources, references = test.source[:n], test.target[:n]
            options = translate_options(checkpoint, beam)
            lenpen = options.lenpen
            measured = []
            for precision in ("fp32", "bf16", "fp16"):
                for graphs in (False, True):
                    translator = Translator.from_checkpoint(checkpoint, decoding(
                        checkpoint, options, precision, "cuda", batch_size=batch, max_tokens=4096, cuda_graphs=graphs))
                    translator.translate(warmup)
                    results, seconds = timed(translator.translate, sources, args.repeats)
                    out = [t.text for t in results]
                    name = f"nmt {precision} {'CUDA graphs' if graphs else 'eager'}"
                    measured.append((name, out, seconds))
            if marian is not None and batch is not None:
                for dtype, label in ((torch.float32, "fp32"), (torch.float16, "fp16")):
                    translate = partial(hf_generate, marian.to(dtype), tokenizer, beam=beam, batch=batch,
                                        lenpen=lenpen, eos=checkpoint.config.eos_id)
                    try:
                        translate(warmup[:8])
                    except Exception as exc:  # the release's generate() refuses our model: no rows from it
                        print(f"HF generate() {label}: {type(exc).__name__}: {exc}")
                        marian = None
                        break
                    out, seconds = timed(translate, sources, args.repeats)
                    measured.append((f"HF generate() {label}", out, seconds))
            if ct2_model is not None:
                import ctranslate2

                for compute_type, label in CT2_TYPES:
                    translator = ctranslate2.Translator(str(ct2_model), device="cuda", compute_type=compute_type)
                    translate = partial(ct2_translate, translator, tokenizer, beam=beam, batch=batch, lenpen=lenpen)
                    translate(warmup)
                    out, seconds = timed(translate, sources, args.repeats)
                    measured.append((f"CTranslate2 {label}", out, seconds))
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
    if ct2_model is not None:
        ct2_note = (f"CTranslate2 {ct2_about} runs the model exported with `nmt export` on the same device, "
                    "with the same beam, batch size and length penalty (its length cap: 256 pieces).")
    else:
        ct2_note = f"CTranslate2 is not in this table: {ct2_about}."
    lines = [
        f"Device: {device}, host CPU {cpu_name()}, torch {torch.__version__}. Model: {shown}. Sentences: the first N "
        f"of multi30k:test_2016_flickr. Command: "
        f"`python benchmarks/gpu.py --sentences {args.sentences} --repeats {args.repeats}`. "
        "Batch '4096 tokens': `nmt translate`'s default batching by padded source tokens. "
        "In-process target tokens/s (sentencepiece tokens of the output), timing tokenization, search and "
        f"detokenization after a warm-up call on 64 validation sentences: the median of {args.repeats} calls "
        "(captures of graphs for new shapes count in the first). BLEU: cased sacreBLEU against the references. "
        + ct2_note,
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
    write_section("GPU: eager and CUDA-graph decoding", lines, model=args.model)


if __name__ == "__main__":
    main()
