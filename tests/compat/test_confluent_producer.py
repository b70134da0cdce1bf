"""The compat ``Producer`` behaves as confluent-kafka's: delivery reports from poll()/flush() on the
caller's thread, BufferError at librdkafka's queue limits, flush() returning what is still queued,
purge(), produce() errors, transactions, list_topics().

How it works: records go to the session's Tansu broker or a librdkafka mock cluster (for broker outages,
slow answers and transactions, read back from the raw log with ``transactions.raw_log``) and are read
back with confluent-kafka's consumer (``support.consume``); the delivery reports are compared with what
was read. Where confluent-kafka's own behaviour is the reference (report accessors, abort and commit
errors, config errors), its ``Producer`` runs the same steps on the same mock cluster and the two
outcomes are compared.
"""

from __future__ import annotations

import gc
import logging
import pickle
import socket
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import confluent_kafka
import pytest

from sparkafka.compat.confluent import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from sparkafka.errors import ConfigError
from support.consume import consume_all, create_topic
from support.mock_cluster import ApiKey, MockCluster
from transactions.raw_log import committed_view, read_log

pytestmark = [pytest.mark.timeout(120)]

Report = tuple[KafkaError | None, Message]


def _delivered_unserved(p: Producer) -> None:
    """Every record produced so far acknowledged (those held for their topic's metadata sent first), the
    reports queued but not served."""
    assert p._hold.drain(30)
    p._producer.flush(30)


def collect() -> tuple[list[Report], Callable[[KafkaError | None, Message], None], list[int]]:
    reports: list[Report] = []
    threads: list[int] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        reports.append((err, msg))
        threads.append(threading.get_ident())

    return reports, on_delivery, threads


def test_delivery_reports_match_what_a_consumer_reads(tansu: Any, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("dr")
    create_topic(tansu.bootstrap_servers, topic, 3)
    reports, on_delivery, threads = collect()
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers, "on_delivery": on_delivery})
    try:
        for i in range(30):
            p.produce(topic, f"value-{i}", key=f"key-{i}" if i % 3 else None,
                      headers={"i": str(i), "n": None} if i % 2 else [("i", str(i).encode())])
        p.produce(topic, b"with-timestamp", timestamp=1_600_000_000_123)
        assert len(p) == 31
        assert p.flush(30) == 0
        assert len(p) == 0
    finally:
        p.close()
    assert set(threads) == {threading.get_ident()}
    assert all(err is None for err, _ in reports)
    records = consume_all(tansu.bootstrap_servers, topic, expected_count=31)
    by_value = {r.value: r for r in records}
    assert len(reports) == len(by_value) == 31
    for _, msg in reports:
        record = by_value[msg.value()]
        assert (msg.topic(), msg.partition(), msg.offset(), msg.key()) == (topic, record.partition, record.offset,
                                                                             record.key)
        assert (msg.headers() or []) == record.headers
        assert msg.timestamp() == (TIMESTAMP_CREATE_TIME, record.timestamp)
        latency = msg.latency()
        assert msg.error() is None and latency is not None and latency >= 0
        assert len(msg) == msg.len() == len(record.value or b"")
    assert by_value[b"with-timestamp"].timestamp == 1_600_000_000_123
    assert by_value[b"value-1"].headers == [("i", b"1"), ("n", None)]


def test_reports_wait_for_poll_and_a_callback_error_leaves_poll(tansu: Any, unique_topic: Callable[[str], str]
                                                                ) -> None:
    topic = unique_topic("poll")
    seen: list[bytes | None] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        seen.append(msg.value())
        if msg.value() == b"2":
            raise ValueError("callback failed")

    p = Producer({"bootstrap.servers": tansu.bootstrap_servers})
    try:
        for i in range(5):
            p.produce(topic, str(i), callback=on_delivery)
        _delivered_unserved(p)  # every record acknowledged by the broker: reports are only queued
        assert seen == [] and len(p) == 5
        with pytest.raises(ValueError, match="callback failed"):
            p.poll(0)
        assert seen == [b"0", b"1", b"2"] and len(p) == 2
        assert p.poll(0) == 2
        assert seen == [b"0", b"1", b"2", b"3", b"4"] and len(p) == 0
        assert p.poll(0.05) == 0
    finally:
        p.close()


def test_buffer_error_at_the_message_limit_until_reports_are_served(tansu: Any,
                                                                    unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("full")
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers, "queue.buffering.max.messages": 3})
    try:
        for _ in range(3):
            p.produce(topic, b"x")
        with pytest.raises(BufferError, match="Local: Queue full"):
            p.produce(topic, b"x")
        _delivered_unserved(p)
        with pytest.raises(BufferError):  # delivered, but the reports were not served
            p.produce(topic, b"x")
        assert p.poll(0) == 3
        p.produce(topic, b"y")
        assert p.flush(30) == 0
    finally:
        p.close()
    assert len(consume_all(tansu.bootstrap_servers, topic, expected_count=4)) == 4


def test_queue_buffering_max_messages_zero_is_no_limit(tansu: Any, unique_topic: Callable[[str], str]) -> None:
    """librdkafka: "A value of 0 disables this limit" (confluent-kafka produces all 1000)."""
    topic = unique_topic("nolimit")
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers, "queue.buffering.max.messages": 0})
    try:
        for _ in range(1000):
            p.produce(topic, b"v")
        assert len(p) == 1000
        assert p.flush(30) == 0
    finally:
        p.close()
    assert len(consume_all(tansu.bootstrap_servers, topic, expected_count=1000)) == 1000


