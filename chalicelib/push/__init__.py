"""Push delivery: DMQ polls a subscribed queue and hands its messages to a target, as
Lambda's SQS event source mapping does (docs/push.md).

It owns the subscriptions, where delivery may connect, the delivery loop and the calls
to a target. Its layers, top to bottom:

- `admin_api`: the admin API's list, create and delete of a queue's subscribers;
- `subscriptions` (create, list and delete, with Lambda's checks), `delivery` (the
  poller, `PushDelivery`) and `events` (the SQS event a target receives);
- `registry` (subscriptions and concurrency slots in the control table), `targets` (the
  functions of this deployment, `on_queue_message`, and the call to a target) and
  `endpoint` (one POST to a checked address);
- `subscription` (what a subscriber is) and `destinations` (which addresses are allowed),
  pure Python.

Other code uses `subscriptions.SubscriptionService`, `delivery.PushDelivery`,
`registry.SubscriptionRepository`, `targets.on_queue_message` and `destinations`.
"""
