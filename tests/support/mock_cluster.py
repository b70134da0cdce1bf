"""librdkafka's mock Kafka cluster, driven through ctypes, for fault-injection tests.

How it works: the confluent-kafka wheel bundles librdkafka (``confluent_kafka.libs/
librdkafka-*.so*``); we load that same shared library (importing ``confluent_kafka`` first,
so the dynamic loader hands back the already loaded copy), create a bare producer handle
(``rd_kafka_new``) that owns the cluster, and call ``rd_kafka_mock_cluster_new``. The
cluster's brokers listen on loopback ports (ids 1..n) and speak the real protocol, so any
client can use ``bootstrap_servers``. Errors, RTTs, broker outages and leader moves are
injected through the ``rd_kafka_mock_*`` functions (experimental librdkafka API; see
``rdkafka_mock.h``). Errors pushed with ``push_request_errors`` are consumed one per
matching request, in order. The mock does not implement CreateTopics: use
``create_topic`` here (or let Metadata auto-create topics).

Notable: the mock advertises ApiVersions only up to v2 (a client asking for v3+ gets
UNSUPPORTED_VERSION and must fall back), Produce up to v10, InitProducerId up to v4.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType

__all__ = [
    "ApiKey",
    "MockCluster",
    "MockClusterError",
    "MockRequest",
    "TRANSPORT_ERROR",
    "librdkafka_path",
]

TRANSPORT_ERROR = -195
"""RD_KAFKA_RESP_ERR__TRANSPORT: pushed as an error, the mock broker drops the connection."""


class ApiKey:
    """Kafka API keys used with the error-injection calls."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    API_VERSIONS = 18
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28


class MockClusterError(RuntimeError):
    """A librdkafka mock call failed (the message names the call and the error)."""


@dataclass(frozen=True)
class MockRequest:
    """A request seen by the mock cluster while request tracking was on."""

    broker_id: int
    api_key: int
    timestamp_us: int


def librdkafka_path() -> str:
    """The path of the librdkafka shared library bundled with confluent-kafka."""
    import confluent_kafka

    package_dir = os.path.dirname(os.path.abspath(confluent_kafka.__file__))
    candidates = sorted(glob.glob(os.path.join(os.path.dirname(package_dir), "confluent_kafka.libs",
                                               "librdkafka*.so*")))
    if candidates:
        return candidates[0]
    found = ctypes.util.find_library("rdkafka")
    if found:
        return found
    raise MockClusterError("librdkafka not found in confluent_kafka.libs/ nor on the system")


_lib: ctypes.CDLL | None = None


