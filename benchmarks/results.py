"""benchmarks/RESULTS.md is made of sections, one per benchmark script; each run rewrites its own."""

from __future__ import annotations

import datetime
import hashlib
import platform
import sys
from pathlib import Path

from nmt.apps.shipped import is_model_name, model_path
from nmt.decoding.configuration import DecodingFlags, search_options
from nmt.decoding.search import SearchOptions
from nmt.model.machine import machine

RESULTS = Path(__file__).parent / "RESULTS.md"
ROOT = Path(__file__).resolve().parent.parent


def shown_path(path: str | Path) -> str:
    """A path as a table shows it: relative to the checkout, else the file's name (no machine's own paths)."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(ROOT))
    except ValueError:
        return resolved.name


def model_file(model: str | None) -> str:
    """A benchmark's --model as a file: a path as given, a shipped model's name, or None for the default
    shipped model (data/models/models.json), the one `nmt translate` uses with no --model."""
    return str(model_path(model)) if model is None or is_model_name(model) else model


def provenance(model: str | Path | None) -> str:
    """When, by which command and on which model file a table was made."""
    command = " ".join(["python", shown_path(sys.argv[0]), *sys.argv[1:]])
    text = f"Run {datetime.date.today().isoformat()}: `{command}`"
    if model is not None:
        digest = hashlib.sha256(Path(model).read_bytes()).hexdigest()[:12]
        text += f"; model `{shown_path(model)}`, SHA-256 {digest}"
    return text + "."


def write_section(title: str, lines: list[str], model: str | Path | None = None) -> None:
    """Replace (or append) the section headed `## {title}` with the run's provenance and `lines`; `model`:
    the checkpoint the table measured, if any."""
    previous = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
    section = "\n".join([f"## {title}", "", provenance(model), "", *lines]) + "\n"
    start = previous.find(f"## {title}")
    if start < 0:
        RESULTS.write_text(previous.rstrip("\n") + "\n\n" + section)
    else:  # in place, so that a rerun changes only its own lines
        end = previous.find("\n## ", start + 1)
        following = "\n" + previous[end + 1 :] if end >= 0 else ""
        RESULTS.write_text(previous[:start] + section + following)
    print(f"written to {RESULTS}")


def translate_options(checkpoint, beam: int | None = None) -> SearchOptions:
    """The decoding options `nmt translate --beam BEAM` uses with no other flag: the checkpoint's stored length
    penalty and caps, else the library's (beam None: the checkpoint's or the library's beam too)."""
    return search_options(checkpoint, DecodingFlags(beam=beam))


def cpu_info(field: str) -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def vector_extensions() -> str:
    """The widest vector arithmetic of this CPU, which decides the fastest precision: with AVX-512 BF16 (or
    AMX) bf16 GEMMs run at about 2.5x float32; with AVX2 alone bf16 is emulated, slower than float32."""
    flags = machine().flags
    if "amx_bf16" in flags:
        return "AMX"
    if "avx512_bf16" in flags:
        return "AVX-512 BF16"
    if "avx512f" in flags:
        return "AVX-512"
    return "AVX2" if "avx2" in flags else "no AVX2"


def cpu_name() -> str:
    """The model name, with the CPU family and model numbers where the name alone does not tell the
    generation (VMs report Zen 1 and Zen 3 EPYCs alike as "AMD EPYC": family 23 and 25)."""
    family, model = cpu_info("cpu family"), cpu_info("model\t")
    generation = f"; family {family}, model {model}" if family and model else ""
    return f"{cpu_info('model name') or platform.processor() or 'unknown CPU'} ({vector_extensions()}{generation})"


def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (as nmt itself decides, for its warning and for
    --precision auto; True when it cannot tell); without it nmt's bf16 modes, and torchao's int8
    (torch._int_mm), run far slower than float32 (a 2-core AVX2 EPYC, beam 4, batch 32, whole process:
    int8_bf16 4.9x the time of fp32, torchao's int8 15x)."""
    return machine().onednn_bf16


# The modes that only pay on a CPU with native bf16 (native_bf16): elsewhere the benchmarks leave them out
NATIVE_BF16_MODES = ("bf16", "int8_bf16", "int8")


def modes_left_out(modes) -> list[str]:
    """Those of nmt's precision `modes` that this CPU runs far slower than fp32: the benchmarks skip them."""
    return [] if native_bf16() else [mode for mode in dict.fromkeys(modes) if mode in NATIVE_BF16_MODES]


def left_out_note(left_out: list[str]) -> str:
    """The sentence a table's header gives to the modes modes_left_out skipped (empty if none)."""
    if not left_out:
        return ""
    return (f" Not run: nmt {', '.join(left_out)}, which this CPU computes in emulated bf16 or through slow int8 "
            "GEMMs (on a 2-core AVX2 EPYC, beam 4, batch 32, whole process: int8_bf16 took 4.9x the time of fp32, "
            "torchao's int8 15x).")


def ct2_threads_slowdown(one_worker: float | None, two_workers: float | None) -> float | None:
    """How many times slower CTranslate2 ran on both threads of one worker (intra_threads=2, the ratios'
    reference) than on two one-thread workers, given both tok/s, where it is 2x or more: as on a 2-vCPU KVM
    guest with AMX, where its OpenMP threads synchronize slowly (benchmarks/EXPERIMENTS.md). There the
    ratios to the 2-worker runs are the fair comparison. None otherwise."""
    if not one_worker or not two_workers or two_workers < 2 * one_worker:
        return None
    return two_workers / one_worker


def ct2_threads_note(slowdowns: str) -> str:
    """The warning under a table where ct2_threads_slowdown found CTranslate2's one-worker runs slow; slowdowns:
    how much slower, and where."""
    return (f"On this machine CTranslate2 float32 with intra_threads=2 ran far slower than with 2 workers of one "
            f"thread each ({slowdowns}): the ratios to its 2-worker runs are the fair comparison here.")


def decoding(checkpoint, options, precision: str = "fp32", device: str = "cpu", **fields):
    """The DecodingConfig of Translator.from_checkpoint for a benchmark: `precision` on `device`, `options` as the
    search, the whole vocabulary and one worker unless `fields` say otherwise (shortlist, workers, batch_size,
    ...)."""
    import dataclasses

    from nmt.decoding.configuration import DecodingConfig, DecodingFlags

    config = DecodingConfig.resolve(DecodingFlags(device=device, precision=precision), checkpoint, workers=1)
    return dataclasses.replace(config, search=options, **{"shortlist": False, **fields})
