"""GIVEN DMQ_CLUSTER_ENDPOINTS WHEN the settings are read THEN each named cluster gets its
own endpoint, the others none, and a bad value is refused with one sentence that says
what to fix."""

from __future__ import annotations

import pytest

from chalicelib.settings import ConfigurationError, Settings
from chalicelib.settings_clusters import cluster_endpoints

CLUSTERS = ("default", "c2", "c3")


def _settings(endpoints: str, clusters: str = "c2,c3") -> Settings:
    return Settings.from_env({"DMQ_CLUSTERS": clusters, "DMQ_CLUSTER_ENDPOINTS": endpoints})


def test_named_clusters_get_their_endpoints_and_the_others_none() -> None:
    settings = _settings(" c2=http://127.0.0.1:8001/ , c3=https://ddb.example.com:443")
    assert settings.clusters == CLUSTERS
    assert settings.cluster_endpoints == (("c2", "http://127.0.0.1:8001"),
                                          ("c3", "https://ddb.example.com:443"))
    assert settings.cluster_endpoint("c2") == "http://127.0.0.1:8001"
    assert settings.cluster_endpoint("c3") == "https://ddb.example.com:443"
    assert settings.cluster_endpoint("default") is None


def test_unset_or_empty_means_every_cluster_on_the_main_endpoint() -> None:
    for text in ("", " ", ",,"):
        settings = _settings(text)
        assert settings.cluster_endpoints == ()
        assert all(settings.cluster_endpoint(c) is None for c in CLUSTERS)
    assert Settings.from_env({}).clusters == ("default",)
    assert Settings().cluster_endpoint("default") is None


def test_clusters_keep_their_order_and_the_default_first() -> None:
    assert _settings("", "c3, default ,c2,c3").clusters == ("default", "c3", "c2")


@pytest.mark.parametrize(("text", "clusters", "says"), [
    ("c9=http://127.0.0.1:8001", "c2", "names cluster 'c9', which is not one of DMQ_CLUSTERS "
                                       "(default, c2): add it there too."),
    ("c2=http://127.0.0.1:8001", "", "names cluster 'c2', which is not one of DMQ_CLUSTERS "
                                     "(default)"),
    ("default=http://127.0.0.1:8001", "c2", "names the default cluster, whose table stays "
                                            "on the main store"),
    ("c2=http://a:1,c2=http://b:2", "c2", "names cluster 'c2' twice."),
    ("c2", "c2", "'c2' is not cluster=http://host:port"),
    ("=http://127.0.0.1:8001", "c2", "is not cluster=http://host:port"),
    ("c2=", "c2", "the endpoint of cluster 'c2', '', is not http(s)://host:port"),
    ("c2=127.0.0.1:8001", "c2", "is not http(s)://host:port"),
    ("c2=ftp://127.0.0.1:8001", "c2", "is not http(s)://host:port"),
    ("c2=http://127.0.0.1", "c2", "'http://127.0.0.1', is not http(s)://host:port (a port"),
    ("c2=http://127.0.0.1:0", "c2", "is not http(s)://host:port"),
    ("c2=http://127.0.0.1:99999", "c2", "is not http(s)://host:port"),
    ("c2=http://127.0.0.1:port", "c2", "is not http(s)://host:port"),
    ("c2=http://:8001", "c2", "is not http(s)://host:port"),
    ("c2=http://127.0.0.1:8001/tables", "c2", "no path or query"),
    ("c2=http://127.0.0.1:8001?x=1", "c2", "is not http(s)://host:port"),
    ("c2=http://user:pw@127.0.0.1:8001", "c2", "is not http(s)://host:port"),
])
def test_a_bad_value_is_one_sentence_naming_the_setting(text: str, clusters: str,
                                                        says: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        _settings(text, clusters)
    message = str(refused.value)
    assert message.startswith("DMQ_CLUSTER_ENDPOINTS")
    assert says in message
    assert message.endswith(".") and "\n" not in message


def test_the_parser_alone_returns_pairs_in_the_order_given() -> None:
    assert cluster_endpoints("c3=http://h:3,c2=http://h:2", CLUSTERS) == (
        ("c3", "http://h:3"), ("c2", "http://h:2"))
    with pytest.raises(ValueError, match="which is not one of DMQ_CLUSTERS"):
        cluster_endpoints("c4=http://h:4", CLUSTERS)