def test_buffer_error_at_the_byte_limit(tansu: Any, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("kb")
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers, "queue.buffering.max.kbytes": 2})
    try:
        p.produce(topic, b"v" * 1000, key=b"k" * 24)
        p.produce(topic, b"v" * 1000, key=b"k" * 24)  # 2048 bytes: at the limit
        with pytest.raises(BufferError):
            p.produce(topic, b"v")
        assert p.flush(30) == 0
        p.produce(topic, b"v")
        assert p.flush(30) == 0
    finally:
        p.close()


def test_flush_returns_what_is_still_queued_and_purge_fails_unsent_records(
        mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    """No producer id (InitProducerId answered COORDINATOR_LOAD_IN_PROGRESS until the errors are cleared):
    the idempotent producer sends nothing, so every record stays queued, whatever the timing."""
    topic = unique_topic("purge")
    mock_cluster.create_topic(topic, 1, 1)
    mock_cluster.push_request_errors(ApiKey.INIT_PRODUCER_ID, [14] * 500)
    reports, on_delivery, _ = collect()
    p = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "on_delivery": on_delivery})
    try:
        for i in range(5):
            p.produce(topic, str(i))
        assert p.flush(0.3) == 5 and len(p) == 5 and reports == []
        p.purge()
        assert p.flush(10) == 0
        assert [msg.value() for _, msg in reports] == [b"0", b"1", b"2", b"3", b"4"]
        assert all(err is not None and err.code() == KafkaError._PURGE_QUEUE for err, _ in reports)
        mock_cluster.clear_request_errors(ApiKey.INIT_PRODUCER_ID)
        p.produce(topic, b"last")
        assert p.flush(30) == 0
        assert reports[-1][0] is None
    finally:
        p.close()
    values = [r.value for r in consume_all(mock_cluster.bootstrap_servers, topic, expected_count=1)]
    assert values == [b"last"]


def test_produce_errors_are_raised_as_librdkafka_raises_them(tansu: Any, unique_topic: Callable[[str], str]
                                                             ) -> None:
    topic = unique_topic("err")
    create_topic(tansu.bootstrap_servers, topic, 2)
    reports, on_delivery, _ = collect()
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers, "message.max.bytes": 10000,
                  "on_delivery": on_delivery})
    try:
        p.produce(topic, b"ok")
        assert p.flush(30) == 0
        with pytest.raises(KafkaException) as info:
            p.produce(topic, b"x" * 20000)
        assert info.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
        with pytest.raises(KafkaException) as info:
            p.produce(topic, b"x", partition=2)
        assert info.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
        assert "Unknown partition" in str(info.value)
        with pytest.raises(TypeError, match="bytes-like object is required, not 'int'"):
            p.produce(topic, 5)  # type: ignore[arg-type]
        assert len(p) == 0
        p.produce("not a topic!", b"x")  # librdkafka reports this in the delivery report
        assert p.flush(30) == 0
        err, msg = reports[-1]
        assert err is not None and err.code() == KafkaError.TOPIC_EXCEPTION and msg.topic() == "not a topic!"
        assert msg.error() is err and msg.offset() is None and isinstance(msg.latency(), float)
        assert msg.timestamp() == (TIMESTAMP_NOT_AVAILABLE, -1)
    finally:
        p.close()


def test_transactions_commit_and_abort(mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("txn")
    mock_cluster.create_topic(topic, 3, 3)
    reports, on_delivery, _ = collect()
    p = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "transactional.id": f"{topic}-id",
                  "on_delivery": on_delivery})
    try:
        with pytest.raises(KafkaException) as info:
            p.begin_transaction()  # before init_transactions
        assert info.value.args[0].code() == KafkaError._STATE and not info.value.args[0].fatal()
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, f"committed-{i}", key=str(i))
        p.commit_transaction(30)
        assert len(p) == 0 and len(reports) == 10 and all(err is None for err, _ in reports)
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, f"aborted-{i}", key=str(i))
        p.flush(30)
        p.abort_transaction(30)
        with pytest.raises(KafkaException) as info:
            p.send_offsets_to_transaction([], object())  # not a consumer_group_metadata()
        assert info.value.args[0].code() == KafkaError._INVALID_ARG
        with pytest.raises(KafkaException, match="transactional producer"):
            p.purge()
    finally:
        p.close()
    visible = sorted(r.value or b"" for r in committed_view(read_log(mock_cluster.bootstrap_servers, topic)))
    assert visible == sorted(f"committed-{i}".encode() for i in range(10))


def test_list_topics(tansu: Any, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("lt")
    create_topic(tansu.bootstrap_servers, topic, 4)
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers})
    try:
        one = p.list_topics(topic, timeout=10)
        assert list(one.topics) == [topic] and sorted(one.topics[topic].partitions) == [0, 1, 2, 3]
        assert all(pm.leader in one.brokers for pm in one.topics[topic].partitions.values())
        assert topic in p.list_topics().topics
    finally:
        p.close()


def test_logger_gets_sparkafkas_records_while_open(tansu: Any) -> None:
    captured: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(record.getMessage())

    user_logger = logging.getLogger("my-app-kafka")
    user_logger.addHandler(Capture())
    user_logger.setLevel(logging.INFO)
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers, "logger": user_logger})
    logging.getLogger("sparkafka.producer").warning("a sparkafka warning")
    p.close()
    logging.getLogger("sparkafka.producer").warning("after close")
    assert "a sparkafka warning" in captured and "after close" not in captured


_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)


