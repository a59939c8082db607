"""nmt against CTranslate2 on the same weights: the shipped model, exported with `nmt export`, on the
embedded Multi30k test sets, 2 threads, greedy and beam 4, batch 1 and batch 32.

    python benchmarks/engines.py          # rewrites benchmarks/RESULTS.md's engines section

In-process rows time the translation call with the model loaded; whole-process rows time a command from
start to last line (importing torch or ctranslate2 counts) and sample the memory of its whole process
tree (forked workers included). Each row reports the
BLEU of what it produced (cased sacreBLEU against the references). `--no-cache` rows at batch 32 take
the first quarter of the sentences: they only show what the cache saves (their outputs are fp32's), and at
their 3-6x the time of the cached rows the whole run took 15.6 minutes on a Zen 1 EPYC with all 1000.
Never run it while something else loads the cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import sacrebleu
import torch
from results import (
    cpu_name,
    ct2_threads_note,
    ct2_threads_slowdown,
    decoding,
    left_out_note,
    model_file,
    modes_left_out,
    shown_path,
    translate_options,
    vector_extensions,
    write_section,
)

from nmt.apps.export import export_ctranslate2
from nmt.data.corpus import parse_test_set
from nmt.decoding.configuration import default_workers
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint

CT2_SCRIPT = """
import sys, time, ctranslate2, sentencepiece
model, beam, batch, compute_type = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
workers, use_vmap = int(sys.argv[5]), sys.argv[6] == "1"
sp = sentencepiece.SentencePieceProcessor(model_file=model + "/sentencepiece.model")
translator = ctranslate2.Translator(model, inter_threads=workers, intra_threads=2 // workers,
                                   compute_type=compute_type)
lines = sys.stdin.read().split("\\n")[:-1]
started = time.perf_counter()
results = translator.translate_batch([sp.encode(line, out_type=str) for line in lines], beam_size=beam,
                                     max_batch_size=batch, length_penalty=LENPEN, max_decoding_length=MAXLEN,
                                     use_vmap=use_vmap)
