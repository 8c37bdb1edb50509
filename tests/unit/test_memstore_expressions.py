"""DynamoDB's expression language for the in-memory store: conditions and filters,
updates, projections, key conditions, numbers and the orderings of key values."""

from __future__ import annotations

import base64
import copy
import time
from typing import Any

import pytest

from dmqlocal.memstore.expressions import (
    ExpressionError,
    KeyCondition,
    apply_update,
    check_condition,
    equal,
    key_condition,
    normalize_number,
    project,
    range_matches,
    references,
    sort_value,
    updated_names,
)

AV = dict[str, Any]


def s(text: str) -> AV:
    return {"S": text}


def n(text: str) -> AV:
    return {"N": text}


def b(raw: bytes) -> AV:
    return {"B": base64.b64encode(raw).decode()}


def bs(*raws: bytes) -> AV:
    return {"BS": [base64.b64encode(raw).decode() for raw in raws]}


def holds(expr: str, item: dict[str, AV] | None, values: dict[str, AV] | None = None,
          names: dict[str, str] | None = None) -> bool:
    return check_condition(expr, item, names, values)


def update(expr: str, item: dict[str, AV], values: dict[str, AV] | None = None,
           names: dict[str, str] | None = None) -> dict[str, AV]:
    return apply_update(expr, item, names, values)


# ---------------------------------------------------------------------------------------
# Comparisons


def test_equality_covers_every_type() -> None:
    pairs = [
        (s("x"), s("x")), (n("1.0"), n("1")), (n("-0"), n("0")), (b(b"ab"), b(b"ab")),
        ({"BOOL": True}, {"BOOL": True}), ({"NULL": True}, {"NULL": True}),
        ({"SS": ["a", "b"]}, {"SS": ["b", "a"]}), ({"NS": ["1", "2.50"]}, {"NS": ["2.5", "1"]}),
        (bs(b"x", b"y"), bs(b"y", b"x")),
        ({"L": [n("1"), s("a")]}, {"L": [n("1.00"), s("a")]}),
        ({"M": {"a": n("2"), "b": {"L": []}}}, {"M": {"b": {"L": []}, "a": n("2.0")}}),
    ]
    for left, right in pairs:
        assert equal(left, right), (left, right)
        assert holds("a = :v", {"a": left}, {":v": right})
        assert not holds("a <> :v", {"a": left}, {":v": right})


def test_values_of_different_types_or_contents_are_unequal() -> None:
    pairs = [
        (s("1"), n("1")), (n("1"), n("2")), ({"SS": ["a"]}, {"SS": ["a", "b"]}),
        ({"L": [n("1")]}, {"L": [n("1"), n("2")]}), ({"M": {"a": n("1")}}, {"M": {"b": n("1")}}),
        ({"BOOL": True}, {"BOOL": False}), ({"SS": ["1"]}, {"NS": ["1"]}),
        ({"L": [n("1")]}, {"L": [s("1")]}),
    ]
    for left, right in pairs:
        assert not equal(left, right), (left, right)
        assert not holds("a = :v", {"a": left}, {":v": right})
        assert holds("a <> :v", {"a": left}, {":v": right})


def test_a_missing_attribute_equals_nothing_and_is_unequal_to_everything() -> None:
    # As DynamoDB does: `=` and every ordering are false, `<>` is true, even between two
    # missing attributes.
    item = {"a": n("1")}
    assert not holds("q = :v", item, {":v": n("1")})
    assert not holds("q = z", item)
    assert holds("q <> :v", item, {":v": n("1")})
    assert holds("q <> z", item)
    for op in ("<", "<=", ">", ">="):
        assert not holds(f"q {op} :v", item, {":v": n("1")})
        assert not holds(f":v {op} q", item, {":v": n("1")})
        assert not holds(f"q {op} z", item)


@pytest.mark.parametrize(("op", "low", "high"), [
    ("<", True, False), ("<=", True, False), (">", False, True), (">=", False, True),
])
def test_orderings_on_numbers_strings_and_binary(op: str, low: bool, high: bool) -> None:
    item = {"a": n("10"), "b": s("cat"), "c": b(b"cat")}
    # Numbers numerically (10 > 9), strings and binaries by their bytes.
    assert holds(f"a {op} :v", item, {":v": n("11")}) is low
    assert holds(f"a {op} :v", item, {":v": n("9")}) is high
    assert holds(f"b {op} :v", item, {":v": s("dog")}) is low
    assert holds(f"b {op} :v", item, {":v": s("aardvark")}) is high
    assert holds(f"c {op} :v", item, {":v": b(b"dog")}) is low
    assert holds(f"c {op} :v", item, {":v": b(b"aardvark")}) is high
    equal_is_true = op in ("<=", ">=")
    assert holds(f"a {op} :v", item, {":v": n("10.0")}) is equal_is_true


def test_orderings_across_types_are_false_not_errors() -> None:
    item = {"a": n("1"), "x": {"L": [n("1")]}}
    for op in ("<", "<=", ">", ">="):
        assert not holds(f"a {op} :v", item, {":v": s("17")})
        assert not holds(f"x {op} :v", item, {":v": n("1")})
        assert not holds(f":v {op} x", item, {":v": n("1")})


def test_ordering_against_a_constant_list_is_a_validation_error() -> None:
    with pytest.raises(ExpressionError, match=r"Incorrect operand type for operator or function"):
        holds("a < :v", {"a": n("1")}, {":v": {"L": [n("1")]}})
    with pytest.raises(ExpressionError, match=r"^Invalid ConditionExpression: "):
        holds(":v >= a", {"a": n("1")}, {":v": {"M": {}}})