@pytest.mark.parametrize(("log_level", "forwarded"), [
    (None, _LEVELS[1:]),  # librdkafka's default, 6 (info): no DEBUG
    (7, _LEVELS), (6, _LEVELS[1:]), (5, _LEVELS[2:]), (4, _LEVELS[2:]), (3, _LEVELS[3:]), (2, _LEVELS[4:]),
    (1, ()), (0, ()),
])
def test_log_level_filters_what_reaches_the_logger(caplog: pytest.LogCaptureFixture, log_level: int | None,
                                                   forwarded: tuple[int, ...]) -> None:
    """librdkafka passes the log callback only lines at or below log_level (syslog: 3 err, 4 warning, 6
    info, 7 debug); confluent-kafka hands them to the logger as ERROR, WARNING, INFO, DEBUG."""
    caplog.set_level(logging.DEBUG, logger="sparkafka")  # sparkafka creates records of every level
    captured: list[int] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("log_level probe"):
                captured.append(record.levelno)

    user_logger = logging.getLogger(f"my-app-kafka-{log_level}")
    handler = Capture()
    user_logger.addHandler(handler)
    user_logger.setLevel(logging.DEBUG)
    conf: dict[str, Any] = {"bootstrap.servers": "127.0.0.1:1", "logger": user_logger}
    if log_level is not None:
        conf["log_level"] = log_level
    p = Producer(conf)
    try:
        for level in _LEVELS:
            logging.getLogger("sparkafka.producer").log(level, "log_level probe")
    finally:
        p.close(0)
        user_logger.removeHandler(handler)
    assert tuple(captured) == forwarded


def test_log_level_maps_librdkafkas_errors_as_confluent_kafka_does() -> None:
    """The reference for the mapping: librdkafka's connection failure is a LOG_ERR (3) line, which
    confluent-kafka's logger gets as ERROR at log_level 3 and not at all at 2."""
    seen: dict[int, set[int]] = {}
    for log_level in (3, 2):
        levels = seen.setdefault(log_level, set())

        class Capture(logging.Handler):
            def emit(self, record: logging.LogRecord, levels: set[int] = levels) -> None:
                levels.add(record.levelno)

        user_logger = logging.getLogger(f"confluent-log-level-{log_level}")
        handler = Capture()
        user_logger.addHandler(handler)
        user_logger.setLevel(logging.DEBUG)
        p = confluent_kafka.Producer({"bootstrap.servers": "127.0.0.1:1", "logger": user_logger,
                                      "log_level": log_level})
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not levels:
            p.poll(0.1)
        user_logger.removeHandler(handler)
    assert seen == {3: {logging.ERROR}, 2: set()}


def test_a_producer_does_not_pickle(tansu: Any) -> None:
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers})
    try:
        with pytest.raises(TypeError, match="cannot pickle a Producer"):
            pickle.dumps(p)
    finally:
        p.close()


def test_a_topic_without_metadata_fails_in_the_delivery_report(mock_cluster: MockCluster,
                                                               unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("nometa")
    mock_cluster.topic_set_error(topic, 3)  # UNKNOWN_TOPIC_OR_PARTITION in every Metadata answer
    reports, on_delivery, _ = collect()
    p = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "max.block.ms": 300,
                  "on_delivery": on_delivery})
    try:
        p.produce(topic, b"v")  # does not raise: librdkafka reports it in the delivery report
        assert len(p) == 1
        assert p.flush(10) == 0
    finally:
        p.close()
    [(err, msg)] = reports
    assert err is not None and err.code() == KafkaError._MSG_TIMED_OUT and msg.partition() is None
    assert "after 300 ms (max.block.ms, sparkafka's wait for a topic's metadata" in err.str()


def test_a_record_without_metadata_names_message_timeout_when_that_is_lower(
        mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    """The report's text named max.block.ms, a setting a confluent-kafka user never set, also when their own
    message.timeout.ms was the limit that failed the record."""
    topic = unique_topic("nometa-mto")
    mock_cluster.topic_set_error(topic, 3)
    reports, on_delivery, _ = collect()
    p = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "message.timeout.ms": 400,
                  "linger.ms": 5, "on_delivery": on_delivery})
    try:
        p.produce(topic, b"v")
        assert p.flush(10) == 0
    finally:
        p.close()
    [(err, _)] = reports
    assert err is not None and err.code() == KafkaError._MSG_TIMED_OUT
    assert err.str().endswith("not present in metadata after 400 ms (message.timeout.ms)"), err.str()


def test_a_message_timeout_below_the_request_timeout_fails_the_record_on_time(
        mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    """librdkafka accepts message.timeout.ms 1500 (Java's rule would need >= linger + 30000): the record
    fails with _MSG_TIMED_OUT after 1.5 s with every broker down, as confluent-kafka's does. No
    rebootstrap: with every broker gone it replaces the metadata by the bootstrap addresses (Java's
    KIP-899, librdkafka's too), and a produce() after that waits max.block.ms for the topic instead (1 run
    in 25 when the Sender noticed before the produce)."""
    topic = unique_topic("mto")
    mock_cluster.create_topic(topic, 1, 1)
    reports, on_delivery, _ = collect()
    p = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "message.timeout.ms": 1500,
                  "metadata.recovery.strategy": "none", "on_delivery": on_delivery})
    try:
        p.produce(topic, b"warm")
        assert p.flush(30) == 0
        for broker in (1, 2, 3):
            mock_cluster.broker_set_down(broker)
        start = time.monotonic()
        p.produce(topic, b"v")
        assert p.flush(30) == 0
        elapsed = time.monotonic() - start
    finally:
        for broker in (1, 2, 3):
            mock_cluster.broker_set_up(broker)
        p.close(10)
    err, msg = reports[-1]
    assert err is not None and err.code() == KafkaError._MSG_TIMED_OUT and msg.value() == b"v"
    assert 1.0 <= elapsed < 5.0


# ------------------------------------------------- side by side with confluent-kafka (the reference)

BOTH: list[tuple[str, Any]] = [("confluent", confluent_kafka.Producer), ("compat", Producer)]


