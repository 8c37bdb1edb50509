"""The web console's pure parts: Basic credentials and the open-mode rule, CSRF tokens, the
bounded history of counts and requests, and the plots' coordinates."""

from __future__ import annotations

import base64

import pytest

from chalicelib.domain.messages import Counts
from chalicelib.frontend.console import auth, plots
from chalicelib.frontend.console.csrf import TOKEN_TTL_S, CsrfTokens
from chalicelib.frontend.console.history import (
    MINUTE_MS,
    SAMPLE_EVERY_MS,
    TOTAL,
    WINDOW_MS,
    History,
)
from chalicelib.service.exceptions import InvalidClientTokenIdError, SignatureDoesNotMatchError
from chalicelib.service.identity import Caller, principal_arn

ACCOUNT = "000000000000"
NOW = 1_700_000_000_000


def _open_mode(key_id: str, _secret: str) -> Caller:
    """What `Identities.check_secret` answers in the open local mode."""
    account = key_id if len(key_id) == 12 and key_id.isdigit() else ACCOUNT
    return Caller(account, principal_arn(account, None), key_id, account == ACCOUNT)


def _required_mode(key_id: str, secret: str) -> Caller:
    """... and with DMQ_AUTH=required: one known key, its secret checked."""
    if key_id != "AKIDKNOWN":
        raise InvalidClientTokenIdError()
    if secret != "right":
        raise SignatureDoesNotMatchError("The request signature we calculated does not match.")
    return Caller(ACCOUNT, principal_arn(ACCOUNT, None), key_id, True)


def _basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("header", [
    None, "", "Bearer abc", "Basic", "Basic !!!", _basic("no-colon"), _basic(":secret"),
    "Basic " + base64.b64encode(b"\xff\xfe:x").decode(),
])
def test_malformed_or_missing_credentials_are_none(header: str | None) -> None:
    assert auth.authenticate(header, _open_mode) is None


def test_open_mode_rule_any_key_is_the_deployment_account_and_admin() -> None:
    user = auth.authenticate(_basic("AKIDEXAMPLE:any secret: with colons"), _open_mode)
    assert user == auth.ConsoleUser("AKIDEXAMPLE", ACCOUNT, admin=True)
    assert auth.credentials(_basic("AKID:a:b")) == ("AKID", "a:b")
    assert auth.authenticate("basic " + _basic("k:")[6:], _open_mode) is not None


def test_a_twelve_digit_key_is_that_account_admin_only_for_the_deployment_account() -> None:
    other = auth.authenticate(_basic("123456789012:s"), _open_mode)
    assert other == auth.ConsoleUser("123456789012", "123456789012", admin=False)
    own = auth.authenticate(_basic(f"{ACCOUNT}:s"), _open_mode)
    assert own is not None and own.admin
    assert auth.authenticate(_basic("12345678901:s"), _open_mode) == auth.ConsoleUser(
        "12345678901", ACCOUNT, admin=True)  # 11 digits: not an account id


def test_required_mode_refuses_an_unknown_key_and_a_wrong_secret_alike() -> None:
    assert auth.authenticate(_basic("AKIDOTHER:right"), _required_mode) is None
    assert auth.authenticate(_basic("AKIDKNOWN:wrong"), _required_mode) is None
    assert auth.authenticate(_basic("AKIDKNOWN:right"), _required_mode) == auth.ConsoleUser(
        "AKIDKNOWN", ACCOUNT, admin=True)


def test_csrf_token_is_bound_to_the_key_the_key_material_and_its_lifetime() -> None:
    tokens = CsrfTokens("receipt-key")
    token = tokens.issue("AKID", 1000)
    assert tokens.valid(token, "AKID", 1000)
    assert tokens.valid(token, "AKID", 1000 + TOKEN_TTL_S)
    assert not tokens.valid(token, "AKID", 1000 + TOKEN_TTL_S + 1)
    assert not tokens.valid(token, "AKID", 999)  # issued in the future
    assert not tokens.valid(token, "OTHER", 1000)
    assert not CsrfTokens("another-key").valid(token, "AKID", 1000)
    issued, _, mac = token.partition(".")
    assert not tokens.valid(f"{int(issued) + 1}.{mac}", "AKID", 1001)
    for bad in (None, "", "x", "1000.", ".abc", "abc.def"):
        assert not tokens.valid(bad, "AKID", 1000)


