"""The admin API's credentials and its access-key routes.

Admin requests are signed with SigV4 for `execute-api` (as API Gateway's IAM authorizer
wants them on AWS). Locally DMQ checks them itself: unsigned is MissingAuthenticationToken;
in the open mode any signature of a key that acts as the deployment account's root is an
admin; in the required mode the signature is verified and the key must be an admin's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib.frontend.authn import ADMIN_SERVICES
from chalicelib.frontend.sigv4 import SignedRequest, access_key_of, parse, verify
from chalicelib.service.exceptions import (
    AccessDeniedError,
    InvalidParameterValueError,
    MissingAuthenticationTokenError,
    SignatureDoesNotMatchError,
)
from chalicelib.service.identity import Caller, Identities

MISSING_TOKEN = "Missing Authentication Token"


def authenticate_admin(identities: Identities, request: SignedRequest,
                       now: Callable[[], float] | None = None) -> Caller:
    """The admin caller of an admin API request, or the error that refuses it."""
    signature = parse(request)
    if signature is None:
        raise MissingAuthenticationTokenError(MISSING_TOKEN)
    if identities.required:
        if signature.service not in ADMIN_SERVICES:
            raise SignatureDoesNotMatchError(
                "Credential should be scoped to correct service: 'execute-api'. ")
        caller, secret = identities.lookup(signature.access_key_id)
        verify(request, signature, secret, now)
    else:
        caller = identities.open_caller(access_key_of(request))
    if not caller.admin:
        raise AccessDeniedError(
            f"User: {caller.arn} is not authorized to perform: execute-api:Invoke on "
            f"resource: {request.method} {request.path}: the admin API needs an admin "
            "credential.")
    return caller


def list_keys(identities: Identities) -> dict[str, Any]:
    """`{"keys": [...]}`: every access key, without secrets."""
    return {"keys": [key.to_json() for key in identities.list_keys()]}


def create_key(identities: Identities, body: dict[str, Any] | None) -> dict[str, Any]:
    """A new key from `{"account", "user", "admin"}` (account: the deployment's when
    absent; user: absent or null for the account's root; admin: false when absent)."""
    if body is None:
        raise InvalidParameterValueError(
            'The body must be a JSON object: {"account", "user", "admin"}.')
    unknown = sorted(set(body) - {"account", "user", "admin"})
    if unknown:
        raise InvalidParameterValueError(f"Unknown field {unknown[0]}: the fields are "
                                         "account, user and admin.")
    account = body.get("account", identities.default_account)
    key, secret = identities.create_key(account, body.get("user"), body.get("admin", False))
    return {**key.to_json(), "secretAccessKey": secret}


def rotate_key(identities: Identities, access_key_id: str) -> dict[str, Any]:
    """A new key pair for the principal of `access_key_id` (which stays active)."""
    key, secret = identities.rotate(access_key_id)
    return {**key.to_json(), "secretAccessKey": secret}


def revoke_key(identities: Identities, access_key_id: str) -> dict[str, Any]:
    """Revoke a key: its requests are InvalidClientTokenId from then on."""
    return identities.revoke(access_key_id).to_json()
