"""The PySpark sink: write DataFrames to Kafka through the sparkafka producer.

How it works: ``register(spark)`` registers ``SparkafkaDataSource`` under the format name
``sparkafka`` (after shipping the executors a pure-Python copy of sparkafka if they cannot import it:
``shipping``); after that ``df.write.format("sparkafka")...save()`` and
``df.writeStream.format("sparkafka")...start()`` send each row as one Kafka record, with the same
DataFrame contract and ``kafka.*`` options as Spark's own Kafka sink. Rows reach the executors'
Python workers as Arrow record batches and are sent by ``sparkafka.producer.arrow``; each worker process
keeps one producer per config (``producer_cache``). Every task flushes and fails if any of its
records failed, so Spark retries it.

Delivery guarantee: at-least-once by default. A retried task (or a re-run streaming micro-batch after
a failure) sends its whole partition again, so records that a failed attempt had already delivered
appear twice; nothing acknowledged is lost. With ``sparkafka.guarantee=exactly_once`` every task
writes inside a Kafka transaction that the driver commits once Spark decided the write succeeded
(``exactly_once``): a ``read_committed`` consumer sees every row exactly once.
"""

from __future__ import annotations

from sparkafka.spark.commit import SparkafkaCommitMessage, WriteSummary, read_summaries
from sparkafka.spark.datasource import SparkafkaDataSource
from sparkafka.spark.registration import register
from sparkafka.spark.shipping import ExecutorEnvironmentError

__all__ = ["ExecutorEnvironmentError", "SparkafkaCommitMessage", "SparkafkaDataSource", "WriteSummary",
           "read_summaries", "register"]
