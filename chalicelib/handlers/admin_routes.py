"""The admin API (`/admin/...`): queues, shards and clusters, regions, access keys and
push subscriptions, behind an admin credential. Every refusal, the credential check's
included, is answered by `admin_error`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalice import Blueprint, IAMAuthorizer, Response
from chalice.app import Request

from chalicelib.frontend import admin, admin_auth
from chalicelib.frontend.errors import to_sqs_error
from chalicelib.frontend.services import Services
from chalicelib.handlers.container import runtime
from chalicelib.handlers.incoming import json_object, signed_request
from chalicelib.push import admin_api as admin_push
from chalicelib.regions import admin_api as regions_api

blueprint = Blueprint(__name__)
admins = IAMAuthorizer()
JSON = ["application/json"]


def admin_error(exc: Exception) -> Response:
    """A refused admin request: `{"code", "message"}` with the error's status (404 for a
    queue that does not exist), API Gateway's error-type header, and the legacy code header
    (so the local server passes the body on as it is)."""
    error = to_sqs_error(exc)
    fault = "Sender" if error.sender_fault else "Receiver"
    return Response(body={"code": error.code, "message": error.message},
                    status_code=404 if error.code == "QueueDoesNotExist" else error.status,
                    headers={"Content-Type": "application/json",
                             "x-amzn-ErrorType": error.code,
                             "x-amzn-query-error": f"{error.code};{fault}"})


def _answer(call: Callable[[], Any]) -> Response:
    try:
        return Response(body=call(), status_code=200)
    except Exception as exc:  # noqa: BLE001 - mapped like every SQS error
        return admin_error(exc)


def _on_services(call: Callable[..., Any], *args: Any) -> Response:
    """`call(services, *args)` on the default region's services, answered."""
    return _answer(lambda: call(runtime.services_for(), *args))


def _on_subscriptions(call: Callable[..., Any], *args: Any) -> Response:
    """`call(subscriptions, services, *args)`, answered (push delivery: docs/push.md)."""

    def with_subscriptions() -> Any:
        services: Services = runtime.services_for()
        return call(runtime.subscriptions(services.region), services, *args)

    return _answer(with_subscriptions)


def _body() -> dict[str, Any] | None:
    return json_object(blueprint.current_request)


@blueprint.middleware("http")
def admin_credentials(event: Request, get_response: Callable[[Request], Response]) -> Response:
    """The admin API (`/admin/...`) needs an admin credential, SigV4 for execute-api. A
    deployed stage leaves that to API Gateway's IAM authorizer."""
    if not event.path.startswith("/admin") or runtime.settings.admin_iam_gateway:
        return get_response(event)
    try:
        admin_auth.authenticate_admin(runtime.identities(), signed_request(event, event.path))
    except Exception as exc:  # noqa: BLE001 - mapped like every SQS error
        return admin_error(exc)
    return get_response(event)


@blueprint.route("/admin/queues", methods=["GET"], authorizer=admins)
def admin_queues() -> Response:
    """Admin: every queue of every account."""
    return _on_services(admin.list_queues)


@blueprint.route("/admin/queues/{account}/{name}", methods=["GET"], authorizer=admins)
def admin_queue(account: str, name: str) -> Response:
    """Admin: one queue's record and counts."""
    return _on_services(admin.describe_queue, account, name)


@blueprint.route("/admin/queues/{account}/{name}/messages", methods=["GET"], authorizer=admins)
def admin_messages(account: str, name: str) -> Response:
    """Admin: inspect a queue's oldest messages without receiving them."""
    params = blueprint.current_request.query_params
    limit = (params.get("limit") if params else None) or "10"
    return _on_services(admin.peek_messages, account, name, int(limit) if limit.isdigit() else 10)


@blueprint.route("/admin/regions", methods=["GET"], authorizer=admins)
def admin_regions() -> Response:
    """Admin: regions, heartbeats, home queues and replication lag."""
    return _answer(lambda: regions_api.regions_view(runtime))


@blueprint.route("/admin/queues/{account}/{name}/shards", methods=["PUT"], authorizer=admins,
                 content_types=JSON)
def admin_shards(account: str, name: str) -> Response:
    """Admin (internal cluster manager): scale a queue's shards out or in."""
    return _on_services(admin.set_shards, account, name, _body())


@blueprint.route("/admin/queues/{account}/{name}/autoscale", methods=["PUT"], authorizer=admins,
                 content_types=JSON)
def admin_autoscale(account: str, name: str) -> Response:
    """Admin: pin a queue's shard count, or hand it back to the autoscaler."""
    return _on_services(admin.set_autoscale, account, name, _body())


@blueprint.route("/admin/queues/{account}/{name}/split", methods=["POST"], authorizer=admins,
                 content_types=JSON)
def admin_split(account: str, name: str) -> Response:
    """Admin (external cluster manager): spread a hot queue onto a second cluster."""
    return _on_services(admin.split_queue, account, name, _body())


@blueprint.route("/admin/clusters", methods=["GET"], authorizer=admins)
def admin_clusters() -> Response:
    """Admin: every cluster with its capacity, utilization and queues."""
    return _on_services(admin.list_clusters)


@blueprint.route("/admin/clusters/{cluster}", methods=["PUT"], authorizer=admins,
                 content_types=JSON)
def admin_cluster(cluster: str) -> Response:
    """Admin: set a cluster's capacity."""
    return _on_services(admin.set_cluster_capacity, cluster, _body())


@blueprint.route("/admin/keys", methods=["GET"], authorizer=admins)
def admin_list_keys() -> Response:
    """Admin: every access key (never a secret)."""
    return _answer(lambda: admin_auth.list_keys(runtime.identities()))


@blueprint.route("/admin/keys", methods=["POST"], authorizer=admins, content_types=JSON)
def admin_create_key() -> Response:
    """Admin: a new access key for an account's root or a named user; the secret is shown
    once."""
    body = _body()
    return _answer(lambda: admin_auth.create_key(runtime.identities(), body))


@blueprint.route("/admin/keys/{key_id}/rotate", methods=["POST"], authorizer=admins,
                 content_types=JSON)
def admin_rotate_key(key_id: str) -> Response:
    """Admin: a new key pair for the same principal (the old key stays until revoked)."""
    return _answer(lambda: admin_auth.rotate_key(runtime.identities(), key_id))


@blueprint.route("/admin/keys/{key_id}", methods=["DELETE"], authorizer=admins)
def admin_revoke_key(key_id: str) -> Response:
    """Admin: revoke an access key."""
    return _answer(lambda: admin_auth.revoke_key(runtime.identities(), key_id))


@blueprint.route("/admin/queues/{account}/{name}/subscriptions", methods=["GET"],
                 authorizer=admins)
def admin_subscriptions(account: str, name: str) -> Response:
    """Admin: a queue's push subscriptions."""
    return _on_subscriptions(admin_push.list_subscriptions, account, name)


@blueprint.route("/admin/queues/{account}/{name}/subscriptions", methods=["POST"],
                 authorizer=admins, content_types=JSON)
def admin_subscribe(account: str, name: str) -> Response:
    """Admin: subscribe an HTTP(S) endpoint or a function of the deployment to a queue."""
    return _on_subscriptions(admin_push.create_subscription, account, name, _body())


@blueprint.route("/admin/queues/{account}/{name}/subscriptions/{sub_id}", methods=["DELETE"],
                 authorizer=admins)
def admin_unsubscribe(account: str, name: str, sub_id: str) -> Response:
    """Admin: delete a push subscription."""
    return _on_subscriptions(admin_push.delete_subscription, account, name, sub_id)
