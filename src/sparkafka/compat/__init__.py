"""Drop-in producers for code written for kafka-python and confluent-kafka.

How it works: ``sparkafka.compat.kafka_python.KafkaProducer`` takes kafka-python's constructor
arguments and returns kafka-python-style futures; ``sparkafka.compat.confluent.Producer`` takes a
librdkafka config dict and serves delivery reports from ``poll()`` / ``flush()``. Both translate their
settings once to sparkafka's (Java's) keys and send through ``sparkafka.KafkaProducer``, with the
partitioner of the library they replace, so existing keys land on the same partitions. Switching is the
import line.
"""
