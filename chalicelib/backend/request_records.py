"""Records of served send requests, for request deduplication (docs/request-dedup.md).

One item per request in the control table, key `request#<caller>#<queue id>#<action>#<id>`
(`id` is the SDK's invocation id, the same across the retries of one call):

- `state`: `pending` while the request that claimed it runs, `done` once it answered;
- `token`: the claiming request's own token, so that only it completes or releases it;
- `fp`: a digest of the request's parameters (a reused id with other parameters is not a
  retry);
- `lease_ms`: until when a pending claim is held (the claimant may have crashed);
- `expires_ms`, and `expires_at` for DynamoDB's TTL: the end of the deduplication window;
- `response`: the JSON the first request answered with, once done.

Every call is one DynamoDB request on one item; nothing here scans.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chalicelib.domain.exceptions import ConditionFailedError
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PENDING = "pending"
DONE = "done"
TTL_SLACK_S = 60
CLAIM_ATTEMPTS = 2  # the TTL attribute outlives the window a little; reads check expires_ms


@dataclass(frozen=True)
class RequestKey:
    """Who sent which request to which queue."""

    caller: str
    queue_id: str
    action: str
    invocation_id: str

    @property
    def item_key(self) -> str:
        """The control-table key of the request's record."""
        return f"request#{self.caller}#{self.queue_id}#{self.action}#{self.invocation_id}"


@dataclass(frozen=True)
class RequestRecord:
    """A request's record as stored."""

    state: str
    token: str
    fingerprint: str
    lease_ms: int
    expires_ms: int
    response: dict[str, Any] | None


@dataclass(frozen=True)
class Claim:
    """What claiming a request found: claimed, or not and the record that stands (None
    when other requests kept claiming and releasing it)."""

    claimed: bool
    existing: RequestRecord | None = None


def _record(item: dict[str, Any]) -> RequestRecord:
    response = item.get("response", {}).get("S")
    return RequestRecord(
        state=str(item.get("state", {}).get("S", "")),
        token=str(item.get("token", {}).get("S", "")),
        fingerprint=str(item.get("fp", {}).get("S", "")),
        lease_ms=int(item.get("lease_ms", {}).get("N", "0")),
        expires_ms=int(item.get("expires_ms", {}).get("N", "0")),
        response=json.loads(response) if response else None,
    )


class RequestRecords:
    """Claims, completes, releases and reads request records in one region's control table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    def _key(self, key: RequestKey) -> dict[str, Any]:
        return {"key": {"S": key.item_key}}

    def claim(self, key: RequestKey, token: str, fingerprint: str, now_ms: int,
              lease_ms: int, window_ms: int) -> Claim:
        """Record the request as pending under `token`, in one conditional put that wins
        only when there is no record, its window is over, or it is a pending claim whose
        lease ran out. Otherwise the record that stands is returned, unchanged."""
        expires_ms = now_ms + window_ms
        item = {
            **self._key(key), "state": {"S": PENDING}, "token": {"S": token},
            "fp": {"S": fingerprint}, "lease_ms": {"N": str(now_ms + lease_ms)},
            "expires_ms": {"N": str(expires_ms)},
            "expires_at": {"N": str(expires_ms // 1000 + TTL_SLACK_S)},
        }
        for _ in range(CLAIM_ATTEMPTS):
            try:
                with translate_errors():
                    self._db.put_item(
                        TableName=self._table, Item=item,
                        ConditionExpression=(
                            "attribute_not_exists(#k) OR expires_ms <= :now"
                            " OR (#s = :pending AND lease_ms <= :now)"),
                        ExpressionAttributeNames={"#k": "key", "#s": "state"},
                        ExpressionAttributeValues={":now": {"N": str(now_ms)},
                                                   ":pending": {"S": PENDING}},
                        ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    )
            except ConditionFailedError as exc:
                standing = exc.item if exc.item else self._get(key)
                if standing is not None:
                    record = _record(standing)
                    # A retry of this very put (its first answer lost) finds its own claim.
                    return Claim(record.token == token, None if record.token == token
                                 else record)
                continue  # released between the put and the read: claim again
            return Claim(True)
        return Claim(False)  # claimed and released by others each time: contended

    def complete(self, key: RequestKey, token: str, response: dict[str, Any]) -> bool:
        """Store the first response and mark the request done, if `token` still holds the
        claim; False when it does not (the claim was never written, or was taken over)."""
        try:
            with translate_errors():
                self._db.update_item(
                    TableName=self._table, Key=self._key(key),
                    UpdateExpression="SET #s = :done, #r = :response",
                    ConditionExpression="#t = :token",
                    ExpressionAttributeNames={"#s": "state", "#t": "token", "#r": "response"},
                    ExpressionAttributeValues={
                        ":done": {"S": DONE}, ":token": {"S": token},
                        ":response": {"S": json.dumps(response, separators=(",", ":"))}},
                )
        except ConditionFailedError:
            return False
        return True

    def release(self, key: RequestKey, token: str) -> None:
        """Delete a pending claim that `token` holds (its request failed: a retry may run)."""
        try:
            with translate_errors():
                self._db.delete_item(
                    TableName=self._table, Key=self._key(key),
                    ConditionExpression="#t = :token AND #s = :pending",
                    ExpressionAttributeNames={"#t": "token", "#s": "state"},
                    ExpressionAttributeValues={":token": {"S": token},
                                               ":pending": {"S": PENDING}},
                )
        except ConditionFailedError:
            pass  # not ours any more, or never written: nothing to release

    def read(self, key: RequestKey) -> RequestRecord | None:
        """The request's record (a strongly consistent read), or None."""
        item = self._get(key)
        return _record(item) if item else None

    def _get(self, key: RequestKey) -> dict[str, Any] | None:
        with translate_errors():
            found = self._db.get_item(TableName=self._table, Key=self._key(key),
                                      ConsistentRead=True)
        item = found.get("Item")
        return dict(item) if item else None
