"""GIVEN a deployed stage's configuration WHEN it is incomplete (no receipt key, a key
once published, a stream ARN still a placeholder) THEN DMQ refuses to start and says what
to set; locally no key is configured (one is generated), and the deployed keys come from
SSM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from chalicelib.encryption.deployment_keys import console_key, receipt_key
from chalicelib.settings import ConfigurationError, Settings
from infra import deploy

ROOT = Path(__file__).resolve().parents[2]
ON_LAMBDA = {"AWS_LAMBDA_FUNCTION_NAME": "dmq-dev"}
RETIRED_KEY = "dmq-local-development-key"  # published in the source once
ARNS = {
    "DMQ_MESSAGES_STREAM_ARN": "arn:aws:dynamodb:us-east-1:1:table/dmq-messages/stream/x",
    "DMQ_QUEUES_STREAM_ARN": "arn:aws:dynamodb:us-east-1:1:table/dmq-queues/stream/x",
}


def test_locally_no_key_is_configured_by_default() -> None:
    assert Settings.from_env({}).receipt_key is None


def test_on_lambda_a_missing_or_published_key_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="DMQ_RECEIPT_KEY_PARAMETER"):
        Settings.from_env({**ON_LAMBDA, **ARNS})
    with pytest.raises(ConfigurationError, match="published"):
        Settings.from_env({**ON_LAMBDA, **ARNS, "DMQ_RECEIPT_KEY": RETIRED_KEY})
    settings = Settings.from_env({**ON_LAMBDA, **ARNS,
                                  "DMQ_RECEIPT_KEY_PARAMETER": "/dmq/dev/receipt-key"})
    assert settings.receipt_key_parameter == "/dmq/dev/receipt-key"


def test_a_placeholder_is_never_taken_for_a_value() -> None:
    placeholder = {"DMQ_MESSAGES_STREAM_ARN": "set by: python infra/deploy.py --stage dev"}
    with pytest.raises(ConfigurationError, match=r"DMQ_MESSAGES_STREAM_ARN.*infra/deploy.py"):
        Settings.from_env(placeholder)


def test_the_deployed_key_is_generated_into_ssm_not_the_config(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text((ROOT / ".chalice" / "config.json").read_text())
    outputs = {"MessagesStreamArn": ARNS["DMQ_MESSAGES_STREAM_ARN"],
               "QueuesStreamArn": ARNS["DMQ_QUEUES_STREAM_ARN"]}
    with mock_aws():
        ssm = boto3.client("ssm", region_name="us-east-1")
        deploy.update_config(config, "dev", outputs, ssm)
        first = ssm.get_parameter(Name="/dmq/dev/receipt-key", WithDecryption=True)
        deploy.update_config(config, "dev", outputs, ssm)  # a redeploy keeps the key
        again = ssm.get_parameter(Name="/dmq/dev/receipt-key", WithDecryption=True)
        stage = json.loads(config.read_text())["stages"]["dev"]["environment_variables"]
        settings = Settings.from_env({**ON_LAMBDA, **stage})
        resolved = receipt_key(settings, ssm)
        console = ssm.get_parameter(Name="/dmq/dev/console-key", WithDecryption=True)
        resolved_console = console_key(settings, ssm)
    assert first["Parameter"]["Type"] == "SecureString"
    assert len(first["Parameter"]["Value"]) >= 32
    assert again["Parameter"]["Value"] == first["Parameter"]["Value"] == resolved
    assert "DMQ_RECEIPT_KEY" not in stage and "DMQ_CONSOLE_KEY" not in stage
    assert first["Parameter"]["Value"] not in config.read_text()
    assert console["Parameter"]["Value"] == resolved_console != resolved
    assert console["Parameter"]["Value"] not in config.read_text()


def test_the_tracked_config_holds_no_receipt_key() -> None:
    config = json.loads((ROOT / ".chalice" / "config.json").read_text())
    for name, stage in config["stages"].items():
        env = stage.get("environment_variables", {})
        assert "DMQ_RECEIPT_KEY" not in env and "DMQ_CONSOLE_KEY" not in env, name


def test_chalice_package_without_the_stream_arn_fails_clearly(tmp_path: Path) -> None:
    chalice = Path(sys.executable).parent / "chalice"
    result = subprocess.run([str(chalice), "package", "--stage", "dev", str(tmp_path / "out")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0
    assert "DMQ_MESSAGES_STREAM_ARN" in result.stderr + result.stdout
    assert "infra/deploy.py --stage dev" in result.stderr + result.stdout
    assert not (tmp_path / "out").exists()
