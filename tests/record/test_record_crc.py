"""CRC-32C: the C binding and the pure-Python fallback agree with the standard check value and each other."""

from __future__ import annotations

import importlib.util
import random
import sys

import pytest

from sparkafka.record import crc as crc_module
from sparkafka.record.crc import crc32c, crc32c_python

CHECK = 0xE3069283


@pytest.mark.parametrize("impl", [crc32c, crc32c_python], ids=["default", "python"])
def test_check_value(impl: crc_module.Crc32cFunction) -> None:
    assert impl(b"123456789") == CHECK
    assert impl(b"") == 0
    assert impl(bytearray(b"123456789")) == CHECK
    assert impl(memoryview(b"xx123456789")[2:]) == CHECK


@pytest.mark.parametrize("impl", [crc32c, crc32c_python], ids=["default", "python"])
def test_continuation(impl: crc_module.Crc32cFunction) -> None:
    assert impl(b"56789", impl(b"1234")) == CHECK
    assert impl(b"56789", value=impl(b"1234")) == CHECK


def test_c_binding_in_use() -> None:
    assert crc_module.HAVE_C_CRC32C
    assert crc32c is not crc32c_python


def test_implementations_agree_on_random_data() -> None:
    rng = random.Random(1234)
    for size in (*range(0, 20), 64, 255, 1000, 4099, 65_537):
        data = rng.randbytes(size)
        seed = rng.getrandbits(32)
        assert crc32c(data) == crc32c_python(data)
        assert crc32c(data, seed) == crc32c_python(data, seed)
        # unaligned views, other buffer types, and a checksum continued at every split point of a short one
        assert crc32c_python(memoryview(b"x" + data)[1:]) == crc32c(data)
        assert crc32c_python(bytearray(data)) == crc32c(data)
    data = rng.randbytes(23)
    for cut in range(len(data) + 1):
        assert crc32c_python(data[cut:], crc32c_python(data[:cut])) == crc32c(data)


def test_bytewise_path_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Big-endian machines take the byte-at-a-time loop for the whole buffer."""
    monkeypatch.setattr(crc_module, "_WORDS_OK", False)
    data = random.Random(5).randbytes(1001)
    assert crc32c_python(data) == crc32c(data) and crc32c_python(b"123456789") == CHECK


def test_fallback_used_when_crc32c_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "crc32c", None)  # makes "import crc32c" raise ImportError
    spec = importlib.util.spec_from_file_location("_crc_without_c", crc_module.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.HAVE_C_CRC32C is False
    assert module.crc32c is module.crc32c_python
    assert module.crc32c(b"123456789") == CHECK
