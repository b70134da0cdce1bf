"""kafka-python's producer API on sparkafka: ``from sparkafka.compat.kafka_python import KafkaProducer``.

How it works: ``KafkaProducer(**configs)`` takes kafka-python's constructor arguments (``config.py``: one
table, kafka-python's defaults) and sends through ``sparkafka.KafkaProducer`` (``producer.py``);
``send()`` returns kafka-python's future (``future.py``); kafka-python's error names are in
``sparkafka.compat.kafka_python.errors`` (for ``from kafka.errors import ...``).
"""

from sparkafka.compat.kafka_python import errors
from sparkafka.compat.kafka_python.future import FutureRecordMetadata, RecordMetadata, TopicPartition
from sparkafka.compat.kafka_python.producer import KafkaProducer

__all__ = ["FutureRecordMetadata", "KafkaProducer", "RecordMetadata", "TopicPartition", "errors"]
