"""Authentication and authorization of SQS requests.

`authenticate` turns a request into its `Caller`: in the open mode by the tenant rule (no
signature checked), in the required mode by a SigV4 signature verified against a stored
key. `authorize` decides an action: the caller's account owns its queues; another
account's queue is served only when its Policy allows the caller (an explicit deny wins),
for the actions SQS lets an owner share; with admin-only deletes, DeleteQueue and
PurgeQueue need an admin principal.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from typing import Any

from chalicelib.domain import policy
from chalicelib.domain.move_tasks import decode_handle
from chalicelib.domain.queues import QueueStatus, parse_queue_arn, queue_arn, queue_id_of
from chalicelib.frontend.context import RequestContext, could_be_queue
from chalicelib.frontend.params import Params
from chalicelib.frontend.services import Services
from chalicelib.frontend.sigv4 import SignedRequest, access_key_of, parse, verify
from chalicelib.service.exceptions import (
    AccessDeniedError,
    MissingAuthenticationTokenError,
    QueueDoesNotExistError,
    ResourceNotFoundError,
    SignatureDoesNotMatchError,
)
from chalicelib.service.identity import Caller, Identities
from chalicelib.service.permissions import SHAREABLE

SQS_SERVICES = ("sqs", "sts")  # the SQS endpoint also answers STS GetCallerIdentity
ADMIN_SERVICES = ("execute-api",)
ADMIN_ONLY = frozenset({"DeleteQueue", "PurgeQueue"})
# A batch is allowed by the permission of its single form, as SQS documents.
_SINGLE_FORM = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


def authenticate(
    identities: Identities, request: SignedRequest, services: Collection[str] = SQS_SERVICES,
    now: Callable[[], float] | None = None,
) -> Caller:
    """The caller of a request, or the SQS error that refuses it."""
    if not identities.required:
        return identities.open_caller(access_key_of(request))
    signature = parse(request)
    if signature is None:
        raise MissingAuthenticationTokenError()
    if signature.service not in services:
        raise SignatureDoesNotMatchError(
            f"Credential should be scoped to correct service: '{next(iter(services))}'. ")
    caller, secret = identities.lookup(signature.access_key_id)
    verify(request, signature, secret, now)
    return caller


def _arn_accounts(params: Params) -> list[tuple[str, str]]:
    """(account, name) of the queues a move-task action names by ARN."""
    found = []
    for arn in (params.raw(name) for name in ("SourceArn", "DestinationArn")):
        parsed = parse_queue_arn(arn) if isinstance(arn, str) else None
        if parsed is not None:
            found.append((parsed[1], parsed[2]))
    return found


def _check_task_handle(caller: Caller, action: str, params: Params) -> None:
    """A task handle names its source queue: one of another account's is, to the caller,
    a queue that does not exist (SQS's 404 ResourceNotFoundException, not AccessDenied)."""
    handle = params.raw("TaskHandle") if action == "CancelMessageMoveTask" else None
    decoded = decode_handle(handle) if isinstance(handle, str) else None
    parsed = parse_queue_arn(decoded[1]) if decoded else None
    if parsed is not None and parsed[1] != caller.account:
        raise ResourceNotFoundError(
            "The resource that you specified for the SourceArn parameter doesn't exist.")


def _target(context: RequestContext, action: str, params: Params) -> tuple[str, str] | None:
    """(owner account, queue name) the action acts on, or None for the caller's own
    account (CreateQueue, ListQueues) or a request that names no queue well (the action
    itself reports that)."""
    if action == "GetQueueUrl":
        owner = params.raw("QueueOwnerAWSAccountId")
        name = params.raw("QueueName")
        if isinstance(owner, str) and isinstance(name, str) and could_be_queue(owner, name):
            return owner, name
        return None  # the action refuses what names no queue, without a store read
    return context.queue_parts_or_none()  # the QueueUrl, as the adapter parsed it


def _facts(caller: Caller, context: RequestContext) -> dict[str, Any]:
    now = datetime.now(UTC)
    facts: dict[str, Any] = {
        "aws:PrincipalArn": caller.arn, "aws:PrincipalAccount": caller.account,
        "aws:PrincipalType": "Account" if caller.arn.endswith(":root") else "User",
        "aws:CurrentTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "aws:EpochTime": str(int(now.timestamp())),
        "aws:SecureTransport": "true" if context.base_url.startswith("https:") else "false",
    }
    if ":user/" in caller.arn:
        facts["aws:username"] = caller.arn.rsplit("/", 1)[1]
    return facts


def _denied(caller: Caller, action: str, resource: str, why: str) -> AccessDeniedError:
    return AccessDeniedError(
        f"User: {caller.arn} is not authorized to perform: sqs:{action} on resource: "
        f"{resource} {why}")


def authorize(services: Services, context: RequestContext, action: str, params: Params) -> None:
    """Refuse the action (AccessDenied, or QueueDoesNotExist for another account's queue
    that is not there) unless the caller may perform it."""
    caller = context.caller
    if caller is None:
        return
    target = _target(context, action, params)
    if action in ADMIN_ONLY and services.settings.admin_delete_only and not caller.admin:
        resource = queue_arn(context.region, *target) if target else "*"
        raise _denied(caller, action, resource,
                      "because only administrators may delete or purge queues here")
    _check_task_handle(caller, action, params)
    for account, name in _arn_accounts(params):  # move tasks: the owner's only
        if account != caller.account:
            raise _denied(caller, action, queue_arn(context.region, account, name),
                          "because only the queue owner may perform this action")
    if target is None or target[0] == caller.account:
        return
    owner, name = target
    record = services.queues.find(queue_id_of(owner, name))
    if record is None or record.status is not QueueStatus.ACTIVE:
        raise QueueDoesNotExistError()
    single = _SINGLE_FORM.get(action, action)
    if single not in SHAREABLE:
        raise _denied(caller, action, record.arn,
                      "because only the queue owner may perform this action")
    document = _policy(record.attributes.get("Policy"))
    decision = policy.evaluate(document, caller.arn, f"sqs:{single}", record.arn,
                               _facts(caller, context))
    if decision is policy.Decision.EXPLICIT_DENY:
        raise _denied(caller, action, record.arn,
                      "with an explicit deny in a resource-based policy")
    if decision is not policy.Decision.ALLOW:
        raise _denied(caller, action, record.arn,
                      f"because no resource-based policy allows the sqs:{single} action")


def _policy(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None
