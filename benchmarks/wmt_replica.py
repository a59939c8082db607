"""WMT14 at a tenth of its size, offline: the embedded corpora replicated to about 3M pairs in the WMT14
translation schema (8 parquet shards under fr-en/, as a hub download leaves them), then `nmt prepare` and
the first steps of `nmt train` on it, timed, with the peak memory of each process tree.

    python benchmarks/wmt_replica.py                    # builds runs/wmt14-replica once, then measures

Reports: preparation time and peak RSS (all its processes together); with the cache present, the time from
`nmt train`'s start to its first step and its peak RSS; the share of a `small` training step spent reading
and collating its batch; and what these measurements extrapolate to for WMT14 En-Fr (40M pairs), labelled
as an estimate. Results go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from results import cpu_name, write_section

from nmt.data.corpus import load_embedded

ROOT = Path(__file__).resolve().parent.parent / "runs"
NMT = [sys.executable, "-m", "nmt_cli.main"]
SHARDS = 8
WMT14_PAIRS = 40_000_000  # WMT14 En-Fr's training pairs: 36-41M, by the filtering
VALID_PAIRS = 1014  # the replica's validation split: multi30k valid


def build_replica(folder: Path, copies: int) -> int:
    import datasets

    parts = [load_embedded("multi30k", "train"), load_embedded("tatoeba", "train"),
             load_embedded("news-commentary", "train")]
    source = [s for p in parts for s in p.source] * copies
    target = [t for p in parts for t in p.target] * copies
    rows = datasets.Dataset.from_dict({"translation": [{"en": s, "fr": t} for s, t in zip(source, target,
                                                                                         strict=True)]})
    (folder / "fr-en").mkdir(parents=True, exist_ok=True)
    for shard in range(SHARDS):
        rows.shard(SHARDS, shard, contiguous=True).to_parquet(
            str(folder / "fr-en" / f"train-{shard:05d}-of-{SHARDS:05d}.parquet"))
    valid = load_embedded("multi30k", "valid")
    datasets.Dataset.from_dict({"translation": [{"en": s, "fr": t} for s, t in zip(valid.source, valid.target,
                                                                                   strict=True)]}).to_parquet(
        str(folder / "fr-en" / "validation-00000-of-00001.parquet"))
    return len(rows)


def tree_rss(pid: int) -> int:
    """Resident memory of a process and all its descendants, in bytes."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) * 1024
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except (OSError, AttributeError):
            continue
        stack.extend(int(child) for child in children)
    return total


def measured(command: list[str], first_line: str | None = None, steps_line: str | None = None) -> dict:
    """Run `command`; its wall time and peak tree RSS, the seconds until a stderr line matches `first_line`,
    and the peak RSS until one matches `steps_line`."""
    started = time.monotonic()
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    peak, seen = [0], {}

    def watch():
        while process.poll() is None:
            peak[0] = max(peak[0], tree_rss(process.pid))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    lines = []
    for line in process.stderr:
        lines.append(line)
        if first_line and "first" not in seen and re.search(first_line, line):
            seen["first"] = time.monotonic() - started
        if steps_line and "steps_peak" not in seen and re.search(steps_line, line):
            seen["steps_peak"] = max(peak[0], tree_rss(process.pid)) / 2**30
    process.wait()
    watcher.join()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{''.join(lines[-20:])}")
    return {"seconds": time.monotonic() - started, "peak_gib": peak[0] / 2**30, "first": seen.get("first"),
            "steps_peak_gib": seen.get("steps_peak"), "log": lines}


