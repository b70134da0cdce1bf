"""kafka-python's ``KafkaProducer`` on sparkafka (``from sparkafka.compat.kafka_python import KafkaProducer``).

How it works: the constructor translates kafka-python's arguments once (``config.py``) and builds a
sparkafka ``KafkaProducer`` without serializers, so its sends can take the C send lane. ``send()`` keeps
kafka-python's contract: it raises ``IllegalStateError`` once closed, ``ValueError`` for a record without
key and value or a partition the topic does not have, ``TypeError`` for a topic that is not a str, a
partition or a timestamp that is not an int (a bool is a partition, True is 1, but not a timestamp, as
there), ``InvalidRecordInputError`` (a ``ValueError``) for a timestamp outside 0 .. 2**63-1 (kafka-python
would send a negative one as the record's CreateTime), serializes key and value as kafka-python does
(a callable is called ``f(obj)``; a ``kafka.serializer.Serializer``-like object ``serialize(topic,
headers, obj)`` with the record's header list), raises ``TypeError`` when a serializer returns anything
but bytes or None, raises what ``KafkaProducer.send`` raises and also what it returns in a failed future
(Java's contract; kafka-python raises ``KafkaTimeoutError`` for metadata or memory past ``max_block_ms``,
``MessageSizeTooLargeError`` for a record too large, ...), and returns a kafka-python-style future.
The partitioner is sparkafka's built-in one (kafka-python's default hashes keys with the same murmur2)
unless a custom one is given (``partitioner.py``). Like kafka-python, the
producer is closed at interpreter exit (``close(timeout=1)``), so records sent just before exit are
flushed, and when it is garbage-collected unclosed (kafka-python's ``__del__``: ``close(timeout=1)``): a
``weakref.finalize`` closes the inner producer, whose I/O thread would otherwise run on, reconnecting
forever, with nothing left to stop it.
"""

from __future__ import annotations

import atexit
import inspect
import logging
import operator
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, SupportsIndex

from sparkafka import errors
from sparkafka.compat.kafka_python.config import KafkaPythonSettings, default_arguments, translate
from sparkafka.compat.kafka_python.errors import as_kafka_python
from sparkafka.compat.kafka_python.future import FutureRecordMetadata
from sparkafka.compat.kafka_python.partitioner import adapt_partitioner
from sparkafka.producer.future import FailedFuture
from sparkafka.producer.producer import KafkaProducer as _Producer

__all__ = ["KafkaProducer"]

log = logging.getLogger("sparkafka.compat")

Serialize = Callable[[str, list[tuple[str, bytes]], Any], Any]

_INT64_MAX = (1 << 63) - 1


