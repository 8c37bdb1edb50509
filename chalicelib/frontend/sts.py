"""STS GetCallerIdentity on the SQS endpoint (Query protocol, as botocore's STS model is):
many tools call it to learn their account before they touch a queue."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from xml.sax.saxutils import escape

from chalicelib.frontend.json_protocol import HttpResponse
from chalicelib.service.identity import Caller, principal_arn

ACTION = "GetCallerIdentity"
NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"
CONTENT_TYPE = "text/xml"


def is_sts(pairs: Sequence[tuple[str, str]]) -> bool:
    """True for an STS GetCallerIdentity request (SQS has no action of that name)."""
    return any(key == "Action" and value == ACTION for key, value in pairs)


def default_caller(account: str) -> Caller:
    """The caller of a request served without authentication: the account's root."""
    return Caller(account, principal_arn(account, None), "", True)


def user_id(caller: Caller) -> str:
    """The root's UserId is its account id; a user's is a stable unique id shaped as
    IAM's (AIDA and 17 base32 characters), derived from its ARN."""
    if caller.arn.endswith(":root"):
        return caller.account
    digest = base64.b32encode(hashlib.sha256(caller.arn.encode()).digest()).decode()
    return "AIDA" + digest[:17]


def sts_response(pairs: Sequence[tuple[str, str]], caller: Caller,
                 request_id: str) -> HttpResponse:
    """The GetCallerIdentity answer in STS's XML shape."""
    del pairs  # GetCallerIdentity takes no parameters
    body = (
        f'<GetCallerIdentityResponse xmlns="{NAMESPACE}">'
        "<GetCallerIdentityResult>"
        f"<Arn>{escape(caller.arn)}</Arn>"
        f"<UserId>{escape(user_id(caller))}</UserId>"
        f"<Account>{escape(caller.account)}</Account>"
        "</GetCallerIdentityResult>"
        f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
        "</GetCallerIdentityResponse>"
    )
    return HttpResponse(200, {"Content-Type": CONTENT_TYPE, "x-amzn-RequestId": request_id},
                        body)
