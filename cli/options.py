"""The decoding options, declared once for every command that decodes.

    @app.command()
    @decoding_options(skip=("nbest",))
    def evaluate(test: str = typer.Option(...), decoding: DecodingFlags = None) -> None:
        config = DecodingConfig.resolve(decoding, checkpoint)

`decoding_options` adds the options to the command's signature (typer reads the signature), gathers what the
user gave into one DecodingFlags and passes it as `decoding`; nmt.decoding.configuration resolves it over the
model's stored defaults. A command takes all of them but those it skips, or only those it names.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Literal

import typer

from nmt.decoding.configuration import DecodingFlags
from nmt.model import PRECISIONS

PRECISION_HELP = ("fp32, bf16 (CPUs with bf16 support, GPUs), fp16 (CUDA), int8 (CPU, dynamic quantization of the "
                  "linear layers with torchao) or int8_bf16 (CPU, int8 weights with bf16 activations: the fastest at "
                  "batch 1 on CPUs with native bf16), int8_fp32 (x86 CPU, int8 weights and GEMMs with fp32 "
                  "activations) or auto (the default: the fastest measured for this device whose translations do not "
                  "change with the lines batched beside them: bf16 with AMX, int8_fp32 on other x86 CPUs, fp32 "
                  "elsewhere, fp16 on CUDA).")
SHORTLIST_HELP = ("Score only the target tokens of the model's lexical shortlist for each sentence (see `nmt "
                  "shortlist`): faster, with slightly different translations (within 0.1 BLEU on the general "
                  "model's test sets). Default: on for beam search on a CPU in int8 or bf16 where the model has "
                  "one, off for greedy search (slower there), a glossary or an ensemble.")

# name -> (type, typer option); every default None: "not given", so that the model's stored default applies
DECODING_OPTIONS = {
    "beam": (int, typer.Option(None, "--beam", "-b", help="Beam size, 1 = greedy. Default: the model's, else 4.")),
    "nbest": (int, typer.Option(None, "--nbest", help="Hypotheses per line (with --format jsonl only). Default 1.")),
    "lenpen": (float, typer.Option(None, "--lenpen", help="Length penalty: hypotheses are ranked by log_prob / "
                                   "length**lenpen, length counting EOS. Default: the model's, else 1.0.")),
    "max_len_a": (float, typer.Option(None, "--max-len-a", help="Target length cap: a * source + b tokens. "
                                      "Default 1.5.")),
    "max_len_b": (int, typer.Option(None, "--max-len-b", help="See --max-len-a. Default 10.")),
    "min_len": (int, typer.Option(None, "--min-len", help="Fewest target tokens before EOS. Default 0.")),
    "no_repeat_ngram": (int, typer.Option(None, "--no-repeat-ngram", help="Never repeat an n-gram of N target "
                                          "tokens in a translation. Default: the model's, else off.")),
    "sampling": (str, typer.Option(None, "--sampling", help="Sample instead of searching: topk:K (from the K most "
                                   "probable tokens) or topp:P (from the fewest whose probabilities sum to P); with "
                                   "--nbest N, N samples a line. For back-translation and diverse n-best lists.")),
    "temperature": (float, typer.Option(None, "--temperature", help="With --sampling: divide log-probabilities by T "
                                        "(below 1 sharper, above 1 flatter). Default 1.")),
    "seed": (int, typer.Option(None, "--seed", help="With --sampling: the same seed and options give the same "
                               "output. Default 0.")),
    "max_tokens": (int, typer.Option(None, "--max-tokens", help="Batch by this many padded source tokens. "
                                     "Default 4096.")),
    "batch_size": (int, typer.Option(None, "--batch-size", help="Batch by sentence count instead of --max-tokens.")),
    "device": (Literal["auto", "cpu", "cuda"], typer.Option(None, "--device", help="Default auto.")),
    "precision": (Literal[PRECISIONS], typer.Option(None, "--precision", help=PRECISION_HELP)),
    "threads": (int, typer.Option(None, "--threads", help="CPU threads for torch. Default all cores.")),
    "workers": (int, typer.Option(None, "--workers", help="CPU: batches decoded at once, in forked processes of one "
                                  "thread each. Default: as many as --threads (nmt serve: 1).")),
    "no_cache": (bool, typer.Option(None, "--no-cache", help="Recompute the decoder prefix every step (slow; "
                                    "checks).")),
    "shortlist": (bool, typer.Option(None, "--shortlist/--no-shortlist", help=SHORTLIST_HELP)),
    "exact": (bool, typer.Option(None, "--exact", help="The reference path: fp32 over the whole vocabulary "
                                 "(--precision fp32, no shortlist).")),
    "cuda_graphs": (bool, typer.Option(None, "--cuda-graphs/--no-cuda-graphs", help="On CUDA, replay each decoder "
                                       "step as a captured CUDA graph. Default on.")),
    "no_protect": (bool, typer.Option(None, "--no-protect", help="Translate the text as it is: no sentence case for "
                                      "lines in capitals, no placeholders for links, addresses, codes, numbers and "
                                      "emoji (models trained since nmt has them).")),
    "clause_split": (int, typer.Option(None, "--clause-split", help="Cut a sentence longer than N sentencepiece "
                                       "tokens at clause punctuation (then at word starts) and translate the pieces "
                                       "apart. Default: the model's (general: 128; captions: 32), else 128.")),
    "protect_names": (bool, typer.Option(None, "--protect-names/--no-protect-names", help="Also put names "
                                         "(capitalized words the model's vocabulary holds only in pieces) behind "
                                         "placeholders, so that they come through as written. Default: the model's, "
                                         "else off.")),
    "glossary": (Path, typer.Option(None, "--glossary", help="A TSV file of English term TAB French term: where a "
                                    "sentence holds an English term (whole words, any case), its French term is in "
                                    "the translation (constrained beam search).")),
    "min_confidence": (float, typer.Option(None, "--min-confidence", help="Leave a translation whose confidence (its "
                                           "tokens' mean log-probability) is below this empty; the count goes to "
                                           "stderr.")),
    "alignments": (bool, typer.Option(None, "--alignments", help="With --format jsonl: word alignments (Pharaoh i-j "
                                      "over whitespace words) from the model's cross-attention.")),
    "formality": (Literal["formal", "informal", "auto"], typer.Option(None, "--formality", help="The register of the "
                  "French: formal (vous, votre: interfaces, business), informal (tu, ton: friends, family) or auto "
                  "(the model's own choice, which may mix them). Default: formal with a model trained with register "
                  "tags (the shipped general model), else auto.")),
    "typography": (Literal["fr", "fr-CA", "none"], typer.Option(None, "--typography", help="How the French is "
                   "written: fr (the default: numbers as 1 299,5, amounts as 1 299 €, dates as 3 mars 2025, « » "
                   "quotes, a no-break space before : and a narrow one before ; ! ?, elisions repaired), fr-CA (the "
                   "same without the space before ; ! ?) or none (the model's own text).")),
    "apostrophe": (Literal["keep", "straight", "curly"], typer.Option(None, "--apostrophe", help="With --typography "
                   "fr or fr-CA: every apostrophe straight (') or curly (’), or keep (the default) each as the model "
                   "wrote it.")),
    "memory": (list[Path], typer.Option(None, "--memory", help="A translation memory: TMX, a gettext .po, or English "
               "TAB French lines; given several times, the first with a match wins. A line with an exact match (case, "
               "spaces and accelerators aside) takes its translation; a fuzzy one is offered in --format jsonl's "
               "\"memory\".")),
    "memory_threshold": (float, typer.Option(None, "--memory-threshold", help="The similarity (1 - Levenshtein "
                         "distance / length) at or above which a fuzzy match of --memory is offered. Default 0.85.")),
    "no_memory": (bool, typer.Option(None, "--no-memory", help="Do not consult the shipped interface memory (102k "
                  "translations of free applications' strings), which serves exact matches of lines of up to six "
                  "words.")),
    "verbose": (bool, typer.Option(None, "--verbose", "-v", help="Print the decoding configuration resolved from "
                                   "these options, the model's defaults and the library's, on stderr.")),
}


def decoding_options(skip: tuple[str, ...] = (), only: tuple[str, ...] | None = None):
    """Give a command the decoding options (all, less `skip`, or `only` these) as `decoding: DecodingFlags`."""
    names = [name for name in (only or DECODING_OPTIONS) if name not in skip]
    unknown = set(names) - set(DECODING_OPTIONS)
    if unknown:
        raise ValueError(f"no decoding options {sorted(unknown)}")
    return option_group("decoding", {name: DECODING_OPTIONS[name] for name in names}, DecodingFlags)


def option_group(parameter: str, table: dict, build):
    """A decorator that puts the options of `table` (name -> (type, typer option)) into a command's signature in
    place of its parameter `parameter` (typer reads the signature), and calls the command with what the user gave
    gathered into one value, parameter=build(**{name: value})."""

    def wrap(command):
        own = inspect.signature(command, eval_str=True)
        group = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
                 for name, (kind, option) in table.items()]
        position = list(own.parameters).index(parameter)
        kept = [each for name, each in own.parameters.items() if name != parameter]
        parameters = [each.replace(kind=inspect.Parameter.KEYWORD_ONLY) for each in kept]
        parameters[position:position] = group

        @functools.wraps(command)
        def with_flags(**given):
            gathered = build(**{name: given.pop(name) for name in table})
            return command(**{parameter: gathered}, **given)

        with_flags.__signature__ = own.replace(parameters=parameters)
        with_flags.__annotations__ = {each.name: each.annotation for each in parameters}
        return with_flags

    return wrap
