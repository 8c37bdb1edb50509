"""GIVEN the CloudFormation template WHEN infra/deploy.py deploys it (on moto)
THEN the tables and bucket exist and the Chalice stage gets the stream ARN and a key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import boto3
from moto import mock_aws

from infra import deploy

ROOT = Path(__file__).resolve().parents[2]


def test_deploy_creates_the_stack_and_configures_the_stage(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    shutil.copy(ROOT / ".chalice" / "config.json", config)
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        outputs = deploy.deploy_stack(cloudformation, "dmq-test")
        again = deploy.deploy_stack(cloudformation, "dmq-test")
        tables = boto3.client("dynamodb", region_name="us-east-1").list_tables()["TableNames"]
        buckets = boto3.client("s3", region_name="us-east-1").list_buckets()["Buckets"]
        deploy.update_config(config, "dev", outputs, boto3.client("ssm", region_name="us-east-1"))
    assert set(tables) >= {"dmq-queues", "dmq-messages"}
    assert [b["Name"] for b in buckets] == ["dmq-bodies"]
    assert outputs["MessagesStreamArn"].startswith("arn:aws:dynamodb:us-east-1:")
    assert again == outputs
    env = json.loads(config.read_text())["stages"]["dev"]["environment_variables"]
    assert env["DMQ_MESSAGES_STREAM_ARN"] == outputs["MessagesStreamArn"]
    assert env["DMQ_QUEUES_STREAM_ARN"] == outputs["QueuesStreamArn"]
    assert env["DMQ_RECEIPT_KEY_PARAMETER"] == "/dmq/dev/receipt-key"


def test_a_redeploy_keeps_the_visibility_index_a_table_was_made_with() -> None:
    # GIVEN a stack deployed by an earlier version, whose visibility index projected only
    # expires_ms and rc
    template = json.loads((ROOT / "infra" / "dmq.template.json").read_text())
    table = template["Resources"]["MessagesTable"]["Properties"]
    current = json.loads(json.dumps(table["LocalSecondaryIndexes"]))
    table["LocalSecondaryIndexes"][0]["Projection"] = {
        "ProjectionType": "INCLUDE", "NonKeyAttributes": ["expires_ms", "rc"]}
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        deploy.deploy_stack(cloudformation, "dmq-old", json.dumps(template))
        # WHEN this version deploys over it
        deploy.deploy_stack(cloudformation, "dmq-old")
        body = cloudformation.get_template(StackName="dmq-old")["TemplateBody"]
    # THEN the update keeps the deployed index (changing it would replace the table)
    deployed = body if isinstance(body, dict) else json.loads(body)
    kept = deployed["Resources"]["MessagesTable"]["Properties"]["LocalSecondaryIndexes"]
    assert kept[0]["Projection"]["NonKeyAttributes"] == ["expires_ms", "rc"]
    assert kept != current
    # AND a template whose indexes are the deployed ones goes up as it is
    same = json.dumps(template)
    assert deploy.keep_deployed_indexes(_Deployed(template), "s", same) is same


class _Deployed:
    """A CloudFormation client whose stack holds `template`."""

    def __init__(self, template: dict[str, object]) -> None:
        self.template = template

    def get_template(self, **kwargs: object) -> dict[str, object]:
        return {"TemplateBody": json.dumps(self.template)}
