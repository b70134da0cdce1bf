"""API version negotiation against a broker's ApiVersions answer.

How it works: ``ApiVersionsTable.from_response`` turns a decoded ApiVersions response into
``{api_key: (min, max)}``. ``pick_version`` intersects a broker's range with the client's range
(``CLIENT_VERSIONS`` unless given) and returns the highest version both sides support, exactly like
Java's ``NodeApiVersions.latestUsableVersion``; no overlap raises ``UnsupportedVersionError`` naming
the API, our range and the broker's range. From ApiVersions v3 the answer also carries the cluster's
finalized features (``finalized_features``: name -> max version level, e.g. ``transaction.version``) with
their epoch (``finalized_features_epoch``; -1 when the broker sent none), as Java's ``ApiVersions``
keeps them to decide whether Transactions V2 (KIP-890) is on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from sparkafka.errors import ProtocolError, UnsupportedVersionError, error_for_code
from sparkafka.protocol.messages import API_BY_KEY, CLIENT_VERSIONS, api_name


def _describe(api_key: int) -> str:
    return f"{api_name(api_key)} (api key {api_key})" if api_key in API_BY_KEY else f"api key {api_key}"


class ApiVersionsTable:
    """The API version ranges one broker supports."""

    __slots__ = ("_ranges", "finalized_features", "finalized_features_epoch")

    def __init__(self, ranges: Mapping[int, tuple[int, int]], finalized_features: Mapping[str, int] | None = None,
                 finalized_features_epoch: int = -1) -> None:
        self._ranges: dict[int, tuple[int, int]] = dict(ranges)
        self.finalized_features: dict[str, int] = dict(finalized_features or {})
        self.finalized_features_epoch = finalized_features_epoch

    @classmethod
    def from_response(cls, body: Mapping[str, Any]) -> ApiVersionsTable:
        """Build from a decoded ApiVersions response; a non-zero error code raises the broker error."""
        code = body.get("error_code", 0)
        if code:
            raise error_for_code(code, "ApiVersions request failed")
        ranges: dict[int, tuple[int, int]] = {}
        for entry in body.get("api_keys") or ():
            lo, hi = entry["min_version"], entry["max_version"]
            if lo > hi:
                raise ProtocolError(
                    f"ApiVersions: {api_name(entry['api_key'])} has min_version {lo} > max_version {hi}"
                )
            ranges[entry["api_key"]] = (lo, hi)
        features = {f["name"]: int(f["max_version_level"]) for f in body.get("finalized_features") or ()}
        return cls(ranges, features, int(body.get("finalized_features_epoch", -1)))

    def feature_level(self, name: str) -> int:
        """The finalized max version level of feature ``name`` (0 when the broker finalized none)."""
        return self.finalized_features.get(name, 0)

    def get(self, api_key: int) -> tuple[int, int] | None:
        return self._ranges.get(api_key)

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._ranges

    def __len__(self) -> int:
        return len(self._ranges)

    def __iter__(self) -> Iterator[int]:
        return iter(self._ranges)

    def __repr__(self) -> str:
        return f"ApiVersionsTable({len(self._ranges)} apis)"

    def pick_version(self, api_key: int, client_min: int | None = None, client_max: int | None = None) -> int:
        """The highest version both we and the broker support.

        Our range is ``client_min..client_max`` (default: ``CLIENT_VERSIONS``)."""
        if client_min is None or client_max is None:
            ours = CLIENT_VERSIONS.get(api_key)
            if ours is None:
                raise UnsupportedVersionError(f"{_describe(api_key)} is not used by this client")
            client_min = ours[0] if client_min is None else client_min
            client_max = ours[1] if client_max is None else client_max
        theirs = self._ranges.get(api_key)
        if theirs is None:
            raise UnsupportedVersionError(
                f"the broker does not support {_describe(api_key)} at all; "
                f"this client needs versions {client_min}-{client_max}"
            )
        lo, hi = max(client_min, theirs[0]), min(client_max, theirs[1])
        if lo > hi:
            raise UnsupportedVersionError(
                f"no common version of {_describe(api_key)}: "
                f"this client supports {client_min}-{client_max}, the broker {theirs[0]}-{theirs[1]}"
            )
        return hi