def test_between() -> None:
    item = {"a": n("5"), "s": s("cat"), "x": n("0"), "y": n("9")}
    values = {":lo": n("1"), ":hi": n("5.0")}
    assert holds("a BETWEEN :lo AND :hi", item, values)
    assert holds("a between x and y", item)
    assert holds("s BETWEEN :a AND :b", item, {":a": s("cat"), ":b": s("dog")})
    assert not holds("a BETWEEN :lo AND :hi", item, {":lo": n("6"), ":hi": n("7")})
    assert not holds("q BETWEEN :lo AND :hi", item, values)
    assert not holds("s BETWEEN :lo AND :hi", item, values)
    assert not holds("a BETWEEN y AND x", item)  # bounds from the item: simply false


def test_between_bounds_given_as_values_must_be_ordered_and_of_one_type() -> None:
    with pytest.raises(ExpressionError, match=r"upper bound to be greater than or equal"):
        holds("a BETWEEN :lo AND :hi", {"a": n("1")}, {":lo": n("2"), ":hi": n("1")})
    with pytest.raises(ExpressionError, match=r"same data type for lower and upper bounds"):
        holds("a BETWEEN :lo AND :hi", {"a": n("1")}, {":lo": n("2"), ":hi": s("dog")})


def test_in() -> None:
    item = {"a": n("74"), "b": {"SS": ["x", "y"]}}
    assert holds("a IN (:x, :y)", item, {":x": s("dog"), ":y": n("74.0")})
    assert not holds("a IN (:x, :y)", item, {":x": s("dog"), ":y": n("75")})
    assert holds("b in (:v)", item, {":v": {"SS": ["y", "x"]}})
    assert not holds("q IN (:x)", item, {":x": n("1")})
    many = {f":v{i}": n(str(i)) for i in range(100)}
    assert holds(f"a IN ({', '.join(many)})", item, many)


def test_in_takes_one_to_a_hundred_operands() -> None:
    many = {f":v{i}": n(str(i)) for i in range(101)}
    with pytest.raises(ExpressionError, match=r"too many operands"):
        holds(f"a IN ({', '.join(many)})", {"a": n("1")}, many)
    with pytest.raises(ExpressionError, match=r"Syntax error"):
        holds("a IN ()", {"a": n("1")})


# ---------------------------------------------------------------------------------------
# Logic


def test_and_or_not_with_precedence_and_parentheses() -> None:
    item = {"a": n("1"), "b": n("2"), "c": n("3")}
    assert holds("a < b AND b < c", item)
    assert not holds("a < b AND c < b", item)
    assert holds("a < b aNd b < c", item)
    assert holds("b < a OR b < c", item)
    assert not holds("b < a oR c < b", item)
    assert holds("a < b OR c < b AND b < c", item)  # AND binds tighter than OR
    assert not holds("(a < b OR c < b) AND c < b", item)
    assert not holds("NOT a < b AND c < b", item)  # NOT binds tighter than AND
    assert holds("nOt b < a", item)
    assert holds("NOT NOT NOT NOT a < b", item)
    assert holds("b BETWEEN a AND c AND a < b", item)
    assert holds("(a < b OR b < a) AND (b < c AND (a < b OR b < c))", item)


def test_a_parenthesised_operand_is_an_operand() -> None:
    assert holds("(a) = :v", {"a": n("1")}, {":v": n("1")})
    assert holds("((a = :v))", {"a": n("1")}, {":v": n("1")})


# ---------------------------------------------------------------------------------------
# Functions


def test_attribute_exists_and_not_exists() -> None:
    item = {"a": n("1"), "m": {"M": {"x": {"L": [n("0"), {"M": {"y": {"NULL": True}}}]}}}}
    assert holds("attribute_exists(a)", item)
    assert not holds("attribute_exists(z)", item)
    assert holds("attribute_not_exists(z)", item)
    assert not holds("attribute_not_exists (a)", item)
    assert holds("attribute_exists(m.x[1].y)", item)  # NULL counts as present
    assert holds("attribute_exists(#m.#x[0])", item, names={"#m": "m", "#x": "x"})
    assert holds("attribute_not_exists(m.x[2])", item)
    assert holds("attribute_not_exists(a.b)", item)
    assert holds("attribute_not_exists(sk)", None)
    assert holds("attribute_not_exists(sk)", {})


def test_attribute_exists_wants_a_path() -> None:
    with pytest.raises(ExpressionError, match=r"requires a document path"):
        holds("attribute_exists(:v)", {}, {":v": n("1")})


def test_attribute_type_for_every_type() -> None:
    examples = {"S": s("x"), "SS": {"SS": ["x"]}, "N": n("1"), "NS": {"NS": ["1"]},
                "B": b(b"x"), "BS": bs(b"x"), "BOOL": {"BOOL": False}, "NULL": {"NULL": True},
                "L": {"L": []}, "M": {"M": {}}}
    kinds = list(examples)
    for index, (kind, value) in enumerate(examples.items()):
        other = kinds[(index + 1) % len(kinds)]
        assert holds("attribute_type(a, :t)", {"a": value}, {":t": s(kind)})
        assert not holds("attribute_type(a, :t)", {"a": value}, {":t": s(other)})
    assert not holds("attribute_type(z, :t)", {}, {":t": s("S")})


def test_attribute_type_refuses_unknown_type_names() -> None:
    with pytest.raises(ExpressionError, match=r"Invalid attribute type name found; type: DOG"):
        holds("attribute_type(a, :t)", {"a": n("1")}, {":t": s("DOG")})
    with pytest.raises(ExpressionError, match=r"attribute_type"):
        holds("attribute_type(a, b)", {"a": n("1"), "b": s("N")})


