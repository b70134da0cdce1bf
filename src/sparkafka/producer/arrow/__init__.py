"""The Arrow bulk path: the rows of an Arrow record batch sent as Kafka records, column by column.

How it works: ``KafkaProducer.send_arrow(topic, batch)`` is the entry (the Spark sink calls
``send.send_planned`` with a column plan made once per schema). A batch goes through four modules:

- ``send``: checks the column types against Spark's Kafka-sink contract (``plan_columns``) and the
  values (topics, partitions, header keys) before anything is appended, then hands each topic's
  columns to ``KafkaProducer.send_columns``;
- ``tails``: encodes every row's record tail (key, value, headers) from the columns' buffers, in C
  or with Arrow kernels (sans-I/O);
- ``bulk``: chooses partitions column-wise (explicit, custom partitioner, murmur2, KIP-794 sticky;
  ``key_hash`` is murmur2 of a key column in Arrow kernels when the C accelerator is missing), groups
  rows by partition and appends them with ``RecordAccumulator.append_tails``;
- ``report``: ``ArrowSendResult``, the completion handle over the batches the rows went to, and the
  ``DeliveryReport`` it folds them into.

Everything after the append is the ordinary batch life cycle of ``send()``. ``send``, ``tails`` and
``bulk`` need ``pyarrow`` (the ``spark`` extra); this package and ``report`` do not, so the result
types can be imported without it.
"""

from sparkafka.producer.arrow.report import ArrowSendResult, DeliveryReport, OffsetRange

__all__ = ["ArrowSendResult", "DeliveryReport", "OffsetRange"]
