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


def module_imports() -> dict[str, set[str]]:
    """Each nmt module's nmt modules imported, at its top or inside a function (a lazy import is still a tie)."""
    graph = {}
    for path in sorted(NMT.rglob("*.py")):
        name = ".".join(("nmt", *path.relative_to(NMT).with_suffix("").parts)).removesuffix(".__init__")
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nmt"):
                targets.add(node.module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name.startswith("nmt."))
        graph[name] = {target for target in targets if target != name}
    return graph


def circles_through(start: str, graph: dict[str, set[str]]) -> list[str]:
    """The import paths from `start` back to it (a package's __init__ is no member: importing nmt.model.x imports
    nmt.model)."""
    found, seen = [], set()

    def walk(module: str, path: list[str]) -> None:
        for target in sorted(graph.get(module, ())):
            if target == start:
                found.append(" -> ".join([*path, start]))
            elif target not in seen and target in graph and target.count(".") > 1:
                seen.add(target)
                walk(target, [*path, target])

    walk(start, [start])
    return found


def test_no_two_modules_import_each_other_in_a_circle():
    """backend and native, files and office, protect and casing did (issue 82): each circle is a module that
    does two jobs."""
    graph = module_imports()
    circles = [circle for start in graph for circle in circles_through(start, graph)]
    assert not circles, circles[:5]
