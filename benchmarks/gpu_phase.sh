#!/usr/bin/env bash
# The general model trained on for a few minutes on a lent GPU, in one call of the device tool, and scored there
# against the weights it started from (issue 62; benchmarks/GENERAL.md section 5):
#
#   bash benchmarks/gpu_phase.sh     # $OUT: train.log, scores.jsonl, ema.fp16.pt.part-aa/-ab (fp16 weights)
#
# What travels in .gpu/ (ignored; carry it, and move data/models/*.pt and data/runs/*.pt out of the tree for the
# call, 64 MiB at most): start.pt (the run's moving average in fp16), spm.model, valid.en/.fr, and europarl/
# with dev.en.gz, dev.fr.gz and a sample of Europarl's training pairs as train.en.xz, train.fr.xz (every fifth
# pair: the whole corpus is 200 MB). The embedded corpora keep about the run's proportions against a fifth of
# Europarl. sentencex travels as a wheel in .whl/ (gpu_env.sh). On a CPU, with DEVICE=cpu and small MINUTES and
# LIMIT, it checks the steps.
set -u
OUT=${OUT:-/tmp/gpu-phase}
G=${G:-.gpu}
RUN=${RUN:-/tmp/gpu-phase-run}
DEVICE=${DEVICE:-cuda}
source benchmarks/gpu_env.sh
export NMT_CACHE_DIR=${NMT_CACHE_DIR:-/tmp/nmt-cache}
export NMT_EUROPARL_DIR=$(realpath "$G/europarl")
nmt="python3 -m nmt_cli.main"
python3 -c "
import lzma, shutil
for side in ('en', 'fr'):
    with lzma.open('$G/europarl/train.' + side + '.xz') as packed, open('$G/europarl/train.' + side, 'wb') as plain:
        shutil.copyfileobj(packed, plain)
" || exit 1

timeout "${TRAIN_SECONDS:-330}" $nmt train --data "${DATA:-tatoeba*2,multi30k,news-commentary,software-ui,news*2}" \
    --src-file "$G/europarl/train.en" --tgt-file "$G/europarl/train.fr" --augment --augment-swap 0.25 \
    --spm "$G/spm.model" --init-from "$G/start.pt" --valid-src "$G/valid.en" --valid-tgt "$G/valid.fr" \
    --valid-bleu-lines 300 --preset small --precision "${PRECISION:-bf16}" --max-minutes "${MINUTES:-2.5}" \
    --decay linear --warmup 100 --lr "${LR:-4e-4}" --ema 0.999 --max-tokens "${MAX_TOKENS:-32768}" \
    --prepare-workers "${WORKERS:-14}" --valid-every 1000000 --log-every 100 --out "$RUN" >"$OUT/train.log" 2>&1
echo "train exit $?" >>"$OUT/train.log"
$nmt average "$RUN/last.pt" --ema --output "$RUN/ema.pt" >>"$OUT/train.log" 2>&1 || exit 1

python3 -c "
from nmt.model.checkpoint import load_checkpoint
from nmt.training.tune import write_release
write_release(load_checkpoint('$RUN/ema.pt'), {}, '$RUN/ema.fp16.pt', half=True)
" >>"$OUT/train.log" 2>&1
# the weights first: a call cut short by its time limit still brings them back
split -b 12M "$RUN/ema.fp16.pt" "$OUT/ema.fp16.pt.part-"

# the same decoding for both (beam 4, length penalty 1.0, no shortlist, fp32), on the same device
for test in news:dev europarl:dev tatoeba:dev news-commentary:dev_newsdiscuss; do
    for model in "$RUN/ema.pt" "$G/start.pt"; do
        $nmt eval --model "$model" --test "$test" --device "$DEVICE" --precision fp32 --beam 4 --lenpen 1.0 \
            ${LIMIT:+--limit $LIMIT} --format jsonl 2>>"$OUT/train.log" \
            | python3 -c "import json, sys; print(json.dumps({'model': '$model', **json.load(sys.stdin)}))" \
            >>"$OUT/scores.jsonl"
    done
done

exit 0
