"""Duck-typed stand-ins for KafkaProducer used by the sink's unit tests (no broker, no Spark).

How it works: ``FakeProducer.send`` records each call and returns a future that is already
complete: acknowledged with the next offset of its partition, or failed when ``fail_when``
says so. ``partitions_for`` answers from a fixed partition count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sparkafka.errors import KafkaError


@dataclass(frozen=True)
class FakeMetadata:
    topic: str
    partition: int
    offset: int


@dataclass
class Sent:
    topic: str
    value: bytes | None
    key: bytes | None
    partition: int | None
    headers: Sequence[tuple[str, bytes | None]] | None


class FakeFuture:
    def __init__(self, metadata: FakeMetadata | None = None, error: BaseException | None = None,
                 done: bool = True) -> None:
        self._metadata = metadata
        self._error = error
        self._done = done

    def done(self) -> bool:
        return self._done

    def complete(self) -> None:
        self._done = True

    def result(self, timeout: float | None = None) -> FakeMetadata:
        if not self._done:
            raise TimeoutError("not done")
        if self._error is not None:
            raise self._error
        assert self._metadata is not None
        return self._metadata


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

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             timestamp: int | None = None, headers: Sequence[tuple[str, bytes | None]] | None = None,
             callback: Any = None) -> FakeFuture:
        assert not self.closed, "send on a closed producer"
        record = Sent(topic, value, key, partition, headers)
        self.sent.append(record)
        p = partition if partition is not None else (len(self.sent) - 1) % self.partitions
        if self.fail_when is not None and self.fail_when(record):
            future = FakeFuture(error=KafkaError(f"injected failure for {key!r}"), done=self.complete)
        else:
            offset = self.next_offset.get((topic, p), 0)
            self.next_offset[(topic, p)] = offset + 1
            future = FakeFuture(FakeMetadata(topic, p, offset), done=self.complete)
        self.futures.append(future)
        return future

    def flush(self, timeout: float | None = None) -> None:
        self.flushes += 1
        for f in self.futures:
            f.complete()

    def partitions_for(self, topic: str) -> list[int]:
        return list(range(self.partitions))

    def close(self, timeout: float | None = None) -> None:
        self.closed = True
