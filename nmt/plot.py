"""Training curves from a run's metrics.jsonl, drawn to a PNG (matplotlib, the `plot` extra)."""

from __future__ import annotations

import json
from pathlib import Path

from nmt.errors import UsageError


def plot_run(run: str | Path, out: str | Path | None = None) -> Path:
    """Train/validation loss and validation BLEU against steps; returns the PNG's path."""
    run = Path(run)
    metrics_path = run / "metrics.jsonl"
    if not metrics_path.is_file():
        raise UsageError(f"no metrics.jsonl in {run}: is it an `nmt train --out` folder?")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("nmt plot needs matplotlib: pip install 'nmt-transformer[plot]'") from None
    records = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    train = [(r["step"], r["train_loss"]) for r in records if "train_loss" in r]
    valid = [(r["step"], r["valid_loss"], r["valid_bleu"]) for r in records if "valid_bleu" in r]
    figure, (loss_axis, bleu_axis) = plt.subplots(1, 2, figsize=(11, 4))
    if train:
        loss_axis.plot(*zip(*train, strict=True), label="train (label-smoothed)")
    if valid:
        steps, losses, bleus = zip(*valid, strict=True)
        loss_axis.plot(steps, losses, "o-", label="validation")
        bleu_axis.plot(steps, bleus, "o-", color="tab:green")
    loss_axis.set(xlabel="step", ylabel="cross-entropy", title="loss")
    loss_axis.legend()
    bleu_axis.set(xlabel="step", ylabel="BLEU", title="validation BLEU (greedy, sacreBLEU)")
    figure.suptitle(str(run))
    figure.tight_layout()
    out = Path(out) if out else run / "curves.png"
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out
