"""The commands that decode: translate, serve, score, attention, eval."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Literal

import typer

from nmt.apps.server.config import ApiKeys, ServeSettings
from nmt.decoding.configuration import DecodingFlags
from nmt.errors import UsageError
from nmt_cli.common import (
    FILE_LIMIT_OPTIONS,
    MODEL_HELP,
    MODELS_HELP,
    collection_paused,
    configure_logging,
    decoded_input,
    file_limits,
    file_translator,
    find_model,
    interruptible,
    load_translator,
    opened_input,
    opened_output,
    resolve_decoding,
)
from nmt_cli.options import decoding_options


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
    configure_logging(quiet)
    source = opened_input(input)
    newline = "\n"
    if not whole_file:
        source, newline = decoded_input(source, input, encoding, input_format)
    data = None
    if whole_file:  # checked before the model loads: a hostile file costs no more than its reading
        data = source.read()
        check_file(input_format, data, limits, encoding)
    with collection_paused():
        from nmt.decoding.streams import translate_document, translate_stream

        translator, config = load_translator(model, decoding)
    window = 1 if interactive or (input is None and sys.stdin.isatty()) else 1000
    try:
        with interruptible(), opened_output(output, input) as sink:
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


SERVE = ServeSettings()  # the defaults of `nmt serve`'s options


@decoding_options(skip=("nbest", "sampling", "temperature", "seed", "no_cache", "min_confidence", "alignments"))
def serve(
    model: Path = typer.Option(None, "--model", "-m", help=MODEL_HELP),
    host: str = typer.Option(SERVE.host, "--host", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(SERVE.port, "--port", help="TCP port."),
    max_chars: int = typer.Option(SERVE.max_chars, "--char-limit", "--max-chars", help="Characters of text one "
                                  "request may hold (413 above)."),
    token_limit: int = typer.Option(SERVE.max_tokens, "--token-limit", help="Tokens the model reads of one request "
                                    "(413 above): what a request costs, whatever its script."),
    batch_limit: int = typer.Option(SERVE.batch_limit, "--batch-limit", help="Texts one /translate request may "
                                    "hold (400 above; default: any)."),
    req_limit: int = typer.Option(SERVE.req_limit, "--req-limit", help="Requests a minute one client address may "
                                  "make (429 with Retry-After above; default: any). A key of --api-keys has its own."),
    max_queue: int = typer.Option(SERVE.max_queue, "--max-queue", help="Lines that may wait; more is a 503 with "
                                  "Retry-After."),
    max_queue_chars: int = typer.Option(SERVE.max_queue_chars, "--max-queue-chars", help="Characters that may "
                                        "wait; more is a 503 with Retry-After."),
    max_batch_lines: int = typer.Option(SERVE.max_batch_lines, "--max-batch-lines", help="Lines of queued requests "
                                        "decoded together, taken in turns from each client."),
    batch_wait_ms: float = typer.Option(SERVE.batch_wait_ms, "--batch-wait-ms", help="How long the first request "
                                        "waits for others to share its batch."),
    max_request_seconds: float = typer.Option(SERVE.max_request_seconds, "--max-request-seconds", help="A "
                                              "request's lines still waiting after this long are dropped (503); so "
                                              "are those of a client that went away."),
    read_timeout: float = typer.Option(SERVE.read_timeout, "--read-timeout", help="Seconds a client may take to "
                                       "send a request's headers, and then its whole body (408 after)."),
    max_connections: int = typer.Option(SERVE.max_connections, "--max-connections", help="Connections served at "
                                        "once; a new one closes the one held longest without a request to answer."),
    max_client_connections: int = typer.Option(SERVE.max_client_connections, "--max-client-connections",
                                               help="Connections one client address may hold at once; more get a "
                                               "503."),
    max_file_bytes: int = typer.Option(SERVE.max_file_bytes, "--max-file-bytes", help="The largest file "
                                       "/translate_file takes (413 above)."),
    max_file_jobs: int = typer.Option(SERVE.max_file_jobs, "--max-file-jobs", help="Files and HTML requests "
                                      "translated at once; more get a 503."),
    drain_timeout: float = typer.Option(SERVE.drain_timeout, "--drain-timeout", help="On SIGTERM or Ctrl-C, "
                                        "seconds the requests in flight have to finish before the server exits "
                                        "anyway."),
    max_file_seconds: float = typer.Option(SERVE.max_file_seconds, "--max-file-seconds", help="A file's "
                                           "translation stops after this long (503); it also stops when its client "
                                           "goes away."),
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
    configure_logging(quiet)
    try:
        from nmt.apps.server.process import listening
        from nmt.apps.server.process import serve as serve_on
    except ImportError as exc:
        raise UsageError(f"nmt serve needs the serve extra ({exc.name} is missing): pip install "
                         "'nmt-transformer[serve]'") from None
    from nmt.apps.files import SERVER_LIMITS

    settings = ServeSettings(
        host=host, port=port, max_chars=max_chars, max_tokens=token_limit, batch_limit=batch_limit,
        req_limit=req_limit, max_queue=max_queue, max_queue_chars=max_queue_chars, max_batch_lines=max_batch_lines,
        batch_wait_ms=batch_wait_ms, max_request_seconds=max_request_seconds, read_timeout=read_timeout,
        max_connections=max_connections, max_client_connections=max_client_connections,
        max_file_bytes=max_file_bytes, max_file_jobs=max_file_jobs, max_file_seconds=max_file_seconds,
        drain_timeout=drain_timeout, quiet=quiet, api_keys=ApiKeys.read(api_keys, api_key),
        file_limits=file_limits(SERVER_LIMITS, max_chars=max_file_chars, max_depth=max_file_depth,
                                max_inflated=max_file_inflated, max_ratio=max_file_ratio))
    with collection_paused():
        from nmt.decoding.configuration import knows_registers
        from nmt.decoding.translate import Translator

        # one worker unless --workers says otherwise: requests are batched together already
        checkpoint, _, config = resolve_decoding([model] if model else None, decoding, workers=1)
    settings = replace(settings, model_name=find_model(model).name, decoding=config.to_dict(),
                       registers=knows_registers(checkpoint))
    listener = listening(host, port)
    if not quiet:
        mode = config.precision + (", shortlist" if config.shortlist else "")
        typer.echo(f"nmt serve: http://{host}:{port} ({mode}; loading the model; /health answers 200 once it is "
                   "loaded)", err=True)
    serve_on(lambda: Translator.from_checkpoint(checkpoint, config).read_memories(), config.search, settings,
             listener)


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

    configure_logging(False)
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
        for number, line in enumerate(read_stream_lines(opened_input(input)), 1):
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
    with opened_output(output, input or src) as sink:
        for pair in scorer.score(sources, targets):
            sink.write((pair.to_json(per_token) if output_format == "jsonl" else pair.to_text(per_token)) + "\n")


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
    configure_logging(False)
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
    target = translator.search_tokens([source])[0][0].tokens
    weights = cross_attention(translator.model, source, target)
    pieces = translator.tokenizer.processor.id_to_piece
    layers = weights.size(0)
    written = draw_attention(weights, [pieces(i) for i in source], [pieces(i) for i in target], out,
                             layer=layers + 1 - ALIGNMENT_LAYER if layer is None else layer, head=head, grid=grid)
    typer.echo(translator.tokenizer.decode(target))
    typer.echo(f"written to {written}", err=True)


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
    configure_logging(quiet)
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
            with opened_output(output, None) as sink:
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
