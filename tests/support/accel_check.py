"""Whether the C accelerator the tests would use is the one the sources describe.

How it works: ``setup.py`` builds ``sparkafka._accel`` as an optional extension, so a C file that no
longer compiles used to leave the previous build (or none) in place without a word, and every test
of the C paths then ran the old code or skipped. With ``SPARKAFKA_REQUIRE_ACCEL=1`` (the Makefile
exports it) ``tests/conftest.py`` asks ``accelerator_problem`` before any test runs and stops the
session with its answer: the extension must import, and its file must be newer than every file in
``src/sparkafka/_c/`` (editor files starting with ``.`` aside; an installed copy without that directory is
only checked for the extension). ``SPARKAFKA_NO_ACCEL=1`` (the pure-Python pass) asks nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType


def accel_required() -> bool:
    """True when ``SPARKAFKA_REQUIRE_ACCEL`` is set to anything but ``""``/``"0"``."""
    return os.environ.get("SPARKAFKA_REQUIRE_ACCEL", "") not in ("", "0")


def accelerator_problem(accel: ModuleType | None, sources: Path) -> str | None:
    """None when ``accel`` (``sparkafka.accel.ACCEL``) is loaded from a file at least as new as every
    C source and header in ``sources``; else what is wrong and how to mend it."""
    if accel is None:
        return ("SPARKAFKA_REQUIRE_ACCEL is set but the C accelerator (sparkafka._accel) is not built: run "
                "`make install` (a compile error shows there), or set SPARKAFKA_REQUIRE_ACCEL=0 for pure Python")
    built = getattr(accel, "__file__", None)
    if built is None:
        return f"the C accelerator {accel.__name__} has no file to compare with its sources"
    if not sources.is_dir():  # an installed copy without its sources: only its presence can be checked
        return None
    try:
        built_at = os.stat(built).st_mtime
        newer = sorted(p.name for p in sources.iterdir()
                       if p.suffix in (".c", ".h") and not p.name.startswith(".") and p.stat().st_mtime > built_at)
    except OSError as exc:
        return f"cannot compare the C accelerator {built} with its sources in {sources}: {exc}"
    if newer:
        return (f"the C accelerator {built} is older than {', '.join(newer)} in {sources}: "
                "rebuild it with `make install` (it stops on a compile error)")
    return None
