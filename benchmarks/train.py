"""Training throughput: target tokens/s of nmt's Transformer and of torch.nn.Transformer with the same
dimensions, trained by the same loop (same batches, Adam, label-smoothed loss: nmt's as `nmt train` computes it,
nmt.model.loss, torch.nn.Transformer's through F.cross_entropy on its logits), fp32 and bf16 autocast.

    python benchmarks/train.py --steps 12       # rewrites benchmarks/RESULTS.md's training section

Batches are real Multi30k sentences (the embedded training set) tokenized by a sentencepiece model
trained here, about 4k padded tokens each. Never run it while something else loads the cores.

Fairness: the allocator is set up as `nmt train` sets it up (nmt.training.allocator); both models warm up on the
two largest batches, so that neither pays for first touching its peak memory in the timed steps; then
they train step by step in turn over the same batches, so that the machine's drift hits both alike.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time

import torch
import torch.nn.functional as F
from results import cpu_name, write_section
from torch import nn

from nmt.data.batching import collate, token_batches
from nmt.data.corpus import load_embedded
from nmt.model.config import ModelConfig
from nmt.model.loss import TranslationLoss
from nmt.model.transformer import Transformer, sinusoidal_table
from nmt.text.tokenizer import train_tokenizer
from nmt.training.allocator import keep_freed_memory

VOCAB = 8000


class TorchTransformer(nn.Module):
    """torch.nn.Transformer with the same embeddings, positions and tied output projection."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.register_buffer("positions", sinusoidal_table(config.max_positions, config.d_model), persistent=False)
        self.transformer = nn.Transformer(config.d_model, config.n_heads, config.n_encoder_layers,
                                          config.n_decoder_layers, config.d_ff, config.dropout, batch_first=True)

    def forward(self, src, tgt_in):
        def embed(tokens):
            return self.embed(tokens) * math.sqrt(self.config.d_model) + self.positions[: tokens.size(1)]

        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=tgt_in.device)
        src_pad = src == self.config.pad_id
        out = self.transformer(embed(src), embed(tgt_in), tgt_mask=causal, src_key_padding_mask=src_pad,
                               memory_key_padding_mask=src_pad, tgt_is_causal=True)
        return F.linear(out, self.embed.weight)


class Run:
    """One model with its optimizer, trained step by step; `seconds` counts the timed steps only."""

    def __init__(self, model: nn.Module, precision: str, loss=None, device: torch.device = torch.device("cpu")):
        """loss: (src, tgt_in, tgt_out) -> mean loss; default cross-entropy over the model's logits. On CUDA,
        fused Adam (as `nmt train` there) and each step timed to the end of its GPU work."""
        self.model = model.train().to(device)
        self.loss = loss
        self.device = device
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9,
                                          fused=device.type == "cuda")
        self.bf16 = precision == "bf16"
        self.seconds = 0.0

    def step(self, batch, timed: bool) -> None:
        src, tgt_in, tgt_out = batch
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(self.device)
        started = time.perf_counter()
        with torch.autocast(self.device.type, dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext():
            if self.loss is not None:
                loss = self.loss(src, tgt_in, tgt_out)
            else:
                logits = self.model(src, tgt_in)
        if self.loss is None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt_out.view(-1), ignore_index=0,
                                   label_smoothing=0.1)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(self.device)
        if timed:
            self.seconds += time.perf_counter() - started


