"""What makes DMQ refuse to start, checked on the environment before any setting is read:
placeholders left in a deployed configuration, keys that were once published, and an
authentication mode without the credentials it needs."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

# What .chalice/config.json holds until infra/deploy.py has written the real value.
PLACEHOLDER = "set by:"
# SHA-256 of keys that were once published in the source (the old development receipt
# key): anyone can sign with them, so they are refused wherever they are set.
RETIRED_KEY_DIGESTS = frozenset({
    "e85479a951e50b9838efb52f8a9dc13acc35029721b70a514869cf34958e409c",
})


class ConfigurationError(Exception):
    """The environment cannot run DMQ; the message says what to set."""


def runs_on_lambda(env: Mapping[str, str]) -> bool:
    """Whether the environment is a Lambda function's."""
    return bool(env.get("AWS_LAMBDA_FUNCTION_NAME"))


def auth_mode(env: Mapping[str, str]) -> str:
    """DMQ_AUTH as given, lowered: required by default on Lambda, open elsewhere."""
    default = "required" if runs_on_lambda(env) else "open"
    return env.get("DMQ_AUTH", default).strip().lower()


def check_deployed(env: Mapping[str, str]) -> None:
    """Refuse placeholders anywhere, and the development receipt key on Lambda."""
    for name, value in env.items():
        if name.startswith("DMQ_") and value.startswith(PLACEHOLDER):
            raise ConfigurationError(
                f"{name} is still the placeholder {value!r}: run that command (it writes the "
                "stage's stream ARNs and receipt key) before chalice package or deploy.")
    on_lambda = runs_on_lambda(env)
    _check_keys(env)
    if on_lambda and not env.get("DMQ_RECEIPT_KEY_PARAMETER") and not env.get("DMQ_RECEIPT_KEY"):
        raise ConfigurationError(
            "DMQ on AWS needs a secret receipt key: set DMQ_RECEIPT_KEY_PARAMETER to an SSM "
            "SecureString holding one (python infra/deploy.py --stage STAGE creates one and "
            "sets it), or DMQ_RECEIPT_KEY to a secret value.")
    if on_lambda and env.get("DMQ_SSE_KEYS") == "local" and not env.get("DMQ_SSE_KEY_FILE"):
        raise ConfigurationError(
            "DMQ_SSE_KEYS=local on AWS needs DMQ_SSE_KEY_FILE, one key file every function "
            "shares; otherwise each container would encrypt with a key of its own. Use "
            "DMQ_SSE_KEYS=kms (the default on Lambda).")


def _check_keys(env: Mapping[str, str]) -> None:
    """Refuse a key that was once published (anyone could sign receipt handles or console
    forms with it)."""
    for name in ("DMQ_RECEIPT_KEY", "DMQ_CONSOLE_KEY"):
        value = env.get(name) or ""
        if hashlib.sha256(value.encode()).hexdigest() in RETIRED_KEY_DIGESTS:
            raise ConfigurationError(
                f"{name} is a key that was published in DMQ's source: anyone can sign with "
                "it. Unset it (a random key is made in the data folder) or set a secret one.")


def check_auth(env: Mapping[str, str]) -> None:
    """DMQ_AUTH is open or required; required outside Lambda needs root credentials (the
    admin API, which creates further keys, needs an admin key to call)."""
    on_lambda = runs_on_lambda(env)
    mode = auth_mode(env)
    if mode not in ("open", "required"):
        raise ConfigurationError(f"DMQ_AUTH is {mode!r}: it is open or required.")
    roots = (env.get("DMQ_ROOT_ACCESS_KEY_ID"), env.get("DMQ_ROOT_SECRET_ACCESS_KEY"))
    if mode == "required" and not on_lambda and not all(roots):
        raise ConfigurationError(
            "DMQ_AUTH=required needs DMQ_ROOT_ACCESS_KEY_ID and DMQ_ROOT_SECRET_ACCESS_KEY: "
            "the root credentials of DMQ_ACCOUNT_ID, an admin (further keys are made with "
            "the admin API).")
