"""A Python without crc32c, cramjam, lz4 and zstandard (a Spark executor running a shipped sparkafka, which
holds no compiled code) still produces uncompressed and gzip records; a codec whose package is missing
fails when the producer is built, naming the package.

How it works: a child interpreter blocks those imports with a meta-path finder, turns the C accelerator
off (``SPARKAFKA_NO_ACCEL=1``), sends records to Apache Kafka with the CRC-32C fallback (Kafka checks
every batch's CRC and refuses a wrong one with CORRUPT_MESSAGE) and reports what it saw as JSON;
confluent-kafka reads the records back in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from support.consume import consume_all, create_topic

CHILD = textwrap.dedent('''
    import json, sys

    BLOCKED = {"crc32c", "cramjam", "lz4", "zstandard"}

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Block())
    bootstrap, topic = sys.argv[1], sys.argv[2]
    from sparkafka import KafkaProducer
    from sparkafka.accel import ACCEL
    from sparkafka.errors import ConfigError
    from sparkafka.record import crc
    from sparkafka.record.compression import CompressionType, decompress

    report = {"accel": ACCEL is not None, "c_crc": crc.HAVE_C_CRC32C, "errors": {}}
    for codec in ("none", "gzip"):
        with KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5) as producer:
            futures = [producer.send(topic, key=f"{codec}-{n}".encode(), value=b"v" * (n % 300))
                       for n in range(2000)]
            producer.flush()
            report[codec] = sum(1 for f in futures if f.get(10).offset >= 0)
    for codec in ("snappy", "lz4", "zstd"):
        try:
            KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec)
        except ConfigError as exc:
            report["errors"][codec] = [exc.key, str(exc)]
    try:
        decompress(CompressionType.LZ4, b"\\x04\\x22\\x4d\\x18")
    except ConfigError as exc:
        report["errors"]["decompress"] = [exc.key, str(exc)]
    print(json.dumps(report))
''')


def test_uncompressed_and_gzip_without_the_packages(kafka: Any, unique_topic: Callable[[str], str]) -> None:
    bootstrap = kafka.bootstrap
    topic = unique_topic("nodeps")
    create_topic(bootstrap, topic, partitions=2)
    env = {**os.environ, "SPARKAFKA_NO_ACCEL": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, bootstrap, topic], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["accel"] is False and report["c_crc"] is False
    assert (report["none"], report["gzip"]) == (2000, 2000)
    packages = {"snappy": "cramjam", "lz4": "lz4", "zstd": "zstandard", "decompress": "lz4"}
    for codec, package in packages.items():
        key, message = report["errors"][codec]
        assert key == "compression.type"
        assert f"needs the Python package {package!r}" in message and f"pip install {package}" in message
    records = consume_all(bootstrap, topic, 4000)
    assert sorted((r.key or b"").decode() for r in records) == sorted(
        f"{codec}-{n}" for codec in ("none", "gzip") for n in range(2000))
    assert all(r.value == b"v" * (int((r.key or b"").decode().split("-")[1]) % 300) for r in records)
