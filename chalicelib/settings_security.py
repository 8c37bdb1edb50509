"""The settings of DMQ's security, read from the environment (docs/security.md,
docs/encryption.md): authentication and the root credentials, the keys that sign receipt
handles and console forms, the secrets of access keys, encryption at rest, the proxies
whose forwarded headers are believed and the token that may read the metrics."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from chalicelib.settings_checks import ConfigurationError, auth_mode

if TYPE_CHECKING:
    from chalicelib.settings import Settings


def security_settings(env: Mapping[str, str], base: Settings,
                      on_lambda: bool) -> dict[str, Any]:
    """The security fields of the settings; `base` gives the defaults off Lambda."""
    sse_keys = env.get("DMQ_SSE_KEYS", "kms" if on_lambda else base.sse_keys)
    return {
        "receipt_key": env.get("DMQ_RECEIPT_KEY") or None,
        "receipt_key_parameter": env.get("DMQ_RECEIPT_KEY_PARAMETER") or None,
        "console_key": env.get("DMQ_CONSOLE_KEY") or None,
        "console_key_parameter": env.get("DMQ_CONSOLE_KEY_PARAMETER") or None,
        "trusted_proxies": _proxies(env.get("DMQ_TRUSTED_PROXIES", "")),
        "metrics_token": env.get("DMQ_METRICS_TOKEN") or None,
        "auth": auth_mode(env),
        "root_access_key_id": env.get("DMQ_ROOT_ACCESS_KEY_ID") or None,
        "root_secret_access_key": env.get("DMQ_ROOT_SECRET_ACCESS_KEY") or None,
        "admin_delete_only": env.get("DMQ_ADMIN_DELETE_ONLY", "").strip().lower() in (
            "1", "true", "on", "yes"),
        "keys_kms_key_id": env.get("DMQ_KEYS_KMS_KEY_ID") or None,
        "keys_key_file": env.get("DMQ_KEYS_KEY_FILE") or None,
        "admin_iam_gateway": on_lambda,
        "sse_keys": sse_keys,
        "sse_key_file": env.get("DMQ_SSE_KEY_FILE") or None,
        "sse_managed_key_id": env.get(
            "DMQ_SSE_MANAGED_KEY_ID",
            "alias/dmq-sse" if sse_keys == "kms" else base.sse_managed_key_id),
        "kms_endpoint": env.get("DMQ_KMS_ENDPOINT") or None,
    }


def _proxies(text: str) -> tuple[str, ...]:
    """DMQ_TRUSTED_PROXIES: comma-separated addresses or CIDRs."""
    entries = tuple(p.strip() for p in text.split(",") if p.strip())
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError as exc:
            raise ConfigurationError(
                f"DMQ_TRUSTED_PROXIES: {entry!r} is not an address or a CIDR.") from exc
    return entries
