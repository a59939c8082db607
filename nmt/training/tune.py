"""Tune decoding defaults (beam size, length penalty) on a validation set and store them in a checkpoint,
where `nmt translate` and `nmt eval` use them when the flags are absent; and choose how many of a run's
latest checkpoints to average by the same validation.

    best = tune_decoding(checkpoint, pairs, beams=[4, 5], lenpens=[0.6, 1.0])   # -> ({...}, table)
    averaged, table = choose_average(paths, pairs)                                # table: [(count, BLEU), ...]

Each setting is decoded as `nmt eval` decodes by default on this machine (its precision, and the checkpoint's
shortlist where beam search pays with it): the defaults are chosen in the mode they will be used in. Tune decoded
in fp32 over the whole vocabulary before: on a 2-core Zen 4, the 6,003 pairs of news:dev, europarl:dev and
tatoeba:dev at beam 5 took 542 s for one setting and the fp16 check (two passes); as `nmt eval` decodes them, int8
over the shortlist, 69 s a pass (benchmarks/GENERAL.md, sixth session).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import torch

from nmt.data.corpus import ParallelText
from nmt.decoding.configuration import DecodingConfig, DecodingFlags
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import Checkpoint, cast_weights, save_checkpoint
from nmt.text.metrics import score
from nmt.training.averaging import averaged_checkpoint, load_for_averaging

log = logging.getLogger("nmt")


def default_mode_bleu(checkpoint: Checkpoint, pairs: ParallelText, flags: DecodingFlags) -> float:
    """BLEU of `pairs` decoded as `nmt eval` decodes with `flags` on this machine."""
    translator = Translator.from_checkpoint(checkpoint, DecodingConfig.resolve(flags, checkpoint))
    return score([t.text for t in translator.translate(pairs.source)], pairs.target).bleu


def tune_decoding(checkpoint: Checkpoint, pairs: ParallelText, beams: list[int], lenpens: list[float],
                  flags: DecodingFlags = DecodingFlags()) -> tuple[dict, list[tuple[int, float, float]]]:
    """BLEU for every (beam, lenpen), each decoded in the default mode with `flags` (their beam and length penalty
    replaced); returns the best as decoding defaults and the whole table. With flags.no_repeat_ngram, every run
    blocks repeated n-grams of that size, and the defaults keep it."""
    table = []
    for beam in beams:
        for lenpen in lenpens if beam > 1 else lenpens[:1]:
            bleu = default_mode_bleu(checkpoint, pairs, replace(flags, beam=beam, lenpen=lenpen))
            log.info("beam %d, lenpen %.2f: BLEU %.2f", beam, lenpen, bleu)
            table.append((beam, lenpen, bleu))
    beam, lenpen, _ = max(table, key=lambda row: row[2])
    best = {"beam_size": beam, "lenpen": lenpen}
    return ({**best, "no_repeat_ngram": flags.no_repeat_ngram} if flags.no_repeat_ngram else best), table


def choose_average(paths: list[str | Path], pairs: ParallelText,
                   ema: bool = False) -> tuple[Checkpoint, list[tuple[int, float]]]:
    """The average of the latest k checkpoints (`ema`: of their moving averages), for the k (1 to all) with the
    best greedy BLEU on `pairs` (the more checkpoints on a tie), and every k's BLEU. Where the run's rate was
    still high at the oldest checkpoints, averaging them all can score below fewer."""
    loaded = load_for_averaging(paths, ema)
    best, best_bleu, table = None, -1.0, []
    for count in range(1, len(loaded) + 1):
        candidate = averaged_checkpoint(loaded[-count:])
        translator = Translator(candidate.build_model(), candidate.tokenizer(),
                                DecodingConfig.plain(SearchOptions(beam_size=1)))
        bleu = score([t.text for t in translator.translate(pairs.source)], pairs.target).bleu
        log.info("the latest %d checkpoint(s) averaged: greedy BLEU %.2f", count, bleu)
        if bleu >= best_bleu:  # only the best kept (a big model's weights are large); a tie to the larger count
            best, best_bleu = candidate, bleu
        table.append((count, bleu))
    return best, table


def write_release(checkpoint: Checkpoint, decoding: dict, out: str, half: bool) -> None:
    """The checkpoint with `decoding` defaults, no training state, weights in fp16 if `half`."""
    weights = checkpoint.weights
    if half:
        weights = cast_weights(weights, torch.float16)
    training = dict(checkpoint.training)
    save_checkpoint(out, Checkpoint(checkpoint.config, weights, checkpoint.spm_model,
                                    {**checkpoint.decoding, **decoding}, training, shortlist=checkpoint.shortlist))


def half_precision_bleu(checkpoint: Checkpoint, pairs: ParallelText, flags: DecodingFlags) -> float:
    """BLEU of the checkpoint with its weights rounded to fp16 (as `write_release(half=True)` stores them), decoded
    in the default mode with `flags`: against the tuning table's BLEU of the same flags, what --half costs."""
    rounded = replace(checkpoint, weights=cast_weights(checkpoint.weights, torch.float16))
    return default_mode_bleu(rounded, pairs, flags)
