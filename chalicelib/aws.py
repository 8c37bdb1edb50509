"""AWS clients, created lazily once per container and injected where they are used."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from chalicelib.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_s3 import S3Client

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=5,
    read_timeout=10,
    max_pool_connections=64,
)


DUMMY_CREDENTIALS = ("dmq", "dmq")


class Clients:
    """Lazily built boto3 clients for one region and its endpoints."""

    def __init__(self, settings: Settings, region: str | None = None) -> None:
        self._settings = settings
        self.region = region or settings.region
        self._lock = threading.Lock()
        self._cache: dict[str, Any] = {}
        self._store_credentials: tuple[tuple[str, str] | None] | None = None

    def store_credentials(self) -> tuple[str, str] | None:
        """The DynamoDB endpoint's credentials: the configured ones; dummy ones for an
        endpoint when the usual chain finds none (local stores accept any); else None,
        the usual chain."""
        if self._store_credentials is None:
            self._store_credentials = (self._pick_credentials(self._settings.dynamodb_endpoint),)
        return self._store_credentials[0]

    def _pick_credentials(self, endpoint: str | None) -> tuple[str, str] | None:
        if self._settings.store_credentials is not None:
            return self._settings.store_credentials
        if endpoint and boto3.session.Session().get_credentials() is None:
            return DUMMY_CREDENTIALS
        return None

    def _client(self, service: str, endpoint: str | None,
                credentials: tuple[str, str] | None = None) -> Any:
        with self._lock:
            if service not in self._cache:
                key, secret = credentials or (None, None)
                self._cache[service] = boto3.session.Session().client(
                    service,  # type: ignore[call-overload]
                    region_name=self.region,
                    endpoint_url=endpoint,
                    config=_CONFIG,
                    aws_access_key_id=key,
                    aws_secret_access_key=secret,
                )
            return self._cache[service]

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The DynamoDB client."""
        return self._client("dynamodb", self._settings.dynamodb_endpoint,
                            self.store_credentials())

    @property
    def streams(self) -> DynamoDBStreamsClient:
        """The DynamoDB Streams client."""
        return self._client("dynamodbstreams", self._settings.dynamodb_endpoint,
                            self.store_credentials())

    @property
    def s3(self) -> S3Client:
        """The S3 client."""
        endpoint = self._settings.s3_endpoint
        return self._client("s3", endpoint, self._pick_credentials(endpoint))
