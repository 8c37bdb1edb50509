"""Deploy DMQ's storage stack and point the Chalice stage at it.

    python infra/deploy.py --stage dev     # then: chalice deploy --stage dev

It creates or updates the CloudFormation stack from infra/dmq.template.json, reads
the stream ARNs from the stack outputs and writes them into .chalice/config.json for
that stage. The receipt signing key and the console's form-token key never go into that
(tracked) file: fresh random ones are stored once as the SSM SecureStrings
/dmq/<stage>/receipt-key and /dmq/<stage>/console-key, kept on redeploys, and the stage's
environment names them (DMQ_RECEIPT_KEY_PARAMETER, DMQ_CONSOLE_KEY_PARAMETER).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "infra" / "dmq.template.json"
CONFIG = ROOT / ".chalice" / "config.json"
MONITORING = ROOT / "infra" / "monitoring.template.json"
# AUTO_EXPAND: the monitoring template writes its dashboard with AWS::LanguageExtensions.
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]


def deploy_stack(
    cloudformation: Any,
    stack: str,
    body: str | None = None,
    parameters: dict[str, str] | None = None,
) -> dict[str, str]:
    """Create or update the stack (by default from the messages template), wait for it,
    and return its outputs."""
    body = TEMPLATE.read_text() if body is None else body
    params = [{"ParameterKey": k, "ParameterValue": v} for k, v in (parameters or {}).items()]
    try:
        cloudformation.create_stack(
            StackName=stack, TemplateBody=body, Parameters=params, Capabilities=CAPABILITIES
        )
        waiter = "stack_create_complete"
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "AlreadyExistsException":
            raise
        body = keep_deployed_indexes(cloudformation, stack, body)
        try:
            cloudformation.update_stack(
                StackName=stack, TemplateBody=body, Parameters=params, Capabilities=CAPABILITIES
            )
        except ClientError as update_exc:
            if "No updates" not in str(update_exc):
                raise
        waiter = "stack_update_complete"
    cloudformation.get_waiter(waiter).wait(StackName=stack)
    described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def keep_deployed_indexes(cloudformation: Any, stack: str, body: str) -> str:
    """The template with each deployed table's local secondary indexes as they were
    deployed. An index's projection cannot change on an existing table: CloudFormation
    would replace the table, which it refuses for a named one, so the update would fail.
    DMQ reads a messages table whose visibility index has an earlier projection (it reads
    the claimed messages back), so the table keeps it."""
    deployed = cloudformation.get_template(StackName=stack,
                                           TemplateStage="Original")["TemplateBody"]
    old = json.loads(deployed) if isinstance(deployed, str) else deployed
    new = json.loads(body)
    kept = False
    for name, resource in new.get("Resources", {}).items():
        before = old.get("Resources", {}).get(name, {})
        if resource.get("Type") != "AWS::DynamoDB::Table" or before.get("Type") != \
                resource["Type"]:
            continue
        indexes = before.get("Properties", {}).get("LocalSecondaryIndexes")
        if indexes is not None and indexes != resource["Properties"].get(
                "LocalSecondaryIndexes"):
            resource["Properties"]["LocalSecondaryIndexes"] = indexes
            kept = True
    return json.dumps(new, indent=2) if kept else body


def ensure_receipt_key(ssm: Any, stage: str) -> str:
    """Store a fresh receipt key as an SSM SecureString unless the stage has one;
    return the parameter's name."""
    return _ensure_secret(ssm, f"/dmq/{stage}/receipt-key", "DMQ receipt handle signing key")


def ensure_console_key(ssm: Any, stage: str) -> str:
    """Store a fresh key for the web console's form tokens unless the stage has one;
    return the parameter's name."""
    return _ensure_secret(ssm, f"/dmq/{stage}/console-key", "DMQ console form-token key")


def _ensure_secret(ssm: Any, name: str, description: str) -> str:
    try:
        ssm.put_parameter(Name=name, Value=secrets.token_urlsafe(32), Type="SecureString",
                          Description=description, Overwrite=False)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ParameterAlreadyExists":
            raise
    return name


SSE_ALIAS = "alias/dmq-sse"


def ensure_sse_key(kms: Any) -> str:
    """The KMS key SSE-SQS queues use (DMQ's managed key), made once under its alias;
    return the alias."""
    try:
        kms.describe_key(KeyId=SSE_ALIAS)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "NotFoundException":
            raise
        key = kms.create_key(Description="DMQ managed key for SSE-SQS queues (data keys)")
        kms.create_alias(AliasName=SSE_ALIAS, TargetKeyId=key["KeyMetadata"]["KeyId"])
    return SSE_ALIAS


def update_config(
    config_path: Path, stage: str, outputs: dict[str, str], ssm: Any, kms: Any | None = None,
) -> dict[str, Any]:
    """Write the stream ARNs and the names of the receipt and console keys' parameters
    into the stage's environment (the keys themselves stay in SSM)."""
    config = json.loads(config_path.read_text())
    env = config["stages"].setdefault(stage, {}).setdefault("environment_variables", {})
    env["DMQ_MESSAGES_STREAM_ARN"] = outputs["MessagesStreamArn"]
    env["DMQ_QUEUES_STREAM_ARN"] = outputs["QueuesStreamArn"]
    env.pop("DMQ_RECEIPT_KEY", None)
    env.pop("DMQ_CONSOLE_KEY", None)
    env["DMQ_RECEIPT_KEY_PARAMETER"] = ensure_receipt_key(ssm, stage)
    env["DMQ_CONSOLE_KEY_PARAMETER"] = ensure_console_key(ssm, stage)
    if kms is not None:  # encryption at rest: data keys from KMS, SSE-SQS under DMQ's key
        env["DMQ_SSE_KEYS"] = "kms"
        env["DMQ_SSE_MANAGED_KEY_ID"] = ensure_sse_key(kms)
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    return dict(config)


def main(argv: list[str] | None = None) -> int:
    """Deploy the stack for a stage and update .chalice/config.json."""
    parser = argparse.ArgumentParser(description="Deploy DMQ's storage stack.")
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--stack", default=None, help="stack name (default dmq-<stage>)")
    parser.add_argument("--region", default=None)
    parser.add_argument("--endpoint", default=None, help="CloudFormation endpoint override")
    parser.add_argument("--monitoring", action="store_true",
                        help="also deploy the dashboard and alarms (stack <stack>-monitoring)")
    parser.add_argument("--alarm-topic", default="", help="SNS topic ARN the alarms notify")
    args = parser.parse_args(argv)
    session = boto3.session.Session(region_name=args.region)
    cloudformation = session.client("cloudformation", endpoint_url=args.endpoint)
    stack = args.stack or f"dmq-{args.stage}"
    outputs = deploy_stack(cloudformation, stack)
    update_config(CONFIG, args.stage, outputs, session.client("ssm"), session.client("kms"))
    print(f"stack outputs: {json.dumps(outputs)}")
    if args.monitoring:
        watched = deploy_stack(cloudformation, f"{stack}-monitoring", MONITORING.read_text(),
                               {"AlarmTopicArn": args.alarm_topic})
        print(f"monitoring: dashboard {watched['DashboardName']}, alarms {watched['AlarmNames']}")
    print(f"now run: chalice deploy --stage {args.stage}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