def _accessors(err: Any, msg: Any) -> tuple[Any, ...]:
    """What a report shows, comparable across the two libraries (the latency's type, not its value)."""
    kind, stamp = msg.timestamp()
    return (err.name() if err else None, msg.partition(), msg.offset(), kind, stamp if stamp < 0 else "ms",
            type(msg.latency()).__name__)


def test_report_accessors_without_an_offset_match_confluent_kafka(mock_cluster: MockCluster,
                                                                  unique_topic: Callable[[str], str]) -> None:
    """acks=0: no offset (None); a purged record: no offset, timestamp (TIMESTAMP_NOT_AVAILABLE, -1), a
    latency all the same."""
    bootstrap = mock_cluster.bootstrap_servers
    seen: dict[str, list[tuple[Any, ...]]] = {}
    for name, make in BOTH:
        topic = unique_topic(f"acc-{name}")
        mock_cluster.create_topic(topic, 2, 1)
        out = seen.setdefault(name, [])
        p = make({"bootstrap.servers": bootstrap, "acks": 0,
                  "on_delivery": lambda e, m, out=out: out.append(_accessors(e, m))})
        p.produce(topic, b"v", b"k")
        assert p.flush(10) == 0
        p = make({"bootstrap.servers": bootstrap, "linger.ms": 3000,
                  "on_delivery": lambda e, m, out=out: out.append(_accessors(e, m))})
        p.produce(topic, b"warm", b"k")
        assert p.flush(10) == 0
        p.produce(topic, b"v", b"k")
        p.purge()
        assert p.flush(10) == 0
        if name == "compat":
            p.close(5)
    assert seen["compat"] == seen["confluent"]
    assert seen["compat"][0][:3] == (None, seen["compat"][1][1], None)
    assert seen["compat"][2][:4] == ("_PURGE_QUEUE", seen["compat"][1][1], None, TIMESTAMP_NOT_AVAILABLE)


def test_an_explicit_partition_a_new_topic_lacks_is_reported_at_once(unique_topic: Callable[[str], str]) -> None:
    """The first produce() to a 2-partition topic with partition=5: confluent-kafka accepts it and reports
    _UNKNOWN_PARTITION with partition 5 at once (not after max.block.ms / message.timeout.ms). The topic is
    made after the producer's first metadata, on a cluster of one broker: librdkafka caches every topic of a
    full Metadata answer (its first, and the refresh when its connection to the broker it learned of comes up,
    which on a loaded machine came after the topic was made), and a produce() to a topic it knows raises
    _UNKNOWN_PARTITION instead (the test's own last case); when that refresh came first anyway, the case is
    tried again with another new topic."""
    seen: dict[str, list[tuple[Any, ...]]] = {}
    with MockCluster(1) as cluster:
        for name, make in BOTH:
            out = seen.setdefault(name, [])
            conf = {"bootstrap.servers": cluster.bootstrap_servers, "message.timeout.ms": 20000,
                    "on_delivery": lambda e, m, out=out: out.append(_accessors(e, m))}
            if name == "compat":
                conf["max.block.ms"] = 20000
            p = make(conf)
            for _ in range(5):
                topic = unique_topic(f"np-{name}")
                assert topic not in p.list_topics(timeout=10).topics
                cluster.create_topic(topic, 2, 1)
                start = time.monotonic()
                try:
                    p.produce(topic, b"v", partition=5)
                    break
                except confluent_kafka.KafkaException as exc:  # librdkafka's refresh came after create_topic
                    assert name == "confluent" and exc.args[0].code() == KafkaError._UNKNOWN_PARTITION, exc
                    time.sleep(0.2)
            else:
                pytest.fail("confluent-kafka knew each of 5 new topics before its first produce()")
            assert p.flush(30) == 0
            assert time.monotonic() - start < 5.0, name
            p.produce(topic, b"w", partition=1)  # the topic itself is fine
            assert p.flush(30) == 0
            if name == "compat":
                with pytest.raises(KafkaException) as info:  # now the count is known: raised, as librdkafka
                    p.produce(topic, b"v", partition=5)
                assert info.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
                p.close(5)
            del p
    assert seen["compat"] == seen["confluent"]
    assert seen["compat"][0] == ("_UNKNOWN_PARTITION", 5, None, TIMESTAMP_NOT_AVAILABLE, -1, "float")
    assert seen["compat"][1][:3] == (None, 1, 0)


def test_records_failed_by_abort_transaction_report_purge_queue(mock_cluster: MockCluster,
                                                                unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("abort")
    mock_cluster.create_topic(topic, 3, 3)
    seen: dict[str, list[Any]] = {}
    for name, make in BOTH:
        out = seen.setdefault(name, [])
        p = make({"bootstrap.servers": mock_cluster.bootstrap_servers, "transactional.id": f"{topic}-{name}",
                  "linger.ms": 2000, "on_delivery": lambda e, m, out=out: out.append(e.name() if e else None)})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, b"warm")
        p.commit_transaction(30)
        p.begin_transaction()
        p.produce(topic, b"a")
        p.produce(topic, b"b")
        p.abort_transaction(30)
        p.poll(0)
        p.begin_transaction()  # the next transaction's records are not "purged"
        p.produce(topic, b"c")
        p.commit_transaction(30)
        if name == "compat":
            p.close(5)
    assert seen["compat"] == seen["confluent"] == [None, "_PURGE_QUEUE", "_PURGE_QUEUE", None]


