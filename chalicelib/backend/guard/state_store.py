"""Where a circuit breaker's state lives, so that every instance that guards one cluster
agrees on it: in the process (the local server, one instance), or in the region's control
table (Lambda: many instances).

Each state carries a version. An instance that changes the state writes the new one only
if the stored version is still the one it started from (a conditional write); when
another instance got there first, it adopts what that one wrote. Instances read the
stored state every few seconds to learn of changes made elsewhere.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from chalicelib.backend.guard.exempt import unguarded, watched
from chalicelib.domain.exceptions import ConditionFailedError
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from chalicelib.settings_guard import GuardSettings

KEY_PREFIX = "breaker#"


class BreakerState(Enum):
    """resilience4j's three states."""

    CLOSED = "CLOSED"
    OPEN = "OPEN"
    HALF_OPEN = "HALF_OPEN"


@dataclass(frozen=True)
class SharedState:
    """A breaker's state as every instance sees it: since when (epoch ms: for OPEN, when
    it opened), its version (0: never changed), and the instance that wrote it (in
    HALF_OPEN, the one that holds the probes)."""

    state: BreakerState
    since_ms: int
    version: int
    holder: str = ""


INITIAL = SharedState(BreakerState.CLOSED, 0, 0)


class BreakerStateStore(Protocol):
    """Keeps one shared state per breaker name."""

    def read(self, name: str, consistent: bool = False) -> SharedState | None:
        """The stored state, or None if none was ever written (StoreError on a fault)."""
        ...

    def write(self, name: str, new: SharedState, expected_version: int) -> SharedState | None:
        """Store `new` if the stored version is `expected_version` (0: nothing stored):
        None when it was written, else the state that stands (StoreError on a fault)."""
        ...


class InProcessStateStore:
    """The state in this process only: what the local server and tests use."""

    def __init__(self) -> None:
        self._states: dict[str, SharedState] = {}
        self._lock = threading.Lock()

    def read(self, name: str, consistent: bool = False) -> SharedState | None:
        """The stored state, or None."""
        with self._lock:
            return self._states.get(name)

    def write(self, name: str, new: SharedState, expected_version: int) -> SharedState | None:
        """Store `new` if the version still is `expected_version`."""
        with self._lock:
            standing = self._states.get(name, INITIAL)
            if standing.version != expected_version:
                return standing
            self._states[name] = new
            return None


class ControlTableStateStore:
    """The state as an item `breaker#<name>` of a region's control table (key `key`):
    `state`, `since` (epoch ms), `ver` and `by` (the writing instance).

    Its calls go to the main endpoint's control table, never through a cluster's guard:
    a breaker whose state could only be read through itself would never close.
    """

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        if watched(client, table):
            raise ValueError(f"the breaker state store needs a client whose calls to {table} "
                             "no guard watches")
        self._db = client
        self._table = table

    @staticmethod
    def key(name: str) -> dict[str, Any]:
        """The control-table key of a breaker."""
        return {"key": {"S": f"{KEY_PREFIX}{name}"}}

    def read(self, name: str, consistent: bool = False) -> SharedState | None:
        """The stored state, or None (an eventually consistent read unless asked)."""
        with unguarded(), translate_errors():
            item = self._db.get_item(TableName=self._table, Key=self.key(name),
                                     ConsistentRead=consistent).get("Item")
        return _from_item(item) if item else None

    def write(self, name: str, new: SharedState, expected_version: int) -> SharedState | None:
        """One conditional PutItem; a failed condition returns the item that stands."""
        condition: dict[str, Any] = (
            {"ConditionExpression": "attribute_not_exists(#k)",
             "ExpressionAttributeNames": {"#k": "key"}} if expected_version == 0 else
            {"ConditionExpression": "ver = :expected",
             "ExpressionAttributeValues": {":expected": {"N": str(expected_version)}}})
        item = {**self.key(name), "state": {"S": new.state.value},
                "since": {"N": str(new.since_ms)}, "ver": {"N": str(new.version)},
                "by": {"S": new.holder or "-"}}
        try:
            with unguarded(), translate_errors():
                self._db.put_item(TableName=self._table, Item=item,
                                  ReturnValuesOnConditionCheckFailure="ALL_OLD",
                                  **condition)
        except ConditionFailedError as exc:
            # A store that returns no item on a failed condition is read instead.
            if exc.item:
                return _from_item(exc.item)
            return self.read(name, consistent=True) or INITIAL
        return None


def _from_item(item: dict[str, Any]) -> SharedState:
    holder = str(item.get("by", {}).get("S", ""))
    return SharedState(BreakerState(item["state"]["S"]), int(item["since"]["N"]),
                       int(item["ver"]["N"]), "" if holder == "-" else holder)


def state_store_for(settings: GuardSettings, on_lambda: bool, control_client: DynamoDBClient,
                    control_table: str) -> BreakerStateStore:
    """The state store the settings ask for: the control table (on Lambda, by default),
    through `control_client`, which no guard may watch; else this process."""
    if settings.shares_state(on_lambda):
        return ControlTableStateStore(control_client, control_table)
    return InProcessStateStore()
