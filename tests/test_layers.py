"""Layers point downwards (docs/DESIGN.md, Layers): each layer imported alone loads only itself and the
layers below it, and the sans-I/O layers load no sockets, threads or selectors.

How it works: ``LAYERS`` gives every module of the package a level. ``test_each_layer_alone`` imports a
layer's entry modules in a fresh interpreter and lists the modules that appeared: every ``sparkafka``
module among them must sit at a lower level or in the same layer (``protocol`` and ``record`` are
siblings that do not import each other, as are ``net`` and ``broker``), and importing the package, its
errors or ``sparkafka.protocol`` must not load ``socket``, ``threading``, ``selectors``, ``select``,
``ssl`` or the Sender. The interpreter shows what third-party libraries pull in as well (``crc32c``
loads ``threading`` and ``socket`` through ``importlib.metadata``), so ``test_sans_io_sources`` reads
the import statements of ``protocol/`` and ``record/`` themselves, and ``test_imports_point_down``
checks every import statement of the package, deferred ones included, against the levels.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "sparkafka"

BASE = ("sparkafka._version", "sparkafka.errors", "sparkafka._clock", "sparkafka._types", "sparkafka._topic",
        "sparkafka.accel", "sparkafka._accel", "sparkafka.config", "sparkafka.serializers")

# layer -> (level, module prefixes); a module belongs to the layer with the longest matching prefix
LAYERS: dict[str, tuple[int, tuple[str, ...]]] = {
    "base": (0, BASE),
    "protocol": (1, ("sparkafka.protocol",)),
    "record": (1, ("sparkafka.record",)),
    "net": (2, ("sparkafka.net",)),
    "broker": (2, ("sparkafka.broker",)),
    "producer": (3, ("sparkafka.producer",)),
    "spark": (4, ("sparkafka.spark",)),
    "compat": (4, ("sparkafka.compat",)),  # beside spark
    "cli": (5, ("sparkafka.cli", "sparkafka.__main__")),
    "package": (6, ("sparkafka",)),  # the root re-exports the producer's public names, loaded on first use
}

# what to import to load a layer (its entry points; the packages' __init__ alone may import nothing)
ENTRIES: dict[str, tuple[str, ...]] = {
    "base": BASE,
    "protocol": ("sparkafka.protocol",),
    "record": ("sparkafka.record",),
    "net": ("sparkafka.net.client", "sparkafka.net.admin"),
    "broker": ("sparkafka.broker",),
    "producer": ("sparkafka.producer.producer", "sparkafka.producer.arrow.send"),
    "spark": ("sparkafka.spark", "sparkafka.spark.writer"),
    "compat": ("sparkafka.compat.confluent", "sparkafka.compat.kafka_python"),
    "cli": ("sparkafka.cli", "sparkafka.cli.pipeline", "sparkafka.cli.perf", "sparkafka.cli.broker"),
    "package": ("sparkafka",),
}

NO_IO = ("socket", "threading", "selectors", "select", "ssl")
_LOADED = """
import importlib, json, sys
before = set(sys.modules)
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def layer_of(module: str) -> str:
    best, length = "", -1
    for name, (_, prefixes) in LAYERS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = name, len(prefix)
    assert best, f"{module} is in no layer: add it to LAYERS"
    return best


def _may_import(importer: str, imported: str) -> bool:
    a, b = layer_of(importer), layer_of(imported)
    return a == b or LAYERS[b][0] < LAYERS[a][0]


def _loaded(*modules: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _LOADED, *modules], capture_output=True, text=True, check=True,
                         timeout=120)
    loaded: list[str] = json.loads(out.stdout)
    return loaded


@pytest.mark.parametrize("layer", list(ENTRIES))
def test_each_layer_alone(layer: str) -> None:
    loaded = _loaded(*ENTRIES[layer])
    ours = [m for m in loaded if m == "sparkafka" or m.startswith("sparkafka.")]
    assert set(ENTRIES[layer]) <= set(ours)
    above = [m for m in ours if m != "sparkafka" and not _may_import(ENTRIES[layer][0], m)]
    assert above == [], f"importing {layer} loaded modules of other or higher layers"


