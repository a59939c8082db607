"""Several processes (torchrun) training one model: this process's rank and the collectives (Distributed), the
device it trains on, and the checks that every rank shares the run folder and reads the same inputs."""


from __future__ import annotations

import hashlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

from nmt.errors import UsageError
from nmt.model.machine import machine

log = logging.getLogger("nmt")


@dataclass
class Distributed:
    """This process's rank among `world_size` (torchrun's environment); collectives run on `device`, the
    device the loop trains on (NCCL takes CUDA tensors only)."""

    device: torch.device = torch.device("cpu")
    rank: int = 0
    world_size: int = 1
    group: object = None  # every rank, with the collectives' timeout (the default group has the join's)
    watch: CollectiveWatch | None = None  # ends this process in one line when the others stop answering

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_environment(cls, device: torch.device, timeout_minutes: float = 30, backend: str | None = None,
                         join_minutes: float = 360) -> Distributed:
        """Join the process group torchrun describes (NCCL on CUDA, gloo on a CPU, or `backend`), with
        `timeout_minutes` for any collective to wait (the ranks wait at barriers for rank 0's validation and
        checkpoints): a CollectiveWatch's, the group's own a little later. NCCL takes one GPU a process: more
        processes on a machine than GPUs is refused. A lone process under torchrun joins only where `backend` is
        given (to try the backend and DDP on one GPU)."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size == 1 and (backend is None or "MASTER_ADDR" not in os.environ):
            return cls(device)
        import datetime

        import torch.distributed as dist

        backend = backend or ("nccl" if device.type == "cuda" else "gloo")
        if backend == "nccl" and device.type != "cuda":
            raise UsageError("--dist-backend nccl needs CUDA devices; on CPUs the ranks use gloo")
        if backend == "nccl":
            check_gpus_per_process(int(os.environ.get("LOCAL_WORLD_SIZE", "1")), torch.cuda.device_count())
        if not dist.is_initialized():
            # The join waits `join_minutes` for the slowest machine to prepare its corpus (hours, on a cold
            # node-local cache; a machine that died before joining is only noticed then): the default group has
            # that timeout, and the run's collectives go through a group of every rank that waits
            # `timeout_minutes`.
            dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=join_minutes),
                                    device_id=device if backend == "nccl" else None)
        group = dist.new_group(timeout=datetime.timedelta(minutes=timeout_minutes + WATCH_LEAD), backend=backend)
        log.info("joined the process group: rank %d of %d, %s on %s", dist.get_rank(), world_size, backend, device)
        return cls(device, dist.get_rank(), world_size, group, CollectiveWatch(dist.get_rank(), timeout_minutes))

    def waiting(self):
        """Around anything that waits for the other ranks (a collective, an update with DDP's all-reduce)."""
        return self.watch.waiting() if self.watch is not None else nullcontext()

    def close(self) -> None:
        """Leave the process group (at every exit: a group torn down by the interpreter's exit can abort)."""
        if self.group is not None and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()

    def any(self, flag: bool) -> bool:
        """True on every rank when `flag` is true on one of them."""
        return self.count(flag) > 0

    def count(self, flag: bool) -> int:
        """On every rank, the number of ranks where `flag` is true."""
        if self.world_size == 1:
            return int(flag)
        tensor = torch.tensor([int(flag)], device=self.device)
        with self.waiting():  # on NCCL, the wait is in the host sync (item)
            torch.distributed.all_reduce(tensor, group=self.group)
            return int(tensor.item())

    def gathered(self, value) -> list:
        """Every rank's `value` (a picklable object), in rank order, on every rank."""
        if self.world_size == 1:
            return [value]
        values = [None] * self.world_size
        with self.waiting():
            torch.distributed.all_gather_object(values, value, group=self.group)
        return values

    def from_main(self, value):
        """Rank 0's `value` (a picklable object), on every rank."""
        if self.world_size == 1:
            return value
        holder = [value]
        with self.waiting():
            torch.distributed.broadcast_object_list(holder, src=0, group=self.group, device=self.device)
        return holder[0]


def unanswered(rank: int, minutes: float) -> str:
    """The line a rank ends with when the others stopped answering after the join."""
    return (f"rank {rank}: the other ranks did not answer within --dist-timeout {minutes:g} minutes (one failed "
            "or hangs; its log says why)")


WATCH_LEAD = 1.0  # minutes: the process group's own timeout comes this long after the watch's


class CollectiveWatch:
    """A rank whose collective waits past the process group's timeout is ended by the backend in its own way:
    NCCL's watchdog aborts the process with pages of C++, gloo raises inside DDP's backward a RuntimeError
    that names a C++ file. So every wait on the other ranks (an update: DDP's all-reduce and the update's host
    sync; Distributed's collectives) is timed by a thread of this process, which after `minutes` prints one
    line and exits 1, before the group's own timeout (WATCH_LEAD later); torchrun's agents end the rest.

        with watch.waiting():   # nested waits count from the outermost
            torch.distributed.all_reduce(flags, group=group)"""

    def __init__(self, rank: int, minutes: float):
        self.rank, self.seconds = rank, 60 * minutes
        self.poll = min(5.0, self.seconds / 4)
        self._since: float | None = None  # time.monotonic() at the outermost wait's start; None when not waiting
        self._depth = 0
        self._thread: threading.Thread | None = None

    @contextmanager
    def waiting(self) -> Iterator[None]:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="nmt-collective-watch", daemon=True)
            self._thread.start()
        if self._depth == 0:
            self._since = time.monotonic()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._since = None

    def _watch(self) -> None:
        while True:
            time.sleep(self.poll)
            since = self._since
            if since is not None and time.monotonic() - since > self.seconds:
                sys.stderr.write(f"error: {unanswered(self.rank, self.seconds / 60)}\n")
                sys.stderr.flush()
                os._exit(1)