def test_begins_with() -> None:
    item = {"a": s("hello"), "b": b(b"hi there"), "c": n("5")}
    assert holds("begins_with(a, :p)", item, {":p": s("hell")})
    assert not holds("begins_with(a, :p)", item, {":p": s("dog")})
    assert holds("begins_with(b, :p)", item, {":p": b(b"hi")})
    assert not holds("begins_with(b, :p)", item, {":p": s("hi")})
    assert not holds("begins_with(c, :p)", item, {":p": s("5")})  # item side: just false
    assert not holds("begins_with(z, :p)", item, {":p": s("x")})
    assert holds("begins_with(:whole, a)", item, {":whole": s("hellohi")})


def test_begins_with_a_number_value_is_a_validation_error() -> None:
    with pytest.raises(ExpressionError, match=r"operator or function: begins_with"):
        holds("begins_with(a, :p)", {"a": s("1")}, {":p": n("1")})


def test_contains() -> None:
    item = {"a": s("hello"), "ss": {"SS": ["x", "y"]}, "ns": {"NS": ["2", "4.5"]},
            "bs": bs(b"one", b"two"), "bin": b(b"hi there"),
            "l": {"L": [s("hi"), {"NS": ["1", "2"]}, {"L": [n("3")]}]}}
    assert holds("contains(a, :v)", item, {":v": s("ell")})
    assert not holds("contains(a, :v)", item, {":v": s("dog")})
    assert holds("contains(ss, :v)", item, {":v": s("y")})
    assert not holds("contains(ss, :v)", item, {":v": s("z")})
    assert holds("contains(ns, :v)", item, {":v": n("4.50")})
    assert not holds("contains(ns, :v)", item, {":v": s("2")})
    assert holds("contains(bs, :v)", item, {":v": b(b"two")})
    assert holds("contains(bin, :v)", item, {":v": b(b"the")})
    assert holds("contains(l, :v)", item, {":v": {"NS": ["2", "1"]}})
    assert holds("contains(l, :v)", item, {":v": {"L": [n("3.0")]}})
    assert not holds("contains(l, :v)", item, {":v": s("hello")})
    assert not holds("contains(z, :v)", item, {":v": s("x")})


def test_size_of_every_sized_type() -> None:
    item = {"s": s("héllo"), "b": b(b"hi there"), "ss": {"SS": ["a", "b", "c"]},
            "ns": {"NS": ["1"]}, "bs": bs(b"x", b"y"), "l": {"L": [n("1"), s("a")]},
            "m": {"M": {"x": n("1"), "y": n("2")}}, "five": n("5")}
    sizes = {"s": 5, "b": 8, "ss": 3, "ns": 1, "bs": 2, "l": 2, "m": 2}
    for name, size in sizes.items():
        assert holds(f"size({name}) = :v", item, {":v": n(str(size))}), name
    assert holds("size(s) = five", item)
    assert holds("size(s) <> :v", item, {":v": n("4")})
    assert holds("size(s) < :v", item, {":v": n("7")})
    assert holds("size(s) >= :v", item, {":v": n("5")})
    assert holds("size(l) BETWEEN :a AND :b", item, {":a": n("1"), ":b": n("3")})
    assert holds("size(m) IN (:a, :b)", item, {":a": n("7"), ":b": n("2")})
    assert not holds("size(s) = :v", item, {":v": s("5")})


def test_size_of_a_missing_or_unsized_attribute_makes_the_comparison_false() -> None:
    item = {"five": n("5"), "t": {"BOOL": True}}
    for op in ("=", "<>", "<", "<=", ">", ">="):
        assert not holds(f"size(q) {op} :v", item, {":v": n("1")}), op
        assert not holds(f"size(five) {op} :v", item, {":v": n("1")}), op
        assert not holds(f"size(t) {op} :v", item, {":v": n("1")}), op
    assert holds("NOT size(q) = :v", item, {":v": n("1")})


def test_functions_used_the_wrong_way_are_errors() -> None:
    cases = {
        "size(a)": "not allowed to be used this way in an expression; function: size",
        "attribute_exists(a) < :v": "function: attribute_exists",
        "if_not_exists(a, a) = :v": "not allowed",
        "list_append(a, a) = :v": "not allowed",
        "dog(a) = :v": "Invalid function name; function: dog",
        "ATTRIBUTE_EXISTS(a)": "Invalid function name; function: ATTRIBUTE_EXISTS",
        "size(a, a) = :v": "number of operands: 2",
        "contains(a)": "operator or function: contains, number of operands: 1",
        "size(:v) = :v": "operator or function: size, operand type: N",
    }
    for expr, message in cases.items():
        with pytest.raises(ExpressionError, match=message):
            holds(expr, {"a": s("x")}, {":v": n("1")})


# ---------------------------------------------------------------------------------------
# Paths, placeholders and errors


def test_nested_paths_and_placeholders() -> None:
    item = {"a": {"M": {"b": {"L": [n("0"), n("1"), {"M": {"c": s("deep")}}]}}},
            "and": {"M": {"or": n("2")}}}
    names = {"#a": "a", "#and": "and", "#or": "or"}
    assert holds("#a.b[2].c = :v", item, {":v": s("deep")}, names)
    assert holds("a.b[1] < a.b[2].c OR a.b[0] < a.b[1]", item)
    assert holds("#and.#or = :two", item, {":two": n("2")}, names)
    assert not holds("a.b[7] = :v", item, {":v": n("0")})
    assert not holds("a.b.c = :v", item, {":v": n("0")})
    assert not holds("a[0] = :v", item, {":v": n("0")})


