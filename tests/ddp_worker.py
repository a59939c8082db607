"""Run under torchrun by tests/test_train.py: train a few steps with DDP, then save this rank's weights.

Every collective is checked: a tensor handed to one must be on the device the loop trains on. The loop's
updates and stopping checks run with torch's default device set to "meta", so a tensor made there without
naming a device (as `torch.tensor([flag])`, which NCCL refuses when training on CUDA) is caught on a CPU.
In them, collectives and reads of a tensor's value by the host (a wait for the device on a GPU) are counted."""

import functools
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from nmt.errors import UsageError
from nmt.model.transformer import Transformer
from nmt.training.config import TrainConfig
from nmt.training.loop import Loop
from nmt.training.train import Trainer

out, src, tgt, spm = sys.argv[1:5]
options = dict(zip(sys.argv[5::2], sys.argv[6::2], strict=True))  # --option value ...
rank = os.environ["RANK"]
if options.get("--node-local-out") == "yes" and rank != "0":  # as a second machine's own disk
    out = f"{out}-rank{rank}"
if "--other-spm-on-rank1" in options and rank == "1":  # as a machine with a stale copy of the files
    spm = options["--other-spm-on-rank1"]
trainer = Trainer(TrainConfig(out=out, src_file=src, tgt_file=tgt, spm=spm, preset="tiny", max_steps=4,
                              max_tokens=int(options.get("--max-tokens", 500)), valid_every=1000, keep_last=0,
                              threads=1))
checked = []
counted = {"collectives": 0, "host_reads": 0, "calls": 0}
in_the_loop = {"update or finished": False}


class HostReads(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            counted["host_reads"] += 1
        return func(*args, **(kwargs or {}))


def on_the_training_device(collective):
    @functools.wraps(collective)
    def checked_collective(tensor, *args, **kwargs):
        tensors = tensor if isinstance(tensor, list) else [tensor]
        for each in tensors:
            if each.device != trainer.device:
                raise AssertionError(f"{collective.__name__} got a tensor on {each.device}, the loop trains on "
                                     f"{trainer.device}")
        checked.append(collective.__name__)
        counted["collectives"] += in_the_loop["update or finished"]
        return collective(tensor, *args, **kwargs)

    return checked_collective


for name in ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor"):
    setattr(dist, name, on_the_training_device(getattr(dist, name)))


def with_default_device_meta(method):
    @functools.wraps(method)
    def on_meta(*args, **kwargs):
        in_the_loop["update or finished"] = True
        counted["calls"] += method.__name__ == "update"
        try:
            with torch.device("meta"), HostReads():
                return method(*args, **kwargs)
        finally:
            in_the_loop["update or finished"] = False

    return on_meta


# the source mask as on a GPU: a CPU asks whether a batch has padding at all, a read that costs it nothing
Transformer.source_mask = lambda self, src: (src != self.config.pad_id)[:, None, None, :]
Loop.update = with_default_device_meta(Loop.update)
Loop.finished = with_default_device_meta(Loop.finished)
try:
    trainer.run()
except UsageError as exc:
    sys.exit(f"rank {os.environ['RANK']}: {exc}")
torch.save(trainer.model.state_dict(), f"{out}/rank{os.environ['RANK']}.weights")
with open(f"{out}/rank{os.environ['RANK']}.collectives", "w") as file:
    json.dump({"collectives": checked, "in updates": counted}, file)
