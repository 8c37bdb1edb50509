"""Which credentials sign `dmq`'s requests, and what to say when the server refuses them.

The AWS CLI's chain comes first (environment, `--profile`/AWS_PROFILE, the shared
credentials and config files, SSO...). When it finds nothing and the endpoint is a local
server that needs no credentials (the open mode), requests are signed with fixed
placeholder credentials: the open mode reads an access key id only for its tenant rule,
and a key id that is not 12 digits acts as the deployment account's root, its admin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dmqcli.discovery import Target
from dmqcli.errors import SERVICE, USAGE, CliError

if TYPE_CHECKING:
    import botocore.session
    from botocore.credentials import Credentials

PLACEHOLDER_KEY = "dmq-local"  # not 12 digits: the open mode's deployment account root
PLACEHOLDER_SECRET = "dmq-local-placeholder-secret"
# The server's answers that mean "these credentials will not do".
AUTH_CODES = frozenset({"MissingAuthenticationToken", "InvalidClientTokenId",
                        "SignatureDoesNotMatch", "IncompleteSignature",
                        "UnrecognizedClientException", "ExpiredToken",
                        "InvalidSignatureException"})
ADMIN_AUTH_CODES = AUTH_CODES | {"AccessDenied", "AccessDeniedException"}
# What a credential provider's `method` means, for people.
FOUND_IN = {"env": "the environment (AWS_ACCESS_KEY_ID)", "explicit": "the command",
            "shared-credentials-file": "{credentials}", "config-file": "{config}",
            "sso": "SSO (profile {profile})", "iam-role": "the instance's role",
            "container-role": "the container's role"}


@dataclass(frozen=True)
class Signer:
    """The credentials requests are signed with, and where they came from."""

    access_key: str
    secret_key: str
    token: str | None
    found_in: str
    placeholder: bool = False

    def credentials(self) -> Credentials:
        """As botocore credentials (for signing admin requests)."""
        from botocore.credentials import Credentials

        return Credentials(self.access_key, self.secret_key, self.token)

    @property
    def shown_key(self) -> str:
        """The access key id, all but its last four characters hidden."""
        if self.placeholder:
            return self.access_key
        return "…" + self.access_key[-4:]


def looked_in(session: botocore.session.Session) -> str:
    """Where the AWS credential chain looks, with this session's files and profile."""
    profile = session.get_config_variable("profile") or "default"
    files = (f"{session.get_config_variable('credentials_file')} and "
             f"{session.get_config_variable('config_file')}")
    if session.instance_variables().get("profile") is not None:  # --profile skips env vars
        return f"profile '{profile}' (--profile) in {files}"
    return (f"env vars AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, then profile '{profile}' "
            f"(--profile or AWS_PROFILE) in {files}")


def _found_in(method: str, session: botocore.session.Session) -> str:
    text = FOUND_IN.get(method, f"the AWS credential chain ({method})")
    return text.format(credentials=session.get_config_variable("credentials_file"),
                       config=session.get_config_variable("config_file"),
                       profile=session.get_config_variable("profile") or "default")


def find_signer(session: botocore.session.Session, target: Target) -> Signer:
    """The chain's credentials; placeholders for a local open server; else a usage error."""
    found = session.get_credentials()
    frozen = found.get_frozen_credentials() if found is not None else None
    if found is not None and frozen is not None and frozen.access_key and frozen.secret_key:
        return Signer(frozen.access_key, frozen.secret_key, frozen.token,
                      _found_in(found.method, session))
    if target.open_locally:
        return Signer(PLACEHOLDER_KEY, PLACEHOLDER_SECRET, None,
                      "local placeholder credentials (none configured)", placeholder=True)
    raise CliError(f"no AWS credentials to sign requests to {target.url} with: dmq looked "
                   f"in {looked_in(session)}", USAGE)


def is_credential_error(error: CliError) -> bool:
    """True when the server answered that the credentials were missing or not good."""
    codes = ADMIN_AUTH_CODES if error.admin else AUTH_CODES
    return error.code in codes


def credential_error(error: CliError, signer: Signer, target: Target,
                     session: botocore.session.Session) -> CliError:
    """The server's refusal, with the credential it needs and where dmq looked, one line."""
    need = ("an admin's access key (the server's DMQ_ROOT_ACCESS_KEY_ID, or a key made "
            "with `dmq keys create ACCOUNT --admin`)" if error.admin
            else "an access key it knows (made with `dmq keys create ACCOUNT`)")
    if signer.placeholder:
        used = f"none was found ({looked_in(session)}), so dmq sent placeholder credentials"
        status = USAGE
    else:
        used = (f"dmq signed with key {signer.shown_key} from {signer.found_in} "
                f"(it looks in {looked_in(session)})")
        status = SERVICE
    return CliError(f"{error.message}: DMQ at {target.url} needs {need}; {used}", status,
                    error.code, error.admin)
