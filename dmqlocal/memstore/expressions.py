"""DynamoDB's expression language over items in DynamoDB JSON, as they travel on the wire.

Condition and filter expressions, update expressions, projection expressions and key
condition expressions. Each expression text is parsed once (the parse is cached by its
text) into a small tree and compiled into closures; the `#name` and `:value` placeholders
are looked up when the closures run, so one parse serves every request that sends the
same text, whatever names and values come with it.

Values are wire values: exactly one of {"S": str}, {"N": "1.5"}, {"B": base64 text},
{"BOOL": bool}, {"NULL": True}, {"SS": [...]}, {"NS": [...]}, {"BS": [...]},
{"L": [value, ...]} or {"M": {name: value}}. Nothing here mutates an item or a value:
an update copies the top-level dict and the containers along each changed path, and
shares everything else.
"""

from __future__ import annotations

import base64
import functools
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from typing import Any, NamedTuple

AttrValue = dict[str, Any]
Item = dict[str, AttrValue]
Names = Mapping[str, str]
Values = Mapping[str, AttrValue]
Step = str | int  # an attribute name, a "#placeholder" or a list index
Resolved = tuple[Step, ...]  # a document path with its placeholders replaced

Getter = Callable[[Item, Names, Values], "AttrValue | None"]
Maker = Callable[[Item, Names, Values], AttrValue]
Test = Callable[[Item, Names, Values], bool]


class ExpressionError(ValueError):
    """A ValidationException: str(error) is the message DynamoDB would give."""


_NO_ITEM: Item = {}
_NO_NAMES: Names = {}
_NO_VALUES: Values = {}

_KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN"})
_CLAUSES = ("SET", "REMOVE", "ADD", "DELETE")
_COMPARATORS = frozenset({"=", "<>", "<", "<=", ">", ">="})
_ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_FLIPPED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_CONDITION_ARITY = {"attribute_exists": 1, "attribute_not_exists": 1, "attribute_type": 2,
                    "begins_with": 2, "contains": 2, "size": 1}
_UPDATE_ARITY = {"if_not_exists": 2, "list_append": 2}
_TYPES = frozenset({"S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS", "L", "M"})
_SCALARS = frozenset({"S", "N", "B"})
_SETS = ("SS", "NS", "BS")
_SET_WORDS = {"SS": "string", "NS": "number", "BS": "binary"}
_TYPE_WORDS = {"S": "STRING", "N": "NUMBER", "B": "BINARY", "BOOL": "BOOLEAN",
               "NULL": "NULL", "L": "LIST", "M": "MAP", "SS": "STRING_SET",
               "NS": "NUMBER_SET", "BS": "BINARY_SET"}
_MAX_IN_OPERANDS = 100
_MAX_DIGITS = 38
_LABELS = {"condition": "ConditionExpression", "filter": "FilterExpression",
           "key": "KeyConditionExpression"}

_MISSING_OPERAND = "The provided expression refers to an attribute that does not exist in the item"
_BAD_OPERAND = "An operand in the update expression has an incorrect data type"
_BAD_PATH = "The document path provided in the update expression is invalid for update"
_NOT_A_NUMBER = "A value provided cannot be converted into a number"
_TOO_PRECISE = "Attempting to store more than 38 significant digits in a Number"
_OVERFLOW = ("Number overflow. Attempting to store a number with magnitude larger than "
             "supported range")
_UNDERFLOW = ("Number underflow. Attempting to store a number with magnitude smaller than "
              "supported range")

# Exact sums and differences of any two DynamoDB numbers (1E-130 to 1E+126, 38 digits)
# fit in 300 digits; the result is then held to 38 significant digits like any number.
_WIDE = Context(prec=300)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TOKEN = re.compile(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<hash>#[A-Za-z0-9_]+)|(?P<colon>:[A-Za-z0-9_]+)"
    r"|(?P<int>[0-9]+)|(?P<op><>|<=|>=|[=<>(),.\[\]+\-])")
_TOKEN_KINDS = {"name": "name", "hash": "#", "colon": ":", "int": "int", "op": "op"}


# ---------------------------------------------------------------------------------------
# Values: numbers, equality, ordering


def normalize_number(text: str) -> str:
    """DynamoDB's canonical text for a number ("1.50" -> "1.5", "1E+2" -> "100", "-0" ->
    "0"); ExpressionError for text that is not a number, more than 38 significant digits,
    or a magnitude outside 1E-130 to 9.99...E+125."""
    if not isinstance(text, str):
        raise ExpressionError(_NOT_A_NUMBER)
    if text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS and (
            text[0] != "0" or text == "0"):
        return text
    if not _NUMBER.fullmatch(text):
        raise ExpressionError(_NOT_A_NUMBER)
    return _canonical(Decimal(text))


def _canonical(number: Decimal) -> str:
    """The canonical text of a finite number, checked against DynamoDB's limits."""
    if not number.is_finite():
        raise ExpressionError(_NOT_A_NUMBER)
    if not number:
        return "0"
    sign, digits, exponent = number.as_tuple()
    kept = len(digits)
    while digits[kept - 1] == 0:
        kept -= 1
    if kept > _MAX_DIGITS:
        raise ExpressionError(_TOO_PRECISE)
    power = int(exponent) + len(digits) - kept
    magnitude = power + kept - 1
    if magnitude > 125:
        raise ExpressionError(_OVERFLOW)
    if magnitude < -130:
        raise ExpressionError(_UNDERFLOW)
    return format(Decimal((sign, digits[:kept], power)), "f")


def _whole(text: str) -> bool:
    """Whether a number's text is a plain integer (digits with an optional minus)."""
    digits = text[1:] if text[:1] == "-" else text
    return digits.isascii() and digits.isdigit()


def _combine(op: str, a: str, b: str) -> str:
    """a + b or a - b for numbers' texts: exact, then held to DynamoDB's limits."""
    if _whole(a) and _whole(b):
        total = str(int(a) + int(b) if op == "+" else int(a) - int(b))
        if len(total) <= _MAX_DIGITS:
            return total
    calculate = _WIDE.add if op == "+" else _WIDE.subtract
    return _canonical(calculate(_num(a), _num(b)))


def _num(text: str) -> Decimal:
    """A number's text as a Decimal."""
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ExpressionError(_NOT_A_NUMBER) from None


def _bytes(text: str) -> bytes:
    """A binary value's base64 text, decoded."""
    return base64.b64decode(text)


def _type_of(value: AttrValue) -> str:
    """The type code of a value ("S", "N", ...), or "" when it has none."""
    return next(iter(value), "")


def sort_value(value: AttrValue) -> object:
    """A Python value that orders as DynamoDB orders key values of one type: S by UTF-8
    bytes (Python orders str by code point, which is the same order), N numerically, B
    by the decoded bytes."""
    if "S" in value:
        return value["S"]
    if "N" in value:
        return _num(value["N"])
    if "B" in value:
        return _bytes(value["B"])
    raise ExpressionError(f"A key value must be a string, a number or binary, not "
                          f"{_type_of(value) or 'nothing'}")


def equal(a: AttrValue, b: AttrValue) -> bool:
    """DynamoDB equality: numbers numerically ("1.0" equals "1"), sets regardless of
    order, lists and maps deeply; values of different types are never equal."""
    return a == b or _equal_slow(a, b)


