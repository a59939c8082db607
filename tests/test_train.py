"""`nmt train` end to end on tiny models: learning, resume, DDP, the data paths and their errors."""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import json
import logging
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from nmt.data.corpus import load_embedded, split_by_source
from nmt.data.prepare import PrepareOptions, TokenCorpus, holds_out, keep_mask, prepare
from nmt.data.sources import DataSpec, FilterSpec, training_source
from nmt.errors import DataError, Interrupted, NmtError, UsageError
from nmt.model.checkpoint import load_checkpoint
from nmt.training.averaging import write_slim_resume_point
from nmt.training.config import TrainConfig, TrainFlags
from nmt.training.distributed import lock_run_folder
from nmt.training.flops import training_flops
from nmt.training.loop import Clock, Feed, Learner, Loop, Run
from nmt.training.plot import chained
from nmt.training.schedule import inverse_sqrt, linear_decay, linear_decay_in_time, paper_peak_lr
from nmt.training.train import Trainer

NMT = [sys.executable, "-m", "nmt_cli.main"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, tokenizer):
    """2,000 Multi30k training pairs as plain files, and the session's sentencepiece model."""
    folder = tmp_path_factory.mktemp("corpus")
    pairs = load_embedded("multi30k", "train")
    (folder / "train.en").write_text("\n".join(pairs.source[:2000]) + "\n")
    (folder / "train.fr").write_text("\n".join(pairs.target[:2000]) + "\n")
    (folder / "spm.model").write_bytes(tokenizer.model_bytes)
    return folder


def train_args(corpus, out, *extra):
    return ["train", "--src-file", str(corpus / "train.en"), "--tgt-file", str(corpus / "train.fr"),
            "--spm", str(corpus / "spm.model"), "--preset", "tiny", "--out", str(out), "--max-tokens", "800",
            "--threads", "1", "--keep-last", "2", "--quiet", *extra]


def nmt(*args, env=None):
    """`nmt ARGS`: its exit code, stdout and stderr. Run in this process, through the console script's own
    main() (torch is imported once for the whole module, not once a call); with env, in a subprocess."""
    if env is not None:
        return subprocess.run(NMT + list(args), capture_output=True, text=True, env={**os.environ, **env})
    from nmt_cli.main import main

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)  # the records configure_logging would write to stderr
    logging.getLogger("nmt").addHandler(handler)
    argv, threads, code = sys.argv, torch.get_num_threads(), 0
    sys.argv = ["nmt", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        sys.argv = argv
        logging.getLogger("nmt").removeHandler(handler)
        torch.set_num_threads(threads)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_schedule_warms_up_then_decays_as_inverse_square_root():
    assert inverse_sqrt(50, 100) == pytest.approx(0.5)
    assert inverse_sqrt(100, 100) == pytest.approx(1.0)
    assert inverse_sqrt(400, 100) == pytest.approx(0.5)


def test_linear_decay_warms_up_then_falls_to_zero_at_the_planned_end():
    assert [linear_decay(step, 10, 110) for step in (5, 10, 60, 110, 120)] == pytest.approx([0.5, 1, 0.5, 0, 0])


def test_linear_decay_reaches_zero_at_max_steps_and_a_resume_cannot_go_past_it(corpus, tmp_path):
    out = tmp_path / "run"
    args = ("--valid-every", "1000", "--log-every", "1", "--warmup", "4", "--lr", "1e-3", "--decay", "linear")
    assert nmt(*train_args(corpus, out, "--max-steps", "8", *args)).returncode == 0
    rates = [m["lr"] for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "lr" in m]
    assert rates == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 7.5e-4, 5e-4, 2.5e-4, 0], abs=1e-12)
    assert load_checkpoint(out / "last.pt").train_state["schedule"] == {
        "lr": 1e-3, "warmup": 4, "decay": "linear", "total": 8}
    past = nmt(*train_args(corpus, out, "--max-steps", "12", *args))
    assert past.returncode == 2 and "reaches zero at step 8" in past.stderr and "Traceback" not in past.stderr
    other = nmt(*train_args(corpus, out, "--max-steps", "8", "--decay", "inverse-sqrt"))
    assert other.returncode == 2 and "--decay inverse-sqrt differs" in other.stderr
    timed = nmt(*train_args(corpus, out, "--max-minutes", "5"))  # no step budget: the decay's end stands
    assert timed.returncode == 0 and load_checkpoint(out / "last.pt").train_state["progress"]["step"] == 8
    with pytest.raises(UsageError, match="--decay linear needs --max-steps, --max-epochs or --max-minutes"):
        TrainConfig(out=str(tmp_path / "none"), data="multi30k", decay="linear")


def test_linear_decay_in_time_reaches_zero_when_the_minutes_are_spent():
    assert [linear_decay_in_time(step, 10, elapsed, 100) for step, elapsed in ((5, 1), (20, 2), (40, 50), (80, 100),
                                                                                (90, 120))] \
        == pytest.approx([0.5, 0.98, 0.5, 0, 0])


def test_a_time_budget_with_linear_decay_anneals_to_zero_and_resumes_only_with_its_minutes(corpus, tmp_path):
    out = tmp_path / "run"
    args = ("--valid-every", "1000", "--log-every", "1", "--warmup", "2", "--lr", "1e-3", "--decay", "linear")
    assert nmt(*train_args(corpus, out, "--max-minutes", "0.05", *args)).returncode == 0
    rates = [m["lr"] for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "lr" in m]
    # warm-up over 2 updates, then down with the clock (on a busy machine the clock wins sooner)
    assert rates[0] <= 5e-4 * 1.01 and max(rates) in rates[:2] and rates[-1] < 2e-4
    assert all(later <= earlier for earlier, later in zip(rates[1:], rates[2:], strict=False))
    assert load_checkpoint(out / "last.pt").train_state["schedule"]["minutes"] == 0.05
    longer = nmt(*train_args(corpus, out, "--max-minutes", "0.1"))
    assert longer.returncode == 2 and "reaches zero after 0.05 minutes" in longer.stderr


def test_the_model_shape_options_replace_the_presets_dimensions(corpus, tmp_path):
    out = tmp_path / "run"
    shape = ("--encoder-layers", "3", "--decoder-layers", "1", "--d-ff", "48", "--d-model", "24", "--heads", "3")
    result = nmt(*train_args(corpus, out, "--max-steps", "2", "--valid-every", "1000", *shape))
    assert result.returncode == 0, result.stderr
    config = load_checkpoint(out / "last.pt").config
    assert (config.n_encoder_layers, config.n_decoder_layers, config.d_ff, config.d_model, config.n_heads) \
        == (3, 1, 48, 24, 3)
    other = nmt(*train_args(corpus, out, "--max-steps", "4", *shape[:2], "--decoder-layers", "2", *shape[4:]))
    assert other.returncode == 2 and "n_decoder_layers 1 -> 2" in other.stderr
    indivisible = nmt(*train_args(corpus, tmp_path / "bad", "--max-steps", "2", "--d-model", "25", "--heads", "3"))
    assert indivisible.returncode == 2 and "not divisible" in indivisible.stderr


def test_tiny_model_learns_through_the_cli_and_its_checkpoints_translate(corpus, tmp_path):
    out = tmp_path / "run"
    result = nmt(*train_args(corpus, out, "--max-steps", "60", "--valid-every", "30", "--log-every", "10",
                             "--lr", "3e-3", "--warmup", "10"))
    assert result.returncode == 0, result.stderr
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [m["train_loss"] for m in metrics if "train_loss" in m]
    assert losses[-1] < losses[0] - 1.0
    assert [m["step"] for m in metrics if "valid_bleu" in m] == [30, 60]
    assert {p.name for p in out.iterdir()} >= {"last.pt", "best.pt", "config.yaml", "metrics.jsonl",
                                               "step0000030.pt", "step0000060.pt"}
    translated = subprocess.run(NMT + ["translate", "--model", str(out / "best.pt"), "-q"],
                                input="A dog runs.\n", capture_output=True, text=True)
    assert translated.returncode == 0 and translated.stdout.count("\n") == 1
    plotted = nmt("plot", str(out))
    assert plotted.returncode == 0, plotted.stderr
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    averaged = nmt("average", str(out / "step0000030.pt"), str(out / "step0000060.pt"), "--output",
                   str(tmp_path / "avg.pt"))
    assert averaged.returncode == 0, averaged.stderr
    a, b = (load_checkpoint(out / f"step00000{n}.pt").weights for n in (30, 60))
    avg = load_checkpoint(tmp_path / "avg.pt").weights
    torch.testing.assert_close(avg["embed.weight"], (a["embed.weight"] + b["embed.weight"]) / 2)
    # by validation: the latest checkpoint alone or both, whichever scores better, and the file is that one
    chosen = nmt("average", str(out / "step0000060.pt"), str(out / "step0000030.pt"), "--valid", "multi30k:valid",
                 "--limit", "20", "--output", str(tmp_path / "chosen.pt"))
    assert chosen.returncode == 0, chosen.stderr
    bleus = [float(line.split("greedy BLEU ")[1].split()[0]) for line in chosen.stdout.splitlines()
             if line.startswith("the latest ")]
    assert len(bleus) == 2
    count = 1 if bleus[0] > bleus[1] else 2
    assert f"averaged the latest {count} of 2 checkpoints" in chosen.stdout
    expected = b["embed.weight"] if count == 1 else (a["embed.weight"] + b["embed.weight"]) / 2
    torch.testing.assert_close(load_checkpoint(tmp_path / "chosen.pt").weights["embed.weight"], expected)


