"""Run under torchrun by tests/test_train.py: train a few steps with DDP, then save this rank's weights."""

import sys

import torch

from nmt.train import TrainConfig, Trainer

out, src, tgt, spm = sys.argv[1:5]
trainer = Trainer(TrainConfig(out=out, src_file=src, tgt_file=tgt, spm=spm, preset="tiny", max_steps=4,
                              max_tokens=500, valid_every=1000, keep_last=0, threads=1))
trainer.run()
torch.save(trainer.model.state_dict(), f"{out}/rank{torch.distributed.get_rank()}.weights")