def _equal_slow(a: AttrValue, b: AttrValue) -> bool:
    """Equality for the values that plain dict equality could call different."""
    if len(a) != 1 or len(b) != 1:
        return False
    kind = _type_of(a)
    if kind not in b:
        return False
    x, y = a[kind], b[kind]
    if kind == "N":
        return _num(x) == _num(y)
    if kind == "B":
        return _bytes(x) == _bytes(y)
    if kind in _SETS:
        return _members(kind, x) == _members(kind, y)
    if kind == "L":
        return len(x) == len(y) and all(map(equal, x, y))
    if kind == "M":
        return x.keys() == y.keys() and all(equal(x[k], y[k]) for k in x)
    return False


def _member(kind: str, text: str) -> object:
    """One set member in a form that compares as DynamoDB compares members."""
    if kind == "NS":
        return _num(text)
    if kind == "BS":
        return _bytes(text)
    return text


def _members(kind: str, texts: Iterable[str]) -> set[object]:
    """A set's members in a form that compares as DynamoDB compares them."""
    return {_member(kind, text) for text in texts}


def _ordered(a: AttrValue, b: AttrValue) -> tuple[Any, Any] | None:
    """The two values as comparable Python values, or None when they are not both N, both
    S or both B (an ordering between them is then simply false)."""
    if "N" in a:
        return (_num(a["N"]), _num(b["N"])) if "N" in b else None
    if "S" in a:
        return (a["S"], b["S"]) if "S" in b else None
    if "B" in a:
        return (_bytes(a["B"]), _bytes(b["B"])) if "B" in b else None
    return None


def _size_of(value: AttrValue) -> int | None:
    """What size() gives for a value: characters of a string, bytes of a binary, members
    of a set, elements of a list or map; None for the types that have no size."""
    kind = _type_of(value)
    if kind == "B":
        return len(_bytes(value["B"]))
    if kind in ("S", "SS", "NS", "BS", "L", "M"):
        return len(value[kind])
    return None


# ---------------------------------------------------------------------------------------
# The parsed trees


@dataclass(frozen=True, slots=True)
class _Path:
    """A document path as written: names, "#placeholders" and list indexes."""

    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class _Value:
    """A ":placeholder" for an ExpressionAttributeValues entry."""

    ref: str


@dataclass(frozen=True, slots=True)
class _Call:
    """A function call: a condition function, size(), if_not_exists() or list_append()."""

    name: str
    args: tuple[_Operand, ...]


@dataclass(frozen=True, slots=True)
class _Arith:
    """`a + b` or `a - b` in a SET action."""

    op: str
    left: _Operand
    right: _Operand


@dataclass(frozen=True, slots=True)
class _Compare:
    """A comparison with = <> < <= > >=."""

    op: str
    left: _Operand
    right: _Operand


@dataclass(frozen=True, slots=True)
class _Between:
    """`subject BETWEEN low AND high`."""

    subject: _Operand
    low: _Operand
    high: _Operand


@dataclass(frozen=True, slots=True)
class _In:
    """`subject IN (option, ...)`."""

    subject: _Operand
    options: tuple[_Operand, ...]


@dataclass(frozen=True, slots=True)
class _Logic:
    """AND or OR of two conditions."""

    op: str
    left: _Cond
    right: _Cond


@dataclass(frozen=True, slots=True)
class _Not:
    """NOT of a condition."""

    inner: _Cond


_Operand = _Path | _Value | _Call | _Arith
_Cond = _Compare | _Between | _In | _Call | _Logic | _Not


@dataclass(frozen=True, slots=True)
class _Action:
    """One update action: SET path = value, REMOVE path, ADD path :v or DELETE path :v."""

    clause: str
    path: _Path
    value: _Operand | None


@dataclass(frozen=True, slots=True)
class _ParsedCondition:
    """A compiled condition with the placeholders it uses, in order of appearance."""

    tree: _Cond
    test: Test
    refs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _ParsedUpdate:
    """A compiled update expression."""

    actions: tuple[_Action, ...]
    makers: tuple[Maker | None, ...]
    refs: tuple[str, ...]
    paths: list[Resolved] | None  # the actions' paths, when no #placeholder is in them


@dataclass(frozen=True, slots=True)
class _ParsedProjection:
    """A parsed projection expression."""

    paths: tuple[_Path, ...]
    flat: bool
    refs: tuple[str, ...]


# ---------------------------------------------------------------------------------------
# Tokens and the parser


class _Token(NamedTuple):
    """One token: kind is "name", "#", ":", "int", "op" or "eof"."""

    kind: str
    text: str
    start: int
    end: int


def _tokenize(text: str, label: str) -> list[_Token]:
    """The tokens of an expression, ending with an "eof" token."""
    tokens: list[_Token] = []
    pos, size = 0, len(text)
    while True:
        while pos < size and text[pos].isspace():
            pos += 1
        if pos >= size:
            tokens.append(_Token("eof", "<EOF>", size, size))
            return tokens
        found = _TOKEN.match(text, pos)
        if found is None:
            start = tokens[-1].start if tokens else pos
            raise ExpressionError(f'Invalid {label}: Syntax error; token: "{text[pos]}", '
                                  f'near: "{text[start:pos + 1]}"')
        kind = _TOKEN_KINDS[found.lastgroup or "op"]
        tokens.append(_Token(kind, found.group(), pos, found.end()))
        pos = found.end()


