"""Typed access to request parameters, with SQS's errors for missing or mistyped values."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from chalicelib.domain.messages import AttributeValue
from chalicelib.service.exceptions import InvalidParameterValueError, MissingParameterError


class Params:
    """The decoded parameters of one request."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    @property
    def data(self) -> Mapping[str, Any]:
        """Every parameter as sent."""
        return self._data

    def raw(self, name: str) -> Any:
        """The value as sent, or None."""
        return self._data.get(name)

    def required_str(self, name: str) -> str:
        """A string that must be present."""
        value = self._data.get(name)
        if value is None:
            raise MissingParameterError(f"The request must contain the parameter {name}.")
        if not isinstance(value, str):
            raise InvalidParameterValueError(f"Value for parameter {name} must be a string.")
        return value

    def optional_str(self, name: str) -> str | None:
        """A string, or None when absent."""
        if self._data.get(name) is None:
            return None
        return self.required_str(name)

    def optional_int(self, name: str) -> int | None:
        """An integer (JSON number or digit string), or None when absent."""
        value = self._data.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise InvalidParameterValueError(f"Value {value} for parameter {name} is invalid.")
        try:
            return int(value)
        except ValueError as exc:
            raise InvalidParameterValueError(
                f"Value {value} for parameter {name} is invalid. Reason: Must be an integer."
            ) from exc

    def str_map(self, name: str) -> dict[str, str]:
        """A map of strings to strings (attributes, tags); empty when absent."""
        value = self._data.get(name) or {}
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str | int | bool) for k, v in value.items()
        ):
            raise InvalidParameterValueError(
                f"Value for parameter {name} must be a map of strings."
            )
        return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}

    def str_list(self, name: str) -> list[str]:
        """A list of strings; empty when absent."""
        value = self._data.get(name) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidParameterValueError(
                f"Value for parameter {name} must be a list of strings."
            )
        return list(value)

    def entries(self, name: str) -> list[Params]:
        """A list of structures (batch entries)."""
        value = self._data.get(name) or []
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise InvalidParameterValueError(f"Value for parameter {name} must be a list.")
        return [Params(v) for v in value]

    def message_attributes(self, name: str) -> dict[str, AttributeValue]:
        """MessageAttributes or MessageSystemAttributes: name -> typed value."""
        value = self._data.get(name) or {}
        if not isinstance(value, dict):
            raise InvalidParameterValueError(f"Value for parameter {name} must be a map.")
        return {key: _attribute(key, spec) for key, spec in value.items()}


def _attribute(name: str, spec: Any) -> AttributeValue:
    if not isinstance(spec, dict):
        raise InvalidParameterValueError(f"Message attribute '{name}' must be a structure.")
    data_type = spec.get("DataType")
    if not isinstance(data_type, str) or not data_type:
        raise InvalidParameterValueError(
            f"The message attribute '{name}' must contain a non-empty message attribute type."
        )
    if data_type.split(".", 1)[0] == "Binary":
        raw = spec.get("BinaryValue")
        try:
            binary = base64.b64decode(raw, validate=True) if isinstance(raw, str) else None
        except (binascii.Error, ValueError) as exc:
            raise InvalidParameterValueError(
                f"Message attribute '{name}' has a BinaryValue that is not base64."
            ) from exc
        return AttributeValue(data_type, binary_value=binary)
    string = spec.get("StringValue")
    return AttributeValue(data_type, string_value=string if isinstance(string, str) else None)