def test_undefined_placeholders_are_reported() -> None:
    with pytest.raises(ExpressionError, match=r"^Invalid ConditionExpression: An expression "
                       r"attribute name used in the document path is not defined; attribute "
                       r"name: #x$"):
        holds("#x = :v", {}, {":v": n("1")})
    with pytest.raises(ExpressionError, match=r"An expression attribute value used in "
                       r"expression is not defined; attribute value: :w$"):
        holds("a = :v OR a = :w", {}, {":v": n("1")})
    with pytest.raises(ExpressionError, match=r"^Invalid UpdateExpression: .*attribute name: #y"):
        update("SET #y = :v", {}, {":v": n("1")})
    with pytest.raises(ExpressionError, match=r"^Invalid UpdateExpression: .*attribute value: :v"):
        update("SET a = :v", {})
    with pytest.raises(ExpressionError, match=r"^Invalid ProjectionExpression: .*name: #p"):
        project("#p", {}, None)
    with pytest.raises(ExpressionError, match=r"^Invalid KeyConditionExpression: .*value: :pk"):
        key_condition("pk = :pk", None, None, "pk", None)


def test_syntax_errors_name_the_expression_and_the_token() -> None:
    cases = ["a = = :v", "a != :v", "a =", "AND a = :v", "a = :v AND", "(a = :v", "a.0 = :v",
             "a[x] = :v", "a :v", "a BETWEEN :x :y", "and = :v"]
    for expr in cases:
        with pytest.raises(ExpressionError,
                           match=r'^Invalid ConditionExpression: Syntax error; token: "'):
            holds(expr, {}, {":v": n("1"), ":x": n("1"), ":y": n("2")})
    with pytest.raises(ExpressionError, match=r'^Invalid FilterExpression: Syntax error; '
                       r'token: "=", near: ":v ="$'):
        check_condition("a = :v =", {}, None, {":v": n("1")}, what="FilterExpression")
    with pytest.raises(ExpressionError, match=r'token: "<EOF>", near: "AND"$'):
        check_condition("a = :v AND", {}, None, {":v": n("1")}, what="FilterExpression")
    with pytest.raises(ExpressionError, match=r"The expression can not be empty"):
        holds("  ", {})


def test_expressions_in_the_form_pynamodb_writes_them() -> None:
    item = {"pk": s("q"), "n": n("3"), "tags": {"SS": ["a", "b"]}}
    names = {"#0": "pk", "#1": "n", "#2": "tags"}
    assert holds("(attribute_not_exists (#0))", {}, names={"#0": "pk"})
    assert not holds("(attribute_not_exists (#0))", item, names={"#0": "pk"})
    assert holds("#0 IN (:0, :1)", item, {":0": s("p"), ":1": s("q")}, {"#0": "pk"})
    assert holds("size (#0) > :0", item, {":0": n("1")}, {"#0": "tags"})
    assert holds("(#0 = :0 AND (#1 > :1 OR contains (#2, :2)))", item,
                 {":0": s("q"), ":1": n("5"), ":2": s("b")}, names)
    assert holds("NOT (#0 = :0)", item, {":0": s("x")}, {"#0": "pk"})
    assert holds("begins_with (#0, :0)", item, {":0": s("q")}, {"#0": "pk"})
    assert holds("attribute_type (#0, :0)", item, {":0": s("SS")}, {"#0": "tags"})
    assert holds("#0 BETWEEN :0 AND :1", item, {":0": n("1"), ":1": n("3")}, {"#0": "n"})


def test_the_queue_conditions() -> None:
    item = {"pk": s("q"), "sk": s("m"), "visible_at": n("100"), "last": s("r1"), "tat": n("50")}
    assert holds("visible_at = :seen", item, {":seen": n("100")})
    assert not holds("visible_at = :seen", item, {":seen": n("99")})
    assert holds("visible_at = :seen AND #last = :last", item,
                 {":seen": n("100"), ":last": s("r1")}, {"#last": "last"})
    assert holds("tat >= :lowest", item, {":lowest": n("50")})
    assert not holds("tat >= :lowest", item, {":lowest": n("50.5")})
    assert holds("attribute_not_exists(sk)", None)
    assert not holds("attribute_not_exists(sk)", item)


def test_a_cached_condition_evaluates_quickly() -> None:
    item = {"visible_at": n("100"), "last": s("r1")}
    values = {":seen": n("100"), ":last": s("r1")}
    names = {"#last": "last"}
    started = time.perf_counter()
    for _ in range(10_000):
        assert check_condition("visible_at = :seen AND #last = :last", item, names, values)
    assert time.perf_counter() - started < 1.0


# ---------------------------------------------------------------------------------------
# Updates: SET


def test_set_top_level_nested_and_list_elements() -> None:
    item = {"a": n("1"), "m": {"M": {"x": n("1")}}, "l": {"L": [n("0"), n("1")]}}
    new = update("SET a = :v, m.y = :v, m.x = :w, l[1] = :w, l[9] = :v", item,
                 {":v": s("v"), ":w": s("w")})
    assert new == {"a": s("v"), "m": {"M": {"x": s("w"), "y": s("v")}},
                   "l": {"L": [n("0"), s("w"), s("v")]}}  # an index past the end appends


def test_set_from_other_attributes_uses_the_item_as_it_was() -> None:
    item = {"a": n("1"), "b": n("2")}
    assert update("SET a = b, b = a", item) == {"a": n("2"), "b": n("1")}
    with pytest.raises(ExpressionError, match=r"^The provided expression refers to an attribute "
                       r"that does not exist in the item$"):
        update("SET a = q", item)