class _Parser:
    """A recursive-descent parser over one expression's tokens."""

    def __init__(self, text: str, label: str) -> None:
        if not text or text.isspace():
            raise ExpressionError(f"Invalid {label}: The expression can not be empty;")
        self.text = text
        self.label = label
        self.tokens = _tokenize(text, label)
        self.pos = 0

    def refs(self) -> tuple[str, ...]:
        """The placeholders the expression uses, each once, in order of appearance."""
        seen = dict.fromkeys(t.text for t in self.tokens if t.kind in ("#", ":"))
        return tuple(seen)

    # Token access -------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> _Token:
        """The token `ahead` places on (the eof token past the end)."""
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def take(self) -> _Token:
        """The next token, consumed."""
        token = self.peek()
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return token

    def at_op(self, *ops: str) -> bool:
        """Whether the next token is one of these operators or punctuation marks."""
        token = self.peek()
        return token.kind == "op" and token.text in ops

    def at_word(self, word: str) -> bool:
        """Whether the next token is this keyword (in any case)."""
        token = self.peek()
        return token.kind == "name" and token.text.upper() == word

    def expect_op(self, op: str) -> None:
        """Consume this operator or raise a syntax error."""
        if not self.at_op(op):
            raise self.syntax(self.peek())
        self.take()

    def expect_end(self) -> None:
        """Raise a syntax error unless every token has been read."""
        if self.peek().kind != "eof":
            raise self.syntax(self.peek())

    def syntax(self, token: _Token) -> ExpressionError:
        """A syntax error at a token, quoting the text around it as DynamoDB does."""
        index = self.tokens.index(token)
        start = self.tokens[index - 1].start if index > 0 else token.start
        after = self.tokens[index + 1] if index + 1 < len(self.tokens) else token
        near = self.text[start:max(after.end, token.end)]
        return self.fail(f'Syntax error; token: "{token.text}", near: "{near}"')

    def fail(self, message: str) -> ExpressionError:
        """An error in this expression."""
        return ExpressionError(f"Invalid {self.label}: {message}")

    # Paths and operands -------------------------------------------------------------

    def path(self) -> _Path:
        """A document path: name or #placeholder, then any of .name and [index]."""
        steps: list[Step] = [self._path_name(self.take())]
        while True:
            if self.at_op("."):
                self.take()
                steps.append(self._path_name(self.take()))
            elif self.at_op("["):
                self.take()
                index = self.take()
                if index.kind != "int":
                    raise self.syntax(index)
                self.expect_op("]")
                steps.append(int(index.text))
            else:
                return _Path(tuple(steps))

    def _path_name(self, token: _Token) -> str:
        """One name in a path: a #placeholder or a name that is not a keyword."""
        if token.kind == "#" or (token.kind == "name" and token.text.upper() not in _KEYWORDS):
            return token.text
        raise self.syntax(token)

    def operand(self) -> _Operand:
        """A condition operand: a path, a :value, size(...) or a parenthesised operand."""
        token = self.peek()
        if self.at_op("("):
            self.take()
            inner = self.operand()
            self.expect_op(")")
            return inner
        if token.kind == ":":
            self.take()
            return _Value(token.text)
        if token.kind == "name" and self.peek(1).kind == "op" and self.peek(1).text == "(":
            return self._condition_call()
        return self.path()

    def _arguments(self, read: Callable[[], _Operand]) -> tuple[_Operand, ...]:
        """A parenthesised, comma-separated argument list."""
        self.expect_op("(")
        args = [read()]
        while self.at_op(","):
            self.take()
            args.append(read())
        self.expect_op(")")
        return tuple(args)

    def _condition_call(self) -> _Call:
        """A function call in a condition, checked for its name, arity and arguments."""
        name = self.take().text
        if name not in _CONDITION_ARITY:
            if name in _UPDATE_ARITY:
                raise self.fail(f"The function is not allowed to be used this way in an "
                                f"expression; function: {name}")
            raise self.fail(f"Invalid function name; function: {name}")
        call = _Call(name, self._arguments(self.operand))
        self._check_arity(call, _CONDITION_ARITY[name])
        for arg in call.args:
            self._no_boolean_call(arg)
        self._check_condition_args(call)
        return call

    def _check_arity(self, call: _Call, arity: int) -> None:
        """Refuse a call with the wrong number of arguments."""
        if len(call.args) != arity:
            raise self.fail(f"Incorrect number of operands for operator or function; operator "
                            f"or function: {call.name}, number of operands: {len(call.args)}")

    def _check_condition_args(self, call: _Call) -> None:
        """Refuse arguments of the wrong kind for the existence and type functions."""
        first = call.args[0]
        if call.name in ("attribute_exists", "attribute_not_exists") and not isinstance(
                first, _Path):
            raise self.fail(f"Operator or function requires a document path; operator or "
                            f"function: {call.name}")
        if call.name == "attribute_type" and not isinstance(call.args[1], _Value):
            raise self.fail("Incorrect operand type for operator or function; operator or "
                            "function: attribute_type, operand type: "
                            "{NS,SS,L,BS,N,M,B,BOOL,NULL,S}")

    def _no_boolean_call(self, operand: _Operand) -> None:
        """Refuse a true/false function (anything but size) where a value is wanted."""
        if isinstance(operand, _Call) and operand.name != "size":
            raise self.fail(f"The function is not allowed to be used this way in an "
                            f"expression; function: {operand.name}")

    # Conditions ---------------------------------------------------------------------

    def condition(self) -> _Cond:
        """condition := and (OR and)*"""
        node = self._and()
        while self.at_word("OR"):
            self.take()
            node = _Logic("OR", node, self._and())
        return node

    def _and(self) -> _Cond:
        """and := not (AND not)*"""
        node = self._not()
        while self.at_word("AND"):
            self.take()
            node = _Logic("AND", node, self._not())
        return node

    def _not(self) -> _Cond:
        """not := NOT not | primary"""
        if self.at_word("NOT"):
            self.take()
            return _Not(self._not())
        return self._primary()

    def _primary(self) -> _Cond:
        """A parenthesised condition or a comparison."""
        if self.at_op("(") and not self._operand_in_parentheses():
            self.take()
            inner = self.condition()
            self.expect_op(")")
            return inner
        return self._comparison()

    def _operand_in_parentheses(self) -> bool:
        """Whether the parenthesis at hand wraps an operand, as in `(a) = :v`, rather than
        a condition: the token after its closing parenthesis says."""
        depth = 0
        for index in range(self.pos, len(self.tokens)):
            token = self.tokens[index]
            if token.kind == "op" and token.text in "()":
                depth += 1 if token.text == "(" else -1
                if depth == 0:
                    after = self.tokens[min(index + 1, len(self.tokens) - 1)]
                    return (after.kind == "op" and after.text in _COMPARATORS) or (
                        after.kind == "name" and after.text.upper() in ("BETWEEN", "IN"))
        return False

    def _comparison(self) -> _Cond:
        """operand comparator operand, BETWEEN, IN, or a true/false function call."""
        left = self.operand()
        token = self.peek()
        if token.kind == "op" and token.text in _COMPARATORS:
            self.take()
            right = self.operand()
            self._no_boolean_call(left)
            self._no_boolean_call(right)
            return _Compare(token.text, left, right)
        if self.at_word("BETWEEN"):
            return self._between(left)
        if self.at_word("IN"):
            return self._in(left)
        if isinstance(left, _Call):
            if left.name == "size":
                raise self.fail("The function is not allowed to be used this way in an "
                                "expression; function: size")
            return left
        raise self.syntax(token)

    def _between(self, subject: _Operand) -> _Between:
        """The rest of `subject BETWEEN low AND high`."""
        self.take()
        low = self.operand()
        if not self.at_word("AND"):
            raise self.syntax(self.peek())
        self.take()
        high = self.operand()
        for operand in (subject, low, high):
            self._no_boolean_call(operand)
        return _Between(subject, low, high)

    def _in(self, subject: _Operand) -> _In:
        """The rest of `subject IN (option, ...)`."""
        self.take()
        options = self._arguments(self.operand)
        if len(options) > _MAX_IN_OPERANDS:
            raise self.fail(f"The IN operator is provided with too many operands; number of "
                            f"operands: {len(options)}")
        for operand in (subject, *options):
            self._no_boolean_call(operand)
        return _In(subject, options)

    # Update expressions -------------------------------------------------------------

    def update(self) -> list[_Action]:
        """update := (SET|REMOVE|ADD|DELETE action (, action)*)+, each clause once."""
        actions: list[_Action] = []
        seen: set[str] = set()
        while self.peek().kind != "eof":
            token = self.take()
            clause = token.text.upper() if token.kind == "name" else ""
            if clause not in _CLAUSES:
                raise self.syntax(token)
            if clause in seen:
                raise self.fail(f'The "{clause}" section can only be used once in an update '
                                f'expression;')
            seen.add(clause)
            actions.append(self._action(clause))
            while self.at_op(","):
                self.take()
                actions.append(self._action(clause))
        return actions

    def _action(self, clause: str) -> _Action:
        """One action of a clause."""
        path = self.path()
        if clause == "SET":
            self.expect_op("=")
            return _Action(clause, path, self._set_value())
        if clause == "REMOVE":
            return _Action(clause, path, None)
        token = self.take()
        if token.kind != ":":
            raise self.syntax(token)
        return _Action(clause, path, _Value(token.text))

    def _set_value(self) -> _Operand:
        """operand, or operand + operand, or operand - operand."""
        left = self._set_operand()
        if self.at_op("+", "-"):
            op = self.take().text
            return _Arith(op, left, self._set_operand())
        return left

    def _set_operand(self) -> _Operand:
        """A path, a :value, if_not_exists(path, operand) or list_append(a, b)."""
        token = self.peek()
        if token.kind == ":":
            self.take()
            return _Value(token.text)
        if token.kind == "name" and self.peek(1).kind == "op" and self.peek(1).text == "(":
            return self._update_call()
        return self.path()

    def _update_call(self) -> _Call:
        """if_not_exists() or list_append(), checked."""
        name = self.take().text
        if name not in _UPDATE_ARITY:
            if name in _CONDITION_ARITY:
                raise self.fail(f"The function is not allowed in an update expression; "
                                f"function: {name}")
            raise self.fail(f"Invalid function name; function: {name}")
        call = _Call(name, self._arguments(self._set_operand))
        self._check_arity(call, _UPDATE_ARITY[name])
        if name == "if_not_exists" and not isinstance(call.args[0], _Path):
            raise self.fail("Operator or function requires a document path; operator or "
                            "function: if_not_exists")
        return call

    # Projection expressions ---------------------------------------------------------

    def projection(self) -> list[_Path]:
        """projection := path (, path)*"""
        paths = [self.path()]
        while self.at_op(","):
            self.take()
            paths.append(self.path())
        return paths


