"""Create DMQ's tables and bucket on LocalStack (or any DynamoDB- and S3-compatible endpoint).

    python localstack/deploy.py --endpoint http://localhost:4566

The resources come from infra/dmq.template.json, the same definition that
`make run`, the tests and the AWS deployment use. The script then prints the
environment that points DMQ at the endpoint, for example:

    DMQ_DYNAMODB_ENDPOINT=http://localhost:4566 DMQ_S3_ENDPOINT=http://localhost:4566 make run
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra import provision


def main(argv: list[str] | None = None) -> int:
    """Provision the resources and print the matching DMQ environment."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--endpoint", default=os.environ.get("LOCALSTACK_ENDPOINT",
                                                             "http://localhost:4566"))
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    session = boto3.session.Session(region_name=args.region)
    dynamodb = session.client("dynamodb", endpoint_url=args.endpoint)
    s3 = session.client("s3", endpoint_url=args.endpoint)
    streams = provision.create_all(dynamodb, s3, region=args.region)
    for table, arn in sorted(streams.items()):
        print(f"table {table}: stream {arn or '(none)'}")
    messages_arn = streams.get("dmq-messages", "")
    print("Run DMQ against it with:")
    print(f"  export DMQ_DYNAMODB_ENDPOINT={args.endpoint} DMQ_S3_ENDPOINT={args.endpoint}")
    print(f"  export DMQ_MESSAGES_STREAM_ARN={messages_arn}")
    print("  make run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
