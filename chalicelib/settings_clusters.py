"""The settings of clusters, read from the environment (docs/architecture.md, "Shards,
clusters and regions").

- `DMQ_CLUSTERS`: the clusters besides `default`, comma-separated; each has a messages
  table of its own (`<DMQ_MESSAGES_TABLE>-<cluster>`).
- `DMQ_CLUSTER_ENDPOINTS`: `c2=http://host:port,c3=http://host:port` gives a cluster a
  DynamoDB (and DynamoDB Streams) endpoint of its own, so that its messages table lives in
  another store. A cluster not named there, and everything that is not a messages table
  (queues, control), stays on the main endpoint (`DMQ_DYNAMODB_ENDPOINT`). The default
  cluster always stays there: its table is the one the deployment's main stream feeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

DEFAULT_CLUSTER = "default"


def cluster_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """`clusters` and `cluster_endpoints` of the settings; ValueError says what is wrong
    in one sentence, so that DMQ refuses to start with it instead of a traceback."""
    names = [n.strip() for n in env.get("DMQ_CLUSTERS", "").split(",") if n.strip()]
    clusters = tuple(dict.fromkeys([DEFAULT_CLUSTER, *names]))
    return {"clusters": clusters,
            "cluster_endpoints": cluster_endpoints(env.get("DMQ_CLUSTER_ENDPOINTS", ""),
                                                   clusters)}


def cluster_endpoints(text: str, clusters: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """DMQ_CLUSTER_ENDPOINTS as (cluster, endpoint) pairs, in the order given."""
    found: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, equals, url = (part.strip() for part in entry.partition("="))
        if not equals or not name:
            raise ValueError(
                f"DMQ_CLUSTER_ENDPOINTS: {entry!r} is not cluster=http://host:port (for "
                "example c2=http://127.0.0.1:8001).")
        if name == DEFAULT_CLUSTER:
            raise ValueError(
                "DMQ_CLUSTER_ENDPOINTS names the default cluster, whose table stays on the "
                "main store: set DMQ_DYNAMODB_ENDPOINT to move that one.")
        if name not in clusters:
            raise ValueError(
                f"DMQ_CLUSTER_ENDPOINTS names cluster {name!r}, which is not one of "
                f"DMQ_CLUSTERS ({', '.join(clusters)}): add it there too.")
        if name in found:
            raise ValueError(f"DMQ_CLUSTER_ENDPOINTS names cluster {name!r} twice.")
        found[name] = endpoint_url(name, url)
    return tuple(found.items())


def endpoint_url(cluster: str, text: str) -> str:
    """A cluster's endpoint, `http(s)://host:port` (a trailing slash is dropped)."""
    try:
        parsed = urlparse(text)
        port = parsed.port
    except ValueError:
        port = None
        parsed = urlparse("")
    if (parsed.scheme not in ("http", "https") or not parsed.hostname or port is None
            or not 0 < port < 65536 or parsed.path not in ("", "/") or parsed.query
            or parsed.fragment or parsed.params or parsed.username or parsed.password):
        raise ValueError(
            f"DMQ_CLUSTER_ENDPOINTS: the endpoint of cluster {cluster!r}, {text!r}, is not "
            "http(s)://host:port (a port, and no path or query).")
    return text.rstrip("/")