def test_set_into_a_missing_parent_is_invalid() -> None:
    for expr in ("SET q.x = :v", "SET a.x = :v", "SET l[5].x = :v", "SET a[0] = :v"):
        with pytest.raises(ExpressionError, match=r"^The document path provided in the update "
                           r"expression is invalid for update$"):
            update(expr, {"a": n("1"), "l": {"L": []}}, {":v": n("1")})


def test_set_arithmetic() -> None:
    item = {"tat": n("50"), "f": n("0.1"), "s": s("x")}
    assert update("SET tat = tat - :step", item, {":step": n("7")})["tat"] == n("43")
    assert update("SET tat = tat + :step", item, {":step": n("-60")})["tat"] == n("-10")
    assert update("SET f = f + :v", item, {":v": n("0.2")})["f"] == n("0.3")
    assert update("SET g = :a + :b", item, {":a": n("1.25"), ":b": n("0.75")})["g"] == n("2")
    assert update("SET g = f - f", item)["g"] == n("0")
    with pytest.raises(ExpressionError, match=r"^An operand in the update expression has an "
                       r"incorrect data type$"):
        update("SET g = s + :v", item, {":v": n("1")})
    with pytest.raises(ExpressionError, match=r"refers to an attribute that does not exist"):
        update("SET g = q - :v", item, {":v": n("1")})


def test_arithmetic_keeps_to_the_number_limits() -> None:
    big = n("9" * 38)
    with pytest.raises(ExpressionError, match=r"more than 38 significant digits"):
        update("SET a = :a + :b", {}, {":a": big, ":b": n("0.1")})
    with pytest.raises(ExpressionError, match=r"Number overflow"):
        update("SET a = :a + :b", {}, {":a": n("9.9E+125"), ":b": n("9.9E+125")})


def test_the_queue_updates() -> None:
    item = {"pk": s("q"), "visible_at": n("100"), "rc": n("1"), "tat": n("50"),
            "ids": {"SS": ["m1", "m2", "m3"]}}
    seen = {":seen": n("100")}
    assert holds("visible_at = :seen", item, seen)
    claimed = update("SET visible_at = :until ADD rc :one", item,
                     {":until": n("130"), ":one": n("1")})
    assert claimed["visible_at"] == n("130") and claimed["rc"] == n("2")
    assert not holds("visible_at = :seen", claimed, seen)
    assert holds("tat >= :lowest", item, {":lowest": n("40")})
    assert update("SET tat = tat - :step", item, {":step": n("10")})["tat"] == n("40")
    assert update("DELETE ids :ids", item, {":ids": {"SS": ["m1", "m3"]}})["ids"] == {
        "SS": ["m2"]}


def test_if_not_exists() -> None:
    item = {"n": n("3")}
    values = {":zero": n("0"), ":one": n("1")}
    assert update("SET n = if_not_exists(n, :zero) + :one", item, values)["n"] == n("4")
    assert update("SET m = if_not_exists(m, :zero) + :one", item, values)["m"] == n("1")
    assert update("SET m = if_not_exists(m, n)", item)["m"] == n("3")
    with pytest.raises(ExpressionError, match=r"requires a document path; operator or "
                       r"function: if_not_exists"):
        update("SET m = if_not_exists(:zero, :one)", item, values)


def test_list_append() -> None:
    item = {"refs": {"L": [s("a")]}, "s": s("x")}
    values = {":more": {"L": [s("b"), s("c")]}}
    assert update("SET refs = list_append(refs, :more)", item, values)["refs"] == {
        "L": [s("a"), s("b"), s("c")]}
    assert update("SET refs = list_append(:more, refs)", item, values)["refs"] == {
        "L": [s("b"), s("c"), s("a")]}
    assert update("SET r = list_append(if_not_exists(r, :more), :more)", item, values)[
        "r"] == {"L": [s("b"), s("c"), s("b"), s("c")]}
    with pytest.raises(ExpressionError, match=r"incorrect data type"):
        update("SET refs = list_append(s, :more)", item, values)
    with pytest.raises(ExpressionError, match=r"does not exist in the item"):
        update("SET refs = list_append(q, :more)", item, values)


def test_set_refuses_an_empty_set() -> None:
    with pytest.raises(ExpressionError, match=r"may not be empty"):
        update("SET a = :v", {}, {":v": {"SS": []}})


def test_update_functions_outside_their_place() -> None:
    with pytest.raises(ExpressionError, match=r"Invalid function name; function: nope"):
        update("SET a = nope(b)", {"b": n("1")})
    with pytest.raises(ExpressionError, match=r"not allowed in an update expression; function: "
                       r"size"):
        update("SET a = size(b)", {"b": s("x")})
    with pytest.raises(ExpressionError, match=r"function: list_append, number of operands: 1"):
        update("SET a = list_append(b)", {"b": {"L": []}})


# ---------------------------------------------------------------------------------------
# Updates: REMOVE, ADD, DELETE


def test_remove() -> None:
    item = {"a": n("1"), "b": n("2"), "m": {"M": {"x": n("1"), "y": n("2")}},
            "l": {"L": [s("0"), s("1"), s("2"), s("3")]}}
    assert update("REMOVE a, q, m.x, m.q", item) == {
        "b": n("2"), "m": {"M": {"y": n("2")}}, "l": item["l"]}
    assert update("REMOVE l[1]", item)["l"] == {"L": [s("0"), s("2"), s("3")]}
    assert update("REMOVE l[0], l[2]", item)["l"] == {"L": [s("1"), s("3")]}
    assert update("REMOVE l[9], q.r", item) == item


