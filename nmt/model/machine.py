"""What this machine can do, probed once a process: the CPU's instruction-set flags, oneDNN's bf16, torch._int_mm.
A leaf: nmt.model.backend decides the precision from it, nmt.model.native which C build to make."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Machine:
    """What this machine can do (machine(): probed once)."""

    flags: frozenset[str]  # the CPU's instruction-set flags as Linux lists them (empty elsewhere)
    onednn_bf16: bool  # oneDNN (torch's mkldnn) is built in and finds bf16 arithmetic
    int_mm: bool  # torch._int_mm runs on the CPU, its int32 sums exact on the extreme values

    @property
    def vnni(self) -> bool:
        """int8 products in one instruction (AVX-512 VNNI, AVX-VNNI)."""
        return bool({"avx512_vnni", "avx_vnni"} & self.flags)

    @property
    def vector_units(self) -> bool:
        """The vectors nmt's C kernels are written for: AVX-512 (16 floats) or AVX2 with FMA (8 floats)."""
        return "avx512f" in self.flags or {"avx2", "fma"} <= self.flags


@functools.cache
def machine() -> Machine:
    """This machine's Machine, probed on first use."""
    return Machine(flags=frozenset(cpu_flags()), onednn_bf16=onednn_bf16(), int_mm=int_mm_exact())


@functools.cache
def cpu_flags_line() -> str:
    """The instruction-set line of /proc/cpuinfo as written (x86's "flags", Arm's "Features"), read once a
    process; "" where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next((line.rstrip("\n") for line in info if line.startswith(("flags", "Features"))), "")
    except OSError:
        return ""


def cpu_flags() -> set[str]:
    return set(cpu_flags_line().partition(":")[2].split())


def onednn_bf16() -> bool:
    try:
        return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def int_mm_exact() -> bool:
    try:
        extreme = torch.tensor([[127, -127] * 32, [-127, 127] * 32], dtype=torch.int8)
        exact = extreme.int() @ extreme.int().t()
        return bool(torch.equal(torch._int_mm(extreme, extreme.t().contiguous()), exact))
    except RuntimeError:  # a torch without _int_mm on CPU
        return False
