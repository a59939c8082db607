"""nmt.data.prepare's one maker per cache folder: whoever claims it first, the others wait on the file system."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest

from nmt.data import prepare
from nmt.data.corpus import ParallelText
from nmt.data.prepare import made_once, unique_suffix
from nmt.errors import Interrupted, NmtError, stop_signals_handled_by


def test_one_process_makes_a_folder_the_others_wait_for_it_on_the_file_system(tmp_path):
    folder = tmp_path / "corpus-abc"
    claim = tmp_path / "corpus-abc.claim"
    claim.write_text("elsewhere 123\n")  # another machine's rank is preparing it
    calls = []

    def finish_elsewhere():
        time.sleep(0.3)
        folder.mkdir()
        (folder / "meta.json").write_text("{}")
        claim.unlink()

    other = threading.Thread(target=finish_elsewhere)
    other.start()
    made_once(folder, lambda: calls.append("made"), poll=0.05)
    other.join()
    assert calls == [] and (folder / "meta.json").exists()
    made_once(folder, lambda: calls.append("made"))  # whole already: nothing to do
    assert calls == []


def test_a_claim_whose_process_died_is_taken_over_and_a_claim_is_released_after_failure(tmp_path):
    folder = tmp_path / "corpus-abc"
    claim = tmp_path / "corpus-abc.claim"
    claim.write_text("elsewhere 123\n")
    long_ago = time.time() - prepare.CLAIM_STALE - 1
    os.utime(claim, (long_ago, long_ago))

    def make():
        assert claim.read_text() == f"{socket.gethostname()} {os.getpid()}\n"  # this process's claim now
        folder.mkdir()
        (folder / "meta.json").write_text("{}")

    made_once(folder, make, poll=0.01)
    assert (folder / "meta.json").exists() and not claim.exists()

    def fail():
        raise RuntimeError("disk full")

    try:
        made_once(tmp_path / "corpus-def", fail)
    except RuntimeError:
        pass
    assert not (tmp_path / "corpus-def.claim").exists()  # the next process can claim it at once


def test_temporary_names_differ_between_processes_with_the_same_id():
    names = {unique_suffix() for _ in range(100)}  # containers on several machines often share a pid
    assert len(names) == 100 and all(socket.gethostname() in name for name in names)


def test_a_forked_worker_ends_on_sigterm_before_it_sets_its_own_handlers():
    """A pool's worker is forked with the parent's stop handler and sets its own only later. A SIGTERM from the
    pool's terminate in between raised the parent's Interrupted there, which a fork hook can drop: the worker
    lived on and the terminate waited for it for ever (CI, nmt prepare stopped while tokenizing, 1 run in 40 here).
    Now such a process ends as SIGTERM's default would, and leaves SIGINT to its parent."""

    def stop(signal_number, frame):
        raise Interrupted(signal_number)

    ready, told = os.pipe()
    with stop_signals_handled_by(stop):
        child = os.fork()
        if child == 0:  # the worker, before its own handlers: the parent's Interrupted would end at os._exit(0)
            try:
                os.write(told, b"x")
                while True:
                    time.sleep(0.01)
            finally:
                os._exit(0)
        os.read(ready, 1)
        os.kill(child, signal.SIGINT)
        os.kill(child, signal.SIGTERM)
        _, status = os.waitpid(child, 0)
    os.close(ready)
    os.close(told)
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGTERM


def test_a_stop_while_preparing_is_raised_at_the_next_check_never_from_the_handler(tmp_path):
    """A raise from the handler lands anywhere: in the parent's fork hook (logging's lock release) it was dropped,
    the lock stayed held, and the pool's workers were forked again behind its terminate (CI: nmt prepare stopped
    with SIGTERM, its pipes held open for ever by two orphans). The stop is noted, and raised at the next
    check, with the temporary folder removed; the next preparation in the process starts afresh."""
    folder = tmp_path / "corpus-abc"
    made = []
    try:
        with prepare._temporary(folder) as temporary:
            made.append(temporary)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler has run: nothing raised here
            made.append("after the signal")
            prepare._check_stop()
            made.append("past the check")
    except Interrupted as stop:
        assert stop.exit_code == 128 + signal.SIGTERM
    assert made[1:] == ["after the signal"] and not made[0].exists()
    with prepare._temporary(folder) as temporary:
        prepare._check_stop()  # an earlier stop is not raised again
        prepare._publish(temporary, folder)
    assert folder.is_dir()


def test_a_tokenizing_process_that_dies_is_one_error_not_a_wait_for_ever():
    """multiprocessing.Pool forked a new worker for one that died and waited for ever on the lost chunk's result;
    the executor raises, and the command says so in one line (here the workers die at start: no model)."""
    chunks = iter([ParallelText(["a"], ["b"])] * 3)
    with pytest.raises(NmtError, match="a tokenizing process died"):
        list(prepare._encoded(chunks, 2, (b"not a sentencepiece model", None, None, None)))
