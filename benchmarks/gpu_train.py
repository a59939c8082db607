"""`nmt train` on one CUDA GPU: the check a session runs when it is lent one (about 4 minutes on an H200).

    python benchmarks/gpu_train.py --out $OUT/gpu-train      # on a CUDA machine; prints and writes report.md
    python benchmarks/gpu_train.py --smoke --out /tmp/smoke   # on a CPU, tiny sizes: checks the script itself

Four parts, on the embedded Multi30k corpus:
1. `torchrun --nproc_per_node 1 nmt train` of `base` in bf16 for --updates updates: target tokens/s,
   gradient norm and GPU memory as `nmt train` logs them (metrics.jsonl).
2. In this process, nmt's Transformer against torch.nn.Transformer of the same size over the same batches
   (benchmarks/train.py's loop, bf16 autocast, fused Adam, the models interleaved step by step), on CUDA
   also with cuDNN's attention left out (the baseline at its best): target tokens/s and model FLOPs
   utilization (the FLOPs of a step counted by torch.utils.flop_counter, against the GPU's dense bf16 peak),
   the attention kernels a step of nmt's model runs and each model's heaviest operations (torch.profiler).
3. An exact resume: the run of part 1 trained again to half of --updates, then resumed to the end;
   its weights and losses against the straight run's.
4. fp16: the run of part 1 with --precision fp16: loss scale, skipped updates, losses against bf16's.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode
from train import Run, TorchTransformer, compare

from nmt.data.batching import collate, token_batches
from nmt.data.corpus import load_embedded
from nmt.model.checkpoint import load_checkpoint
from nmt.model.config import ModelConfig
from nmt.model.loss import TranslationLoss
from nmt.model.transformer import Transformer
from nmt.text.tokenizer import train_tokenizer

# dense bf16 tensor-core peaks (FLOP/s) from the vendor's data sheets, by a name torch reports
PEAK_BF16 = {"H100 PCIe": 756e12, "H100": 989e12, "H200": 989e12, "A100": 312e12, "L4": 121e12}


def peak_flops(device: torch.device) -> tuple[str, float | None]:
    if device.type != "cuda":
        return "CPU", None
    name = torch.cuda.get_device_name(device)
    return name, next((peak for key, peak in PEAK_BF16.items() if key in name), None)


class TorchTransformerNoCudnn(TorchTransformer):
    """torch.nn.Transformer with cuDNN's attention left out of SDPA's choices. Where torch picks it (its masked
    attention on Hopper), cuDNN builds a plan for each new shape, hundreds of milliseconds each, and batches of
    varying lengths bring new shapes all through training: the baseline at its best runs without it."""

    def forward(self, src, tgt_in):
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            return super().forward(src, tgt_in)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def nmt_train(out: Path, sizes: dict, precision: str, updates: int) -> float:
    """`nmt train` under torchrun with one process; its wall time in seconds (start-up included)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "--master_port",
               str(free_port()), "-m", "nmt_cli.main", "train", "--data", "multi30k", "--preset", sizes["preset"],
               "--precision", precision, "--max-steps", str(updates), "--max-tokens", str(sizes["max_tokens"]),
               "--valid-every", "1000000", "--log-every", str(sizes["log_every"]), "--save-every", str(updates),
               "--keep-last", "0", "--warmup", str(sizes["warmup"]), "--lr", str(sizes["lr"]), "--out", str(out)]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"nmt train failed ({' '.join(command)}):\n{result.stderr[-3000:]}")
    return time.monotonic() - started


def metrics(out: Path) -> list[dict]:
    return [record for record in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
            if "train_loss" in record]


