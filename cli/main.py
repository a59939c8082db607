"""`nmt`: each command parses its options and calls one library function.

Results go to stdout, progress and warnings to stderr. `main()` is the one place where known errors
become a one-line `error: ...` and an exit code: 2 for bad usage or input, 1 for runtime failures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import io
import logging
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Literal, TextIO

import typer

from nmt import __version__
from nmt.decoding.configuration import DecodingFlags
from nmt.errors import STOP_SIGNALS, Interrupted, NmtError, UsageError, stop_now_or_later, stop_signals_handled_by
from nmt_cli.options import decoding_options

app = typer.Typer(
    help="English-to-French neural machine translation with the Transformer.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)



def _version(value: bool) -> None:
    if value:
        typer.echo(f"nmt {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """English-to-French neural machine translation with the Transformer."""


def find_model(model: Path | None) -> Path:
    """--model (a file, or a shipped model's name), then $NMT_MODEL (the same), then the default shipped model."""
    from nmt.apps.shipped import default_model_name, is_model_name, model_path

    chosen = str(model) if model is not None else os.environ.get("NMT_MODEL")
    if chosen:
        return model_path(chosen) if is_model_name(chosen) else Path(chosen)
    if default_model_name() is None:
        raise UsageError("no model: pass --model PATH or set NMT_MODEL (no shipped model is installed)")
    return model_path(None)


def load_models(paths: list[Path] | None):
    """The checkpoint of the first --model (else $NMT_MODEL, else the shipped model) and those of the others."""
    from nmt.model.checkpoint import load_checkpoint

    paths = paths or [None]
    return load_checkpoint(find_model(paths[0])), tuple(load_checkpoint(find_model(path)) for path in paths[1:])


def file_translator(translator):
    """What nmt.apps.files needs of a Translator: texts -> translations, and word alignments."""
    from nmt.decoding.alignment import align

    def lines(texts: list[str]) -> list[str]:
        return [t.text for t in translator.translate(texts)]

    def aligned(source: str, target: str) -> list[tuple[int, int]]:
        return align(translator.model, translator.tokenizer, source, target)

    return lines, aligned


def resolve_decoding(models: list[Path] | None, flags: DecodingFlags, workers: int | None = None):
    """The checkpoints of --model and the decoding configuration resolved over the first (nmt.decoding.configuration);
    --verbose prints it. workers: the default when --workers is not given."""
    from nmt.decoding.configuration import DecodingConfig

    checkpoint, others = load_models(models)
    config = DecodingConfig.resolve(flags, checkpoint, workers=workers, ensemble=bool(others))
    if flags.verbose:
        typer.echo(f"decoding: {config.summary()}", err=True)
    return checkpoint, others, config


def load_translator(models: list[Path] | None, flags: DecodingFlags):
    """The Translator of --model and the decoding options, and its resolved configuration."""
    from nmt.decoding.translate import Translator

    checkpoint, others, config = resolve_decoding(models, flags)
    return Translator.from_checkpoint(checkpoint, config, others), config


MODEL_HELP = ("Checkpoint file, or a shipped model's name (`nmt models`); default $NMT_MODEL, then the default "
              "shipped model.")
MODELS_HELP = (MODEL_HELP[:-1] + ". Given several times: an ensemble "
               "averaging the models' log-probabilities at each step (one sentencepiece model).")
# What one file may cost (nmt.apps.files.FileLimits): `nmt translate -i FILE` and `nmt serve`'s /translate_file,
# the server's defaults lower (SERVER_LIMITS).
FILE_LIMIT_OPTIONS = {
    "max_chars": typer.Option(None, "--max-file-chars", help="Characters of text one file may give to translate "
                              "(exit 2 or 413 above). Default 5,000,000 (nmt serve: 500,000)."),
    "max_depth": typer.Option(None, "--max-file-depth", help="How deep a file's markup may nest. Default 256 (nmt "
                              "serve: 128)."),
    "max_inflated": typer.Option(None, "--max-file-inflated", help="Bytes a .docx's parts may inflate to, together. "
                                 "Default 268,435,456 (nmt serve: 67,108,864)."),
    "max_ratio": typer.Option(None, "--max-file-ratio", help="How many times a .docx's part over 1 MiB may inflate "
                              "(a zip bomb's: thousands). Default 100."),
}


def file_limits(base, **given):
    """`base` (nmt.apps.files.FileLimits) with the --max-file-* options given in place of its values."""
    values = {name: value for name, value in given.items() if value is not None}
    for name, value in values.items():
        if value < 1:
            raise UsageError(f"--max-file-{name.removeprefix('max_')} must be at least 1, not {value}")
    return dataclasses.replace(base, **values)


# Where training pairs come from: `nmt train` and `nmt prepare` take the same options (the same data, the same
# prepared cache).
DATA_OPTIONS = {
    "data": typer.Option(None, "--data", help="Embedded corpora: multi30k, tatoeba, news-commentary, news, "
                         "software-ui, software-ui-extra, python-docs; comma-separated to mix, NAME*K repeats one."),
    "src_file": typer.Option(None, "--src-file", help="English side of a local parallel corpus (.gz ok); with "
                             "--data, added to the embedded corpora."),
    "tgt_file": typer.Option(None, "--tgt-file", help="French side of a local parallel corpus."),
    "hf_dataset": typer.Option(None, "--hf-dataset", help="Hub dataset (e.g. wmt/wmt14), save_to_disk folder, "
                               "folder of train-*.parquet files as a hub download leaves them, or json/jsonl/parquet "
                               "files or globs, in the translation schema."),
    "hf_config": typer.Option(None, "--hf-config", help="Hub dataset config, e.g. fr-en."),
    "streaming": typer.Option(None, "--streaming", help="Read --hf-dataset as a stream while preparing it (no "
                              "local Arrow copy of a hub dataset)."),
    "valid_src": typer.Option(None, "--valid-src", help="Validation English file."),
    "valid_tgt": typer.Option(None, "--valid-tgt", help="Validation French file."),
    "augment": typer.Option(None, "--augment/--no-augment", help="Add variants of the training pairs that teach "
                            "numbers, links, codes, names, emoji, capitals and long sentences (nmt.data.augment). "
                            "Default off."),
    "augment_swap": typer.Option(None, "--augment-swap", help="With --augment: the share of the pairs that share a "
                                 "name or number with their translation that get a variant with it replaced by an "
                                 "entity. Default 1 (all); lower on a large corpus, where such pairs are common."),
    "register_tags": typer.Option(None, "--register-tags/--no-register-tags", help="Tag each English side with the "
                                  "register of its French (vous or tu), so that the model learns `nmt translate "
                                  "--formality` (nmt.data.register). Default off."),
}

# How `nmt prepare` and `nmt train` tokenize a corpus, declared once so that both make the same cache; None
# where not given: nmt.training.config.TrainConfig's defaults apply to both
PREPARATION_OPTIONS = {
    "vocab_size": typer.Option(None, "--vocab-size", help="Sentencepiece pieces. Default 8000."),
    "spm": typer.Option(None, "--spm", help="Use this sentencepiece model instead of training one."),
    "spm_sample": typer.Option(None, "--spm-sample", help="Sentences sentencepiece trains on, sampled uniformly "
                               "from the whole corpus. Default 1000000."),
    "max_len": typer.Option(None, "--max-len", help="Drop pairs with a side longer than this many tokens. "
                            "Default 250."),
    "max_ratio": typer.Option(None, "--max-ratio", help="Drop pairs whose longer side is over this many times "
                              "the shorter (+5 tokens). Default 3."),
    "cache_dir": typer.Option(None, "--cache-dir", help="Prepared corpora. Default $NMT_CACHE_DIR, else "
                              "~/.cache/nmt/prepared."),
}


@app.command()
@decoding_options()
def translate(
    model: list[Path] = typer.Option(None, "--model", "-m", help=MODELS_HELP),
    input: Path = typer.Option(None, "--input", "-i", help="Read this file instead of stdin."),
    output: Path = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout."),
    output_format: Literal["text", "jsonl"] = typer.Option("text", "--format",
                                      help="text (one line per input) or jsonl."),
    document: bool = typer.Option(False, "--document", help="Read running text: paragraphs separated by blank "
                                  "lines, lines wrapped at any width; write one French line a paragraph, blank lines "
                                  "kept."),
    input_format: Literal["text", "jsonl", "srt", "html", "docx", "md", "po", "xliff"] = typer.Option(
                                     None, "--input-format",
                                     help="text; jsonl: lines {\"source\": ..., \"prefix\": ...}, the translation "
                                     "starting with the French prefix if given; srt: a SubRip subtitle file, "
                                     "written back with its numbering and timings; html: a web page, its markup "
                                     "kept; docx: a Word document, its styles, tables, headers and footers kept; "
                                     "md: Markdown, its markup and code kept; po: a gettext catalog (.po, .pot), its "
                                     "untranslated entries filled and marked fuzzy; xliff: XLIFF 1.2 or 2.x, targets "
                                     "filled for review. Default: by the --input file's name (*.srt, *.html, *.htm, "
                                     "*.docx, *.md, *.po, *.pot, *.xlf, *.xliff), else text."),
    overwrite: bool = typer.Option(False, "--overwrite", help="A .po or XLIFF file: translate the entries that "
                                   "have a translation already too."),
    no_fuzzy: bool = typer.Option(False, "--no-fuzzy", help="A .po or XLIFF file: do not mark the machine "
                                  "translations for review (fuzzy; needs-review-translation)."),
    interactive: bool = typer.Option(False, "--interactive", help="Answer each line as soon as it is read."),
    encoding: str = typer.Option(None, "--encoding", help="The input's character encoding (utf-8, utf-16, cp1252, "
                                 "latin-1, ...). Default: a byte order mark's, a page's declaration, else UTF-8, "
                                 "else Windows-1252 with a warning. The output is UTF-8."),
    max_file_chars: int = FILE_LIMIT_OPTIONS["max_chars"],
    max_file_depth: int = FILE_LIMIT_OPTIONS["max_depth"],
    max_file_inflated: int = FILE_LIMIT_OPTIONS["max_inflated"],
    max_file_ratio: int = FILE_LIMIT_OPTIONS["max_ratio"],
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or warnings on stderr."),
    decoding: DecodingFlags = None,
) -> None:
    """Translate English lines from stdin (or --input) to French on stdout, one line per line."""
    nbest = decoding.nbest or 1
    if input_format is None:
        from nmt.apps.files import file_kind

        kind = file_kind(input.name) if input is not None else None
        input_format = "text" if kind in (None, "txt") else kind  # a .txt streams a line at a time
    whole_file = input_format in ("srt", "html", "docx", "md", "po", "xliff")
    if (overwrite or no_fuzzy) and input_format not in ("po", "xliff"):
        raise UsageError("--overwrite and --no-fuzzy are for gettext catalogs and XLIFF files (*.po, *.pot, *.xlf)")
    if whole_file and (output_format != "text" or document or nbest > 1):
        raise UsageError(f"--input-format {input_format} writes a file of its kind: drop --format, --document and "
                         "--nbest")
    if decoding.alignments and output_format != "jsonl":
        raise UsageError("--alignments needs --format jsonl")
    if document and (output_format != "text" or input_format != "text" or nbest > 1):
        raise UsageError("--document reads and writes text: drop --format, --input-format and --nbest")
    if nbest > 1 and output_format != "jsonl":
        raise UsageError("--nbest above 1 needs --format jsonl (the text format keeps one line per input)")
    from nmt.apps.files import FileLimits, check_file

    limits = file_limits(FileLimits(), max_chars=max_file_chars, max_depth=max_file_depth,
                         max_inflated=max_file_inflated, max_ratio=max_file_ratio)
    _configure_logging(quiet)
    source = _open_input(input)
    newline = "\n"
    if not whole_file:
        source, newline = _text_input(source, input, encoding, input_format)
    data = None
    if whole_file:  # checked before the model loads: a hostile file costs no more than its reading
        data = source.read()
        check_file(input_format, data, limits, encoding)
    with collection_paused():
        from nmt.decoding.translate import translate_document, translate_stream

        translator, config = load_translator(model, decoding)
    window = 1 if interactive or (input is None and sys.stdin.isatty()) else 1000
    try:
        with interruptible(), _output(output, input) as sink:
            if whole_file:
                from nmt.apps.files import translate_file

                sink.flush()
                from nmt.apps.catalogs import CatalogOptions

                sink.buffer.write(translate_file(input_format, data, *file_translator(translator), limits,
                                                 CatalogOptions(overwrite=overwrite, fuzzy=not no_fuzzy), encoding))
            elif document:
                sink.write(translate_document(translator, source.read().decode("utf-8", errors="replace")))
            else:
                translate_stream(translator, source, sink, window=window, as_json=output_format == "jsonl",
                                 quiet=quiet, records=input_format == "jsonl", newline=newline)
    finally:
        if translator.withheld:
            typer.echo(f"{translator.withheld} translations below --min-confidence {config.min_confidence:g} were "
                       "left empty", err=True)


@app.command()
@decoding_options(skip=("nbest", "sampling", "temperature", "seed", "no_cache", "min_confidence", "alignments"))
def serve(
    model: Path = typer.Option(None, "--model", "-m", help=MODEL_HELP),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(5000, "--port", help="TCP port."),
    max_chars: int = typer.Option(20_000, "--char-limit", "--max-chars", help="Characters of text one request may "
                                  "hold (413 above)."),
    batch_limit: int = typer.Option(None, "--batch-limit", help="Texts one /translate request may hold (400 above; "
                                    "default: any)."),
    req_limit: int = typer.Option(None, "--req-limit", help="Requests a minute one client address may make (429 "
                                  "with Retry-After above; default: any). A key of --api-keys has its own."),
    max_queue: int = typer.Option(2_000, "--max-queue", help="Lines that may wait; more is a 503 with Retry-After."),
    max_queue_chars: int = typer.Option(200_000, "--max-queue-chars", help="Characters that may wait; more is a "
                                        "503 with Retry-After."),
    max_batch_lines: int = typer.Option(64, "--max-batch-lines", help="Lines of queued requests decoded together, "
                                        "taken in turns from each client."),
    batch_wait_ms: float = typer.Option(5.0, "--batch-wait-ms", help="How long the first request waits for others "
                                        "to share its batch."),
    max_request_seconds: float = typer.Option(60.0, "--max-request-seconds", help="A request's lines still "
                                              "waiting after this long are dropped (503); so are those of a client "
                                              "that went away."),
    read_timeout: float = typer.Option(30.0, "--read-timeout", help="Seconds a client may take to send a "
                                       "request's headers, and then its whole body (408 after)."),
    max_connections: int = typer.Option(256, "--max-connections", help="Connections served at once; more get a "
                                        "503."),
    max_client_connections: int = typer.Option(32, "--max-client-connections", help="Connections one client "
                                               "address may hold at once; more get a 503."),
    max_file_bytes: int = typer.Option(10_000_000, "--max-file-bytes", help="The largest file /translate_file "
                                       "takes (413 above)."),
    max_file_jobs: int = typer.Option(4, "--max-file-jobs", help="Files and HTML requests translated at once; "
                                      "more get a 503."),
    drain_timeout: float = typer.Option(60.0, "--drain-timeout", help="On SIGTERM or Ctrl-C, seconds the requests "
                                        "in flight have to finish before the server exits anyway."),
    max_file_seconds: float = typer.Option(600.0, "--max-file-seconds", help="A file's translation stops after "
                                           "this long (503); it also stops when its client goes away."),
    max_file_chars: int = FILE_LIMIT_OPTIONS["max_chars"],
    max_file_depth: int = FILE_LIMIT_OPTIONS["max_depth"],
    max_file_inflated: int = FILE_LIMIT_OPTIONS["max_inflated"],
    max_file_ratio: int = FILE_LIMIT_OPTIONS["max_ratio"],
    api_key: str = typer.Option(None, "--api-key", envvar="NMT_API_KEY", help="Require this key (api_key in the "
                                "body, or Authorization: Bearer) on the translation endpoints. Default $NMT_API_KEY."),
    api_keys: Path = typer.Option(None, "--api-keys", help="Require one of the keys in this file: one a line, "
                                  "optionally followed by its requests a minute."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only errors on stderr."),
    decoding: DecodingFlags = None,
) -> None:
    """Serve translations over HTTP: LibreTranslate's API (POST /translate, GET /languages), nmt's own
    (POST /v1/translate), /health, /metrics, /docs and a web page at /. Lines of concurrent requests are
    decoded together. SIGTERM or Ctrl-C: stop taking requests, answer those in flight, exit."""
    _configure_logging(quiet)
    try:
        from nmt.apps.server.engine import Engine
        from nmt.apps.server.limits import ApiKeys
        from nmt.apps.server.process import listening
        from nmt.apps.server.process import serve as serve_on
        from nmt.apps.server.routes import ServeSettings
    except ImportError as exc:
        raise UsageError(f"nmt serve needs the serve extra ({exc.name} is missing): pip install "
                         "'nmt-transformer[serve]'") from None
    for name, value in (("--char-limit", max_chars), ("--max-queue", max_queue), ("--max-batch-lines", max_batch_lines),
                        ("--max-file-bytes", max_file_bytes), ("--max-connections", max_connections),
                        ("--max-client-connections", max_client_connections), ("--max-file-jobs", max_file_jobs),
                        ("--max-queue-chars", max_queue_chars), ("--batch-limit", batch_limit or 1),
                        ("--req-limit", req_limit or 1)):
        if value < 1:
            raise UsageError(f"{name} must be at least 1, not {value}")
    if batch_wait_ms < 0:
        raise UsageError("--batch-wait-ms must not be negative")
    for name, value in (("--read-timeout", read_timeout), ("--drain-timeout", drain_timeout),
                        ("--max-file-seconds", max_file_seconds), ("--max-request-seconds", max_request_seconds)):
        if value <= 0:
            raise UsageError(f"{name} must be positive, not {value:g}")
    keys = ApiKeys.read(api_keys, api_key)
    with collection_paused():
        from nmt.decoding.configuration import knows_registers
        from nmt.decoding.translate import Translator

        # one worker unless --workers says otherwise: requests are batched together already
        checkpoint, _, config = resolve_decoding([model] if model else None, decoding, workers=1)
    listener = listening(host, port)
    engine = Engine(lambda: Translator.from_checkpoint(checkpoint, config), max_lines=max_batch_lines,
                    wait=batch_wait_ms / 1000, max_queue=max_queue, max_queue_chars=max_queue_chars)
    from nmt.apps.files import SERVER_LIMITS

    limits = file_limits(SERVER_LIMITS, max_chars=max_file_chars, max_depth=max_file_depth,
                         max_inflated=max_file_inflated, max_ratio=max_file_ratio)
    settings = ServeSettings(max_chars=max_chars, api_keys=keys, model_name=find_model(model).name,
                             decoding=config.to_dict(), read_timeout=read_timeout, max_file_bytes=max_file_bytes,
                             file_limits=limits, max_file_seconds=max_file_seconds,
                             registers=knows_registers(checkpoint), req_limit=req_limit,
                             max_request_seconds=max_request_seconds, batch_limit=batch_limit,
                             max_file_jobs=max_file_jobs)
    if not quiet:
        mode = config.precision + (", shortlist" if config.shortlist else "")
        typer.echo(f"nmt serve: http://{host}:{port} ({mode}; loading the model; /health answers 200 once it is "
                   "loaded)", err=True)
    serve_on(engine, config.search, settings, listener, max_connections=max_connections,
             max_client_connections=max_client_connections, drain_timeout=drain_timeout, quiet=quiet)


@app.command()
@decoding_options(only=("lenpen", "max_tokens", "device", "threads", "formality", "verbose"))
def score(
    input: Path = typer.Option(None, "--input", "-i", help="English sentences, one per line; with --format jsonl, "
                               "the pairs (default: stdin)."),
    ref: Path = typer.Option(None, "--ref", help="Their French translations, one per line (--format text)."),
    output_format: Literal["text", "jsonl"] = typer.Option("text", "--format",
                                      help="text (--input and --ref in, one log-probability a line out) or jsonl "
                                      "(lines with source and translation in, log_prob and score out)."),
    model: Path = typer.Option(None, "--model", "-m", help=MODEL_HELP),
    per_token: bool = typer.Option(False, "--per-token", help="Also each piece's log-probability, EOS last."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the scores to this file (default stdout), "
                                "whole or not at all."),
    src: Path = typer.Option(None, "--src", hidden=True),  # --input's name in text mode before 2026-11-27
    tgt: Path = typer.Option(None, "--tgt", hidden=True),  # --ref's
    decoding: DecodingFlags = None,
) -> None:
    """The model's log-probability of each French translation given its English source, one line per pair,
    in order (for filtering a corpus or reranking): the sum over its pieces and EOS, and with --format jsonl
    the score normalized as translate ranks hypotheses."""
    import json

    from nmt.data.corpus import read_lines, read_stream_lines

    _configure_logging(False)
    if output_format == "text":
        src, tgt = input or src, ref or tgt
        if src is None or tgt is None:
            raise UsageError("give --input and --ref (or --format jsonl with pairs on stdin or --input)")
        sources, targets = read_lines(src), read_lines(tgt)
        if len(sources) != len(targets):
            raise UsageError(f"{src} has {len(sources)} lines but {tgt} has {len(targets)}")
    else:
        if src is not None or tgt is not None or ref is not None:
            raise UsageError("--format jsonl reads pairs from stdin or --input, not --ref")
        sources, targets = [], []
        for number, line in enumerate(read_stream_lines(_open_input(input)), 1):
            try:
                record = json.loads(line)
                sources.append(record["source"])
                targets.append(record["translation"])
            except (ValueError, KeyError, TypeError):
                raise UsageError(f"line {number}: not a JSON object with source and translation") from None
            if not (isinstance(sources[-1], str) and isinstance(targets[-1], str)):
                raise UsageError(f"line {number}: source and translation must be strings")
    with collection_paused():
        from nmt.decoding.score import Scorer

        # the scores are of the fp32 model, whatever precision decoding would take
        checkpoint, _, config = resolve_decoding([model] if model else None, replace(decoding, verbose=False))
        if decoding.verbose:
            typer.echo(f"scoring: lenpen {config.search.lenpen:g}, fp32 on {config.device}, {config.threads} threads, "
                       f"{config.max_tokens} tokens a batch, formality {config.formality}", err=True)
        scorer = Scorer(checkpoint.build_model(config.device), checkpoint.tokenizer(), lenpen=config.search.lenpen,
                        max_tokens=config.max_tokens, formality=config.formality)
    with _output(output, input or src) as sink:
        for pair in scorer.score(sources, targets):
            sink.write((pair.to_json(per_token) if output_format == "jsonl" else pair.to_text(per_token)) + "\n")


@app.command()
def attention(
    text: str = typer.Option(..., "--text", help="One English sentence."),
    out: Path = typer.Option(Path("attention.png"), "--output", "-o", help="Where to write the PNG."),
    model: Path = typer.Option(None, "--model", "-m", help=MODEL_HELP),
    layer: int = typer.Option(None, "--layer", help="Decoder layer, 1 = the first. Default: the one alignments use "
                              "(nmt.decoding.alignment.ALIGNMENT_LAYER from the top)."),
    head: int = typer.Option(None, "--head", help="One head (1 = the first). Default: the mean of the heads."),
    grid: bool = typer.Option(False, "--grid", help="Every head of the layer side by side."),
    beam: int = typer.Option(None, "--beam", "-b", help="Beam size. Default: the model's, else 4."),
) -> None:
    """Translate one sentence and draw the decoder's cross-attention as a heatmap: source pieces along the
    top, target pieces down the side."""
    _configure_logging(False)
    if head is not None and grid:
        raise UsageError("give --head or --grid, not both")
    with collection_paused():
        from nmt.decoding.alignment import ALIGNMENT_LAYER, cross_attention, draw_attention
        from nmt.decoding.configuration import MAX_PIECE_TOKENS, DecodingConfig
        from nmt.decoding.translate import Translator
        from nmt.model.checkpoint import load_checkpoint

        checkpoint = load_checkpoint(find_model(model))
        flags = DecodingFlags(beam=beam, device="cpu", precision="fp32", no_protect=True,  # one sentence, whole
                              clause_split=MAX_PIECE_TOKENS, workers=1)
        translator = Translator.from_checkpoint(checkpoint, DecodingConfig.resolve(flags, checkpoint))
    source = translator.tokenizer.encode(text.strip())
    if not source or len(source) >= translator.max_piece_tokens:
        raise UsageError(f"--text must be one sentence of 1 to {translator.max_piece_tokens - 1} pieces")
    target = translator._search_batch([source])[0][0].tokens
    weights = cross_attention(translator.model, source, target)
    pieces = translator.tokenizer.processor.id_to_piece
    layers = weights.size(0)
    written = draw_attention(weights, [pieces(i) for i in source], [pieces(i) for i in target], out,
                             layer=layers + 1 - ALIGNMENT_LAYER if layer is None else layer, head=head, grid=grid)
    typer.echo(translator.tokenizer.decode(target))
    typer.echo(f"written to {written}", err=True)


@app.command()
def models() -> None:
    """List the shipped models: name, domain, size and scores; the default is marked *."""
    from nmt.apps.shipped import default_model_name, shipped_models

    listed = shipped_models()
    if not listed:
        typer.echo("no shipped models are installed: train one (`make model-general`) and pass --model PATH")
        return
    default = default_model_name()
    for name, entry in listed.items():
        size = f"{entry['path'].stat().st_size / 2**20:.0f} MB" if entry["installed"] else "not installed"
        typer.echo(f"{'*' if name == default else ' '} {name}: {entry['domain']} ({entry['file']}, {size})")
        scores = ", ".join(f"{test} {bleu}" for test, bleu in entry.get("bleu", {}).items())
        if scores:
            typer.echo(f"    BLEU: {scores}")


@app.command()
def info(checkpoint_path: Path = typer.Argument(None, metavar="[CHECKPOINT]", help="A checkpoint file, or a "
                                                 "shipped model's name (`nmt models`); default the default model.")
         ) -> None:
    """Show a checkpoint's model config, vocabulary, parameter count and training summary."""
    from nmt.model.checkpoint import load_checkpoint

    checkpoint_path = find_model(checkpoint_path)
    checkpoint = load_checkpoint(checkpoint_path)
    n_parameters = sum(t.numel() for name, t in checkpoint.weights.items())
    typer.echo(f"checkpoint: {checkpoint_path}")
    typer.echo(f"parameters: {n_parameters:,}")
    typer.echo(f"vocabulary: {checkpoint.tokenizer().vocab_size} sentencepiece pieces")
    typer.echo("model config:")
    for key, value in checkpoint.config.to_dict().items():
        typer.echo(f"  {key}: {value}")
    if checkpoint.decoding:
        typer.echo("decoding defaults: " + ", ".join(f"{k}={v}" for k, v in checkpoint.decoding.items()))
    summary = checkpoint.training.get("summary", {})
    if summary:
        typer.echo("training: " + ", ".join(f"{k}={v}" for k, v in summary.items()))


@app.command()
def train(
    context: typer.Context,
    out: Path = typer.Option(..., "--out", help="Output folder: last.pt, best.pt, config.yaml, metrics.jsonl."),
    config_file: Path = typer.Option(None, "--config", help="YAML file of training options (flags override it)."),
    data: str = DATA_OPTIONS["data"],
    src_file: str = DATA_OPTIONS["src_file"],
    tgt_file: str = DATA_OPTIONS["tgt_file"],
    hf_dataset: str = DATA_OPTIONS["hf_dataset"],
    hf_config: str = DATA_OPTIONS["hf_config"],
    streaming: bool = DATA_OPTIONS["streaming"],
    valid_src: str = DATA_OPTIONS["valid_src"],
    valid_tgt: str = DATA_OPTIONS["valid_tgt"],
    augment: bool = DATA_OPTIONS["augment"],
    augment_swap: float = DATA_OPTIONS["augment_swap"],
    register_tags: bool = DATA_OPTIONS["register_tags"],
    prepared: str = typer.Option(None, "--prepared", help="A folder `nmt prepare` printed, in place of the data "
                                 "options: its tokens, sentencepiece model and validation pairs, read offline."),
    preset: Literal["tiny", "small", "base", "big"] = typer.Option(None, "--preset",
                               help="Model dimensions. Default small."),
    d_model: int = typer.Option(None, "--d-model", help="Model width, in place of the preset's."),
    n_heads: int = typer.Option(None, "--heads", help="Attention heads, in place of the preset's."),
    d_ff: int = typer.Option(None, "--d-ff", help="Feed-forward width, in place of the preset's."),
    encoder_layers: int = typer.Option(None, "--encoder-layers", help="Encoder layers, in place of the preset's."),
    decoder_layers: int = typer.Option(None, "--decoder-layers", help="Decoder layers, in place of the preset's "
                                       "(decoding time grows with them; the encoder runs once a sentence)."),
    pre_norm: bool = typer.Option(None, "--pre-norm/--post-norm", help="LayerNorm placement. Default post-norm."),
    dropout: float = typer.Option(None, "--dropout", help="Default 0.1."),
    vocab_size: int = PREPARATION_OPTIONS["vocab_size"],
    spm: str = PREPARATION_OPTIONS["spm"],
    spm_sample: int = PREPARATION_OPTIONS["spm_sample"],
    prepare_workers: int = typer.Option(None, "--prepare-workers", help="Processes that tokenize the corpus "
                                        "(once: see `nmt prepare`). Default one per CPU core."),
    cache_dir: str = PREPARATION_OPTIONS["cache_dir"],
    max_len: int = PREPARATION_OPTIONS["max_len"],
    max_ratio: float = PREPARATION_OPTIONS["max_ratio"],
    max_positions: int = typer.Option(None, "--max-positions", help="Longest sequence the model's positions cover. "
                                      "Default 512."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Padded tokens per batch. Default 4096."),
    update_freq: int = typer.Option(None, "--update-freq", help="Batches accumulated per update on each rank. "
                                    "Default 1."),
    tokens_per_update: int = typer.Option(None, "--tokens-per-update", help="Padded tokens an update takes over "
                                          "all ranks, counted on a pair's longer side as --max-tokens is (the "
                                          "paper: about 25,000 source and 25,000 target tokens): sets --update-freq "
                                          "from the number of ranks and --max-tokens; refused where no whole "
                                          "number of batches comes within 25% of it."),
    lr: float = typer.Option(None, "--lr", help="Peak learning rate. Default the paper's (d_model * warmup)^-0.5 "
                             "(7.0e-4 for base at warmup 4000). Stored in the run: a resume keeps it."),
    warmup: int = typer.Option(None, "--warmup", help="Warmup steps. Default a tenth of the planned steps, at most "
                               "4000. Stored in the run: a resume keeps it."),
    decay: Literal["inverse-sqrt", "linear"] = typer.Option(None, "--decay",
                              help="After warmup: inverse-sqrt (the paper's) or linear (to zero at "
                              "--max-steps or --max-epochs' end). Default inverse-sqrt. Stored in the run."),
    reset_schedule: bool = typer.Option(False, "--reset-schedule", help="On resume, take --lr, --warmup and --decay "
                                        "as given instead of the run's own."),
    label_smoothing: float = typer.Option(None, "--label-smoothing", help="Default 0.1."),
    clip_norm: float = typer.Option(None, "--clip-norm", help="Gradient norm clip, 0 = off. Default 1.0."),
    precision: Literal["fp32", "bf16", "fp16", "auto"] = typer.Option(None, "--precision",
                                  help="fp32, bf16 (CPU/GPU), fp16 (CUDA) or auto (bf16 where "
                             "the CPU or GPU computes in it, else fp32 on a CPU, fp16 on CUDA). Default auto on CUDA, "
                             "fp32 on a CPU."),
    max_steps: int = typer.Option(None, "--max-steps", help="Stop after this many updates."),
    max_epochs: int = typer.Option(None, "--max-epochs", help="Stop after this many epochs."),
    max_minutes: float = typer.Option(None, "--max-minutes", help="Stop after this much training time."),
    valid_every: int = typer.Option(None, "--valid-every", help="Validate and save every N steps. Default 1000."),
    save_every: int = typer.Option(None, "--save-every", help="Also write last.pt (to resume from) every N steps."),
    patience: int = typer.Option(None, "--patience", help="Stop after N validations without a better BLEU."),
    valid_bleu_lines: int = typer.Option(None, "--valid-bleu-lines", help="Validate on the first N validation pairs "
                                         "only. Default all."),
    keep_last: int = typer.Option(None, "--keep-last", help="step*.pt checkpoints kept for averaging. Default 5."),
    seed: int = typer.Option(None, "--seed", help="Default 1."),
    threads: int = typer.Option(None, "--threads", help="CPU threads."),
    dist_timeout: float = typer.Option(None, "--dist-timeout", help="Minutes a rank waits for the others at a "
                                       "collective (their validation and checkpoints). Default 30."),
    join_timeout: float = typer.Option(None, "--join-timeout", help="Minutes a rank waits for the others to join "
                                       "(their data preparation, on a machine with a cold cache). Default 360."),
    dist_backend: Literal["nccl", "gloo"] = typer.Option(None, "--dist-backend", help="How the ranks of torchrun "
                                                         "talk: nccl (default on CUDA, a GPU per process) or gloo "
                                                         "(the default on CPUs; on CUDA it lets ranks share a GPU)."),
    init_from: str = typer.Option(None, "--init-from", help="Start from this checkpoint's weights (fine-tuning)."),
    compile: bool = typer.Option(None, "--compile/--no-compile", help="The encoder and decoder through "
                                 "torch.compile: fused kernels, a minute or more of compiling at start. Default off."),
    ema: float = typer.Option(None, "--ema", help="Keep a moving average of the weights with this decay (0.9999, "
                              "say): validation scores it and every checkpoint holds it (`nmt average --ema`)."),
    log_every: int = typer.Option(None, "--log-every", help="Progress line every N steps. Default 100."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Train a Transformer; rerunning the same command resumes from OUT/last.pt."""
    given = {k: v for k, v in context.params.items() if k not in ("config_file", "quiet") and v is not None}
    _configure_logging(quiet, progress=True)
    from nmt.training.config import TrainConfig
    from nmt.training.train import train as run_training

    values = {}
    if config_file is not None:
        values = _read_yaml(config_file)
        if "prepared" in given:  # the folder replaces the data options the file gives (they made it)
            for key in ("data", "src_file", "tgt_file", "hf_dataset", "hf_config", "streaming", "augment",
                        "augment_swap", "register_tags"):
                values.pop(key, None)
    values.update(given)
    fields = TrainConfig.__dataclass_fields__
    for name, value in values.items():  # YAML 1.1 reads 1e-3 (no dot) as a string
        if isinstance(value, str) and name in fields and "float" in str(fields[name].type):
            try:
                values[name] = float(value)
            except ValueError:
                raise UsageError(f"{name} in {config_file} must be a number, not {value!r}") from None
    values["out"] = str(out)
    unknown = set(values) - set(fields)
    if unknown:
        raise UsageError(f"unknown training options in {config_file}: {', '.join(sorted(unknown))}")
    run_training(TrainConfig(**values))


@app.command()
def prepare(
    data: str = DATA_OPTIONS["data"],
    src_file: str = DATA_OPTIONS["src_file"],
    tgt_file: str = DATA_OPTIONS["tgt_file"],
    hf_dataset: str = DATA_OPTIONS["hf_dataset"],
    hf_config: str = DATA_OPTIONS["hf_config"],
    streaming: bool = DATA_OPTIONS["streaming"],
    valid_src: str = DATA_OPTIONS["valid_src"],
    valid_tgt: str = DATA_OPTIONS["valid_tgt"],
    augment: bool = DATA_OPTIONS["augment"],
    augment_swap: float = DATA_OPTIONS["augment_swap"],
    register_tags: bool = DATA_OPTIONS["register_tags"],
    vocab_size: int = PREPARATION_OPTIONS["vocab_size"],
    spm: str = PREPARATION_OPTIONS["spm"],
    spm_sample: int = PREPARATION_OPTIONS["spm_sample"],
    max_len: int = PREPARATION_OPTIONS["max_len"],
    max_ratio: float = PREPARATION_OPTIONS["max_ratio"],
    seed: int = typer.Option(None, "--seed", help="Sentencepiece sample and held-out validation pairs. Default 1."),
    workers: int = typer.Option(None, "--workers", help="Tokenizing processes. Default one per CPU core."),
    cache_dir: str = PREPARATION_OPTIONS["cache_dir"],
) -> None:
    """Tokenize a training corpus once into a memory-mapped cache that `nmt train` (with the same data options)
    then opens in seconds, on every start, resume and rank. Prints the cache folder."""
    _configure_logging(False, progress=True)
    from nmt.data.prepare import prepare_training_data

    spm_model = None
    if spm:
        try:
            spm_model = Path(spm).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read the sentencepiece model {spm}: {exc.strerror}") from None
    from nmt.training.config import TrainConfig

    # the names of `nmt train`'s options (TrainConfig) and, where not given, its defaults: both make one cache
    given = dict(data=data, src_file=src_file, tgt_file=tgt_file, hf_dataset=hf_dataset, hf_config=hf_config,
                 streaming=streaming, valid_src=valid_src, valid_tgt=valid_tgt, augment=augment,
                 augment_swap=augment_swap, register_tags=register_tags, seed=seed, vocab_size=vocab_size,
                 spm_sample=spm_sample, max_len=max_len, max_ratio=max_ratio, prepare_workers=workers,
                 cache_dir=cache_dir)
    defaults = {field.name: field.default for field in fields(TrainConfig)}
    options = SimpleNamespace(**{name: defaults[name] if value is None else value for name, value in given.items()})
    typer.echo(str(prepare_training_data(options, spm_model).folder))


@app.command("eval")
@decoding_options(skip=("nbest", "alignments"))
def evaluate(
    input: Path = typer.Option(None, "--input", "-i", help="Translate this English file with the model, then score "
                               "against --ref."),
    ref: Path = typer.Option(None, "--ref", help="References, one per line."),
    hyp: Path = typer.Option(None, "--hyp", help="Translations to score, one per line (nothing is translated)."),
    test: str = typer.Option(None, "--test", help="Embedded test set, e.g. multi30k:test_2016_flickr."),
    model: list[Path] = typer.Option(None, "--model", "-m", help=MODELS_HELP),
    output: Path = typer.Option(None, "--output", "-o", help="Also write the translations to this file, one line "
                                "per source line."),
    limit: int = typer.Option(None, "--limit", help="Score only the first N lines."),
    lc_tok: bool = typer.Option(False, "--lc-tok", help="Also BLEU on lowercased Moses-tokenized text (papers)."),
    output_format: Literal["text", "jsonl"] = typer.Option("text", "--format",
                                      help="text, or jsonl: one JSON object on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or warnings on stderr."),
    src: Path = typer.Option(None, "--src", hidden=True),  # --input's name before 2026-11-27
    as_json: bool = typer.Option(False, "--json", hidden=True),  # --format jsonl's
    decoding: DecodingFlags = None,
) -> None:
    """Score translations with sacreBLEU (BLEU, chrF), translating first when given --input or --test."""
    _configure_logging(quiet)
    src = input if input is not None else src
    as_json = as_json or output_format == "jsonl"
    from nmt.apps.robustness import format_report, load_robustness, robustness_report
    from nmt.data.corpus import parse_test_set, read_lines
    from nmt.text.metrics import score

    if sum(x is not None for x in (hyp, src, test)) != 1:
        raise UsageError("give one of --input (with --ref), --hyp (with --ref) or --test")
    if hyp is not None and output is not None:
        raise UsageError("--output writes the translations of --input or --test; with --hyp there are none")
    if test is not None:
        pairs = parse_test_set(test)
        sources, references, name = pairs.source, pairs.target, test
    else:
        if ref is None:
            raise UsageError("--ref is needed with --hyp or --input")
        references, name = read_lines(ref), str(ref)
        sources = read_lines(src) if src is not None else None
    if limit:
        references = references[:limit]
        sources = sources[:limit] if sources is not None else None
    robust = []  # the robustness sets are also scored by category (nmt.apps.robustness)
    settings = {}  # what decided the translations' text beyond the search: the register asked for
    if test is not None and test.startswith("robustness:"):
        robust = load_robustness(test.partition(":")[2])[: limit or None]
    if hyp is not None:
        hypotheses = read_lines(hyp)[: limit or None]
    else:
        if len(sources) != len(references):
            raise UsageError(f"{len(sources)} source lines but {len(references)} references")
        with collection_paused():
            translator, _ = load_translator(model, decoding)
        settings = {"formality": translator.formality, "typography": translator.typography.name}
        plain = [(index, line.plain) for index, line in enumerate(robust) if line.plain]
        translated = [t.text for t in translator.translate(sources + [text for _, text in plain])]
        hypotheses = translated[: len(sources)]
        if output is not None:
            with _output(output, None) as sink:
                sink.writelines(line + "\n" for line in hypotheses)
        plain_translations = {index: text for (index, _), text in zip(plain, translated[len(sources):], strict=True)}
        categories = robustness_report(robust, hypotheses, plain_translations) if robust else {}
    scores = score(hypotheses, references, lc_tok=lc_tok)
    if as_json:
        import json

        record = {**scores.to_dict(), "test": name, **settings}
        if robust:
            record["categories"] = {category: report.to_dict() for category, report in categories.items()}
        typer.echo(json.dumps(record))
        return
    typer.echo(f"{name}: {scores.lines} lines" + "".join(f", {key} {value}" for key, value in settings.items()))
    typer.echo(f"BLEU {scores.bleu:.2f}  ({scores.signatures['bleu']})")
    typer.echo(f"chrF {scores.chrf:.2f}  ({scores.signatures['chrf']})")
    if scores.bleu_lc_tok is not None:
        typer.echo(f"BLEU lowercased Moses-tokenized {scores.bleu_lc_tok:.2f}  ({scores.signatures['bleu_lc_tok']})")
    if robust:
        typer.echo("\n".join(format_report(categories)))


@app.command()
def average(
    checkpoints: list[Path] = typer.Argument(..., help="Checkpoints of one model to average."),
    out: Path = typer.Option(..., "--output", "-o", help="Where to write the averaged checkpoint."),
    valid: str = typer.Option(None, "--valid", help="Average the latest k checkpoints for the k (1 to all) with the "
                              "best greedy BLEU on these sets (CORPUS:SPLIT, comma-separated), instead of all."),
    limit: int = typer.Option(None, "--limit", help="With --valid: the first N pairs of each set only."),
    ema: bool = typer.Option(False, "--ema", help="Average the moving averages that `nmt train --ema` kept in the "
                             "checkpoints instead of their weights (one checkpoint: its moving average alone)."),
) -> None:
    """Average the weights of several checkpoints (e.g. OUT/step*.pt of one run)."""
    from nmt.training.averaging import average_checkpoints

    if valid is None:
        average_checkpoints(checkpoints, out, ema)
        typer.echo(f"averaged {len(checkpoints)} checkpoints into {out}")
        return
    _configure_logging(False)
    from nmt.model.checkpoint import save_checkpoint
    from nmt.training.tune import choose_average

    pairs = _validation_pairs(valid, limit)
    averaged, table = choose_average(checkpoints, pairs, ema)
    for count, bleu in table:
        typer.echo(f"the latest {count} averaged: greedy BLEU {bleu:.2f} on {valid} ({len(pairs.source)} pairs)")
    save_checkpoint(out, averaged)
    typer.echo(f"averaged the latest {averaged.training['summary']['averaged']} of {len(checkpoints)} checkpoints "
               f"into {out}")


def _validation_pairs(valid: str, limit: int | None):
    """The pairs of comma-separated CORPUS:SPLIT sets, the first `limit` of each."""
    from nmt.data.corpus import ParallelText, parse_test_set

    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    pairs = ParallelText([], [])
    for name in valid.split(","):
        each = parse_test_set(name.strip())
        pairs.source.extend(each.source[:limit])
        pairs.target.extend(each.target[:limit])
    return pairs


@app.command()
def tune(
    model: Path = typer.Option(..., "--model", "-m", help="Checkpoint to tune."),
    valid: str = typer.Option("multi30k:valid", "--valid", help="Validation set (CORPUS:SPLIT), or several "
                              "comma-separated, tuned on together (europarl:dev,tatoeba:dev)."),
    beams: str = typer.Option("1,4,5", "--beams", help="Beam sizes to try, comma-separated."),
    lenpens: str = typer.Option("0.6,0.8,1.0,1.2", "--lenpens", help="Length penalties to try."),
    out: Path = typer.Option(..., "--output", "-o", help="Write the checkpoint with the best decoding defaults here."),
    half: bool = typer.Option(False, "--half", help="Store the weights in fp16 (half the size)."),
    limit: int = typer.Option(None, "--limit", help="Tune on the first N pairs of each set only."),
    no_repeat_ngram: int = typer.Option(0, "--no-repeat-ngram", help="Tune with repeated n-grams of N tokens "
                                        "blocked, and store N among the defaults (0: none)."),
    clause_split: int = typer.Option(None, "--clause-split", help="Store N as the model's --clause-split default."),
    protect_names: bool = typer.Option(False, "--protect-names", help="Store --protect-names as the model's default."),
) -> None:
    """Pick beam size and length penalty by validation BLEU and store them in the checkpoint. Each setting is
    decoded as `nmt eval` decodes by default on this machine (its precision; the model's shortlist, so run
    `nmt shortlist` first where the model is to have one)."""
    _configure_logging(False)
    from nmt.decoding.configuration import DecodingFlags
    from nmt.model.checkpoint import load_checkpoint
    from nmt.training.tune import tune_decoding, write_release

    try:
        beam_list = [int(b) for b in beams.split(",")]
        lenpen_list = [float(x) for x in lenpens.split(",")]
    except ValueError:
        raise UsageError("--beams and --lenpens take comma-separated numbers") from None
    checkpoint = load_checkpoint(model)
    pairs = _validation_pairs(valid, limit)
    if no_repeat_ngram < 0:
        raise UsageError("--no-repeat-ngram must not be negative")
    if clause_split is not None and clause_split < 1:
        raise UsageError("--clause-split must be at least 1")
    flags = DecodingFlags(no_repeat_ngram=no_repeat_ngram, clause_split=clause_split,
                          protect_names=protect_names or None)
    best, table = tune_decoding(checkpoint, pairs, beam_list, lenpen_list, flags)
    for beam, lenpen, bleu in table:
        typer.echo(f"beam {beam} lenpen {lenpen:.2f}: BLEU {bleu:.2f} on {valid} ({len(pairs.source)} pairs)")
    if half:
        from nmt.training.tune import half_precision_bleu

        full = max(bleu for _, _, bleu in table)  # the best setting's
        rounded = half_precision_bleu(checkpoint, pairs, replace(flags, beam=best["beam_size"], lenpen=best["lenpen"]))
        delta = rounded - full
        typer.echo(f"fp16 weights change BLEU on {valid} by {delta:+.2f}")
    stored = {**best, **({"max_piece_tokens": clause_split} if clause_split else {}),
              **({"protect_names": True} if protect_names else {})}
    write_release(checkpoint, stored, str(out), half)
    typer.echo(f"best on {valid}: beam {best['beam_size']}, lenpen {best['lenpen']}; written to {out}")


@app.command("shortlist")
def build_shortlist(
    model: Path = typer.Option(..., "--model", "-m", help="Checkpoint to add the shortlist to."),
    out: Path = typer.Option(..., "--output", "-o", help="Where to write the checkpoint with its shortlist."),
    data: str = typer.Option(None, "--data", help="Embedded training corpora, as for nmt train (e.g. "
                             "multi30k,tatoeba)."),
    src_file: str = typer.Option(None, "--src-file", help="English side of a local parallel corpus (.gz ok)."),
    tgt_file: str = typer.Option(None, "--tgt-file", help="French side of a local parallel corpus."),
    prepared: str = typer.Option(None, "--prepared", help="A folder `nmt prepare` made with the model's "
                                 "sentencepiece model: its token ids are counted, nothing is tokenized again; the "
                                 "counts are kept there, for lists of other sizes."),
    per_token: int = typer.Option(300, "--per-token", help="Target tokens each source token adds (those met most "
                                  "often with it, beyond the frequent ones)."),
    frequent: int = typer.Option(3000, "--frequent", help="Most frequent target tokens, which every sentence keeps."),
) -> None:
    """Count which target tokens go with each source token in training pairs, and store the lexical
    shortlist this gives in a checkpoint, for `nmt translate --shortlist`."""
    _configure_logging(False)
    import dataclasses

    from nmt.data.sources import DataSpec, parse_names, training_pairs
    from nmt.model.checkpoint import load_checkpoint, save_checkpoint
    from nmt.model.shortlist import count_prepared, shortlist_from_text

    if per_token < 1 or frequent < 0:
        raise UsageError("--per-token must be at least 1 and --frequent not negative")
    checkpoint = load_checkpoint(model)
    if prepared:
        from nmt.data.prepare import TokenCorpus, open_prepared

        if data or src_file or tgt_file:
            raise UsageError("give --prepared or the data options, not both")
        folder = open_prepared(prepared)
        if folder.tokenizer.model_bytes != checkpoint.spm_model:
            raise UsageError(f"{prepared} was tokenized with another sentencepiece model than {model}'s")
        count = len(TokenCorpus(folder.folder))
        shortlist = count_prepared(folder.folder, checkpoint.config.vocab_size).shortlist(per_token, frequent)
    else:
        spec = DataSpec(names=parse_names(data) if data else (), src_file=src_file, tgt_file=tgt_file)
        pairs = training_pairs(spec)
        count = len(pairs)
        shortlist = shortlist_from_text(checkpoint.tokenizer(), pairs.source, pairs.target,
                                        checkpoint.config.vocab_size, per_token, frequent)
    save_checkpoint(out, dataclasses.replace(checkpoint, shortlist=shortlist))
    typer.echo(f"shortlist of {per_token} target tokens per source token and the {frequent} most frequent, from "
               f"{count} pairs, written with the model to {out}")


@app.command()
def plot(
    runs: list[str] = typer.Argument(..., help="`nmt train --out` folders (or their metrics.jsonl files); "
                                     "A,B for a run B that continued A (--init-from), drawn as one line."),
    out: Path = typer.Option(None, "--output", "-o", help="PNG to write. Default the first run's folder/curves.png."),
    x: str = typer.Option("steps", "--x", help="steps, or minutes of training time."),
) -> None:
    """Draw runs' loss and validation BLEU curves to one PNG."""
    from nmt.training.plot import plot_runs

    typer.echo(f"written to {plot_runs(runs, out, x)}")


@app.command()
def export(
    model: Path = typer.Option(None, "--model", "-m", help=MODEL_HELP),
    output_format: str = typer.Option("ctranslate2", "--format", help="ctranslate2 (the only one so far)."),
    out: Path = typer.Option(..., "--out", help="Model directory to write."),
    quantization: str = typer.Option(None, "--quantization", help="CTranslate2 weight type, e.g. int8, float16."),
) -> None:
    """Export a model to CTranslate2 (with its sentencepiece model beside it)."""
    from nmt.apps.export import export_ctranslate2
    from nmt.model.checkpoint import load_checkpoint

    if output_format != "ctranslate2":
        raise UsageError(f"--format must be ctranslate2, not {output_format!r}")
    written = export_ctranslate2(load_checkpoint(find_model(model)), out, quantization)
    typer.echo(f"CTranslate2 model written to {written}")


def _read_yaml(path: Path) -> dict:
    import yaml

    try:
        values = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read config {path}: {exc}") from None
    if not isinstance(values, dict):
        raise UsageError(f"config {path} must be a mapping of option names to values")
    return {k.replace("-", "_"): v for k, v in values.items()}


def _text_input(source, path: Path | None, encoding: str | None, input_format: str):
    """(a stream of UTF-8 lines, the line end to write) for text read a line at a time: in its encoding
    (nmt.apps.encodings.sniff over its first 64 KiB, recoded as it is read where not UTF-8); binary data refused
    in one line; CRLF written where its first line ends so."""
    from nmt.apps.encodings import NotText, recoded, sniff
    from nmt.apps.files import looks_binary

    if not hasattr(source, "peek"):  # a stream handed in (a test's stdin): buffered to look at its start
        source = io.BufferedReader(source, 65536)
    head = source.peek(65536)[:65536]
    named = f"{path}" if path is not None else "the input"
    if path is not None and input_format != "jsonl" and looks_binary(head):
        raise UsageError(f"{named} is not a text file: it holds binary data (a picture, an archive?)")
    try:
        found, how = sniff(head, "txt", encoding)
    except NotText as exc:
        raise UsageError(f"{named} is not a text file: {exc}") from None
    if found == "cp1252" and how != "--encoding":
        logging.getLogger("nmt").warning("%s is not UTF-8 (invalid UTF-8 and no UTF-8 sequence in its start): read "
                                         "as Windows-1252 (Latin-1); --encoding says otherwise", named)
    first = head.split(b"\n", 1)[0] if b"\n" in head else b""
    newline = "\r\n" if first.endswith(b"\r") or first.endswith(b"\r\x00") else "\n"
    return (source if found == "utf-8" else recoded(source, found)), newline


def _open_input(path: Path | None):
    if path is None:
        if sys.stdin is None:
            raise UsageError("standard input is closed: give --input FILE")
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


@contextlib.contextmanager
def _output(path: Path | None, input: Path | None) -> Iterator[TextIO]:
    """stdout, or the file `path`: written as PATH.partial and renamed to PATH once every line is in it, so
    PATH is never left half-written; after an interruption PATH.partial holds the lines finished (where there
    are some); after an error nothing is left.
    A device or a pipe (not a regular file) is written in place. The reader of stdout going away (`nmt
    translate | head -1`) ends the command quietly, as Unix tools do."""
    if path is None:
        if sys.stdout is None:
            raise UsageError("standard output is closed: give --output FILE")
        if (sys.stdout.encoding or "").lower().replace("-", "") != "utf8" and hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(encoding="utf-8")  # French needs more than ASCII: the output is UTF-8 always
        try:
            yield sys.stdout
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more can reach the reader
            raise typer.Exit(0) from None
        except OSError as exc:
            raise NmtError(f"cannot write the translations: {exc.strerror or exc}") from None
        return
    if input is not None and path.exists() and input.exists() and path.samefile(input):
        raise UsageError(f"--output {path} is the input file: write the translations to another file")
    # a device or pipe, however it is reached (/dev/stdout is a link to one), is written in place, never replaced
    in_place = path.exists() and (not path.is_file() or path.absolute().parts[1:2] in (("dev",), ("proc",)))
    target = path if in_place else path.with_name(path.name + ".partial")
    try:
        if not in_place and target.is_symlink():  # ours to write: a link planted there is not followed
            target.unlink()
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (0 if in_place else os.O_NOFOLLOW)
        sink = open(os.open(target, flags, 0o666), "w", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    where = "" if in_place else f" (they are in {target})"
    try:
        with sink:
            yield sink
        if not in_place:
            os.replace(target, path)
    except Interrupted as stop:
        if not in_place and target.stat().st_size == 0:  # nothing finished: nothing to keep
            target.unlink(missing_ok=True)
            raise stop from None
        raise stop.after(0, where) from None
    except BaseException as exc:
        if not in_place:
            target.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise NmtError(f"cannot write {target}: {exc.strerror or exc}") from None
        raise


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP raise nmt.errors.Interrupted: the command flushes what is finished, stops
    its worker processes and exits with 128 + the signal's number. A second signal ends it at once."""

    def stop(signal_number, frame):
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_DFL)
        stop_now_or_later(signal_number)

    with stop_signals_handled_by(stop):
        yield


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a command imports torch and loads its model, then the
    objects made so far frozen (never scanned again) and the collector back on.

    Start-up makes a few hundred thousand objects that live as long as the process and little garbage,
    and `import torch` alone runs hundreds of collections over them. Frozen objects also stay untouched
    in forked decoding workers, whose collections would otherwise write to every page of the parent's
    objects that they share."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _configure_logging(quiet: bool, progress: bool = False) -> None:
    """Warnings (and, for long jobs, progress) on stderr; `--quiet` keeps only errors."""
    level = logging.ERROR if quiet else logging.INFO
    layout = "%(asctime)s %(message)s" if progress else "%(levelname)s: %(message)s"
    logging.basicConfig(level=level, format=layout, datefmt="%H:%M:%S", stream=sys.stderr)
    logging.getLogger("nmt").setLevel(level)
    for noisy in ("datasets", "httpx", "huggingface_hub", "fsspec"):
        logging.getLogger(noisy).setLevel(logging.ERROR)


# Commands that leave nothing to clean up once they return: their output is written, flushed and closed
# and their worker processes are gone. The interpreter's teardown with torch loaded is a noticeable share of
# a short translation, so these end the process at once.
EXIT_AT_ONCE = ("translate",)


def main() -> None:
    """Bad usage as one line (exit 2), Ctrl-C outside `interruptible` as "Aborted!" (exit 1), nmt's own errors,
    and any other exception as one line too."""
    try:
        try:
            code = app(standalone_mode=False)  # click's errors come here, to be written in one line
        except typer.TyperException as exc:  # click's (typer's copy): a usage error, or help asked by no arguments
            context = getattr(exc, "ctx", None)
            if context is None or type(exc).__name__ == "NoArgsIsHelpError":
                exc.show()
            else:
                print(f"error: {exc.format_message()} (see {context.command_path} --help)", file=sys.stderr)
            sys.exit(exc.exit_code)
        except typer.Abort:
            print("Aborted!", file=sys.stderr)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)
    except SystemExit as exc:
        if exc.code in (None, 0) and len(sys.argv) > 1 and sys.argv[1] in EXIT_AT_ONCE:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except BrokenPipeError:
                pass  # the reader went away: nothing more to write, as below
            os._exit(0)
        raise
    except NmtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug: still one line, with the way to the traceback
        if os.environ.get("NMT_DEBUG"):
            raise
        print(f"error: unexpected {type(exc).__name__}: {exc} (NMT_DEBUG=1 shows where; please report it)",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
