"""MD5 digests follow AWS's algorithm (vectors published with an independent implementation)."""

from __future__ import annotations

from chalicelib.domain.messages import AttributeValue
from chalicelib.service.checksums import md5_of_attributes, md5_of_body

STRING = {"attribName1": AttributeValue("String", string_value="attribValue 1")}
NUMBER = {
    "customNumberTypeAttrib": AttributeValue(
        "Number.float", string_value="4563442423554324324264524243.32543234"
    )
}
BINARY = {"binaryAttribute": AttributeValue("Binary", binary_value=b"Hello binary world!")}


def test_body_digest_is_md5_of_utf8_text() -> None:
    assert md5_of_body("This is a test") == "ce114e4501d2f4e2dcea3e17b546f339"


def test_string_attribute_digest() -> None:
    assert md5_of_attributes(STRING) == "19e27d4e946b072f3f58da80d94fd778"


def test_custom_number_attribute_digest() -> None:
    assert md5_of_attributes(NUMBER) == "9fe1b90bbd9965bdf77bac517c7d2495"


def test_binary_attribute_digest() -> None:
    assert md5_of_attributes(BINARY) == "31a92b15d92f8db860eda32aceb656c3"


def test_several_attributes_are_digested_in_name_order() -> None:
    assert md5_of_attributes({**BINARY, **NUMBER, **STRING}) == "c932db14a896c663f83c260297d594ff"


def test_no_attributes_means_no_digest() -> None:
    assert md5_of_attributes({}) is None