def test_add_numbers() -> None:
    item = {"rc": n("1"), "s": s("x")}
    assert update("ADD rc :one", item, {":one": n("1")})["rc"] == n("2")
    assert update("ADD rc :v", item, {":v": n("-1.5")})["rc"] == n("-0.5")
    assert update("ADD fresh :v", item, {":v": n("1.50")})["fresh"] == n("1.5")
    with pytest.raises(ExpressionError, match=r"incorrect data type"):
        update("ADD s :one", item, {":one": n("1")})


def test_add_sets() -> None:
    item = {"ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}, "bs": bs(b"x")}
    assert update("ADD ss :v", item, {":v": {"SS": ["b", "c"]}})["ss"] == {"SS": ["a", "b", "c"]}
    assert update("ADD ns :v", item, {":v": {"NS": ["2.0", "3"]}})["ns"] == {
        "NS": ["1", "2", "3"]}
    assert update("ADD bs :v", item, {":v": bs(b"x", b"y")})["bs"] == bs(b"x", b"y")
    assert update("ADD fresh :v", item, {":v": {"SS": ["z"]}})["fresh"] == {"SS": ["z"]}
    with pytest.raises(ExpressionError, match=r"incorrect data type"):
        update("ADD ss :v", item, {":v": {"NS": ["1"]}})


def test_add_refuses_other_types() -> None:
    with pytest.raises(ExpressionError, match=r"^Invalid UpdateExpression: Incorrect operand "
                       r"type for operator or function; operator: ADD, operand type: STRING"):
        update("ADD a :v", {}, {":v": s("x")})
    with pytest.raises(ExpressionError, match=r"operator: ADD, operand type: LIST"):
        update("ADD a :v", {}, {":v": {"L": []}})
    with pytest.raises(ExpressionError, match=r"Syntax error"):
        update("ADD a b", {"b": n("1")})


def test_delete_from_sets() -> None:
    item = {"ids": {"SS": ["a", "b", "c"]}, "ns": {"NS": ["1", "2"]}, "s": s("x")}
    assert update("DELETE ids :v", item, {":v": {"SS": ["a", "z"]}})["ids"] == {
        "SS": ["b", "c"]}
    assert update("DELETE ns :v", item, {":v": {"NS": ["1.0"]}})["ns"] == {"NS": ["2"]}
    assert "ids" not in update("DELETE ids :v", item, {":v": {"SS": ["a", "b", "c"]}})
    assert update("DELETE gone :v", item, {":v": {"SS": ["a"]}}) == item
    with pytest.raises(ExpressionError, match=r"operator: DELETE, operand type: NUMBER"):
        update("DELETE ids :v", item, {":v": n("1")})
    with pytest.raises(ExpressionError, match=r"incorrect data type"):
        update("DELETE s :v", item, {":v": {"SS": ["x"]}})


# ---------------------------------------------------------------------------------------
# Updates: clauses and paths


def test_clauses_in_any_order_and_any_case() -> None:
    item = {"a": n("1"), "b": n("2"), "c": {"SS": ["x"]}, "d": n("0")}
    values = {":v": n("9"), ":x": {"SS": ["x"]}, ":one": n("1")}
    new = update("delete c :x remove b Add d :one sEt a = :v", item, values)
    assert new == {"a": n("9"), "d": n("1")}
    assert update("ADD moved :one SET paced_ms = :v", {}, values) == {
        "moved": n("1"), "paced_ms": n("9")}


def test_each_clause_once() -> None:
    with pytest.raises(ExpressionError, match=r'The "SET" section can only be used once'):
        update("SET a = :v SET b = :v", {}, {":v": n("1")})
    with pytest.raises(ExpressionError, match=r"Syntax error"):
        update("SET a = :v, REMOVE b", {}, {":v": n("1")})
    with pytest.raises(ExpressionError, match=r'^Invalid UpdateExpression: Syntax error; token: '
                       r'"UPDATE"'):
        update("UPDATE a = :v", {}, {":v": n("1")})


def test_overlapping_and_conflicting_paths() -> None:
    with pytest.raises(ExpressionError, match=r"^Invalid UpdateExpression: Two document paths "
                       r"overlap with each other; must remove or rewrite one of these paths; "
                       r"path one: \[a\], path two: \[a\]$"):
        update("SET a = :v REMOVE a", {}, {":v": n("1")})
    with pytest.raises(ExpressionError, match=r"path one: \[a\], path two: \[a, b\]"):
        update("SET a = :v, a.b = :v", {}, {":v": n("1")})
    with pytest.raises(ExpressionError, match=r"path one: \[a\], path two: \[a\]"):
        update("SET #x = :v ADD a :v", {}, {":v": n("1")}, {"#x": "a"})
    with pytest.raises(ExpressionError, match=r"conflict with each other; .*path one: "
                       r"\[a, \[1\]\], path two: \[a, b\]"):
        update("SET a[1] = :v, a.b = :v", {}, {":v": n("1")})


def test_updates_never_mutate_the_item_or_the_values() -> None:
    item: dict[str, AV] = {"m": {"M": {"x": {"L": [n("1"), {"M": {"y": n("2")}}]}, "z": n("0")}},
            "ids": {"SS": ["a", "b"]}, "rc": n("1"), "gone": s("bye")}
    values: dict[str, AV] = {":v": {"M": {"k": {"L": [s("deep")]}}}, ":ids": {"SS": ["b", "c"]},
              ":one": n("1")}
    item_before, values_before = copy.deepcopy(item), copy.deepcopy(values)
    new = update("SET m.x[1].y = :v, m.w = :v ADD ids :ids, rc :one REMOVE gone, m.z",
                 item, values)
    assert item == item_before and values == values_before
    assert new["m"] == {"M": {"x": {"L": [n("1"), {"M": {"y": values[":v"]}}]},
                              "w": values[":v"]}}
    assert new["ids"] == {"SS": ["a", "b", "c"]} and new["rc"] == n("2") and "gone" not in new
    again = update("DELETE ids :ids", new, values)
    assert again["ids"] == {"SS": ["a"]} and new["ids"] == {"SS": ["a", "b", "c"]}


def test_the_update_pynamodb_writes() -> None:
    item = {"pk": s("q"), "n": n("3"), "old": s("x")}
    names = {"#0": "status", "#1": "n", "#2": "old"}
    values = {":0": s("ok"), ":1": n("0")}
    expr = "SET #0 = :0, #1 = if_not_exists (#1, :1) REMOVE #2"
    assert update(expr, item, values, names) == {"pk": s("q"), "n": n("3"), "status": s("ok")}
    assert update("SET #1 = #1 + :1", item, {":1": n("2")}, {"#1": "n"})["n"] == n("5")


def test_updated_names() -> None:
    expr = "SET #0 = :0, m.x = :1 REMOVE #2 ADD c :1 DELETE d.e[0] :2"
    assert updated_names(expr, {"#0": "a", "#2": "b"}) == frozenset({"a", "m", "b", "c", "d"})
    assert updated_names("SET visible_at = :until ADD rc :one", None) == frozenset(
        {"visible_at", "rc"})
    with pytest.raises(ExpressionError, match=r"attribute name: #0"):
        updated_names("SET #0 = :0", None)


# ---------------------------------------------------------------------------------------
# Projections


def test_projection_of_top_level_attributes() -> None:
    item = {"pk": s("q"), "sk": s("m"), "body": s("hi"), "rc": n("2")}
    assert project("pk, sk", item, None) == {"pk": s("q"), "sk": s("m")}
    assert project("#0, #1, missing", item, {"#0": "rc", "#1": "body"}) == {
        "rc": n("2"), "body": s("hi")}
    assert project("visible_at", item, None) == {}


def test_projection_of_nested_paths_keeps_their_containers() -> None:
    item: dict[str, AV] = {
        "m": {"M": {"a": n("1"), "b": n("2"), "c": {"M": {"d": n("4"), "e": n("5")}}}},
        "l": {"L": [s("0"), s("1"), {"M": {"x": s("x"), "y": s("y")}}, s("3")]}}
    assert project("m.a, m.c.e", item, None) == {
        "m": {"M": {"a": n("1"), "c": {"M": {"e": n("5")}}}}}
    assert project("l[3], l[1], l[7]", item, None) == {"l": {"L": [s("1"), s("3")]}}
    assert project("l[2].y", item, None) == {"l": {"L": [{"M": {"y": s("y")}}]}}
    assert project("m.q, l[9], m.a.b", item, None) == {}


def test_projection_paths_must_not_overlap() -> None:
    with pytest.raises(ExpressionError, match=r"^Invalid ProjectionExpression: Two document "
                       r"paths overlap.*path one: \[top\], path two: \[top\]"):
        project("top, top", {}, None)
    with pytest.raises(ExpressionError, match=r"path one: \[obj\], path two: \[obj, a\]"):
        project("obj, obj.a", {}, None)
    with pytest.raises(ExpressionError, match=r'^Invalid ProjectionExpression: Syntax error'):
        project("a,, b", {}, None)


# ---------------------------------------------------------------------------------------
# Key conditions


def test_key_conditions_the_queue_uses() -> None:
    values = {":pk": s("q"), ":p": s("m#"), ":now": n("10"), ":later": n("20")}
    assert key_condition("pk = :pk", None, {":pk": s("q")}, "pk", "sk") == KeyCondition(
        s("q"), None, ())
    assert key_condition("pk = :pk AND begins_with(sk, :p)", None, values, "pk",
                         "sk") == KeyCondition(s("q"), "begins_with", (s("m#"),))
    assert key_condition("pk = :pk AND visible_at BETWEEN :now AND :later", None, values,
                         "pk", "visible_at") == KeyCondition(s("q"), "BETWEEN",
                                                             (n("10"), n("20")))
    assert key_condition("pk = :pk AND visible_at <= :now", None, values, "pk",
                         "visible_at") == KeyCondition(s("q"), "<=", (n("10"),))


def test_key_conditions_in_any_order_with_parentheses_and_placeholders() -> None:
    values = {":pk": s("q"), ":x": n("5")}
    expected = KeyCondition(s("q"), ">", (n("5"),))
    assert key_condition("sk > :x AND pk = :pk", None, values, "pk", "sk") == expected
    assert key_condition("(#p = :pk) and (#s > :x)", {"#p": "pk", "#s": "sk"}, values,
                         "pk", "sk") == expected
    assert key_condition(":x < sk AND :pk = pk", None, values, "pk", "sk") == expected


def test_key_conditions_that_dynamodb_refuses() -> None:
    values = {":pk": s("q"), ":x": n("5"), ":y": n("1"), ":s": s("a")}
    cases = {
        "sk = :x": "^Query condition missed key schema element: pk$",
        "pk < :pk": "^Query key condition not supported$",
        "pk = :pk OR sk = :x": "^Invalid operator used in KeyConditionExpression: OR$",
        "pk = :pk AND NOT sk = :x": "KeyConditionExpression: NOT$",
        "pk = :pk AND sk IN (:x)": "KeyConditionExpression: IN$",
        "pk = :pk AND sk <> :x": "KeyConditionExpression: <>$",
        "pk = :pk AND attribute_exists(sk)": "KeyConditionExpression: attribute_exists$",
        "pk = :pk AND other = :x": "^Query condition missed key schema element: sk$",
        "pk = :pk AND sk = :x AND sk > :y": "only contain one condition per key",
        "pk = :pk AND sk.a = :x": "cannot have conditions on nested attributes",
        "pk = :pk AND sk BETWEEN :x AND :y": "upper bound to be greater than or equal",
        "pk = :pk AND begins_with(sk, :x)": "operator or function: begins_with, operand type: N",
        "pk = :pk AND size(sk) = :x": "cannot contain nested operations",
        "pk = :pk AND sk = pk": "Multiple attribute names used in one condition",
    }
    for expr, message in cases.items():
        with pytest.raises(ExpressionError, match=message):
            key_condition(expr, None, {k: v for k, v in values.items() if k in expr}, "pk",
                          "sk")
    with pytest.raises(ExpressionError, match=r"^Query key condition not supported$"):
        key_condition("pk = :pk AND other = :x", None, values, "pk", None)


def test_range_matches() -> None:
    def cond(op: str | None, *vals: AV) -> KeyCondition:
        return KeyCondition(s("q"), op, vals)

    assert range_matches(cond(None), n("1"))
    assert range_matches(cond("=", n("1")), n("1.0"))
    assert not range_matches(cond("=", n("1")), s("1"))
    assert range_matches(cond("<", n("10")), n("9"))
    assert not range_matches(cond("<", n("10")), n("10"))
    assert range_matches(cond("<=", n("10")), n("10"))
    assert range_matches(cond(">", s("a")), s("b"))
    assert not range_matches(cond(">", s("a")), n("5"))
    assert range_matches(cond(">=", b(b"a")), b(b"a"))
    assert range_matches(cond("BETWEEN", n("1"), n("5")), n("5"))
    assert not range_matches(cond("BETWEEN", n("1"), n("5")), n("5.01"))
    assert range_matches(cond("begins_with", s("m#")), s("m#42"))
    assert not range_matches(cond("begins_with", s("m#")), s("n#42"))
    assert range_matches(cond("begins_with", b(b"ab")), b(b"abc"))


# ---------------------------------------------------------------------------------------
# Numbers, key orderings and references


def test_normalize_number() -> None:
    cases = {"1.50": "1.5", "01": "1", "-0": "0", "1E+2": "100", "1e2": "100", "100": "100",
             "0.00": "0", "-1.50": "-1.5", ".5": "0.5", "5.": "5", "+7": "7",
             "1.23E-5": "0.0000123", "9.99E+125": "999" + "0" * 123,
             "1E-130": "0." + "0" * 129 + "1", "1" + "0" * 45: "1" + "0" * 45,
             "12345678901234567890123456789012345678": "12345678901234567890123456789012345678"}
    for text, canonical in cases.items():
        assert normalize_number(text) == canonical, text


def test_normalize_number_refuses_what_dynamodb_refuses() -> None:
    for text in ("", "abc", "1_000", " 1", "1 ", "NaN", "Infinity", "0x10", "1e", "--1"):
        with pytest.raises(ExpressionError, match=r"cannot be converted into a number"):
            normalize_number(text)
    with pytest.raises(ExpressionError, match=r"more than 38 significant digits"):
        normalize_number("1" * 39)
    with pytest.raises(ExpressionError, match=r"Number overflow"):
        normalize_number("1E+126")
    with pytest.raises(ExpressionError, match=r"Number underflow"):
        normalize_number("1E-131")


def test_sort_values_order_keys_as_dynamodb_does() -> None:
    def key(value: AV) -> Any:
        return sort_value(value)

    texts = ["b", "a", "\uffff", "\U0001f600", "é", "Z", ""]
    assert sorted(texts, key=lambda t: key(s(t))) == sorted(texts, key=lambda t: t.encode())
    numbers = ["10", "9", "-1", "0.5", "-10.5", "1E+3"]
    assert sorted(numbers, key=lambda t: key(n(t))) == ["-10.5", "-1", "0.5", "9", "10", "1E+3"]
    raws = [b"\xff", b"\x00\x01", b"\x00", b"a"]
    assert sorted(raws, key=lambda r: key(b(r))) == sorted(raws)
    with pytest.raises(ExpressionError):
        sort_value({"BOOL": True})


def test_references_for_each_kind() -> None:
    assert references("#a = :v AND attribute_exists(#b.c) OR x = :w", "condition") == (
        frozenset({"#a", "#b"}), frozenset({":v", ":w"}))
    assert references("SET #0 = :0 REMOVE #1", "update") == (
        frozenset({"#0", "#1"}), frozenset({":0"}))
    assert references("#p, q.#r[0]", "projection") == (frozenset({"#p", "#r"}), frozenset())
    assert references("pk = :pk AND begins_with(#sk, :p)", "key") == (
        frozenset({"#sk"}), frozenset({":pk", ":p"}))
    assert references("#s = :active", "filter") == (frozenset({"#s"}), frozenset({":active"}))
    with pytest.raises(ExpressionError, match=r"^Invalid FilterExpression: Syntax error"):
        references("#s = = :active", "filter")
    with pytest.raises(ExpressionError, match=r"^Invalid UpdateExpression: Syntax error"):
        references("SET", "update")
