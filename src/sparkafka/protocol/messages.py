"""The Kafka APIs sparkafka speaks: request/response schemas for every version, and what the client uses.

How it works: each API is an ``ApiSpec`` holding one request ``Schema`` and one response ``Schema``
that cover all of its versions, transcribed field by field from Kafka's JSON message specs
(``clients/src/main/resources/common/message/<Name>{Request,Response}.json``). Field names are the
specs' names in snake_case (``ThrottleTimeMs`` -> ``throttle_time_ms``).

Provenance: the apache/kafka trunk snapshot available here (commit 1eb7644, 2024-10-25, 4.0.0-SNAPSHOT)
predates Kafka 4.1, so versions added later (Produce 12-13 with ``topic_id``, Metadata 13 with the
top-level ``error_code``, InitProducerId 6, ListOffsets 11) come from the Kafka 4.3 JSON specs as
vendored in dpkp/kafka-python (commit 65113cfd). Versions Kafka 4.0 dropped but older brokers still
speak (CreateTopics 0-1, ListOffsets 0) are kept from the older snapshot. Produce starts at v3 (the
first version that carries record batch v2, the only format we write).

``CLIENT_VERSIONS`` is the range of each API this client can use; negotiation against a broker's
ApiVersions answer is in ``protocol.versions``.
"""

from __future__ import annotations

import enum
from typing import Any

from sparkafka.errors import UnsupportedVersionError
from sparkafka.protocol import codec
from sparkafka.protocol.primitives import Buffer
from sparkafka.protocol.schema import ArrayOf, Body, Field, Schema


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    SASL_AUTHENTICATE = 36
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


class ApiSpec:
    """One API: its key, version range, first flexible version and request/response schemas."""

    __slots__ = ("api_key", "flexible_min", "max_version", "min_version", "name", "request", "response")

    def __init__(
        self,
        api_key: int,
        name: str,
        min_version: int,
        max_version: int,
        flexible_min: int | None,
        request: Schema,
        response: Schema,
    ) -> None:
        self.api_key = api_key
        self.name = name
        self.min_version = min_version
        self.max_version = max_version
        self.flexible_min = flexible_min
        self.request = request
        self.response = response

    def __repr__(self) -> str:
        return f"ApiSpec({self.name}, key={self.api_key}, v{self.min_version}-{self.max_version})"

    def is_flexible(self, version: int) -> bool:
        return self.flexible_min is not None and version >= self.flexible_min

    def check_version(self, version: int) -> None:
        if not self.min_version <= version <= self.max_version:
            raise UnsupportedVersionError(
                f"{self.name} (api key {self.api_key}) version {version} is not defined "
                f"(known versions {self.min_version}-{self.max_version})"
            )

    def encode_request(self, version: int, body: Body) -> bytes:
        self.check_version(version)
        return codec.encode(self.request, body, version)

    def decode_request(self, version: int, data: Buffer) -> dict[str, Any]:
        self.check_version(version)
        return codec.decode(self.request, data, version)

    def encode_response(self, version: int, body: Body) -> bytes:
        self.check_version(version)
        return codec.encode(self.response, body, version)

    def decode_response(self, version: int, data: Buffer) -> dict[str, Any]:
        self.check_version(version)
        return codec.decode(self.response, data, version)


# The message tables below are laid out like Kafka's JSON specs, so the formatter leaves them alone.
# fmt: off
def _api(key: ApiKey, name: str, versions: tuple[int, int], flexible_min: int | None,
         request: list[Field], response: list[Field]) -> ApiSpec:
    lo, hi = versions
    valid = f"{lo}-{hi}"
    flexible = "none" if flexible_min is None else f"{flexible_min}+"
    return ApiSpec(
        key, name, lo, hi, flexible_min,
        Schema(f"{name}Request", request, valid_versions=valid, flexible_versions=flexible),
        Schema(f"{name}Response", response, valid_versions=valid, flexible_versions=flexible),
    )


