"""An in-memory DynamoDB and DynamoDB Streams for `DMQ_STORE=memory`."""