# ---------------------------------------------------------------------------------------
# Placeholders and paths at evaluation time


def _check_refs(refs: tuple[str, ...], names: Names, values: Values, label: str) -> None:
    """ExpressionError for the first placeholder with no entry in names or values."""
    for ref in refs:
        if ref[0] == "#":
            if ref not in names:
                raise ExpressionError(f"Invalid {label}: An expression attribute name used "
                                      f"in the document path is not defined; attribute "
                                      f"name: {ref}")
        elif ref not in values:
            raise ExpressionError(f"Invalid {label}: An expression attribute value used in "
                                  f"expression is not defined; attribute value: {ref}")


def _resolve(path: _Path, names: Names) -> Resolved:
    """The path with each #placeholder replaced by its attribute name."""
    return tuple(names[s] if isinstance(s, str) and s[0] == "#" else s for s in path.steps)


def _descend(value: AttrValue | None, steps: Sequence[Step]) -> AttrValue | None:
    """The value at `steps` inside `value`, or None when anything along them is missing."""
    for step in steps:
        if value is None:
            return None
        if isinstance(step, int):
            elements = value.get("L")
            if elements is None or step >= len(elements):
                return None
            value = elements[step]
        else:
            members = value.get("M")
            if members is None:
                return None
            value = members.get(step)
    return value


def _read(item: Item, path: Resolved) -> AttrValue | None:
    """The value at a resolved path in an item, or None."""
    top = item.get(str(path[0]))
    return top if len(path) == 1 else _descend(top, path[1:])


def _path_getter(path: _Path) -> Getter:
    """A closure reading the path from an item, resolving its placeholders per call."""
    first, rest = str(path.steps[0]), path.steps[1:]  # a path always starts with a name
    if not rest:
        if first[0] == "#":
            def named(item: Item, names: Names, values: Values) -> AttrValue | None:
                return item.get(names[first])
            return named

        def plain(item: Item, names: Names, values: Values) -> AttrValue | None:
            return item.get(first)
        return plain
    if any(isinstance(s, str) and s[0] == "#" for s in path.steps):
        def nested_named(item: Item, names: Names, values: Values) -> AttrValue | None:
            return _read(item, _resolve(path, names))
        return nested_named

    def nested(item: Item, names: Names, values: Values) -> AttrValue | None:
        return _descend(item.get(first), rest)
    return nested


def _path_text(path: Resolved) -> str:
    """A path as DynamoDB quotes it in messages: [a, b, [1]]."""
    return "[" + ", ".join(f"[{s}]" if isinstance(s, int) else s for s in path) + "]"


def _check_paths(paths: Sequence[Resolved], label: str) -> None:
    """ExpressionError when two paths overlap (one is, or lies inside, the other) or
    conflict (one indexes a list where the other names a map key)."""
    for index, one in enumerate(paths):
        for two in paths[index + 1:]:
            for a, b in zip(one, two, strict=False):
                if a != b:
                    if type(a) is not type(b):
                        raise ExpressionError(
                            f"Invalid {label}: Two document paths conflict with each other; "
                            f"must remove or rewrite one of these paths; path one: "
                            f"{_path_text(one)}, path two: {_path_text(two)}")
                    break
            else:
                raise ExpressionError(
                    f"Invalid {label}: Two document paths overlap with each other; must "
                    f"remove or rewrite one of these paths; path one: {_path_text(one)}, "
                    f"path two: {_path_text(two)}")


# ---------------------------------------------------------------------------------------
# Compiling conditions


def _value_getter(ref: str) -> Getter:
    """A closure giving a :value placeholder's value."""
    def get(item: Item, names: Names, values: Values) -> AttrValue | None:
        return values[ref]
    return get


def _size_getter(call: _Call, label: str) -> Getter:
    """size(operand): a number, or None (every comparison false) when the attribute is
    missing or has no size."""
    arg = call.args[0]
    inner = _compile_operand(arg, label)
    constant = arg.ref if isinstance(arg, _Value) else None

    def get(item: Item, names: Names, values: Values) -> AttrValue | None:
        value = inner(item, names, values)
        if value is None:
            return None
        size = _size_of(value)
        if size is None:
            if constant is not None:
                raise ExpressionError(f"Invalid {label}: Incorrect operand type for operator "
                                      f"or function; operator or function: size, operand "
                                      f"type: {_type_of(value)}")
            return None
        return {"N": str(size)}
    return get


def _compile_operand(node: _Operand, label: str) -> Getter:
    """A closure giving a condition operand's value, or None when it is missing."""
    if isinstance(node, _Path):
        return _path_getter(node)
    if isinstance(node, _Value):
        return _value_getter(node.ref)
    assert isinstance(node, _Call) and node.name == "size"
    return _size_getter(node, label)


def _constants(*nodes: _Operand) -> tuple[str, ...]:
    """The :value placeholders among some operands."""
    return tuple(node.ref for node in nodes if isinstance(node, _Value))


def _is_size(node: _Operand) -> bool:
    """Whether an operand is a size() call."""
    return isinstance(node, _Call) and node.name == "size"


def _check_scalars(refs: tuple[str, ...], values: Values, symbol: str, label: str) -> None:
    """An ordering between a :value that is not N, S or B is an error, not just false."""
    for ref in refs:
        kind = _type_of(values[ref])
        if kind not in _SCALARS:
            raise ExpressionError(f"Invalid {label}: Incorrect operand type for operator or "
                                  f"function; operator or function: {symbol}, operand type: "
                                  f"{kind}")