class KafkaProducer:
    """kafka-python's ``KafkaProducer(**configs)`` (see the module docstring)."""

    def __init__(self, **configs: Any) -> None:
        settings: KafkaPythonSettings = translate(configs)
        self.config: dict[str, Any] = {**default_arguments(), **configs}
        """kafka-python's defaults updated with the arguments given (as kafka-python's ``config``)."""
        self._key_ser = _serializer(settings.key_serializer, "key_serializer")
        self._value_ser = _serializer(settings.value_serializer, "value_serializer")
        self._closers = [s for s in (settings.key_serializer, settings.value_serializer)
                         if callable(getattr(s, "close", None))]
        partitioner = adapt_partitioner(settings.partitioner) if settings.partitioner is not None else None
        if partitioner is not None:
            settings.java["partitioner.class"] = partitioner
        self._metrics_enabled = settings.metrics_enabled
        self._producer = _Producer(settings.java)
        self._closed = False
        ref = weakref.ref(self)

        def close_at_exit() -> None:
            producer = ref()
            if producer is not None:
                producer.close(timeout=1)

        self._at_exit = close_at_exit
        atexit.register(close_at_exit)
        # dropped without close(): the inner producer (which holds no reference back) is closed as
        # kafka-python's __del__ closes its own; at exit close_at_exit does it
        self._finalizer = weakref.finalize(self, _close_abandoned, self._producer, close_at_exit)
        self._finalizer.atexit = False

    # ------------------------------------------------------------------ send
    def send(self, topic: str, value: Any = None, key: Any = None,
             headers: Sequence[tuple[str, bytes]] | None = None, partition: int | None = None,
             timestamp_ms: int | None = None) -> FutureRecordMetadata:
        """kafka-python's ``send``: returns a future of ``RecordMetadata``."""
        if self._closed:
            raise errors.IllegalStateError("KafkaProducer already closed!")
        if value is None and key is None:
            raise ValueError("Need at least one: key or value")
        if not isinstance(topic, str):  # kafka-python's TypeErrors (sparkafka's: InvalidTopicNameError)
            raise TypeError("All topics must not be None" if topic is None else "All topics must be strings")
        if timestamp_ms is not None:
            if type(timestamp_ms) is not int:
                raise TypeError(timestamp_ms)  # kafka-python's record builder: TypeError(timestamp), a bool too
            if not 0 <= timestamp_ms <= _INT64_MAX:
                # kafka-python writes a negative one as the record's CreateTime (-1 is the protocol's "no
                # timestamp"); Java's producer, and sparkafka's, take 0 .. 2**63-1 only: refused, not sent
                raise errors.InvalidRecordInputError(
                    f"timestamp_ms must be from 0 to 2**63-1 milliseconds since the epoch, got {timestamp_ms}")
        header_list: list[tuple[str, bytes]] = [] if headers is None else _check_headers(headers)
        key_bytes = self._serialize(self._key_ser, topic, header_list, key, "key")
        value_bytes = self._serialize(self._value_ser, topic, header_list, value, "value")
        if partition is not None:
            partition = self._check_partition(topic, partition)
        future = self._producer.send(topic, value_bytes, key_bytes, partition, timestamp_ms,
                                     header_list or None)
        if isinstance(future, FailedFuture):
            # kafka-python raises what failed in send() (a too-large record: MessageSizeTooLargeError)
            raise as_kafka_python(future.error).with_traceback(None)
        header_size = -1
        if header_list:
            header_size = sum(len(k.encode("utf-8")) + len(v) for k, v in header_list)
        return FutureRecordMetadata(future, header_size)

    @staticmethod
    def _serialize(serializer: Serialize | None, topic: str, headers: list[tuple[str, bytes]], data: Any,
                   field: str) -> bytes | None:
        out = data if serializer is None else serializer(topic, headers, data)
        if out is None or type(out) is bytes:
            return out
        if isinstance(out, (bytearray, memoryview)):
            return bytes(out)
        raise TypeError(f"Unsupported type for serialized {field}: {type(out)}")

    def _check_partition(self, topic: str, partition: object) -> int:
        """The partition as an int; kafka-python's errors: ``TypeError`` for one that is not an integer (its
        ``partition < 0`` fails so for a str), ``ValueError`` for a negative one or one the topic does not have
        (after its metadata). A bool is an int there (True is partition 1), and so is anything with
        ``__index__`` (numpy's integers); a float is refused (kafka-python queues it under a partition 1.0 no
        request can carry, and the record expires)."""
        try:
            index = operator.index(partition)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(f"partition must be an int, got {type(partition).__name__} {partition!r}") from None
        if index < 0:
            raise ValueError("partition must be >= 0")
        count = self._producer._metadata.fetch().partition_count(topic)
        if count is None:
            count = len(self._producer.partitions_for(topic))
        if index >= count:
            raise ValueError(f"Unrecognized partition {partition} for topic {topic}")
        return index

    # ------------------------------------------------------------------ flush, close, metadata
    def flush(self, timeout: float | None = None) -> None:
        """Wait for every record sent so far; ``KafkaTimeoutError`` after ``timeout`` seconds."""
        self._producer.flush(timeout)

    def close(self, timeout: float | None = None, null_logger: bool = False) -> None:
        """Send what is buffered and stop, waiting at most ``timeout`` seconds."""
        atexit.unregister(self._at_exit)
        self._finalizer.detach()
        if self._closed:
            return
        if timeout is not None and timeout < 0:
            raise ValueError(f"Invalid timeout: {timeout}")
        self._closed = True
        self._producer.close(timeout)
        for serializer in self._closers:
            try:
                serializer.close()
            except Exception:
                log.exception("closing a serializer failed")

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition ids (waits up to ``max_block_ms`` for its metadata)."""
        return set(self._producer.partitions_for(topic))

    def bootstrap_connected(self) -> bool:
        """True once a broker answered a Metadata request."""
        return not self._producer._metadata.fetch().is_bootstrap

    def metrics(self, raw: bool = False) -> dict[str, Any] | None:
        """Java-named producer metrics: ``{"producer-metrics": {name: value}}`` (raw: ``{name: value}``);
        None with ``metrics_enabled=False``."""
        if not self._metrics_enabled:
            return None
        values = self._producer.metrics()
        return dict(values) if raw else {"producer-metrics": dict(values)}

    # ------------------------------------------------------------------ transactions
    def init_transactions(self) -> None:
        self._producer.init_transactions()

    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    def commit_transaction(self) -> None:
        self._producer.commit_transaction()

    def abort_transaction(self) -> None:
        self._producer.abort_transaction()

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_metadata: object) -> None:
        """kafka-python's: ``offsets`` ``{TopicPartition: OffsetAndMetadata}``, ``group_metadata`` the
        consumer's ``group_metadata()`` (``ConsumerGroupMetadata``) or a group id; KIP-447."""
        self._producer.send_offsets_to_transaction(offsets, group_metadata)

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        raise TypeError("cannot pickle a KafkaProducer: it owns an I/O thread, sockets and buffered records; "
                        "create one in each process from its arguments")

    def __str__(self) -> str:
        cfg = self._producer.config
        return f"<KafkaProducer client_id={cfg.client_id} transactional_id={cfg.transactional_id}>"