def data_share(folder: Path, steps: int) -> dict:
    """Seconds per batch to read and collate a `small` training batch, against a training step on it; the
    time and peak memory (numpy's, through tracemalloc) of an epoch's batch index."""
    import tracemalloc

    import torch

    from nmt.data.batching import collate
    from nmt.data.prepare import TokenCorpus
    from nmt.model.config import ModelConfig
    from nmt.model.transformer import Transformer
    from nmt.training.loop import EpochBatches

    corpus = TokenCorpus(folder)
    tracemalloc.start()
    started = time.perf_counter()
    batches = EpochBatches(corpus, 4096, seed=1).of(0)
    batching = time.perf_counter() - started
    batching_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    started = time.perf_counter()
    collated = [collate(*corpus.pairs(batch), 0, 2, 3) for batch in batches[:200]]
    reading = (time.perf_counter() - started) / 200
    model = Transformer(ModelConfig.preset("small", vocab_size=8000))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    step_times = []
    for src, tgt_in, tgt_out in collated[: steps + 1]:
        started = time.perf_counter()
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), tgt_out.view(-1), ignore_index=0)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step_times.append(time.perf_counter() - started)
    step = sorted(step_times[1:])[len(step_times[1:]) // 2]
    return {"batching": batching, "batching_peak": batching_peak, "batches": len(batches), "reading": reading,
            "step": step, "pairs": len(corpus)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=16, help="replicas of the embedded corpora (16: 3.08M pairs)")
    parser.add_argument("--steps", type=int, default=5, help="training steps timed for the data share")
    args = parser.parse_args()
    folder, cache = ROOT / "wmt14-replica", ROOT / "wmt14-replica-cache"
    if not (folder / "fr-en").exists():
        print("building", folder, flush=True)
        build_replica(folder, args.copies)
    shutil.rmtree(cache, ignore_errors=True)
    data = ["--hf-dataset", str(folder), "--hf-config", "fr-en", "--cache-dir", str(cache)]
    cores = os.cpu_count()
    prepared = measured([*NMT, "prepare", *data])
    prepared_folder = Path(next(line for line in reversed(prepared["log"]) if "prepared corpus" in line)
                           .split("prepared corpus ")[1].split(":")[0])
    from nmt.data.prepare import TokenCorpus

    meta = TokenCorpus(prepared_folder).meta
    import json

    spm_meta = json.loads(next(cache.glob("spm-*/meta.json")).read_text())
    out = ROOT / "wmt14-replica-train"
    train = [*NMT, "train", *data, "--preset", "small", "--out", str(out), "--max-steps", "2", "--log-every", "1",
             "--valid-every", "1000000", "--threads", str(cores)]
    shutil.rmtree(out, ignore_errors=True)
    first = measured(train, r"step 1 \|", r"step 2 \|")
    shutil.rmtree(out, ignore_errors=True)
    again = measured(train, r"step 1 \|", r"step 2 \|")
    shutil.rmtree(out, ignore_errors=True)
    share = data_share(prepared_folder, args.steps)
    pairs = spm_meta["pairs"]
    scale = WMT14_PAIRS / pairs
    worker_seconds = meta["seconds"] * meta["workers"]  # an upper bound of the tokenizing work: reading overlaps
    per_pair = share["batching_peak"] / share["pairs"]
    lines = [
        f"`python benchmarks/wmt_replica.py` on {cpu_name()}, {cores} cores, {time.strftime('%Y-%m-%d')}: "
        f"{pairs:,} pairs in 8 parquet shards in the WMT14 schema (the embedded corpora x{args.copies}), "
        f"sentencepiece of 8000 pieces trained on {spm_meta['sample']:,} sentences sampled from all of them.",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| `nmt prepare`: the sampling pass over the corpus | {spm_meta['sample_seconds']:.0f} s | |",
        f"| `nmt prepare`: training sentencepiece | {spm_meta['train_seconds']:.0f} s | |",
        f"| `nmt prepare`: tokenizing into the cache ({meta['workers']} processes) | {meta['seconds']:.0f} s | |",
        f"| `nmt prepare` in all | {prepared['seconds']:.0f} s, peak RSS {prepared['peak_gib']:.2f} GiB "
        "(all its processes) | within 5 minutes |",
        f"| `nmt train --preset small`, cache present: start to first step | {first['first']:.1f} s | within 20 s |",
        f"| the same, a second time | {again['first']:.1f} s | |",
        f"| `nmt train` peak RSS over its first two steps | {first['steps_peak_gib']:.2f} GiB | under 2 GiB |",
        f"| `nmt train` peak RSS with the validation that ends the run (greedy translation of "
        f"{VALID_PAIRS:,} pairs) | {first['peak_gib']:.2f} GiB | |",
        f"| an epoch's batches from the stored lengths | {share['batching']:.2f} s, {share['batches']:,} batches, "
        f"peak {share['batching_peak'] / 2**20:.0f} MiB | |",
        f"| reading and collating a batch of 4096 tokens | {1000 * share['reading']:.2f} ms | |",
        f"| a `small` training step on such a batch (fp32, {cores} threads) | {1000 * share['step']:.0f} ms | |",
        f"| data access per step | {100 * share['reading'] / share['step']:.2f}% | under 5% |",
        "",
        f"Extrapolated to WMT14 En-Fr, {WMT14_PAIRS / 1e6:.0f}M pairs ({scale:.0f}x these; an estimate, not a "
        "measurement):",
        f"- tokenizing: {worker_seconds:.0f} worker-seconds here, x{scale:.0f} for the pairs and x2 for sentences "
        f"about twice as long: {2 * scale * worker_seconds / 16 / 60:.1f} minutes on 16 cores, if the one "
        f"reading process keeps up; read alone, it takes {scale * spm_meta['sample_seconds'] / 60:.1f} minutes "
        "(the sampling pass's rate) plus handing the chunks to the workers;",
        f"- the sampling pass reads the corpus once: {scale * spm_meta['sample_seconds'] / 60:.1f} minutes at this "
        "rate; sentencepiece's training does not grow with the corpus;",
        f"- per rank, the batch index of an epoch peaks at {per_pair:.0f} bytes a pair: "
        f"{per_pair * WMT14_PAIRS / 2**30:.1f} GiB for 40M pairs while it is built, beside the model; the "
        "token ids are memory-mapped, shared by the ranks of a machine through the page cache.",
    ]
    write_section("WMT-scale data path: the 3M-pair replica", lines)


if __name__ == "__main__":
    main()
