"""`import torch` without the parts of torch that translating never uses, for `nmt translate` and `nmt eval`.

torch's `__init__` imports everything torch.compile, torch.export and tensor subclasses need, whatever the
program: `import torch` is a large share of a short translation run, and seven of its submodules (with what
they import) take about a third of it (`benchmarks/EXPERIMENTS.md`).
`import_torch()` imports torch with those seven bound as placeholders whose bodies have not run. The bodies
all run, in torch's own order, as soon as a name is looked up in any of them (`torch.export.export`) or a
torch module that torch's own import did not load is imported (`import torch._dynamo`, `import torchao`),
so a program that goes on to use them finds torch as a plain import leaves it. Eager CPU and CUDA kernels
need none of them (`torch._meta_registrations` holds meta kernels, for tracing).

Which submodules can wait depends on the order in which torch's modules import one another, so the
placeholders are used with the torch release this was checked against (`CHECKED_TORCH`), and with any other
release only once `python -m nmt_cli.lean_import --check` (which `make setup` runs) has found them to work
with it on this machine: in a fresh interpreter, translating with a tiny model, then torch.export,
torch._dynamo and torch.distributions after them. torch.Generator() does not work before the placeholders
have run (it needs torch._prims.rng_prims): the CLI never makes one. An unchecked or failed release is
imported whole.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import os
import subprocess
import sys
import types

CHECKED_TORCH = "2.13.0"

# Each is imported by torch/__init__ for its side effects or names and by nothing a translation runs.
# Others that look as heavy (torch.func, torch._higher_order_ops, torch.hub, torch.jit) cannot wait:
# torch's own modules then use them at once or import each other in circles. Nor can torch.nested, which
# `with torch.device("meta")` (Transformer.from_weights) uses.
DEFERRED = ("torch._meta_registrations", "torch.export", "torch.masked", "torch.distributions", "torch.quantization",
            "torch.nn.intrinsic", "torch.profiler")

# torch modules that torch itself imports only when first used, and that import nothing the placeholders
# hold: importing these leaves the placeholders waiting.
INDEPENDENT = frozenset({"torch.utils.serialization", "torch.utils.serialization.config", "torch.utils._device"})

# torch registers two operators while it imports itself and records the source line of each through
# inspect.getframeinfo, whose inspect.getmodule maps every loaded module to its real path to find the
# caller's module: a realpath for each of 800-1000 modules. Told beforehand which modules these
# callers' files hold, inspect finds them at once.
REGISTERING = ("torch.utils._debug_mode._mode", "torch._native.registry")


class _Deferred:
    """The placeholders not run yet, in the order torch imported them."""

    def __init__(self):
        self.pending: list[_Placeholder] = []
        self.running = False

    def run_all(self) -> None:
        self.running = True  # a body that imports torch modules must not start the others in its midst
        try:
            while self.pending:
                self.pending.pop(0).run()
        finally:
            self.running = False


class _Placeholder(types.ModuleType):
    """A module whose body has not run yet; running it fills this very object (names bound to it elsewhere
    stay valid) and makes it an ordinary module."""

    def __getattr__(self, name: str):
        deferred = self.__dict__.get("_nmt_deferred")
        if deferred is None:  # the import system setting the module up
            raise AttributeError(name)
        if deferred.running:  # another placeholder's body needs this one first
            deferred.pending.remove(self)
            self.run()
        else:
            deferred.run_all()
        return getattr(self, name)

    def run(self) -> None:
        loader = self.__dict__.pop("_nmt_loader")
        del self._nmt_deferred
        self.__class__ = types.ModuleType
        if self.__spec__.submodule_search_locations is not None:
            self.__path__ = self.__spec__.submodule_search_locations
        self.__spec__.loader = self.__loader__ = loader
        loader.exec_module(self)


class _PlaceholderLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, deferred: _Deferred):
        self.loader, self.deferred = loader, deferred

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Placeholder(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        # Without __path__, importing a submodule asks for it and so runs the bodies first.
        module.__dict__.pop("__path__", None)
        module._nmt_loader, module._nmt_deferred = self.loader, self.deferred
        self.deferred.pending.append(module)


class _Imported(importlib.abc.Loader):
    """Hands the import system the module that running the placeholders imported while it looked for it,
    instead of letting it run that module a second time."""

    def __init__(self, module: types.ModuleType):
        self.module, self.spec = module, module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self.spec


class _PlaceholderFinder(importlib.abc.MetaPathFinder):
    """Makes placeholders while torch imports itself; afterwards runs them before any torch module torch's
    import did not load, which may need them (stays on sys.meta_path, idle once they have run)."""

    def __init__(self, names: tuple[str, ...]):
        self.names = frozenset(names)
        self.deferred = _Deferred()

    def find_spec(self, name, path, target=None):
        if not name.startswith("torch") or self.deferred.running:
            return None
        if _torch_initializing():
            if name not in self.names:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None:
                spec.loader = _PlaceholderLoader(spec.loader, self.deferred)
            return spec
        if not self.deferred.pending or name in INDEPENDENT:
            return None
        self.deferred.run_all()
        imported = sys.modules.pop(name, None)
        return None if imported is None else importlib.util.spec_from_loader(name, _Imported(imported))


def _torch_initializing() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and getattr(torch.__spec__, "_initializing", False)


def installed_torch_release() -> str | None:
    try:
        return importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return None


def import_torch(force: bool = False) -> types.ModuleType:
    """torch, imported with DEFERRED as placeholders if this imports it first and the release is one they are
    known to work with (force: whatever the release; for the check)."""
    if "torch" not in sys.modules and (force or placeholders_fit(installed_torch_release())):
        sys.meta_path.insert(0, _PlaceholderFinder(DEFERRED))
        torch_dir = os.path.dirname(importlib.util.find_spec("torch").origin)
        for name in REGISTERING:
            inspect.modulesbyfile[os.path.join(torch_dir, *name.split(".")[1:]) + ".py"] = name
    import torch

    return torch


def verdict_path(release: str) -> str:
    """Where the check's verdict on a torch release is kept: the user's cache folder, as nmt.model.native's."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "nmt", f"lean-import-torch-{release}")