def check_gpus_per_process(processes: int, visible: int) -> None:
    """NCCL takes one GPU a process. A process that sees one GPU (a launcher that sets CUDA_VISIBLE_DEVICES for
    each process, as SLURM's --gpus-per-task does) trains on it; one that sees several takes device LOCAL_RANK of
    them, so more processes on the machine than it sees is refused (UsageError)."""
    if visible > 1 and processes > visible:
        raise UsageError(f"{processes} processes on this machine but {visible} visible GPUs: NCCL needs a GPU for "
                         "each (--nproc_per_node at most the GPUs, or one GPU made visible to each process; "
                         "--dist-backend gloo shares them, slowly)")


def training_device() -> torch.device:
    """CUDA device LOCAL_RANK, taken modulo the devices this process sees (a launcher that gives each
    process one GPU makes it device 0), and made the current one; else the CPU."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    torch.cuda.set_device(device)  # where NCCL and torch's own CUDA allocations of this rank go
    return device


def training_precision(precision: str | None, device: torch.device) -> str:
    """--precision, with auto resolved: bf16 autocast where the hardware computes in bf16 (CUDA with bf16, a
    CPU with AVX-512 BF16 or AMX), else fp16 on CUDA and fp32 on a CPU. On a CPU without native bf16, autocast
    emulates it: `nmt train` small ran at 1,100 target tokens/s in bf16 and 2,800 in fp32 on an Intel Xeon
    with AVX-512 VNNI alone, where a Zen 4 gains from bf16 (docs/TRAINING.md). Not given: auto on CUDA
    (true fp32 there leaves the tensor cores idle), fp32 on a CPU."""
    if precision is None:
        precision = "auto" if device.type == "cuda" else "fp32"
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if machine().flags & {"avx512_bf16", "amx_bf16"} else "fp32"


def check_shared_folder(out: Path, dist: Distributed) -> None:
    """Every rank sees the run folder that rank 0 writes to (--out on a file system all machines share):
    rank 0 leaves a fresh token in it, and a rank that reads another (a node-local --out) refuses, on every
    rank at once, before anything is resumed or trained."""
    if dist.world_size == 1:
        return
    token_file = out / ".run-token"
    token = None
    if dist.is_main:
        import uuid

        token = uuid.uuid4().hex
        temporary = token_file.with_name(f".run-token.tmp{os.getpid()}")
        temporary.write_text(token)
        temporary.replace(token_file)
    token = dist.from_main(token)
    try:
        seen = token_file.read_text()
    except OSError:
        seen = None
    strangers = dist.count(seen != token)
    if strangers:
        raise UsageError(f"{strangers} of {dist.world_size} ranks do not see the run folder {out} that rank 0 writes "
                         "to: --out must be one folder that every machine shares (a network file system)")


def check_same_inputs(dist: Distributed, digests: dict[str, str | None]) -> None:
    """Every rank resumes the same last.pt and reads the same tokenizer and corpus (a stale network file system
    or a machine's own cache can hand one rank another): each `digests` value against rank 0's, on every rank,
    refused on every rank at once with what differs."""
    gathered = dist.gathered(digests)
    differing = sorted({name for other in gathered for name in digests if other[name] != gathered[0][name]})
    if differing:
        ranks = [rank for rank, other in enumerate(gathered) if other != gathered[0]]
        raise UsageError(f"ranks {', '.join(map(str, ranks))} read another {' and '.join(differing)} than rank 0: "
                         "every machine must see the same files (--out and the cache on one shared file system, "
                         "or identical copies)")


def lock_run_folder(out: Path):
    """Hold OUT/.lock for as long as this process lives (the returned file stays open), so that a second
    `nmt train` on the same folder is refused instead of mixing its checkpoints and metrics with this one's;
    then remove the temporary files that killed saves left (no other process writes here)."""
    import fcntl

    handle = open(out / ".lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise UsageError(f"another nmt train is using {out}: wait for it to end, or train into another --out") \
            from None
    for stale in out.glob(".*.tmp*"):
        stale.unlink(missing_ok=True)
    return handle


class PeerFailures:
    """Until the ranks join, a rank that fails cannot tell the others through the process group: they would
    wait the whole --join-timeout (hours) for it. So a rank that fails before the join leaves a note with its
    error line in the run folder (which every rank shares), and every rank watches that folder meanwhile: one
    that sees another's note stops within seconds with that line (NmtError), its preparation's temporary
    folder removed (the stop comes as a SIGTERM, which preparing handles); one already waiting in the join
    (inside torch's C++, where no Python signal handler runs) prints the line and exits 1.

        watch = PeerFailures(out, rank).start()   # before preparing
        watch.joining = True                        # before init_process_group
        watch.stop()                                # joined, or failed: watch.note(line) first

    The notes are named by the launch (torchrun's run id, master address and port, restart count) and count
    only when written since shortly before this process started: a note of an earlier launch stops no one."""

    def __init__(self, folder: Path, rank: int, poll: float = 2.0, grace: float = 30.0):
        self.folder, self.rank, self.poll, self.grace = folder, rank, poll, grace
        self.prefix = f".failed-before-join-{launch_key()}-rank"
        self.since = time.time() - LAUNCH_SKEW
        self.failure: str | None = None  # another rank's line, once seen
        self.joining = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="nmt-peer-failures", daemon=True)

    def start(self) -> PeerFailures:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def note(self, line: str) -> None:
        """Leave this rank's failure for the others (best effort: a folder this rank cannot write is no note)."""
        try:
            write_note(self.folder / f"{self.prefix}{self.rank}", line)
        except OSError:
            pass

    def clear(self) -> None:
        """Remove the notes of every launch (the ranks have joined: none of them failed before), and the
        prepared folders rank 0 left for the others (PreparedByRankZero)."""
        for note in [*self.folder.glob(".failed-before-join-*"), *self.folder.glob(".prepared-by-rank-0-*")]:
            note.unlink(missing_ok=True)

    def seen(self) -> str | None:
        """Another rank's failure noted in this launch, as a line; None if none."""
        for note in sorted(self.folder.glob(f"{self.prefix}*")):
            rank = note.name[len(self.prefix):]
            line = read_note(note, self.since) if rank.isdigit() and int(rank) != self.rank else None
            if line is not None:
                return f"rank {rank} stopped before the ranks joined, so this one stops too: {line}"
        return None

    def _watch(self) -> None:
        while not self._stopped.wait(self.poll):
            self.failure = self.seen()
            if self.failure is None:
                continue
            if not self.joining:  # preparing: a SIGTERM is raised there as Interrupted, its temporary folder removed
                os.kill(os.getpid(), signal.SIGTERM)
                if self._stopped.wait(self.grace):
                    return
            sys.stderr.write(f"error: {self.failure}\n")
            sys.stderr.flush()
            os._exit(1)


LAUNCH_SKEW = 60  # seconds: a launch's notes count from this long before a process's start (clocks, starts differ)


def launch_key() -> str:
    """A name for this torchrun launch, the same in each of its processes and another in the next launch's:
    torchrun's run id, master address and port, and restart count."""
    launch = "|".join(os.environ.get(name, "") for name in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT",
                                                              "TORCHELASTIC_RESTART_COUNT"))
    return hashlib.sha256(launch.encode()).hexdigest()[:12]


def write_note(path: Path, text: str) -> None:
    """Leave a note for the other ranks of this launch, whole (written beside, then renamed over the path)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.tmp{os.getpid()}")
    temporary.write_text(text)
    temporary.replace(path)


def read_note(path: Path, since: float) -> str | None:
    """A note's text, if it is there and was written at `since` or later (a note of an earlier launch, left in
    the same run folder, says nothing); else None."""
    try:
        if path.stat().st_mtime >= since:
            return path.read_text().strip()
    except OSError:
        pass
    return None


class PreparedByRankZero:
    """Under torchrun with --hf-dataset, a dataset every rank would otherwise ask the hub for at start (its
    files, its validation split): rank 0 reads and prepares it, then leaves the prepared folder's path in the run
    folder; each other rank waits for that path (PeerFailures stops it if rank 0 fails) and opens the folder where
    it sees it whole (the same machine, or a cache all machines share), reading nothing from the hub. A rank
    that does not see it (a machine with a cache of its own) prepares its own copy as before: the hub is read
    once a launch, or once a machine that prepares."""

    def __init__(self, folder: Path, rank: int, poll: float = 1.0):
        self.rank, self.poll = rank, poll
        self.path = folder / f".prepared-by-rank-0-{launch_key()}"
        self.since = time.time() - LAUNCH_SKEW

    def publish(self, prepared: Path) -> None:
        write_note(self.path, str(prepared.resolve()))

    def wait(self, minutes: float) -> Path:
        """The folder rank 0 prepared, once it says so; UsageError after `minutes` (--join-timeout)."""
        deadline = time.monotonic() + 60 * minutes
        while (prepared := read_note(self.path, self.since)) is None:
            if time.monotonic() > deadline:
                raise UsageError(f"rank 0 did not prepare the dataset within --join-timeout {minutes:g} minutes")
            time.sleep(self.poll)
        return Path(prepared)