# ---- Produce (0) -------------------------------------------------

PRODUCE = _api(
    ApiKey.PRODUCE, "Produce", (3, 13), 9,
    [
        Field("transactional_id", "string", "3+", nullable_versions="3+", default=None),
        Field("acks", "int16"),
        Field("timeout_ms", "int32"),
        Field("topic_data", ArrayOf(Schema("TopicProduceData", [
            Field("name", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partition_data", ArrayOf(Schema("PartitionProduceData", [
                Field("index", "int32"),
                Field("records", "records", nullable_versions="0+"),
            ]))),
        ]))),
    ],
    [
        Field("responses", ArrayOf(Schema("TopicProduceResponse", [
            Field("name", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partition_responses", ArrayOf(Schema("PartitionProduceResponse", [
                Field("index", "int32"),
                Field("error_code", "int16"),
                Field("base_offset", "int64"),
                Field("log_append_time_ms", "int64", "2+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("record_errors", ArrayOf(Schema("BatchIndexAndErrorMessage", [
                    Field("batch_index", "int32", "8+"),
                    Field("batch_index_error_message", "string", "8+", nullable_versions="8+", default=None),
                ])), "8+"),
                Field("error_message", "string", "8+", nullable_versions="8+", default=None),
                Field("current_leader", Schema("LeaderIdAndEpoch", [
                    Field("leader_id", "int32", "10+", default=-1),
                    Field("leader_epoch", "int32", "10+", default=-1),
                ]), "10+", tag=0, tagged_versions="10+"),
            ]))),
        ]))),
        Field("throttle_time_ms", "int32", "1+", default=0),
        Field("node_endpoints", ArrayOf(Schema("NodeEndpoint", [
            Field("node_id", "int32", "10+"),
            Field("host", "string", "10+"),
            Field("port", "int32", "10+"),
            Field("rack", "string", "10+", nullable_versions="10+", default=None),
        ])), "10+", tag=0, tagged_versions="10+"),
    ],
)

# ---- Fetch (1) ---------------------------------------------------
# Read-only and names topics by name: versions 4-12 (13+ address topics by id; 4 is Kafka 4.0's oldest).
# Used by the exactly-once sink's decision log (a small compacted topic read by the driver).

FETCH = _api(
    ApiKey.FETCH, "Fetch", (4, 12), 12,
    [
        Field("cluster_id", "string", "12+", nullable_versions="12+", default=None, tag=0,
              tagged_versions="12+"),
        Field("replica_id", "int32", default=-1),
        Field("max_wait_ms", "int32"),
        Field("min_bytes", "int32"),
        Field("max_bytes", "int32", "3+", default=0x7FFFFFFF),
        Field("isolation_level", "int8", "4+", default=0),
        Field("session_id", "int32", "7+", default=0),
        Field("session_epoch", "int32", "7+", default=-1),
        Field("topics", ArrayOf(Schema("FetchTopic", [
            Field("topic", "string"),
            Field("partitions", ArrayOf(Schema("FetchPartition", [
                Field("partition", "int32"),
                Field("current_leader_epoch", "int32", "9+", default=-1),
                Field("fetch_offset", "int64"),
                Field("last_fetched_epoch", "int32", "12+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("partition_max_bytes", "int32"),
            ]))),
        ]))),
        Field("forgotten_topics_data", ArrayOf(Schema("ForgottenTopic", [
            Field("topic", "string", "7+"),
            Field("partitions", ArrayOf("int32"), "7+"),
        ])), "7+"),
        Field("rack_id", "string", "11+", default=""),
    ],
    [
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "7+"),
        Field("session_id", "int32", "7+", default=0),
        Field("responses", ArrayOf(Schema("FetchableTopicResponse", [
            Field("topic", "string"),
            Field("partitions", ArrayOf(Schema("PartitionData", [
                Field("partition_index", "int32"),
                Field("error_code", "int16"),
                Field("high_watermark", "int64"),
                Field("last_stable_offset", "int64", "4+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("diverging_epoch", Schema("EpochEndOffset", [
                    Field("epoch", "int32", "12+", default=-1),
                    Field("end_offset", "int64", "12+", default=-1),
                ]), "12+", tag=0, tagged_versions="12+"),
                Field("current_leader", Schema("FetchLeaderIdAndEpoch", [
                    Field("leader_id", "int32", "12+", default=-1),
                    Field("leader_epoch", "int32", "12+", default=-1),
                ]), "12+", tag=1, tagged_versions="12+"),
                Field("snapshot_id", Schema("SnapshotId", [
                    Field("end_offset", "int64", "12+", default=-1),
                    Field("epoch", "int32", "12+", default=-1),
                ]), "12+", tag=2, tagged_versions="12+"),
                Field("aborted_transactions", ArrayOf(Schema("AbortedTransaction", [
                    Field("producer_id", "int64", "4+"),
                    Field("first_offset", "int64", "4+"),
                ])), "4+", nullable_versions="4+"),
                Field("preferred_read_replica", "int32", "11+", default=-1),
                Field("records", "records", nullable_versions="0+"),
            ]))),
        ]))),
    ],
)

