"""The benchmark scripts of ``benchmarks/`` as modules, for the tests that check what they measure.

How it works: ``benchmarks/`` is not a package (its scripts run as ``python benchmarks/NAME.py``), so
``load_benchmark`` imports ``benchmarks/NAME.py`` by its path under the module name ``NAME``; the module is
registered in ``sys.modules`` before it runs (dataclasses look their module up there) and loaded once.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``name`` (the same module on every call)."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
