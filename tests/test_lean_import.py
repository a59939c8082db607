"""`import torch` with placeholders for the submodules translating never uses. torch is imported once per
process, so each case runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from nmt_cli.lean_import import CHECKED_TORCH, DEFERRED, REGISTERING, installed_torch_release

checked_release = pytest.mark.skipif(installed_torch_release() != CHECKED_TORCH,
                                     reason=f"placeholders are used with torch {CHECKED_TORCH} only")


def run_python(code: str) -> dict:
    """Runs `code` after importing torch through `import_torch`; returns the JSON of its last line."""
    prelude = """
        import json, math, sys
        from nmt_cli import lean_import
        from nmt_cli.lean_import import DEFERRED

        def states():
            return {name: type(sys.modules[name]).__name__ for name in DEFERRED}
    """
    script = textwrap.dedent(prelude) + textwrap.dedent(code)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@checked_release
def test_translate_runs_none_of_the_deferred_submodules(tiny_checkpoint, tmp_path):
    source, output = tmp_path / "in.en", tmp_path / "out.fr"
    source.write_text("a man rides a horse .\n\ntwo dogs play in the snow .\n")
    report = run_python(f"""
        from nmt_cli.main import app
        app(["translate", "--model", {str(tiny_checkpoint)!r}, "--input", {str(source)!r},
             "--output", {str(output)!r}, "--precision", "int8_fp32", "-q"], standalone_mode=False)
        print(json.dumps(states()))
    """)
    assert report == dict.fromkeys(DEFERRED, "_Placeholder")
    assert len(output.read_text().splitlines()) == 3


@checked_release
def test_the_first_name_used_from_a_deferred_submodule_runs_them_all():
    report = run_python("""
        torch = lean_import.import_torch()
        before = states()
        from torch.distributions import Normal
        log_prob = Normal(0.0, 1.0).log_prob(torch.tensor(0.0)).item()
        print(json.dumps({"before": before, "after": states(),
                          "log_prob_ok": math.isclose(log_prob, -0.5 * math.log(2 * math.pi), rel_tol=1e-6)}))
    """)
    assert report["before"] == dict.fromkeys(DEFERRED, "_Placeholder")
    assert report["after"] == dict.fromkeys(DEFERRED, "module") and report["log_prob_ok"]


@checked_release
def test_importing_a_torch_module_that_needs_them_runs_them_first():
    # torch._dynamo imports torch.utils._content_store before torch._prims, which a plain `import torch`
    # loads through torch._meta_registrations: a circular import if the placeholders had not run.
    # torch._decomp is also imported by torch._meta_registrations itself, and must be loaded just once.
    report = run_python("""
        torch = lean_import.import_torch()
        import torch._decomp
        decomp = sys.modules["torch._decomp"]
        import torch._dynamo
        exported = torch.export.export(torch.nn.Linear(2, 2), (torch.ones(1, 2),))
        print(json.dumps({"after": states(), "exported": type(exported).__name__,
                          "decomp_once": torch._decomp is decomp and decomp.__spec__.name == "torch._decomp"}))
    """)
    assert report == {"after": dict.fromkeys(DEFERRED, "module"), "exported": "ExportedProgram", "decomp_once": True}


@checked_release
def test_inspect_is_told_the_files_of_the_modules_torch_registers_operators_from():
    report = run_python("""
        import inspect
        lean_import.import_torch()
        told = {name: inspect.modulesbyfile.get(sys.modules[name].__file__) for name in lean_import.REGISTERING}
        print(json.dumps({"told": told, "files_known": len(inspect.modulesbyfile)}))
    """)
    assert report["told"] == {name: name for name in REGISTERING}
    assert report["files_known"] == len(REGISTERING)  # inspect never had to map every module to its file


def test_a_torch_release_not_checked_is_imported_whole(tmp_path):
    report = run_python(f"""
        import os
        os.environ["XDG_CACHE_HOME"] = {str(tmp_path)!r}  # where no check has left a verdict
        lean_import.CHECKED_TORCH = "0.0.1"
        lean_import.import_torch()
        print(json.dumps(states()))
    """)
    assert report == dict.fromkeys(DEFERRED, "module")


def test_other_torch_releases_use_the_placeholders_only_once_checked_here(tmp_path, monkeypatch):
    from nmt_cli import lean_import

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert lean_import.placeholders_fit(CHECKED_TORCH) and not lean_import.placeholders_fit("9.9.9")
    verdict = tmp_path / "nmt" / "lean-import-torch-9.9.9"
    verdict.parent.mkdir()
    verdict.write_text("no\nRuntimeError: ...")
    assert not lean_import.placeholders_fit("9.9.9")
    verdict.write_text("ok\n")
    assert lean_import.placeholders_fit("9.9.9") and not lean_import.placeholders_fit(None)
    assert lean_import.check()  # the installed torch, in a fresh interpreter
    assert (tmp_path / "nmt" / f"lean-import-torch-{installed_torch_release()}").read_text() == "ok\n"