# ---- ListOffsets (2) ---------------------------------------------

LIST_OFFSETS = _api(
    ApiKey.LIST_OFFSETS, "ListOffsets", (0, 11), 6,
    [
        Field("replica_id", "int32"),
        Field("isolation_level", "int8", "2+"),
        Field("topics", ArrayOf(Schema("ListOffsetsTopic", [
            Field("name", "string"),
            Field("partitions", ArrayOf(Schema("ListOffsetsPartition", [
                Field("partition_index", "int32"),
                Field("current_leader_epoch", "int32", "4+", default=-1),
                Field("timestamp", "int64"),
                Field("max_num_offsets", "int32", "0", default=1),
            ]))),
        ]))),
        Field("timeout_ms", "int32", "10+"),
    ],
    [
        Field("throttle_time_ms", "int32", "2+"),
        Field("topics", ArrayOf(Schema("ListOffsetsTopicResponse", [
            Field("name", "string"),
            Field("partitions", ArrayOf(Schema("ListOffsetsPartitionResponse", [
                Field("partition_index", "int32"),
                Field("error_code", "int16"),
                Field("old_style_offsets", ArrayOf("int64"), "0"),
                Field("timestamp", "int64", "1+", default=-1),
                Field("offset", "int64", "1+", default=-1),
                Field("leader_epoch", "int32", "4+", default=-1),
            ]))),
        ]))),
    ],
)

# ---- Metadata (3) ------------------------------------------------

