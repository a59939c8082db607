"""Before the ranks of a torchrun launch join, a rank's failure reaches the others through notes in the shared run
folder (nmt.training.distributed.PeerFailures): which notes count."""

from __future__ import annotations

import os
import time

import pytest

from nmt.training.distributed import PeerFailures


def launch(monkeypatch, port: str) -> None:
    for name, value in {"TORCHELASTIC_RUN_ID": "job-7", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": port,
                        "TORCHELASTIC_RESTART_COUNT": "0"}.items():
        monkeypatch.setenv(name, value)


def test_another_rank_s_fresh_note_of_this_launch_is_seen(tmp_path, monkeypatch):
    launch(monkeypatch, "29500")
    PeerFailures(tmp_path, rank=3).note("the corpus is missing")
    assert PeerFailures(tmp_path, rank=3).seen() is None  # its own note
    seen = PeerFailures(tmp_path, rank=0).seen()
    assert seen == "rank 3 stopped before the ranks joined, so this one stops too: the corpus is missing"


def test_notes_of_another_launch_or_of_long_ago_stop_no_one(tmp_path, monkeypatch):
    launch(monkeypatch, "29500")
    PeerFailures(tmp_path, rank=1).note("an earlier launch's failure")
    launch(monkeypatch, "29501")  # another launch
    assert PeerFailures(tmp_path, rank=0).seen() is None
    writer = PeerFailures(tmp_path, rank=1)
    writer.note("this launch's, but written long ago")
    note = tmp_path / f"{writer.prefix}1"
    os.utime(note, (time.time() - 3600, time.time() - 3600))
    assert PeerFailures(tmp_path, rank=0).seen() is None  # the same names, an hour before this process started


def test_the_watch_raises_a_stop_signal_while_preparing(tmp_path, monkeypatch):
    """The stop comes as SIGTERM (preparing handles it: its temporary folder removed); here caught as a signal."""
    import signal

    launch(monkeypatch, "29502")
    got = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: got.append(number))
    try:
        watch = PeerFailures(tmp_path, rank=0, poll=0.05, grace=5).start()
        PeerFailures(tmp_path, rank=1).note("out of disk")
        deadline = time.monotonic() + 10
        while not got:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        watch.stop()
        assert got == [signal.SIGTERM] and "out of disk" in watch.failure
    finally:
        signal.signal(signal.SIGTERM, previous)
    PeerFailures(tmp_path, rank=0).clear()
    assert not list(tmp_path.glob(".failed-before-join-*"))


def test_rank_0_reads_a_dataset_and_the_others_open_what_it_prepared(tmp_path, monkeypatch):
    """--hf-dataset under torchrun: rank 0 alone reads the dataset (a hub dataset: the hub once a launch) and
    leaves its prepared folder's path in the run folder; rank 1 opens that folder and reads nothing."""
    import json

    import nmt.training.train
    from nmt.data.corpus import load_embedded
    from nmt.training.config import TrainConfig
    from nmt.training.distributed import PreparedByRankZero
    from nmt.training.train import Trainer

    dataset = tmp_path / "pairs.jsonl"
    embedded = load_embedded("multi30k", "train")
    pairs = [{"translation": {"en": en, "fr": fr}} for en, fr in
             zip(embedded.source[:3000], embedded.target[:3000], strict=True)]
    dataset.write_text("".join(json.dumps(pair) + "\n" for pair in pairs), encoding="utf-8")
    launch(monkeypatch, "29503")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("NMT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    config = TrainConfig(out=str(out), hf_dataset=str(dataset), vocab_size=500, max_steps=1)

    def trainer_of(rank: int) -> Trainer:
        monkeypatch.setenv("RANK", str(rank))
        trainer = Trainer(config)
        trainer.peers = PeerFailures(out, rank)  # as run() makes it under torchrun (not watching here)
        return trainer

    first = trainer_of(0)._prepare(None)
    assert PreparedByRankZero(out, 0).wait(0.1) == first.folder.resolve()

    def read(*args):
        raise AssertionError("rank 1 read the dataset")

    monkeypatch.setattr(nmt.training.train, "prepare_training_data", read)
    second = trainer_of(1)._prepare(None)
    assert second.folder == first.folder.resolve() and second.valid.source == first.valid.source
    assert second.tokenizer.model_bytes == first.tokenizer.model_bytes


@pytest.mark.slow  # a corpus prepared, then 3 s in the join
def test_a_join_that_times_out_names_the_join_s_timeout(tmp_path):
    """Rank 0 of two, the other never started: the join gives up after --join-timeout, in one line that names
    that option (it named --dist-timeout, which does not govern the join)."""
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NMT_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "train", "--data", "multi30k", "--preset", "tiny",
                             "--vocab-size", "500", "--out", str(tmp_path / "run"), "--max-steps", "2",
                             "--join-timeout", "0.05", "--threads", "1"], env=env, capture_output=True, text=True,
                            timeout=600)
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and last.startswith("error: rank 0: the other ranks did not join within "
                                                      "--join-timeout 0.05 minutes"), result.stderr[-2000:]


@pytest.mark.slow  # a torch import and 3 s of waits
def test_a_wait_past_the_collectives_timeout_ends_the_process_in_one_line():
    """The watch behind --dist-timeout (CollectiveWatch): a nested wait counts from the outermost one, a wait
    that ended in time stops no one, and one past the timeout ends the process with one line and exit 1."""
    import subprocess
    import sys

    program = ("import time\n"
               "from nmt.training.distributed import CollectiveWatch\n"
               "watch = CollectiveWatch(3, 0.02)\n"  # 1.2 s
               "with watch.waiting():\n"
               "    time.sleep(0.1)\n"
               "time.sleep(1.5)\n"
               "print('answered in time', flush=True)\n"
               "with watch.waiting():\n"
               "    with watch.waiting():\n"
               "        pass\n"  # leaves the outer wait timed
               "    time.sleep(30)\n"
               "print('not reached', flush=True)\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stdout == "answered in time\n", result.stderr[-2000:]
    assert result.stderr == ("error: rank 3: the other ranks did not answer within --dist-timeout 0.02 minutes "
                             "(one failed or hangs; its log says why)\n")