def test_commit_after_a_failed_record_raises_that_records_error(mock_cluster: MockCluster,
                                                                unique_topic: Callable[[str], str]) -> None:
    """librdkafka's commit_transaction() raises the error the transaction hit (TOPIC_AUTHORIZATION_FAILED
    here), txn_requires_abort() True, not _STATE."""
    topic = unique_topic("abortable")
    mock_cluster.create_topic(topic, 1, 1)
    seen: dict[str, tuple[Any, ...]] = {}
    for name, make in BOTH:
        reports: list[Any] = []
        p = make({"bootstrap.servers": mock_cluster.bootstrap_servers, "transactional.id": f"{topic}-{name}",
                  "on_delivery": lambda e, m, reports=reports: reports.append(e.name() if e else None)})
        p.init_transactions(30)
        p.begin_transaction()
        mock_cluster.push_request_errors(ApiKey.PRODUCE, [29])
        p.produce(topic, b"a")
        p.flush(30)
        with pytest.raises((KafkaException, confluent_kafka.KafkaException)) as info:
            p.commit_transaction(30)
        err = info.value.args[0]
        seen[name] = (err.name(), err.retriable(), err.txn_requires_abort(), err.fatal(), tuple(reports))
        p.abort_transaction(30)
        mock_cluster.clear_request_errors(ApiKey.PRODUCE)
        if name == "compat":
            p.close(5)
    assert seen["compat"] == seen["confluent"] == ("TOPIC_AUTHORIZATION_FAILED", False, True, False,
                                                   ("TOPIC_AUTHORIZATION_FAILED",))


def test_delivery_report_only_error_matches_confluent_kafka(mock_cluster: MockCluster,
                                                            unique_topic: Callable[[str], str]) -> None:
    """delivery.report.only.error: on_delivery and a produce() callback are called for failed records
    only; a delivered record still counts in len() and queue.buffering.max.messages until poll() serves its
    report (silently), as confluent-kafka's dr_msg_cb drops it only then."""
    seen: dict[str, list[Any]] = {}
    for name, make in BOTH:
        topic, other = unique_topic(f"droe-{name}"), unique_topic(f"droe-{name}")
        mock_cluster.create_topic(topic, 1, 1)
        mock_cluster.create_topic(other, 1, 1)
        out = seen.setdefault(name, [])

        def own(e: Any, m: Any, out: list[Any] = out) -> None:
            out.append(("own", e.name() if e else None, m.value()))

        p = make({"bootstrap.servers": mock_cluster.bootstrap_servers, "delivery.report.only.error": True,
                  "queue.buffering.max.messages": 2,
                  "on_delivery": lambda e, m, out=out: out.append((e.name() if e else None, m.value()))})
        p.produce(topic, b"ok-1")
        p.produce(topic, b"ok-2", on_delivery=own)
        if name == "compat":
            _delivered_unserved(p)  # acknowledged by the broker; the reports are not served
        else:
            time.sleep(1.0)
        out.append(("queued", len(p) > 0))
        try:
            p.produce(topic, b"full")
            out.append("accepted")
        except BufferError:
            out.append("BufferError")
        out.append(("served", p.poll(10) > 0, len(p)))
        p.produce(topic, b"ok-3", on_delivery=own)
        out.append(("flush", p.flush(30), len(p)))
        mock_cluster.push_request_errors(ApiKey.PRODUCE, [29])
        p.produce(topic, b"denied-1")
        out.append(("flush", p.flush(30), len(p)))
        mock_cluster.push_request_errors(ApiKey.PRODUCE, [29])
        p.produce(other, b"denied-2", on_delivery=own)  # a denied topic's next produce() raises
        out.append(("flush", p.flush(30), len(p)))
        if name == "compat":
            p.close(5)
    assert seen["compat"] == seen["confluent"] == [
        ("queued", True), "BufferError", ("served", True, 0), ("flush", 0, 0),
        ("TOPIC_AUTHORIZATION_FAILED", b"denied-1"), ("flush", 0, 0),
        ("own", "TOPIC_AUTHORIZATION_FAILED", b"denied-2"), ("flush", 0, 0)]


@pytest.mark.parametrize("conf", [{"no.such.property": 1}, {"linger.ms": "abc"}, {"acks": "bogus"},
                                  {"partitioner": "nope"}, {"queue.buffering.max.messages": -5},
                                  {"enable.idempotence": "maybe"}, {"log_level": 8}, {"log_level": -1},
                                  {"socket.timeout.ms": 9}, {"socket.timeout.ms": "abc"},
                                  {"broker.address.family": "v5"}, {"enable.random.seed": "maybe"},
                                  {"socket.keepalive.enable": "maybe"}])
def test_config_errors_are_kafka_exceptions_as_confluent_kafkas(conf: dict[str, Any]) -> None:
    """confluent-kafka raises KafkaException(_INVALID_ARG) for a bad config; so does the compat Producer
    (and the exception is sparkafka's ConfigError, naming the property)."""
    with pytest.raises(confluent_kafka.KafkaException) as theirs:
        confluent_kafka.Producer({"bootstrap.servers": "127.0.0.1:1", **conf})
    with pytest.raises(KafkaException) as ours:
        Producer({"bootstrap.servers": "127.0.0.1:1", **conf})
    assert ours.value.args[0].code() == theirs.value.args[0].code() == KafkaError._INVALID_ARG
    assert isinstance(ours.value, ConfigError) and ours.value.key == next(iter(conf))


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_produce_does_not_wait_for_a_topics_metadata() -> None:
    """librdkafka's produce() never blocks: a record for a topic without metadata is queued and fails in its
    report. KafkaProducer.send (Java's) waits max.block.ms in the caller's thread for it; the confluent layer
    holds such a record instead (it waited there 2 s per produce() here, 60 s at the default)."""
    bootstrap = f"127.0.0.1:{_unused_port()}"  # nobody answers: no metadata ever
    reports, on_delivery, _ = collect()
    p = Producer({"bootstrap.servers": bootstrap, "max.block.ms": 2000, "on_delivery": on_delivery})
    real = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 2000})
    try:
        for producer in (p, real):
            start = time.monotonic()
            for topic in ("a", "b", "a"):
                producer.produce(topic, b"v")
            assert time.monotonic() - start < 0.5, type(producer)
        assert len(p) == 3
        assert p.flush(15) == 0
    finally:
        p.close(5)
        real.purge()
        real.flush(5)
    assert sorted((err.code() if err else None, msg.topic()) for err, msg in reports) == [
        (KafkaError._MSG_TIMED_OUT, "a"), (KafkaError._MSG_TIMED_OUT, "a"), (KafkaError._MSG_TIMED_OUT, "b")]


