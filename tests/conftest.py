"""Shared fixtures: in-process moto with DMQ's tables, the app on a fake clock, SQS clients."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from chalice.test import Client

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"

from app import app, runtime
from chalicelib.aws import Clients, new_session
from chalicelib.frontend.console.history import History
from chalicelib.handlers import console_routes
from chalicelib.settings import Settings
from dmqlocal.embedded import EmbeddedAws
from dmqlocal.folders import LocalFolders
from dmqlocal.per_thread import serve_from_threads
from infra import provision
from tests.clocks import FakeClock
from tests.count_pumps import CountPumps

# The tests run the app as the local server does: with its folders for bodies and archives.
runtime.local = LocalFolders()

ENDPOINT = "http://dmq.test"
# Tests call the app from threads, as the local server does.
serve_from_threads(app)


class _Raw:
    """The raw stream botocore reads a response body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body


@pytest.fixture
def settings() -> Settings:
    """Settings for the test store: small inline limit so S3 bodies are exercised cheaply."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0)


@pytest.fixture
def clock() -> FakeClock:
    """A clock the test moves by hand."""
    return FakeClock()


@pytest.fixture
def aws(settings: Settings) -> Iterator[Clients]:
    """In-process moto holding DMQ's tables and bucket, created from the template."""
    embedded = EmbeddedAws()
    embedded.start()
    clients = Clients(settings)
    provision.create_all(clients.dynamodb, clients.s3)
    yield clients
    embedded.stop()


@pytest.fixture
def dmq(aws: Clients, settings: Settings, clock: FakeClock) -> Iterator[Client]:
    """The Chalice app on the test store and the fake clock, behind chalice.test.Client;
    the console's plots start empty (they outlive a test, as they outlive a request)."""
    runtime.configure(settings, clock)
    console_routes.console.history = History()
    runtime.count_catch_up = CountPumps(settings)
    with Client(app) as client:
        yield client
    runtime.configure(None)


@pytest.fixture
def sqs(dmq: Client) -> Any:
    """boto3's real SQS client, its requests served in process by the Chalice app."""
    return sqs_client(dmq, "us-east-1")


def sqs_client(dmq: Client, region: str, config: Config | None = None) -> Any:
    """boto3's SQS client signing for `region`, served in process by the Chalice app."""
    client: Any = new_session().client("sqs", endpoint_url=ENDPOINT, region_name=region,
                                       config=config)

    def serve(request: Any, **kwargs: Any) -> AWSResponse:
        path = request.url[len(ENDPOINT):] or "/"
        body = request.body or b""
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        headers["Host"] = "dmq.test"
        result = dmq.http.request(request.method, path, headers=headers, body=body)
        return AWSResponse(request.url, result.status_code, result.headers, _Raw(result.body))

    client.meta.events.register_first("before-send.sqs", serve)
    return client


SPARK_TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession for the rest of the run (it takes seconds to start): one
    per process, so one per pytest-xdist worker that meets a Spark test. Its JVM compiles
    with the quick compiler only (SPARK_TEST_JAVA_OPTIONS): the tests' small queries end
    before the optimising one would pay off, and an audit of the faulty end-to-end run
    took 49 s of CPU that way against 86 s."""
    from glue_jobs.common.driver import local_session

    # The JVM's temporary files go to a folder of the session's own, removed with it: the
    # native lz4 and snappy libraries it unpacks there stay after the JVM ends.
    scratch = tempfile.mkdtemp(prefix="dmq-spark-tmp-")
    session = local_session("dmq-tests", conf={
        "spark.driver.extraJavaOptions": f"{SPARK_TEST_JAVA_OPTIONS} -Djava.io.tmpdir={scratch}"})
    try:
        yield session
    finally:
        session.stop()
        shutil.rmtree(scratch, ignore_errors=True)


# The order the test modules are handed to pytest-xdist's workers (`make test` runs three,
# `--dist loadfile`: each module is one unit of work, on one worker, so its module fixtures
# start once): the long chains first (the modules that start Spark, then the servers'
# end-to-end tests), the many short unit tests last, where they fill the workers' ends
# instead of one long module being started last and running alone.
FIRST_TO_LAST = ("spark", "e2e", "security", "contract", "fuzz", "functional", "unit")


def _starts_spark(item: pytest.Item) -> bool:
    return "spark" in getattr(item, "fixturenames", ()) or "spark_submit" in item.name


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Hand the modules out in FIRST_TO_LAST order (with `--no-loadscope-reorder`,
    pytest-xdist keeps it), each module's tests in their own order."""
    with_spark = {item.path for item in items if _starts_spark(item)}

    def rank(item: pytest.Item) -> int:
        if item.path in with_spark:
            return 0
        folder = Path(str(item.path)).parent.name
        return FIRST_TO_LAST.index(folder) if folder in FIRST_TO_LAST else len(FIRST_TO_LAST)

    items.sort(key=rank)  # stable