def part_training(folder: Path, sizes: dict, updates: int) -> list[str]:
    wall = nmt_train(folder / "bf16", sizes, "bf16", updates)
    records = metrics(folder / "bf16")
    steady = records[len(records) // 2 :]  # past the first batches' allocations and kernel choices
    shown = records[:: max(1, len(records) // 8)]
    shown += records[-1:] if shown[-1] is not records[-1] else []
    lines = [f"`torchrun --nproc_per_node 1 nmt train --data multi30k --preset {sizes['preset']} --precision bf16 "
             f"--max-steps {updates} --max-tokens {sizes['max_tokens']}`: {wall:.0f} s in all, start-up included.",
             "", "| step | train loss | target tok/s | grad norm | GPU memory (GiB) |", "|---|---|---|---|---|"]
    lines += [f"| {r['step']} | {r['train_loss']:.3f} | {r['tokens_per_s']} | {r.get('grad_norm', '-')} | "
              f"{r.get('gpu_memory_gib', '-')} |" for r in shown]
    lines += ["", f"Second half: {sum(r['tokens_per_s'] for r in steady) / len(steady):.0f} target tokens/s."]
    return lines


def part_throughput(device: torch.device, sizes: dict, steps: int) -> list[str]:
    pairs = load_embedded("multi30k", "train")
    tokenizer = train_tokenizer(pairs.source[:20000] + pairs.target[:20000], 8000)
    count = sizes["sentences"]
    src_ids, tgt_ids = tokenizer.encode_batch(pairs.source[:count]), tokenizer.encode_batch(pairs.target[:count])
    index_batches = token_batches([len(s) for s in src_ids], [len(t) for t in tgt_ids], sizes["max_tokens"], seed=1,
                                  epoch=0)
    batches = [tuple(t.to(device) for t in collate([src_ids[i] for i in b], [tgt_ids[i] for i in b], 0, 2, 3))
               for b in index_batches]
    config = ModelConfig.preset(sizes["preset"], vocab_size=tokenizer.vocab_size)
    torch.manual_seed(0)
    model = Transformer(config)
    criterion = TranslationLoss(model, label_smoothing=0.1).to(device)

    def nmt_loss(src, tgt_in, tgt_out):
        return criterion(src, tgt_in, tgt_out) / (tgt_out != 0).sum()

    runs = {"nmt": Run(model, "bf16", nmt_loss, device),
            "torch.nn.Transformer": Run(TorchTransformer(config), "bf16", device=device)}
    if device.type == "cuda":
        runs["torch.nn.Transformer, cuDNN attention off"] = Run(TorchTransformerNoCudnn(config), "bf16", device=device)
    ours = runs["nmt"]
    speeds = dict(zip(runs, compare(list(runs.values()), batches, min(steps, len(batches))), strict=True))
    batch = max(batches, key=lambda b: b[1].numel())
    tokens = int((batch[2] != 0).sum())
    flops = {}
    for label, run in runs.items():
        with FlopCounterMode(display=False) as counter:
            run.step(batch, timed=False)
        flops[label] = counter.get_total_flops() / tokens
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        ours.step(batch, timed=False)
    kernels = Counter({event.key: event.count for event in profiler.key_averages()
                       if "attention" in event.key and event.key.startswith("aten::_")})
    heaviest = [f"{label}: " + top_operations(run, batch, device) for label, run in runs.items()]
    name, peak = peak_flops(device)
    lines = [f"{name}; {sizes['preset']}, bf16 autocast, batches of about {sizes['max_tokens']} padded tokens from "
             f"Multi30k, {min(steps, len(batches))} timed steps each after 2 warm-up steps, interleaved.", "",
             "| model | target tok/s | GFLOP per target token | model FLOPs utilization |", "|---|---|---|---|"]
    for label, speed in speeds.items():
        utilization = f"{speed * flops[label] / peak:.1%}" if peak else "- (no peak known)"
        lines.append(f"| {label} | {speed:.0f} | {flops[label] / 1e9:.3f} | {utilization} |")
    best = max((label for label in speeds if label != "nmt"), key=speeds.get)
    lines += ["", f"nmt / {best} (the faster baseline): {speeds['nmt'] / speeds[best]:.2f}x.", "",
              "Attention kernels in one step of nmt's model: "
              + (", ".join(f"`{key}` x{n}" for key, n in sorted(kernels.items())) or "none found") + ".", "",
              "The operations that take most of one step on the largest batch (self time, ms, CPU / device):", "",
              *(f"- {line}" for line in heaviest)]
    return lines


def top_operations(run: Run, batch, device: torch.device, count: int = 6) -> str:
    """The operations of one training step with the most self time on the host and on the device."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as profiler:
        run.step(batch, timed=False)
    events = profiler.key_averages()
    device_time = (lambda e: getattr(e, "self_device_time_total", 0)) if device.type == "cuda" else (lambda e: 0)
    ranked = sorted(events, key=lambda e: max(e.self_cpu_time_total, device_time(e)), reverse=True)[:count]
    def name(key: str) -> str:  # a kernel's name can be a template of a thousand characters
        return key if len(key) <= 60 else key[:57] + "..."

    return ", ".join(f"`{name(e.key)}` x{e.count} {e.self_cpu_time_total / 1e3:.1f} / {device_time(e) / 1e3:.1f}"
                     for e in ranked)


def part_resume(folder: Path, sizes: dict, updates: int) -> list[str]:
    half = updates // 2
    nmt_train(folder / "resumed", sizes, "bf16", half)
    nmt_train(folder / "resumed", sizes, "bf16", updates)
    straight, resumed = (load_checkpoint(folder / name / "last.pt") for name in ("bf16", "resumed"))
    worst = max((straight.weights[key].float() - resumed.weights[key].float()).abs().max().item()
                for key in straight.weights)
    losses = {r["step"]: r["train_loss"] for r in metrics(folder / "bf16")}
    # a logged loss is the mean since the previous log: the first window after the resume holds fewer updates
    after = [(r["step"], losses.get(r["step"]), r["train_loss"]) for r in metrics(folder / "resumed")
             if r["step"] - sizes["log_every"] >= half]
    differing = [(step, a, b) for step, a, b in after if a != b]
    return [f"Trained to step {half}, stopped, resumed to step {updates} with the same command; against the straight "
            f"run: largest weight difference {worst:.3g}; {len(after) - len(differing)} of {len(after)} logged "
            "losses after the resume identical"
            + (f" (first difference at step {differing[0][0]}: {differing[0][1]} against {differing[0][2]})"
               if differing else "") + "."]


def part_fp16(folder: Path, sizes: dict, updates: int) -> list[str]:
    wall = nmt_train(folder / "fp16", sizes, "fp16", updates)
    records, bf16 = metrics(folder / "fp16"), metrics(folder / "bf16")
    last, steady = records[-1], records[len(records) // 2 :]
    return [f"`--precision fp16`, {updates} updates, {wall:.0f} s: final train loss {last['train_loss']:.3f} "
            f"(bf16: {bf16[-1]['train_loss']:.3f}); loss scale {last.get('loss_scale')}; skipped updates "
            f"{last.get('skipped_updates', 0)}; second half {sum(r['tokens_per_s'] for r in steady) / len(steady):.0f} "
            "target tok/s."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/gpu-train"))
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--steps", type=int, default=30, help="Timed steps per model in part 2.")
    parser.add_argument("--smoke", action="store_true", help="Tiny sizes on the CPU, to check the script.")
    parser.add_argument("--parts", default="1,2,3,4", help="Which parts to run (3 and 4 need 1's run).")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    if device.type != "cuda" and not args.smoke:
        sys.exit("gpu_train.py: no CUDA device (use --smoke to check the script on a CPU)")
    # the peak rate given: the paper's rule at warmup 100 would be 4.4e-3, where base stalls at the unigram loss
    sizes = ({"preset": "tiny", "max_tokens": 600, "log_every": 2, "warmup": 4, "lr": 1e-3, "sentences": 400}
             if args.smoke else
             {"preset": "base", "max_tokens": 16384, "log_every": 20, "warmup": 100, "lr": 7e-4, "sentences": 20000})
    updates = 8 if args.smoke else args.updates
    args.out.mkdir(parents=True, exist_ok=True)
    sections = []
    parts = (("1. nmt train under torchrun", lambda: part_training(args.out, sizes, updates)),
             ("2. Against torch.nn.Transformer", lambda: part_throughput(device, sizes, args.steps)),
             ("3. Exact resume", lambda: part_resume(args.out, sizes, updates)),
             ("4. fp16", lambda: part_fp16(args.out, sizes, updates) if device.type == "cuda"
              else ["fp16 training runs on CUDA only: not checked here."]))
    for title, part in (parts[int(number) - 1] for number in args.parts.split(",")):
        started = time.monotonic()
        lines = part()
        sections += [f"## {title} ({time.monotonic() - started:.0f} s)", "", *lines, ""]
        print("\n".join(sections[-len(lines) - 3 :]), flush=True)
    command = (f"python benchmarks/gpu_train.py{' --smoke' if args.smoke else ''} --updates {updates}"
               f"{f' --parts {args.parts}' if args.parts != '1,2,3,4' else ''}")
    header = [f"# gpu_train.py, {time.strftime('%Y-%m-%d')}: {peak_flops(device)[0]}, torch {torch.__version__}",
              "", f"Command: `{command}`", ""]
    (args.out / "report.md").write_text("\n".join(header + sections))


if __name__ == "__main__":
    main()
