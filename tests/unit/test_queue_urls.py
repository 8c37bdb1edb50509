"""Queue URLs in every form SQS clients send (AWS's own forms, LocalStack's, a bare queue
name) name the same queue: the account and name from the path, a region only where the
host or LocalStack's path style names one; anything else names no queue."""

from __future__ import annotations

import pytest

from chalicelib.frontend.context import RequestContext, check_signed_region, region_from_headers
from chalicelib.frontend.queue_urls import (
    QueueTarget,
    is_region,
    parse_queue_url,
    queue_of_request,
    region_of_base,
    target_of_path,
)
from chalicelib.service.exceptions import QueueDoesNotExistError, SignatureDoesNotMatchError
from chalicelib.settings import ConfigurationError, Settings

ACCOUNT = "000000000000"


@pytest.mark.parametrize(("url", "region"), [
    (f"http://127.0.0.1:9324/{ACCOUNT}/jobs", None),
    (f"http://localhost:4566/{ACCOUNT}/jobs", None),
    (f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/jobs", "eu-west-1"),
    (f"https://sqs.cn-north-1.amazonaws.com.cn/{ACCOUNT}/jobs", "cn-north-1"),
    (f"https://ap-southeast-2.queue.amazonaws.com/{ACCOUNT}/jobs", "ap-southeast-2"),
    (f"https://queue.amazonaws.com/{ACCOUNT}/jobs", "us-east-1"),
    (f"https://vpce-1a2b.sqs.us-west-2.vpce.amazonaws.com/{ACCOUNT}/jobs", "us-west-2"),
    (f"http://sqs.us-east-1.localhost.localstack.cloud:4566/{ACCOUNT}/jobs", "us-east-1"),
    (f"http://eu-central-1.queue.localhost.localstack.cloud:4566/{ACCOUNT}/jobs",
     "eu-central-1"),
    (f"http://localhost:4566/queue/us-gov-west-1/{ACCOUNT}/jobs", "us-gov-west-1"),
    (f"https://abc.execute-api.us-east-1.amazonaws.com/api/{ACCOUNT}/jobs", None),
    (f"http://sqs.example.com/{ACCOUNT}/jobs/", None),
    (f"/{ACCOUNT}/jobs", None),
    (f"{ACCOUNT}/jobs?x=1", None),
])
def test_every_url_form_names_the_queue_by_its_path(url: str, region: str | None) -> None:
    assert parse_queue_url(url) == QueueTarget(ACCOUNT, "jobs", region)


def test_a_bare_name_is_in_the_callers_account() -> None:
    target = parse_queue_url("jobs.fifo")
    assert target == QueueTarget(None, "jobs.fifo", None)
    assert target.parts("111122223333") == ("111122223333", "jobs.fifo")


@pytest.mark.parametrize("url", [
    "", "http://h:9324/q1", "http://[::1/000000000000/q", "http://h/acct/bad name",
    "jobs?", "a" * 81, "http://h/000000000000", "../..", f"{'x' * 70}/q",
])
def test_anything_else_names_no_queue(url: str) -> None:
    with pytest.raises(QueueDoesNotExistError):
        parse_queue_url(url)


def test_a_request_path_names_a_queue_in_both_styles() -> None:
    assert target_of_path(f"/{ACCOUNT}/jobs") == QueueTarget(ACCOUNT, "jobs")
    assert target_of_path(f"/queue/eu-west-1/{ACCOUNT}/jobs") == QueueTarget(
        ACCOUNT, "jobs", "eu-west-1")
    assert target_of_path("/") is None
    assert target_of_path(f"/other/eu-west-1/{ACCOUNT}/jobs") is None


@pytest.mark.parametrize(("base", "region", "url"), [
    ("http://h:9324", "us-east-1", f"http://h:9324/{ACCOUNT}/q"),  # the server's own
    ("http://h:9324", "eu-west-1", f"http://h:9324/queue/eu-west-1/{ACCOUNT}/q"),
    ("https://h/prod", "eu-west-1", f"https://h/prod/queue/eu-west-1/{ACCOUNT}/q"),
    ("http://sqs.eu-west-1.localhost.localstack.cloud:4566", "eu-west-1",
     f"http://sqs.eu-west-1.localhost.localstack.cloud:4566/{ACCOUNT}/q"),
    ("http://sqs.eu-west-1.localhost.localstack.cloud:4566", "us-east-1",
     f"http://sqs.eu-west-1.localhost.localstack.cloud:4566/queue/us-east-1/{ACCOUNT}/q"),
    ("http://localhost:4566/queue/eu-west-1", "eu-west-1",
     f"http://localhost:4566/queue/eu-west-1/{ACCOUNT}/q"),
])
def test_returned_urls_name_a_region_but_the_servers_once(base: str, region: str,
                                                          url: str) -> None:
    context = RequestContext(ACCOUNT, region, base, home_region="us-east-1")
    assert context.queue_url(ACCOUNT, "q") == url
    # AND the URL reads back as the queue in that region
    assert parse_queue_url(url) == QueueTarget(
        ACCOUNT, "q", None if region == "us-east-1" and "/queue/" not in url else region)


def test_the_region_a_base_names() -> None:
    assert region_of_base("http://localhost:4566/queue/ap-south-1") == "ap-south-1"
    assert region_of_base("https://sqs.eu-west-1.amazonaws.com") == "eu-west-1"
    assert region_of_base("http://127.0.0.1:9324") is None
    assert region_of_base("http://[::1") is None


def test_region_names_are_shaped_as_aws_names_them() -> None:
    for name in ("us-east-1", "ap-southeast-2", "us-gov-west-1", "eu-isoe-west-1",
                 "cn-northwest-1", "il-central-1"):
        assert is_region(name), name
    for junk in ("xx", "../", "", "us-east", "US-EAST-1", "us-east-1/x", "a" * 40 + "-b-1"):
        assert not is_region(junk), junk


def test_logs_and_usage_read_the_queue_with_the_same_parser() -> None:
    assert queue_of_request(f"http://h/queue/us-east-1/{ACCOUNT}/q", None) == f"{ACCOUNT}/q"
    assert queue_of_request("q", None, ACCOUNT) == f"{ACCOUNT}/q"
    assert queue_of_request("q", None) == "q"
    assert queue_of_request(None, "named") == "named"
    assert queue_of_request("http://[::1/x", None) == ""


def test_a_signed_region_is_checked_against_what_is_served() -> None:
    check_signed_region("", ("us-east-1",))
    check_signed_region("us-east-1", ("us-east-1",))
    check_signed_region("eu-west-1", ("us-east-1",), any_region=True)
    for region, any_region in (("eu-west-1", False), ("xx", True), ("..", True)):
        with pytest.raises(SignatureDoesNotMatchError) as caught:
            check_signed_region(region, ("us-east-1",), any_region)
        assert caught.value.message.startswith(
            f"Credential should be scoped to a valid region, not '{region}'.")


def test_the_settings_of_regions_and_public_urls() -> None:
    assert Settings.from_env({}).any_region is None  # unset: the local server decides
    assert Settings.from_env({"DMQ_ANY_REGION": "off"}).any_region is False
    assert Settings.from_env({"DMQ_ANY_REGION": "on"}).any_region is True
    lambda_env = {"AWS_LAMBDA_FUNCTION_NAME": "f", "DMQ_RECEIPT_KEY": "k" * 32,
                  "DMQ_ANY_REGION": "on"}
    assert Settings.from_env(lambda_env).any_region is False  # a stage serves its regions
    public = "http://sqs.{region}.localhost.localstack.cloud:4566/"
    assert Settings.from_env({"DMQ_PUBLIC_URL": public}).public_url == public.rstrip("/")
    for bad in ("ftp://h", "http://h/?q=1", "http://", "h:80", "http://h/{account}"):
        with pytest.raises(ConfigurationError):
            Settings.from_env({"DMQ_PUBLIC_URL": bad})
    with pytest.raises(ConfigurationError):
        Settings.from_env({"DMQ_ANY_REGION": "maybe"})


def test_the_signed_region_comes_from_the_header_or_a_presigned_credential() -> None:
    auth = "AWS4-HMAC-SHA256 Credential=AK/20261125/ap-southeast-2/sqs/aws4_request, S=x"
    assert region_from_headers({"authorization": auth}, "us-east-1") == "ap-southeast-2"
    presigned = {"X-Amz-Credential": "AK/20261125/eu-west-1/sqs/aws4_request"}
    assert region_from_headers({}, "us-east-1", presigned) == "eu-west-1"
    assert region_from_headers({}, "us-east-1", {}) == "us-east-1"
    junk = "AWS4-HMAC-SHA256 Credential=AK/20261125/../sqs/aws4_request, S=x"
    assert region_from_headers({"authorization": junk}, "us-east-1") == ".."
