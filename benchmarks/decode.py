"""Decoder throughput: target tokens/s of greedy and beam 4 at batch 1 and 32, cached vs --no-cache,
for the `small` and `base` presets with random weights, 2 threads. Random weights stop at arbitrary
lengths, so every row forces a fixed output length (min_len = max length = 32 tokens + EOS).

    python benchmarks/decode.py            # appends nothing: rewrites benchmarks/RESULTS.md's decode section

Never run it while something else loads the cores.
"""

from __future__ import annotations

import argparse
import time

import torch
from results import cpu_name, write_section

from nmt.decoding.search import SearchOptions, search
from nmt.model.backend import Backend
from nmt.model.config import ModelConfig
from nmt.model.flat_decoder import FlatDecoder
from nmt.model.transformer import Transformer

OUTPUT_TOKENS = 32
SOURCE_TOKENS = 20
PRESETS = {"small": 8000, "base": 32000}  # preset -> vocabulary size


def sources(n: int, vocab: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (n, SOURCE_TOKENS), generator=generator)
    src[:, -1] = 3  # EOS
    return src


def tokens_per_second(model: FlatDecoder, src: torch.Tensor, batch: int, options: SearchOptions) -> float:
    search(model, src[:batch], options)  # warm-up
    started = time.perf_counter()
    produced = 0
    for start in range(0, src.size(0), batch):
        for hypotheses in search(model, src[start : start + batch], options):
            produced += len(hypotheses[0].tokens)
    return produced / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--presets", default="small,base")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for preset in args.presets.split(","):
        torch.manual_seed(0)
        # as nmt translate decodes: the flattened step with the cache, the model's own step without
        model = FlatDecoder(Transformer(ModelConfig.preset(preset, vocab_size=PRESETS[preset], dropout=0.0)).eval(),
                            Backend.resolve("fp32", torch.device("cpu")))
        src = sources(64, PRESETS[preset])
        for beam in (1, 4):
            for batch in (1, 32):
                measured = {}
                for use_cache in (True, False):
                    n = (64 if batch == 32 else 8) if use_cache else (32 if batch == 32 else 4)
                    options = SearchOptions(beam_size=beam, lenpen=1.0, max_len_a=0.0, max_len_b=OUTPUT_TOKENS + 1,
                                            min_len=OUTPUT_TOKENS, use_cache=use_cache)
                    measured[use_cache] = tokens_per_second(model, src[:n], batch, options)
                rows.append((preset, "greedy" if beam == 1 else f"beam {beam}", batch, measured[True], measured[False]))
                print(f"{preset:6} beam {beam} batch {batch:2}: cached {measured[True]:8.1f} tok/s, "
                      f"no-cache {measured[False]:8.1f} tok/s, x{measured[True] / measured[False]:.1f}", flush=True)
    lines = [
        f"Machine: {cpu_name()}, {args.threads} threads, torch {torch.__version__}. "
        f"Command: `make bench-more` (`python benchmarks/decode.py --threads {args.threads}`). "
        f"{SOURCE_TOKENS} source tokens, {OUTPUT_TOKENS} target tokens per sentence, in-process (model loaded, "
        "timing the search calls), target tokens/s. Vocabulary: small 8k, base 32k.",
        "",
        "| preset | search | batch | cached tok/s | --no-cache tok/s | cached / no-cache |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {p} | {s} | {b} | {c:.0f} | {n:.0f} | {c / n:.1f}x |" for p, s, b, c, n in rows]
    write_section("Decoder throughput (random weights, forced output length)", lines)


if __name__ == "__main__":
    main()