def placeholders_fit(release: str | None) -> bool:
    """Whether the placeholders are known to work with this torch release: the one checked here, or one
    that check() passed on this machine."""
    if release is None:
        return False
    if release == CHECKED_TORCH:
        return True
    try:
        with open(verdict_path(release), encoding="utf-8") as verdict:
            return verdict.read().strip() == "ok"
    except OSError:
        return False


# What check() runs in a fresh interpreter: the placeholders must stay unrun through a translation, and
# what else the CLI may reach must work after them. Not torch.Generator(): with the placeholders unrun it
# raises (it needs torch._prims.rng_prims, which runs them all), so nmt's CLI never makes one (sampling
# draws from numpy's generator).
SMOKE = """
import sys
from nmt_cli import lean_import
torch = lean_import.import_torch(force=True)
from nmt.model.config import ModelConfig
from nmt.model.flat_decoder import FlatDecoder
from nmt.model.transformer import Transformer
from nmt.decoding.search import SearchOptions, search
model = Transformer(ModelConfig.preset("tiny", vocab_size=60, dropout=0.0)).eval()
found = search(FlatDecoder(model), torch.tensor([[5, 6, 7, 2]]), SearchOptions(beam_size=2, max_len_b=4))
assert found and found[0], "no translation"
assert all(type(sys.modules[name]).__name__ == "_Placeholder" for name in lean_import.DEFERRED), "ran early"
assert torch.rand(2).shape == (2,)
from torch.distributions import Normal
Normal(0.0, 1.0).log_prob(torch.tensor(0.0))
import torch._dynamo
assert callable(torch.export.export)
print("ok")
"""


def check() -> bool:
    """Run SMOKE with the installed torch and keep the verdict (placeholders_fit reads it)."""
    release = installed_torch_release()
    if release is None:
        return False
    result = subprocess.run([sys.executable, "-c", SMOKE], capture_output=True, text=True)
    works = result.returncode == 0 and result.stdout.strip().endswith("ok")
    os.makedirs(os.path.dirname(verdict_path(release)), exist_ok=True)
    with open(verdict_path(release), "w", encoding="utf-8") as verdict:
        verdict.write("ok\n" if works else "no\n" + result.stderr[-2000:])
    return works


if __name__ == "__main__":
    if sys.argv[1:] != ["--check"]:
        sys.exit("usage: python -m nmt_cli.lean_import --check")
    fit = check()
    print(f"torch {installed_torch_release()}: nmt's lean import {'works' if fit else 'is not used'} "
          f"({verdict_path(installed_torch_release() or '?')})")