def _library() -> ctypes.CDLL:
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(librdkafka_path())
    vp, cp, i16, i32, i64, sz = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int16, ctypes.c_int32,
                                 ctypes.c_int64, ctypes.c_size_t)
    err = ctypes.c_int
    signatures: dict[str, tuple[list[type] | None, type | None]] = {
        "rd_kafka_version_str": ([], cp),
        "rd_kafka_err2name": ([err], cp),
        "rd_kafka_conf_new": ([], vp),
        "rd_kafka_conf_set": ([vp, cp, cp, cp, sz], ctypes.c_int),
        "rd_kafka_conf_destroy": ([vp], None),
        "rd_kafka_new": ([ctypes.c_int, vp, cp, sz], vp),
        "rd_kafka_destroy": ([vp], None),
        "rd_kafka_mock_cluster_new": ([vp, ctypes.c_int], vp),
        "rd_kafka_mock_cluster_destroy": ([vp], None),
        "rd_kafka_mock_cluster_bootstraps": ([vp], cp),
        "rd_kafka_mock_clear_request_errors": ([vp, i16], None),
        "rd_kafka_mock_push_request_errors_array": ([vp, i16, sz, ctypes.POINTER(err)], None),
        "rd_kafka_mock_broker_error_stack_cnt": ([vp, i32, i16, ctypes.POINTER(sz)], err),
        "rd_kafka_mock_topic_set_error": ([vp, cp, err], None),
        "rd_kafka_mock_topic_create": ([vp, cp, ctypes.c_int, ctypes.c_int], err),
        "rd_kafka_mock_partition_set_leader": ([vp, cp, i32, i32], err),
        "rd_kafka_mock_partition_set_follower": ([vp, cp, i32, i32], err),
        "rd_kafka_mock_partition_set_follower_wmarks": ([vp, cp, i32, i64, i64], err),
        "rd_kafka_mock_partition_push_leader_response": ([vp, cp, ctypes.c_int, i32, i32], err),
        "rd_kafka_mock_broker_set_down": ([vp, i32], err),
        "rd_kafka_mock_broker_set_up": ([vp, i32], err),
        "rd_kafka_mock_broker_set_rtt": ([vp, i32, ctypes.c_int], err),
        "rd_kafka_mock_broker_set_rack": ([vp, i32, cp], err),
        "rd_kafka_mock_broker_decommission": ([vp, i32], err),
        "rd_kafka_mock_broker_add": ([vp, i32], err),
        "rd_kafka_mock_coordinator_set": ([vp, cp, cp, i32], err),
        "rd_kafka_mock_set_apiversion": ([vp, i16, i16, i16], err),
        "rd_kafka_mock_start_request_tracking": ([vp], None),
        "rd_kafka_mock_stop_request_tracking": ([vp], None),
        "rd_kafka_mock_clear_requests": ([vp], None),
        "rd_kafka_mock_get_requests": ([vp, ctypes.POINTER(sz)], ctypes.POINTER(vp)),
        "rd_kafka_mock_request_id": ([vp], i32),
        "rd_kafka_mock_request_api_key": ([vp], i16),
        "rd_kafka_mock_request_timestamp": ([vp], i64),
        "rd_kafka_mock_request_destroy_array": ([ctypes.POINTER(vp), sz], None),
        "rd_kafka_mock_partition_delete_records": ([vp, cp, i32, i64], err),
        # Variadic: argtypes must stay unset; callers wrap every argument in a ctypes type.
        "rd_kafka_mock_broker_push_request_error_rtts": (None, err),
        "rd_kafka_mock_partition_push_request_errors": (None, err),
    }
    for name, (argtypes, restype) in signatures.items():
        function = getattr(lib, name, None)
        if function is None:
            continue  # an older librdkafka: the method using it raises when called
        if argtypes is not None:
            function.argtypes = argtypes
        function.restype = restype
    _lib = lib
    return lib


def librdkafka_version() -> str:
    raw: bytes = _library().rd_kafka_version_str()
    return raw.decode()


def _destroy(handles: list[int | None]) -> None:
    cluster, rk = handles
    handles[0] = handles[1] = None
    lib = _library()
    if cluster:
        lib.rd_kafka_mock_cluster_destroy(cluster)
    if rk:
        lib.rd_kafka_destroy(rk)


