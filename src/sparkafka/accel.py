"""Which implementation of the hot loops is in use: the optional C accelerator or pure Python.

How it works: ``setup.py`` builds ``sparkafka._accel`` (murmur2 and record-batch encoding in C) as
an *optional* extension, so an install without a C compiler still works. This module imports it
once; ``ACCEL`` is the module, or None when it is missing or the environment variable
``SPARKAFKA_NO_ACCEL`` is set to anything but ``""``/``"0"`` (CI runs the tests both ways). Callers
bind the C or the Python function at import time, so the choice costs nothing per record.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["ACCEL", "accel_disabled_by_env"]


def accel_disabled_by_env() -> bool:
    return os.environ.get("SPARKAFKA_NO_ACCEL", "") not in ("", "0")


def _load() -> ModuleType | None:
    if accel_disabled_by_env():
        return None
    try:
        return importlib.import_module("sparkafka._accel")
    except ImportError:
        return None


ACCEL: ModuleType | None = _load()
"""``sparkafka._accel`` when built and not disabled, else None."""
