"""GIVEN the local server's gateway WHEN it makes the Lambda context of a request THEN the
context has every field chalice's local one has, with the configured function, memory and
timeout, and a request id of its own."""

from __future__ import annotations

import uuid

from chalice import Chalice
from chalice.config import Config
from chalice.local import LambdaContext

from dmqlocal.connection import ConnectionGateway


def test_the_lambda_context_has_chalices_fields_and_a_fresh_request_id() -> None:
    config = Config.create(app_name="gateway-test", lambda_timeout=30, lambda_memory_size=512)
    gateway = ConnectionGateway(Chalice(app_name="gateway-test"), config)
    made = [gateway._generate_lambda_context() for _ in range(3)]  # what serving uses
    chalices = LambdaContext(str(config.function_name), 512, max_runtime_ms=30_000)
    assert set(vars(made[0])) == set(vars(chalices))
    for context in made:
        assert isinstance(context, LambdaContext)
        assert (context.function_name, context.memory_limit_in_mb, context.function_version) \
            == (chalices.function_name, 512, "$LATEST")
        assert uuid.UUID(context.aws_request_id).version == 4
        assert 29_000 < context.get_remaining_time_in_millis() <= 30_000
    assert len({c.aws_request_id for c in made}) == 3


def test_a_gateway_without_settings_makes_the_context_chalices_would() -> None:
    # as the server makes it
    gateway = ConnectionGateway(Chalice(app_name="gateway-test"), Config())
    ours = gateway._generate_lambda_context()
    chalices = super(ConnectionGateway, gateway)._generate_lambda_context()
    same = ("function_name", "memory_limit_in_mb", "_max_runtime", "function_version")
    assert [getattr(ours, name) for name in same] == [getattr(chalices, name) for name in same]
