"""The recursive-descent parser that turns condition, update and projection expression
texts into syntax trees, refusing what DynamoDB refuses, with DynamoDB's messages."""

from __future__ import annotations

from collections.abc import Callable

from dmqlocal.memstore.expr_syntax import (
    Action,
    Arith,
    Between,
    Call,
    Compare,
    Cond,
    In,
    Logic,
    Not,
    Operand,
    Path,
    Step,
    Token,
    ValueRef,
    tokenize,
)
from dmqlocal.memstore.expr_values import ExpressionError

_KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN"})
_CLAUSES = ("SET", "REMOVE", "ADD", "DELETE")
_COMPARATORS = frozenset({"=", "<>", "<", "<=", ">", ">="})
_CONDITION_ARITY = {"attribute_exists": 1, "attribute_not_exists": 1, "attribute_type": 2,
                    "begins_with": 2, "contains": 2, "size": 1}
_UPDATE_ARITY = {"if_not_exists": 2, "list_append": 2}
_MAX_IN_OPERANDS = 100


class Parser:
    """A recursive-descent parser over one expression's tokens."""

    def __init__(self, text: str, label: str) -> None:
        if not text or text.isspace():
            raise ExpressionError(f"Invalid {label}: The expression can not be empty;")
        self.text = text
        self.label = label
        self.tokens = tokenize(text, label)
        self.pos = 0

    def refs(self) -> tuple[str, ...]:
        """The placeholders the expression uses, each once, in order of appearance."""
        seen = dict.fromkeys(t.text for t in self.tokens if t.kind in ("#", ":"))
        return tuple(seen)

    # Token access -------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token:
        """The token `ahead` places on (the eof token past the end)."""
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def take(self) -> Token:
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

    def syntax(self, token: Token) -> ExpressionError:
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

    def path(self) -> Path:
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
                return Path(tuple(steps))

    def _path_name(self, token: Token) -> str:
        """One name in a path: a #placeholder or a name that is not a keyword."""
        if token.kind == "#" or (token.kind == "name" and token.text.upper() not in _KEYWORDS):
            return token.text
        raise self.syntax(token)

    def operand(self) -> Operand:
        """A condition operand: a path, a :value, size(...) or a parenthesised operand."""
        token = self.peek()
        if self.at_op("("):
            self.take()
            inner = self.operand()
            self.expect_op(")")
            return inner
        if token.kind == ":":
            self.take()
            return ValueRef(token.text)
        if token.kind == "name" and self.peek(1).kind == "op" and self.peek(1).text == "(":
            return self._condition_call()
        return self.path()

    def _arguments(self, read: Callable[[], Operand]) -> tuple[Operand, ...]:
        """A parenthesised, comma-separated argument list."""
        self.expect_op("(")
        args = [read()]
        while self.at_op(","):
            self.take()
            args.append(read())
        self.expect_op(")")
        return tuple(args)

    def _condition_call(self) -> Call:
        """A function call in a condition, checked for its name, arity and arguments."""
        name = self.take().text
        if name not in _CONDITION_ARITY:
            if name in _UPDATE_ARITY:
                raise self.fail(f"The function is not allowed to be used this way in an "
                                f"expression; function: {name}")
            raise self.fail(f"Invalid function name; function: {name}")
        call = Call(name, self._arguments(self.operand))
        self._check_arity(call, _CONDITION_ARITY[name])
        for arg in call.args:
            self._no_boolean_call(arg)
        self._check_condition_args(call)
        return call

    def _check_arity(self, call: Call, arity: int) -> None:
        """Refuse a call with the wrong number of arguments."""
        if len(call.args) != arity:
            raise self.fail(f"Incorrect number of operands for operator or function; operator "
                            f"or function: {call.name}, number of operands: {len(call.args)}")

    def _check_condition_args(self, call: Call) -> None:
        """Refuse arguments of the wrong kind for the existence and type functions."""
        first = call.args[0]
        if call.name in ("attribute_exists", "attribute_not_exists") and not isinstance(
                first, Path):
            raise self.fail(f"Operator or function requires a document path; operator or "
                            f"function: {call.name}")
        if call.name == "attribute_type" and not isinstance(call.args[1], ValueRef):
            raise self.fail("Incorrect operand type for operator or function; operator or "
                            "function: attribute_type, operand type: "
                            "{NS,SS,L,BS,N,M,B,BOOL,NULL,S}")

    def _no_boolean_call(self, operand: Operand) -> None:
        """Refuse a true/false function (anything but size) where a value is wanted."""
        if isinstance(operand, Call) and operand.name != "size":
            raise self.fail(f"The function is not allowed to be used this way in an "
                            f"expression; function: {operand.name}")

    # Conditions ---------------------------------------------------------------------

    def condition(self) -> Cond:
        """condition := and (OR and)*"""
        node = self._and()
        while self.at_word("OR"):
            self.take()
            node = Logic("OR", node, self._and())
        return node

    def _and(self) -> Cond:
        """and := not (AND not)*"""
        node = self._not()
        while self.at_word("AND"):
            self.take()
            node = Logic("AND", node, self._not())
        return node

    def _not(self) -> Cond:
        """not := NOT not | primary"""
        if self.at_word("NOT"):
            self.take()
            return Not(self._not())
        return self._primary()

    def _primary(self) -> Cond:
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

    def _comparison(self) -> Cond:
        """operand comparator operand, BETWEEN, IN, or a true/false function call."""
        left = self.operand()
        token = self.peek()
        if token.kind == "op" and token.text in _COMPARATORS:
            self.take()
            right = self.operand()
            self._no_boolean_call(left)
            self._no_boolean_call(right)
            return Compare(token.text, left, right)
        if self.at_word("BETWEEN"):
            return self._between(left)
        if self.at_word("IN"):
            return self._in(left)
        if isinstance(left, Call):
            if left.name == "size":
                raise self.fail("The function is not allowed to be used this way in an "
                                "expression; function: size")
            return left
        raise self.syntax(token)

    def _between(self, subject: Operand) -> Between:
        """The rest of `subject BETWEEN low AND high`."""
        self.take()
        low = self.operand()
        if not self.at_word("AND"):
            raise self.syntax(self.peek())
        self.take()
        high = self.operand()
        for operand in (subject, low, high):
            self._no_boolean_call(operand)
        return Between(subject, low, high)

    def _in(self, subject: Operand) -> In:
        """The rest of `subject IN (option, ...)`."""
        self.take()
        options = self._arguments(self.operand)
        if len(options) > _MAX_IN_OPERANDS:
            raise self.fail(f"The IN operator is provided with too many operands; number of "
                            f"operands: {len(options)}")
        for operand in (subject, *options):
            self._no_boolean_call(operand)
        return In(subject, options)

    # Update expressions -------------------------------------------------------------

    def update(self) -> list[Action]:
        """update := (SET|REMOVE|ADD|DELETE action (, action)*)+, each clause once."""
        actions: list[Action] = []
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

    def _action(self, clause: str) -> Action:
        """One action of a clause."""
        path = self.path()
        if clause == "SET":
            self.expect_op("=")
            return Action(clause, path, self._set_value())
        if clause == "REMOVE":
            return Action(clause, path, None)
        token = self.take()
        if token.kind != ":":
            raise self.syntax(token)
        return Action(clause, path, ValueRef(token.text))

    def _set_value(self) -> Operand:
        """operand, or operand + operand, or operand - operand."""
        left = self._set_operand()
        if self.at_op("+", "-"):
            op = self.take().text
            return Arith(op, left, self._set_operand())
        return left

    def _set_operand(self) -> Operand:
        """A path, a :value, if_not_exists(path, operand) or list_append(a, b)."""
        token = self.peek()
        if token.kind == ":":
            self.take()
            return ValueRef(token.text)
        if token.kind == "name" and self.peek(1).kind == "op" and self.peek(1).text == "(":
            return self._update_call()
        return self.path()

    def _update_call(self) -> Call:
        """if_not_exists() or list_append(), checked."""
        name = self.take().text
        if name not in _UPDATE_ARITY:
            if name in _CONDITION_ARITY:
                raise self.fail(f"The function is not allowed in an update expression; "
                                f"function: {name}")
            raise self.fail(f"Invalid function name; function: {name}")
        call = Call(name, self._arguments(self._set_operand))
        self._check_arity(call, _UPDATE_ARITY[name])
        if name == "if_not_exists" and not isinstance(call.args[0], Path):
            raise self.fail("Operator or function requires a document path; operator or "
                            "function: if_not_exists")
        return call

    # Projection expressions ---------------------------------------------------------

    def projection(self) -> list[Path]:
        """projection := path (, path)*"""
        paths = [self.path()]
        while self.at_op(","):
            self.take()
            paths.append(self.path())
        return paths
