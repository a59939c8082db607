"""`nmt train` on one CUDA GPU: the check a session runs when it is lent one (about 6 minutes on an H200).

    python benchmarks/gpu_train.py --out $OUT/gpu-train      # on a CUDA machine; prints and writes report.md
    python benchmarks/gpu_train.py --smoke --out /tmp/smoke   # on a CPU, tiny sizes: checks the script itself

Four parts, on the embedded Multi30k corpus (report.md is rewritten after each, so a run cut short keeps what
it measured):
1. Throughput against --max-tokens, in this process: nmt's Transformer eager, compiled (`nmt train
   --compile`) and compiled over static shapes (`--compile --static-shapes`: on CUDA, replayed from CUDA
   graphs), and torch.nn.Transformer with cuDNN's attention left out (the baseline at its best), base in bf16
   over the same batches at each size (benchmarks/train.py's loop, fused Adam, the eager models interleaved
   step by step, the compiled ones after them, apart): target tokens/s, model FLOPs utilization (the FLOPs of the
   real tokens, nmt.training.flops, as `nmt train` logs them, against the GPU's dense bf16 peak), peak memory.
2. `torchrun --nproc_per_node 1 nmt train --dist-backend nccl`: one rank through init_process_group with NCCL
   and DistributedDataParallel, as on a cluster; target tokens/s and GPU memory as `nmt train` logs them.
3. Two ranks on the one GPU (`--dist-backend gloo` over CUDA tensors): trained straight, then stopped halfway
   and resumed, the logged losses compared (an exact resume at world size 2); and NCCL asked for two ranks on
   one GPU, which must refuse with one line.
4. fp16 (`--precision fp16`): loss scale, skipped updates, losses against bf16's.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from train import Run, TorchTransformer, compare

from nmt.data.batching import collate, static_collate, token_batches
from nmt.data.corpus import load_embedded
from nmt.model.config import ModelConfig
from nmt.model.loss import TranslationLoss
from nmt.model.transformer import Transformer
from nmt.text.tokenizer import train_tokenizer
from nmt.training.flops import batch_flops, peak_flops


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


def nmt_train(out: Path, sizes: dict, updates: int, *extra: str, ranks: int = 1,
              check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    """`nmt train` under torchrun with `ranks` processes; its wall time in seconds (start-up included)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks), "--master_port",
               str(free_port()), "-m", "nmt_cli.main", "train", "--data", "multi30k", "--preset", sizes["preset"],
               "--max-steps", str(updates), "--max-tokens", str(sizes["max_tokens"]), "--valid-every", "1000000",
               "--log-every", str(sizes["log_every"]), "--keep-last", "0", "--warmup", str(sizes["warmup"]),
               "--lr", str(sizes["lr"]), "--out", str(out), *extra]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"nmt train failed ({' '.join(command)}):\n{result.stderr[-3000:]}")
    return time.monotonic() - started, result


def metrics(out: Path) -> list[dict]:
    return [record for record in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
            if "train_loss" in record]