def _check_bounds(low: AttrValue, high: AttrValue, label: str) -> None:
    """BETWEEN with two :value bounds: same type, and low <= high."""
    low_kind, high_kind = _type_of(low), _type_of(high)
    quoted = (f"lower bound operand: AttributeValue: {{{low_kind}:{low[low_kind]}}}, upper "
              f"bound operand: AttributeValue: {{{high_kind}:{high[high_kind]}}}")
    if low_kind != high_kind:
        raise ExpressionError(f"Invalid {label}: The BETWEEN operator requires same data "
                              f"type for lower and upper bounds; {quoted}")
    pair = _ordered(low, high)
    if pair is not None and pair[0] > pair[1]:
        raise ExpressionError(f"Invalid {label}: The BETWEEN operator requires upper bound "
                              f"to be greater than or equal to lower bound; {quoted}")


def _equals_test(left: Getter, right: Getter) -> Test:
    """`=`: false when either side is missing."""
    def test(item: Item, names: Names, values: Values) -> bool:
        a = left(item, names, values)
        if a is None:
            return False
        b = right(item, names, values)
        return b is not None and (a == b or _equal_slow(a, b))
    return test


def _not_equals_test(left: Getter, right: Getter, sized: tuple[bool, bool]) -> Test:
    """`<>`: a missing attribute is "not equal" to anything, as in DynamoDB (so `a <> :v`
    holds when a is absent, and `a <> b` when both are); a size() that cannot be taken
    makes the comparison false."""
    def test(item: Item, names: Names, values: Values) -> bool:
        a = left(item, names, values)
        b = right(item, names, values)
        if a is None or b is None:
            return not ((a is None and sized[0]) or (b is None and sized[1]))
        return not (a == b or _equal_slow(a, b))
    return test


def _order_test(symbol: str, left: Getter, right: Getter, refs: tuple[str, ...],
                label: str) -> Test:
    """< <= > >=: true only between two present values both N, both S or both B."""
    compare = _ORDERINGS[symbol]

    def test(item: Item, names: Names, values: Values) -> bool:
        a = left(item, names, values)
        b = right(item, names, values)
        if a is not None and b is not None:
            pair = _ordered(a, b)
            if pair is not None:
                return compare(pair[0], pair[1])
        if refs:
            _check_scalars(refs, values, symbol, label)
        return False
    return test


def _compile_compare(node: _Compare, label: str) -> Test:
    """A closure for one comparison."""
    left = _compile_operand(node.left, label)
    right = _compile_operand(node.right, label)
    if node.op == "=":
        return _equals_test(left, right)
    if node.op == "<>":
        return _not_equals_test(left, right, (_is_size(node.left), _is_size(node.right)))
    return _order_test(node.op, left, right, _constants(node.left, node.right), label)


def _compile_between(node: _Between, label: str) -> Test:
    """A closure for BETWEEN: low <= subject <= high, all of one type among N, S, B."""
    subject = _compile_operand(node.subject, label)
    low = _compile_operand(node.low, label)
    high = _compile_operand(node.high, label)
    refs = _constants(node.subject, node.low, node.high)
    bounds = (node.low.ref, node.high.ref) if isinstance(node.low, _Value) and isinstance(
        node.high, _Value) else None

    def test(item: Item, names: Names, values: Values) -> bool:
        x = subject(item, names, values)
        lo = low(item, names, values)
        hi = high(item, names, values)
        if x is not None and lo is not None and hi is not None:
            above = _ordered(lo, x)
            below = _ordered(x, hi)
            if above is not None and below is not None and (
                    above[0] <= above[1] and below[0] <= below[1]):
                return True
        if refs:
            _check_scalars(refs, values, "BETWEEN", label)
        if bounds is not None:
            _check_bounds(values[bounds[0]], values[bounds[1]], label)
        return False
    return test


def _compile_in(node: _In, label: str) -> Test:
    """A closure for IN: the subject equals one of the options."""
    subject = _compile_operand(node.subject, label)
    options = tuple(_compile_operand(option, label) for option in node.options)

    def test(item: Item, names: Names, values: Values) -> bool:
        x = subject(item, names, values)
        if x is None:
            return False
        for option in options:
            candidate = option(item, names, values)
            if candidate is not None and (x == candidate or _equal_slow(x, candidate)):
                return True
        return False
    return test


def _exists_test(getter: Getter, wanted: bool) -> Test:
    """attribute_exists() (wanted True) or attribute_not_exists() (wanted False)."""
    def test(item: Item, names: Names, values: Values) -> bool:
        return (getter(item, names, values) is not None) is wanted
    return test


def _type_test(getter: Getter, ref: str, label: str) -> Test:
    """attribute_type(path, :type)."""
    def test(item: Item, names: Names, values: Values) -> bool:
        wanted = values[ref]
        kind = wanted.get("S")
        if kind is None:
            raise ExpressionError(f"Invalid {label}: Incorrect operand type for operator or "
                                  f"function; operator or function: attribute_type, operand "
                                  f"type: {_type_of(wanted)}")
        if kind not in _TYPES:
            raise ExpressionError(f"Invalid {label}: Invalid attribute type name found; "
                                  f"type: {kind}, valid types: {{B,NULL,SS,BOOL,L,BS,N,NS,S,M}}")
        value = getter(item, names, values)
        return value is not None and kind in value
    return test


def _begins_with(value: AttrValue, prefix: AttrValue) -> bool:
    """Whether a string or binary value starts with a prefix of the same type."""
    if "S" in value:
        return "S" in prefix and value["S"].startswith(prefix["S"])
    if "B" in value:
        return "B" in prefix and _bytes(value["B"]).startswith(_bytes(prefix["B"]))
    return False


def _begins_test(whole: Getter, start: Getter, refs: tuple[str, ...], label: str) -> Test:
    """begins_with(); a :value that is neither S nor B is an error."""
    def test(item: Item, names: Names, values: Values) -> bool:
        value = whole(item, names, values)
        prefix = start(item, names, values)
        if value is not None and prefix is not None and _begins_with(value, prefix):
            return True
        for ref in refs:
            kind = _type_of(values[ref])
            if kind not in ("S", "B"):
                raise ExpressionError(f"Invalid {label}: Incorrect operand type for operator "
                                      f"or function; operator or function: begins_with, "
                                      f"operand type: {kind}")
        return False
    return test


def _contains(value: AttrValue, wanted: AttrValue) -> bool:
    """contains(): a substring of a string or binary, a member of a set, or an element of
    a list equal to the operand."""
    kind = _type_of(value)
    if kind == "S":
        return "S" in wanted and wanted["S"] in value["S"]
    if kind == "B":
        return "B" in wanted and _bytes(wanted["B"]) in _bytes(value["B"])
    if kind in _SETS:
        member = kind[0]
        return member in wanted and (
            wanted[member] in value[kind]
            or _member(kind, wanted[member]) in _members(kind, value[kind]))
    if kind == "L":
        return any(equal(element, wanted) for element in value["L"])
    return False


def _contains_test(whole: Getter, part: Getter) -> Test:
    """contains(); false when either side is missing."""
    def test(item: Item, names: Names, values: Values) -> bool:
        value = whole(item, names, values)
        wanted = part(item, names, values)
        return value is not None and wanted is not None and _contains(value, wanted)
    return test


def _compile_call(node: _Call, label: str) -> Test:
    """A closure for a true/false function."""
    args = [_compile_operand(arg, label) for arg in node.args]
    if node.name == "attribute_exists":
        return _exists_test(args[0], True)
    if node.name == "attribute_not_exists":
        return _exists_test(args[0], False)
    if node.name == "attribute_type":
        second = node.args[1]
        assert isinstance(second, _Value)
        return _type_test(args[0], second.ref, label)
    if node.name == "begins_with":
        return _begins_test(args[0], args[1], _constants(*node.args), label)
    return _contains_test(args[0], args[1])


