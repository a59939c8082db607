"""Where one WMT-shaped training step of `nmt train` spends its time, under torch.profiler: the step a GPU session
runs first (issue 81), in about a minute on an H200.

    python benchmarks/train_profile.py --out $OUT/profile          # CUDA: base, bf16, 16k and 64k tokens
    python benchmarks/train_profile.py --smoke --out /tmp/profile   # CPU, tiny sizes: checks the script itself

The step is nmt train's own (nmt.training.loop.Loop.advance over Loop.collated batches: the chunked loss, the
backward, the gradient norm, fused Adam skipping on the device, the update's values read while the next one
runs), on `base` with a 32,000-piece vocabulary and batches drawn by token_batches from the lengths of 4,000 WMT
pairs (benchmarks/wmt-lengths.tsv: Europarl and news, mean 29 source and 34 target pieces), random ids: the time
of a step does not depend on which ids.
After warm-up steps, a few steps at each --max-tokens are profiled; the device's kernels are put in groups by
name (GROUPS: products, attention, loss, optimizer, elementwise, copies), and beside them the share of the
step the device sat idle, the host's time a step and its kernel launches, and the model FLOPs utilization on
real tokens (nmt.training.flops). Writes report.md (the table) and trace-<tokens>.json.gz (for Perfetto or
chrome://tracing) to --out. On a CPU (--smoke) the groups are of the host's operators instead.
"""

from __future__ import annotations

import argparse
import gzip
import random
import re
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from nmt.data.batching import token_batches
from nmt.model.config import ModelConfig
from nmt.model.loss import TranslationLoss
from nmt.model.transformer import Transformer
from nmt.training.config import TrainConfig
from nmt.training.distributed import Distributed
from nmt.training.flops import peak_flops
from nmt.training.loop import Clock, Feed, Learner, Loop, Run

LENGTHS = Path(__file__).with_name("wmt-lengths.tsv")

# (group, pattern of a kernel's or operator's name): the first that matches; the order matters (a fused Adam
# kernel is elementwise too; a flash-attention kernel calls itself a GEMM in some builds)
GROUPS = (
    ("copies and fills", r"memcpy|memset|copy_|^aten::to$|^aten::_to_copy|catarraybatched|^aten::cat$|fill"),
    ("optimizer (Adam, gradient scaling, norm)", r"adam|multi_tensor|foreach|^aten::_fused|"
                                                  r"^aten::linalg_vector_norm"),
    ("attention", r"flash|fmha|attention|efficient|^aten::_scaled_dot|^aten::bmm|sdpa|softmax_warp"),
    ("loss (log-softmax, cross-entropy)", r"log_softmax|softmax|cross_entropy|nll|logsumexp|^aten::exp"),
    ("matrix products", r"gemm|cutlass|xmma|nvjet|cublas|sm90|sm80|^aten::mm$|^aten::addmm|^aten::matmul|"
                        r"^aten::linear$"),
    ("elementwise and reductions", r"elementwise|vectorized|unrolled|reduce|layer_norm|dropout|^aten::"),
)
SIZES = {"gpu": {"preset": "base", "vocab": 32000, "sweep": (16384, 65536), "warmup": 3, "steps": 5},
         "smoke": {"preset": "tiny", "vocab": 1000, "sweep": (400, 800), "warmup": 1, "steps": 2}}


def wmt_lengths() -> list[tuple[int, int]]:
    rows = [line.split("\t") for line in LENGTHS.read_text().splitlines() if not line.startswith("#")]
    return [(int(source), int(target)) for source, target in rows]