class MockCluster:
    """A librdkafka mock cluster of ``num_brokers`` brokers (ids 1..n) on loopback ports."""

    def __init__(self, num_brokers: int = 3) -> None:
        if num_brokers < 1:
            raise ValueError(f"num_brokers must be >= 1, got {num_brokers}")
        import confluent_kafka  # noqa: F401  (loads librdkafka the usual way first)

        lib = _library()
        self._lib = lib
        self.num_brokers = num_brokers
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        for key, value in (("client.id", "sparkafka-mock-owner"), ("log_level", "3")):
            if lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, len(errstr)) != 0:
                lib.rd_kafka_conf_destroy(conf)
                raise MockClusterError(f"rd_kafka_conf_set({key}): {errstr.value.decode()}")
        rk = lib.rd_kafka_new(0, conf, errstr, len(errstr))  # 0 = RD_KAFKA_PRODUCER; owns conf
        if not rk:
            lib.rd_kafka_conf_destroy(conf)
            raise MockClusterError(f"rd_kafka_new: {errstr.value.decode()}")
        cluster = lib.rd_kafka_mock_cluster_new(rk, num_brokers)
        if not cluster:
            lib.rd_kafka_destroy(rk)
            raise MockClusterError("rd_kafka_mock_cluster_new returned NULL")
        self._handles: list[int | None] = [cluster, rk]
        self._finalizer = weakref.finalize(self, _destroy, self._handles)
        self.bootstrap_servers: str = lib.rd_kafka_mock_cluster_bootstraps(cluster).decode()

    # ------------------------------------------------------------------ helpers
    @property
    def _cluster(self) -> int:
        cluster = self._handles[0]
        if not cluster:
            raise MockClusterError("the mock cluster is closed")
        return cluster

    def _check(self, call: str, code: int) -> None:
        if code != 0:
            name = self._lib.rd_kafka_err2name(code)
            raise MockClusterError(f"{call} failed: {name.decode() if name else code} ({code})")

    def _function(self, name: str) -> Callable[..., int]:
        function: Callable[..., int] | None = getattr(self._lib, name, None)
        if function is None:
            raise MockClusterError(f"this librdkafka ({librdkafka_version()}) has no {name}")
        return function

    def _call(self, name: str, *args: object) -> None:
        """Call ``rd_kafka_mock_<name>(cluster, *args)`` and raise if it returns an error."""
        # The handle goes as c_void_p: variadic functions have no argtypes, and a bare int
        # would be passed as a 32-bit C int.
        code = self._function(f"rd_kafka_mock_{name}")(ctypes.c_void_p(self._cluster), *args)
        self._check(f"{name}{args!r}", code)

    # --------------------------------------------------------------- topics
    def create_topic(self, name: str, partitions: int = 1, replication: int = 1) -> None:
        """Create a topic (the mock has no CreateTopics API)."""
        self._call("topic_create", name.encode(), partitions, replication)

    def topic_set_error(self, topic: str, error: int) -> None:
        """Error returned for ``topic`` in Metadata and AddPartitionsToTxn responses (0 clears)."""
        self._lib.rd_kafka_mock_topic_set_error(self._cluster, topic.encode(), error)

    def partition_set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the leader (``-1``: leaderless). Clients see it on their next Metadata."""
        self._call("partition_set_leader", topic.encode(), partition, broker_id)

    def partition_set_follower(self, topic: str, partition: int, broker_id: int) -> None:
        self._call("partition_set_follower", topic.encode(), partition, broker_id)

    def partition_set_follower_wmarks(self, topic: str, partition: int, low: int, high: int) -> None:
        self._call("partition_set_follower_wmarks", topic.encode(), partition, low, high)

    def partition_push_leader_response(self, topic: str, partition: int, leader_id: int,
                                       leader_epoch: int) -> None:
        """Make the next Produce/Fetch error carry a CurrentLeader hint (KIP-951)."""
        self._call("partition_push_leader_response", topic.encode(), partition, leader_id, leader_epoch)

    def partition_delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        self._call("partition_delete_records", topic.encode(), partition, before_offset)

    # --------------------------------------------------------------- errors
    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        """The next ``len(errors)`` requests of ``api_key`` (on any broker) fail, in order.

        An error of 0 lets that request through; ``TRANSPORT_ERROR`` drops the connection.
        """
        array = (ctypes.c_int * len(errors))(*errors)
        self._lib.rd_kafka_mock_push_request_errors_array(self._cluster, api_key, len(errors), array)

    def push_broker_request_errors(self, broker_id: int, api_key: int,
                                   errors_and_rtts: Iterable[tuple[int, int]]) -> None:
        """On one broker, the next requests of ``api_key`` get ``(error, delay_ms)`` each, in order."""
        pairs = list(errors_and_rtts)
        varargs: list[object] = []
        for error, rtt_ms in pairs:
            varargs += [ctypes.c_int(error), ctypes.c_int(rtt_ms)]
        self._call("broker_push_request_error_rtts", ctypes.c_int32(broker_id), ctypes.c_int16(api_key),
                   ctypes.c_size_t(len(pairs)), *varargs)

    def push_partition_request_errors(self, topic: str, partition: int, api_key: int,
                                      errors: Sequence[int]) -> None:
        """Partition-level error codes for the next requests of ``api_key`` naming that partition."""
        varargs = [ctypes.c_int(error) for error in errors]
        self._call("partition_push_request_errors", ctypes.c_char_p(topic.encode()),
                   ctypes.c_int32(partition), ctypes.c_int16(api_key), ctypes.c_size_t(len(errors)), *varargs)

    def clear_request_errors(self, api_key: int) -> None:
        self._lib.rd_kafka_mock_clear_request_errors(self._cluster, api_key)

    def broker_error_stack_count(self, broker_id: int, api_key: int) -> int:
        """How many errors pushed with ``push_broker_request_errors`` are still waiting."""
        count = ctypes.c_size_t(0)
        self._call("broker_error_stack_cnt", broker_id, api_key, ctypes.byref(count))
        return int(count.value)

    # --------------------------------------------------------------- brokers
    def broker_set_down(self, broker_id: int) -> None:
        """Drop the broker's connections and refuse new ones (``-1``: all). Leaders do not move."""
        self._call("broker_set_down", broker_id)

    def broker_set_up(self, broker_id: int) -> None:
        self._call("broker_set_up", broker_id)

    def broker_set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of the broker by ``rtt_ms`` (``-1``: all brokers)."""
        self._call("broker_set_rtt", broker_id, rtt_ms)

    def broker_set_rack(self, broker_id: int, rack: str) -> None:
        self._call("broker_set_rack", broker_id, rack.encode())

    def broker_decommission(self, broker_id: int) -> None:
        """Remove the broker; its partitions move to the others."""
        self._call("broker_decommission", broker_id)

    def broker_add(self, broker_id: int) -> None:
        self._call("broker_add", broker_id)

    def coordinator_set(self, key_type: str, key: str, broker_id: int) -> None:
        """Pin the ``"transaction"`` or ``"group"`` coordinator for ``key``."""
        self._call("coordinator_set", key_type.encode(), key.encode(), broker_id)

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Limit the advertised versions of ``api_key`` (``-1, -1`` removes the API)."""
        self._call("set_apiversion", api_key, min_version, max_version)

    # --------------------------------------------------------------- request tracking
    def start_request_tracking(self) -> None:
        self._lib.rd_kafka_mock_start_request_tracking(self._cluster)

    def stop_request_tracking(self) -> None:
        self._lib.rd_kafka_mock_stop_request_tracking(self._cluster)

    def clear_requests(self) -> None:
        self._lib.rd_kafka_mock_clear_requests(self._cluster)

    def requests(self) -> list[MockRequest]:
        """Requests received since tracking started (or the last ``clear_requests``)."""
        count = ctypes.c_size_t(0)
        array = self._lib.rd_kafka_mock_get_requests(self._cluster, ctypes.byref(count))
        out: list[MockRequest] = []
        if not array:
            return out
        try:
            for index in range(count.value):
                request = array[index]
                out.append(MockRequest(
                    broker_id=int(self._lib.rd_kafka_mock_request_id(request)),
                    api_key=int(self._lib.rd_kafka_mock_request_api_key(request)),
                    timestamp_us=int(self._lib.rd_kafka_mock_request_timestamp(request)),
                ))
        finally:
            self._lib.rd_kafka_mock_request_destroy_array(array, count.value)
        return out

    # --------------------------------------------------------------- lifecycle
    @property
    def closed(self) -> bool:
        return self._handles[0] is None

    def close(self) -> None:
        """Destroy the cluster and its owner handle. Idempotent."""
        self._finalizer()

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.bootstrap_servers
        return f"MockCluster({self.num_brokers} brokers, {state})"
