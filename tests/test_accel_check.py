"""The check that stops a test session on a missing or stale C accelerator (``support/accel_check.py``)."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from support.accel_check import accel_required, accelerator_problem


def _module(path: Path) -> types.ModuleType:
    module = types.ModuleType("sparkafka._accel")
    module.__file__ = str(path)
    return module


def _sources(tmp_path: Path, at: float) -> Path:
    sources = tmp_path / "_c"
    sources.mkdir()
    for name in ("_accel.c", "_append.h", "README", ".#_accel.c"):
        (sources / name).write_text("x")
        os.utime(sources / name, (at, at))
    return sources


def test_missing_accelerator_is_named(tmp_path: Path) -> None:
    problem = accelerator_problem(None, _sources(tmp_path, 1_000_000))
    assert problem is not None and "not built" in problem and "make install" in problem


def test_build_newer_than_every_source_passes(tmp_path: Path) -> None:
    sources = _sources(tmp_path, 1_000_000)
    built = tmp_path / "_accel.so"
    built.write_bytes(b"")
    os.utime(built, (1_000_100, 1_000_100))
    assert accelerator_problem(_module(built), sources) is None


def test_source_changed_after_the_build_is_named(tmp_path: Path) -> None:
    sources = _sources(tmp_path, 1_000_000)
    built = tmp_path / "_accel.so"
    built.write_bytes(b"")
    os.utime(built, (1_000_100, 1_000_100))
    os.utime(sources / "_append.h", (1_000_200, 1_000_200))
    os.utime(sources / "README", (1_000_300, 1_000_300))  # not a C file: ignored
    os.utime(sources / ".#_accel.c", (1_000_300, 1_000_300))  # an editor's file: ignored
    problem = accelerator_problem(_module(built), sources)
    assert problem is not None and "_append.h" in problem and "_accel.c" not in problem and "README" not in problem


def test_an_installed_copy_without_sources_is_checked_for_presence_only(tmp_path: Path) -> None:
    built = tmp_path / "_accel.so"
    built.write_bytes(b"")
    assert accelerator_problem(_module(built), tmp_path / "no-such-dir") is None
    assert accelerator_problem(None, tmp_path / "no-such-dir") is not None


def test_an_unreadable_source_is_reported_not_raised(tmp_path: Path) -> None:
    sources = _sources(tmp_path, 1_000_000)
    (sources / "gone.c").symlink_to(tmp_path / "nowhere.c")  # a dangling link: stat() fails
    built = tmp_path / "_accel.so"
    built.write_bytes(b"")
    problem = accelerator_problem(_module(built), sources)
    assert problem is not None and "cannot compare" in problem


@pytest.mark.parametrize(("value", "required"), [("", False), ("0", False), ("1", True), ("yes", True)])
def test_requirement_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, value: str, required: bool) -> None:
    monkeypatch.setenv("SPARKAFKA_REQUIRE_ACCEL", value)
    assert accel_required() is required


def test_this_session_uses_a_current_accelerator_when_required() -> None:
    """The Makefile's runs (and CI) set SPARKAFKA_REQUIRE_ACCEL=1: conftest would have stopped the session
    before this test on a missing or stale build, so here the accelerator is loaded and current."""
    from sparkafka import accel

    if not accel_required() or accel.accel_disabled_by_env():
        pytest.skip("SPARKAFKA_REQUIRE_ACCEL is not set (or SPARKAFKA_NO_ACCEL is): nothing is required")
    assert accel.ACCEL is not None
    assert accelerator_problem(accel.ACCEL, Path(accel.__file__).resolve().parent / "_c") is None