def _compile_logic(node: _Logic, label: str) -> Test:
    """A closure for AND or OR, short-circuiting as Python does."""
    left = _compile_test(node.left, label)
    right = _compile_test(node.right, label)
    if node.op == "AND":
        def both(item: Item, names: Names, values: Values) -> bool:
            return left(item, names, values) and right(item, names, values)
        return both

    def either(item: Item, names: Names, values: Values) -> bool:
        return left(item, names, values) or right(item, names, values)
    return either


def _compile_test(node: _Cond, label: str) -> Test:
    """A closure deciding whether a condition holds for an item."""
    if isinstance(node, _Logic):
        return _compile_logic(node, label)
    if isinstance(node, _Not):
        inner = _compile_test(node.inner, label)

        def negated(item: Item, names: Names, values: Values) -> bool:
            return not inner(item, names, values)
        return negated
    if isinstance(node, _Compare):
        return _compile_compare(node, label)
    if isinstance(node, _Between):
        return _compile_between(node, label)
    if isinstance(node, _In):
        return _compile_in(node, label)
    return _compile_call(node, label)


@functools.lru_cache(maxsize=4096)
def _condition(text: str, label: str) -> _ParsedCondition:
    """The compiled condition for an expression text (cached)."""
    parser = _Parser(text, label)
    tree = parser.condition()
    parser.expect_end()
    return _ParsedCondition(tree, _compile_test(tree, label), parser.refs())


# ---------------------------------------------------------------------------------------
# Compiling update expressions


def _present(getter: Getter) -> Maker:
    """A path operand in a SET value: it must exist."""
    def make(item: Item, names: Names, values: Values) -> AttrValue:
        value = getter(item, names, values)
        if value is None:
            raise ExpressionError(_MISSING_OPERAND)
        return value
    return make


def _if_not_exists(getter: Getter, fallback: Maker) -> Maker:
    """if_not_exists(path, operand): the path's value, else the operand's."""
    def make(item: Item, names: Names, values: Values) -> AttrValue:
        value = getter(item, names, values)
        return fallback(item, names, values) if value is None else value
    return make


def _list_append(first: Maker, second: Maker) -> Maker:
    """list_append(a, b): a new list of a's elements then b's."""
    def make(item: Item, names: Names, values: Values) -> AttrValue:
        a = first(item, names, values)
        b = second(item, names, values)
        if "L" not in a or "L" not in b:
            raise ExpressionError(_BAD_OPERAND)
        return {"L": [*a["L"], *b["L"]]}
    return make


def _arithmetic(op: str, first: Maker, second: Maker) -> Maker:
    """`a + b` or `a - b`: numbers only, exact, then held to DynamoDB's number limits."""
    def make(item: Item, names: Names, values: Values) -> AttrValue:
        a = first(item, names, values)
        b = second(item, names, values)
        if "N" not in a or "N" not in b:
            raise ExpressionError(_BAD_OPERAND)
        return {"N": _combine(op, a["N"], b["N"])}
    return make


def _compile_maker(node: _Operand) -> Maker:
    """A closure computing a SET action's value (never missing: that is an error)."""
    if isinstance(node, _Path):
        return _present(_path_getter(node))
    if isinstance(node, _Value):
        ref = node.ref

        def given(item: Item, names: Names, values: Values) -> AttrValue:
            return values[ref]
        return given
    if isinstance(node, _Arith):
        return _arithmetic(node.op, _compile_maker(node.left), _compile_maker(node.right))
    assert isinstance(node, _Call)
    if node.name == "if_not_exists":
        path = node.args[0]
        assert isinstance(path, _Path)
        return _if_not_exists(_path_getter(path), _compile_maker(node.args[1]))
    return _list_append(_compile_maker(node.args[0]), _compile_maker(node.args[1]))


@functools.lru_cache(maxsize=4096)
def _update(text: str) -> _ParsedUpdate:
    """The compiled update expression for a text (cached)."""
    parser = _Parser(text, "UpdateExpression")
    actions = tuple(parser.update())
    parser.expect_end()
    makers = tuple(_compile_maker(a.value) if a.clause == "SET" and a.value is not None
                   else None for a in actions)
    refs = parser.refs()
    paths = None
    if not any(ref[0] == "#" for ref in refs):
        paths = [action.path.steps for action in actions]
        _check_paths(paths, "UpdateExpression")
    return _ParsedUpdate(actions, makers, refs, paths)


def _written(value: AttrValue, rest: Resolved, new: AttrValue) -> AttrValue:
    """A copy of container `value` with `new` written at `rest` inside it; a list index
    past the end appends."""
    step, deeper = rest[0], rest[1:]
    if isinstance(step, int):
        elements = value.get("L")
        if elements is None:
            raise ExpressionError(_BAD_PATH)
        copied = list(elements)
        if not deeper:
            if step < len(copied):
                copied[step] = new
            else:
                copied.append(new)
        elif step < len(copied):
            copied[step] = _written(copied[step], deeper, new)
        else:
            raise ExpressionError(_BAD_PATH)
        return {"L": copied}
    members = value.get("M")
    if members is None:
        raise ExpressionError(_BAD_PATH)
    changed = dict(members)
    if not deeper:
        changed[step] = new
    elif step in changed:
        changed[step] = _written(changed[step], deeper, new)
    else:
        raise ExpressionError(_BAD_PATH)
    return {"M": changed}


def _write(item: Item, path: Resolved, value: AttrValue) -> None:
    """Write a value at a path of an item we own (its top-level dict is ours)."""
    name = path[0]
    assert isinstance(name, str)
    if len(path) == 1:
        item[name] = value
        return
    top = item.get(name)
    if top is None:
        raise ExpressionError(_BAD_PATH)
    item[name] = _written(top, path[1:], value)


def _without(value: AttrValue, rest: Resolved) -> AttrValue | None:
    """A copy of container `value` without what sits at `rest`, or None when nothing is
    there (removing a list element shifts the ones after it)."""
    step, deeper = rest[0], rest[1:]
    if isinstance(step, int):
        elements = value.get("L")
        if elements is None:
            raise ExpressionError(_BAD_PATH)
        if step >= len(elements):
            return None
        if not deeper:
            return {"L": elements[:step] + elements[step + 1:]}
        inner = _without(elements[step], deeper)
        return None if inner is None else {"L": [*elements[:step], inner,
                                                 *elements[step + 1:]]}
    members = value.get("M")
    if members is None:
        raise ExpressionError(_BAD_PATH)
    if step not in members:
        return None
    changed = dict(members)
    if not deeper:
        del changed[step]
        return {"M": changed}
    inner = _without(members[step], deeper)
    if inner is None:
        return None
    changed[step] = inner
    return {"M": changed}


def _remove(item: Item, path: Resolved) -> None:
    """Remove a path from an item we own; a missing path is fine."""
    name = path[0]
    assert isinstance(name, str)
    if len(path) == 1:
        item.pop(name, None)
        return
    top = item.get(name)
    if top is not None:
        changed = _without(top, path[1:])
        if changed is not None:
            item[name] = changed


