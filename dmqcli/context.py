"""What every command needs: where DMQ is, the AWS session and the credentials that sign,
the SQS client, the admin API, the output, and how a queue given on the command line
becomes a queue URL."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from dmqcli.admin_api import AdminApi, quote
from dmqcli.credentials import Signer, credential_error, find_signer, is_credential_error
from dmqcli.discovery import Target
from dmqcli.errors import USAGE, CliError
from dmqcli.output import Output

if TYPE_CHECKING:
    import boto3
    import botocore.session

DEFAULT_REGION = "us-east-1"
# Providers that ask the network for credentials: no local server knows their keys, and
# on a machine outside AWS they only add a timeout to every run without credentials.
NETWORK_PROVIDERS = ("iam-role", "container-role")


@dataclass(frozen=True)
class QueueRef:
    """A queue found from what the user typed."""

    url: str
    account: str
    name: str

    @property
    def admin_path(self) -> str:
        """The queue's path in the admin API."""
        return f"/admin/queues/{quote(self.account)}/{quote(self.name)}"


def _from_url(url: str) -> QueueRef:
    parts = [p for p in urllib.parse.urlparse(url).path.split("/") if p]
    if len(parts) < 2:
        raise CliError(f"{url!r} is not a queue URL (…/<account>/<name>)", USAGE)
    return QueueRef(url=url, account=parts[-2], name=parts[-1])


def _owner_and_name(text: str) -> tuple[str | None, str]:
    """The account (when given) and name of `arn:aws:sqs:...`, `<account>/<name>` or a name."""
    owner: str | None = None
    name = text
    if text.startswith("arn:"):
        fields = text.split(":")
        if len(fields) != 6 or fields[2] != "sqs":
            raise CliError(f"{text!r} is not an SQS queue ARN", USAGE)
        owner, name = fields[4], fields[5]
    elif "/" in text:
        owner, _, name = text.partition("/")
    if not name or owner == "":
        raise CliError(f"{text!r} names no queue", USAGE)
    return owner, name


class Context:
    """The settings of one run of `dmq`, and the clients built from them on first use."""

    def __init__(self, target: Target | str, profile: str | None, region: str | None,
                 as_json: bool) -> None:
        self.target = target if isinstance(target, Target) else Target(target)
        self.profile = profile
        self._region = region
        self.output = Output(as_json)

    @property
    def endpoint(self) -> str:
        """The endpoint's URL."""
        return self.target.url

    @cached_property
    def _sessions(self) -> tuple[boto3.session.Session, botocore.session.Session]:
        import boto3  # loaded when a command runs: usage errors and --help stay quick
        import botocore.session

        core = botocore.session.Session()
        session = boto3.session.Session(botocore_session=core, profile_name=self.profile)
        if self.target.loopback:
            resolver = core.get_component("credential_provider")
            for name in NETWORK_PROVIDERS:
                resolver.remove(name)
        return session, core

    @property
    def session(self) -> boto3.session.Session:
        """The AWS session: the AWS CLI's credential chain, with `--profile`."""
        return self._sessions[0]

    @property
    def botocore_session(self) -> botocore.session.Session:
        """The botocore session under `session` (its config and credential chain)."""
        return self._sessions[1]

    @cached_property
    def signer(self) -> Signer:
        """The credentials that sign (placeholders for a local server that needs none)."""
        return find_signer(self.botocore_session, self.target)

    @property
    def region(self) -> str:
        """`--region`, else the session's (AWS_DEFAULT_REGION, the profile), else us-east-1."""
        return self._region or self.session.region_name or DEFAULT_REGION

    @cached_property
    def sqs(self) -> Any:
        """An SQS client for the endpoint."""
        from botocore.config import Config

        # Long polls wait up to 20 s, so reads may take a little longer; one retry at most.
        config = Config(connect_timeout=5, read_timeout=30,
                        retries={"mode": "standard", "total_max_attempts": 2})
        signer = self.signer
        return self.session.client(
            "sqs", endpoint_url=self.endpoint, region_name=self.region, config=config,
            verify=self.target.ca, aws_access_key_id=signer.access_key,
            aws_secret_access_key=signer.secret_key, aws_session_token=signer.token)

    @cached_property
    def admin(self) -> AdminApi:
        """The admin API of the endpoint, signed with the same credentials."""
        return AdminApi(self.endpoint, self.region, self.signer.credentials(),
                        ca=self.target.ca, connect_hint=self.target.connect_hint())

    def explain(self, error: CliError) -> CliError:
        """A failure as the user should read it: a refused credential names the one needed."""
        if not is_credential_error(error):
            return error
        return credential_error(error, self.signer, self.target, self.botocore_session)

    def queue(self, text: str) -> QueueRef:
        """A queue from its URL, its ARN, `<account>/<name>` or its name (of the caller)."""
        if text.startswith(("http://", "https://")):
            return _from_url(text)
        owner, name = _owner_and_name(text)
        params = {"QueueName": name, **({"QueueOwnerAWSAccountId": owner} if owner else {})}
        return _from_url(self.sqs.get_queue_url(**params)["QueueUrl"])

    def admin_path(self, text: str) -> str:
        """A queue's path in the admin API. Only a bare name needs SQS (GetQueueUrl, for the
        caller's account): the admin routes reach any account's queue."""
        if text.startswith(("http://", "https://")):
            return _from_url(text).admin_path
        owner, name = _owner_and_name(text)
        if owner is None:
            return self.queue(text).admin_path
        return QueueRef(url="", account=owner, name=name).admin_path

    def queue_arn(self, text: str) -> str:
        """A queue's ARN: as given, else as the service reports it."""
        if text.startswith("arn:"):
            _owner_and_name(text)
            return text
        ref = self.queue(text)
        attributes = self.sqs.get_queue_attributes(QueueUrl=ref.url, AttributeNames=["QueueArn"])
        return str(attributes["Attributes"]["QueueArn"])