def test_records_held_for_their_topics_metadata_keep_produce_order(
        tansu: Any, unique_topic: Callable[[str], str]) -> None:
    """The first records of a new topic wait for its metadata while produce() goes on: every record of the
    topic goes out in produce order (the held ones first), so each key's records are in order in the log."""
    topic = unique_topic("held")
    create_topic(tansu.bootstrap_servers, topic, partitions=3)
    reports, on_delivery, _ = collect()
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers, "on_delivery": on_delivery})
    try:
        for i in range(3000):
            p.produce(topic, str(i).encode(), key=f"k{i % 7}".encode())
        assert len(p._hold) > 0 or reports == []  # the first ones were held (unless the metadata was quick)
        assert p.flush(30) == 0
    finally:
        p.close(10)
    assert len(reports) == 3000 and all(err is None for err, _ in reports)
    by_key: dict[bytes, list[int]] = {}
    for record in consume_all(tansu.bootstrap_servers, topic, expected_count=3000):
        assert record.key is not None and record.value is not None
        by_key.setdefault(record.key, []).append(int(record.value))
    assert sum(map(len, by_key.values())) == 3000
    for key, values in by_key.items():
        assert values == sorted(values), key


def test_abort_fails_the_records_held_for_metadata_and_commit_waits_for_them(
        mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    """A transaction's records still waiting for their topic's metadata: abort_transaction() purges them
    (_PURGE_QUEUE, not sent later into another transaction); commit_transaction() sends them first."""
    topic = unique_topic("heldtxn")
    mock_cluster.create_topic(topic, 3, 3)
    mock_cluster.topic_set_error(topic, 3)  # UNKNOWN_TOPIC_OR_PARTITION: no metadata for now
    reports, on_delivery, _ = collect()
    p = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "transactional.id": f"{topic}-id",
                  "on_delivery": on_delivery})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, f"aborted-{i}")
        assert len(p._hold) == 5
        p.abort_transaction(30)
        assert [err.code() if err else None for err, _ in reports] == [KafkaError._PURGE_QUEUE] * 5 and len(p) == 0
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, f"committed-{i}")
        threading.Timer(0.5, lambda: mock_cluster.topic_set_error(topic, 0)).start()  # the metadata comes
        p.commit_transaction(30)
        assert len(p) == 0 and len(reports) == 10 and all(err is None for err, _ in reports[5:])
    finally:
        p.close(10)
    visible = sorted(r.value or b"" for r in committed_view(read_log(mock_cluster.bootstrap_servers, topic)))
    assert visible == sorted(f"committed-{i}".encode() for i in range(5))


def test_close_is_bounded_by_its_timeout(mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    """close(timeout) with records the brokers do not answer: about ``timeout``, not twice it (flush() and the
    producer's close each waited the whole timeout)."""
    topic = unique_topic("close")
    mock_cluster.create_topic(topic, 1, 3)
    p = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers})
    p.produce(topic, b"warm")
    assert p.flush(30) == 0
    for broker in (1, 2, 3):
        mock_cluster.broker_set_rtt(broker, 10_000)
    try:
        for _ in range(10):
            p.produce(topic, b"v")
        start = time.monotonic()
        p.close(1.0)
        elapsed = time.monotonic() - start
    finally:
        for broker in (1, 2, 3):
            mock_cluster.broker_set_rtt(broker, 0)
    assert 0.9 < elapsed < 1.7, elapsed


# ------------------------------------------------- produce()'s arguments, as confluent-kafka takes them


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"partition": 1.0}, TypeError),
    ({"partition": "1"}, TypeError),
    ({"partition": 2**31}, OverflowError),  # a C int
    ({"partition": -2**31 - 1}, OverflowError),
    ({"timestamp": 1.5}, TypeError),
    ({"timestamp": 2**63}, OverflowError),  # a C long long
    ({"headers": [("h", 5)]}, TypeError),
])
def test_produce_refuses_the_arguments_confluent_kafka_refuses(kwargs: dict[str, Any],
                                                               error: type[BaseException]) -> None:
    """No broker needed: produce() never waits, and these are refused before the record is queued."""
    bootstrap = f"127.0.0.1:{_unused_port()}"
    real = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    p = Producer({"bootstrap.servers": bootstrap})
    try:
        with pytest.raises(error):
            real.produce("t", b"v", **kwargs)
        with pytest.raises(error) as ours:
            p.produce("t", b"v", **kwargs)
        assert type(ours.value) is error and len(p) == 0
        assert next(iter(kwargs)) in str(ours.value) or "header" in str(ours.value)
    finally:
        p.close(0)


def test_produce_refuses_what_confluent_kafka_would_send_wrong() -> None:
    """confluent-kafka sends a negative timestamp as the record's CreateTime (Java's producer takes 0 ..
    2**63-1 only; -1 is the protocol's "no timestamp") and a bytes header key as its repr ("b'k'"): the compat
    Producer refuses both, saying why, instead of sending them."""
    bootstrap = f"127.0.0.1:{_unused_port()}"
    real = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    p = Producer({"bootstrap.servers": bootstrap})
    try:
        real.produce("t", b"v", timestamp=-1)  # accepted there
        real.produce("t", b"v", headers=[(b"k", b"1")])  # type: ignore[list-item]
        with pytest.raises(KafkaException, match=r"timestamp must be from 0 .* got -1") as info:
            p.produce("t", b"v", timestamp=-1)
        assert info.value.args[0].code() == KafkaError._INVALID_ARG
        with pytest.raises(TypeError, match=r"header key b'k' must be a str: confluent-kafka would send its repr"):
            p.produce("t", b"v", headers=[(b"k", b"1")])  # type: ignore[list-item]
        with pytest.raises(TypeError, match=r"header key b'k' must be a str"):
            p.produce("t", b"v", headers={b"k": b"1"})  # type: ignore[dict-item]
        assert len(p) == 0
    finally:
        real.purge()
        real.flush(5)
        p.close(0)


