"""The benchmark's Java peers (``benchmarks/java_peer.py``) send what they claim to, on Apache Kafka.

Their records/s is only comparable with sparkafka's if each JVM run sends the worker's workload and
counts only acknowledged records: the keyed program (Kafka's ``KafkaProducer``) must write the
worker's payload under the pool's keys (record i takes key i, zero-padded), each key on the partition
sparkafka's partitioner picks for it (both are Java's murmur2), and ``ProducerPerformance`` must write
the payload without keys. confluent-kafka reads back exactly the warm-up plus the timed records.
"""

from __future__ import annotations

from collections.abc import Callable

from sparkafka.cli.perf import make_keys, random_payload
from sparkafka.producer.murmur2 import partition_for_key
from support.benchmarks import load_benchmark
from support.consume import consume_all, create_topic
from support.kafka_cluster import KafkaCluster

PARTITIONS = 3


def test_keyed_java_peer_writes_the_worker_records(kafka: KafkaCluster, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("java-keyed")
    create_topic(kafka.bootstrap, topic, PARTITIONS)
    payload = random_payload(100)
    java_peer = load_benchmark("java_peer")
    result = java_peer.run("java", bootstrap=kafka.bootstrap, topic=topic, records=3000, payload=payload,
                           key_size=8, compression="lz4", batch_size=16384, warmup=1000)

    assert (result["acked"], result["errors"], result["warmup_records"]) == (3000, 0, 1000), result["first_error"]
    assert result["cpu_seconds"] > 0 and result["peak_rss_mb"] > 0
    assert result["percentiles_ms"]["p50"] > 0
    # the producer's own metrics, which benchmarks/scale.py reports: buffer.memory's default, real batches
    assert result["buffer_memory"] == 32 * 1024 * 1024
    assert result["batch_size_avg"] > 61 and result["records_per_request_avg"] >= 1  # 61: a batch's header
    assert 0 < result["rss_before_mb"] <= result["peak_rss_mb"]
    records = consume_all(kafka.bootstrap, topic, expected_count=4000)
    assert len(records) == 4000
    assert {r.value for r in records} == {payload}
    keys = make_keys(8)
    for partition in range(PARTITIONS):  # each partition holds the warm-up's keys, then the timed run's
        mine = [r.key for r in records if r.partition == partition]
        expected = [k for k in (keys[i] for i in range(1000)) if k is not None
                    and partition_for_key(k, PARTITIONS) == partition]
        expected += [k for k in (keys[i] for i in range(3000)) if k is not None
                     and partition_for_key(k, PARTITIONS) == partition]
        assert mine == expected


def test_producer_performance_peer_writes_keyless_records(kafka: KafkaCluster,
                                                          unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("java-perf")
    create_topic(kafka.bootstrap, topic, PARTITIONS)
    payload = random_payload(100, seed=7)
    java_peer = load_benchmark("java_peer")
    result = java_peer.run("java-perf", bootstrap=kafka.bootstrap, topic=topic, records=2000, payload=payload,
                           key_size=0, compression="none", batch_size=16384, warmup=500)

    assert (result["acked"], result["errors"], result["warmup_records"]) == (2000, 0, 500), result["first_error"]
    assert result["records_per_second"] > 0 and result["cpu_seconds"] > 0
    records = consume_all(kafka.bootstrap, topic, expected_count=2500)
    assert len(records) == 2500
    assert {(r.key, r.value) for r in records} == {(None, payload)}
