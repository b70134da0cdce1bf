"""Round trips for every codec (Hypothesis), cross-checked with kafka-python's independent v2 decoder."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkafka.record import (
    CompressionType,
    RecordBatchBuilder,
    decode_batch,
    decompress,
    encode_batch,
    estimate_record_size,
)
from sparkafka.record.builder import RecordTuple

kafka_codec = pytest.importorskip("kafka.codec")
default_records = pytest.importorskip("kafka.record.default_records")

CODECS = list(CompressionType)


class _SnappyShim:
    """kafka-python decodes xerial framing itself but needs python-snappy for raw blocks."""

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


@pytest.fixture(autouse=True, scope="module")
def _kafka_python_snappy() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        if kafka_codec.snappy is None:
            mp.setattr(kafka_codec, "snappy", _SnappyShim())
        yield


def kafka_python_decode(data: bytes) -> tuple[Any, list[tuple[Any, ...]]]:
    batch = default_records.DefaultRecordBatch(data)
    assert batch.validate_crc()
    records = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]
    return batch, records


def expected_records(records: Sequence[RecordTuple]) -> list[tuple[Any, ...]]:
    return [(i, ts, k, v, list(h or [])) for i, (ts, k, v, h) in enumerate(records)]


header = st.tuples(st.text(st.characters(codec="utf-8"), max_size=6), st.none() | st.binary(max_size=12))
record = st.tuples(
    st.integers(min_value=-1, max_value=2**42),
    st.none() | st.binary(max_size=24),
    st.none() | st.binary(max_size=150),
    st.none() | st.lists(header, max_size=3),
)
record_lists = st.lists(record, min_size=1, max_size=20)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists, pid=st.integers(-1, 2**40), seq=st.integers(-1, 2**31 - 1), txn=st.booleans())
def test_round_trip(
    codec: CompressionType, records: list[RecordTuple], pid: int, seq: int, txn: bool
) -> None:
    builder = RecordBatchBuilder(bytearray(512), 2**31 - 1, codec)  # a short pooled buffer
    grown = 0
    for ts, key, value, headers in records:
        step = builder.try_append(ts, key, value, headers)
        if step < 0:  # only the short buffer refused it: a longer one, as RecordAccumulator._grow does
            assert builder.wanted_capacity > len(builder._buf)
            builder.replace_buffer(bytearray(2 * builder.wanted_capacity))
            step = builder.try_append(ts, key, value, headers)
        assert step > 0
        grown += step
    assert grown == builder.estimated_size_in_bytes
    assert builder.uncompressed_bytes <= sum(estimate_record_size(k, v, h) for _, k, v, h in records)
    data = bytes(builder.close(pid, 5, seq, txn))
    assert data == encode_batch(records, compression=codec, producer_id=pid, producer_epoch=5,
                                base_sequence=seq, is_transactional=txn)

    batch = decode_batch(data)
    assert batch.compression is codec
    assert batch.last_offset_delta == len(records) - 1
    assert batch.base_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (
        pid, 5, seq, txn)
    assert [tuple(r) for r in batch.records] == expected_records(records)
    assert len(decompress(codec, data[61:])) == builder.uncompressed_bytes

    kp_batch, kp_records = kafka_python_decode(data)
    assert kp_batch.compression_type == int(codec)
    assert kp_batch.max_timestamp == batch.max_timestamp
    assert kp_batch.producer_id == pid and kp_batch.base_sequence == seq
    assert kp_batch.is_transactional == txn
    assert kp_records == expected_records(records)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_many_records_and_large_values(codec: CompressionType) -> None:
    # offset deltas, lengths and timestamp deltas beyond the precomputed varint table
    records: list[RecordTuple] = [(1000 + (i % 7) * 3000 - 5000, None, b"%d" % i, None) for i in range(17000)]
    records.append((-1, b"k" * 16384, b"v" * 70000, [("ключ-🔑", b"h" * 9000), ("", None)]))
    data = encode_batch(records, compression=codec)
    batch = decode_batch(data)
    assert len(batch.records) == len(records)
    assert [tuple(r) for r in batch.records] == expected_records(records)
    assert batch.max_timestamp == max(r[0] for r in records)
    _, kp_records = kafka_python_decode(data)
    assert kp_records == expected_records(records)


def test_uncompressed_bytes_match_kafka_python_builder() -> None:
    # kafka-python's own encoder writes the same bytes except partitionLeaderEpoch (0 there, -1 here)
    records: list[RecordTuple] = [
        (1700000000000, b"key", b"value", []),
        (1700000000003, None, b"", [("a", b"1"), ("ü", None)]),
        (1699999999000, b"", None, []),
    ]
    kp = default_records.DefaultRecordBatchBuilder(2, 0, False, 77, 1, 12, 1 << 20)
    for offset, (ts, key, value, headers) in enumerate(records):
        kp.append(offset, ts, key, value, headers)
    theirs = bytes(kp.build())
    ours = encode_batch(records, producer_id=77, producer_epoch=1, base_sequence=12, partition_leader_epoch=0)
    assert ours == theirs
