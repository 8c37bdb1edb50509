"""`dmq keys list|create|rotate|revoke`: the access keys DMQ knows (the admin API's
`/admin/keys` routes). A secret is shown once, when a key is created or rotated."""

from __future__ import annotations

import argparse
from typing import Any

from dmqcli.admin_api import quote
from dmqcli.confirm import add_yes, confirm
from dmqcli.context import Context
from dmqcli.output import iso_ms
from dmqcli.parsing import examples

KEY_COLUMNS = ("access key id", "account", "user", "admin", "status", "created")


def _row(key: dict[str, Any]) -> tuple[Any, ...]:
    return (key.get("accessKeyId"), key.get("account"), key.get("user"), key.get("admin"),
            key.get("status"), iso_ms(key.get("created")))


def _list(ctx: Context, args: argparse.Namespace) -> None:
    data = ctx.admin.get("/admin/keys")
    keys = [k for k in data["keys"] if not args.account or k.get("account") == args.account]
    ctx.output.table({"keys": keys}, KEY_COLUMNS, (_row(k) for k in keys), empty="(no keys)")


def _show_secret(ctx: Context, key: dict[str, Any]) -> None:
    ctx.output.fields(key, title="new key (the secret is not shown again)",
                      times_ms=("created",))


def _create(ctx: Context, args: argparse.Namespace) -> None:
    body = {"account": args.account, "user": args.user, "admin": args.admin}
    _show_secret(ctx, ctx.admin.post("/admin/keys", body))


def _rotate(ctx: Context, args: argparse.Namespace) -> None:
    _show_secret(ctx, ctx.admin.post(f"/admin/keys/{quote(args.access_key_id)}/rotate"))


def _revoke(ctx: Context, args: argparse.Namespace) -> None:
    confirm(args, f"Revoke access key {args.access_key_id}? Requests signed with it fail "
            "from then on.", f"revoking {args.access_key_id}")
    result = ctx.admin.delete(f"/admin/keys/{quote(args.access_key_id)}")
    ctx.output.fields(result or {"accessKeyId": args.access_key_id, "status": "revoked"},
                      times_ms=("created",))


def register(sub: Any) -> None:
    """Add `keys` and its subcommands."""
    keys = sub.add_parser("keys", help="list, create, rotate and revoke access keys")
    actions = keys.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every key (never a secret)",
                                 epilog=examples("dmq keys list",
                                                 "dmq keys list --account 111122223333 --json"))
    listing.add_argument("--account", help="only this account's keys")
    listing.set_defaults(func=_list)
    create = actions.add_parser("create", help="a new key for an account's user",
                                epilog=examples("dmq keys create 111122223333 --user alice",
                                                "dmq keys create 000000000000 --admin"))
    create.add_argument("account", help="the 12-digit account")
    create.add_argument("--user", help="an IAM-style user name (default: the account's root)")
    create.add_argument("--admin", action="store_true", help="may call the admin API")
    create.set_defaults(func=_create)
    rotate = actions.add_parser("rotate", help="a new key pair for the same principal "
                                               "(the old one stays active until revoked)",
                                epilog=examples("dmq keys rotate AKIA..."))
    rotate.add_argument("access_key_id")
    rotate.set_defaults(func=_rotate)
    revoke = actions.add_parser("revoke", help="revoke a key: requests signed with it fail "
                                               "(asks first)",
                                epilog=examples("dmq keys revoke AKIA... --yes"))
    revoke.add_argument("access_key_id")
    add_yes(revoke)
    revoke.set_defaults(func=_revoke)
