# Sourced by the device-call scripts (gpu_check.sh, gpu_phase.sh), from the repository root: nmt runnable on the
# lent machine, which has torch with CUDA but neither nmt's own dependencies nor an installed nmt. Wheels it
# lacks (sentencex) travel in .whl/ (ignored; carry it); `python3 -m nmt_cli.main` runs the CLI from the tree.
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
fi
ln -sfn cli nmt_cli  # the package name the CLI runs as (pyproject's package-dir), without installing
export PYTHONPATH=$PWD:$PWD/benchmarks:${PYTHONPATH:-} NMT_DATA_DIR=$PWD/data PYTHONUNBUFFERED=1