def test_produce_takes_bools_and_non_str_header_keys_as_confluent_kafka(mock_cluster: MockCluster,
                                                                       unique_topic: Callable[[str], str]) -> None:
    """partition=True is partition 1 and timestamp=True the CreateTime 1 (both are C integers there); a header
    key 5 is sent as "5" (str(key)). Both producers' records are read back and compared."""
    seen: dict[str, list[tuple[Any, ...]]] = {}
    for name, make in BOTH:
        topic = unique_topic(f"args-{name}")
        mock_cluster.create_topic(topic, 2, 1)
        p = make({"bootstrap.servers": mock_cluster.bootstrap_servers})
        p.produce(topic, b"a", partition=True)
        p.produce(topic, b"b", partition=0, timestamp=True)
        p.produce(topic, b"c", partition=0, headers=[(5, b"x")])
        assert p.flush(10) == 0
        if name == "compat":
            p.close(5)
        seen[name] = [(r.value, r.partition, r.timestamp if r.value == b"b" else None, r.headers)
                      for r in consume_all(mock_cluster.bootstrap_servers, topic, expected_count=3)]
    assert seen["compat"] == seen["confluent"]
    assert sorted(seen["compat"]) == [(b"a", 1, None, []), (b"b", 0, 1, []), (b"c", 0, None, [("5", b"x")])]


def test_a_negative_partition_before_the_topics_metadata_is_reported_as_confluent_kafka(
        mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    """partition=-2 to a topic the producer has no metadata for: queued, then reported _UNKNOWN_PARTITION with
    partition() -2 and librdkafka's text; once the metadata is known, produce() raises it."""
    seen: dict[str, list[tuple[Any, ...]]] = {}
    for name, make in BOTH:
        topic = unique_topic(f"neg-{name}")
        mock_cluster.create_topic(topic, 2, 1)
        out = seen.setdefault(name, [])
        p = make({"bootstrap.servers": mock_cluster.bootstrap_servers,
                  "on_delivery": lambda e, m, out=out: out.append((*_accessors(e, m), e.str() if e else None))})
        p.produce(topic, b"v", partition=-2)
        p.produce(topic, b"w", partition=1)
        assert p.flush(10) == 0
        with pytest.raises((KafkaException, confluent_kafka.KafkaException)) as info:
            p.produce(topic, b"v", partition=-2)
        assert info.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
        if name == "compat":
            p.close(5)
    assert seen["compat"] == seen["confluent"]
    assert seen["compat"][0] == ("_UNKNOWN_PARTITION", -2, None, TIMESTAMP_NOT_AVAILABLE, -1, "float",
                                 "Local: Unknown partition")


def test_a_record_too_large_is_refused_at_once_even_for_a_topic_without_metadata() -> None:
    """librdkafka raises MSG_SIZE_TOO_LARGE from produce() whether or not it knows the topic; held for the
    topic's metadata, such a record failed only later, with _MSG_TIMED_OUT."""
    p = Producer({"bootstrap.servers": f"127.0.0.1:{_unused_port()}", "max.block.ms": 2000})
    try:
        with pytest.raises(KafkaException) as info:
            p.produce("a", b"x" * 2_000_000)
        assert info.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE and len(p) == 0
    finally:
        p.close(5)


def _network_threads(client_id: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"kafka-producer-network-thread | {client_id}"]


def test_a_dropped_producer_sends_what_it_had_then_stops(tansu: Any, unique_topic: Callable[[str], str]) -> None:
    """confluent-kafka's users drop a Producer without close() (librdkafka destroys its handle with the object):
    once its records are delivered it is collected and its I/O thread stops, instead of running (and
    reconnecting to a broker that may be gone) for the life of the process. Records queued when it was dropped,
    one topic known and one without metadata yet (held), are all sent first."""
    known, new = unique_topic("drop-known"), unique_topic("drop-new")
    create_topic(tansu.bootstrap_servers, known, 2)
    client_id = unique_topic("dropped")
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers, "client.id": client_id, "linger.ms": 300,
                  "error_cb": lambda error: None})  # its connection listeners must not keep the Producer alive
    p.produce(known, b"first", b"k")
    assert p.flush(10) == 0  # the known topic's metadata is there: its records go to a batch at once
    for i in range(50):
        p.produce(new, f"v{i}".encode(), b"k")  # held for the new topic's metadata
        p.produce(known, f"v{i}".encode(), b"k")  # in a batch for linger.ms
    alive = weakref.ref(p)
    del p
    assert _network_threads(client_id)
    deadline = time.monotonic() + 30
    while _network_threads(client_id) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert alive() is None and not _network_threads(client_id), "the dropped Producer was never closed"
    assert [r.value for r in consume_all(tansu.bootstrap_servers, new, expected_count=50)] == [
        f"v{i}".encode() for i in range(50)]
    assert len(consume_all(tansu.bootstrap_servers, known, expected_count=51)) == 51


def test_a_closed_producer_is_not_closed_again_when_collected(tansu: Any) -> None:
    p = Producer({"bootstrap.servers": tansu.bootstrap_servers})
    finalizer = p._finalizer
    assert finalizer.alive
    p.close(5)
    assert not finalizer.alive


