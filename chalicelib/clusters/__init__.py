"""Clusters and shards: where a queue's messages live, and how many shards it has
(docs/architecture.md "Shards, clusters and regions", docs/autoscaling.md).

Its layers, top to bottom:

- `manager` (`ClusterManager`: placing queues, recording load, splitting hot queues),
  `shards` (resizing a queue, forgetting drained shards) and `autoscaler` (`Autoscaler`:
  the periodic split-or-merge check);
- `stores` (each cluster's message store, by name), `placement` (the weighted
  consistent-hash ring), `shard_load` (each shard's rate, kept from the stream) and
  `autoscale_states` (what the autoscaler remembers per queue);
- `autoscale_rules`: when to split or merge, pure Python.
"""
