"""nmt, CTranslate2 and HF transformers generate() on the same random weights with a forced output length:
the `base` dimensions with a 32k vocabulary and the `small` ones with 8k, 2 threads, in-process.

    python benchmarks/forced_length.py    # rewrites benchmarks/RESULTS.md's forced-length section

Every engine decodes exactly FORCED target tokens per sentence (EOS forbidden before, forced after), so
the rows compare decoding speed alone, independent of what the weights would translate; the sources are
random token ids. Times exclude model loading and include one warm-up batch, untimed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from results import cpu_name, left_out_note, modes_left_out, vector_extensions, write_section
from torch import Tensor

from nmt.apps.export import export_ctranslate2
from nmt.decoding.inference import cast_for_inference
from nmt.decoding.search import SearchOptions, search
from nmt.model.backend import Backend
from nmt.model.checkpoint import Checkpoint
from nmt.model.config import ModelConfig
from nmt.model.flat_decoder import FlatDecoder
from nmt.model.transformer import Transformer

FORCED = 32
SOURCE_LENGTH = 24  # tokens before EOS

CT2_SCRIPT = """
import sys, time, ctranslate2
model, compute_type = sys.argv[1], sys.argv[4]
beam, batch, forced = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[5])
translator = ctranslate2.Translator(model, intra_threads=2, compute_type=compute_type)
lines = [line.split() for line in sys.stdin.read().split("\\n")[:-1]]
options = dict(beam_size=beam, max_batch_size=batch, min_decoding_length=forced, max_decoding_length=forced)
translator.translate_batch(lines[:batch], **options)  # warm-up
started = time.perf_counter()
results = translator.translate_batch(lines[batch:], **options)
sys.stdout.write(f"{time.perf_counter() - started} {sum(len(r.hypotheses[0]) for r in results)}\\n")
"""


def random_checkpoint(preset: str, vocab_size: int) -> Checkpoint:
    torch.manual_seed(0)
    config = ModelConfig.preset(preset, vocab_size=vocab_size, dropout=0.0)
    return Checkpoint(config, Transformer(config).state_dict(), spm_model=b"")


def nmt_rate(checkpoint: Checkpoint, precision: str, sources: Tensor, beam: int, batch: int) -> float:
    backend = Backend.resolve(precision, torch.device("cpu"))
    model = FlatDecoder(cast_for_inference(checkpoint.build_model(), backend), backend)  # as nmt translate decodes
    # EOS forbidden before FORCED tokens and forced as token FORCED + 1
    options = SearchOptions(beam_size=beam, min_len=FORCED, max_len_a=0, max_len_b=FORCED + 1)
    batches = sources.split(batch)
    search(model, batches[0], options)
    started = time.perf_counter()
    tokens = sum(len(h[0].tokens) for b in batches[1:] for h in search(model, b, options))
    return tokens / (time.perf_counter() - started)


def ct2_rate(model_dir: Path, compute_type: str, sources: Tensor, beam: int, batch: int) -> float:
    text = "".join(" ".join(f"t{i}" for i in row[:-1].tolist()) + "\n" for row in sources)
    command = [sys.executable, "-c", CT2_SCRIPT, str(model_dir), str(beam), str(batch), compute_type, str(FORCED)]
    seconds, tokens = subprocess.run(command, input=text, capture_output=True, text=True, check=True).stdout.split()
    return int(tokens) / float(seconds)


def hf_rate(marian, sources: Tensor, beam: int, batch: int) -> float:
    batches = sources.split(batch)

    def generate(inputs: Tensor) -> Tensor:
        return marian.generate(inputs, attention_mask=torch.ones_like(inputs), num_beams=beam, do_sample=False,
                               min_new_tokens=FORCED, max_new_tokens=FORCED)

    generate(batches[0])
    started = time.perf_counter()
    tokens = sum((generate(b)[:, 1:] != marian.config.pad_token_id).sum().item() for b in batches[1:])
    return tokens / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=64, help="timed sentences at batch 32 (a tenth at batch 1)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    settings = [("base", 32000, 1, 32), ("base", 32000, 4, 32), ("base", 32000, 1, 1), ("small", 8000, 4, 32)]
    rows = []
    skipped = modes_left_out(("fp32", "bf16", "int8_bf16", "int8_fp32"))
    precisions = [p for p in ("fp32", "bf16", "int8_bf16", "int8_fp32") if p not in skipped]
    for preset, vocab_size in dict.fromkeys((p, v) for p, v, _, _ in settings):
        checkpoint = random_checkpoint(preset, vocab_size)
        model_dir = export_ctranslate2(checkpoint, Path(tempfile.mkdtemp()) / "ct2",
                                       pieces=[f"t{i}" for i in range(vocab_size)])
        try:
            from hf_marian import to_marian

            marian = to_marian(checkpoint)
        except ImportError:
            marian = None
        generator = torch.Generator().manual_seed(1)
        for _, _, beam, batch in [s for s in settings if s[:2] == (preset, vocab_size)]:
            n = args.sentences if batch == 32 else args.sentences // 10
            sources = torch.randint(4, vocab_size, (n + batch, SOURCE_LENGTH + 1), generator=generator)
            sources[:, -1] = checkpoint.config.eos_id
            measured = [(f"nmt {p}", nmt_rate(checkpoint, p, sources, beam, batch)) for p in precisions]
            measured += [(f"CTranslate2 {c}", ct2_rate(model_dir, c, sources, beam, batch)) for c in ("float32",
                                                                                                     "int8")]
            if marian is not None:
                measured.append(("HF generate() fp32", hf_rate(marian, sources, beam, batch)))
            reference = dict(measured)["CTranslate2 float32"]
            for name, rate in measured:
                rows.append((f"{preset} ({vocab_size // 1000}k)", name, "greedy" if beam == 1 else "beam 4", batch,
                             n, rate, rate / reference))
                print(rows[-1], flush=True)
    lines = [
        f"Machine: {cpu_name()}, 2 threads, torch {torch.__version__}. Random weights (seed 0), sources of "
        f"{SOURCE_LENGTH} random tokens plus EOS, exactly {FORCED} target tokens per sentence in every engine (nmt "
        f"also runs the forced EOS step). Command: `python benchmarks/forced_length.py --sentences "
        f"{args.sentences}`. In-process target tokens/s after one untimed warm-up batch."
        + left_out_note(skipped),
        "",
        "| dimensions | engine | search | batch | sentences | tok/s | ratio to CT2 fp32 |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {d} | {name} | {search_} | {batch} | {n} | {rate:.0f} | {ratio:.2f}x |"
              for d, name, search_, batch, n, rate, ratio in rows]
    write_section(f"Forced length: base and small dimensions, random weights ({vector_extensions()} CPU)", lines)


if __name__ == "__main__":
    main()
