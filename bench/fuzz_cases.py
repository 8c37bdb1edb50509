"""Fuzz cases for DMQ's HTTP front door, drawn from botocore's SQS model.

Each case is the raw bytes of one connection: a JSON 1.0 request built from an action's
input shape and then mutated (wrong types, huge values, deep nesting, lone surrogates,
missing and extra members), a byte-level mutation of such a request, or an HTTP framing
mutation (lengths, chunked bodies, methods, paths, versions, header sizes). A case depends
only on (seed, index): `Generator(seed).case(index)` rebuilds it.
"""

from __future__ import annotations

import base64
import json
import random
import re
from dataclasses import dataclass
from typing import Any

import botocore.loaders

from bench.fuzz_framing import framing_case

TARGET = "AmazonSQS."
CONTENT_TYPE = "application/x-amz-json-1.0"
# Values that would make the fuzz itself slow (long polls, many shards), never its point.
SLOW_ATTRIBUTES = {"ReceiveMessageWaitTimeSeconds": ["0", "1", "-1", "21", "x"],
                   "DmqShardCount": ["1", "2", "0", "65", "x"]}
NEVER_ON_POOL = frozenset({"DeleteQueue"})  # keep the queues the cases aim at
TEXT_ALPHABETS = [
    "abcxyz019-_.", " \t\r\n", "\x00\x01\x1f\x7f", "éü€漢字", "\U0001f600\U00010000",
    "\ud800\udbff\udc00\udfff", "\ufffe\uffff", '"\\/{}[]:,', "<>&'",
]


@dataclass(frozen=True)
class Case:
    """One connection's bytes; `head` when the first answer has no body (a HEAD)."""

    index: int
    kind: str
    data: bytes
    head: bool = False


def sqs_model() -> dict[str, Any]:
    """botocore's SQS service model."""
    model: dict[str, Any] = botocore.loaders.Loader().load_service_model("sqs", "service-2")
    return model


