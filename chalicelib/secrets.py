"""Secrets a deployed stage reads at start: the receipt signing key from SSM."""

from __future__ import annotations

from typing import Any

import boto3

from chalicelib.settings import Settings


def receipt_key(settings: Settings, ssm: Any | None = None) -> str:
    """The key that signs receipt handles: the SSM SecureString named by
    DMQ_RECEIPT_KEY_PARAMETER when set (read once per container), else DMQ_RECEIPT_KEY."""
    if not settings.receipt_key_parameter:
        return settings.receipt_key
    client = ssm or boto3.client("ssm", region_name=settings.region)
    found = client.get_parameter(Name=settings.receipt_key_parameter, WithDecryption=True)
    return str(found["Parameter"]["Value"])