def steady_speed(records: list[dict]) -> float:
    steady = records[len(records) // 2 :]  # past the first batches' allocations and kernel choices
    return sum(r["tokens_per_s"] for r in steady) / len(steady)


def multi30k_batches(device: torch.device, sentences: int, max_tokens: int, tokenizer,
                     multiple: int = 1, static: bool = False) -> list[tuple]:
    """Batches as `nmt train` makes them: padded to `multiple` (--compile), or to a few shapes (static:
    --static-shapes)."""
    pairs = load_embedded("multi30k", "train")
    src_ids = tokenizer.encode_batch(pairs.source[:sentences])
    tgt_ids = tokenizer.encode_batch(pairs.target[:sentences])
    index_batches = token_batches([len(s) for s in src_ids], [len(t) for t in tgt_ids], max_tokens, seed=1, epoch=0,
                                  static_shapes=static)

    def padded(src, tgt):
        if static:
            return static_collate(src, tgt, 0, 2, 3, max_tokens)
        return collate(src, tgt, 0, 2, 3, multiple=multiple)

    return [tuple(t.to(device) for t in padded([src_ids[i] for i in b], [tgt_ids[i] for i in b]))
            for b in index_batches]


def part_throughput(device: torch.device, sizes: dict, steps: int) -> list[str]:
    pairs = load_embedded("multi30k", "train")
    tokenizer = train_tokenizer(pairs.source[:20000] + pairs.target[:20000], 8000)
    config = ModelConfig.preset(sizes["preset"], vocab_size=tokenizer.vocab_size)
    def nmt_run(compiled: bool, graphs: bool = False) -> Run:
        torch.manual_seed(0)
        criterion = TranslationLoss(Transformer(config), label_smoothing=0.1, compiled=compiled,
                                    graphs=graphs and device.type == "cuda")

        def nmt_loss(src, tgt_in, tgt_out, criterion=criterion):
            return criterion(src, tgt_in, tgt_out) / (tgt_out != 0).sum()

        return Run(criterion.model, "bf16", nmt_loss, device)

    baseline = TorchTransformerNoCudnn if device.type == "cuda" else TorchTransformer
    # the compiled model is timed after the others, apart: while Inductor compiles, its workers take the host
    # that launches the eager models' kernels (they ran at half speed beside it on the H200)
    runs = {"nmt": nmt_run(False), "torch.nn.Transformer, cuDNN attention off": Run(baseline(config), "bf16",
                                                                                   device=device)}
    name, peak = peak_flops(device)
    lines = [f"{name}; {sizes['preset']} ({config.d_model} wide, {config.n_encoder_layers}+{config.n_decoder_layers} "
             f"layers, 8,000 pieces), bf16 autocast, fused Adam, Multi30k batches; at each --max-tokens up to {steps} "
             "timed steps a model after 2 warm-up steps on the largest batches, the models interleaved.", "",
             "| --max-tokens | model | target tok/s | model FLOPs utilization | peak GPU memory (GiB) |",
             "|---|---|---|---|---|"]
    started = time.monotonic()
    compiled = {}
    graphs = " (CUDA graphs)" if device.type == "cuda" else ""
    phases = {"eager": None, "compiled": "nmt --compile", "graphs": f"nmt --compile --static-shapes{graphs}"}
    for phase, label in phases.items():
        static = phase == "graphs"
        if label:
            runs = {label: nmt_run(True, graphs=static)}
            warm = time.monotonic()
            for max_tokens in sizes["sweep"]:  # every size's shapes compiled (and recorded) before any timing
                for batch in multi30k_batches(device, sizes["sentences"], max_tokens, tokenizer, 8, static):
                    runs[label].step(batch, timed=False)
            compiled[phase] = time.monotonic() - warm
        for max_tokens in sizes["sweep"]:
            batches = multi30k_batches(device, sizes["sentences"], max_tokens, tokenizer,
                                       multiple=8 if label else 1, static=static)
            batch = max(batches, key=lambda b: b[1].numel())
            tokens = int((batch[2] != 0).sum())
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            speeds = compare(list(runs.values()), batches, min(steps, len(batches)))
            memory = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
            flops = batch_flops(config, batch[0], batch[2]) / tokens  # the same real work for every model
            for label, speed in zip(runs, speeds, strict=True):
                utilization = f"{speed * flops / peak:.1%}" if peak else "-"
                lines.append(f"| {max_tokens:,} | {label} | {speed:,.0f} | {utilization} | {memory:.1f} |")
            print(lines[-len(runs):], f"{time.monotonic() - started:.0f} s", flush=True)
    lines += ["", f"Peak memory: of the models measured together at that size. The compiled models: timed after "
              f"the others, apart, every size compiled first ({compiled['compiled']:.0f} s; with static shapes "
              f"{compiled['graphs']:.0f} s), batches padded to multiples of 8, or with --static-shapes to a few "
              "shapes (lengths in buckets, rows to --max-tokens)."]
    return lines


def part_nccl(folder: Path, sizes: dict, updates: int) -> list[str]:
    wall, result = nmt_train(folder / "nccl", sizes, updates, "--dist-backend", "nccl", "--precision", "bf16")
    records = metrics(folder / "nccl")
    last = records[-1]
    joined = next((line.split("train: ", 1)[-1] for line in result.stderr.splitlines() if "joined the process group"
                   in line), "no process group joined")
    return [f"`torchrun --nproc_per_node 1 nmt train --dist-backend nccl --precision bf16 --preset {sizes['preset']} "
            f"--max-tokens {sizes['max_tokens']} --max-steps {updates}`: {wall:.0f} s in all, start-up included; "
            f"exit {result.returncode}; its log: \"{joined.strip()}\"; final train loss "
            f"{last['train_loss']:.3f}; second half {steady_speed(records):,.0f} target tok/s; "
            f"{last.get('gpu_memory_gib', '-')} GiB of GPU memory."]


def part_two_ranks(folder: Path, sizes: dict, updates: int) -> list[str]:
    gloo = ("--dist-backend", "gloo", "--precision", "bf16")
    wall, _ = nmt_train(folder / "two", sizes, updates, *gloo, ranks=2)
    half = updates // 2
    nmt_train(folder / "two-resumed", sizes, half, *gloo, ranks=2)
    nmt_train(folder / "two-resumed", sizes, updates, *gloo, ranks=2)
    straight = {r["step"]: r["train_loss"] for r in metrics(folder / "two")}
    resumed = {r["step"]: r["train_loss"] for r in metrics(folder / "two-resumed")}
    # a logged loss is the mean since the previous log: the window that holds the resume averages fewer updates
    after = [step for step in straight if step - sizes["log_every"] >= half]
    differing = [(step, straight[step], resumed.get(step)) for step in after if straight[step] != resumed.get(step)]
    _, refused = nmt_train(folder / "refused", sizes, 2, "--dist-backend", "nccl", ranks=2, check=False)
    line = next((text for text in refused.stderr.splitlines() if "NCCL" in text or "nccl" in text), "(no such line)")
    return [f"Two ranks on one GPU, gloo over CUDA tensors, {updates} updates: {wall:.0f} s, second half "
            f"{steady_speed(metrics(folder / 'two')):,.0f} target tok/s (both ranks); trained to {half}, stopped, "
            f"resumed to {updates}: {len(after) - len(differing)} of {len(after)} logged losses after the resume equal "
            "the straight run's"
            + (f" (first difference at step {differing[0][0]}: {differing[0][1]} against {differing[0][2]})"
               if differing else "") + ".", "",
            f"NCCL asked for two ranks on one GPU: exit {refused.returncode}, `{line.strip()}`."]


def part_fp16(folder: Path, sizes: dict, updates: int) -> list[str]:
    wall, _ = nmt_train(folder / "fp16", sizes, updates, "--precision", "fp16")
    if not (folder / "nccl" / "metrics.jsonl").exists():  # part 2's run is the bf16 one, else one here
        nmt_train(folder / "nccl", sizes, updates, "--precision", "bf16")
    records, bf16 = metrics(folder / "fp16"), metrics(folder / "nccl")
    last = records[-1]
    return [f"`--precision fp16`, {updates} updates, {wall:.0f} s: final train loss {last['train_loss']:.3f} "
            f"(bf16: {bf16[-1]['train_loss']:.3f}); loss scale {last.get('loss_scale')}; skipped updates "
            f"{last.get('skipped_updates', 0)}; second half {steady_speed(records):,.0f} target tok/s (bf16: "
            f"{steady_speed(bf16):,.0f})."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/gpu-train"))
    parser.add_argument("--updates", type=int, default=80)
    parser.add_argument("--steps", type=int, default=12, help="Timed steps per model and size in part 1.")
    parser.add_argument("--smoke", action="store_true", help="Tiny sizes on the CPU, to check the script.")
    parser.add_argument("--parts", default="1,2,3,4", help="Which parts to run.")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    if device.type != "cuda" and not args.smoke:
        sys.exit("gpu_train.py: no CUDA device (use --smoke to check the script on a CPU)")
    # the peak rate given: the paper's rule at warmup 100 would be 4.4e-3, where base stalls at the unigram loss
    sizes = ({"preset": "tiny", "max_tokens": 600, "log_every": 2, "warmup": 4, "lr": 1e-3, "sentences": 400,
              "sweep": (300, 600)}
             if args.smoke else
             {"preset": "base", "max_tokens": 16384, "log_every": 10, "warmup": 100, "lr": 7e-4, "sentences": 29000,
              "sweep": (4096, 16384, 32768, 65536)})
    updates = 8 if args.smoke else args.updates
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("NMT_CACHE_DIR", str(args.out / "cache"))  # the subprocesses' prepared corpus
    parts = {"1": ("1. Throughput against --max-tokens", lambda: part_throughput(device, sizes, args.steps)),
             "2": ("2. One rank through NCCL and DDP", lambda: part_nccl(args.out, sizes, updates)
                   if device.type == "cuda" else ["NCCL runs on CUDA only: not checked here."]),
             "3": ("3. Two ranks on one GPU, and an exact resume", lambda: part_two_ranks(args.out, sizes, updates)),
             "4": ("4. fp16", lambda: part_fp16(args.out, sizes, updates) if device.type == "cuda"
                   else ["fp16 training runs on CUDA only: not checked here."])}
    command = (f"python benchmarks/gpu_train.py{' --smoke' if args.smoke else ''} --updates {updates} --steps "
               f"{args.steps}{f' --parts {args.parts}' if args.parts != '1,2,3,4' else ''}")
    sections = [f"# gpu_train.py, {time.strftime('%Y-%m-%d')}: {peak_flops(device)[0]}, torch {torch.__version__}",
                "", f"Command: `{command}`", ""]
    for number in args.parts.split(","):
        title, part = parts[number]
        started = time.monotonic()
        try:
            lines = part()
        except Exception as exc:  # a failing part is a finding: the others still run and report
            lines = [f"FAILED: {type(exc).__name__}: {str(exc)[-2500:]}"]
        sections += [f"## {title} ({time.monotonic() - started:.0f} s)", "", *lines, ""]
        print("\n".join(sections[-len(lines) - 3 :]), flush=True)
        (args.out / "report.md").write_text("\n".join(sections))


if __name__ == "__main__":
    main()
