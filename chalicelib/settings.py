"""One typed settings object, read from the environment once per container."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from chalicelib.clusters.autoscale_rules import ScalePolicy
from chalicelib.settings_autoscale import autoscale_policy
from chalicelib.settings_checks import (
    ConfigurationError,
    check_auth,
    check_deployed,
    runs_on_lambda,
)
from chalicelib.settings_clusters import cluster_settings
from chalicelib.settings_guard import GuardSettings
from chalicelib.settings_limits import limit_settings
from chalicelib.settings_regions import regional_settings
from chalicelib.settings_security import security_settings
from chalicelib.settings_serving import serving_settings
from chalicelib.settings_storage import storage_settings

__all__ = ["ConfigurationError", "Settings", "get_settings"]


@dataclass(frozen=True)
class Settings:
    """Everything DMQ reads from its environment."""

    account_id: str = "000000000000"
    region: str = "us-east-1"
    dynamodb_endpoint: str | None = None
    s3_endpoint: str | None = None
    # Large bodies in a local folder instead of S3 (local runs without an S3 endpoint).
    bodies_dir: str | None = None
    # Credentials for the DynamoDB endpoint; None: the usual chain, or dummy ones for an
    # endpoint when the chain finds none (local stores accept any).
    store_credentials: tuple[str, str] | None = None
    queues_table: str = "dmq-queues"
    messages_table: str = "dmq-messages"
    bodies_bucket: str = "dmq-bodies"
    # The key that signs receipt handles: DMQ_RECEIPT_KEY, else (AWS) the SSM SecureString
    # DMQ_RECEIPT_KEY_PARAMETER names (infra/deploy.py), else a random key made once in
    # the data folder (`keys/receipt.key`), else one per process
    # (chalicelib/encryption/deployment_keys.py).
    receipt_key: str | None = None
    receipt_key_parameter: str | None = None
    # The web console's form-token key, found the same way (`keys/console.key`); never
    # derived from the receipt key.
    console_key: str | None = None
    console_key_parameter: str | None = None
    # Running on Lambda behind API Gateway, whose own X-Forwarded-Proto is trusted.
    on_lambda: bool = False
    # Addresses or CIDRs of reverse proxies whose X-Forwarded-* and Forwarded headers are
    # believed (DMQ_TRUSTED_PROXIES); from anyone else they are ignored.
    trusted_proxies: tuple[str, ...] = ()
    # A bearer token that may read `GET /metrics` (DMQ_METRICS_TOKEN).
    metrics_token: str | None = None
    messages_stream_arn: str = (
        "arn:aws:dynamodb:us-east-1:000000000000:table/dmq-messages/stream/local"
    )
    inline_body_limit: int = 300_000
    long_poll_interval_ms: int = 1000
    metadata_cache_seconds: float = 5.0
    clusters: tuple[str, ...] = ("default",)
    # Clusters whose messages table is in a store of its own: (cluster, endpoint) pairs.
    cluster_endpoints: tuple[tuple[str, str], ...] = ()
    # The shard autoscaler (docs/autoscaling.md).
    autoscale: ScalePolicy = field(default_factory=ScalePolicy)
    # Each cluster's bulkhead and circuit breaker (docs/isolation.md).
    guard: GuardSettings = field(default_factory=GuardSettings)
    control_table: str = "dmq-control"
    cluster_capacity: float = 1000.0
    regions: tuple[str, ...] = ()
    hosted_regions: tuple[str, ...] = ()
    failover_after_s: float = 180.0
    queues_stream_arn: str = (
        "arn:aws:dynamodb:us-east-1:000000000000:table/dmq-queues/stream/local"
    )
    # The audit archive: a folder (local runs) or an S3 bucket (AWS); neither turns it off.
    data_dir: str | None = None
    archive_bucket: str | None = None
    usage_flush_s: float = 60.0
    export_interval_s: float = 60.0
    # The store budget: each DynamoDB or S3 call gives up after `store_attempts` tries of
    # at most the connect plus the read timeout each, so a request meeting a frozen store
    # ends with ServiceUnavailable (about 5 s) well before API Gateway's 29 s, even at
    # the end of a 20 s long poll.
    store_connect_timeout_s: float = 1.0
    store_read_timeout_s: float = 2.0
    store_attempts: int = 2
    # "lean": item calls to a plain-HTTP DynamoDB endpoint skip botocore's request and
    # answer machinery (chalicelib/dynamo_client.py); "botocore": every call is botocore's.
    store_client: str = "lean"

    # Logs: "json" (Powertools, the default on Lambda) or "text"; metrics: "emf" (the
    # default on Lambda) or "off".
    log_format: str = "text"
    log_level: str = "INFO"
    metrics: str = "off"
    # The local HTTP server: how long a kept-alive connection may wait for its next
    # request, how long a started request may take to arrive in full, its largest body.
    http_idle_timeout_s: float = 60.0
    http_request_timeout_s: float = 10.0
    http_max_body_bytes: int = 8 * 1024 * 1024
    # ... and how many connections it keeps open at once (idle ones are closed first).
    http_max_connections: int = 4096
    # How long one run of the move-task handler keeps stepping the running tasks (0: one
    # pass). On Lambda it runs once a minute, within the 30 s timeout; locally every second.
    move_task_run_s: float = 0.0
    # How long one run of the handler that removes purged and deleted queues' messages
    # keeps at it (at least one step per pending purge). On Lambda it runs once a minute,
    # within the 30 s timeout; locally every second.
    purge_run_s: float = 2.0
    # Fair queues: a standard queue's noisy tenants wait behind the others (DMQ_FAIR_QUEUES,
    # "on" or "off"; docs/fair-queues.md).
    fair_queues: bool = True
    # Authentication (docs/security.md): "open" (any signature; a 12-digit access key id
    # acts as that account, any other as account_id) or "required" (SigV4 verified against
    # the access keys in the control table). A deployed stage requires it by default.
    auth: str = "open"
    # Root credentials of account_id, seeded into the key store when auth is required.
    root_access_key_id: str | None = None
    root_secret_access_key: str | None = None
    # DeleteQueue and PurgeQueue only for admin principals (DMQ_ADMIN_DELETE_ONLY=1).
    admin_delete_only: bool = False
    # Secrets of access keys: encrypted with this KMS key (AWS), else AES-GCM with a key
    # file (DMQ_KEYS_KEY_FILE, default <data_dir>/access-keys.key).
    keys_kms_key_id: str | None = None
    keys_key_file: str | None = None
    # The admin API is checked by API Gateway's IAM authorizer (a deployed stage), else
    # by DMQ itself (an admin access key, SigV4 for execute-api).
    admin_iam_gateway: bool = False
    # Throttling (docs/throttling.md): requests per second per account and per queue, and
    # the bucket sizes (0: one second's worth). A rate of 0 (the default) turns it off.
    throttle_account_rps: float = 0.0
    throttle_account_burst: int = 0
    throttle_queue_rps: float = 0.0
    throttle_queue_burst: int = 0
    # Fair share (docs/throttling.md): requests of one account a process serves at once
    # (0: no cap; 1 by default with DMQ_AUTH=required), and the queues an account may
    # have in a region (0: no quota).
    account_max_concurrency: int = 0
    # Long polls of one account waiting at once in a process (0: no cap).
    account_max_waits: int = 0
    account_max_queues: int = 100_000
    # Push delivery (docs/push.md): how long one run of the push schedule handler delivers
    # (0: it does not; locally a background loop delivers all the time), and how many
    # delivery workers a process runs per subscription (MaximumConcurrency caps them).
    push_run_s: float = 0.0
    push_workers: int = 4
    # Networks push endpoints may be in besides public addresses (CIDRs; docs/push.md).
    push_allowed_networks: tuple[str, ...] = ()
    # Request deduplication: a retried send to a standard queue (same amz-sdk-invocation-id)
    # gets the first response back (DMQ_REQUEST_DEDUP, "on" or "off"; docs/request-dedup.md).
    request_dedup: bool = True
    # Encryption at rest (docs/encryption.md): where key-encryption keys live, "local" (a
    # key file, by default `keys/sse.key` under the data folder; in memory without one) or
    # "kms" (AWS KMS, the default on Lambda); the key id SSE-SQS queues use; and a KMS
    # endpoint (tests, LocalStack).
    sse_keys: str = "local"
    sse_key_file: str | None = None
    sse_managed_key_id: str = "dmq/sse-sqs"
    kms_endpoint: str | None = None
    # Regions and queue URLs (chalicelib/settings_regions.py): serve any region a client
    # signs for (None: unset, the local server turns it on), the queue URLs' fixed form.
    any_region: bool | None = None
    public_url: str | None = None

    @property
    def sse_key_path(self) -> str | None:
        """The local master key file: the one named, else one under the data folder."""
        if self.sse_key_file:
            return self.sse_key_file
        return os.path.join(self.data_dir, "keys", "sse.key") if self.data_dir else None

    @property
    def receipt_key_path(self) -> str | None:
        """Where a generated receipt key is kept: under the data folder."""
        return os.path.join(self.data_dir, "keys", "receipt.key") if self.data_dir else None

    @property
    def console_key_path(self) -> str | None:
        """Where a generated console key is kept: under the data folder."""
        return os.path.join(self.data_dir, "keys", "console.key") if self.data_dir else None

    @property
    def store_budget_s(self) -> float:
        """The longest one store call can take before it fails (backoff included)."""
        tries = self.store_attempts
        # botocore's standard mode backs off at most 2^(n-1) s before retry n.
        backoff = sum(min(2.0 ** n, 20.0) for n in range(tries - 1))
        return tries * (self.store_connect_timeout_s + self.store_read_timeout_s) + backoff

    @property
    def all_regions(self) -> tuple[str, ...]:
        """Every region of the deployment, this one first."""
        return tuple(dict.fromkeys([self.region, *self.regions]))

    @property
    def local_regions(self) -> tuple[str, ...]:
        """The regions this process serves and runs back-end work for."""
        return self.hosted_regions or (self.region,)

    def cluster_table(self, cluster: str) -> str:
        """The messages table of a cluster: the default cluster keeps the plain name."""
        return self.messages_table if cluster == "default" else f"{self.messages_table}-{cluster}"

    def cluster_endpoint(self, cluster: str) -> str | None:
        """A cluster's own DynamoDB endpoint (DMQ_CLUSTER_ENDPOINTS); None: the main one."""
        return dict(self.cluster_endpoints).get(cluster)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build the settings from environment variables (DMQ_*), each group of them read
        by its settings_* module."""
        env = os.environ if env is None else env
        check_deployed(env)
        check_auth(env)
        base = cls()
        region = env.get("DMQ_REGION", env.get("AWS_DEFAULT_REGION", base.region))
        on_lambda = runs_on_lambda(env)
        try:
            regional = {**regional_settings(env, on_lambda), **cluster_settings(env),
                        "autoscale": autoscale_policy(env), "guard": GuardSettings.from_env(env)}
            storage = storage_settings(env, base, region)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from exc
        return cls(
            **regional,
            account_id=env.get("DMQ_ACCOUNT_ID", base.account_id),
            region=region,
            regions=_names(env.get("DMQ_REGIONS", ""), (region,)),
            hosted_regions=_names(env.get("DMQ_HOSTED_REGIONS", ""), (region,)),
            failover_after_s=float(env.get("DMQ_FAILOVER_AFTER_S", base.failover_after_s)),
            on_lambda=on_lambda,
            **storage,
            **security_settings(env, base, on_lambda),
            **serving_settings(env, base, on_lambda),
            **limit_settings(env),
        )


def _names(text: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list; the defaults always come first."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    return tuple(dict.fromkeys([*default, *names]))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The container's settings, read once."""
    return Settings.from_env()