@pytest.mark.parametrize("modules", [("sparkafka",), ("sparkafka.errors",), ("sparkafka.protocol",)])
def test_no_sockets_threads_or_sender(modules: tuple[str, ...]) -> None:
    loaded = set(_loaded(*modules))
    assert loaded & {*NO_IO, "sparkafka.producer.sender", "sparkafka.net.connection"} == set()
    assert "sparkafka.producer" not in loaded and "pyarrow" not in loaded


def _imports(path: Path, module: str, type_checking: bool = True) -> list[tuple[str, int]]:
    """``(imported module, line)`` for every import statement of a source file, deferred ones included
    (and those under ``if TYPE_CHECKING:`` unless ``type_checking`` is False)."""
    tree = ast.parse(path.read_text(), str(path))
    if not type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                node.body = [ast.Pass()]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            # ``from .. import errors`` / ``from .arrow import bulk`` import modules, not names of the package
            submodules = [f"{target}.{alias.name}" for alias in node.names if _is_module(f"{target}.{alias.name}")]
            found += [(name, node.lineno) for name in submodules]
            if len(submodules) < len(node.names):
                found.append((target, node.lineno))
    return found


def _is_module(name: str) -> bool:
    path = SRC.parent / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _modules() -> list[tuple[Path, str]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        out.append((path, ".".join(parts[:-1] if parts[-1] == "__init__" else parts)))
    return out


def test_imports_point_down() -> None:
    wrong = []
    for path, module in _modules():
        if module == "sparkafka":
            continue  # the facade: its names are imported lazily from the layers below
        for target, line in _imports(path, module):
            if target.startswith("sparkafka") and not _may_import(module, target):
                wrong.append(f"{path.relative_to(SRC.parent)}:{line} {module} ({layer_of(module)}) imports "
                             f"{target} ({layer_of(target)})")
    assert wrong == []


@pytest.mark.parametrize("layer", ["protocol", "record"])
def test_sans_io_sources(layer: str) -> None:
    banned = {*NO_IO, "time", "sparkafka.net", "sparkafka.producer"}
    hits = [f"{path.name}:{line} {target}" for path, module in _modules() if layer_of(module) == layer
            for target, line in _imports(path, module) if target.split(".")[0] in banned
            or any(target == b or target.startswith(b + ".") for b in banned)]
    assert hits == []


def test_no_import_cycles() -> None:
    """No module imports itself through others (a deferred import does not hide a cycle, as the schema and
    codec modules, or the record builder and reader, once did)."""
    modules = dict((module, path) for path, module in _modules())
    graph = {module: {target for target, _ in _imports(path, module, type_checking=False)} & set(modules)
             for module, path in modules.items()}
    cycles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.append(" -> ".join([*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert cycles == []


def test_the_design_file_map_lists_every_module() -> None:
    """docs/DESIGN.md's file map (one line per module, folders by indentation) matches the package."""
    text = (SRC.parents[1] / "docs" / "DESIGN.md").read_text()
    block = text[text.index("## File map"):].split("```")[1]
    listed: set[str] = set()
    folders: list[str] = []
    for line in block.splitlines():
        if not line.strip() or line.startswith(" " * 26):  # blank, or the second line of a job
            continue
        name = line.split()[0]
        depth = (len(line) - len(line.lstrip())) // 2
        if name.endswith("/"):
            folders[depth:] = [name.rstrip("/")]
        elif name.endswith((".py", ".c", ".h")):
            listed.add("/".join([*folders[1:depth], name]))
    present = {str(p.relative_to(SRC)) for p in SRC.rglob("*") if p.suffix in (".py", ".c", ".h")}
    assert listed == present