out = [sp.decode(r.hypotheses[0]) for r in results]
sys.stderr.write(f"{time.perf_counter() - started}\\n")  # in-process: encoding, translation and decoding
sys.stdout.write("".join(line + "\\n" for line in out))
"""


def tree_pss_mib(root: int) -> float:
    """Memory of a process and all its descendants (forked workers, CTranslate2's threads' process): their
    proportional set sizes summed, so pages the workers share with their parent (copy-on-write weights)
    count once in all, split between them."""
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                total += sum(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as children:
                    pending.extend(int(child) for child in children.read().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # it ended meanwhile
    return total / 1024


def whole_process(command: list[str], text: str) -> tuple[list[str], float, float, str]:
    """Output lines, seconds, peak memory of the whole process tree (MiB, tree_pss_mib sampled every 20 ms)
    and stderr of one command fed `text` on stdin."""
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        stdin.write(text.encode())
        stdin.seek(0)
        started = time.perf_counter()
        process = subprocess.Popen(command, stdin=stdin, stdout=stdout, stderr=stderr)
        peak = 0.0
        while process.poll() is None:
            peak = max(peak, tree_pss_mib(process.pid))
            time.sleep(0.02)
        seconds = time.perf_counter() - started
        stdout.seek(0)
        stderr.seek(0)
        if process.returncode != 0:
            raise RuntimeError(f"{command} failed with status {process.returncode}: {stderr.read().decode()[-500:]}")
        return stdout.read().decode().split("\n")[:-1], seconds, peak, stderr.read().decode().rstrip("\n")


def nmt_flags(cached: bool, shortlist: bool) -> list[str]:
    """Both ways said: by default nmt decodes a beam search over the shortlist (where the model has one)."""
    return [*([] if cached else ["--no-cache"]), "--shortlist" if shortlist else "--no-shortlist"]


def nmt_command(model: str, beam: int, batch: int, precision: str, cached: bool = True,
                shortlist: bool = False) -> list[str]:
    """`nmt translate` on the CPU (also where a CUDA device would be its default), 2 threads."""
    return [sys.executable, "-m", "nmt_cli.main", "translate", "--model", model, "--device", "cpu", "--beam", str(beam),
            "--batch-size", str(batch), "--precision", precision, "--threads", "2", "-q", *nmt_flags(cached, shortlist)]


# nmt's rows: (precision, cached, lexical shortlist)
NMT_MODES = (("fp32", True, False), ("bf16", True, False), ("int8", True, False), ("int8_bf16", True, False),
             ("int8_bf16", True, True), ("int8_fp32", True, False), ("int8_fp32", True, True), ("fp32", False, False))


def nmt_name(precision: str, cached: bool, shortlist: bool) -> str:
    return " ".join(["nmt", precision, *nmt_flags(cached, shortlist)])


def ct2_command(exported: Path, lenpen: float, beam: int, batch: int, compute_type: str,
                workers: int = 1, vmap: bool = False) -> list[str]:
    """CT2_SCRIPT on the exported model, 2 threads: one worker with both (intra_threads=2), or two with
    one each (inter_threads=2: batches translated at once, as nmt's --workers 2). It prints its
    in-process seconds last on stderr. CTranslate2 normalizes scores by length**lenpen like nmt; its
    length cap counts no EOS. vmap: decode over the vocabulary map `nmt export` writes from nmt's shortlist."""
    script = CT2_SCRIPT.replace("LENPEN", str(lenpen)).replace("MAXLEN", "256")
    return [sys.executable, "-c", script, str(exported), str(beam), str(batch), compute_type, str(workers),
            str(int(vmap))]


# The CTranslate2 runs: (compute type, workers, vocabulary map); the vmap rows where the model has a shortlist,
# the fair match for nmt's --shortlist rows
ALL_CT2 = (("float32", 1, False), ("int8", 1, False), ("float32", 2, False), ("int8", 2, False),
           ("float32", 2, True), ("int8", 2, True))


def ct2_name(compute_type: str, workers: int, vmap: bool = False) -> str:
    return (f"CTranslate2 {compute_type}" + (f" {workers} workers" if workers > 1 else "")
            + (" vmap" if vmap else ""))


def target_tokens(tokenizer, lines: list[str]) -> int:
    """Target tokens of translated lines, counted with the model's sentencepiece model (for every engine)."""
    return sum(len(ids) for ids in tokenizer.encode_batch(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A checkpoint, or a shipped model's name; default the default shipped model.")
    parser.add_argument("--sentences", type=int, default=1000, help="batch-32 rows (batch 1 rows use a fifth)")
    args = parser.parse_args()
    args.model = model_file(args.model)
    torch.set_num_threads(2)
    checkpoint = load_checkpoint(args.model)
    tokenizer = checkpoint.tokenizer()
    test = parse_test_set("multi30k:test_2016_flickr")
    exported = Path(tempfile.mkdtemp()) / "ct2"
    export_ctranslate2(checkpoint, exported)
    try:
        from hf_marian import hf_generate, to_marian

        marian = to_marian(checkpoint)
    except ImportError:
        marian = None
        print("transformers is not installed: no HF generate() rows")
    workers = default_workers(torch.device("cpu"))  # as many as `nmt translate` takes by default
    skipped = modes_left_out(precision for precision, _, _ in NMT_MODES)
    rows, agreement = [], []
    for beam in (1, 4):
        for batch in (32, 1):
            n = args.sentences if batch == 32 else args.sentences // 5  # batch 1: 200 lines, as the speed issue
            sources, references = test.source[:n], test.target[:n]
            text = "".join(line + "\n" for line in sources)
            options = translate_options(checkpoint, beam)
            lenpen = options.lenpen
            measured = []
            for precision, cached, shortlist in NMT_MODES:
                if precision in skipped:
                    continue
                config = decoding(checkpoint, replace(options, use_cache=cached), precision, shortlist=shortlist,
                                  batch_size=batch, workers=workers)
                translator = Translator.from_checkpoint(checkpoint, config)
                part = sources if cached or batch == 1 else sources[: max(1, n // 4)]
                started = time.perf_counter()
                out = [t.text for t in translator.translate(part)]
                seconds = time.perf_counter() - started
                tokens = target_tokens(tokenizer, out)
                command = nmt_command(args.model, beam, batch, precision, cached, shortlist)
                _, whole_seconds, rss, _ = whole_process(command, "".join(line + "\n" for line in part))
                name = nmt_name(precision, cached, shortlist)
                measured.append((name, tokens / seconds, tokens / whole_seconds, rss, out))
            for compute_type, ct2_workers, vmap in ALL_CT2:
                if vmap and checkpoint.shortlist is None:
                    continue
                command = ct2_command(exported, lenpen, beam, batch, compute_type, ct2_workers, vmap)
                out, whole_seconds, rss, inside = whole_process(command, text)
                tokens = target_tokens(tokenizer, out)
                in_process = tokens / float(inside.strip().split("\n")[-1])
                measured.append((ct2_name(compute_type, ct2_workers, vmap), in_process, tokens / whole_seconds, rss,
                                 out))
            if marian is not None:
                started = time.perf_counter()
                out = hf_generate(marian, tokenizer, sources, beam, batch, lenpen, checkpoint.config.eos_id)
                tokens = target_tokens(tokenizer, out)
                measured.append(("HF generate() fp32", tokens / (time.perf_counter() - started), None, None, out))
            nmt_out = measured[0][4]
            for name, *_, out in measured[1:]:
                same = sum(a == b for a, b in zip(nmt_out, out, strict=False))  # over the first len(out) if fewer
                agreement.append(f"{name}, {'greedy' if beam == 1 else 'beam 4'}, batch {batch}: {same} of "
                                 f"{len(out)} outputs identical to nmt fp32")
            reference = next(m for m in measured if m[0] == "CTranslate2 float32")
            for name, in_process, whole_rate, rss, out in measured:
                bleu = sacrebleu.corpus_bleu(out, [references[: len(out)]]).score
                whole_ratio = whole_rate / reference[2] if whole_rate else None
                rows.append((name, "greedy" if beam == 1 else "beam 4", batch, len(out), in_process, whole_rate,
                             in_process / reference[1], whole_ratio, rss, bleu))
                print(rows[-1][:-1], f"BLEU {bleu:.2f}", flush=True)
    lines = [
        f"Machine: {cpu_name()}, 2 threads, torch {torch.__version__}. Model: {shown_path(args.model)} exported with "
        "`nmt export --format ctranslate2`. Sentences: the first N of multi30k:test_2016_flickr (`--no-cache` rows "
        "at batch 32: the first quarter, BLEU over those). Command: "
        f"`python benchmarks/engines.py --sentences {args.sentences}`. Target tokens counted with the model's "
        "sentencepiece model. In-process "
        "times cover tokenization, translation and detokenization. nmt runs with `nmt translate`'s default "
        "--workers (2 forked processes of one thread each); CTranslate2 with intra_threads=2 (the reference of the "
        "ratios) and with inter_threads=2, intra_threads=1 (2 workers). Peak memory: of the whole process tree, "
        "each process's proportional set size summed (pages nmt's forked workers share with their parent count "
        "once), sampled every 20 ms. HF generate() runs our weights converted "
        "to MarianMT (benchmarks/hf_marian.py), in-process only."
        + left_out_note(skipped),
        "",
        "| engine | search | batch | sentences | in-process tok/s | whole-process tok/s | in / whole ratio to "
        "CT2 fp32 | peak memory MiB (whole tree) | BLEU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    def show(value, pattern):
        return "-" if value is None else pattern.format(value)

    for name, search, batch, n, inside, whole, inside_ratio, whole_ratio, rss, bleu in rows:
        lines.append(f"| {name} | {search} | {batch} | {n} | {inside:.0f} | {show(whole, '{:.0f}')} | "
                     f"{inside_ratio:.2f}x / {show(whole_ratio, '{:.2f}x')} | {show(rss, '{:.0f}')} | {bleu:.2f} |")
    in_process = {(name, search, batch): inside for name, search, batch, _, inside, *_ in rows}
    slow = []
    for search, batch in dict.fromkeys((search, batch) for _, search, batch, *_ in rows):
        slower = ct2_threads_slowdown(in_process.get(("CTranslate2 float32", search, batch)),
                                      in_process.get(("CTranslate2 float32 2 workers", search, batch)))
        if slower:
            slow.append(f"{search}, batch {batch}: {slower:.1f}x")
    if slow:
        lines += ["", ct2_threads_note("in-process, " + "; ".join(slow))]
    lines += ["", "Same output as nmt fp32 (how faithful each engine and mode is):", ""]
    lines += [f"- {line}" for line in agreement]
    write_section(f"Engines: nmt and CTranslate2 on the shipped model ({vector_extensions()} CPU)", lines,
                  model=args.model)


if __name__ == "__main__":
    main()
