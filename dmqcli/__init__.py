"""`dmq`: one command to operate DMQ, against the local server or a deployed stage.

Queues and messages go through the SQS API (boto3); inspection, keys, regions,
clusters, shards and exports through DMQ's admin API, signed with SigV4 like the AWS
CLI signs (the same credential chain: environment, `--profile`, config files). It finds
the running local server by itself, and against a local server in the open mode it
needs no credentials at all (docs/cli.md).
"""