def compare(runs: list[Run], batches, steps: int) -> list[float]:
    """Target tokens/s of each run over the same batches, the runs interleaved step by step (taking
    turns at going first) after two warm-up steps on the largest batches."""
    largest = sorted(batches, key=lambda b: b[0].numel() + b[1].numel(), reverse=True)[:2]
    for batch in largest:
        for run in runs:
            run.step(batch, timed=False)
    for i, batch in enumerate(batches[:steps]):
        for run in runs if i % 2 == 0 else runs[::-1]:
            run.step(batch, timed=True)
    tokens = sum(int((tgt_out != 0).sum()) for _, _, tgt_out in batches[:steps])
    return [tokens / run.seconds for run in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--presets", default="small,base")
    parser.add_argument("--compile", action="store_true", help="Also nmt with `nmt train --compile` (bf16 only): "
                        "compiled first, before the timed steps; lengths padded to 8 as the trainer pads them.")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    keep_freed_memory()
    pairs = load_embedded("multi30k", "train")
    tokenizer = train_tokenizer(pairs.source[:20000] + pairs.target[:20000], VOCAB)
    src_ids, tgt_ids = tokenizer.encode_batch(pairs.source[:4000]), tokenizer.encode_batch(pairs.target[:4000])
    index_batches = token_batches([len(s) for s in src_ids], [len(t) for t in tgt_ids], 4096, seed=1, epoch=0)
    batches = [collate([src_ids[i] for i in b], [tgt_ids[i] for i in b], 0, 2, 3) for b in index_batches]
    padded = [collate([src_ids[i] for i in b], [tgt_ids[i] for i in b], 0, 2, 3, multiple=8) for b in index_batches]
    rows, compiled_rows = [], []
    for preset in args.presets.split(","):
        config = ModelConfig.preset(preset, vocab_size=tokenizer.vocab_size)
        for precision in ("fp32", "bf16"):
            torch.manual_seed(0)
            model = Transformer(config)
            criterion = TranslationLoss(model, label_smoothing=0.1)  # as nmt train computes its loss

            def nmt_loss(src, tgt_in, tgt_out, criterion=criterion):
                return criterion(src, tgt_in, tgt_out) / (tgt_out != 0).sum()

            ours, theirs = compare([Run(model, precision, nmt_loss), Run(TorchTransformer(config), precision)],
                                   batches, args.steps)
            print(f"{preset:5} {precision} nmt {ours:7.0f}  torch.nn.Transformer {theirs:7.0f} tgt tok/s", flush=True)
            rows.append((preset, precision, ours, theirs))
        if args.compile:  # compiled apart: the eager runs' timings never share the machine with the compiler
            torch.manual_seed(0)
            model = Transformer(config)
            criterion = TranslationLoss(model, label_smoothing=0.1, compiled=True)

            def compiled_loss(src, tgt_in, tgt_out, criterion=criterion):
                return criterion(src, tgt_in, tgt_out) / (tgt_out != 0).sum()

            run = Run(model, "bf16", compiled_loss)
            started = time.perf_counter()
            for batch in padded:  # every batch shape once: the compiling is done before the timed steps
                run.step(batch, timed=False)
            warm = time.perf_counter() - started
            speed = compare([run], padded, args.steps)[0]
            compiled_rows.append((preset, speed, warm))
            print(f"{preset:5} bf16 nmt --compile {speed:7.0f} tgt tok/s ({warm:.0f} s compiling and warming)",
                  flush=True)
    lines = [
        f"Machine: {cpu_name()}, {args.threads} threads, torch {torch.__version__}. Multi30k batches of about "
        f"4k padded tokens, {args.steps} timed steps per model after 2 warm-up steps on the largest batches, the "
        "two models interleaved step by step, Adam + label-smoothed cross-entropy, nmt.training.allocator applied. "
        f"Command: `python benchmarks/train.py --steps {args.steps} --presets {args.presets}"
        f"{' --compile' if args.compile else ''}`. Target tokens/s "
        "(non-padding).",
        "",
        "| preset | precision | nmt tok/s | torch.nn.Transformer tok/s | nmt / torch |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {p} | {pr} | {a:.0f} | {b:.0f} | {a / b:.2f}x |" for p, pr, a, b in rows]
    for preset, speed, warm in compiled_rows:
        theirs = next(b for p, pr, _, b in rows if p == preset and pr == "bf16")
        lines.append(f"| {preset} | bf16, nmt `--compile` (lengths padded to 8; {warm:.0f} s of compiling first) | "
                     f"{speed:.0f} | {theirs:.0f} | {speed / theirs:.2f}x |")
    write_section("Training throughput", lines)


if __name__ == "__main__":
    main()