def _removal_order(path: Resolved) -> tuple[tuple[int, Any], ...]:
    """A sort key that removes later list elements first, so indexes keep their meaning."""
    return tuple((0, -s) if isinstance(s, int) else (1, s) for s in path)


def _check_not_empty(value: AttrValue) -> None:
    """DynamoDB has no empty sets."""
    for kind in _SETS:
        if kind in value and not value[kind]:
            raise ExpressionError(f"One or more parameter values were invalid: An "
                                  f"{_SET_WORDS[kind]} set  may not be empty")


def _set_kind(value: AttrValue) -> str | None:
    """"SS", "NS" or "BS" for a set value, else None."""
    for kind in _SETS:
        if kind in value:
            return kind
    return None


def _added(current: AttrValue | None, value: AttrValue) -> AttrValue:
    """ADD: a number added (missing counts as 0), or a set joined (missing is empty)."""
    if "N" in value:
        if current is None:
            return {"N": normalize_number(value["N"])}
        if "N" not in current:
            raise ExpressionError(_BAD_OPERAND)
        return {"N": _combine("+", current["N"], value["N"])}
    kind = _set_kind(value)
    if kind is None:
        raise ExpressionError(f"Invalid UpdateExpression: Incorrect operand type for operator "
                              f"or function; operator: ADD, operand type: "
                              f"{_TYPE_WORDS.get(_type_of(value), '?')}, typeSet: "
                              f"ALLOWED_FOR_ADD_OPERAND")
    _check_not_empty(value)
    if current is None:
        return {kind: list(value[kind])}
    if kind not in current:
        raise ExpressionError(_BAD_OPERAND)
    have = _members(kind, current[kind])
    joined = list(current[kind])
    for text in value[kind]:
        member = _member(kind, text)
        if member not in have:
            have.add(member)
            joined.append(text)
    return {kind: joined}


def _deleted(current: AttrValue | None, value: AttrValue) -> AttrValue | None:
    """DELETE: the set without the given members; None when nothing is left (or there
    was nothing)."""
    kind = _set_kind(value)
    if kind is None:
        raise ExpressionError(f"Invalid UpdateExpression: Incorrect operand type for operator "
                              f"or function; operator: DELETE, operand type: "
                              f"{_TYPE_WORDS.get(_type_of(value), '?')}, typeSet: "
                              f"ALLOWED_FOR_DELETE_OPERAND")
    _check_not_empty(value)
    if current is None:
        return None
    if kind not in current:
        raise ExpressionError(_BAD_OPERAND)
    gone = _members(kind, value[kind])
    left = [text for text in current[kind] if _member(kind, text) not in gone]
    return {kind: left} if left else None


def _prepared(parsed: _ParsedUpdate, names: Names | None,
              values: Values | None) -> tuple[Names, Values, list[Resolved]]:
    """Names and values checked against the expression, and every action's path."""
    names = names or _NO_NAMES
    values = values or _NO_VALUES
    _check_refs(parsed.refs, names, values, "UpdateExpression")
    if parsed.paths is not None:
        return names, values, parsed.paths
    paths = [_resolve(action.path, names) for action in parsed.actions]
    _check_paths(paths, "UpdateExpression")
    return names, values, paths


def apply_update(expr: str, item: Item, names: Names | None,
                 values: Values | None) -> Item:
    """The item after an UpdateExpression, as a new dict (`item` and `values` are never
    mutated; unchanged values are shared). SET values are all computed from the item as
    it was; then SET, ADD and DELETE apply, and REMOVE last (later list elements first)."""
    parsed = _update(expr)
    names, values, paths = _prepared(parsed, names, values)
    new = dict(item)
    removals: list[Resolved] = []
    changes: list[tuple[str, Resolved, AttrValue]] = []
    for action, path, maker in zip(parsed.actions, paths, parsed.makers, strict=True):
        if maker is not None:
            value = maker(item, names, values)
            _check_not_empty(value)
            changes.append(("SET", path, value))
        elif action.clause == "REMOVE":
            removals.append(path)
        else:
            assert isinstance(action.value, _Value)
            changes.append((action.clause, path, values[action.value.ref]))
    for clause, path, value in changes:
        _apply_change(new, clause, path, value)
    for path in sorted(removals, key=_removal_order):
        _remove(new, path)
    return new


def _apply_change(new: Item, clause: str, path: Resolved, value: AttrValue) -> None:
    """One SET, ADD or DELETE on the new item."""
    if clause == "SET":
        _write(new, path, value)
    elif clause == "ADD":
        _write(new, path, _added(_read(new, path), value))
    else:
        left = _deleted(_read(new, path), value)
        if left is not None:
            _write(new, path, left)
        elif _read(new, path) is not None:
            _remove(new, path)


def updated_names(expr: str, names: Names | None) -> frozenset[str]:
    """The top-level attribute names an UpdateExpression writes or removes."""
    parsed = _update(expr)
    names = names or _NO_NAMES
    _check_refs(tuple(r for r in parsed.refs if r[0] == "#"), names, _NO_VALUES,
                "UpdateExpression")
    return frozenset(str(_resolve(action.path, names)[0]) for action in parsed.actions)


# ---------------------------------------------------------------------------------------
# Projection expressions


@functools.lru_cache(maxsize=4096)
def _projection(text: str) -> _ParsedProjection:
    """The parsed projection expression for a text (cached)."""
    parser = _Parser(text, "ProjectionExpression")
    paths = tuple(parser.projection())
    parser.expect_end()
    flat = all(len(path.steps) == 1 for path in paths)
    return _ParsedProjection(paths, flat, parser.refs())


_Tree = dict[Step, "_Tree | None"]


def _tree(paths: Iterable[Resolved]) -> _Tree:
    """The paths as a tree of steps; None marks a whole value kept."""
    root: _Tree = {}
    for path in paths:
        node = root
        for step in path[:-1]:
            child = node.setdefault(step, {})
            assert child is not None
            node = child
        node[path[-1]] = None
    return root


def _picked(value: AttrValue, tree: _Tree) -> AttrValue | None:
    """The parts of a container value the tree asks for, or None when none are there.
    List elements keep their order and close up, as DynamoDB returns them."""
    if all(isinstance(step, int) for step in tree):
        elements = value.get("L")
        if elements is None:
            return None
        kept = []
        for index in sorted(tree, key=int):
            if int(index) < len(elements):
                kept_value = _kept(elements[int(index)], tree[index])
                if kept_value is not None:
                    kept.append(kept_value)
        return {"L": kept} if kept else None
    members = value.get("M")
    if members is None:
        return None
    chosen = {}
    for name, sub in tree.items():
        if name in members:
            kept_value = _kept(members[name], sub)
            if kept_value is not None:
                chosen[name] = kept_value
    return {"M": chosen} if chosen else None


def _kept(value: AttrValue, sub: _Tree | None) -> AttrValue | None:
    """What the projection keeps of a value: all of it, or the parts its subtree names."""
    return value if sub is None else _picked(value, sub)


def project(expr: str, item: Item, names: Names | None) -> Item:
    """The item with only the ProjectionExpression's paths; a nested path keeps its
    enclosing maps and lists, holding just what was asked for."""
    parsed = _projection(expr)
    names = names or _NO_NAMES
    _check_refs(parsed.refs, names, _NO_VALUES, "ProjectionExpression")
    paths = [_resolve(path, names) for path in parsed.paths]
    _check_paths(paths, "ProjectionExpression")
    if parsed.flat:
        return {str(p[0]): item[str(p[0])] for p in paths if p[0] in item}
    result: Item = {}
    for name, sub in _tree(paths).items():
        value = item.get(str(name))
        if value is not None:
            kept = _kept(value, sub)
            if kept is not None:
                result[str(name)] = kept
    return result