def _transport_events(make: Callable[[dict[str, Any]], Any], conf: dict[str, Any],
                      steps: Callable[[Any], None], seconds: float) -> list[tuple[str, str, bool]]:
    seen: list[tuple[str, str, bool]] = []
    p = make({**conf, "error_cb": lambda e: seen.append((e.name(), e.str(), e.fatal()))})
    steps(p)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        p.poll(0.1)
    p.purge()
    p.flush(5)
    return seen


def test_unreachable_brokers_reach_error_cb_as_in_confluent_kafka() -> None:
    """librdkafka tells error_cb of each broker it cannot reach (_TRANSPORT, "host:port/bootstrap: ...") and,
    once every one failed, _ALL_BROKERS_DOWN ("2/2 brokers are down"), none fatal; the compat Producer told
    it nothing (its records waited, then timed out)."""
    with socket.socket() as one, socket.socket() as two:  # two ports nothing listens on
        one.bind(("127.0.0.1", 0))
        two.bind(("127.0.0.1", 0))
        ports = [one.getsockname()[1], two.getsockname()[1]]
        conf = {"bootstrap.servers": ",".join(f"127.0.0.1:{port}" for port in ports)}
        outcome = {name: _transport_events(make, conf, lambda p: p.produce("t", b"v"), 2.5) for name, make in BOTH}
    for name, seen in outcome.items():
        assert not any(fatal for _, _, fatal in seen), name
        transport = {text.split("/")[0] for code, text, _ in seen if code == "_TRANSPORT"}
        assert transport == {f"127.0.0.1:{port}" for port in ports}, (name, seen)
        assert [code for code, _, _ in seen].count("_ALL_BROKERS_DOWN") == 1, name
        assert all("/bootstrap: " in text for code, text, _ in seen if code == "_TRANSPORT"), name
        assert {code for code, _, _ in seen} == {"_TRANSPORT", "_ALL_BROKERS_DOWN"}, name
    # librdkafka's count varies ("2/2", once "0/3": its internal broker thread counts too); ours counts the brokers
    assert [text for code, text, _ in outcome["compat"] if code == "_ALL_BROKERS_DOWN"] == ["2/2 brokers are down"]


def test_a_broker_lost_and_back_reaches_error_cb_per_outage(mock_cluster: MockCluster,
                                                             unique_topic: Callable[[str], str]) -> None:
    """A lost connection is _TRANSPORT and the outage _ALL_BROKERS_DOWN once, not once per reconnect attempt;
    after the broker is back and lost again, both again. A healthy producer and its close() report nothing."""
    topic = unique_topic("lost")
    mock_cluster.create_topic(topic, 1, 1)
    seen: list[tuple[str, str]] = []
    p = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers,
                  "error_cb": lambda e: seen.append((e.name(), e.str()))})
    try:
        p.produce(topic, b"v")
        assert p.flush(10) == 0 and seen == []
        for outage in (1, 2):
            for broker in (1, 2, 3):
                mock_cluster.broker_set_down(broker)
            deadline = time.monotonic() + 10
            while [code for code, _ in seen].count("_ALL_BROKERS_DOWN") < outage and time.monotonic() < deadline:
                p.poll(0.1)
            for _ in range(15):  # reconnect attempts every 50 ms .. 1 s: still one report of the outage
                p.poll(0.1)
            assert [code for code, _ in seen].count("_ALL_BROKERS_DOWN") == outage, seen
            for broker in (1, 2, 3):
                mock_cluster.broker_set_up(broker)
            p.produce(topic, b"back")
            assert p.flush(15) == 0
        transport = [text for code, text in seen if code == "_TRANSPORT"]
        assert transport and len(transport) <= 2 * 3 * 2, seen  # per outage, at most a failure and a refusal per node
    finally:
        before = len(seen)
        p.close(5)
    p.poll(0)
    assert len(seen) == before


def test_flush_returns_when_a_polling_thread_serves_the_last_reports(mock_cluster: MockCluster,
                                                                      unique_topic: Callable[[str], str]) -> None:
    """The usual confluent-kafka pattern: a thread polls in a loop while others produce and flush. flush()
    waited in poll() for the next report to serve itself; when the polling thread served the last ones,
    nothing woke it (and one shared wake-up flag lost wake-ups between two waiters): flush() without a
    timeout hung in about half of these rounds (a race review), with len(producer) == 0."""
    topic = unique_topic("poller")
    mock_cluster.create_topic(topic, 1, 1)
    mock_cluster.broker_set_rtt(1, 30)
    hung: list[bool] = []
    try:
        for _ in range(8):
            p = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "linger.ms": 0})
            p.produce(topic, b"warm")
            assert p.flush(10) == 0
            stop = threading.Event()

            def poll_loop(p: Producer = p, stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    p.poll(0.5)

            def trickle(p: Producer = p) -> None:
                for _ in range(20):
                    p.produce(topic, b"v")
                    time.sleep(0.005)

            threads = [threading.Thread(target=poll_loop, daemon=True), threading.Thread(target=trickle, daemon=True)]
            for t in threads:
                t.start()
            time.sleep(0.01)
            returned = threading.Event()
            flusher = threading.Thread(target=lambda p=p, r=returned: (p.flush(), r.set()), daemon=True)
            flusher.start()  # no timeout: it returns once every report is served, by whichever thread
            hung.append(not returned.wait(4))
            if hung[-1]:
                p.produce(topic, b"rescue")  # a new report wakes it (the old behaviour)
                returned.wait(10)
            stop.set()
            for t in (*threads, flusher):
                t.join(5)
            p.close(5)
    finally:
        mock_cluster.broker_set_rtt(1, 0)
    assert hung == [False] * 8
