"""The one count of a training step's work (nmt.training.flops): equal to what torch's FLOP counter sees of
the real step, apart from the causal half it leaves out, and blind to padding."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from nmt.data.batching import collate
from nmt.model.config import ModelConfig
from nmt.model.loss import TranslationLoss
from nmt.model.transformer import Transformer
from nmt.training.flops import PEAK_BF16, batch_flops, peak_flops, training_flops

CONFIG = ModelConfig(vocab_size=300, d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2, n_decoder_layers=3,
                     dropout=0.0)


def counted(criterion: TranslationLoss, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> int:
    """torch's count of the products of one step's forward and backward (after a first step: the first one
    in a process also probes a kernel, a small product once)."""
    criterion(src, tgt_in, tgt_out).backward()
    with FlopCounterMode(display=False) as counter:
        criterion(src, tgt_in, tgt_out).backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("source_length, target_length", [(5, 2), (9, 7), (3, 11)])
def test_one_pair_counts_what_the_step_computes_but_the_masked_half(source_length, target_length):
    torch.manual_seed(0)
    criterion = TranslationLoss(Transformer(CONFIG), label_smoothing=0.1)
    src = torch.randint(4, 300, (1, source_length))
    tgt = torch.randint(4, 300, (1, target_length))
    t = target_length
    # the counter sees the whole T x T square of the decoder's self-attention (scores and weighted sum, forward
    # and backward); the causal half above the diagonal is no work a causal kernel needs to do
    masked = 3 * CONFIG.n_decoder_layers * 4 * CONFIG.d_model * (t * t - t * (t + 1) // 2)
    assert counted(criterion, src, tgt, tgt) == training_flops(CONFIG, [source_length], [target_length]) + masked


def test_padding_is_not_work():
    sources = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15]]
    targets = [[20, 21], [22] * 9, [23, 24, 25, 26]]
    src, tgt_in, tgt_out = collate(sources, targets, CONFIG.pad_id, CONFIG.bos_id, CONFIG.eos_id, multiple=8)
    alone = training_flops(CONFIG, [len(s) + 1 for s in sources], [len(t) + 1 for t in targets])  # EOS, BOS
    assert batch_flops(CONFIG, src, tgt_out) == alone
    assert src.shape == (3, 8) and tgt_in.shape == (3, 16)  # padded to 8: what a count of the tensors would see
    criterion = TranslationLoss(Transformer(CONFIG), label_smoothing=0.1)
    assert counted(criterion, src, tgt_in, tgt_out) > 1.5 * alone


def test_a_peak_is_claimed_only_for_a_known_device():
    assert peak_flops(torch.device("cpu")) == ("CPU", None)
    names = list(PEAK_BF16)
    for longer in names:  # a name that holds another is looked up first ("H100 PCIe" before "H100")
        for shorter in names:
            if shorter != longer and shorter in longer:
                assert names.index(longer) < names.index(shorter) or PEAK_BF16[longer] == PEAK_BF16[shorter]
