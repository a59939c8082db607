"""The `nmt` console script itself: help, version, info."""

from __future__ import annotations

import gc
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nmt import __version__
from nmt.data.corpus import load_embedded
from nmt.model.checkpoint import load_checkpoint
from nmt_cli.common import collection_paused

# the console script pip installed beside this interpreter (the real entry point, not a module call)
NMT = shutil.which("nmt", path=str(Path(sys.executable).parent)) or "nmt"


def test_help_lists_every_command_with_a_description():
    result = subprocess.run([NMT, "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for command in ("translate", "score", "attention", "train", "eval", "info", "average", "tune", "shortlist",
                    "plot", "export"):
        line = next(line for line in result.stdout.splitlines() if line.strip().startswith(command + " "))
        assert len(line.split()) > 2, f"{command} has no description"


def test_version():
    result = subprocess.run([NMT, "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == f"nmt {__version__}"


def test_info_shows_config_vocabulary_and_parameters(tiny_checkpoint):
    result = subprocess.run([NMT, "info", str(tiny_checkpoint)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    checkpoint = load_checkpoint(tiny_checkpoint)
    n_parameters = sum(t.numel() for t in checkpoint.weights.values())
    assert f"parameters: {n_parameters:,}" in result.stdout
    assert f"vocabulary: {checkpoint.tokenizer().vocab_size}" in result.stdout
    assert "d_model: 32" in result.stdout and "beam_size=2" in result.stdout
    named = subprocess.run([NMT, "info", "general"], capture_output=True, text=True)  # a shipped model's name
    assert named.returncode == 0 and "general.pt" in named.stdout and "parameters: " in named.stdout


def test_unknown_option_is_a_usage_error_without_traceback():
    result = subprocess.run([NMT, "translate", "--bogus"], capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_collection_paused_freezes_what_loading_made_and_turns_the_collector_back_on():
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        with collection_paused():
            assert not gc.isenabled()
            loaded = [[index] for index in range(1000)]  # objects that outlive loading, as a model's do
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(loaded)
        with pytest.raises(ValueError), collection_paused():
            raise ValueError("a model that fails to load")
        assert gc.isenabled()
        gc.disable()  # a caller that had turned it off keeps it off
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_translate_eval_serve_and_score_take_the_decoding_options_declared_once():
    """Every decoding option has one declaration (cli/options.py): the commands that decode take it with the
    same flags and help; eval has what it lacked (--min-len, --sampling, --no-cache, -q, -o)."""
    import typer

    from nmt_cli.main import app
    from nmt_cli.options import DECODING_OPTIONS

    commands = typer.main.get_command(app).commands
    options = {name: {param.name: param for param in commands[name].params}
               for name in ("translate", "eval", "serve", "score")}
    assert set(DECODING_OPTIONS) <= set(options["translate"])
    for command in ("eval", "serve", "score"):
        for name in set(DECODING_OPTIONS) & set(options[command]):
            ours, theirs = options[command][name], options["translate"][name]
            assert (ours.opts, ours.secondary_opts, ours.help) == (theirs.opts, theirs.secondary_opts, theirs.help)
    assert {"min_len", "sampling", "no_cache", "quiet", "output", "verbose", "glossary"} <= set(options["eval"])


def test_verbose_prints_the_configuration_resolved_over_the_models_defaults(tiny_checkpoint):
    """The tiny model stores beam 2 and a 1.0x + 5 length cap; --beam overrides its beam, --exact sets fp32,
    and what auto would choose is never printed as auto."""
    given = subprocess.run([NMT, "translate", "--model", str(tiny_checkpoint), "--beam", "3", "--exact",
                            "--verbose"], input="A dog runs.\n", capture_output=True, text=True)
    assert given.returncode == 0, given.stderr
    line = next(line for line in given.stderr.splitlines() if line.startswith("decoding: "))
    assert "beam 3" in line and "length 0..1x+5" in line and "fp32 on cpu" in line
    default = subprocess.run([NMT, "eval", "--model", str(tiny_checkpoint), "--test", "multi30k:valid", "--limit",
                              "3", "-v", "-q"], capture_output=True, text=True)
    assert default.returncode == 0, default.stderr
    line = next(line for line in default.stderr.splitlines() if line.startswith("decoding: "))
    assert "beam 2" in line and " auto " not in line and "on cpu" in line


def test_eval_writes_its_translations_and_samples_like_translate(tiny_checkpoint, tmp_path):
    sampling = ["--sampling", "topk:5", "--seed", "3", "--model", str(tiny_checkpoint), "--exact"]
    done = subprocess.run([NMT, "eval", "--test", "multi30k:valid", "--limit", "4", "-o", str(tmp_path / "hyp.fr"),
                           "-q", *sampling], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    sources = load_embedded("multi30k", "valid").source[:4]
    translated = subprocess.run([NMT, "translate", *sampling], input="\n".join(sources) + "\n", capture_output=True,
                                text=True, check=True).stdout
    assert (tmp_path / "hyp.fr").read_text() == translated


@pytest.mark.slow
def test_one_vocabulary_across_commands_with_the_old_names_still_accepted(tiny_checkpoint, tmp_path):
    """-i/--input, -o/--output, --ref and --format text|jsonl in translate, eval and score; every setting of
    nmt train is a flag; choices are listed in --help; the old spellings (eval --src/--json, score
    --src/--tgt) still work, unlisted."""
    import typer

    from nmt.training.config import TrainConfig
    from nmt_cli.main import app

    commands = typer.main.get_command(app).commands
    flags = {name: {opt for param in command.params for opt in param.opts} for name, command in commands.items()}
    assert {"-i", "--input", "--format"} <= flags["translate"] & flags["eval"] & flags["score"]
    assert {"--ref"} <= flags["eval"] & flags["score"] and {"-o", "--output"} <= flags["translate"] & flags["eval"]
    assert set(TrainConfig.__dataclass_fields__) <= {param.name for param in commands["train"].params}
    assert "<text|jsonl>" in subprocess.run([NMT, "eval", "--help"], capture_output=True, text=True).stdout
    bad = subprocess.run([NMT, "translate", "--format", "xml"], capture_output=True, text=True)
    assert bad.returncode == 2 and "'xml' is not one of 'text', 'jsonl'" in bad.stderr
    (tmp_path / "in.en").write_text("A dog runs.\nTwo men talk.\n")
    (tmp_path / "ref.fr").write_text("Un chien court.\nDeux hommes parlent.\n")
    model = ["--model", str(tiny_checkpoint)]
    new = subprocess.run([NMT, "score", "-i", str(tmp_path / "in.en"), "--ref", str(tmp_path / "ref.fr"), *model],
                         capture_output=True, text=True)
    old = subprocess.run([NMT, "score", "--src", str(tmp_path / "in.en"), "--tgt", str(tmp_path / "ref.fr"), *model],
                         capture_output=True, text=True)
    model.append("--exact")
    assert new.returncode == 0 and new.stdout == old.stdout and len(new.stdout.splitlines()) == 2
    new = subprocess.run([NMT, "eval", "-i", str(tmp_path / "in.en"), "--ref", str(tmp_path / "ref.fr"), "--format",
                          "jsonl", "-q", *model], capture_output=True, text=True)
    old = subprocess.run([NMT, "eval", "--src", str(tmp_path / "in.en"), "--ref", str(tmp_path / "ref.fr"), "--json",
                          "-q", *model], capture_output=True, text=True)
    assert new.returncode == 0 and new.stdout == old.stdout and json.loads(new.stdout)["lines"] == 2
