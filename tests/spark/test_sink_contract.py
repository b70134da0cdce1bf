"""The sparkafka sink against what users of Spark's own ``kafka`` sink expect.

How it works: one test runs a real Spark write (local[2,4]) into the embedded Tansu broker and reads the
topic back with confluent-kafka (``support.consume``); the other runs the task body ``write_partition``
with a real producer against the librdkafka mock cluster with the partition leader taken down, and
counts how many input batches the task pulled.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from support.consume import consume_all, create_topic

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_topic_option_ignores_a_topic_column_of_another_type(spark: Any, broker: Any) -> None:
    """Spark's Kafka sink checks the ``topic`` column's type only when no ``topic`` option is set (the
    option overrides the column), so a DataFrame whose data has, say, an integer ``topic`` field can
    be written with the option. The sparkafka sink must not refuse it."""
    topic = topic_name("topic-type")
    create_topic(broker.bootstrap_servers, topic, 1)
    df = spark.range(0, 5, 1, 1).selectExpr("id as topic", "cast(id as string) as value")
    (df.write.format("sparkafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)
     .option("topic", topic).mode("append").save())
    records = consume_all(broker.bootstrap_servers, topic, 5)
    assert sorted(r.value or b"" for r in records) == [str(n).encode() for n in range(5)]


def test_task_stops_reading_input_once_a_record_failed(mock_cluster: Any) -> None:
    """Spark's Kafka sink fails a task at the first row after a failed send. With the leader of the
    partition unreachable, every further Arrow batch would block up to max.block.ms for memory (and
    then fail), so reading on to the end of the partition delays the failure by batches x
    max.block.ms (about an hour for 100 batches at the defaults). The task must stop reading its
    input once a record failed, and still fail."""
    import pyarrow as pa

    from sparkafka.errors import KafkaError
    from sparkafka.producer.arrow.send import plan_columns
    from sparkafka.spark.options import SinkOptions
    from sparkafka.spark.producer_cache import ProducerCache
    from sparkafka.spark.writer import write_partition

    topic = topic_name("fail-fast")
    mock_cluster.create_topic(topic, 1)
    mock_cluster.partition_set_leader(topic, 0, 1)
    options = SinkOptions.parse({
        "kafka.bootstrap.servers": mock_cluster.bootstrap_servers, "topic": topic,
        "kafka.buffer.memory": "262144", "kafka.max.block.ms": "300", "kafka.request.timeout.ms": "1000",
        "kafka.delivery.timeout.ms": "1500", "kafka.reconnect.backoff.max.ms": "200"})
    batch = pa.record_batch([pa.array([b"x" * 100] * 640)], names=["value"])  # ~70 KB per batch
    total, pulled = 40, []

    def batches() -> Any:
        for i in range(total):
            pulled.append(i)
            if i == 1:
                mock_cluster.broker_set_down(1)  # the leader goes away; metadata still names it
            yield batch

    cache = ProducerCache(reaper=False)
    with pytest.raises(KafkaError, match="failing the task"):
        write_partition(options, plan_columns(batch.schema, topic=topic), batches(), cache=cache)
    assert len(pulled) < total // 2, f"the task read {len(pulled)} of {total} batches after a failure"
    cache.close_all()
