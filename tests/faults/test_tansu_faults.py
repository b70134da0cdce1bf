"""Network faults in front of a strict broker (Tansu behind ``FaultProxy``) and a Tansu restart, with the
plain idempotent producer: 100,000 keyed records each, read back with confluent-kafka.

Tansu deduplicates resent batches (DUPLICATE_SEQUENCE_NUMBER) and rejects gaps, so these scenarios check
the idempotent producer end to end: requests that time out are resent with the same producer id and
sequences and never written twice, and order holds across reconnects.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from faults.proxy import FaultProxy, SlowWindow
from faults.scenario import RECORDS, Scenario, assert_clean
from sparkafka import errors
from sparkafka.broker import EmbeddedBroker
from support.consume import create_topic

pytestmark = [pytest.mark.faults, pytest.mark.broker, pytest.mark.timeout(240)]

PARTITIONS = 4  # Tansu's default: a topic auto-created after a restart gets the same count


def _later(seconds: float, action: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
    return timer


def test_round_trip_time_above_the_request_timeout(
        proxied_tansu: FaultProxy, unique_topic: Callable[[str], str]) -> None:
    """Latency above request.timeout.ms: Produce requests time out, are retried, nothing is duplicated or lost.

    Each slow window opens with a Produce request on the wire (``FaultProxy.slow_window``). Latency
    switched on at a record count instead can find the producer (re)connecting (at start-up, or after
    the previous window's timeouts when the window falls late): its ApiVersions request then times out
    as well, so no Produce request reaches the wire while the latency lasts and nothing is retried."""
    proxy = proxied_tansu
    topic = unique_topic("rtt")
    create_topic(proxy.address, topic, partitions=PARTITIONS)
    run = Scenario(proxy.address, topic, request_timeout_ms=1000)
    windows: list[SlowWindow] = []

    def slow(index: int) -> None:
        if index in (20_000, 70_000):
            windows.append(proxy.slow_window(latency_ms=1500, seconds=2.5))

    run.send(RECORDS, every=10_000, hook=slow)
    for window in windows:
        assert window.wait(timeout=60), f"no Produce request reached the proxy to open {window}"
    report = run.finish()
    retries = run.producer.metrics()["record-retry-total"]
    assert_clean(report, all_acknowledged=True)
    # the fault happened: in each window the producer gave up on a Produce request (closed its connection
    # before the answer came) and resent its records
    assert len(windows) == 2 and all(w.produce_abandoned > 0 for w in windows), windows
    assert retries > 0, (retries, windows)


def test_the_broker_goes_down_and_comes_back(
        proxied_tansu: FaultProxy, unique_topic: Callable[[str], str]) -> None:
    proxy = proxied_tansu
    topic = unique_topic("bounce")
    create_topic(proxy.address, topic, partitions=PARTITIONS)
    run = Scenario(proxy.address, topic)
    timers: list[threading.Timer] = []
    lost: list[int] = []
    run.producer._client.add_disconnect_listener(lambda node, error: lost.append(node))

    def bounce(index: int) -> None:
        if index in (25_000, 65_000):
            proxy.down()
            timers.append(_later(2.0, proxy.up))

    run.send(RECORDS, every=5_000, hook=bounce)
    for timer in timers:
        timer.join()
    lost_before_close = [node for node in lost if node >= 0]  # not the bootstrap connection; close() comes later
    report = run.finish()
    assert_clean(report, all_acknowledged=True)
    assert lost_before_close, "the producer never lost its connection: the outages did not happen under it"


def test_connections_cut_repeatedly(proxied_tansu: FaultProxy, unique_topic: Callable[[str], str]) -> None:
    """Every connection dropped every 5,000 records: requests on the wire are lost after the broker
    may have appended them; resends must be recognised as duplicates."""
    proxy = proxied_tansu
    topic = unique_topic("cut")
    create_topic(proxy.address, topic, partitions=PARTITIONS)
    run = Scenario(proxy.address, topic)
    proxy.set_latency(20)  # answers spend a while in transit: a cut loses answers to processed requests
    cuts: list[bool] = []

    def cut(index: int) -> None:
        if index:
            cuts.append(proxy.cut_when_busy())

    run.send(RECORDS, every=5_000, hook=cut)
    retries = run.producer.metrics().get("record-retry-total", 0)
    report = run.finish()
    assert_clean(report, all_acknowledged=True)
    assert sum(cuts) >= 10 and retries > 0, (cuts, retries)


def test_tansu_restarts_mid_stream(tansu_private: EmbeddedBroker, unique_topic: Callable[[str], str]) -> None:
    """Tansu's memory storage loses the data and every producer id on restart: records acknowledged
    after the restart must be there exactly once and in order; records in flight during the restart
    succeed or fail with a typed error; nothing hangs."""
    broker = tansu_private
    topic = unique_topic("restart")
    create_topic(broker.bootstrap_servers, topic, partitions=PARTITIONS)
    run = Scenario(broker.bootstrap_servers, topic)
    restarted_at: list[float] = []

    def restart(index: int) -> None:
        if index == 40_000:
            broker.restart()
            create_topic(broker.bootstrap_servers, topic, partitions=PARTITIONS, exist_ok=True)
            restarted_at.append(time.monotonic())

    run.send(RECORDS, every=10_000, hook=restart)
    ledger = run.ledger
    report = run.finish(only=lambda i: ledger.callback_time[i] > restarted_at[0])
    assert_clean(report, log_kept=False)
    after = [i for i in range(len(ledger)) if ledger.callback_time[i] > restarted_at[0]]
    assert len(after) >= 50_000, f"only {len(after)} records were acknowledged after the restart"
    assert set(report.failures_by_type) <= {name for name in dir(errors) if name.endswith("Error")}
