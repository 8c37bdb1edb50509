"""botocore's SQS service model, with the Query protocol's names laid over it.

Today's model (AWS JSON 1.0) gives the operations, shapes, members and types; the names a
Query request and an XML response use (`Attribute.N.Name`, `SendMessageBatchRequestEntry.N`,
`<ReceiveMessageResult>`) come from `query_names.py`, kept from botocore's last Query model.
A shape or member newer than that model keeps its JSON name.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from botocore.loaders import Loader
from botocore.model import OperationModel, ServiceModel

from chalicelib.frontend.query_names import RESULT_WRAPPERS, SHAPES


def overlay(model: dict[str, Any]) -> dict[str, Any]:
    """A copy of the JSON model with the Query names and result wrappers set."""
    out = copy.deepcopy(model)
    shapes = out["shapes"]
    for name, facts in SHAPES.items():
        shape = shapes.get(name)
        if shape is None:
            continue
        for key in ("locationName", "flattened"):
            if key in facts:
                shape[key] = facts[key]
        for member, member_facts in facts.get("members", {}).items():
            if member in shape.get("members", {}):
                shape["members"][member].update(member_facts)
        for part in ("member", "key", "value"):
            if part in facts and part in shape:
                shape[part]["locationName"] = facts[part]
    for operation, wrapper in RESULT_WRAPPERS.items():
        op = out["operations"].get(operation)
        if op is not None and "output" in op:
            op["output"]["resultWrapper"] = wrapper
    return out


@lru_cache(maxsize=1)
def service_model() -> ServiceModel:
    """SQS's model as the Query protocol reads it (loaded once)."""
    model = Loader().load_service_model("sqs", "service-2")
    return ServiceModel(overlay(model), service_name="sqs")


def operation(action: str) -> OperationModel | None:
    """The action's model, or None when SQS has no such action."""
    model = service_model()
    if action not in model.operation_names:
        return None
    return model.operation_model(action)
