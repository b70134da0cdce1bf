"""The C send lane: ``KafkaProducer.send()`` for the common record in one C call.

How it works: with the C accelerator built (``sparkafka.accel``), ``install_send_lane`` makes a
``sparkafka._accel.SendLane`` for a producer and binds it as the instance attribute ``send``, which shadows
the class's Python ``send``. The lane appends a record exactly as the Python fast path (``KafkaProducer.send``
-> ``RecordAccumulator.append_open``) would when it can: topic a str, key and value bytes or None, no
partition, timestamp or headers, the topic's metadata known, the record leaving its partition's open batch
open, the partition queue's lock free. A record it checked but cannot append that way (it opens or fills a
batch, the sticky partition switches, the lock is held) goes to ``KafkaProducer._append_from_lane`` with the
partition and timestamp the lane chose: the rest of ``send`` from ``RecordAccumulator.append`` on (for a
transactional producer, the Python ``send``). Every other call goes to the Python ``send`` unchanged. The lane
changes nothing before it hands a call over, so behaviour and errors are the Python ones. What the lane reads
and changes is the interface of ``_c/_append.h`` (the state classes the batch, its builder, the partitioner
and the future are built on, and the open-batch append rule ``ProducerBatch.try_append_open`` runs in C) plus
what ``_send_lane.c`` lists: the accumulator's ``lane_topic``/``lane_queue``, asked once per topic and
partition, and three plain attributes (five with a transactional id: the lane then takes a record only while
the transaction manager's state is ``IN_TRANSACTION`` and the record's partition is in ``_txn_partitions``, so
the Python send checks the state and adds each partition to the transaction, as Java's ``doSend`` does). It is
not installed for producers with serializers or a custom partitioner (their sends take the Python path).
``disable()`` sends every later call to Python (close, fork).
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ..accel import ACCEL
from .future import FutureRecordMetadata
from .transactions import TxnState

if TYPE_CHECKING:
    from .producer import KafkaProducer

_SendLane: Any = getattr(ACCEL, "SendLane", None)


def install_send_lane(producer: KafkaProducer, python_send: Any) -> Any:
    """Bind a lane as ``producer.send`` and return it, or return None when the producer's sends
    must take the Python path (no accelerator, serializers, custom partitioner)."""
    tm = producer._tm
    if (_SendLane is None or producer._key_ser is not None or producer._value_ser is not None
            or producer._partitioner is not None):
        return None
    transactional = tm is not None and tm.transactional_id is not None
    # a transactional producer's records the lane does not take go to the whole Python send, which checks the
    # transaction's state and adds the partition: no ``_append_from_lane`` for it
    lane = _SendLane(types.MethodType(python_send, producer), producer._metadata, producer._accumulator, tm,
                     producer._record_limit, producer._ignore_keys, FutureRecordMetadata,
                     None if transactional else producer._append_from_lane,
                     TxnState.IN_TRANSACTION if transactional else None)
    producer.__dict__["send"] = lane
    return lane
