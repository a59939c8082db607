"""The layers of nmt (docs/ARCHITECTURE.md): each subpackage imports only those below it in LAYERS'
order, so that, say, the model never depends on how a server or the training loop uses it."""

import ast
from pathlib import Path

LAYERS = ["errors", "text", "data", "model", "decoding", "training", "apps"]
NMT = Path(__file__).parent.parent / "nmt"


def test_no_layer_imports_a_layer_above_it():
    upward = []
    for path in sorted(NMT.rglob("*.py")):
        layer = path.relative_to(NMT).parts[0].removesuffix(".py")
        if layer not in LAYERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nmt."):
                target = node.module.split(".")[1]
                if target in LAYERS and LAYERS.index(target) > LAYERS.index(layer):
                    upward.append(f"{path.relative_to(NMT)}:{node.lineno} imports {node.module}")
    assert not upward


def test_every_module_lives_in_a_layer_with_a_docstring():
    loose = [path.name for path in NMT.glob("*.py") if path.stem not in ("__init__", "errors")]
    assert not loose
    for package in LAYERS[1:]:
        assert ast.get_docstring(ast.parse((NMT / package / "__init__.py").read_text())), package
