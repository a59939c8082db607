#!/usr/bin/env bash
# A lent GPU's checks in one call of the device tool, from the repository root (its machine has torch with CUDA
# and transformers, not nmt's own dependencies nor an installed nmt):
#
#   bash benchmarks/gpu_check.sh        # $OUT: profile/ (report.md, traces), train.log, train-report.md
#   DECODE=1 bash benchmarks/gpu_check.sh   # and the CUDA decoding benchmark after them (decode.log, RESULTS.md)
#
# Wheels nmt needs that the machine lacks (sentencex) travel in .whl/ (gpu_env.sh). The tree travels at most
# 64 MiB: move data/runs/*.pt out of it for the call. Each part has its own time limit, so that a part that runs
# long leaves the others their figures (issue 81's order): the profile of one WMT-shaped step
# (benchmarks/train_profile.py), the training step eager, compiled, and compiled over static shapes (CUDA graphs)
# against torch.nn.Transformer (benchmarks/gpu_train.py part 1), then, asked for, decoding (benchmarks/gpu.py).
# About 8 minutes on an H200.
set -u
OUT=${OUT:-/tmp/gpu-check}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$OUT/nvidia-smi.txt" 2>&1
lscpu | grep -m1 "Model name" >>"$OUT/nvidia-smi.txt" 2>&1
git rev-parse HEAD >>"$OUT/nvidia-smi.txt" 2>&1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
    >>"$OUT/nvidia-smi.txt" 2>&1

timeout "${PROFILE_SECONDS:-150}" python3 benchmarks/train_profile.py --out "$OUT/profile" >"$OUT/profile.log" 2>&1
echo "train_profile.py exit $?" >>"$OUT/profile.log"

timeout "${TRAIN_SECONDS:-330}" python3 benchmarks/gpu_train.py --parts 1 --steps 12 --out /tmp/gpu-train \
    >"$OUT/train.log" 2>&1
echo "gpu_train.py exit $?" >>"$OUT/train.log"
cp /tmp/gpu-train/report.md "$OUT/train-report.md" 2>/dev/null

if [ "${DECODE:-0}" = 1 ]; then
    timeout "${DECODE_SECONDS:-200}" python3 benchmarks/gpu.py --sentences "${SENTENCES:-300}" --repeats 2 \
        >"$OUT/decode.log" 2>&1
    echo "gpu.py exit $?" >>"$OUT/decode.log"
    cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
fi
exit 0