METADATA = _api(
    ApiKey.METADATA, "Metadata", (0, 13), 9,
    [
        Field("topics", ArrayOf(Schema("MetadataRequestTopic", [
            Field("topic_id", "uuid", "10+"),
            Field("name", "string", nullable_versions="10+"),
        ])), nullable_versions="1+"),
        Field("allow_auto_topic_creation", "bool", "4+", default=True),
        Field("include_cluster_authorized_operations", "bool", "8-10"),
        Field("include_topic_authorized_operations", "bool", "8+"),
    ],
    [
        Field("throttle_time_ms", "int32", "3+"),
        Field("brokers", ArrayOf(Schema("MetadataResponseBroker", [
            Field("node_id", "int32"),
            Field("host", "string"),
            Field("port", "int32"),
            Field("rack", "string", "1+", nullable_versions="1+", default=None),
        ]))),
        Field("cluster_id", "string", "2+", nullable_versions="2+", default=None),
        Field("controller_id", "int32", "1+", default=-1),
        Field("topics", ArrayOf(Schema("MetadataResponseTopic", [
            Field("error_code", "int16"),
            Field("name", "string", nullable_versions="12+"),
            Field("topic_id", "uuid", "10+"),
            Field("is_internal", "bool", "1+", default=False),
            Field("partitions", ArrayOf(Schema("MetadataResponsePartition", [
                Field("error_code", "int16"),
                Field("partition_index", "int32"),
                Field("leader_id", "int32"),
                Field("leader_epoch", "int32", "7+", default=-1),
                Field("replica_nodes", ArrayOf("int32")),
                Field("isr_nodes", ArrayOf("int32")),
                Field("offline_replicas", ArrayOf("int32"), "5+"),
            ]))),
            Field("topic_authorized_operations", "int32", "8+", default=-2147483648),
        ]))),
        Field("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
        Field("error_code", "int16", "13+"),
    ],
)

# ---- FindCoordinator (10) ----------------------------------------

FIND_COORDINATOR = _api(
    ApiKey.FIND_COORDINATOR, "FindCoordinator", (0, 6), 3,
    [
        Field("key", "string", "0-3"),
        Field("key_type", "int8", "1+", default=0),
        Field("coordinator_keys", ArrayOf("string"), "4+"),
    ],
    [
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0-3"),
        Field("error_message", "string", "1-3", nullable_versions="1-3"),
        Field("node_id", "int32", "0-3"),
        Field("host", "string", "0-3"),
        Field("port", "int32", "0-3"),
        Field("coordinators", ArrayOf(Schema("Coordinator", [
            Field("key", "string", "4+"),
            Field("node_id", "int32", "4+"),
            Field("host", "string", "4+"),
            Field("port", "int32", "4+"),
            Field("error_code", "int16", "4+"),
            Field("error_message", "string", "4+", nullable_versions="4+"),
        ])), "4+"),
    ],
)

# ---- SaslHandshake (17) ------------------------------------------

SASL_HANDSHAKE = _api(
    ApiKey.SASL_HANDSHAKE, "SaslHandshake", (0, 1), None,
    [Field("mechanism", "string")],
    [Field("error_code", "int16"), Field("mechanisms", ArrayOf("string"))],
)

# ---- ApiVersions (18) --------------------------------------------

API_VERSIONS = _api(
    ApiKey.API_VERSIONS, "ApiVersions", (0, 4), 3,
    [
        Field("client_software_name", "string", "3+"),
        Field("client_software_version", "string", "3+"),
    ],
    [
        Field("error_code", "int16"),
        Field("api_keys", ArrayOf(Schema("ApiVersion", [
            Field("api_key", "int16"),
            Field("min_version", "int16"),
            Field("max_version", "int16"),
        ]))),
        Field("throttle_time_ms", "int32", "1+"),
        Field("supported_features", ArrayOf(Schema("SupportedFeatureKey", [
            Field("name", "string", "3+"),
            Field("min_version", "int16", "3+"),
            Field("max_version", "int16", "3+"),
        ])), "3+", tag=0, tagged_versions="3+"),
        Field("finalized_features_epoch", "int64", "3+", tag=1, tagged_versions="3+", default=-1),
        Field("finalized_features", ArrayOf(Schema("FinalizedFeatureKey", [
            Field("name", "string", "3+"),
            Field("max_version_level", "int16", "3+"),
            Field("min_version_level", "int16", "3+"),
        ])), "3+", tag=2, tagged_versions="3+"),
        Field("zk_migration_ready", "bool", "3+", tag=3, tagged_versions="3+", default=False),
    ],
)

# ---- CreateTopics (19) -------------------------------------------

CREATE_TOPICS = _api(
    ApiKey.CREATE_TOPICS, "CreateTopics", (0, 7), 5,
    [
        Field("topics", ArrayOf(Schema("CreatableTopic", [
            Field("name", "string"),
            Field("num_partitions", "int32"),
            Field("replication_factor", "int16"),
            Field("assignments", ArrayOf(Schema("CreatableReplicaAssignment", [
                Field("partition_index", "int32"),
                Field("broker_ids", ArrayOf("int32")),
            ]))),
            Field("configs", ArrayOf(Schema("CreatableTopicConfig", [
                Field("name", "string"),
                Field("value", "string", nullable_versions="0+"),
            ]))),
        ]))),
        Field("timeout_ms", "int32", default=60000),
        Field("validate_only", "bool", "1+", default=False),
    ],
    [
        Field("throttle_time_ms", "int32", "2+"),
        Field("topics", ArrayOf(Schema("CreatableTopicResult", [
            Field("name", "string"),
            Field("topic_id", "uuid", "7+"),
            Field("error_code", "int16"),
            Field("error_message", "string", "1+", nullable_versions="0+"),
            Field("topic_config_error_code", "int16", "5+", tag=0, tagged_versions="5+"),
            Field("num_partitions", "int32", "5+", default=-1),
            Field("replication_factor", "int16", "5+", default=-1),
            Field("configs", ArrayOf(Schema("CreatableTopicConfigs", [
                Field("name", "string", "5+"),
                Field("value", "string", "5+", nullable_versions="5+"),
                Field("read_only", "bool", "5+"),
                Field("config_source", "int8", "5+", default=-1),
                Field("is_sensitive", "bool", "5+"),
            ])), "5+", nullable_versions="5+"),
        ]))),
    ],
)

# ---- InitProducerId (22) -----------------------------------------

INIT_PRODUCER_ID = _api(
    ApiKey.INIT_PRODUCER_ID, "InitProducerId", (0, 6), 2,
    [
        Field("transactional_id", "string", nullable_versions="0+"),
        Field("transaction_timeout_ms", "int32"),
        Field("producer_id", "int64", "3+", default=-1),
        Field("producer_epoch", "int16", "3+", default=-1),
        Field("enable_2pc", "bool", "6+", default=False),
        Field("keep_prepared_txn", "bool", "6+", default=False),
    ],
    [
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
        Field("producer_id", "int64", default=-1),
        Field("producer_epoch", "int16"),
        Field("ongoing_txn_producer_id", "int64", "6+", default=-1),
        Field("ongoing_txn_producer_epoch", "int16", "6+", default=-1),
    ],
)

# ---- AddPartitionsToTxn (24) -------------------------------------

_ADD_PARTITIONS_TOPIC = Schema("AddPartitionsToTxnTopic", [
    Field("name", "string"),
    Field("partitions", ArrayOf("int32")),
])
_ADD_PARTITIONS_TOPIC_RESULT = Schema("AddPartitionsToTxnTopicResult", [
    Field("name", "string"),
    Field("results_by_partition", ArrayOf(Schema("AddPartitionsToTxnPartitionResult", [
        Field("partition_index", "int32"),
        Field("partition_error_code", "int16"),
    ]))),
])

ADD_PARTITIONS_TO_TXN = _api(
    ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", (0, 5), 3,
    [
        Field("transactions", ArrayOf(Schema("AddPartitionsToTxnTransaction", [
            Field("transactional_id", "string", "4+"),
            Field("producer_id", "int64", "4+"),
            Field("producer_epoch", "int16", "4+"),
            Field("verify_only", "bool", "4+", default=False),
            Field("topics", ArrayOf(_ADD_PARTITIONS_TOPIC), "4+"),
        ])), "4+"),
        Field("v3_and_below_transactional_id", "string", "0-3"),
        Field("v3_and_below_producer_id", "int64", "0-3"),
        Field("v3_and_below_producer_epoch", "int16", "0-3"),
        Field("v3_and_below_topics", ArrayOf(_ADD_PARTITIONS_TOPIC), "0-3"),
    ],
    [
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16", "4+"),
        Field("results_by_transaction", ArrayOf(Schema("AddPartitionsToTxnResult", [
            Field("transactional_id", "string", "4+"),
            Field("topic_results", ArrayOf(_ADD_PARTITIONS_TOPIC_RESULT), "4+"),
        ])), "4+"),
        Field("results_by_topic_v3_and_below", ArrayOf(_ADD_PARTITIONS_TOPIC_RESULT), "0-3"),
    ],
)

# ---- AddOffsetsToTxn (25) ----------------------------------------
# Kafka's AddOffsetsToTxnRequest.json: v1 = v0, v2 adds PRODUCER_FENCED, v3 is flexible, v4 adds
# TRANSACTION_ABORTABLE (KIP-890). Sent to the transaction coordinator under transactions v1 only.

ADD_OFFSETS_TO_TXN = _api(
    ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", (0, 4), 3,
    [
        Field("transactional_id", "string"),
        Field("producer_id", "int64"),
        Field("producer_epoch", "int16"),
        Field("group_id", "string"),
    ],
    [
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
    ],
)

# ---- EndTxn (26) -------------------------------------------------

END_TXN = _api(
    ApiKey.END_TXN, "EndTxn", (0, 5), 3,
    [
        Field("transactional_id", "string"),
        Field("producer_id", "int64"),
        Field("producer_epoch", "int16"),
        Field("committed", "bool"),
    ],
    [
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
        Field("producer_id", "int64", "5+", default=-1),
        Field("producer_epoch", "int16", "5+", default=-1),
    ],
)

# ---- TxnOffsetCommit (28) ----------------------------------------
# Kafka's TxnOffsetCommitRequest.json: v2 adds the leader epoch, v3 the group metadata (member id, group
# instance id, generation) and flexible versions, v4 TRANSACTION_ABORTABLE, v5 = v4 for transactions v2
# (KIP-890: the request also adds the group to the transaction, so no AddOffsetsToTxn; a client under
# transactions v1 must not send more than v4). Sent to the group coordinator. (Kafka 4.4's v6 names topics
# by id; the client sends names, so 5 is its highest.)

TXN_OFFSET_COMMIT = _api(
    ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommit", (0, 5), 3,
    [
        Field("transactional_id", "string"),
        Field("group_id", "string"),
        Field("producer_id", "int64"),
        Field("producer_epoch", "int16"),
        Field("generation_id", "int32", "3+", default=-1),
        Field("member_id", "string", "3+", default=""),
        Field("group_instance_id", "string", "3+", nullable_versions="3+", default=None),
        Field("topics", ArrayOf(Schema("TxnOffsetCommitRequestTopic", [
            Field("name", "string"),
            Field("partitions", ArrayOf(Schema("TxnOffsetCommitRequestPartition", [
                Field("partition_index", "int32"),
                Field("committed_offset", "int64"),
                Field("committed_leader_epoch", "int32", "2+", default=-1),
                Field("committed_metadata", "string", nullable_versions="0+"),
            ]))),
        ]))),
    ],
    [
        Field("throttle_time_ms", "int32"),
        Field("topics", ArrayOf(Schema("TxnOffsetCommitResponseTopic", [
            Field("name", "string"),
            Field("partitions", ArrayOf(Schema("TxnOffsetCommitResponsePartition", [
                Field("partition_index", "int32"),
                Field("error_code", "int16"),
            ]))),
        ]))),
    ],
)

# ---- SaslAuthenticate (36) ---------------------------------------

SASL_AUTHENTICATE = _api(
    ApiKey.SASL_AUTHENTICATE, "SaslAuthenticate", (0, 2), 2,
    [Field("auth_bytes", "bytes")],
    [
        Field("error_code", "int16"),
        Field("error_message", "string", nullable_versions="0+"),
        Field("auth_bytes", "bytes"),
        Field("session_lifetime_ms", "int64", "1+", default=0),
    ],
)

# ---- DescribeTransactions (65), ListTransactions (66) (KIP-664) --------------------------------------

DESCRIBE_TRANSACTIONS = _api(
    ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions", (0, 0), 0,
    [Field("transactional_ids", ArrayOf("string"))],
    [
        Field("throttle_time_ms", "int32"),
        Field("transaction_states", ArrayOf(Schema("DescribedTransactionState", [
            Field("error_code", "int16"),
            Field("transactional_id", "string"),
            Field("transaction_state", "string"),
            Field("transaction_timeout_ms", "int32"),
            Field("transaction_start_time_ms", "int64"),
            Field("producer_id", "int64"),
            Field("producer_epoch", "int16"),
            Field("topics", ArrayOf(Schema("TopicData", [
                Field("topic", "string"),
                Field("partitions", ArrayOf("int32")),
            ]))),
        ]))),
    ],
)

LIST_TRANSACTIONS = _api(
    ApiKey.LIST_TRANSACTIONS, "ListTransactions", (0, 2), 0,
    [
        Field("state_filters", ArrayOf("string")),
        Field("producer_id_filters", ArrayOf("int64")),
        Field("duration_filter", "int64", "1+", default=-1),
        Field("transactional_id_pattern", "string", "2+", nullable_versions="2+", default=None),
    ],
    [
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
        Field("unknown_state_filters", ArrayOf("string")),
        Field("transaction_states", ArrayOf(Schema("ListedTransactionState", [
            Field("transactional_id", "string"),
            Field("producer_id", "int64"),
            Field("transaction_state", "string"),
        ]))),
    ],
)


ALL_APIS: tuple[ApiSpec, ...] = (
    PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, SASL_HANDSHAKE, API_VERSIONS,
    CREATE_TOPICS, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT,
    SASL_AUTHENTICATE, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS,
)
# fmt: on
API_BY_KEY: dict[int, ApiSpec] = {spec.api_key: spec for spec in ALL_APIS}

# The versions of each API this client can send (min, max). Notes:
# - Produce 3+: record batch v2 only. v13 names topics by topic_id, so a caller that lacks a topic's id
#   must cap Produce at PRODUCE_MAX_VERSION_WITH_NAMES.
# - AddPartitionsToTxn 4+ is broker-to-broker; clients use 0-3.
# - InitProducerId 6 (two-phase commit, KIP-939) is still marked unstable in Kafka.
# - Fetch 13+ names topics by id: the client reads by name, so up to 12 (only the sink's decision log reads).
# - FindCoordinator 4+ batches keys (coordinator_keys / coordinators[]); 0-3 use key / node_id.
# - Transactions: Produce 12+ and EndTxn 5+ are transactions v2 (KIP-890: the broker adds a partition to the
#   transaction at its first Produce and bumps the epoch at every EndTxn, whose v5 answer carries the new
#   producer id and epoch). As Java, a transactional producer uses them only while the cluster's finalized
#   feature transaction.version is 2 or more; otherwise (LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2) it caps
#   Produce at PRODUCE_MAX_VERSION_TRANSACTIONS_V1, EndTxn at END_TXN_MAX_VERSION_TRANSACTIONS_V1 and
#   TxnOffsetCommit at TXN_OFFSET_COMMIT_MAX_VERSION_TRANSACTIONS_V1 (Java's TxnOffsetCommitRequest.Builder
#   .forTopicNames: 5 under v2, 4 otherwise).
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 13),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 11),
    ApiKey.METADATA: (1, 13),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
}
PRODUCE_MAX_VERSION_WITH_NAMES = 12
PRODUCE_MAX_VERSION_TRANSACTIONS_V1 = 11
END_TXN_MAX_VERSION_TRANSACTIONS_V1 = 4
TXN_OFFSET_COMMIT_MAX_VERSION_TRANSACTIONS_V1 = 4
TRANSACTION_VERSION_FEATURE = "transaction.version"


def api_name(api_key: int) -> str:
    """The API's name ("Produce"), or ``api key N`` if unknown."""
    spec = API_BY_KEY.get(api_key)
    return spec.name if spec is not None else f"api key {api_key}"
