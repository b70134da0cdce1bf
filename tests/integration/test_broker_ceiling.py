"""The benchmark's broker-ceiling run (``benchmarks/broker_ceiling.py``) writes what it claims to.

Its records/s is only a ceiling if every request it counts was a real write: the brokers must accept
each pre-built batch resent with the next sequence, on every leader (the mock cluster spreads the
partitions over three brokers), in requests of one batch per partition up to max.request.size, and
an independent consumer must read back exactly the records counted as acknowledged, each batch's
records whole and in order.
"""

from __future__ import annotations

import pytest

from support.benchmarks import load_benchmark
from support.consume import consume_all

from .conftest import Target


@pytest.mark.parametrize("max_request_size", [1 << 20, 1], ids=["all-partitions", "one-batch-per-request"])
def test_ceiling_run_writes_every_record_it_counts(target: Target, max_request_size: int) -> None:
    topic = target.topic(partitions=3)
    ceiling = load_benchmark("broker_ceiling")
    result = ceiling.run_ceiling(target.bootstrap, topic, 2000, 4096, 8, 100, max_request_size)

    per_batch = result["records_per_batch"]
    assert result["errors"] == 0, result["first_error"]
    assert per_batch > 1
    rounds = -(-2000 // (3 * per_batch))
    assert result["acked"] == rounds * 3 * per_batch  # whole rounds: one batch per partition each
    records = consume_all(target.bootstrap, topic, expected_count=result["acked"])
    assert len(records) == result["acked"]
    for partition in range(3):
        mine = [r for r in records if r.partition == partition]
        assert [r.offset for r in mine] == list(range(rounds * per_batch))
        first = mine[:per_batch]  # every round resends the same batch: its records, in order
        for start in range(0, len(mine), per_batch):
            assert [(r.key, r.value) for r in mine[start:start + per_batch]] == [(r.key, r.value) for r in first]
    assert {len(r.key or b"") for r in records} == {8}
    assert {len(r.value or b"") for r in records} == {100}
