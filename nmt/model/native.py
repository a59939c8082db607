"""nmt's C library: its build, its trust and its loading. The kernels for the CPU decoder's attention over bf16
caches (and its shortlist logits and int8 products) and for a CPU training step's dropout and loss, compiled on
first use; nmt.model.native_ops gives them to torch code.

In a batched beam search on a CPU, a step's self-attention reads every cached key and value once, and
that read bounds it: in float32, torch's batched products read the caches at about the speed of a copy
(torch's bf16 products go through oneDNN, which builds a kernel for every new cached length). Where the
model's activations are bf16 (`--precision bf16` and `int8_bf16`), the keys and values already are bf16;
in `int8_fp32` they are rounded to bf16 as they are cached. The flat decoder keeps them so in these modes
(half the bytes to read, and to move in beam reorders) and computes attention over them here.

The kernels are one small C library, `kernels/`: one header, `nmt_kernels.h`, declares every function the
library exports (the rest is hidden), and the files hold them by subject (attention.c, scores.c, shortlist.c,
int8.c, layers.c); SIGNATURES binds the header's prototypes (a test compares them).

`decode_self_attention` streams the self-attention cache in memory order, 16 rows at a time (8 with AVX2);
`decode_cross_attention` reads each sentence's encoder keys and values once for all of its beams, up to the
sentence's own length (so it needs sources padded at the end);
`decode_log_softmax` turns a step's logits into log-probabilities one row at a time;
`decode_sentence_logits` scores each sentence's own shortlist tokens (nmt.model.shortlist) after the shared
ones, reading each sentence's output weights once for its beams. `int8_linear` is int8_fp32's one product
(nmt.model.quantize): rows quantized on their own scales, to 8 bits multiplied by `int8_rows_products` (AVX-512
VNNI) or to 7 bits by `int7_rows_products` (AVX2), exact int32 sums, scaled back.
`decode_layers` and `encode_layers` run every decoder (or encoder) layer of an int8_fp32 step in one call
(at batch 1 a decoder step was some hundred small operations, whose calls from Python cost more than
their work), over the same kernels and `decode_layer_norm`. What they gain on AVX-512 and AVX2 CPUs is
in `benchmarks/EXPERIMENTS.md` (over float32 caches they gained nothing: the bytes read are what they
save). The decoding kernels run on the calling thread: translation on a CPU decodes in one-thread worker
processes by default (`--workers`).

Training (`nmt train` on a CPU): `train_dropout` (nmt.model.transformer.Dropout) keeps or drops each unit by a
hash of its index and a seed, so backward draws the mask again instead of keeping it; `train_cross_entropy`
(nmt.model.loss) gives a chunk's loss and gradient in three passes a row. Both split their work over torch's
threads (`in_parts`; ctypes lets go of the GIL). benchmarks/TRAINING.md has what they gain.

The kernels are compiled with the system's C compiler into the user's cache folder (`$XDG_CACHE_HOME/nmt`,
else `~/.cache/nmt`), once per version of the files, compiler flags and CPU; `make setup` does it ahead. They
are for CPUs with AVX-512 or AVX2 (nmt.model.machine's `Machine.vector_units`). Elsewhere, without a compiler,
with `NMT_NATIVE=0`, or where compiling fails, `library()` is None and the decoder keeps its float32 caches and
torch's products.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

import torch

from nmt.model.machine import cpu_flags_line, machine

log = logging.getLogger(__name__)

KERNELS = Path(__file__).with_name("kernels")  # the C library: nmt_kernels.h, its files by subject
HEADER = KERNELS / "nmt_kernels.h"
# -march=native: the vector width of this CPU (AVX-512 where it has it); a compiler without it (or a CPU
# it does not know) gets the second set, AVX2, which every CPU with Machine.vector_units runs
FLAG_SETS = (["-O3", "-march=native", "-mprefer-vector-width=512"], ["-O3", "-mavx2", "-mfma"])
# every build: the library exports what nmt_kernels.h declares and nothing else
COMMON_FLAGS = ["-fvisibility=hidden", "-shared", "-fPIC", "-Wall", "-Wextra"]  # no warning on gcc (tested)
HEAD_DIM_STEP = 16  # the kernel's vectors: head dimensions that are a multiple of it
QUERY_DTYPES = (torch.bfloat16, torch.float32)


def cpu_signature() -> str:
    """What the compiled code depends on: the machine and its instruction-set flags (a cache folder shared
    between machines must not hand one CPU's build to another)."""
    return f"{platform.machine()} {cpu_flags_line() or platform.processor()}"


def cache_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nmt"


def c_compiler() -> str:
    """$CC, else the compiler Python was built with, else cc (the command alone, without its flags)."""
    return (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]


def compiler_identity(path: str) -> bytes:
    """The compiler binary (its real path, size and modification time): another compiler, or the same one
    upgraded, builds anew."""
    real = os.path.realpath(path)
    info = os.stat(real)
    return f"{real} {info.st_size} {info.st_mtime_ns}".encode()


def private_folder(folder: Path) -> bool:
    """Make `folder` (created if missing) readable and writable by this user alone; False when it belongs to
    another user, whose code this process must not load."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid():
        log.warning("%s belongs to another user: the attention kernels are not loaded from it", folder)
        return False
    if info.st_mode & 0o077:
        folder.chmod(0o700)
    return True


def trusted(library_path: Path) -> bool:
    """The library is this user's, writable by no one else, and holds the bytes its build recorded beside it
    (LIB.sha256): a file changed after the build, by hand or by damage, is not loaded."""
    try:
        info = library_path.stat()
        recorded = library_path.with_suffix(".sha256").read_text().strip()
        actual = hashlib.sha256(library_path.read_bytes()).hexdigest()
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & 0o022 and recorded == actual


def compile_library() -> Path | None:
    """The compiled kernels' path, compiling them if this CPU has no trusted build yet; None if they cannot be
    built. The cache folder is private to the user (mode 0700), and every load checks the build's
    checksum (`trusted`)."""
    compiler = shutil.which(c_compiler())
    if compiler is None:
        log.debug("no C compiler (%s): the decoder keeps float32 attention caches", c_compiler())
        return None
    files = sources()
    source = b"\0".join(path.name.encode() + b"\0" + path.read_bytes() for path in files)
    for flags in FLAG_SETS:
        try:
            key = hashlib.sha256(b"\0".join([source, " ".join(flags).encode(), cpu_signature().encode(),
                                             compiler_identity(compiler)])).hexdigest()
            target = cache_folder() / f"attention-{key[:16]}.so"  # RuntimeError: no home folder
            if not private_folder(target.parent):
                return None
            if trusted(target):
                return target
            with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
                built = Path(scratch) / target.name
                subprocess.run([compiler, *flags, *COMMON_FLAGS, "-o", str(built),
                                *(str(path) for path in files if path.suffix == ".c"), "-lm"],
                               check=True, capture_output=True, timeout=120)
                built.chmod(0o700)
                digest = Path(scratch) / "digest"
                digest.write_text(hashlib.sha256(built.read_bytes()).hexdigest() + "\n")
                # atomic: processes building at once each rename a whole library, then its checksum; one that
                # reads a library and another's checksum between the two renames rebuilds
                os.replace(built, target)
                os.replace(digest, target.with_suffix(".sha256"))
            return target
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            log.debug("compiling %s with %s failed: %s", KERNELS, flags, exc)
    return None


@functools.cache
def library() -> ctypes.CDLL | None:
    """The compiled kernels, or None where they are unavailable (module docstring)."""
    if os.environ.get("NMT_NATIVE", "1") == "0" or not machine().vector_units:
        return None
    path = compile_library()
    if path is None:
        return None
    try:
        loaded = ctypes.CDLL(str(path))
        for name, (result, arguments) in SIGNATURES.items():
            function = getattr(loaded, name)
            function.restype, function.argtypes = result, arguments
    except (OSError, AttributeError) as exc:
        log.debug("loading %s failed: %s", path, exc)
        return None
    return loaded


def sources() -> list[Path]:
    """The library's files (headers and C), in a fixed order."""
    return sorted(path for path in KERNELS.iterdir() if path.suffix in (".c", ".h"))


_P, _I64, _I32, _F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_float
# Each function of nmt_kernels.h: its result (None: void) and its arguments, every pointer a c_void_p. Written
# by hand from the header; tests/test_native.py parses the header and compares.
SIGNATURES = {
    "decode_self_attention": (_I32, [_P] * 4 + [_I64] * 3 + [_F, _I32]),  # 1: no memory
    "decode_cross_attention": (_I32, [_P] * 5 + [_I64] * 5 + [_F, _I32]),  # 1: no memory
    "decode_log_softmax": (None, [_P] * 2 + [_I64] * 2 + [_I32]),
    "decode_log_softmax_rest": (_I32, [_P] * 2 + [_I64] + [_P] * 2 + [_I64] + [_P] + [_I64] * 3),  # 2: bad owner
    "decode_beam_top_k": (_I32, [_P] * 4 + [_I64] * 4),  # 1: k outside 1-64 or above the candidates
    "decode_best": (None, [_P] * 3 + [_I64] * 2),
    "decode_sentence_logits": (_I32, [_P] * 4 + [_I64] + [_P] * 3 + [_I64] + [_P] * 2 + [_I64] * 5 + [_I32]),
    "decode_sentence_logits_int7": (_I32, [_P] * 5 + [_I64] + [_P] * 3 + [_I64] + [_P] * 2 + [_I64] * 5),
    "int8_linear": (_I32, [_P] * 5 + [_I64] * 3 + [_I32] * 2),  # 1: no products of these bits, 2: no memory
    "int8_rows_products": (_I32, [_P] * 3 + [_I64] * 3),  # 1: a build without VNNI (or K % 4), 2: no memory
    "int7_rows_products": (_I32, [_P] * 3 + [_I64] * 3),  # 1: a build without AVX2 (or K % 4), 2: no memory
    "decode_layer_norm": (None, [_P] * 4 + [_I64] * 2 + [_F]),
    "decode_layers": (_I32, [_P] * 2 + [_I64] + [_P] + [_I64] + [_P] * 2 + [_I64] * 6 + [_F] * 2 + [_I32] * 2),
    "encode_layers": (_I32, [_P] * 2 + [_I64] * 6 + [_F] * 2 + [_I32] * 2),  # 1: no products, 2: no memory
    "train_dropout": (None, [_P] * 2 + [_I64] * 2 + [_P, _I32, _F, _I32]),
    "train_cross_entropy": (_I32, [_P] * 4 + [_I64] * 3 + [_F, _I32]),  # 2: a target outside the vocabulary
}


def products_built(loaded: ctypes.CDLL | None, bits: int) -> bool:
    """Whether this build multiplies rows of `bits` (7: int7_rows_products, AVX2; 8: int8_rows_products, AVX-512
    VNNI): each returns 1 on a build without its instructions, which a one-row product shows."""
    if loaded is None:
        return False
    rows, weights = torch.zeros(1, 4, dtype=torch.int8), torch.zeros(64, dtype=torch.uint8)  # held: the call writes
    out = torch.zeros(1, 1, dtype=torch.int32)
    probe = loaded.int7_rows_products if bits == 7 else loaded.int8_rows_products
    return probe(rows.data_ptr(), weights.data_ptr(), out.data_ptr(), 1, 1, 4) == 0
