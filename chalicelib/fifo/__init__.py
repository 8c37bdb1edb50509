"""FIFO queues: deduplication, sequence numbers, group-ordered receives and hash-range
resharding (docs/fifo.md, docs/autoscaling.md "FIFO queues").

The algorithm is in the service layer, over the `FifoStore` protocol. Its layers, top to
bottom:

- `messages` (`FifoMessages`, the FIFO kind of queue behind `service.message_kinds`),
  `service` (`FifoService`: sends, receives, releases) and `gate` (a new shard waits for
  its ancestors to drain);
- `store` (the `FifoStore` protocol) and its DynamoDB implementation, `dynamo`
  (`DynamoFifoStore`) over `dynamo_base`, `dynamo_sends` and `dynamo_claims`;
- `rules` (ids, sequence numbers, keys, group placement) and `ranges` (which shard owns a
  group's hash), pure Python.
"""
