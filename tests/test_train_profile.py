"""benchmarks/train_profile.py, the profile a GPU session runs first: its kernel groups, its busy time, and the
whole script on the CPU at tiny sizes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from train_profile import busy_time, group_of  # noqa: E402


@pytest.mark.parametrize("name, group", [
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>", "matrix products"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "matrix products"),
    ("nvjet_tst_192x192_64x3_2x1_v_bz_coopB_TNT", "matrix products"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t>>", "attention"),
    ("fmha_cutlassB_bf16_aligned_64x64_k64_sm80", "attention"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, LogSoftMaxForwardEpilogue>",
     "loss (log-softmax, cross-entropy)"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>",
     "optimizer (Adam, gradient scaling, norm)"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>",
     "elementwise and reductions"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float>>",
     "elementwise and reductions"),
    ("Memcpy HtoD (Pinned -> Device)", "copies and fills"),
])
def test_kernels_fall_in_their_groups(name, group):
    assert group_of(name) == group


def test_busy_time_counts_overlapping_kernels_once():
    assert busy_time([(0, 10), (5, 15), (20, 25), (21, 22)]) == 20
    assert busy_time([]) == 0


@pytest.mark.slow
def test_the_profile_runs_on_the_cpu_at_tiny_sizes(tmp_path):
    result = subprocess.run([sys.executable, str(BENCHMARKS / "train_profile.py"), "--smoke", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    report = (tmp_path / "report.md").read_text()
    rows = {line.split(" | ")[0].strip("| "): line for line in report.splitlines() if line.startswith("| ")}
    assert "matrix products" in rows and "target tokens/s" in rows
    assert all(float(cell.split()[0].replace(",", "")) > 0 for cell in rows["target tokens/s"].split(" | ")[1:])
    assert (tmp_path / "trace-400.json.gz").stat().st_size > 0 and (tmp_path / "trace-800.json.gz").exists()
