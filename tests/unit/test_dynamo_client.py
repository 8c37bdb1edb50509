"""The lean DynamoDB client (chalicelib/dynamo_client.py) against a scripted HTTP store on
a loopback port: what it sends, how it reads answers and errors, its retries and
connection faults, and the botocore hooks it keeps. The store contract suite runs it
against DynamoDB Local (tests/contract)."""

from __future__ import annotations

import base64
import datetime
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from chalicelib.aws import Clients
from chalicelib.dynamo_client import LeanDynamoDB, Signer, decode_binary, wants_lean
from chalicelib.metadata.repository import QueueRepository
from chalicelib.settings import ConfigurationError, Settings
from dmqlocal.counting import CallCounter


@dataclass
class Answer:
    """One scripted answer: status, JSON body (or raw bytes), and what to do."""

    status: int = 200
    body: Any = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    close_after: bool = False  # close the connection once answered
    drop: bool = False  # close the connection without answering
    chunked: bool = False


@dataclass
class Seen:
    """One request the store received."""

    target: str
    headers: dict[str, str]
    body: dict[str, Any]
    connection: int


class Store:
    """A scripted DynamoDB on a loopback port: answers in order, then 200 {}."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.seen: list[Seen] = []
        self.connections = 0
        store = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                store.connections += 1
                self.number = store.connections

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers["Content-Length"]))
                store.seen.append(Seen(self.headers.get("X-Amz-Target", ""),
                                       {k.lower(): v for k, v in self.headers.items()},
                                       json.loads(data or b"{}"), self.number))
                answer = store.answers.pop(0) if store.answers else Answer()
                time.sleep(answer.delay_s)
                if answer.drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                raw = answer.body if isinstance(answer.body, bytes) else json.dumps(
                    answer.body).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/x-amz-json-1.0")
                self.send_header("x-amzn-RequestId", f"req-{len(store.seen)}")
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                if answer.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for start in range(0, len(raw), 7):
                        piece = raw[start:start + 7]
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                if answer.close_after:
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def store() -> Iterator[Store]:
    running = Store()
    yield running
    running.stop()


def lean(url: str, **settings: Any) -> LeanDynamoDB:
    """The DynamoDB client DMQ builds for `url`."""
    chosen = replace(Settings(), dynamodb_endpoint=url, store_credentials=("AKIDLEAN", "s3cr3t"),
                     **settings)
    client = Clients(chosen).dynamodb
    assert isinstance(client, LeanDynamoDB)
    return client


def test_an_item_call_is_sent_signed_and_its_answer_parsed_as_botocore_does(
        store: Store) -> None:
    store.answers.append(Answer(body={"Item": {"b": {"B": base64.b64encode(b"\0\1").decode()},
                                               "m": {"M": {"B": {"S": "a key named B"}}}}}))
    answer = lean(store.url).get_item(TableName="t", Key={"pk": {"B": b"\xff"}})
    assert answer["Item"] == {"b": {"B": b"\0\1"}, "m": {"M": {"B": {"S": "a key named B"}}}}
    assert answer["ResponseMetadata"]["RequestId"] == "req-1"
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert answer["ResponseMetadata"]["RetryAttempts"] == 0
    (seen,) = store.seen
    assert seen.target == "DynamoDB_20120810.GetItem"
    assert seen.body == {"TableName": "t", "Key": {"pk": {"B": base64.b64encode(b"\xff").decode()}}}
    assert seen.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDLEAN/")
    assert "/us-east-1/dynamodb/aws4_request" in seen.headers["authorization"]


def test_the_signature_is_botocores(monkeypatch: pytest.MonkeyPatch) -> None:
    now = datetime.datetime(2026, 12, 1, 21, 30, 5, tzinfo=datetime.UTC)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: now)
    body = b'{"TableName":"t"}'
    for token in (None, "session-token"):
        credentials = Credentials("AKIDLEAN", "s3cr3t", token)
        ours = Signer(credentials, "eu-west-1", "127.0.0.1:8000").headers(
            "DynamoDB_20120810.GetItem", body, now)
        request = AWSRequest("POST", "http://127.0.0.1:8000/", data=body, headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "DynamoDB_20120810.GetItem"})
        SigV4Auth(credentials, "dynamodb", "eu-west-1").add_auth(request)
        assert ours["authorization"] == request.headers["Authorization"]
        assert ours.get("x-amz-security-token") == token


def test_binary_values_are_decoded_wherever_they_are() -> None:
    encoded = base64.b64encode(b"x").decode()
    answer: dict[str, Any] = {
        "Responses": {"t": [{"a": {"BS": [encoded, encoded]}}]},
        "CancellationReasons": [{"Code": "None", "Item": {"L": [{"B": encoded}]}}],
        "Count": 1}
    decode_binary(answer)
    assert answer["Responses"]["t"][0]["a"] == {"BS": [b"x", b"x"]}
    assert answer["CancellationReasons"][0]["Item"] == {"L": [{"B": b"x"}]}


def test_errors_are_the_clients_own_exceptions_with_their_modeled_fields(store: Store) -> None:
    client = lean(store.url)
    store.answers.append(Answer(400, {
        "__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
        "message": "The conditional request failed",
        "Item": {"v": {"B": base64.b64encode(b"old").decode()}}}))
    with pytest.raises(client.exceptions.ConditionalCheckFailedException) as failed:
        client.put_item(TableName="t", Item={"pk": {"S": "a"}})
    assert failed.value.response["Error"] == {
        "Code": "ConditionalCheckFailedException", "Message": "The conditional request failed"}
    assert failed.value.response["Item"] == {"v": {"B": b"old"}}
    store.answers.append(Answer(400, {
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": "Transaction cancelled", "CancellationReasons": [
            {"Code": "None"}, {"Code": "ConditionalCheckFailed", "Message": "failed"}]}))
    with pytest.raises(client.exceptions.TransactionCanceledException) as cancelled:
        client.transact_write_items(TransactItems=[])
    assert [r["Code"] for r in cancelled.value.response["CancellationReasons"]] == [
        "None", "ConditionalCheckFailed"]
    assert cancelled.value.operation_name == "TransactWriteItems"


def test_a_throttle_is_tried_again_within_the_store_attempts(store: Store) -> None:
    throttle = Answer(400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
                            "message": "slow down"})
    store.answers += [throttle, Answer(body={"Attributes": {}})]
    answer = lean(store.url).update_item(TableName="t", Key={})
    assert answer["ResponseMetadata"]["RetryAttempts"] == 1
    assert len(store.seen) == 2
    store.answers += [throttle, throttle, throttle]
    with pytest.raises(ClientError) as refused:
        lean(store.url, store_attempts=2).update_item(TableName="t", Key={})
    assert refused.value.response["Error"]["Code"] == "ThrottlingException"
    assert len(store.seen) == 4  # two attempts, then the error


def test_a_server_error_without_json_is_an_error_after_its_retries(store: Store) -> None:
    store.answers += [Answer(500, b"<html>down</html>"), Answer(500, b"<html>down</html>")]
    with pytest.raises(ClientError) as failed:
        lean(store.url).query(TableName="t")
    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert len(store.seen) == 2


def test_a_kept_connection_the_store_closed_is_replaced_without_an_error(store: Store) -> None:
    client = lean(store.url)
    store.answers += [Answer(close_after=True), Answer()]
    client.get_item(TableName="t", Key={})
    client.get_item(TableName="t", Key={})
    client.get_item(TableName="t", Key={})
    assert [s.connection for s in store.seen] == [1, 2, 2]


def test_a_chunked_answer_is_read_whole(store: Store) -> None:
    items = [{"pk": {"S": f"item {n}"}} for n in range(20)]
    store.answers.append(Answer(body={"Items": items, "Count": 20}, chunked=True))
    client = lean(store.url)
    assert client.query(TableName="t")["Items"] == items
    assert client.query(TableName="t")["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_a_store_that_does_not_answer_in_time_is_a_read_timeout(store: Store) -> None:
    store.answers += [Answer(delay_s=0.6), Answer(delay_s=0.6)]
    started = time.monotonic()
    with pytest.raises(ReadTimeoutError):
        lean(store.url, store_read_timeout_s=0.2, store_attempts=2).get_item(
            TableName="t", Key={})
    assert time.monotonic() - started < 2.5
    assert len(store.seen) == 2


def test_a_dropped_connection_and_a_refused_one_are_botocores_errors(store: Store) -> None:
    store.answers += [Answer(drop=True)]
    with pytest.raises(ConnectionClosedError):
        lean(store.url, store_attempts=1).delete_item(TableName="t", Key={})
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(EndpointConnectionError):
        lean(f"http://127.0.0.1:{port}", store_attempts=1).put_item(TableName="t", Item={})


def test_hooks_see_every_call_and_may_answer_in_its_place(store: Store) -> None:
    client = lean(store.url)
    counter = CallCounter()
    counter.attach(client)
    client.put_item(TableName="dmq-messages", Item={"pk": {"S": "a"}})
    answered: dict[str, Any] = {"Item": {"from": {"S": "hook"}}}

    def answer(model: Any, **_: Any) -> Any:
        if model.name != "GetItem":
            return None
        return type("Http", (), {"status_code": 200})(), answered

    client.meta.events.register("before-call.dynamodb", answer)  # after the counter
    assert client.get_item(TableName="dmq-messages", Key={})["Item"] == answered["Item"]
    assert len(store.seen) == 1  # the hook answered the GetItem
    snapshot = counter.snapshot()
    assert snapshot["calls"] == {"PutItem": 1, "GetItem": 1}
    assert snapshot["tables"] == {"dmq-messages": {"PutItem": 1, "GetItem": 1}}
    errors: list[BaseException] = []
    client.meta.events.register("after-call-error.dynamodb",
                                lambda exception, **_: errors.append(exception))
    store.answers += [Answer(drop=True), Answer(drop=True)]  # both attempts dropped
    with pytest.raises(ConnectionClosedError):
        client.delete_item(TableName="dmq-messages", Key={})
    assert len(errors) == 1 and isinstance(errors[0], ConnectionClosedError)
    assert counter.snapshot()["errors"] == {"DeleteItem": 1}


def test_other_calls_are_botocores_own(store: Store) -> None:
    store.answers.append(Answer(body={"TableNames": ["a", "b"]}))
    assert lean(store.url).list_tables()["TableNames"] == ["a", "b"]
    assert store.seen[0].target == "DynamoDB_20120810.ListTables"


def test_which_endpoints_get_the_lean_client() -> None:
    assert wants_lean("http://127.0.0.1:8000")
    assert not wants_lean("http://127.0.0.1:8000", "botocore")
    assert not wants_lean("https://dynamodb.us-east-1.amazonaws.com")
    assert not wants_lean(None)
    chosen = replace(Settings(), dynamodb_endpoint="http://127.0.0.1:1",
                     store_credentials=("a", "b"), store_client="botocore")
    assert not isinstance(Clients(chosen).dynamodb, LeanDynamoDB)
    assert Settings.from_env({"DMQ_STORE_CLIENT": "botocore"}).store_client == "botocore"
    with pytest.raises(ConfigurationError, match="DMQ_STORE_CLIENT"):
        Settings.from_env({"DMQ_STORE_CLIENT": "fast"})


def test_the_queue_registrys_pynamodb_calls_go_the_lean_way(store: Store) -> None:
    # GIVEN the queue registry (PynamoDB) on a plain-HTTP store, built as the runtime builds it
    chosen = replace(Settings(), dynamodb_endpoint=store.url,
                     store_credentials=("AKIDLEAN", "s3cr3t"), metadata_cache_seconds=0.0)
    clients = Clients(chosen)
    repo = QueueRepository(f"queues-{store.url[-5:]}", "us-east-1", store.url, 0.0,
                           clients.store_credentials(), counts_table=None,
                           client_wrapper=clients.lean_wrapper())
    # WHEN it reads a record THEN the call is the lean client's, signed, and parsed
    assert repo.get("000000000000/nothing-here") is None
    (seen,) = store.seen
    assert seen.target == "DynamoDB_20120810.GetItem"
    assert seen.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDLEAN/")
    assert "botocore" not in seen.headers.get("user-agent", "").lower()
    # AND a second registry over the same tables does not wrap the shared client twice
    QueueRepository(f"queues-{store.url[-5:]}", "us-east-1", store.url, 0.0,
                    clients.store_credentials(), client_wrapper=clients.lean_wrapper())
    assert repo.get("000000000000/nothing-here") is None
    assert len(store.seen) == 2
    # AND where the lean client does not apply there is nothing to wrap with
    assert Clients(replace(chosen, store_client="botocore")).lean_wrapper() is None
