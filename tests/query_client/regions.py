"""Drive DMQ's regions and queue-URL forms with an SQS client that speaks the Query protocol;
print what it got as JSON.

Runs under .venv-query (botocore 1.29.x): `.venv-query/bin/python -m
tests.query_client.regions --endpoint URL --prefix NAME`. Two clients signed for eu-west-1
and ap-southeast-2 create a queue of the same name; the first sends by its URL in several
forms and by its bare name, and a client of the server's region sends with the queue's URL
as its endpoint; the second receives from its own. Uses botocore only.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError

ACCOUNT = "000000000000"


def _client(endpoint: str, region: str) -> Any:
    return botocore.session.get_session().create_client(
        "sqs", endpoint_url=endpoint, region_name=region,
        aws_access_key_id="query-key", aws_secret_access_key="query-secret",
        config=Config(retries={"total_max_attempts": 1}, read_timeout=30))


def drive(endpoint: str, prefix: str) -> dict[str, Any]:
    """Create, send, receive in two regions; what each call answered."""
    name = f"{prefix}-jobs"
    clients = {region: _client(endpoint, region) for region in ("eu-west-1", "ap-southeast-2")}
    urls = {region: c.create_queue(QueueName=name)["QueueUrl"] for region, c in clients.items()}
    arns = {region: clients[region].get_queue_attributes(
        QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for region, url in urls.items()}
    ireland = clients["eu-west-1"]
    sent = [urls["eu-west-1"], name,
            f"http://sqs.eu-west-1.localhost.localstack.cloud:4566/{ACCOUNT}/{name}",
            f"http://localhost:4566/queue/eu-west-1/{ACCOUNT}/{name}"]
    for url in sent:
        ireland.send_message(QueueUrl=url, MessageBody=url)
    # a client of the server's region whose endpoint is the queue's URL (as SDKs that post
    # to the QueueUrl do) reaches the queue the URL names
    at_url = f"at {urls['eu-west-1']}"
    _client(urls["eu-west-1"], "us-east-1").send_message(QueueUrl=urls["eu-west-1"],
                                                         MessageBody=at_url)
    sent.append(at_url)
    other = clients["ap-southeast-2"].receive_message(QueueUrl=urls["ap-southeast-2"])
    received: list[str] = []
    for _ in range(10):
        got = ireland.receive_message(QueueUrl=name, MaxNumberOfMessages=10,
                                      WaitTimeSeconds=1).get("Messages", [])
        received += [m["Body"] for m in got]
        if len(received) >= len(sent):
            break
    try:
        ireland.send_message(QueueUrl=f"{name}-missing", MessageBody="x")
        missing = ""
    except ClientError as exc:
        missing = str(exc.response["Error"]["Code"])
    return {"protocol": ireland.meta.service_model.protocol, "name": name, "arns": arns,
            "urls": urls, "got_url": ireland.get_queue_url(QueueName=name)["QueueUrl"],
            "listed": ireland.list_queues(QueueNamePrefix=name).get("QueueUrls", []),
            "sent": sent, "received": received,
            "other_region_got": [m["Body"] for m in other.get("Messages", [])],
            "missing_bare_name": missing}


def main(argv: list[str]) -> int:
    """Parse the arguments, drive, print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--prefix", required=True)
    args = parser.parse_args(argv)
    print(json.dumps(drive(args.endpoint, args.prefix)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