def step_batches(lengths: list[tuple[int, int]], max_tokens: int, vocab: int, count: int, seed: int = 0):
    """`count` batches of random ids with WMT's lengths, as token_batches makes them (bucketed by length), drawn
    at random from all the batches of a shuffled epoch: some short sentences, some long."""
    rng = random.Random(seed)
    pairs = [lengths[rng.randrange(len(lengths))] for _ in range(max(4000, 4 * count * max_tokens // 30))]
    batches = token_batches([s for s, _ in pairs], [t for _, t in pairs], max_tokens, seed=seed, epoch=0)
    chosen = rng.sample(batches, min(count, len(batches)))
    ids = random.Random(seed + 1)
    return [([[ids.randrange(4, vocab) for _ in range(pairs[i][0])] for i in batch],
             [[ids.randrange(4, vocab) for _ in range(pairs[i][1])] for i in batch]) for batch in chosen]


def training_loop(config: ModelConfig, device: torch.device, max_tokens: int) -> Loop:
    """nmt train's Loop around a fresh model, without a corpus: its update() and collated() only."""
    torch.manual_seed(0)
    model = Transformer(config).to(device)
    train_config = TrainConfig(out="/tmp/nmt-profile", data="multi30k", max_tokens=max_tokens, max_steps=100,
                               clip_norm=0.0, precision="bf16")
    run = Run(train_config, Distributed(), device, "bf16", 1, {}, Path(train_config.out), Clock())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)  # as nmt train
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return Loop(run, Learner(model, TranslationLoss(model, 0.1), optimizer, scheduler), Feed(None), {"step": 0})


def group_of(name: str) -> str:
    lowered = name.lower()
    return next((group for group, pattern in GROUPS if re.search(pattern, lowered)), "other")


def busy_time(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def profiled(loop: Loop, batches: list, device: torch.device, warmup: int) -> dict:
    """Per step: device time by group (ms), idle share, host time (ms), kernel launches, real FLOPs."""
    collated = [loop.collated(batch) for batch in batches]
    for batch in collated[:warmup]:
        loop.advance([batch])
    loop.settle()
    timed = collated[warmup:]
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as profiler:
        started = time.perf_counter()
        for batch in timed:
            loop.advance([batch])  # as nmt train: queued, the update before read meanwhile
        loop.settle()
        if cuda:
            torch.cuda.synchronize(device)
        wall = time.perf_counter() - started
    steps = len(timed)
    groups: dict[str, float] = defaultdict(float)
    intervals, launches = [], 0
    for event in profiler.events():
        if cuda and event.device_type == torch.autograd.DeviceType.CUDA:
            groups[group_of(event.name)] += event.time_range.elapsed_us() / 1e3 / steps
            intervals.append((event.time_range.start, event.time_range.end))
        elif event.device_type == torch.autograd.DeviceType.CPU:
            if re.match(r"cudaLaunchKernel|cuLaunchKernel|cudaGraphLaunch", event.name):
                launches += 1
            elif not cuda and event.name.startswith("aten::") and event.cpu_parent is None:
                groups[group_of(event.name)] += event.cpu_time_total / 1e3 / steps  # top-level operators
    busy = busy_time(intervals) / 1e3 / steps if cuda else sum(groups.values())
    step_ms = wall * 1e3 / steps
    return {"groups": dict(groups), "step_ms": step_ms, "idle": max(0.0, 1 - busy / step_ms) if cuda else None,
            "launches": launches / steps, "flops": sum(b.flops for b in timed) / steps,
            "tokens": sum(b.n_tokens for b in timed) / steps, "padded": sum(b.tgt_out.numel() for b in timed) / steps,
            "profiler": profiler}


def report(results: dict[int, dict], device: torch.device, sizes: dict, config: ModelConfig) -> list[str]:
    name, peak = peak_flops(device)
    sweep = list(results)
    what = "device time" if device.type == "cuda" else "host time of top-level operators"
    lines = [f"{name}, torch {torch.__version__}; {sizes['preset']} ({config.d_model} wide, "
             f"{config.n_encoder_layers}+{config.n_decoder_layers} layers, {config.vocab_size:,} pieces), bf16 "
             f"autocast, fused Adam, nmt train's update; WMT-shaped batches (benchmarks/wmt-lengths.tsv); "
             f"{sizes['steps']} profiled steps at each size after {sizes['warmup']} warm-up steps.", "",
             "| " + " | ".join(["group"] + [f"{size:,} tokens: ms a step ({what})" for size in sweep]) + " |",
             "|" + "---|" * (len(sweep) + 1)]
    names = [group for group, _ in GROUPS] + ["other"]
    for group in names:
        cells = []
        for size in sweep:
            r = results[size]
            total = sum(r["groups"].values()) or 1.0
            value = r["groups"].get(group, 0.0)
            cells.append(f"{value:.2f} ({value / total:.0%})")
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    rows = [("step, wall clock (ms)", lambda r: f"{r['step_ms']:.1f}"),
            ("device idle, share of the step", lambda r: f"{r['idle']:.0%}" if r["idle"] is not None else "-"),
            ("kernel launches a step", lambda r: f"{r['launches']:.0f}"),
            ("target tokens a step (padded positions)", lambda r: f"{r['tokens']:,.0f} ({r['padded']:,.0f})"),
            ("target tokens/s", lambda r: f"{r['tokens'] / r['step_ms'] * 1e3:,.0f}"),
            ("model FLOPs utilization on real tokens",
             lambda r: f"{r['flops'] / r['step_ms'] * 1e3 / peak:.1%}" if peak else "-")]
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(results[size]) for size in sweep) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smoke", action="store_true", help="Tiny sizes on the CPU, to check the script.")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    if device.type != "cuda" and not args.smoke:
        sys.exit("train_profile.py: no CUDA device (use --smoke to check the script on a CPU)")
    sizes = SIZES["smoke" if args.smoke else "gpu"]
    args.out.mkdir(parents=True, exist_ok=True)
    config = ModelConfig.preset(sizes["preset"], vocab_size=sizes["vocab"], max_positions=512)
    lengths = wmt_lengths()
    results, started = {}, time.monotonic()
    for max_tokens in sizes["sweep"]:
        loop = training_loop(config, device, max_tokens)
        batches = step_batches(lengths, max_tokens, config.vocab_size, sizes["warmup"] + sizes["steps"])
        result = profiled(loop, batches, device, sizes["warmup"])
        trace = args.out / f"trace-{max_tokens}.json"
        result.pop("profiler").export_chrome_trace(str(trace))
        with open(trace, "rb") as plain, gzip.open(trace.with_suffix(".json.gz"), "wb") as packed:
            shutil.copyfileobj(plain, packed)  # tens of MB of JSON at 64k tokens: a few once packed
        trace.unlink()
        results[max_tokens] = result
        del loop
        if device.type == "cuda":
            torch.cuda.empty_cache()
        print(f"{max_tokens} tokens: {result['step_ms']:.1f} ms a step, {time.monotonic() - started:.0f} s",
              flush=True)
    lines = [f"# train_profile.py, {time.strftime('%Y-%m-%d')}", ""] + report(results, device, sizes, config)
    (args.out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
