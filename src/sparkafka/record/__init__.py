"""Sans-I/O record layer: v2 record batches (magic 2), their codecs and CRC-32C.

How it works: ``layout`` declares the batch header and its constants, ``builder`` encodes a producer
batch (``RecordBatchBuilder``, ``encode_batch``), ``reader`` decodes and verifies batches
(``decode_batches``), ``compression`` frames each codec the way the Java client does, and ``crc``
computes CRC-32C. No sockets, threads or clocks here.
"""

from sparkafka.record.builder import (
    RecordBatchBuilder,
    encode_batch,
    estimate_batch_size_upper_bound,
    estimate_record_size,
    set_producer_state,
)
from sparkafka.record.compression import CompressionType, compress, decompress, validate_level
from sparkafka.record.crc import crc32c
from sparkafka.record.layout import RECORD_BATCH_OVERHEAD, increment_sequence
from sparkafka.record.reader import DecodedBatch, Record, decode_batch, decode_batches

__all__ = [
    "RECORD_BATCH_OVERHEAD",
    "CompressionType",
    "DecodedBatch",
    "Record",
    "RecordBatchBuilder",
    "compress",
    "crc32c",
    "decode_batch",
    "decode_batches",
    "decompress",
    "encode_batch",
    "estimate_batch_size_upper_bound",
    "estimate_record_size",
    "increment_sequence",
    "set_producer_state",
    "validate_level",
]
