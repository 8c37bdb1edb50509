"""GIVEN the CloudFormation templates in infra/ THEN cfn-lint finds nothing in any of
them, and the monitoring stack's dashboard and alarms read only metrics DMQ prints:
per-queue counts and gauges with the dimensions Account, Queue and service, and the
replication lag by TargetRegion."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chalicelib import observability

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((ROOT / "infra").glob("*.template.json"))
MONITORING = ROOT / "infra" / "monitoring.template.json"
CFN_LINT = Path(sys.executable).with_name("cfn-lint")

# What DMQ prints: per-queue counts (each request), per-queue gauges (the minute's
# emit_queue_gauges), the deployment's request counts and each region's lag.
QUEUE_METRICS = {*observability.QUEUE_METRICS, "ApproximateNumberOfMessagesVisible",
                 "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed",
                 "ApproximateAgeOfOldestMessage", "DeadLetterQueueDepth"}
LAG_METRICS = {"ReplicationLagMs", "QueueReplicationLagMs"}
SERVICE_METRICS = {"Requests", "ServerErrors"}
QUEUE_SCHEMA = 'SCHEMA("DMQ", Account, Queue, service)'
LAG_SCHEMA = 'SCHEMA("DMQ", TargetRegion, service)'
QUEUE_LAG_SCHEMA = 'SCHEMA("DMQ", Account, Queue, TargetRegion, service)'
SCHEMAS = {"ReplicationLagMs": LAG_SCHEMA, "QueueReplicationLagMs": QUEUE_LAG_SCHEMA}


def _lint(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CFN_LINT), *map(str, paths)], capture_output=True, text=True,
                          timeout=300, check=False)


def test_cfn_lint_is_clean_on_every_template() -> None:
    assert {p.name for p in TEMPLATES} >= {"dmq.template.json", "audit.template.json",
                                           "monitoring.template.json"}
    result = _lint(*TEMPLATES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cfn_lint_would_see_a_broken_alarm(tmp_path: Path) -> None:
    # GIVEN the monitoring template with an operator CloudWatch does not have
    template = json.loads(MONITORING.read_text())
    alarm = template["Resources"]["OldestMessageAgeAlarm"]["Properties"]
    alarm["ComparisonOperator"] = "GreaterThanOrEqual"
    broken = tmp_path / "broken.template.json"
    broken.write_text(json.dumps(template))
    # THEN the lint test above could fail: cfn-lint reports it
    result = _lint(broken)
    assert result.returncode != 0
    assert "GreaterThanOrEqual" in result.stdout


def _resources(kind: str) -> dict[str, dict[str, Any]]:
    template = json.loads(MONITORING.read_text())
    return {name: r["Properties"] for name, r in template["Resources"].items()
            if r["Type"] == kind}


def _insights_metric(query: str) -> tuple[str, str]:
    found = re.fullmatch(r'SELECT (?:MAX|SUM)\((\w+)\) FROM (SCHEMA\("DMQ", [\w, ]+\))'
                         r'(?: GROUP BY [\w, ]+ ORDER BY (?:MAX|SUM)\(\) DESC LIMIT \d+)?', query)
    assert found, query
    return found.group(1), found.group(2)


def test_each_alarm_watches_what_the_issue_names() -> None:
    alarms = _resources("AWS::CloudWatch::Alarm")
    watched = {}
    for name, alarm in alarms.items():
        for metric in alarm["Metrics"]:
            if "Expression" in metric and metric["Expression"].startswith("SELECT"):
                watched[name] = _insights_metric(metric["Expression"])
            elif "MetricStat" in metric:
                stat = metric["MetricStat"]["Metric"]
                assert stat["Namespace"] == "DMQ"
                assert stat["MetricName"] in SERVICE_METRICS
                watched.setdefault(name, (stat["MetricName"], "service"))
    assert watched == {
        "OldestMessageAgeAlarm": ("ApproximateAgeOfOldestMessage", QUEUE_SCHEMA),
        "DeadLetterQueueDepthAlarm": ("DeadLetterQueueDepth", QUEUE_SCHEMA),
        "ServerErrorRateAlarm": ("Requests", "service"),
        "ReplicationLagAlarm": ("ReplicationLagMs", LAG_SCHEMA),
    }
    rate = [m for m in alarms["ServerErrorRateAlarm"]["Metrics"] if m.get("ReturnData")]
    assert [m["Expression"] for m in rate] == [
        "100 * IF(requests > 0, FILL(errors, 0) / requests, 0)"]
    assert all(a["TreatMissingData"] == "notBreaching" for a in alarms.values())


@pytest.fixture
def dashboard() -> dict[str, Any]:
    (props,) = _resources("AWS::CloudWatch::Dashboard").values()
    return dict(props["DashboardBody"]["Fn::ToJsonString"])


def test_the_dashboard_graphs_every_metric_dmq_prints(dashboard: dict[str, Any]) -> None:
    graphed = set()
    for widget in dashboard["widgets"]:
        for line in widget["properties"].get("metrics", []):
            options = line[-1] if isinstance(line[-1], dict) else {}
            query = options.get("expression", "")
            if query.startswith("SELECT"):
                metric, schema = _insights_metric(query)
                assert schema == SCHEMAS.get(metric, QUEUE_SCHEMA)
                graphed.add(metric)
            elif line[0] == "DMQ":
                graphed.add(line[1])
    assert graphed == QUEUE_METRICS | SERVICE_METRICS | LAG_METRICS


def test_the_dashboard_shows_every_alarm(dashboard: dict[str, Any]) -> None:
    (panel,) = [w for w in dashboard["widgets"] if w["type"] == "alarm"]
    shown = {ref["Fn::GetAtt"][0] for ref in panel["properties"]["alarms"]}
    assert shown == set(_resources("AWS::CloudWatch::Alarm"))


class _RecordingCloudFormation:
    """Takes create_stack calls and answers each stack's outputs (moto's CloudFormation
    has no CloudWatch alarms or dashboards)."""

    def __init__(self) -> None:
        self.created: dict[str, dict[str, Any]] = {}

    def create_stack(self, **request: Any) -> None:
        self.created[request["StackName"]] = request

    def get_waiter(self, name: str) -> Any:
        assert name == "stack_create_complete"
        return type("Waiter", (), {"wait": lambda self, **kwargs: None})()

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        outputs = {"MessagesStreamArn": "arn:m", "QueuesStreamArn": "arn:q",
                   "DashboardName": "dmq", "AlarmNames": "a,b"}
        return {"Stacks": [{"Outputs": [{"OutputKey": k, "OutputValue": v}
                                        for k, v in outputs.items()]}]}


def test_deploy_with_monitoring_creates_the_monitoring_stack(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from infra import deploy

    fake = _RecordingCloudFormation()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"stages": {}}))
    monkeypatch.setattr(deploy, "CONFIG", config)
    monkeypatch.setattr(deploy, "ensure_receipt_key", lambda ssm, stage: "/dmq/dev/receipt-key")
    monkeypatch.setattr(deploy, "ensure_console_key", lambda ssm, stage: "/dmq/dev/console-key")
    monkeypatch.setattr(deploy, "ensure_sse_key", lambda kms: deploy.SSE_ALIAS)
    monkeypatch.setattr(deploy.boto3.session.Session, "client",
                        lambda self, name, **kwargs: fake)
    assert deploy.main(["--stage", "dev", "--region", "us-east-1", "--monitoring",
                        "--alarm-topic", "arn:aws:sns:us-east-1:123456789012:ops"]) == 0
    request = fake.created["dmq-dev-monitoring"]
    assert json.loads(request["TemplateBody"]) == json.loads(MONITORING.read_text())
    assert "CAPABILITY_AUTO_EXPAND" in request["Capabilities"]
    assert request["Parameters"] == [{"ParameterKey": "AlarmTopicArn",
                                      "ParameterValue": "arn:aws:sns:us-east-1:123456789012:ops"}]
    assert "monitoring: dashboard dmq, alarms a,b" in capsys.readouterr().out
