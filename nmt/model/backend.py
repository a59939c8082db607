"""What runs a decoder on this machine, decided once.

`machine()` probes what the machine can do, once a process: the CPU's instruction sets, whether oneDNN computes
in bf16, torch's int8 kernels, and (when first asked) nmt's C library (nmt.model.native). `Backend.resolve`
turns a precision and a device into what every layer below runs: the weights' format, the activations' and the
attention caches' dtypes, the int8 product, the C kernels and the fused layer stacks, or torch alone.

    backend = Backend.resolve("auto", resolve_device("auto"))  # e.g. int8_fp32, int8 rows of 8 bits, C kernels
    model = cast_for_inference(model, backend)                  # nmt.decoding.inference
    decoder = FlatDecoder(model, backend)                       # nmt.model.flat_decoder

nmt.decoding.configuration resolves it from the command's flags into DecodingConfig.backend; nothing below asks
the machine again or tells the mode from a module's class or a tensor's dtype.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from nmt.errors import UsageError
from nmt.model import PRECISIONS  # one list for the library and the command line
from nmt.model.machine import Machine, machine

log = logging.getLogger("nmt")

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.float32,
          "int8_bf16": torch.bfloat16, "int8_fp32": torch.float32}


# What `--precision auto` picks on a CPU, by the first of these instruction sets its flags name: of the modes
# that translate a line the same whatever lines share its batch (docs/USAGE.md promises it), the one measured
# fastest on each kind. With AMX (Intel Xeon, issue 65, 300 held-out captions batched against alone): bf16 0
# lines differ, int8_fp32 0, int8_bf16 12 of 300 (its activations share one bf16 scale per call), and bf16
# was the fastest in-process (3,369 target tokens/s at beam 4, batch 32, against 2,835 for int8_bf16 with the
# shortlist); with AVX-512 BF16 alone (AMD Zen 4) and with AVX2, int8_fp32 (benchmarks/MACHINES.md).
AUTO_PRECISION_BY_CPU = (("amx_bf16", "bf16"), ("avx512_bf16", "int8_fp32"), ("avx2", "int8_fp32"))


@dataclass(frozen=True)
class Backend:
    """A precision on a device, resolved (Backend.resolve): what runs the model's layers at inference."""

    device: torch.device
    precision: str  # one of PRECISIONS but auto
    kernels: bool  # nmt's C kernels may run (a CPU with them built; False with --exact: torch alone)
    int8_rows: int = 0  # int8_fp32's product: each row of activations on its own scale, to 8 bits (VNNI) or 7; 0 else

    @classmethod
    def resolve(cls, precision: str, device: torch.device, exact: bool = False) -> Backend:
        """`precision` (auto: auto_precision's choice) on `device`; UsageError for a precision the device cannot
        run. exact: torch's operations alone, never the C kernels."""
        if precision not in PRECISIONS:
            raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        kernels = device.type == "cpu" and not exact and native_library_loads()
        if precision == "auto":
            precision = auto_precision(device, kernels)
            log.debug("--precision auto: %s", precision)
        if precision == "fp16" and device.type != "cuda":
            raise UsageError("--precision fp16 needs a CUDA device; use bf16 on CPU")
        if precision.startswith("int8") and device.type != "cpu":
            raise UsageError(f"--precision {precision} is for CPUs; use fp16 or bf16 on CUDA")
        found = machine()
        if precision in ("bf16", "int8_bf16") and device.type == "cpu" and not found.onednn_bf16:
            log.warning("this CPU has no bf16 arithmetic (AVX-512 BF16 or AMX): --precision %s is emulated and slower "
                        "than fp32 here; --precision int8_fp32 is the fast mode on such CPUs", precision)
        if precision == "int8_fp32" and not (kernels or found.int_mm):
            raise UsageError("--precision int8_fp32 needs nmt's C kernels or torch's int8 products on this CPU; "
                             "use fp32")
        rows = int8_rows(found, kernels) if precision == "int8_fp32" else 0
        return cls(device=device, precision=precision, kernels=kernels, int8_rows=rows)

    @property
    def dtype(self) -> torch.dtype:
        """The activations' dtype (int8 modes: of what the int8 products take and give)."""
        return DTYPES[self.precision]

    @property
    def bf16_caches(self) -> bool:
        """The flat decoder keeps its attention caches in bf16 and attends over them with the C kernels: on a CPU
        in reduced precision (bf16 activations, or int8_fp32's int8 products). fp32 keeps float32 caches."""
        return self.kernels and self.precision in ("bf16", "int8_bf16", "int8_fp32")

    @property
    def fused_layers(self) -> bool:
        """int8_fp32 runs each step's layers in one C call (nmt.model.native's decode_layers, encode_layers)."""
        return self.kernels and self.precision == "int8_fp32"

    def describe(self) -> str:
        """e.g. "int8_fp32 on cpu (8-bit rows, C kernels)", for --verbose and /health."""
        details = []
        if self.precision == "int8_fp32":
            details.append(f"{self.int8_rows}-bit rows")
        if self.device.type == "cpu":
            details.append("C kernels" if self.kernels else "torch alone")
        return f"{self.precision} on {self.device}" + (f" ({', '.join(details)})" if details else "")


def auto_precision(device: torch.device, kernels: bool) -> str:
    """The fastest mode measured for this kind of device, as CTranslate2's compute_type "auto" picks one:
    fp16 on CUDA; on a CPU, by AUTO_PRECISION_BY_CPU. int8_fp32 needs nmt's C kernels (`kernels`) or VNNI
    (torch's int8 products, which are slow without it). A CPU it does not name falls back to bf16 where oneDNN
    finds bf16 arithmetic, else int8_fp32 where it runs, else fp32: never int8_bf16, whose translations change
    with the lines batched beside them."""
    if device.type == "cuda":
        return "fp16"
    found = machine()
    int8_runs = kernels or (found.vnni and found.int_mm)
    for flag, mode in AUTO_PRECISION_BY_CPU:
        if flag in found.flags and (mode != "int8_fp32" or int8_runs):
            return mode
    if found.onednn_bf16:
        return "bf16"
    return "int8_fp32" if int8_runs else "fp32"


def int8_rows(found: Machine, kernels: bool) -> int:
    """The bits of int8_fp32's rows on this machine: 8 with VNNI, where the C build has its VNNI products (or,
    without the kernels, torch._int_mm computes them); else 7, whose AVX2 pair sums cannot saturate."""
    if not found.vnni:
        return 7
    if not kernels:
        return 8
    from nmt.model.native import library, products_built

    return 8 if products_built(library(), 8) else 7


def native_library_loads() -> bool:
    """Whether nmt's C library is built (or builds now) and loads (nmt.model.native.library)."""
    from nmt.model.native import library

    return library() is not None


def resolve_device(name: str) -> torch.device:
    """The device --device names: auto (CUDA where there is one), cpu or cuda; UsageError for another or a CUDA
    that is not there."""
    if name not in ("auto", "cpu", "cuda"):
        raise UsageError(f"--device must be auto, cpu or cuda, not {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda asked for, but no CUDA device is available")
    return torch.device(name)
