"""Training curves from runs' metrics.jsonl, drawn to a PNG (matplotlib, the `plot` extra).

    plot_runs(["runs/m30k"])                                   # loss and BLEU against steps: RUN/curves.png
    plot_runs(["runs/old", "runs/new"], "cmp.png", x="minutes")  # several runs on one picture
    plot_runs(["runs/old", "runs/a,runs/b"], x="minutes")         # b continued a (--init-from): one line
"""

from __future__ import annotations

import json
from pathlib import Path

from nmt.errors import UsageError

AXES = {"steps": ("step", "step"), "minutes": ("elapsed_s", "training minutes")}


def read_metrics(run: str | Path) -> list[dict]:
    """The records of an `nmt train --out` folder's metrics.jsonl, or of such a file named directly."""
    path = Path(run)
    path = path / "metrics.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise UsageError(f"no metrics.jsonl at {run}: is it an `nmt train --out` folder?")
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a metrics.jsonl file: {exc}") from None


def chained(phases: list[str], key: str) -> list[dict]:
    """The records of runs that continued one another (--init-from) as one run: each phase's steps or
    times counted on from where the previous phase's records end."""
    records, offset = [], 0.0
    for phase in phases:
        own = [r for r in read_metrics(phase) if key in r]
        records += [{**r, key: r[key] + offset} for r in own]
        offset += max((r[key] for r in own), default=0.0)
    return records


def plot_runs(runs: list[str | Path], out: str | Path | None = None, x: str = "steps") -> Path:
    """Train/validation loss and greedy validation BLEU of each run against steps or training minutes (the
    time a run's metrics record, resumes included); one line per run, labelled by its folder or file name.
    A run given as "A,B" is B continuing A, drawn as one line. Default output: the first run's
    folder/curves.png. Returns the PNG's path."""
    if x not in AXES:
        raise UsageError(f"--x must be {' or '.join(AXES)}, not {x!r}")
    if not runs:
        raise UsageError("give at least one run folder")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("nmt plot needs matplotlib: pip install 'nmt-transformer[plot]'") from None
    key, label = AXES[x]
    scale = 1 / 60 if x == "minutes" else 1
    figure, (loss_axis, bleu_axis) = plt.subplots(1, 2, figsize=(11, 4))
    for index, run in enumerate(runs):
        color = f"C{index}"  # one colour per run in both panels
        phases = str(run).split(",")
        records = chained(phases, key)
        name = "+".join(Path(p).name if Path(p).is_dir() else Path(p).stem for p in phases)
        prefix = f"{name}: " if len(runs) > 1 else ""
        train = [(r[key] * scale, r["train_loss"]) for r in records if "train_loss" in r]
        valid = [(r[key] * scale, r["valid_bleu"]) for r in records if "valid_bleu" in r]
        valid_loss = [(r[key] * scale, r["valid_loss"]) for r in records if "valid_loss" in r]
        if train:
            loss_axis.plot(*zip(*train, strict=True), color=color, alpha=0.5, label=f"{prefix}train (label-smoothed)")
        if valid_loss:
            loss_axis.plot(*zip(*valid_loss, strict=True), "o-", color=color, label=f"{prefix}validation")
        if valid:  # a record of BLEU alone (a run known from its model card) still draws
            bleu_axis.plot(*zip(*valid, strict=True), "o-", color=color, label=name)
    loss_axis.set(xlabel=label, ylabel="cross-entropy", title="loss")
    loss_axis.legend()
    bleu_axis.set(xlabel=label, ylabel="BLEU", title="validation BLEU (greedy, sacreBLEU)")
    if len(runs) > 1:
        bleu_axis.legend()
    figure.suptitle(", ".join(str(run) for run in runs))
    figure.tight_layout()
    first = Path(str(runs[0]).split(",")[0])
    out = Path(out) if out else (first if first.is_dir() else first.parent) / "curves.png"
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out