def test_history_keeps_one_sample_per_interval_for_an_hour() -> None:
    history = History()
    history.sample("q", Counts(1, 0, 0), NOW)
    assert not history.due("q", NOW + SAMPLE_EVERY_MS - 1)
    history.sample("q", Counts(9, 9, 9), NOW + SAMPLE_EVERY_MS - 1)  # too soon: dropped
    history.sample("q", Counts(2, 1, 0), NOW + SAMPLE_EVERY_MS)
    assert [(s.visible, s.in_flight) for s in history.depth("q", NOW + SAMPLE_EVERY_MS)] == [
        (1, 0), (2, 1)]
    later = NOW + WINDOW_MS + SAMPLE_EVERY_MS
    history.sample("q", Counts(3, 0, 0), later)
    assert [s.visible for s in history.depth("q", later)] == [2, 3]
    assert history.depth("unknown", later) == []


def test_history_counts_requests_per_minute_and_in_all() -> None:
    history = History()
    for action in ("SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage",
                   "DeleteMessageBatch", "GetQueueAttributes"):
        history.count("a/q", action, NOW)
    history.count("", "SendMessage", NOW)  # names no queue: not counted
    minutes = history.throughput("a/q", NOW)
    assert len(minutes) == WINDOW_MS // MINUTE_MS
    assert minutes[-1] == (NOW - NOW % MINUTE_MS, {"send": 2, "receive": 1, "delete": 2})
    assert all(row == {"send": 0, "receive": 0, "delete": 0} for _, row in minutes[:-1])
    assert history.throughput(TOTAL, NOW)[-1][1]["send"] == 2
    # an hour later, that minute has left the window
    assert all(not any(row.values()) for _, row in history.throughput("a/q", NOW + WINDOW_MS))


def test_history_follows_a_bounded_number_of_queues() -> None:
    history = History(max_queues=2)
    for i, name in enumerate(("a", "b", "c")):
        history.sample(name, Counts(i, 0, 0), NOW)
    history.sample(TOTAL, Counts(3, 0, 0), NOW)
    assert history.depth("a", NOW) == []  # the one sampled longest ago is forgotten
    assert [s.visible for s in history.depth("c", NOW)] == [2]


def test_chart_scales_to_a_round_maximum_and_describes_itself() -> None:
    chart = plots.chart("c", "Depth", "messages", NOW - 600_000, NOW, {
        "visible": [(NOW - 600_000, 0), (NOW, 7)], "delayed": []})
    visible, delayed = chart.lines
    seven = plots.TOP + (plots.HEIGHT - plots.TOP - plots.BOTTOM) * 0.3
    assert visible.points == (f"{plots.LEFT}.0,{plots.HEIGHT - plots.BOTTOM}.0 "
                              f"{plots.WIDTH - plots.RIGHT}.0,{seven:.1f}")
    assert (visible.latest, visible.peak) == (7, 7)
    assert delayed.points == "" and delayed.end is None
    assert [t.label for t in chart.y_ticks] == ["0", "5", "10"]
    assert [t.label for t in chart.x_ticks] == ["now", "-2 min", "-4 min", "-6 min",
                                                "-8 min", "-10 min"]
    assert chart.summary == ("Depth over the last 10 minutes, in messages: visible now 7, "
                             "at most 7; delayed now 0, at most 0.")
    empty = plots.chart("e", "Throughput", "requests", NOW - 60_000, NOW, {"sent": []})
    assert empty.summary == "Throughput: no samples yet."
    assert [t.label for t in empty.x_ticks] == ["now", "-15 s", "-30 s", "-45 s", "-1 min"]