def _check_headers(headers: object) -> list[tuple[str, bytes]]:
    """kafka-python's rule: a list of ``(str, bytes)`` tuples, else ``TypeError``."""
    if not isinstance(headers, list):
        raise TypeError("headers must be list-type")
    for item in headers:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], bytes)):
            raise TypeError("All headers items must be (str, bytes) tuples")
    return headers


def _serializer(spec: Any, name: str) -> Serialize | None:
    """kafka-python's serializer shapes, decided once: an object with ``serialize(topic, headers, data)``
    (kafka-python 3's ``Serializer``) or ``serialize(topic, data)``, or a callable ``f(data)``."""
    if spec is None:
        return None
    method = getattr(spec, "serialize", None)
    if callable(method):
        try:
            required = sum(1 for p in inspect.signature(method).parameters.values()
                           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)
        except (TypeError, ValueError):
            required = 3
        if required == 2:
            return lambda topic, headers, data: method(topic, data)
        serialize: Serialize = method
        return serialize
    if callable(spec):
        return lambda topic, headers, data: spec(data)
    raise errors.ConfigError(f"{name} must be a callable f(value) or a Serializer, got {type(spec).__name__}", name)


def _close_abandoned(producer: _Producer, at_exit: Callable[[], None]) -> None:
    """A ``KafkaProducer`` was garbage-collected unclosed: close its inner producer as kafka-python's
    ``__del__`` does (``close(timeout=1)``; at once when the collection runs on the I/O thread)."""
    atexit.unregister(at_exit)
    try:
        producer.close(1.0)
    except Exception:  # a finalizer must not raise; close() does not, but a user callback may misbehave
        log.exception("closing an abandoned KafkaProducer failed")
