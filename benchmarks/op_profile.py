"""Where decoding time goes, nmt against CTranslate2 on the same weights: `perf` samples of each engine's
translation, grouped by operation (matrix products, attention, softmax and top-k, quantization, copies and
gathers, Python, ...).

    python benchmarks/op_profile.py [--model M] [--beam 4] [--batch 32] [--sentences 500]

Each engine runs in a process of its own on one thread (nmt: `--threads 1 --workers 1` and its defaults
otherwise; CTranslate2: int8, intra_threads=1), under `perf record -e cpu-clock` started disabled: the
process turns sampling on through perf's control fifo once its model is loaded and warmed up, and off when
the timed translation ends, so imports, loading and the first call's set-up are not in the profile. Each
sample counts for the function it was taken in (the leaf), put in a group by its library and name
(GROUPS); both engines are sampled and grouped the same way. Code generated at run time (fbgemm's, oneDNN's
and MKL's GEMM kernels) has no symbol: it counts as products. Needs Linux `perf` (Debian: linux-perf) and
permission to sample (root, or kernel.perf_event_paranoid at most 2). Rewrites its section of
benchmarks/RESULTS.md. Never run it while something else loads the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

# (group, library pattern or None, function-name pattern or None): a sample goes to the first group whose
# patterns all match its library (file name) and function; the order matters
GROUPS = (
    ("Python interpreter (ctypes calls included)", r"^libpython|^python|^_ctypes|^array\.", None),
    ("kernel (page faults, scheduling)", r"^\[kernel", None),
    ("OpenMP threads (waiting)", r"^libgomp|^libiomp", None),
    ("C++ exceptions thrown and caught", r"^libgcc_s", None),
    ("C++ exceptions thrown and caught", None, r"_Unwind|__cxa_throw|_dl_find_object"),
    ("matrix products", r"^\[JIT\]|^\[unknown\]|^//anon|^perf-\d+\.map", None),  # run-time generated GEMM kernels
    ("quantization of activations", None, r"[Qq]uantiz|FindMinMax|requantize|dequant|::round"),
    ("matrix products", None, r"gemm|gemv|GEMM|Gemm|PackMatrix|PackBMatrix|PackA|pack_unpack|brgemm|dnnl|mkl_blas|"
                              r"cblas|_int_mm|mm_kernel|matmul|int8_rows|vnni|dot_product|Dense::|"
                              r"few_rows_products|rows_products|rows_linear|sentence_logits"),  # nmt's C products
    # nmt's int8_fp32 layers in one C call: their attention, layer norms, residuals and bf16 cache writes,
    # which the compiler inlines into decode_layers and encode_layers (their products are int7_rows_products)
    ("attention, norms and residuals inlined in nmt's layers call", None, r"^decode_layers|^encode_layers"),
    ("attention (the softmax of its scores included)", None, r"attention|Attention"),
    ("softmax, log-softmax, top-k", None, r"softmax|SoftMax|Softmax|topk|TopK|top_k|introselect|sort|logsumexp|"
                                          r"argmax|reduce|Reduce|max_kernel|sum_kernel|std::max"),
    ("beam search bookkeeping", None, r"BeamSearch|[Bb]eam|GreedySearch|Sampler"),
    ("layer norm", None, r"layer_norm|LayerNorm|RowwiseMoments|rms_norm"),
    ("copies, gathers, allocation", None, r"memmove|memcpy|memset|malloc|free|_int_|alloc|Alloc|copy|Copy|cat_|"
                                          r"index|gather|Gather|scatter|Concat|Split|[Tt]ranspose|fill|Fill|"
                                          r"clear_page|resize|empty|unlink_chunk"),
    ("elementwise and other small kernels", None, r"Vectorized|binary|unary|add|Add|mul|Mul|relu|ReLU|gelu|GELU|"
                                                  r"vml|exp|tanh|at::native::"),
    # what a call costs before and after its kernel: argument parsing, dispatch, tensor objects
    ("operator calls (torch's or CTranslate2's overhead)", r"^libtorch_python|^libc10|^libstdc\+\+", None),
    ("operator calls (torch's or CTranslate2's overhead)", None, r"c10::|at::|torch::|pybind11|THP|ctranslate2::"),
)
OTHER = "other"

NMT_CHILD = "nmt"
CT2_CHILD = "ct2"


def group_of(library: str, function: str) -> str:
    for name, library_pattern, function_pattern in GROUPS:
        if library_pattern is not None and not re.search(library_pattern, library):
            continue
        if function_pattern is not None and not re.search(function_pattern, function):
            continue
        return name
    return OTHER


def grouped(perf_data: Path) -> tuple[Counter, Counter]:
    """Samples of a perf.data file per group, and per (library, function) of the samples left in OTHER."""
    report = subprocess.run(["perf", "report", "-i", str(perf_data), "--stdio", "--no-children", "--sort", "dso,sym",
                             "--field-separator", "\t"], capture_output=True, text=True, check=True).stdout
    groups, others = Counter(), Counter()
    for line in report.splitlines():
        if line.startswith("#") or "\t" not in line:
            continue
        share, library, function = (field.strip() for field in line.split("\t")[:3])
        percent = float(share.rstrip("%"))
        function = re.sub(r"^\[[.k]\] ", "", function)
        group = group_of(Path(library).name if library.startswith("/") else library, function)
        groups[group] += percent
        if group == OTHER:
            others[(library, function)] += percent
    return groups, others


class Sampling:
    """The process's side of perf's control fifo (perf record --control fifo:CTL,ACK -D -1)."""

    def __init__(self) -> None:
        self.control, self.ack = os.environ["PERF_CTL_FIFO"], os.environ["PERF_ACK_FIFO"]

    def _send(self, command: str) -> None:
        with open(self.control, "w") as control:
            control.write(command + "\n")
        with open(self.ack) as ack:
            ack.readline()

    def __enter__(self) -> Sampling:
        self._send("enable")
        return self

    def __exit__(self, *exc) -> None:
        self._send("disable")


def nmt_child(model: str, beam: int, batch: int, lines: list[str]) -> tuple[list[str], float]:
    from nmt.decoding.configuration import DecodingConfig, DecodingFlags
    from nmt.decoding.translate import Translator
    from nmt.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(model)
    config = DecodingConfig.resolve(DecodingFlags(beam=beam, batch_size=batch, threads=1, workers=1, device="cpu"),
                                    checkpoint)
    translator = Translator.from_checkpoint(checkpoint, config)
    translator.translate(lines[:batch])  # warm-up: kernels chosen, buffers allocated
    with Sampling():
        started = time.perf_counter()
        out = [translation.text for translation in translator.translate(lines)]
        seconds = time.perf_counter() - started
    return out, seconds


def ct2_child(model: str, beam: int, batch: int, lines: list[str]) -> tuple[list[str], float]:
    import ctranslate2
    import sentencepiece
    from results import translate_options

    from nmt.apps.export import export_ctranslate2
    from nmt.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(model)
    options = translate_options(checkpoint, beam)  # the length penalty nmt translate --beam BEAM uses
    exported = Path(tempfile.mkdtemp()) / "ct2"
    export_ctranslate2(checkpoint, exported)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(exported / "sentencepiece.model"))
    translator = ctranslate2.Translator(str(exported), inter_threads=1, intra_threads=1, compute_type="int8")

    def translate(part: list[str]) -> list[str]:
        results = translator.translate_batch([processor.encode(line, out_type=str) for line in part],
                                             beam_size=beam, max_batch_size=batch, length_penalty=options.lenpen,
                                             max_decoding_length=256)
        return [processor.decode(result.hypotheses[0]) for result in results]

    translate(lines[:batch])
    with Sampling():
        started = time.perf_counter()
        out = translate(lines)
        seconds = time.perf_counter() - started
    shutil.rmtree(exported.parent)
    return out, seconds


def profiled(engine: str, model: str, beam: int, batch: int, source: Path, folder: Path) -> dict:
    """Run one engine's child on the lines of `source` under perf; its output lines, seconds and samples per
    group."""
    control, ack, data = folder / f"{engine}.ctl", folder / f"{engine}.ack", folder / f"{engine}.data"
    for fifo in (control, ack):
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
    command = ["perf", "record", "-e", "cpu-clock", "-F", "2000", "-D", "-1", "--control",
               f"fifo:{control},{ack}", "-o", str(data), "--", sys.executable, __file__, "--child", engine,
               "--model", model, "--beam", str(beam), "--batch", str(batch), "--source", str(source)]
    environment = dict(os.environ, PERF_CTL_FIFO=str(control), PERF_ACK_FIFO=str(ack), OMP_NUM_THREADS="1")
    finished = subprocess.run(command, capture_output=True, text=True, env=environment)
    if finished.returncode != 0:
        raise RuntimeError(f"{engine} under perf failed: {finished.stderr[-800:]}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    result["groups"], result["others"] = grouped(data)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A checkpoint, or a shipped model's name; default the default shipped model.")
    parser.add_argument("--test-set", default="multi30k:test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--keep", help="A folder to keep each engine's perf.data in (perf report -i).")
    parser.add_argument("--child", choices=(NMT_CHILD, CT2_CHILD), help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        lines = Path(args.source).read_text().split("\n")[:-1]
        run = nmt_child if args.child == NMT_CHILD else ct2_child
        out, seconds = run(args.model, args.beam, args.batch, lines)
        print(json.dumps({"out": out, "seconds": seconds}))
        return
    if shutil.which("perf") is None:
        sys.exit("op_profile.py needs Linux perf (Debian: apt install linux-perf)")

    import sacrebleu
    from results import cpu_name, model_file, shown_path, vector_extensions, write_section

    from nmt.data.corpus import parse_test_set
    from nmt.model.checkpoint import load_checkpoint

    model = model_file(args.model)
    test = parse_test_set(args.test_set)
    sources, references = test.source[: args.sentences], test.target[: args.sentences]
    tokenizer = load_checkpoint(model).tokenizer()
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.keep or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        source = folder / "source.txt"
        source.write_text("".join(line + "\n" for line in sources))
        for engine in (NMT_CHILD, CT2_CHILD):
            result = results[engine] = profiled(engine, model, args.beam, args.batch, source, folder)
            tokens = sum(len(ids) for ids in tokenizer.encode_batch(result["out"]))
            result.update(tokens=tokens, bleu=sacrebleu.corpus_bleu(result["out"], [references]).score)
            print(engine, f"{result['seconds']:.2f} s, {tokens} target tokens", flush=True)
    names = {NMT_CHILD: "nmt default", CT2_CHILD: "CTranslate2 int8"}
    order = list(dict.fromkeys([name for name, *_ in GROUPS] + [OTHER]))
    lines = [
        f"Machine: {cpu_name()}, one thread per engine. Model: {shown_path(model)} (CTranslate2: as `nmt export` "
        f"writes it, int8). The first {len(sources)} sentences of {args.test_set}, beam {args.beam}, batch "
        f"{args.batch}, in-process after a warm-up; perf's cpu-clock samples at 2 kHz grouped by the function "
        "each was taken in (benchmarks/op_profile.py's GROUPS). Milliseconds per 1,000 target tokens: the group's "
        "share of the samples times the translation's seconds.",
        "",
        "| operation | " + " | ".join(f"{names[e]} ms / 1k tokens (share)" for e in results) + " |",
        "|---|" + "---|" * len(results),
    ]
    for group in order:
        cells = []
        for result in results.values():
            share = result["groups"].get(group, 0.0) / 100
            cells.append(f"{1000 * share * result['seconds'] * 1000 / result['tokens']:.1f} ({100 * share:.1f}%)")
        if any(result["groups"].get(group) for result in results.values()):
            lines.append(f"| {group} | " + " | ".join(cells) + " |")
    lines.append("| **all** | " + " | ".join(
        f"**{1e6 * result['seconds'] / result['tokens']:.1f}** ({result['seconds']:.2f} s, BLEU {result['bleu']:.2f})"
        for result in results.values()) + " |")
    for engine, result in results.items():
        top = ", ".join(f"{function or '?'} ({Path(library).name}, {share:.1f}%)"
                        for (library, function), share in result["others"].most_common(5))
        if top:
            lines += ["", f"{names[engine]}, the largest functions in {OTHER}: {top}."]
    write_section(f"Profile: where decoding time goes, nmt and CTranslate2 ({vector_extensions()} CPU, "
                  f"{'greedy' if args.beam == 1 else f'beam {args.beam}'}, batch {args.batch})", lines, model=model)


if __name__ == "__main__":
    main()
