"""The bulk Arrow path and the Spark sink's module never make pyarrow import pandas.

How it works: pyarrow imports pandas (when installed, as it is here) the first time it converts Python objects
(``pa.array``, ``pa.scalar``, a Python number given to a compute function): ~120 ms for every fresh process (pyspark
4.3's own worker imports it after the sink's ``write`` returns). The bulk path builds its arrays and scalars from
buffers instead (``sparkafka/producer/arrow/buffers.py``). A fresh child process, with and without the C
accelerator, imports ``sparkafka.spark.writer`` and sends rows through ``send_arrow`` to the shared Apache Kafka
node in every shape that reaches a different part of the path: keys of one length and of many (murmur2 by Arrow
kernels in small and large groups, without the accelerator), null keys and keyless rows (the sticky partitioner),
headers with nulls, an explicit partition column with nulls, a topic column with two topics, a value longer than the
varint table, a ``pa.Table`` without chunks. An import hook records where pandas was imported from; the test fails
naming that place. Every row is acknowledged and an independent consumer counts them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from support.consume import consume_all

from .conftest import Target

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

CHILD = r"""
import json, sys, traceback
imported_from = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            imported_from.append(traceback.format_stack(limit=12))
        return None

sys.meta_path.insert(0, Watch())
import pyarrow as pa
import sparkafka.spark.writer  # noqa: F401  (the Spark sink's worker-side module)
from sparkafka import KafkaProducer

bootstrap, main, *files = sys.argv[1:]
producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
batches = [pa.ipc.open_stream(path).read_next_batch() for path in files]
results = [producer.send_arrow(None if "topic" in b.schema.names else main, b) for b in batches]
results.append(producer.send_arrow(main, pa.Table.from_batches([], batches[0].schema)))
producer.flush(30)
acked = sum(r.wait(30).acknowledged for r in results)
producer.close(10)
print("RESULT " + json.dumps({"acked": acked, "imported_from": imported_from}))
"""

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
N = 300


def _batches(main: str, other: str) -> list[pa.RecordBatch]:
    """The inputs, made here with ``pa.array`` (which imports pandas) and handed to the child as Arrow IPC."""
    values = pa.array([b"v%d" % i for i in range(N)], pa.binary())
    same_keys = pa.array([b"k%04d" % i for i in range(N)], pa.binary())
    mixed_keys = pa.array([None if i % 7 == 0 else b"x" * (i % 5) + b"k%d" % i for i in range(N)],
                          pa.large_binary())
    headers = pa.array([None if i % 3 == 0 else [{"key": "h", "value": None if i % 2 else b"1"}]
                        for i in range(N)], HEADERS)
    partitions = pa.array([None if i % 2 else i % 3 for i in range(N)], pa.int32())
    topics = pa.array([main if i % 2 else other for i in range(N)], pa.string())
    return [
        pa.record_batch([values, same_keys], names=["value", "key"]),
        pa.record_batch([values, mixed_keys], names=["value", "key"]),
        pa.record_batch([values], names=["value"]),
        pa.record_batch([values, mixed_keys, headers, partitions], names=["value", "key", "headers", "partition"]),
        pa.record_batch([pa.array([b"y" * 20000] * 3, pa.binary())], names=["value"]),
        pa.record_batch([values, topics], names=["value", "topic"]),
    ]


# rows for each topic: four batches of N and three 20 KB values, plus half of the topic column's batch
MAIN_ROWS = 4 * N + 3 + N // 2
OTHER_ROWS = N // 2


@pytest.mark.parametrize("accel", ["accelerated", "pure-python"])
def test_the_bulk_path_does_not_import_pandas(kafka_target: Target, accel: str, tmp_path: Path) -> None:
    # Without pandas installed the hook could never fire and the test could never fail.
    assert importlib.util.find_spec("pandas") is not None, "pandas must be installed for this check"
    main, other = kafka_target.topic(3, "main"), kafka_target.topic(3, "other")
    files = []
    for i, batch in enumerate(_batches(main, other)):
        path = tmp_path / f"batch{i}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        files.append(str(path))
    env = dict(os.environ)
    env.pop("SPARKAFKA_NO_ACCEL", None)
    if accel == "pure-python":
        env["SPARKAFKA_NO_ACCEL"] = "1"
    done = subprocess.run([sys.executable, "-c", CHILD, kafka_target.bootstrap, main, *files], env=env,
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert not result["imported_from"], "pyarrow imported pandas from:\n" + "".join(result["imported_from"][0])
    assert result["acked"] == MAIN_ROWS + OTHER_ROWS
    assert len(consume_all(kafka_target.bootstrap, main, MAIN_ROWS)) == MAIN_ROWS
    assert len(consume_all(kafka_target.bootstrap, other, OTHER_ROWS)) == OTHER_ROWS