class Generator:
    """Deterministic cases for a server at `host`, aimed at `queue_urls` most of the time."""

    def __init__(self, seed: int, host: str, queue_urls: list[str]) -> None:
        self.seed = seed
        self.host = host
        self.queue_urls = queue_urls
        model = sqs_model()
        self.shapes: dict[str, Any] = model["shapes"]
        self.operations: dict[str, Any] = model["operations"]
        self.names = sorted(self.operations)

    def case(self, index: int) -> Case:
        """The case at `index` for this seed."""
        rng = random.Random(f"{self.seed}:{index}")
        roll = rng.random()
        if roll < 0.55:
            return Case(index, "model", self._request(rng, *self._mutated_body(rng)))
        if roll < 0.70:
            return Case(index, "bytes", _flip_bytes(rng, self._request(rng,
                                                                        *self._body(rng))))
        if roll < 0.90:
            return self._framing(rng, index)
        return Case(index, "target", self._request(rng, *self._target_body(rng)))

    # -- model-based bodies -------------------------------------------------------------
    def _body(self, rng: random.Random) -> tuple[str, bytes]:
        action = rng.choice(self.names)
        shape = self.operations[action].get("input", {}).get("shape")
        params = self._value(rng, shape, "", 0) if shape else {}
        if action in NEVER_ON_POOL and isinstance(params, dict):
            params["QueueUrl"] = f"http://{self.host}/000000000000/fuzz-gone-{rng.randrange(99)}"
        return action, _dumps(rng, params)

    def _mutated_body(self, rng: random.Random) -> tuple[str, bytes]:
        action, body = self._body(rng)
        try:
            params = json.loads(body)
        except ValueError:
            return action, body
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            params = _mutate(rng, params)
        if action in NEVER_ON_POOL and isinstance(params, dict) and isinstance(
                params.get("QueueUrl"), str) and params["QueueUrl"] in self.queue_urls:
            params["QueueUrl"] += "-gone"
        return action, _dumps(rng, params)

    def _value(self, rng: random.Random, shape_name: str, member: str, depth: int) -> Any:
        shape = self.shapes[shape_name]
        kind = shape["type"]
        if kind == "structure":
            out = {}
            for name, spec in shape.get("members", {}).items():
                if name in shape.get("required", []) or rng.random() < 0.5:
                    out[name] = self._value(rng, spec["shape"], name, depth + 1)
            return out
        if kind == "map":
            out = {}
            for _ in range(_count(rng)):
                key = self._value(rng, shape["key"]["shape"], member + "Key", depth + 1)
                out[key] = (rng.choice(SLOW_ATTRIBUTES[key]) if key in SLOW_ATTRIBUTES
                            else self._value(rng, shape["value"]["shape"], member + "Value",
                                             depth + 1))
            return out
        if kind == "list":
            return [self._value(rng, shape["member"]["shape"], member, depth + 1)
                    for _ in range(_count(rng))]
        return self._scalar(rng, kind, shape, member)

    def _scalar(self, rng: random.Random, kind: str, shape: dict[str, Any],
                member: str) -> Any:
        if kind == "integer" and member == "WaitTimeSeconds":  # no long polls: speed
            return rng.choice([0, 1, -1, 21, 2**31, 1.5, "x"])
        if kind == "integer":
            return rng.choice([0, 1, 5, 10, -1, 11, 20, 2**31, 2**63, 1.5, "7"])
        if kind == "boolean":
            return rng.choice([True, False, "true", 1])
        if kind == "blob":
            return base64.b64encode(rng.randbytes(rng.choice([0, 1, 16, 300]))).decode()
        if member == "QueueUrl":
            return rng.choice(self.queue_urls) if rng.random() < 0.8 else _text(rng)
        if "enum" in shape:
            return rng.choice(shape["enum"])
        if member.endswith("Value") and member != "StringValue":  # queue attribute values
            return rng.choice(["0", "1", "30", "262144", "-1", "x", "", _text(rng)])
        return _text(rng)

    # -- targets and framing ------------------------------------------------------------
    def _target_body(self, rng: random.Random) -> tuple[str, bytes]:
        action = rng.choice([*self.names, "", "Nope", "sendmessage", "SendMessage\x00"])
        body = rng.choice([b"", b"null", b"[]", b"1", b'"x"', b"{", b"{}}", b"\xff\xfe",
                           b'{"a":1,"a":2}', b"{}" * 3, rng.randbytes(rng.randrange(64))])
        return action, body

    def _request(self, rng: random.Random, action: str, body: bytes,
                 extra: bytes = b"") -> bytes:
        target = b"X-Amz-Target: " + (TARGET + action).encode("utf-8", "surrogatepass")
        head = (b"POST / HTTP/1.1\r\nHost: " + self.host.encode() + b"\r\nContent-Type: "
                + CONTENT_TYPE.encode() + b"\r\n" + target + b"\r\n" + extra
                + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        return head + body

    def _framing(self, rng: random.Random, index: int) -> Case:
        action, body = self._body(rng)
        data, head = framing_case(rng, self.host, action, body)
        return Case(index, "framing", data, head)


def _count(rng: random.Random) -> int:
    return rng.choice([0, 1, 1, 2, 3, 11])


def _text(rng: random.Random) -> str:
    """A short string from one or two alphabets, now and then a long one."""
    if rng.random() < 0.5:  # plain text, so that many requests go deep enough to succeed
        alphabet = TEXT_ALPHABETS[0]
    else:
        alphabet = "".join(rng.sample(TEXT_ALPHABETS, rng.choice([1, 1, 2])))
    size = rng.choice([0, 1, 5, 20, 80, 81, 300]) if rng.random() < 0.97 else rng.choice(
        [70_000, 270_000, 1_100_000])
    if size > 1000:
        return rng.choice(alphabet) * size
    return "".join(rng.choice(alphabet) for _ in range(size))


def _dumps(rng: random.Random, value: Any) -> bytes:
    """JSON as SDKs send it (escaped) or raw UTF-8, lone surrogates as their 3 bytes;
    deep-nesting markers become the nesting itself (too deep for json.dumps)."""
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
    text = _DEEP.sub(_expand_deep, text)
    return text.encode("utf-8", "surrogatepass")


_DEEP = re.compile(r'"\\u0000deep(\d+)([\[{])\\u0000"')


def _deep(depth: int, bracket: str) -> str:
    """A marker for `depth` nested arrays ([) or objects ({)."""
    return f"\x00deep{depth}{bracket}\x00"


def _expand_deep(match: re.Match[str]) -> str:
    depth, bracket = int(match.group(1)), match.group(2)
    if bracket == "[":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "{}" + "}" * depth


def _mutate(rng: random.Random, value: Any) -> Any:
    """One mutation somewhere in the tree: wrong type, nesting, surrogate, drop, extra."""
    if isinstance(value, dict) and value and rng.random() < 0.6:
        key = rng.choice(list(value))
        choice = rng.random()
        if choice < 0.15:
            value.pop(key)
        elif choice < 0.25:
            value[key + rng.choice(["", "\ud800", "X"])] = _wrong(rng)
        else:
            value[key] = _mutate(rng, value[key])
        return value
    if isinstance(value, list) and value and rng.random() < 0.6:
        i = rng.randrange(len(value))
        value[i] = _mutate(rng, value[i])
        return value
    if isinstance(value, str) and rng.random() < 0.5:
        i = rng.randrange(len(value) + 1)
        return value[:i] + rng.choice(["\ud800", "\udfff", "\x00", "\uffff", "\ud83d"]) + value[i:]
    return _wrong(rng)


def _wrong(rng: random.Random) -> Any:
    """A value of any JSON type, deep nesting and huge values included."""
    depth = rng.choice([2, 10, 63, 65, 200, 1_000, 5_000])
    return rng.choice([
        None, True, 0, -1, 2**64, 1e308, -0.0, "", "x" * rng.choice([1, 257, 300_000]),
        [], {}, [None], {"": None}, _deep(depth, "["), _deep(depth, "{"),
    ])


def _flip_bytes(rng: random.Random, data: bytes) -> bytes:
    """A few random byte edits anywhere in the request (head or body)."""
    out = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        if not out:
            break
        i = rng.randrange(len(out))
        op = rng.random()
        if op < 0.4:
            out[i] = rng.randrange(256)
        elif op < 0.6:
            del out[i]
        elif op < 0.8:
            out[i:i] = rng.randbytes(rng.choice([1, 2, 3]))
        else:
            out[i:i] = rng.choice([b"\r\n", b"\xed\xa0\x80", b"\xff", b"\x00", b"\\ud800"])
    return bytes(out)
