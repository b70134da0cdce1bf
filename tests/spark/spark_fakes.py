"""Duck-typed stand-ins for KafkaProducer used by the sink's unit tests (no broker, no Spark).

How it works: ``FakeProducer.send_columns`` (the bulk entry point ``send_arrow`` uses) turns the
Arrow columns back into rows, records each as a ``Sent`` and gives it a batch of its own: a real
``ProduceRequestResult`` that is completed at once (acknowledged with the next offset of its
partition, or failed when ``fail_when`` says so) or, with ``complete=False``, when its
``FakeFuture.complete()`` or ``flush()`` is called. ``partitions_for`` answers from a fixed count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkafka.errors import KafkaError
from sparkafka.producer.arrow.bulk import BulkAppend
from sparkafka.producer.arrow.tails import as_large_binary
from sparkafka.producer.future import ProduceRequestResult


@dataclass
class Sent:
    topic: str
    value: bytes | None
    key: bytes | None
    partition: int | None
    headers: Sequence[tuple[str, bytes | None]] | None


class FakeFuture:
    """One row's pending outcome: completes its one-record batch result."""

    def __init__(self, result: ProduceRequestResult, offset: int, error: BaseException | None) -> None:
        self.result = result
        self._offset = offset
        self._error = error

    def complete(self) -> None:
        if not self.result.completed:
            self.result.done(-1 if self._error is not None else self._offset, -1, self._error)


def _headers(row: list[dict[str, Any]] | None) -> list[tuple[str, bytes | None]] | None:
    if row is None:
        return None
    return [(h["key"], h["value"].encode() if isinstance(h["value"], str) else h["value"]) for h in row]


class FakeProducer:
    def __init__(self, partitions: int = 3, fail_when: Callable[[Sent], bool] | None = None,
                 config: dict[str, str] | None = None, complete: bool = True) -> None:
        self.partitions = partitions
        self.fail_when = fail_when
        self.config = config or {}
        self.complete = complete
        self.sent: list[Sent] = []
        self.futures: list[FakeFuture] = []
        self.next_offset: dict[tuple[str, int], int] = {}
        self.flushes = 0
        self.closed = False

    def send_columns(self, topic: str, values: pa.Array, keys: pa.Array | None = None,
                     headers: pa.Array | None = None, partitions: pa.Array | None = None) -> BulkAppend:
        assert not self.closed, "send on a closed producer"
        n = len(values)
        value_list = as_large_binary(values).to_pylist()
        key_list = as_large_binary(keys).to_pylist() if keys is not None else [None] * n
        part_list = partitions.to_pylist() if partitions is not None else [None] * n
        header_list = headers.to_pylist() if headers is not None else [None] * n
        segments = []
        for value, key, partition, row_headers in zip(value_list, key_list, part_list, header_list):
            record = Sent(topic, value, key, partition, _headers(row_headers))
            self.sent.append(record)
            p = partition if partition is not None else (len(self.sent) - 1) % self.partitions
            result = ProduceRequestResult(topic, p)
            if self.fail_when is not None and self.fail_when(record):
                future = FakeFuture(result, -1, KafkaError(f"injected failure for {key!r}"))
            else:
                offset = self.next_offset.get((topic, p), 0)
                self.next_offset[(topic, p)] = offset + 1
                future = FakeFuture(result, offset, None)
            if self.complete:
                future.complete()
            self.futures.append(future)
            segments.append((result, 0, 1))
        return BulkAppend(segments, 0, None)

    def flush(self, timeout: float | None = None) -> None:
        self.flushes += 1
        for f in self.futures:
            f.complete()

    def partitions_for(self, topic: str) -> list[int]:
        return list(range(self.partitions))

    @property
    def record_limit(self) -> int:
        return 1048576

    def close(self, timeout: float | None = None) -> None:
        self.closed = True
