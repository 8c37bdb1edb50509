"""The admin API of push subscriptions: list, create and delete a queue's subscribers."""

from __future__ import annotations

from typing import Any

from chalicelib.frontend.services import Services
from chalicelib.push.subscriptions import SubscriptionService


def list_subscriptions(subs: SubscriptionService, services: Services, account: str,
                       name: str) -> dict[str, Any]:
    """A queue's subscriptions."""
    queue = services.queues.get(account, name)
    return {"queue_id": queue.queue_id,
            "subscriptions": [s.to_json() for s in subs.list(queue)]}


def create_subscription(subs: SubscriptionService, services: Services, account: str, name: str,
                        body: dict[str, Any] | None) -> dict[str, Any]:
    """Subscribe an endpoint or a function to a queue."""
    queue = services.queues.get(account, name)
    return subs.create(queue, body).to_json()


def delete_subscription(subs: SubscriptionService, services: Services, account: str,
                        name: str, sub_id: str) -> dict[str, Any]:
    """Unsubscribe; the deleted subscription is returned."""
    queue = services.queues.get(account, name)
    return subs.delete(queue, sub_id).to_json()