def test_plot_draws_several_runs_against_minutes_and_refuses_other_axes(tmp_path):
    for name, bleu in (("old", 30.0), ("new", 35.0)):
        (tmp_path / name).mkdir()
        records = [{"step": 10, "train_loss": 5.0, "elapsed_s": 60.0},
                   {"step": 20, "valid_loss": 4.0, "valid_bleu": bleu, "elapsed_s": 120.0}]
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    result = nmt("plot", str(tmp_path / "old"), str(tmp_path / "new" / "metrics.jsonl"), "--x", "minutes",
                 "--output", str(tmp_path / "both.png"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "both.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    phases = chained([str(tmp_path / "old"), str(tmp_path / "new")], "elapsed_s")
    assert [r["elapsed_s"] for r in phases] == [60.0, 120.0, 180.0, 240.0]  # new continued old
    chain = nmt("plot", f"{tmp_path / 'old'},{tmp_path / 'new'}", "--output", str(tmp_path / "chain.png"))
    assert chain.returncode == 0 and (tmp_path / "chain.png").is_file()
    wrong = nmt("plot", str(tmp_path / "old"), "--x", "hours")
    assert wrong.returncode == 2 and wrong.stderr.strip() == "error: --x must be steps or minutes, not 'hours'"
    missing = nmt("plot", str(tmp_path / "none"))
    assert missing.returncode == 2 and "no metrics.jsonl" in missing.stderr
    bleu_only = tmp_path / "card.jsonl"  # a run known only by the BLEU its model card lists
    bleu_only.write_text(json.dumps({"step": 20, "valid_bleu": 31.0, "elapsed_s": 100.0}) + "\n")
    drawn = nmt("plot", str(bleu_only), str(tmp_path / "new"), "--output", str(tmp_path / "card.png"))
    assert drawn.returncode == 0 and (tmp_path / "card.png").is_file(), drawn.stderr


def test_resume_gives_the_same_parameters_as_a_straight_run(corpus, tmp_path):
    common = ("--max-tokens", "600", "--valid-every", "1000", "--warmup", "5")
    assert nmt(*train_args(corpus, tmp_path / "straight", "--max-steps", "20", *common)).returncode == 0
    assert nmt(*train_args(corpus, tmp_path / "split", "--max-steps", "10", *common)).returncode == 0
    resumed = nmt(*train_args(corpus, tmp_path / "split", "--max-steps", "20", *common))
    assert resumed.returncode == 0, resumed.stderr
    straight = load_checkpoint(tmp_path / "straight" / "last.pt")
    split = load_checkpoint(tmp_path / "split" / "last.pt")
    assert split.train_state["progress"]["step"] == 20
    for name, tensor in straight.weights.items():
        assert torch.equal(tensor, split.weights[name]), name


def test_ema_is_saved_in_every_checkpoint_resumed_exactly_and_averaged_on_request(corpus, tmp_path):
    common = ("--max-tokens", "600", "--warmup", "5", "--ema", "0.9")
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert nmt(*train_args(corpus, straight, "--max-steps", "12", "--valid-every", "6", *common)).returncode == 0
    assert nmt(*train_args(corpus, split, "--max-steps", "6", "--valid-every", "6", *common)).returncode == 0
    after6 = load_checkpoint(split / "last.pt")
    resumed = nmt(*train_args(corpus, split, "--max-steps", "12", "--valid-every", "6", *common))
    assert resumed.returncode == 0, resumed.stderr
    a, b = load_checkpoint(straight / "last.pt"), load_checkpoint(split / "last.pt")
    for name, tensor in a.ema.items():  # the average resumes as exactly as the weights
        assert torch.equal(tensor, b.ema[name]), name
    name = "embed.weight"
    assert not torch.equal(a.ema[name], a.weights[name])  # an average, not the weights themselves
    snapshot = load_checkpoint(sorted(straight.glob("step*.pt"))[-1])  # step 12's, for nmt average
    assert torch.equal(snapshot.ema[name], a.ema[name]) and torch.equal(snapshot.weights[name], a.weights[name])
    assert after6.ema[name].dtype == torch.float32 and a.ema[name].dtype == torch.float32
    metrics = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "valid_loss_weights" in m] == [6, 12]  # the weights' loss beside it
    slim = write_slim_resume_point(straight / "last.pt", tmp_path / "slim.pt")
    assert slim.ema is None  # kept small: a resume from it starts the average afresh
    averaged = tmp_path / "ema.pt"
    result = nmt("average", "--ema", str(straight / "last.pt"), "--output", str(averaged))
    assert result.returncode == 0, result.stderr
    assert torch.equal(load_checkpoint(averaged).weights[name], a.ema[name])
    plain = tmp_path / "plain"
    assert nmt(*train_args(corpus, plain, "--max-steps", "2", "--valid-every", "1000")).returncode == 0
    refused = nmt("average", "--ema", str(plain / "last.pt"), "--output", str(tmp_path / "no.pt"))
    assert refused.returncode == 2 and "trained without --ema" in refused.stderr


def test_the_moving_average_moves_by_its_decay_towards_the_weights():
    from nmt.model.config import ModelConfig
    from nmt.model.transformer import Transformer
    from nmt.training.loop import MovingAverage

    model = Transformer(ModelConfig.preset("tiny", vocab_size=50))
    average = MovingAverage(model, 0.5)
    before = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    taken, skipped = torch.tensor(False), torch.tensor(True)
    average.update(100, taken)  # min(0.5, 101 / 110) = 0.5: halfway
    for old, new in zip(before, average.model.parameters(), strict=True):
        torch.testing.assert_close(new, old + 0.5)
    average.update(0, skipped)  # an update skipped (on the device): the average stays
    for old, new in zip(before, average.model.parameters(), strict=True):
        torch.testing.assert_close(new, old + 0.5)
    average.update(0, taken)  # update 0: d = min(0.5, 1 / 10): nearly the weights
    for old, new in zip(before, average.model.parameters(), strict=True):
        torch.testing.assert_close(new, old + 0.5 + 0.9 * 0.5)


@pytest.mark.slow  # 230 updates
def test_a_slim_resume_point_resumes_the_run_where_it_stood_with_a_short_rewarm(corpus, tmp_path):
    common = ("--max-tokens", "600", "--valid-every", "1000", "--log-every", "1", "--warmup", "2", "--lr", "1e-3")
    first = tmp_path / "first"
    assert nmt(*train_args(corpus, first, *common, "--max-steps", "10")).returncode == 0
    slim = write_slim_resume_point(first / "last.pt", tmp_path / "slim.pt")
    assert "optimizer" not in slim.train_state and slim.weights["embed.weight"].dtype == torch.float16
    full = load_checkpoint(first / "last.pt")
    moments = sum(t.numel() * t.element_size() for state in full.train_state["optimizer"]["state"].values()
                  for t in state.values() if t.dim())
    weights = sum(t.numel() * t.element_size() for t in full.weights.values())
    assert sum(t.numel() * t.element_size() for t in slim.weights.values()) * 6 == weights + moments
    moved = tmp_path / "moved"  # another machine: the run folder is gone, the slim point came along
    moved.mkdir()
    shutil.copy(tmp_path / "slim.pt", moved / "last.pt")
    args = train_args(corpus, moved, *common, "--max-steps", "230")
    args.remove("--quiet")
    resumed = nmt(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert "no optimizer moments" in resumed.stderr
    state = load_checkpoint(moved / "last.pt").train_state
    assert state["progress"]["step"] == 230 and state["schedule"]["rewarm_from"] == 10
    rates = [m["lr"] for m in map(json.loads, (moved / "metrics.jsonl").read_text().splitlines()) if "lr" in m]
    planned = [inverse_sqrt(step, 2) * 1e-3 for step in range(11, 231)]
    assert len(rates) == len(planned) and rates[0] < planned[0] / 50  # the ramp starts low...
    assert rates[99] == pytest.approx(planned[99] / 2, rel=0.02)  # ...is halfway after 100 updates...
    assert rates[201:] == pytest.approx(planned[201:])  # ...and then back on the run's own line
    weights_only = tmp_path / "weights.pt"
    assert nmt("average", str(first / "last.pt"), "--output", str(weights_only)).returncode == 0
    with pytest.raises(UsageError, match="holds no training state"):
        write_slim_resume_point(weights_only, tmp_path / "again.pt")
    (tmp_path / "weights").mkdir()
    shutil.copy(weights_only, tmp_path / "weights" / "last.pt")
    refused = nmt(*train_args(corpus, tmp_path / "weights", *common, "--max-steps", "20"))
    assert refused.returncode == 2 and "has no training state to resume from" in refused.stderr


def test_resume_keeps_the_stored_schedule_and_refuses_another_model_or_schedule(corpus, tmp_path):
    out = tmp_path / "run"
    assert nmt(*train_args(corpus, out, "--max-steps", "20", "--valid-every", "1000")).returncode == 0
    schedule = load_checkpoint(out / "last.pt").train_state["schedule"]
    assert schedule == {"lr": pytest.approx(paper_peak_lr(32, 2)), "warmup": 2,  # tiny: d_model 32; 20 // 10
                        "decay": "inverse-sqrt"}
    longer = nmt(*train_args(corpus, out, "--max-steps", "22", "--valid-every", "1000"))  # a larger budget
    assert longer.returncode == 0 and load_checkpoint(out / "last.pt").train_state["schedule"] == schedule
    other_lr = nmt(*train_args(corpus, out, "--max-steps", "23", "--lr", "5e-4"))
    assert other_lr.returncode == 2 and "--reset-schedule" in other_lr.stderr and "Traceback" not in other_lr.stderr
    reset = nmt(*train_args(corpus, out, "--max-steps", "23", "--lr", "5e-4", "--reset-schedule"))
    assert reset.returncode == 0 and load_checkpoint(out / "last.pt").train_state["schedule"]["lr"] == 5e-4
    other_model = nmt(*train_args(corpus, out, "--max-steps", "24", "--preset", "small"))
    assert other_model.returncode == 2 and "holds another model (d_model 32 -> 256" in other_model.stderr
    args = train_args(corpus, out, "--max-steps", "24", "--max-tokens", "700")
    args.remove("--quiet")
    changed = nmt(*args)
    assert changed.returncode == 0 and "changed options" in changed.stderr and "max_tokens" in changed.stderr


def test_a_resumed_run_keeps_its_own_sentencepiece_model(corpus, tmp_path):
    out, cache = tmp_path / "run", tmp_path / "cache"
    data = ["train", "--src-file", str(corpus / "train.en"), "--tgt-file", str(corpus / "train.fr"), "--preset",
            "tiny", "--out", str(out), "--vocab-size", "400", "--cache-dir", str(cache), "--threads", "1", "-q"]
    assert nmt(*data, "--max-steps", "1").returncode == 0
    trained_with = load_checkpoint(out / "last.pt").spm_model
    resumed = nmt(*data, "--max-steps", "2", "--spm-sample", "1000")  # another sample would train another model
    assert resumed.returncode == 0, resumed.stderr
    assert load_checkpoint(out / "last.pt").spm_model == trained_with


@pytest.mark.parametrize("option, value", [("--valid-every", "0"), ("--update-freq", "0"), ("--save-every", "0"),
                                           ("--lr", "0"), ("--warmup", "-1")])
def test_out_of_range_options_are_one_line(corpus, tmp_path, option, value):
    result = nmt(*train_args(corpus, tmp_path / "run", "--max-steps", "1", option, value))
    assert result.returncode == 2 and result.stderr.startswith(f"error: {option} must be") and \
        result.stderr.count("\n") == 1


def test_yaml_numbers_without_a_dot_are_numbers(corpus, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("lr: 3e-3\n")
    out = tmp_path / "run"
    result = nmt(*train_args(corpus, out, "--config", str(config), "--max-steps", "2", "--valid-every", "1000"))
    assert result.returncode == 0, result.stderr
    assert load_checkpoint(out / "last.pt").train_state["schedule"]["lr"] == 3e-3


def test_save_every_writes_last_between_validations(corpus, tmp_path, monkeypatch):
    saved_at = []
    save_last = Loop.save_last
    monkeypatch.setattr(Loop, "save_last", lambda loop: (saved_at.append(loop.state["step"]), save_last(loop)))
    config = TrainConfig(out=str(tmp_path / "run"), src_file=str(corpus / "train.en"),
                         tgt_file=str(corpus / "train.fr"), spm=str(corpus / "spm.model"), preset="tiny", max_steps=5,
                         max_tokens=800, save_every=2, valid_every=1000, keep_last=0, threads=1)
    Trainer(config).run()
    assert saved_at == [2, 4, 5]  # every 2 steps, then with the validation that ends the run


def interrupt_during_update(monkeypatch, step: int, times: int = 1) -> None:
    """Ctrl-C (`times` of it) in the middle of update `step`: after its forward pass drew its dropout masks,
    before the optimizer moved."""
    loss = Loop.loss

    def loss_then_signal(loop, batch):
        result = loss(loop, batch)
        if loop.state["step"] == step - 1:
            for _ in range(times):
                os.kill(os.getpid(), signal.SIGINT)
        return result

    monkeypatch.setattr(Loop, "loss", loss_then_signal)


def test_ctrl_c_stops_at_a_step_boundary_and_the_resume_is_exact(corpus, tmp_path, monkeypatch):
    before = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN under a shell's background job
    def config(out: str) -> TrainConfig:
        return TrainConfig(out=str(tmp_path / out), src_file=str(corpus / "train.en"),
                           tgt_file=str(corpus / "train.fr"), spm=str(corpus / "spm.model"), preset="tiny", max_steps=8,
                           max_tokens=600, warmup=3, valid_every=1000, keep_last=0, threads=1)

    Trainer(config("straight")).run()
    with monkeypatch.context() as patch:
        interrupt_during_update(patch, step=4)
        with pytest.raises(Interrupted, match=r"^interrupted by Ctrl-C at step 4: saved .*last.pt there") as stopped:
            Trainer(config("split")).run()
    assert stopped.value.exit_code == 130
    assert load_checkpoint(tmp_path / "split" / "last.pt").train_state["progress"]["step"] == 4
    Trainer(config("split")).run()
    straight, split = (load_checkpoint(tmp_path / run / "last.pt") for run in ("straight", "split"))
    assert split.train_state["progress"]["step"] == 8
    for name, tensor in straight.weights.items():
        assert torch.equal(tensor, split.weights[name]), name
    assert signal.getsignal(signal.SIGINT) is before  # the handlers are put back


def test_a_second_ctrl_c_stops_at_once_without_saving(corpus, tmp_path, monkeypatch):
    interrupt_during_update(monkeypatch, step=2, times=2)
    config = TrainConfig(out=str(tmp_path / "run"), src_file=str(corpus / "train.en"),
                         tgt_file=str(corpus / "train.fr"), spm=str(corpus / "spm.model"), preset="tiny", max_steps=8,
                         max_tokens=600, valid_every=1000, keep_last=0, threads=1)
    with pytest.raises(Interrupted, match="again: stopped at once"):
        Trainer(config).run()
    assert not (tmp_path / "run" / "last.pt").exists()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_ranks(corpus, folder: Path, *extra: str) -> subprocess.CompletedProcess:
    """tests/ddp_worker.py on two gloo ranks under torchrun, training into `folder`."""
    folder.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
         str(Path(__file__).parent / "ddp_worker.py"), str(folder), str(corpus / "train.en"), str(corpus / "train.fr"),
         str(corpus / "spm.model"), *extra],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


@pytest.mark.slow
def test_ddp_with_gloo_keeps_ranks_identical_and_writes_one_checkpoint(corpus, tmp_path):
    """Also checks that every collective gets tensors on the training device (tests/ddp_worker.py). Ranks
    leave the process group before they exit: one that exits with it alive can die of SIGABRT when gloo's
    worker threads free tensors during the interpreter's finalization (pytorch/pytorch#179291), as a rank of
    this test did once (2026-11-26), which the test then retried; no more."""
    result = run_ranks(corpus, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    rank0 = torch.load(tmp_path / "rank0.weights", weights_only=True)
    rank1 = torch.load(tmp_path / "rank1.weights", weights_only=True)
    assert all(torch.equal(rank0[name], rank1[name]) for name in rank0)
    assert load_checkpoint(tmp_path / "last.pt").train_state["progress"]["step"] == 4
    assert not list(tmp_path.glob(".*tmp*"))
    for rank in (0, 1):
        record = json.loads((tmp_path / f"rank{rank}.collectives").read_text())
        assert "all_reduce" in record["collectives"]
        # one all-reduce an update (loss, finiteness and stop votes together) and one in the first check of
        # whether to stop; no read of a value in an update, Adam's step included (issue 81: fused Adam skips on
        # the device, the update's values are read while the next one runs), one in that first check
        assert record["in updates"] == {"calls": 4, "collectives": 5, "host_reads": 1}


def test_ranks_that_do_not_share_the_run_folder_all_refuse_before_training(corpus, tmp_path):
    """As two machines each given --out on a disk of their own: the second would resume from nothing (or
    from another run) while the first resumed; every rank stops with one line instead."""
    result = run_ranks(corpus, tmp_path / "run", "--node-local-out", "yes")
    assert result.returncode != 0
    for rank in (0, 1):
        assert f"rank {rank}: 1 of 2 ranks do not see the run folder" in result.stderr
    assert "nmt/training/" not in result.stderr  # no traceback through nmt (torchrun prints its own)
    assert not (tmp_path / "run" / "last.pt").exists() and not (tmp_path / "run-rank1").exists()


@pytest.mark.slow
def test_ranks_that_read_another_tokenizer_and_corpus_all_refuse_before_training(corpus, tmp_path):
    from nmt.text.tokenizer import train_tokenizer

    pairs = load_embedded("multi30k", "train")
    other = tmp_path / "other.model"
    other.write_bytes(train_tokenizer(pairs.source[:3000] + pairs.target[:3000], 600).model_bytes)
    result = run_ranks(corpus, tmp_path / "run", "--other-spm-on-rank1", str(other))
    assert result.returncode != 0
    for rank in (0, 1):
        assert (f"rank {rank}: ranks 1 read another prepared corpus and sentencepiece model than rank 0"
                in result.stderr), result.stderr[-2000:]
    assert not (tmp_path / "run" / "last.pt").exists()


@pytest.mark.slow
def test_an_epoch_of_fewer_batches_than_ranks_is_refused_instead_of_spinning(corpus, tmp_path):
    result = run_ranks(corpus, tmp_path / "run", "--max-tokens", "200000")  # 2,000 pairs: one batch
    assert result.returncode != 0
    assert "rank 0: the corpus makes 1 batches of --max-tokens 200000, fewer than the 2 ranks" in result.stderr


def test_local_data_in_every_form_a_user_has(corpus, tmp_path):
    """A save_to_disk folder, a hub download's folder of split parquet files (with or without its README,
    under its config's subfolder), a parquet glob, a jsonl file and plain text pairs all prepare the same
    pairs; a source without validation pairs has some held out."""
    datasets = pytest.importorskip("datasets")
    pairs = load_embedded("multi30k", "valid")
    rows = [{"translation": {"en": s, "fr": t}} for s, t in zip(pairs.source[:400], pairs.target[:400], strict=True)]
    train, validation = datasets.Dataset.from_list(rows[:300]), datasets.Dataset.from_list(rows[300:])
    saved = tmp_path / "saved"
    datasets.DatasetDict({"train": train, "validation": validation}).save_to_disk(str(saved))
    download = tmp_path / "wmt14"  # as `hf download wmt/wmt14 --repo-type dataset` leaves it
    (download / "fr-en").mkdir(parents=True)
    train.select(range(150)).to_parquet(str(download / "fr-en" / "train-00000-of-00002.parquet"))
    train.select(range(150, 300)).to_parquet(str(download / "fr-en" / "train-00001-of-00002.parquet"))
    validation.to_parquet(str(download / "fr-en" / "validation-00000-of-00001.parquet"))
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows[:300]) + "\n")
    spm_model = (corpus / "spm.model").read_bytes()
    prepared = {}
    for name, spec in {
        "save_to_disk": DataSpec(hf_dataset=str(saved)),
        "download": DataSpec(hf_dataset=str(download), hf_config="fr-en"),
        "download, no config": DataSpec(hf_dataset=str(download / "fr-en")),
        "parquet glob": DataSpec(hf_dataset=str(download / "fr-en" / "train-*.parquet")),
        "jsonl, streamed": DataSpec(hf_dataset=str(jsonl), streaming=True),
        "text files": DataSpec(src_file=str(corpus / "train.en"), tgt_file=str(corpus / "train.fr")),
    }.items():
        prepared[name] = prepare(training_source(spec), PrepareOptions(spm_model=spm_model, workers=1))
    for name in ("save_to_disk", "download", "download, no config"):
        assert TokenCorpus(prepared[name].folder).meta["pairs"] == 300 and len(prepared[name].valid) == 100
    for name in ("parquet glob", "jsonl, streamed"):  # no validation split: a tenth held out by English side
        valid = prepared[name].valid
        assert set(valid.source) == {source for source in pairs.source[:300] if holds_out(source, 0.1)}
        assert 0 < len(valid) < 60 and TokenCorpus(prepared[name].folder).meta["pairs"] == 300 - len(valid)
    assert len(prepared["text files"].valid) > 0
    missing = nmt("prepare", "--hf-dataset", str(tmp_path / "none" / "here"))
    assert missing.returncode == 2 and missing.stderr.strip() == f"error: no such file or folder: {tmp_path}/none/here"
    empty_folder = tmp_path / "empty"
    empty_folder.mkdir()
    nothing = nmt("prepare", "--hf-dataset", str(empty_folder))
    assert nothing.returncode == 2 and "holds no train-*.parquet" in nothing.stderr


def test_embedded_corpora_and_files_mix_with_the_embedded_validation_pairs(corpus, tmp_path):
    (tmp_path / "a.en").write_text("A synthetic pair.\nAnother one.\n")
    (tmp_path / "a.fr").write_text("Une paire synthétique.\nUne autre.\n")
    both = DataSpec(names=("multi30k",), src_file=str(tmp_path / "a.en"), tgt_file=str(tmp_path / "a.fr"))
    source, alone = training_source(both), training_source(DataSpec(names=("multi30k",)))
    chunks, embedded = list(source.chunks(10_000)), list(alone.chunks(10_000))
    assert [s for c in chunks for s in c.source] == [s for c in embedded for s in c.source] + [
        "A synthetic pair.", "Another one."]
    assert source.valid.source == alone.valid.source and source.identity != alone.identity
    with pytest.raises(DataError, match="give one training source"):
        training_source(DataSpec(names=("multi30k",), hf_dataset=str(tmp_path)))


@pytest.mark.parametrize("damage, reason", [("cut", "the compressed file is cut short"),
                                           ("flipped", "the compressed file is damaged")])
def test_a_damaged_gzip_corpus_is_one_clear_line_naming_it(tmp_path, damage, reason):
    data = bytearray(gzip.compress(b"A dog runs on the grass.\n" * 400))
    if damage == "cut":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    (tmp_path / "a.en.gz").write_bytes(bytes(data))
    (tmp_path / "a.fr.gz").write_bytes(gzip.compress(b"Un chien court sur l'herbe.\n" * 400))
    (tmp_path / "v.txt").write_text("A dog.\n")
    for files in (("--src-file", "a.en.gz", "--tgt-file", "a.fr.gz", "--valid-src", "v.txt", "--valid-tgt", "v.txt"),
                  ("--data", "multi30k", "--valid-src", "a.en.gz", "--valid-tgt", "a.fr.gz")):
        args = [str(tmp_path / arg) if arg.endswith((".gz", ".txt")) else arg for arg in files]
        result = nmt("prepare", *args, env={"NMT_CACHE_DIR": str(tmp_path / "cache")})
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.strip().startswith(f"error: cannot read {tmp_path / 'a.en.gz'}: {reason}")


def test_offline_hub_dataset_is_one_clear_line(tmp_path):
    result = nmt("train", "--hf-dataset", "wmt/wmt14", "--hf-config", "fr-en", "--out", str(tmp_path / "x"),
                 "--max-steps", "1", env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert result.returncode == 2
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "local files" in error[0]
    assert "Traceback" not in result.stderr


def test_filtering_counts_each_rule():
    source = np.array([2, 0, 30, 2, 40])
    target = np.array([3, 1, 3, 20, 40])
    kept, counts = keep_mask(source, target, FilterSpec(max_tokens=35, max_ratio=2.0))
    assert counts == {"empty": 1, "too long": 1, "length ratio": 2}
    assert kept.tolist() == [True, False, False, False, False]


def test_nothing_left_after_filtering_is_a_data_error_naming_what_was_removed(corpus, tmp_path):
    (tmp_path / "a.en").write_text("\n" + "word " * 300 + "\n")
    (tmp_path / "a.fr").write_text("mot\n" + "mot " * 300 + "\n")
    spec = DataSpec(src_file=str(tmp_path / "a.en"), tgt_file=str(tmp_path / "a.fr"),
                    valid_src=str(corpus / "train.en"), valid_tgt=str(corpus / "train.fr"))
    options = PrepareOptions(spm_model=(corpus / "spm.model").read_bytes(), workers=1)
    removed = r"\(removed: 1 empty, 1 too long\)$"
    with pytest.raises(DataError, match=r"^no training pairs are left after filtering " + removed):
        prepare(training_source(spec), options)


@pytest.mark.parametrize("text, error", [("", "the training corpus has no sentence pairs"),
                                         ("\n\n", "cannot train the sentencepiece model: no text to train on")])
def test_training_on_empty_or_blank_files_is_one_clear_line(tmp_path, text, error):
    (tmp_path / "a.en").write_text(text)
    (tmp_path / "a.fr").write_text(text)
    result = nmt("train", "--src-file", str(tmp_path / "a.en"), "--tgt-file", str(tmp_path / "a.fr"),
                 "--valid-src", str(tmp_path / "a.en"), "--valid-tgt", str(tmp_path / "a.fr"), "--preset", "tiny",
                 "--out", str(tmp_path / "run"), "--max-steps", "1")
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and errors == [f"error: {error}"] and "Traceback" not in result.stderr


def test_a_copied_corpus_keeps_its_identity_and_an_edited_one_does_not(tmp_path):
    # Shared data is copied afresh for each session (new modification times): the cache must still match.
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    for folder in (first, second):
        (folder / "a.en").write_text("A pair.\n")
        (folder / "a.fr").write_text("Une paire.\n")
    os.utime(second / "a.en", (1, 1))

    def identity(folder):
        return training_source(DataSpec(src_file=str(folder / "a.en"), tgt_file=str(folder / "a.fr"))).identity

    assert identity(first) == identity(second)
    (second / "a.fr").write_text("Une autre.\n")
    assert identity(first) != identity(second)


def test_validation_split_never_shares_a_source_sentence():
    from nmt.data.corpus import ParallelText

    pairs = ParallelText([f"s{i % 50}" for i in range(200)], [f"t{i}" for i in range(200)])
    train, valid = split_by_source(pairs, 20, seed=3)
    assert len(train) + len(valid) == 200 and len(valid) >= 20
    assert not set(train.source) & set(valid.source)


def test_kill_minus_nine_leaves_a_loadable_last_checkpoint_and_resume_finishes(corpus, tmp_path):
    out = tmp_path / "run"
    process = subprocess.Popen(NMT + train_args(corpus, out, "--max-steps", "400", "--valid-every", "5"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (out / "step0000010.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    process.send_signal(signal.SIGKILL)
    process.wait()
    step = load_checkpoint(out / "last.pt").train_state["progress"]["step"]
    assert step >= 10
    resumed = nmt(*train_args(corpus, out, "--max-steps", str(step + 5), "--valid-every", "1000"))
    assert resumed.returncode == 0, resumed.stderr
    assert load_checkpoint(out / "last.pt").train_state["progress"]["step"] == step + 5


def test_a_second_run_on_the_same_folder_is_refused_and_stale_temporary_files_go(corpus, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    stale = out / ".last.pt.tmp12345"  # as a save killed half-way leaves it
    stale.write_bytes(b"half a checkpoint")
    held = lock_run_folder(out)
    assert not stale.exists()
    try:
        second = nmt(*train_args(corpus, out, "--max-steps", "1"))
        assert second.returncode == 2
        assert second.stderr == f"error: another nmt train is using {out}: wait for it to end, or train into " \
            "another --out\n"
    finally:
        held.close()
    assert nmt(*train_args(corpus, out, "--max-steps", "1")).returncode == 0  # free again


def test_held_out_dev_splits_are_disjoint_from_training():
    train, dev = load_embedded("tatoeba", "train"), load_embedded("tatoeba", "dev")
    assert len(dev) == 1000
    assert not set(train.source) & set(dev.source)
    assert len(load_embedded("news-commentary", "dev_newsdiscuss")) == 1500
    ui_train, ui_dev = load_embedded("software-ui", "train"), load_embedded("software-ui", "dev")
    assert len(ui_dev) == 1000 and len(ui_train) + len(ui_dev) == 78_989
    assert not set(ui_train.source) & set(ui_dev.source)
    news = {split: load_embedded("news", split) for split in ("train", "dev", "test")}
    assert [len(pairs) for pairs in news.values()] == [10_570, 3_003, 3_000]  # newstest2012 dev, 2013 test
    assert not set(news["train"].source) & (set(news["dev"].source) | set(news["test"].source))


def test_yaml_config_with_flag_overrides_and_fine_tuning_from_a_checkpoint(corpus, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"src-file: {corpus / 'train.en'}\ntgt_file: {corpus / 'train.fr'}\nspm: {corpus / 'spm.model'}\n"
                      "preset: tiny\nmax_steps: 50\nmax_tokens: 600\nvalid_every: 1000\nthreads: 1\nlr: 0.002\n")
    out = tmp_path / "base"
    result = nmt("train", "--config", str(config), "--out", str(out), "--max-steps", "4", "-q")
    assert result.returncode == 0, result.stderr
    resolved = load_checkpoint(out / "last.pt").training["config"]
    assert resolved["max_steps"] == 4 and resolved["lr"] == 0.002 and resolved["preset"] == "tiny"
    assert "max_steps: 4" in (out / "config.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text("no_such_option: 1\n")
    assert nmt("train", "--config", str(bad), "--out", str(tmp_path / "x"), "--max-steps", "1").returncode == 2

    tuned = tmp_path / "tuned"
    result = nmt("train", "--config", str(config), "--out", str(tuned), "--max-steps", "1", "--lr", "1e-9",
                 "--init-from", str(out / "last.pt"), "-q")
    assert result.returncode == 0, result.stderr
    start, after = load_checkpoint(out / "last.pt"), load_checkpoint(tuned / "last.pt")
    assert after.train_state["progress"]["step"] == 1  # a fresh schedule, not the base run's step 4
    # one update at a tiny learning rate: the weights are the base model's, not a new initialization
    torch.testing.assert_close(after.weights["embed.weight"], start.weights["embed.weight"], atol=1e-6, rtol=0)


def test_auto_training_precision_is_bf16_only_where_the_cpu_computes_in_it(monkeypatch):
    import nmt.training.distributed
    from nmt.model.machine import Machine
    from nmt.training.distributed import training_precision

    def kind(*flags: str) -> Machine:
        return Machine(flags=frozenset(flags), onednn_bf16=False, int_mm=True)

    cpu = torch.device("cpu")
    monkeypatch.setattr(nmt.training.distributed, "machine", lambda: kind("avx512f", "avx512_bf16"))  # AMD Zen 4
    assert training_precision("auto", cpu) == "bf16"
    monkeypatch.setattr(nmt.training.distributed, "machine", lambda: kind("avx512f", "avx512_vnni"))  # no bf16 Xeon
    assert training_precision("auto", cpu) == "fp32"
    assert training_precision("bf16", cpu) == "bf16"


def test_an_update_with_a_loss_or_gradients_not_finite_is_skipped_and_counted_and_many_in_a_row_stop(
        corpus, tmp_path, monkeypatch):
    loss = Loop.loss
    poisoned = {"batches": set(), "gradients": set()}

    def loss_of(loop, batch):
        value, tokens = loss(loop, batch)
        if loop.state["batch_in_epoch"] in poisoned["batches"]:
            value = value * float("nan")
        if loop.state["batch_in_epoch"] in poisoned["gradients"]:  # a finite loss, gradients that overflowed
            value.register_hook(lambda gradient: gradient * float("inf"))
        return value, tokens

    monkeypatch.setattr(Loop, "loss", loss_of)

    def config(out: str, steps: int) -> TrainConfig:
        return TrainConfig(out=str(tmp_path / out), src_file=str(corpus / "train.en"),
                           tgt_file=str(corpus / "train.fr"), spm=str(corpus / "spm.model"), preset="tiny",
                           max_steps=steps, max_tokens=600, warmup=3, valid_every=1000, keep_last=0, threads=1,
                           log_every=1)

    poisoned["batches"], poisoned["gradients"] = {2}, {4}
    Trainer(config("once", 6)).run()
    last = load_checkpoint(tmp_path / "once" / "last.pt")
    state = last.train_state
    # 6 updates, 2 of them skipped on the device (fused Adam's found_inf): its moments moved 4 times
    assert state["progress"]["step"] == 6 and state["progress"]["batch_in_epoch"] == 6
    assert state["progress"]["skipped"] == 2
    assert state["scheduler"]["last_epoch"] == 6  # the rate moves with every update: knowing of a skip takes a wait
    assert all(int(moments["step"]) == 4 for moments in state["optimizer"]["state"].values())
    assert all(torch.isfinite(weight).all() for weight in last.weights.values())
    metrics = [json.loads(line) for line in (tmp_path / "once" / "metrics.jsonl").read_text().splitlines()]
    assert all(math.isfinite(m["train_loss"]) for m in metrics if "train_loss" in m)
    assert [m.get("skipped_updates", 0) for m in metrics if "train_loss" in m][-1] == 2
    norms = {m["step"]: m["grad_norm"] for m in metrics if "train_loss" in m}  # before clipping, of updates taken
    assert sorted(norms) == [1, 2, 4, 6] and all(math.isfinite(norm) and norm > 0 for norm in norms.values())
    poisoned["batches"], poisoned["gradients"] = set(range(200)), set()
    with pytest.raises(NmtError, match="50 updates in a row were skipped"):
        Trainer(config("always", 60)).run()


@pytest.mark.slow
def test_a_prepared_folder_trains_offline_with_its_own_validation_pairs(corpus, tmp_path):
    """`nmt prepare` prints a folder that is a whole training input: `nmt train --prepared` reads no corpus and
    no hub (HF_HUB_OFFLINE), and validates on the pairs the dataset's validation split gave."""
    datasets = pytest.importorskip("datasets")
    pairs = load_embedded("multi30k", "valid")
    rows = [{"translation": {"en": s, "fr": t}} for s, t in zip(pairs.source[:400], pairs.target[:400], strict=True)]
    download = tmp_path / "download"
    download.mkdir()
    datasets.Dataset.from_list(rows[:300]).to_parquet(str(download / "train-00000-of-00001.parquet"))
    datasets.Dataset.from_list(rows[300:]).to_parquet(str(download / "validation-00000-of-00001.parquet"))
    env = {"NMT_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    made = nmt("prepare", "--hf-dataset", str(download), "--streaming", "--spm", str(corpus / "spm.model"), env=env)
    assert made.returncode == 0, made.stderr
    folder = made.stdout.strip().splitlines()[-1]
    assert (Path(folder) / "valid.en").read_text().splitlines() == pairs.source[300:400]
    shutil.rmtree(download)  # the corpus is gone: the folder alone trains
    args = ["train", "--prepared", folder, "--preset", "tiny", "--max-steps", "3", "--max-tokens", "600",
            "--threads", "1", "--valid-every", "1000", "--keep-last", "0", "--quiet"]
    trained = nmt(*args, "--out", str(tmp_path / "run"), env=env)
    assert trained.returncode == 0, trained.stderr
    checkpoint = load_checkpoint(tmp_path / "run" / "last.pt")
    assert checkpoint.spm_model == (corpus / "spm.model").read_bytes()
    assert checkpoint.training["config"]["prepared"] == folder
    config = tmp_path / "wmt.yaml"  # the config that made it names a hub dataset: the folder replaces it
    config.write_text("hf_dataset: wmt/wmt14\nhf_config: fr-en\nstreaming: true\npreset: tiny\n")
    configured = nmt(*args, "--config", str(config), "--out", str(tmp_path / "configured"), env=env)
    assert configured.returncode == 0, configured.stderr
    mixed = nmt(*args, "--data", "multi30k", "--out", str(tmp_path / "mixed"), env=env)
    assert mixed.returncode == 2 and "--prepared is a whole training input" in mixed.stderr
    not_prepared = nmt(*args[:1], "--prepared", str(tmp_path), *args[3:], "--out", str(tmp_path / "x"), env=env)
    assert not_prepared.returncode == 2 and "is not a folder that `nmt prepare` made" in not_prepared.stderr


def test_prepare_and_train_with_the_same_data_options_share_one_cache(corpus, tmp_path):
    """Each command's defaults for the options it does not get are TrainConfig's: the cache `nmt prepare` makes
    is the one `nmt train` opens, with nothing tokenized again."""
    data = ("--src-file", str(corpus / "train.en"), "--tgt-file", str(corpus / "train.fr"), "--spm",
            str(corpus / "spm.model"))
    env = {"NMT_CACHE_DIR": str(tmp_path / "cache")}
    made = nmt("prepare", *data, env=env)
    assert made.returncode == 0, made.stderr
    folder = made.stdout.strip().splitlines()[-1]
    trained = nmt("train", *data, "--preset", "tiny", "--max-steps", "1", "--max-tokens", "600", "--threads", "1",
                  "--valid-every", "1000", "--out", str(tmp_path / "run"), env=env)
    assert trained.returncode == 0, trained.stderr
    assert f"prepared corpus {folder}:" in trained.stderr and "tokenized" not in trained.stderr
    assert [path.name for path in (tmp_path / "cache").iterdir()] == [Path(folder).name]


def test_tokens_per_update_sets_the_accumulation_from_the_number_of_ranks():
    from nmt.training.config import batches_per_update

    config = TrainConfig(out="x", data="multi30k", max_steps=1, max_tokens=4096, tokens_per_update=32768)
    assert [batches_per_update(config, world) for world in (1, 2, 8, 6)] == [8, 4, 1, 1]  # 6: 24,576, -25%
    assert batches_per_update(TrainConfig(out="x", data="multi30k", max_steps=1), 8) == 1
    # 2 nodes x 8 GPUs at 4,096 take twice the 32,768 asked: refused, naming the --max-tokens that fits
    with pytest.raises(UsageError, match="take 65,536 padded tokens an update at the least.*--max-tokens 2048"):
        batches_per_update(config, 16)
    with pytest.raises(UsageError, match="--max-tokens 2730"):  # 6 ranks: 24,576 for 16,384, 50% more
        batches_per_update(dataclasses.replace(config, tokens_per_update=16384), 6)
    with pytest.raises(UsageError, match="not both"):
        TrainConfig(out="x", data="multi30k", max_steps=1, update_freq=2, tokens_per_update=8192)


@pytest.mark.slow
def test_a_resume_on_another_number_of_ranks_takes_the_same_batches_an_update_or_says_how(corpus, tmp_path):
    """Two gloo ranks train 4 updates of one batch each; one process resumes them with --update-freq 2 (the
    same 2 batches an update, from the same place in the epoch), and refuses --update-freq 1 (another
    recipe) with the option that would keep it."""
    result = run_ranks(corpus, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    progress = load_checkpoint(tmp_path / "last.pt").train_state["progress"]
    assert (progress["world_size"], progress["update_freq"], progress["batch_in_epoch"]) == (2, 1, 4)
    args = ["train", "--src-file", str(corpus / "train.en"), "--tgt-file", str(corpus / "train.fr"), "--spm",
            str(corpus / "spm.model"), "--preset", "tiny", "--out", str(tmp_path), "--max-tokens", "500",
            "--threads", "1", "--valid-every", "1000", "--keep-last", "0", "--quiet", "--max-steps", "6"]
    other = nmt(*args)
    assert other.returncode == 2
    assert "trained with 2 batches an update (2 ranks x --update-freq 1)" in other.stderr
    assert "resume with --update-freq 2" in other.stderr
    same = nmt(*args, "--update-freq", "2")
    assert same.returncode == 0, same.stderr
    progress = load_checkpoint(tmp_path / "last.pt").train_state["progress"]
    assert (progress["step"], progress["batch_in_epoch"], progress["world_size"], progress["update_freq"]) \
        == (6, 6, 1, 2)


def launch_nodes(out: Path, caches: tuple[Path, Path], temporaries: tuple[Path, Path], steps: int,
                 *extra: str) -> list[subprocess.Popen]:
    """`nmt train` as a user launches it on two machines of one GPU-less rank each: two torchrun agents,
    --nnodes 2 and --node_rank 0 and 1, meeting at 127.0.0.1; one shared --out, each node its own cache
    and temporary folder (a machine's own disk)."""
    port = free_port()
    nodes = []
    for node in (0, 1):
        if not caches[node].is_file():  # a file: a cache that cannot be made
            caches[node].mkdir(parents=True, exist_ok=True)
        temporaries[node].mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "NMT_CACHE_DIR": str(caches[node]),
               "TMPDIR": str(temporaries[node])}
        nodes.append(subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(node),
             "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port", str(port),
             "-m", "nmt_cli.main", "train", "--data", "multi30k", "--preset", "tiny", "--vocab-size", "500",
             "--out", str(out), "--max-tokens", "500", "--max-steps", str(steps), "--valid-every", "1000",
             "--log-every", "1", "--warmup", "5", "--threads", "1", "--prepare-workers", "1", *extra],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    return nodes


def finished(nodes: list[subprocess.Popen], timeout: float = 240) -> list[tuple[int, str]]:
    return [(node.wait(timeout=timeout), node.stderr.read()) for node in nodes]


def logged_losses(out: Path) -> dict[int, float]:
    return {m["step"]: m["train_loss"] for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
            if "train_loss" in m}


@pytest.mark.slow  # five torchrun launches, about a minute
def test_two_nodes_prepare_apart_stop_on_sigterm_and_resume_as_if_never_stopped(tmp_path):
    """Two machines simulated on this one (issue 63): trained straight through; then again with node 0's cache
    warm and node 1's cold under a collective timeout of a second (node 0 waits for node 1's preparation in
    the join, not in a collective), SIGTERM to both launchers mid-run (each worker gets it from its torchrun:
    repeated signals are one request), and the same commands again: the run resumes where it stopped, every
    rank with its own random state, and logs the losses of the uninterrupted run."""
    temporaries = (tmp_path / "tmp0", tmp_path / "tmp1")
    straight, split = tmp_path / "straight", tmp_path / "split"
    warm, cold = tmp_path / "cache0", tmp_path / "cache1"
    results = finished(launch_nodes(straight, (warm, warm), temporaries, 30))
    assert all(code == 0 for code, _ in results), results[0][1][-2000:] + results[1][1][-2000:]
    expected = logged_losses(straight)
    assert sorted(expected) == list(range(1, 31))

    nodes = launch_nodes(split, (warm, cold), temporaries, 30, "--dist-timeout", "0.02", "--save-every", "1000")
    deadline = time.monotonic() + 180
    while not ((split / "metrics.jsonl").exists() and len(logged_losses(split)) >= 8):
        assert time.monotonic() < deadline and all(node.poll() is None for node in nodes), \
            "".join(node.stderr.read()[-2000:] for node in nodes if node.poll() is not None)
        time.sleep(0.2)
    for node in nodes:
        node.send_signal(signal.SIGTERM)
    results = finished(nodes)
    stopped = load_checkpoint(split / "last.pt").train_state
    assert 8 <= stopped["progress"]["step"] < 30, results[0][1][-2000:]
    assert len(stopped["rank_rng"]) == 2
    assert "interrupted by SIGTERM" in results[0][1]
    assert not list(split.glob(".*tmp*")) and not list(cold.glob("*.tmp-*")) and not list(cold.glob("*.claim"))

    results = finished(launch_nodes(split, (warm, cold), temporaries, 30))
    assert all(code == 0 for code, _ in results), results[0][1][-2000:] + results[1][1][-2000:]
    resumed = logged_losses(split)
    assert {step: resumed[step] for step in expected} == expected


@pytest.mark.slow  # two torchrun launches
def test_a_rank_that_fails_before_the_join_stops_the_others_within_seconds(tmp_path):
    """Issue 81: node 1 cannot make its cache and fails before the ranks join; node 0 waited in the join for
    the whole --join-timeout (6 hours). Now node 1 leaves a note in the shared run folder, and node 0 stops
    with its line (while preparing: its temporary folder removed; or in the join)."""
    broken = tmp_path / "not-a-folder"
    broken.write_text("")
    nodes = launch_nodes(tmp_path / "run", (tmp_path / "cache0", broken), (tmp_path / "tmp0", tmp_path / "tmp1"), 5)
    try:
        results = finished(nodes, timeout=240)
    finally:
        for node in nodes:
            node.kill()
    assert all(code != 0 for code, _ in results)
    assert "cannot use " + str(broken) in results[1][1]
    lines = [line for line in results[0][1].splitlines() if line.startswith("error: rank 1 stopped before the ranks")]
    assert len(lines) == 1 and "folder of prepared corpora: it is a file" in lines[0], results[0][1][-3000:]
    assert not list((tmp_path / "cache0").glob("*.tmp-*")) and not list((tmp_path / "cache0").glob("*.claim"))


@pytest.mark.slow  # two torchrun launches, a few seconds of a stopped rank
def test_a_rank_that_hangs_mid_run_stops_the_others_after_dist_timeout_in_one_line(tmp_path):
    """Issue 81: a machine that hangs after the join (here: node 1's worker stopped with SIGSTOP) must end
    the others after --dist-timeout with one line naming that option, whatever the backend: NCCL's own
    watchdog aborts the process with pages of C++ instead, and gloo's timeout surfaced inside DDP's backward
    as a RuntimeError's traceback."""
    nodes = launch_nodes(tmp_path / "run", (tmp_path / "cache0", tmp_path / "cache1"),
                         (tmp_path / "tmp0", tmp_path / "tmp1"), 100_000, "--dist-timeout", "0.05")
    try:
        deadline = time.monotonic() + 180
        while not ((tmp_path / "run" / "metrics.jsonl").exists() and len(logged_losses(tmp_path / "run")) >= 3):
            assert time.monotonic() < deadline and all(node.poll() is None for node in nodes), \
                "".join(node.stderr.read()[-2000:] for node in nodes if node.poll() is not None)
            time.sleep(0.2)
        workers = subprocess.run(["pgrep", "-P", str(nodes[1].pid)], capture_output=True, text=True).stdout.split()
        assert len(workers) == 1
        os.kill(int(workers[0]), signal.SIGSTOP)
        stopped_at = time.monotonic()
        code = nodes[0].wait(timeout=120)
        waited = time.monotonic() - stopped_at
        os.kill(int(workers[0]), signal.SIGCONT)
    finally:
        for node in nodes:
            node.kill()
    error = nodes[0].stderr.read()
    lines = [line for line in error.splitlines() if line.startswith("error: rank 0: ")]
    assert code != 0 and waited >= 3 and len(lines) == 1, error[-3000:]
    assert "did not answer within --dist-timeout 0.05 minutes" in lines[0], error[-3000:]
    ours = error[:error.index(lines[0])]  # torchrun's agent reports the failure after, in its own way
    assert "Traceback" not in ours and "terminate called" not in ours, error[-3000:]


def bare_loop(model, optimizer, config: TrainConfig, precision: str = "fp32") -> Loop:
    """nmt train's Loop around `model` and `optimizer` on the CPU, without a corpus: its update() and
    collated(), two batches an update."""

    from nmt.model.loss import TranslationLoss
    from nmt.training.distributed import Distributed

    run = Run(config, Distributed(), torch.device("cpu"), precision, 2, {}, Path(config.out), Clock())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return Loop(run, Learner(model, TranslationLoss(model), optimizer, scheduler), Feed(None), {"step": 0})


def test_an_update_weighs_every_target_token_alike_whichever_batch_it_is_in(tmp_path):
    """The paper's and fairseq's normalization: an update's gradient is that of the loss summed over its
    target tokens over their number. Two batches of very different sizes accumulated give the gradient of
    the one batch holding both (a mean of per-batch means would weigh the short batch's tokens 9 times
    more here)."""
    from tests.conftest import tiny_model

    model = tiny_model(vocab_size=50).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    captured = []
    optimizer.register_step_pre_hook(
        lambda *_: captured.append({n: p.grad.clone() for n, p in model.named_parameters()}))
    loop = bare_loop(model, optimizer, TrainConfig(out=str(tmp_path), data="multi30k", max_steps=1, max_tokens=100,
                                                   clip_norm=0.0))
    rng = np.random.default_rng(0)
    short = ([rng.integers(4, 50, 3)], [rng.integers(4, 50, 2)])  # 3 target tokens with EOS
    long = ([rng.integers(4, 50, 12) for _ in range(3)], [rng.integers(4, 50, 8) for _ in range(3)])  # 27
    _, tokens, flops, stepped = loop.read(loop.update([loop.collated(short), loop.collated(long)]))
    assert stepped and tokens == 30
    assert flops == training_flops(model.config, [4, 13, 13, 13], [3, 9, 9, 9])  # sources with EOS, targets with BOS
    loop.update([loop.collated((short[0] + long[0], short[1] + long[1]))])
    apart, together = captured
    for name, gradient in together.items():
        torch.testing.assert_close(apart[name], gradient, atol=1e-6, rtol=1e-4)


def test_a_static_shape_update_takes_the_gradient_tokens_and_flops_of_its_batches(tmp_path):
    """--static-shapes (issue 81: shapes a CUDA graph can be recorded at): the update pads each batch to its
    shape, filler rows and all, and takes the same gradient, target tokens and FLOPs as without."""
    from tests.conftest import tiny_model

    rng = np.random.default_rng(0)
    short = ([rng.integers(4, 50, 3)], [rng.integers(4, 50, 2)])
    long = ([rng.integers(4, 50, 12) for _ in range(3)], [rng.integers(4, 50, 8) for _ in range(3)])
    results = []
    for static in (False, True):
        torch.manual_seed(0)
        model = tiny_model(vocab_size=50).train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        captured = []
        optimizer.register_step_pre_hook(
            lambda *_, model=model, captured=captured: captured.append(
                {n: p.grad.clone() for n, p in model.named_parameters()}))
        loop = bare_loop(model, optimizer, TrainConfig(out=str(tmp_path), data="multi30k", max_steps=1,
                                                       max_tokens=100, clip_norm=0.0, dropout=0.0,
                                                       static_shapes=static))
        batches = [loop.collated(short), loop.collated(long)]
        loss, tokens, flops, stepped = loop.read(loop.update(batches))
        results.append((loss, tokens, flops, captured[0], [tuple(b.src.shape) + (b.tgt_in.size(1),) for b in batches]))
    (loss, tokens, flops, gradients, _), (static_loss, static_tokens, static_flops, static_gradients, shapes) = results
    assert shapes == [(12, 8, 8), (6, 16, 16)]  # 100 // 8 rows of 8, 100 // 16 of 16
    assert (static_tokens, static_flops) == (tokens, flops) and static_loss == pytest.approx(loss, rel=1e-5)
    for name, gradient in gradients.items():
        torch.testing.assert_close(static_gradients[name], gradient, atol=1e-6, rtol=1e-4)


class DeviceReads(torch.utils._python_dispatch.TorchDispatchMode):
    """The calls that bring a tensor's value to the host (item(), tolist(), bool(), float() of a tensor, and
    the operators under them) made under it: each one, on a GPU, a wait for all the work queued before it."""

    OPERATORS = ("aten._local_scalar_dense", "aten.is_nonzero", "aten.item", "aten.equal")
    METHODS = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__bool__, torch.Tensor.__float__,
               torch.Tensor.__int__, torch.Tensor.numpy}

    def __init__(self):
        super().__init__()
        self.reads = []
        methods, reads = self.METHODS, self.reads

        class Methods(torch.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if func in methods:
                    reads.append(func.__name__)
                return func(*args, **(kwargs or {}))

        self.methods = Methods()

    def __enter__(self):
        self.methods.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        return self.methods.__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func).startswith(self.OPERATORS):
            self.reads.append(str(func))
        return func(*args, **(kwargs or {}))


def test_an_update_reads_nothing_from_the_device_and_one_not_finite_is_skipped_there(tmp_path, monkeypatch):
    """Issue 81's step with no host sync: an update, the loss scaling, gradient norm, the skip and fused
    Adam's step included, queues its work and reads no value back (a GPU's host launches the next update
    meanwhile); its values are read later. An update whose loss is not finite is skipped by fused Adam on
    the device: weights, moments and Adam's step count as they were."""
    from nmt.model.transformer import Transformer
    from tests.conftest import tiny_model

    rng = np.random.default_rng(0)
    batch = ([rng.integers(4, 50, 9) for _ in range(4)], [rng.integers(4, 50, 7) for _ in range(4)])
    model = tiny_model(vocab_size=50).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    loop = bare_loop(model, optimizer, TrainConfig(out=str(tmp_path), data="multi30k", max_steps=9, max_tokens=100,
                                                   clip_norm=1.0), precision="bf16")
    assert loop.skips_on_device
    loop.read(loop.update([loop.collated(batch)]))  # Adam's moments made
    # the source mask as on a GPU: a CPU asks whether a batch has padding at all, which costs it nothing
    monkeypatch.setattr(Transformer, "source_mask", lambda self, src: (src != self.config.pad_id)[:, None, None, :])
    loss = Loop.loss
    for poisoned in (False, True, False):
        weights = {n: p.detach().clone() for n, p in model.named_parameters()}
        moments = {n: {k: v.clone() for k, v in optimizer.state[p].items()} for n, p in model.named_parameters()}

        def loss_of(self, batch, poisoned=poisoned):
            value, tokens = loss(self, batch)
            return value * float("nan") if poisoned else value, tokens

        monkeypatch.setattr(Loop, "loss", loss_of)
        with DeviceReads() as device:
            queued = loop.update([loop.collated(batch)])
        assert device.reads == []
        mean_loss, tokens, _, taken = loop.read(queued)
        assert tokens == 32 and taken is not poisoned and math.isfinite(mean_loss) is not poisoned
        for name, p in model.named_parameters():
            state = optimizer.state[p]
            if poisoned:
                assert torch.equal(p, weights[name]) and torch.equal(state["exp_avg"], moments[name]["exp_avg"])
                assert torch.equal(state["exp_avg_sq"], moments[name]["exp_avg_sq"])
                assert state["step"] == moments[name]["step"]
            else:
                assert not torch.equal(state["exp_avg"], moments[name]["exp_avg"])
                assert state["step"] == moments[name]["step"] + 1
        assert not any(torch.equal(p, weights[n]) for n, p in model.named_parameters() if p.dim() > 1) \
            or poisoned


def test_fused_adam_trains_as_the_foreach_adam_did(tmp_path):
    """nmt train's Adam is fused on a CPU too (one kernel; skips on the device): over ten updates its losses
    and weights are those of the foreach Adam it replaced, to float32 rounding."""
    from tests.conftest import tiny_model

    rng = np.random.default_rng(1)
    batches = [([rng.integers(4, 50, int(n)) for n in rng.integers(3, 12, 5)],
                [rng.integers(4, 50, int(n)) for n in rng.integers(3, 12, 5)]) for _ in range(10)]
    runs = []
    for fused in (None, True):
        torch.manual_seed(0)
        model = tiny_model(vocab_size=50).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9, fused=fused)
        loop = bare_loop(model, optimizer, TrainConfig(out=str(tmp_path), data="multi30k", max_steps=10,
                                                       max_tokens=100, dropout=0.0))
        losses = [loop.read(loop.update([loop.collated(batch)]))[0] for batch in batches]
        runs.append((losses, {n: p.detach().clone() for n, p in model.named_parameters()}))
    (foreach_losses, foreach_weights), (fused_losses, fused_weights) = runs
    assert foreach_losses[-1] < foreach_losses[0] - 0.1  # it learns
    assert fused_losses == pytest.approx(foreach_losses, rel=1e-5)
    for name, weight in foreach_weights.items():
        if name.endswith("kv_proj.bias"):  # a key's bias has no gradient but rounding noise, which Adam makes a
            continue  # whole step of, either way (softmax does not change for a constant added to every score)
        assert float((fused_weights[name] - weight).norm() / weight.norm()) < 1e-5, name


def test_nmt_train_static_shapes_trains_records_the_option_and_warns_when_a_resume_drops_it(corpus, tmp_path):
    first = nmt(*train_args(corpus, tmp_path, "--max-steps", "6", "--valid-every", "1000", "--log-every", "1",
                            "--static-shapes"))
    assert first.returncode == 0, first.stderr[-3000:]
    losses = logged_losses(tmp_path)
    assert sorted(losses) == list(range(1, 7)) and all(math.isfinite(loss) for loss in losses.values())
    assert "static_shapes: true" in (tmp_path / "config.yaml").read_text()
    again = train_args(corpus, tmp_path, "--max-steps", "8", "--valid-every", "1000", "--log-every", "1")
    resumed = nmt(*[arg for arg in again if arg != "--quiet"])  # the warning is a log line
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "static_shapes: True -> False" in resumed.stderr, resumed.stderr[-3000:]


@pytest.mark.slow  # torch.compile on a CPU: a minute or two
def test_the_compiled_step_trains_as_the_eager_one_and_compiles_once_for_every_length(corpus, tmp_path):
    """`--compile` (issue 64): over 50 updates of batches of every length, the losses of the eager step to
    within float32's reordered sums, and one compilation: lengths padded to 8 (no recompiles for
    alignment), source and target lengths distinct symbols (duck sizing off)."""
    common = ("--max-steps", "50", "--max-tokens", "600", "--valid-every", "1000", "--log-every", "1",
              "--warmup", "10", "--dropout", "0", "--precision", "fp32")
    env = {"TORCH_LOGS": "recompiles", "OMP_NUM_THREADS": "1"}
    eager = nmt(*train_args(corpus, tmp_path / "eager", *common), env=env)
    compiled = nmt(*train_args(corpus, tmp_path / "compiled", *common, "--compile"), env=env)
    assert eager.returncode == 0 and compiled.returncode == 0, compiled.stderr[-3000:]
    assert "Recompiling function" not in compiled.stderr, compiled.stderr[-3000:]
    a, b = logged_losses(tmp_path / "eager"), logged_losses(tmp_path / "compiled")
    assert sorted(a) == sorted(b) == list(range(1, 51))
    for step in a:
        assert b[step] == pytest.approx(a[step], rel=2e-3), step


@pytest.mark.parametrize("name", ["wmt14-en-fr-base", "wmt14-en-fr-big"])
def test_the_wmt14_configs_take_their_tokens_an_update_on_one_and_eight_gpus(name):
    import yaml

    from nmt.training.config import batches_per_update

    values = yaml.safe_load((Path(__file__).parent.parent / "configs" / f"{name}.yaml").read_text())
    config = TrainConfig(out="x", **values)
    for gpus, accumulated in ((1, 8), (8, 1)):
        assert batches_per_update(config, gpus) == accumulated
        assert gpus * accumulated * config.max_tokens == config.tokens_per_update
    with pytest.raises(UsageError, match="--max-tokens 8192"):  # 2 x 8 GPUs: it says what fits
        batches_per_update(config, 16)
    # the paper's recipe: no clipping; the checkpoints averaged, written at a fixed interval, span the end of the run
    assert config.clip_norm == 0
    span = config.checkpoint_every * config.keep_last
    assert config.checkpoint_every < config.valid_every and 0.03 <= span / config.max_steps <= 0.08
    average = re.search(r"nmt average (\S+) --output", (Path(__file__).parent.parent / "configs" / f"{name}.yaml")
                        .read_text())
    assert average, "the config says how to average its checkpoints, with nmt average's own option"


def test_step_checkpoints_are_written_every_n_steps_between_validations(corpus, tmp_path):
    run = tmp_path / "run"
    done = nmt(*train_args(corpus, run, "--max-steps", "7", "--checkpoint-every", "2", "--valid-every", "100",
                           "--keep-last", "3"))
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in run.glob("step*.pt")) == ["step0000004.pt", "step0000006.pt",
                                                                   "step0000007.pt"]  # 7: the run's end validates
    assert load_checkpoint(run / "step0000006.pt").training["summary"]["step"] == 6


def test_batches_read_ahead_keep_their_order_raise_their_errors_and_stop_with_the_loop():
    from nmt.training.loop import read_ahead

    produced = []

    def items():
        for number in range(100):
            produced.append(number)
            yield number

    assert list(read_ahead(items(), 2)) == list(range(100))

    def failing():
        yield 1
        raise DataError("a corpus file went away")

    ahead = read_ahead(failing(), 2)
    assert next(ahead) == 1
    with pytest.raises(DataError, match="went away"):
        next(ahead)
    produced.clear()
    early = read_ahead(items(), 2)
    assert [next(early) for _ in range(3)] == [0, 1, 2]
    early.close()  # the loop stopped mid-epoch: the thread stops too, at most a few items further
    time.sleep(0.5)
    assert len(produced) <= 3 + 2 + 2


def test_closing_the_read_ahead_waits_for_its_thread_mid_batch():
    """A thread still building a batch at the interpreter's exit freed tensors after torch's runtime had gone
    (exit 134, "terminate called without an active exception"): closing the loop's batches now joins it."""
    from nmt.training.loop import read_ahead

    def slow_items():
        for number in range(100):
            time.sleep(0.2)  # a batch being collated when the loop stops
            yield torch.full((4,), number)

    ahead = read_ahead(slow_items(), 2)
    assert int(next(ahead)[0]) == 0
    ahead.close()
    assert not any(thread.name == "nmt-batches" for thread in threading.enumerate())


@pytest.mark.slow  # twenty short runs
def test_a_short_run_that_stops_mid_epoch_always_exits_zero(corpus, tmp_path):
    codes = []
    for number in range(20):
        done = subprocess.run(NMT + train_args(corpus, tmp_path / f"run{number}", "--max-steps", "2",
                                               "--valid-every", "2", "--valid-bleu-lines", "8"),
                              capture_output=True, text=True)
        codes.append((done.returncode, done.stderr[-300:]))
    assert [code for code, _ in codes] == [0] * 20, codes


@pytest.mark.parametrize("damage, what", [("truncate", "source.bin holds"), ("flip", "source.bin is not as it"),
                                          ("remove", "target_lengths.bin is missing"), ("meta", "meta.json")])
def test_a_damaged_token_cache_is_one_line_before_training(corpus, tmp_path, damage, what):
    """A truncated source.bin trained silently on pairs with empty sources; now every file's size and checksum
    are checked when the cache opens."""
    data = ("--src-file", str(corpus / "train.en"), "--tgt-file", str(corpus / "train.fr"), "--spm",
            str(corpus / "spm.model"))
    env = {"NMT_CACHE_DIR": str(tmp_path / "cache")}
    made = nmt("prepare", *data, env=env)
    assert made.returncode == 0, made.stderr
    folder = Path(made.stdout.strip().splitlines()[-1])
    source = folder / "source.bin"
    if damage == "truncate":
        source.write_bytes(source.read_bytes()[: source.stat().st_size // 2])
    elif damage == "flip":
        data_bytes = bytearray(source.read_bytes())
        data_bytes[100] ^= 1
        source.write_bytes(bytes(data_bytes))
    elif damage == "remove":
        (folder / "target_lengths.bin").unlink()
    else:
        (folder / "meta.json").write_text("{not json")
    trained = nmt("train", "--prepared", str(folder), "--preset", "tiny", "--max-steps", "1", "--max-tokens", "600",
                  "--threads", "1", "--quiet", "--out", str(tmp_path / "run"), env=env)
    assert trained.returncode != 0
    last = trained.stderr.strip().splitlines()[-1]
    assert len(trained.stderr.strip().splitlines()) == 1 and "is damaged" in last and what in last, trained.stderr


def test_the_flags_given_go_over_the_config_file_over_the_defaults():
    from_file = {"data": "multi30k", "lr": "1e-3", "max_steps": 100, "warmup": 10}
    merged = TrainConfig.merged("runs/x", TrainFlags(max_steps=5, seed=None), from_file, "run.yaml")
    assert (merged.max_steps, merged.lr, merged.warmup, merged.data, merged.out) == (5, 1e-3, 10, "multi30k", "runs/x")
    assert merged.seed == TrainConfig(out="x", data="multi30k", max_steps=1).seed  # not given: the default
    prepared = TrainConfig.merged("runs/x", TrainFlags(prepared="cache/abc", max_steps=1), from_file, "run.yaml")
    assert prepared.data is None and prepared.prepared == "cache/abc"  # the folder stands for the file's data
    with pytest.raises(UsageError, match="unknown training options in run.yaml: colour"):
        TrainConfig.merged("runs/x", TrainFlags(max_steps=1), {**from_file, "colour": "red"}, "run.yaml")
    with pytest.raises(UsageError, match="lr in run.yaml must be a number"):
        TrainConfig.merged("runs/x", TrainFlags(max_steps=1), {**from_file, "lr": "fast"}, "run.yaml")


def test_a_launcher_that_gives_each_process_one_gpu_is_accepted():
    """torchrun on 8 GPUs, or a launcher that makes one GPU visible to each of 8 processes (SLURM's
    --gpus-per-task 1): both train; 8 processes that share 4 visible GPUs do not."""
    from nmt.training.distributed import check_gpus_per_process

    check_gpus_per_process(8, 8)
    check_gpus_per_process(8, 1)  # was refused: "8 processes on this machine but 1 visible GPU(s)"
    with pytest.raises(UsageError, match="8 processes on this machine but 4 visible GPUs"):
        check_gpus_per_process(8, 4)


@pytest.mark.slow  # a preparation stopped midway
def test_sigterm_while_preparing_removes_the_temporary_folder(tmp_path):
    """SIGTERM's default ended nmt prepare where it stood, leaving a temporary folder (many GB at WMT size); now
    it is removed, and the command exits 143 with one line."""
    cache = tmp_path / "cache"
    preparing = subprocess.Popen(NMT + ["prepare", "--data", "multi30k*4,tatoeba", "--vocab-size", "1000",
                                        "--cache-dir", str(cache)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)

    def temporaries() -> list[Path]:
        return [path for path in cache.glob("*.*") if path.is_dir()] if cache.exists() else []

    deadline = time.monotonic() + 300
    while not temporaries():
        assert preparing.poll() is None and time.monotonic() < deadline, preparing.communicate()
        time.sleep(0.02)
    preparing.send_signal(signal.SIGTERM)
    _, stderr = preparing.communicate(timeout=300)
    assert preparing.returncode == 143, stderr[-2000:]
    assert stderr.strip().splitlines()[-1].startswith("error: interrupted by SIGTERM")
    assert not temporaries() and not list(cache.glob("*.claim"))