# ---------------------------------------------------------------------------------------
# Conditions: the public calls


def check_condition(expr: str, item: Item | None, names: Names | None,
                    values: Values | None, *, what: str = "ConditionExpression") -> bool:
    """Whether a ConditionExpression (or, with what="FilterExpression", a filter) holds
    for an item; None or {} means there is no item."""
    parsed = _condition(expr, what)
    names = names or _NO_NAMES
    values = values or _NO_VALUES
    if parsed.refs:
        _check_refs(parsed.refs, names, values, what)
    return parsed.test(item or _NO_ITEM, names, values)


def references(expr: str, kind: str) -> tuple[frozenset[str], frozenset[str]]:
    """The "#name" and ":value" placeholders an expression uses. kind is "condition",
    "filter", "update", "projection" or "key"; the expression must parse."""
    if kind == "update":
        refs = _update(expr).refs
    elif kind == "projection":
        refs = _projection(expr).refs
    elif kind in _LABELS:
        refs = _condition(expr, _LABELS[kind]).refs
    else:
        raise ValueError(f"unknown expression kind: {kind}")
    return (frozenset(r for r in refs if r[0] == "#"),
            frozenset(r for r in refs if r[0] == ":"))


# ---------------------------------------------------------------------------------------
# Key conditions


@dataclass(frozen=True)
class KeyCondition:
    """A Query's key condition: the hash key's value and an optional range condition."""

    hash_value: AttrValue
    range_op: str | None  # None, "=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"
    range_values: tuple[AttrValue, ...]  # 0, 1 or 2 values


def _key_terms(node: _Cond, out: list[_Cond]) -> None:
    """The conditions joined by AND; anything a key condition cannot hold is refused."""
    if isinstance(node, _Logic):
        if node.op == "OR":
            raise ExpressionError("Invalid operator used in KeyConditionExpression: OR")
        _key_terms(node.left, out)
        _key_terms(node.right, out)
        return
    refused = ("NOT" if isinstance(node, _Not) else "IN" if isinstance(node, _In)
               else "<>" if isinstance(node, _Compare) and node.op == "<>"
               else node.name if isinstance(node, _Call) and node.name != "begins_with"
               else None)
    if refused is not None:
        raise ExpressionError(f"Invalid operator used in KeyConditionExpression: {refused}")
    out.append(node)


def _key_name(operand: _Operand, names: Names) -> str:
    """The key attribute a term is about."""
    if isinstance(operand, _Call | _Arith):
        raise ExpressionError("KeyConditionExpressions cannot contain nested operations")
    if isinstance(operand, _Value):
        raise ExpressionError("Invalid condition in KeyConditionExpression: No key attribute "
                              "specified")
    if len(operand.steps) > 1:
        raise ExpressionError("KeyConditionExpressions cannot have conditions on nested "
                              "attributes")
    return str(_resolve(operand, names)[0])


def _key_value(operand: _Operand, values: Values) -> AttrValue:
    """A value a term compares its key with."""
    if isinstance(operand, _Call | _Arith):
        raise ExpressionError("KeyConditionExpressions cannot contain nested operations")
    if isinstance(operand, _Path):
        raise ExpressionError("Invalid condition in KeyConditionExpression: Multiple "
                              "attribute names used in one condition")
    return values[operand.ref]


def _key_term(node: _Cond, names: Names,
              values: Values) -> tuple[str, str, tuple[AttrValue, ...]]:
    """(key attribute, operator, values) for one term of a key condition."""
    if isinstance(node, _Compare):
        left, right, op = node.left, node.right, node.op
        if isinstance(right, _Path) and not isinstance(left, _Path):
            left, right, op = right, left, _FLIPPED[op]
        return _key_name(left, names), op, (_key_value(right, values),)
    if isinstance(node, _Between):
        if not isinstance(node.subject, _Path):
            raise ExpressionError("Invalid condition in KeyConditionExpression: BETWEEN "
                                  "operator must have the key attribute as its first operand")
        return (_key_name(node.subject, names), "BETWEEN",
                (_key_value(node.low, values), _key_value(node.high, values)))
    assert isinstance(node, _Call)
    if not isinstance(node.args[0], _Path):
        raise ExpressionError("Invalid condition in KeyConditionExpression: begins_with "
                              "operator must have the key attribute as its first operand")
    return _key_name(node.args[0], names), "begins_with", (_key_value(node.args[1], values),)


def _check_range(op: str, operands: tuple[AttrValue, ...]) -> None:
    """The range key's values must suit the operator."""
    label = "KeyConditionExpression"
    allowed = ("S", "B") if op == "begins_with" else _SCALARS
    for operand in operands:
        kind = _type_of(operand)
        if kind not in allowed:
            raise ExpressionError(f"Invalid {label}: Incorrect operand type for operator or "
                                  f"function; operator or function: {op}, operand type: "
                                  f"{kind}")
    if op == "BETWEEN":
        _check_bounds(operands[0], operands[1], label)


def key_condition(expr: str, names: Names | None, values: Values | None, hash_key: str,
                  range_key: str | None) -> KeyCondition:
    """A KeyConditionExpression: an equality on the hash key, optionally AND one
    condition on the range key (either order, parentheses allowed)."""
    label = "KeyConditionExpression"
    parsed = _condition(expr, label)
    names = names or _NO_NAMES
    values = values or _NO_VALUES
    _check_refs(parsed.refs, names, values, label)
    terms: list[_Cond] = []
    _key_terms(parsed.tree, terms)
    found: dict[str, tuple[str, tuple[AttrValue, ...]]] = {}
    for term in terms:
        name, op, operands = _key_term(term, names, values)
        if name in found:
            raise ExpressionError("KeyConditionExpressions must only contain one condition "
                                  "per key")
        found[name] = (op, operands)
    hashed = found.pop(hash_key, None)
    if hashed is None:
        raise ExpressionError(f"Query condition missed key schema element: {hash_key}")
    if hashed[0] != "=":
        raise ExpressionError("Query key condition not supported")
    ranged = found.pop(range_key, None) if range_key is not None else None
    if found:
        if range_key is not None and ranged is None:
            raise ExpressionError(f"Query condition missed key schema element: {range_key}")
        raise ExpressionError("Query key condition not supported")
    if ranged is None:
        return KeyCondition(hashed[1][0], None, ())
    _check_range(*ranged)
    return KeyCondition(hashed[1][0], ranged[0], ranged[1])


def range_matches(cond: KeyCondition, value: AttrValue) -> bool:
    """Whether a range key value satisfies the key condition's range part."""
    op = cond.range_op
    if op is None:
        return True
    first = cond.range_values[0]
    if op == "=":
        return equal(value, first)
    if op == "begins_with":
        return _begins_with(value, first)
    pair = _ordered(value, first)
    if pair is None:
        return False
    if op == "BETWEEN":
        upper = _ordered(value, cond.range_values[1])
        return upper is not None and pair[1] <= pair[0] and upper[0] <= upper[1]
    return _ORDERINGS[op](pair[0], pair[1])
