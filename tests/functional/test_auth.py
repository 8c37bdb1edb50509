"""GIVEN DMQ with DMQ_AUTH=required (root credentials of the default account configured)
WHEN requests come signed, forged, tampered, expired, unsigned or from another account
THEN each gets SQS's answer: served, or refused with the right code and status, in the
JSON and the Query error shapes; access keys are made, rotated and revoked by the admin
API, their secrets stored encrypted; STS GetCallerIdentity names the caller."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from botocore.exceptions import ClientError
from chalice.test import Client

from chalicelib.aws import Clients
from chalicelib.settings import Settings
from tests.admin_signing import admin_call, client, sign

ROOT, ROOT_SECRET = "AKIAROOTROOTROOTROOT", "root-secret-root-secret-root-secret-0000"
ACCOUNT = "000000000000"
HOST = "dmq.test"
JSON_TYPE = "application/x-amz-json-1.0"
FORM_TYPE = "application/x-www-form-urlencoded"


@pytest.fixture
def settings() -> Settings:
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0, auth="required",
                    root_access_key_id=ROOT, root_secret_access_key=ROOT_SECRET)


@pytest.fixture
def root(dmq: Client) -> Any:
    return client(dmq, ROOT, ROOT_SECRET)


def _signed(body: bytes, headers: dict[str, str], key: str = ROOT, secret: str = ROOT_SECRET,
            service: str = "sqs", when: datetime.datetime | None = None) -> dict[str, str]:
    """The headers of `POST /` to the app with this body, signed with `key` for `service`."""
    return sign("POST", f"http://{HOST}/", body, headers, key=key, secret=secret,
                service=service, when=when).headers


def json_request(action: str, payload: dict[str, Any], key: str = ROOT,
                 secret: str = ROOT_SECRET, **options: Any) -> tuple[dict[str, str], bytes]:
    body = json.dumps(payload).encode()
    return _signed(body, {"Content-Type": JSON_TYPE, "X-Amz-Target": f"AmazonSQS.{action}"},
                   key, secret, **options), body


def query_request(form: str, key: str = ROOT, secret: str = ROOT_SECRET,
                  **options: Any) -> tuple[dict[str, str], bytes]:
    body = form.encode()
    return _signed(body, {"Content-Type": FORM_TYPE}, key, secret, **options), body


def json_error(response: Any) -> tuple[int, str, str, str]:
    body = json.loads(response.body)
    return (response.status_code, body["__type"].split("#")[1],
            response.headers.get("x-amzn-query-error", ""), body["message"])


def code_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    error = exc.value.response
    return error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]


# -- verification ---------------------------------------------------------------------------
def test_the_root_credentials_sign_requests_that_are_served(root: Any) -> None:
    url = root.create_queue(QueueName="signed")["QueueUrl"]
    assert url == f"http://{HOST}/{ACCOUNT}/signed"
    root.send_message(QueueUrl=url, MessageBody="hello")
    assert root.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "hello"


def test_an_unknown_key_is_invalid_client_token_id(dmq: Client) -> None:
    forged = client(dmq, "AKIAFORGEDFORGEDFORG", "whatever")
    with pytest.raises(ClientError) as exc:
        forged.list_queues()
    assert code_of(exc) == ("InvalidClientTokenId", 403)
    assert exc.value.response["Error"]["Message"] == (
        "The security token included in the request is invalid.")
    headers, body = query_request("Action=ListQueues&Version=2012-11-05",
                                  key="AKIAFORGEDFORGEDFORG")
    response = dmq.http.request("POST", "/", headers=headers, body=body)
    assert response.status_code == 403
    assert b"<Code>InvalidClientTokenId</Code>" in response.body
    assert b"<Type>Sender</Type>" in response.body


def test_a_wrong_secret_is_signature_does_not_match(dmq: Client) -> None:
    wrong = client(dmq, ROOT, "not-the-secret")
    with pytest.raises(ClientError) as exc:
        wrong.list_queues()
    assert code_of(exc) == ("SignatureDoesNotMatch", 403)
    assert exc.value.response["Error"]["Message"].startswith(
        "The request signature we calculated does not match the signature you provided.")


def test_a_body_changed_after_signing_is_signature_does_not_match(dmq: Client, root: Any) -> None:
    url = root.create_queue(QueueName="tampered")["QueueUrl"]
    headers, _ = json_request("SendMessage", {"QueueUrl": url, "MessageBody": "pay 1"})
    tampered = json.dumps({"QueueUrl": url, "MessageBody": "pay 1000"}).encode()
    response = dmq.http.request("POST", "/", headers=headers, body=tampered)
    assert json_error(response)[:3] == (
        403, "SignatureDoesNotMatch", "SignatureDoesNotMatch;Sender")
    assert "Messages" not in root.receive_message(QueueUrl=url)


def test_a_stated_payload_hash_must_match_the_body(dmq: Client, root: Any) -> None:
    url = root.create_queue(QueueName="hashed")["QueueUrl"]
    body = json.dumps({"QueueUrl": url, "MessageBody": "x"}).encode()
    headers = _signed(body, {
        "Content-Type": JSON_TYPE, "X-Amz-Target": "AmazonSQS.SendMessage",
        "X-Amz-Content-SHA256": hashlib.sha256(b"something else").hexdigest()})
    status, code, _, message = json_error(dmq.http.request("POST", "/", headers=headers,
                                                           body=body))
    assert (status, code) == (403, "SignatureDoesNotMatch")
    assert "x-amz-content-sha256" in message
    # The same header with the right hash is served.
    headers = _signed(body, {
        "Content-Type": JSON_TYPE, "X-Amz-Target": "AmazonSQS.SendMessage",
        "X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()})
    assert dmq.http.request("POST", "/", headers=headers, body=body).status_code == 200


def test_a_date_more_than_5_minutes_off_is_request_expired(dmq: Client) -> None:
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    for skew, words in ((-6, "Signature expired"), (6, "Signature not yet current")):
        headers, body = json_request("ListQueues", {},
                                     when=now + datetime.timedelta(minutes=skew))
        status, code, legacy, message = json_error(
            dmq.http.request("POST", "/", headers=headers, body=body))
        assert (status, code, legacy) == (400, "RequestExpired", "RequestExpired;Sender")
        assert message.startswith(words) and "5 min." in message
    # 4 minutes off is within the window (and so is a request replayed within it).
    headers, body = json_request("ListQueues", {}, when=now - datetime.timedelta(minutes=4))
    for _ in range(2):
        assert dmq.http.request("POST", "/", headers=headers, body=body).status_code == 200


def test_a_request_replayed_after_the_window_is_request_expired(dmq: Client) -> None:
    signed_at = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    headers, body = json_request("ListQueues", {}, when=signed_at)
    assert dmq.http.request("POST", "/", headers=headers, body=body).status_code == 200
    later = signed_at + datetime.timedelta(minutes=5, seconds=30)
    with mock.patch("chalicelib.frontend.sigv4.wall_clock", return_value=later.replace(
            tzinfo=datetime.UTC).timestamp()):
        response = dmq.http.request("POST", "/", headers=headers, body=body)
    assert json_error(response)[:2] == (400, "RequestExpired")


def test_an_unsigned_request_is_missing_authentication_token(dmq: Client) -> None:
    response = dmq.http.request("POST", "/", headers={
        "Content-Type": JSON_TYPE, "X-Amz-Target": "AmazonSQS.ListQueues", "Host": HOST},
        body=b"{}")
    status, code, legacy, message = json_error(response)
    assert (status, code, legacy) == (403, "MissingAuthenticationToken",
                                      "MissingAuthenticationToken;Sender")
    assert message == ("The request must contain either a valid (registered) AWS access key "
                       "ID or X.509 certificate.")
    response = dmq.http.request("GET", "/?Action=ListQueues", headers={"Host": HOST})
    assert response.status_code == 403
    assert b"<Code>MissingAuthenticationToken</Code>" in response.body


def test_an_incomplete_authorization_header_is_incomplete_signature(dmq: Client) -> None:
    headers = {"Content-Type": JSON_TYPE, "X-Amz-Target": "AmazonSQS.ListQueues", "Host": HOST,
               "X-Amz-Date": "20240101T000000Z",
               "Authorization": f"AWS4-HMAC-SHA256 Credential={ROOT}/20240101/us-east-1/sqs/"
                                "aws4_request, SignedHeaders=host;x-amz-date"}
    status, code, _, message = json_error(dmq.http.request("POST", "/", headers=headers,
                                                           body=b"{}"))
    assert (status, code) == (400, "IncompleteSignature")
    assert "Authorization header requires 'Signature' parameter." in message
    headers["Authorization"] = "AWS4-HMAC-SHA256 Credential=short, SignedHeaders=host, " \
                               "Signature=00"
    assert json_error(dmq.http.request("POST", "/", headers=headers, body=b"{}"))[:2] == (
        400, "IncompleteSignature")


def test_a_signature_for_another_service_is_refused(dmq: Client) -> None:
    headers, body = json_request("ListQueues", {}, service="dynamodb")
    status, code, _, message = json_error(dmq.http.request("POST", "/", headers=headers,
                                                           body=body))
    assert (status, code) == (403, "SignatureDoesNotMatch")
    assert "Credential should be scoped to correct service: 'sqs'" in message


def _presigned(query: str, expires_s: int, when: datetime.datetime | None = None) -> str:
    return sign("GET", f"http://{HOST}/?{query}", key=ROOT, secret=ROOT_SECRET, service="sqs",
                when=when, presign_s=expires_s).target


def test_a_presigned_url_is_served_until_it_expires(dmq: Client, root: Any) -> None:
    root.create_queue(QueueName="presigned")
    path = _presigned("Action=GetQueueUrl&QueueName=presigned&Version=2012-11-05", 60)
    response = dmq.http.request("GET", path, headers={"Host": HOST})
    assert response.status_code == 200
    assert b"/000000000000/presigned</QueueUrl>" in response.body

    old = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(
        seconds=120)
    expired = _presigned("Action=GetQueueUrl&QueueName=presigned&Version=2012-11-05", 60, old)
    response = dmq.http.request("GET", expired, headers={"Host": HOST})
    assert response.status_code == 400
    assert b"<Code>RequestExpired</Code>" in response.body
    assert b"Request has expired" in response.body

    tampered = path.replace("QueueName=presigned", "QueueName=other")
    response = dmq.http.request("GET", tampered, headers={"Host": HOST})
    assert response.status_code == 403 and b"<Code>SignatureDoesNotMatch</Code>" in response.body


def test_a_presigned_url_missing_a_part_is_incomplete_signature(dmq: Client) -> None:
    path = _presigned("Action=ListQueues&Version=2012-11-05", 60)
    cut = "&".join(p for p in path.split("&") if not p.startswith("X-Amz-Date="))
    response = dmq.http.request("GET", cut, headers={"Host": HOST})
    assert response.status_code == 400
    assert b"<Code>IncompleteSignature</Code>" in response.body
    assert b"'X-Amz-Date'" in response.body


# -- keys, accounts and authorization -------------------------------------------------------
def _new_key(dmq: Client, account: str, user: str | None = None,
             admin: bool = False) -> dict[str, Any]:
    body = json.dumps({"account": account, "user": user, "admin": admin}).encode()
    response = admin_call(dmq, "POST", "/admin/keys", body, key=ROOT, secret=ROOT_SECRET)
    assert response.status_code == 200, response.body
    return dict(json.loads(response.body))


def test_admin_keys_are_made_listed_rotated_and_revoked(dmq: Client, aws: Clients) -> None:
    made = _new_key(dmq, "111111111111", "alice")
    assert made["accessKeyId"].startswith("AKIA") and len(made["accessKeyId"]) == 20
    assert len(made["secretAccessKey"]) == 40
    assert (made["account"], made["user"], made["admin"], made["status"]) == (
        "111111111111", "alice", False, "Active")
    alice = client(dmq, made["accessKeyId"], made["secretAccessKey"])
    assert alice.create_queue(QueueName="mine")["QueueUrl"].endswith("/111111111111/mine")

    listed = json.loads(admin_call(dmq, "GET", "/admin/keys", key=ROOT,
                                   secret=ROOT_SECRET).body)["keys"]
    by_id = {k["accessKeyId"]: k for k in listed}
    assert set(by_id) == {ROOT, made["accessKeyId"]}
    assert by_id[ROOT]["admin"] is True and by_id[ROOT]["user"] is None
    assert all("secretAccessKey" not in k and set(k) == {
        "accessKeyId", "account", "user", "admin", "status", "created"} for k in listed)

    # The secret is stored encrypted: the control table never holds it in clear.
    raw = aws.dynamodb.get_item(TableName="dmq-control",
                                Key={"key": {"S": f"accesskey#{made['accessKeyId']}"}})["Item"]
    assert made["secretAccessKey"].encode() not in raw["secret"]["B"]
    assert made["secretAccessKey"] not in json.dumps(raw, default=str)

    rotated = json.loads(admin_call(dmq, "POST", f"/admin/keys/{made['accessKeyId']}/rotate",
                                    b"{}", key=ROOT, secret=ROOT_SECRET).body)
    assert (rotated["account"], rotated["user"]) == ("111111111111", "alice")
    assert rotated["accessKeyId"] != made["accessKeyId"]
    newer = client(dmq, rotated["accessKeyId"], rotated["secretAccessKey"])
    assert newer.list_queues()["QueueUrls"] == alice.list_queues()["QueueUrls"]

    revoked = admin_call(dmq, "DELETE", f"/admin/keys/{made['accessKeyId']}", key=ROOT,
                         secret=ROOT_SECRET)
    assert revoked.status_code == 200 and json.loads(revoked.body)["status"] == "Revoked"
    with pytest.raises(ClientError) as exc:
        alice.list_queues()
    assert code_of(exc) == ("InvalidClientTokenId", 403)
    assert newer.list_queues()["QueueUrls"][0].endswith("/111111111111/mine")

    missing = admin_call(dmq, "DELETE", f"/admin/keys/{made['accessKeyId']}", key=ROOT,
                         secret=ROOT_SECRET)
    assert missing.status_code == 404 and json.loads(missing.body)["code"] == "NoSuchEntity"


def test_admin_key_requests_are_validated(dmq: Client) -> None:
    for bad, field in (({"account": "12"}, "account"),
                       ({"account": "111111111111", "user": "no spaces"}, "user"),
                       ({"account": "111111111111", "admin": "yes"}, "admin"),
                       ({"account": "111111111111", "role": "x"}, "role")):
        response = admin_call(dmq, "POST", "/admin/keys", json.dumps(bad).encode(), key=ROOT,
                              secret=ROOT_SECRET)
        assert response.status_code == 400, bad
        body = json.loads(response.body)
        assert body["code"] == "InvalidParameterValue" and field in body["message"]


def test_the_admin_api_needs_an_admin_credential(dmq: Client) -> None:
    response = dmq.http.get("/admin/queues")
    assert response.status_code == 403
    assert json.loads(response.body) == {"code": "MissingAuthenticationToken",
                                         "message": "Missing Authentication Token"}
    user = _new_key(dmq, ACCOUNT, "operator")
    response = admin_call(dmq, "GET", "/admin/queues", key=user["accessKeyId"],
                          secret=user["secretAccessKey"])
    assert response.status_code == 403 and json.loads(response.body)["code"] == "AccessDenied"
    response = admin_call(dmq, "GET", "/admin/queues", key=ROOT, secret="wrong")
    assert response.status_code == 403
    assert json.loads(response.body)["code"] == "SignatureDoesNotMatch"
    response = admin_call(dmq, "GET", "/admin/queues", key="AKIANOBODYNOBODYNOBO", secret="x")
    assert json.loads(response.body)["code"] == "InvalidClientTokenId"
    assert admin_call(dmq, "GET", "/admin/queues", key=ROOT,
                      secret=ROOT_SECRET).status_code == 200
    ops = _new_key(dmq, ACCOUNT, "ops", admin=True)
    assert admin_call(dmq, "GET", "/admin/keys", key=ops["accessKeyId"],
                      secret=ops["secretAccessKey"]).status_code == 200


def test_another_account_needs_the_queue_policy(dmq: Client, root: Any) -> None:
    url = root.create_queue(QueueName="shared")["QueueUrl"]
    other_key = _new_key(dmq, "222222222222", "bob")
    bob = client(dmq, other_key["accessKeyId"], other_key["secretAccessKey"])

    # Without a policy: AccessDenied, the queue untouched; bob's own account is empty.
    with pytest.raises(ClientError) as exc:
        bob.send_message(QueueUrl=url, MessageBody="sneaky")
    assert code_of(exc) == ("AccessDenied", 403)
    assert exc.value.response["Error"]["Message"] == (
        "User: arn:aws:iam::222222222222:user/bob is not authorized to perform: "
        "sqs:SendMessage on resource: arn:aws:sqs:us-east-1:000000000000:shared because no "
        "resource-based policy allows the sqs:SendMessage action")
    assert bob.list_queues().get("QueueUrls", []) == []
    with pytest.raises(ClientError) as exc:
        bob.get_queue_url(QueueName="shared", QueueOwnerAWSAccountId=ACCOUNT)
    assert code_of(exc) == ("AccessDenied", 403)

    # The owner shares SendMessage and GetQueueUrl: those (and the batch form) work, the
    # rest does not.
    root.add_permission(QueueUrl=url, Label="bob-sends", AWSAccountIds=["222222222222"],
                        Actions=["SendMessage", "GetQueueUrl"])
    assert bob.get_queue_url(QueueName="shared", QueueOwnerAWSAccountId=ACCOUNT)[
        "QueueUrl"] == url
    bob.send_message(QueueUrl=url, MessageBody="allowed")
    bob.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "batched"}])
    with pytest.raises(ClientError) as exc:
        bob.receive_message(QueueUrl=url)
    assert code_of(exc) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as exc:
        bob.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "5"})
    assert code_of(exc) == ("AccessDenied", 403)
    assert "only the queue owner" in exc.value.response["Error"]["Message"]
    bodies = sorted(m["Body"] for m in root.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10)["Messages"])
    assert bodies == ["allowed", "batched"]

    # An explicit deny wins over the allow.
    policy = json.loads(root.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])[
        "Attributes"]["Policy"])
    policy["Statement"].append({"Sid": "no-bob", "Effect": "Deny",
                                "Principal": {"AWS": "arn:aws:iam::222222222222:user/bob"},
                                "Action": "sqs:SendMessage", "Resource": policy[
                                    "Statement"][0]["Resource"]})
    root.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})
    with pytest.raises(ClientError) as exc:
        bob.send_message(QueueUrl=url, MessageBody="denied")
    assert code_of(exc) == ("AccessDenied", 403)
    assert "explicit deny" in exc.value.response["Error"]["Message"]


def test_move_tasks_on_another_accounts_queues_are_denied(dmq: Client, root: Any) -> None:
    dlq = root.create_queue(QueueName="owners-dlq")["QueueUrl"]
    arn = root.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    key = _new_key(dmq, "666666666666")
    eve = client(dmq, key["accessKeyId"], key["secretAccessKey"])
    for call, kwargs in ((eve.start_message_move_task, {"SourceArn": arn}),
                         (eve.list_message_move_tasks, {"SourceArn": arn})):
        with pytest.raises(ClientError) as exc:
            call(**kwargs)
        assert code_of(exc) == ("AccessDenied", 403)
    assert root.list_message_move_tasks(SourceArn=arn)["Results"] == []


def test_a_url_naming_another_account_without_a_queue_is_queue_does_not_exist(
        dmq: Client) -> None:
    key = _new_key(dmq, "333333333333")
    carol = client(dmq, key["accessKeyId"], key["secretAccessKey"])
    with pytest.raises(ClientError) as exc:
        carol.send_message(QueueUrl=f"http://{HOST}/{ACCOUNT}/nothing-here", MessageBody="x")
    assert code_of(exc) == ("AWS.SimpleQueueService.NonExistentQueue", 400)


def test_admin_only_deletes(aws: Clients, clock: Any) -> None:
    from app import app, runtime

    settings = Settings(metadata_cache_seconds=0.0, auth="required", root_access_key_id=ROOT,
                        root_secret_access_key=ROOT_SECRET, admin_delete_only=True)
    runtime.configure(settings, clock)
    try:
        with Client(app) as dmq:
            root = client(dmq, ROOT, ROOT_SECRET)
            user = _new_key(dmq, ACCOUNT, "dev")
            dev = client(dmq, user["accessKeyId"], user["secretAccessKey"])
            url = dev.create_queue(QueueName="precious")["QueueUrl"]
            for call in (dev.purge_queue, dev.delete_queue):
                with pytest.raises(ClientError) as exc:
                    call(QueueUrl=url)
                assert code_of(exc) == ("AccessDenied", 403)
                assert "only administrators" in exc.value.response["Error"]["Message"]
            root.purge_queue(QueueUrl=url)
            root.delete_queue(QueueUrl=url)
            assert root.list_queues().get("QueueUrls", []) == []
    finally:
        runtime.configure(None)


# -- STS ------------------------------------------------------------------------------------
def test_get_caller_identity_names_the_caller(dmq: Client) -> None:
    sts = client(dmq, ROOT, ROOT_SECRET, service="sts")
    me = sts.get_caller_identity()
    assert (me["Account"], me["Arn"], me["UserId"]) == (
        ACCOUNT, "arn:aws:iam::000000000000:root", ACCOUNT)
    made = _new_key(dmq, "444444444444", "dave")
    dave = client(dmq, made["accessKeyId"], made["secretAccessKey"], service="sts")
    me = dave.get_caller_identity()
    assert (me["Account"], me["Arn"]) == ("444444444444", "arn:aws:iam::444444444444:user/dave")
    assert me["UserId"].startswith("AIDA") and len(me["UserId"]) == 21
    forged = client(dmq, "AKIAFORGEDFORGEDFORG", "x", service="sts")
    with pytest.raises(ClientError) as exc:
        forged.get_caller_identity()
    assert code_of(exc) == ("InvalidClientTokenId", 403)


# -- the open mode --------------------------------------------------------------------------
@pytest.fixture
def open_dmq(aws: Clients, clock: Any) -> Iterator[Client]:
    from app import app, runtime

    runtime.configure(Settings(metadata_cache_seconds=0.0), clock)
    with Client(app) as dmq:
        yield dmq
    runtime.configure(None)


def test_open_mode_accepts_any_signature_with_tenants(open_dmq: Client) -> None:
    default = client(open_dmq, "anything", "any-secret")
    tenant = client(open_dmq, "555555555555", "whatever")
    assert default.create_queue(QueueName="a")["QueueUrl"].endswith("/000000000000/a")
    assert tenant.create_queue(QueueName="a")["QueueUrl"].endswith("/555555555555/a")
    assert [u.rsplit("/", 2)[1] for u in tenant.list_queues()["QueueUrls"]] == ["555555555555"]
    # The same 12-digit key as another tenant: that tenant's queues, policy-free, are closed.
    with pytest.raises(ClientError) as exc:
        tenant.send_message(QueueUrl=f"http://{HOST}/000000000000/a", MessageBody="x")
    assert code_of(exc) == ("AccessDenied", 403)
    me = client(open_dmq, "555555555555", "x", service="sts").get_caller_identity()
    assert (me["Account"], me["Arn"]) == ("555555555555", "arn:aws:iam::555555555555:root")
    unsigned = open_dmq.http.request("POST", "/", headers={
        "Content-Type": JSON_TYPE, "X-Amz-Target": "AmazonSQS.ListQueues", "Host": HOST},
        body=b"{}")
    assert unsigned.status_code == 200
    # The admin API still wants a signature; any key of the default account is its admin.
    assert open_dmq.http.get("/admin/queues").status_code == 403
    assert admin_call(open_dmq, "GET", "/admin/queues").status_code == 200
    denied = admin_call(open_dmq, "GET", "/admin/queues", key="555555555555")
    assert denied.status_code == 403 and json.loads(denied.body)["code"] == "AccessDenied"


def _basic(key: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{key}:{secret}".encode()).decode()}


def test_the_console_takes_a_held_admin_key_and_its_secret_only(dmq: Client) -> None:
    assert dmq.http.get("/console", headers=_basic(ROOT, ROOT_SECRET)).status_code == 200
    for key, secret in ((ROOT, "not-the-secret"), ("AKIAUNKNOWNUNKNOWN00", ROOT_SECRET),
                        (ACCOUNT, "anything")):  # open mode's tenant rule no longer applies
        refused = dmq.http.get("/console", headers=_basic(key, secret))
        assert refused.status_code == 401, key
        assert refused.headers["WWW-Authenticate"].startswith("Basic ")
    body = json.dumps({"account": "111122223333", "user": "ops", "admin": False}).encode()
    made = json.loads(admin_call(dmq, "POST", "/admin/keys", body, key=ROOT,
                                 secret=ROOT_SECRET).body)
    not_admin = dmq.http.get("/console", headers=_basic(made["accessKeyId"],
                                                        made["secretAccessKey"]))
    assert not_admin.status_code == 403
