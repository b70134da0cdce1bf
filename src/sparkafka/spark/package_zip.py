"""The pure-Python zip of the installed sparkafka that ``shipping`` sends executors, and its digest.

How it works: ``_sources`` walks the imported package with ``importlib.resources`` (a directory, or a zip
when this very copy was shipped) and lists every ``.py`` file and ``py.typed``, sorted, skipping
``__pycache__`` and anything compiled. ``source_digest`` hashes their paths and contents: two copies with
the same digest run the same code, whatever their version string says. ``build_zip`` writes them under
``sparkafka/`` with fixed timestamps, so the same sources give the same bytes, into a file named by the
version and the digest (an existing one is reused).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import io
import os
import tempfile
import zipfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

from sparkafka._version import __version__

if TYPE_CHECKING:
    from importlib.abc import Traversable

__all__ = ["build_zip", "source_digest"]

_ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed, so that the same sources give the same zip


def _package_root() -> Traversable:
    return importlib.resources.files("sparkafka")


def _sources(root: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    """``(relative path, file)`` of every ``.py`` file and ``py.typed`` under ``root``, sorted."""
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        name = entry.name
        if entry.is_dir():
            if name != "__pycache__":
                yield from _sources(entry, f"{prefix}{name}/")
        elif name.endswith(".py") or name == "py.typed":
            yield f"{prefix}{name}", entry


def source_digest() -> str:
    """SHA-256 (hex, 16 digits) of the imported sparkafka's sources: paths and contents."""
    h = hashlib.sha256()
    for path, entry in _sources(_package_root()):
        data = entry.read_bytes()
        h.update(f"{path}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def build_zip(directory: str | None = None) -> tuple[str, int, int]:
    """Write the pure-Python zip of the installed sparkafka; returns ``(path, files, bytes)``.

    The name holds the version and the source digest, so an existing zip of the same sources is reused."""
    digest = source_digest()
    directory = directory or os.path.join(tempfile.gettempdir(), f"sparkafka-ship-{os.getuid()}")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"sparkafka-{__version__}-{digest}.zip")
    buffer = io.BytesIO()
    files = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, entry in _sources(_package_root()):
            info = zipfile.ZipInfo(f"sparkafka/{rel}", _ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, entry.read_bytes())
            files += 1
    data = buffer.getvalue()
    if not os.path.exists(path) or os.path.getsize(path) != len(data):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path, files, len(data)
