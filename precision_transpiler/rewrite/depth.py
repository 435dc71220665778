"""How deep an expression may be before it is parsed, and conversion of deep ones.

LibCST's native parser recurses on the C stack: about 1,200 nested brackets (`f(f(...))`) or a
chain of 5,000 to 10,000 operators (`a + a + ...`, `not not ...`, `lambda: lambda: ...`) crash
the whole process with a segmentation fault, which no `except` can catch (a directory run would
die with exit 139, `-j 2` with BrokenProcessPool). So every source is scanned with `tokenize`
(cheap, no recursion) before LibCST sees it, and refused in one line when it nests deeper than

* `MAX_BRACKETS` nested brackets: CPython's own limit (its tokenizer refuses more with "too many
  nested parentheses"), so no runnable file is refused for it; LibCST handles ~1,000;
* `MAX_CHAIN` operators on the way from a statement to its innermost expression (summed over
  the enclosing brackets, reset at each comma): a margin under the crash, with all 200 brackets
  around it (measured: 300 brackets around 3,000 operators parse). A lambda is an operator that
  nests its body, so its parameter list (commas, defaults) and its colon do not end the chain as
  a dict's or a slice's colon does, and the colon counts as a second operator: `lambda: lambda:
  ...` costs LibCST about twice what `not not ...` does (20,000 of them crashed it). Adjacent
  string literals (`"a" "b" ...`, implicitly concatenated) nest too, one level per string.
  So do trailers, and LibCST's time grows with the square of their number: 2,000 subscripts
  (`x[0][0]...`) take it 7.5 s, 6,000 take 99 s and 12,000 crash it; calls (`f()()...`) cost
  about a third of that, attributes (`.a.b...`) and operators less. A subscript counts as
  `TRAILER_COST["["]` operators and a call as `TRAILER_COST["("]`, so a chain within the limit
  parses in well under a second.

Below those limits LibCST's (Python) visitors can still exceed the interpreter's recursion limit
on a long flat chain (a 200-term `torch.half + 1 + ...` did): `with_deep_stack` reruns such a
conversion in a thread with a large stack and a raised recursion limit.
"""

from __future__ import annotations

import io
import keyword
import sys
import threading
import tokenize
from collections.abc import Callable
from typing import TypeVar

MAX_BRACKETS = 200
MAX_CHAIN = 2000
_DEEP_RECURSION = 60_000
_DEEP_STACK = 512 * 1024 * 1024

_OPEN, _CLOSE = "([{", ")]}"
_NOT_CHAINING = {",", ";", ":", "=", "->", ":="}
_CHAINING_WORDS = {"not", "and", "or", "if", "else", "lambda", "is", "in", "await"}
#: what a bracket opened right after an operand (a subscript or a call: a trailer) adds to the chain
TRAILER_COST = {"[": 4, "(": 2}
_OPERAND_WORDS = {"True", "False", "None"}

T = TypeVar("T")


class TooDeep(ValueError):
    """The source nests deeper than LibCST parses safely; `line` is where the limit is passed."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def check_depth(source: str) -> None:
    """Raise TooDeep when `source` nests deeper than the limits above. A source that does not
    tokenize is left to the parser (its syntax error is the better message)."""
    levels = [0]  # operators since the last comma, per open bracket (level 0: the statement)
    lambdas = [0]  # per open bracket: lambdas whose parameter list has not reached its colon
    chain = 0  # their sum
    previous = tokenize.NEWLINE  # kind of the previous token that is not a comment or a line break
    previous_text = ""
    try:
        # newline=None: universal newlines, as Python and LibCST read code (a file whose lines end
        # in a lone CR is otherwise one line to tokenize, and nothing in it was counted)
        for token in tokenize.generate_tokens(io.StringIO(source, newline=None).readline):
            kind, text = token.type, token.string
            concatenated = kind == tokenize.STRING and previous == tokenize.STRING
            trailer = (
                kind == tokenize.OP
                and text in TRAILER_COST
                and (
                    previous in (tokenize.NUMBER, tokenize.STRING)
                    or (previous == tokenize.OP and previous_text in _CLOSE)
                    or (
                        previous == tokenize.NAME
                        and (not keyword.iskeyword(previous_text) or previous_text in _OPERAND_WORDS)
                    )
                )
            )
            if kind not in (tokenize.NL, tokenize.COMMENT):
                previous, previous_text = kind, text
            if trailer:
                levels[-1] += TRAILER_COST[text]
                chain += TRAILER_COST[text]
                if chain > MAX_CHAIN:
                    raise _too_long(token.start[0])
            if kind == tokenize.OP and text in _OPEN:
                levels.append(0)
                lambdas.append(0)
                if len(levels) - 1 > MAX_BRACKETS:
                    raise TooDeep(
                        token.start[0],
                        f"more than {MAX_BRACKETS} nested brackets (Python's own limit; deeper nesting "
                        "would crash the parser)",
                    )
            elif kind == tokenize.OP and text in _CLOSE:
                if len(levels) > 1:
                    chain -= levels.pop()
                    lambdas.pop()
            elif lambdas[-1] and kind == tokenize.OP and text in (",", "="):
                pass  # a lambda's parameters: the chain goes on into its body
            elif kind == tokenize.NEWLINE or (
                kind == tokenize.OP and text in _NOT_CHAINING and not (text == ":" and lambdas[-1])
            ):
                chain -= levels[-1]
                levels[-1] = 0
                if kind == tokenize.NEWLINE:
                    levels, lambdas, chain = [0], [0], 0
            elif (
                (kind == tokenize.OP and text not in _NOT_CHAINING)
                or (kind == tokenize.NAME and text in _CHAINING_WORDS)
                or (kind == tokenize.OP and text == ":")
                or concatenated
            ):
                if text == "lambda":
                    lambdas[-1] += 1
                elif text == ":":
                    lambdas[-1] -= 1  # the colon that ends a lambda's parameters
                levels[-1] += 1
                chain += 1
                if chain > MAX_CHAIN:
                    raise _too_long(token.start[0])
    except (tokenize.TokenError, SyntaxError, ValueError) as exc:
        if isinstance(exc, TooDeep):
            raise
        return


def _too_long(line: int) -> TooDeep:
    return TooDeep(
        line,
        f"an expression chains more than {MAX_CHAIN} operators, subscripts and calls (deeper nesting would "
        "crash the parser); split it into several statements",
    )


def with_deep_stack(work: Callable[[], T]) -> T:
    """`work()`; on RecursionError (or an error raised while one unwound), once more in a thread
    with a large stack and a high recursion limit (restored afterwards). A second one propagates
    as a RecursionError."""
    try:
        return work()
    except RecursionError:
        pass
    except Exception as exc:
        # LibCST's code generator can turn a RecursionError into another error while unwinding
        # (a KeyError from its position bookkeeping): a deep input all the same.
        if not _caused_by_recursion(exc):
            raise
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # handed to the calling thread
            failure.append(exc)

    lock = _LOCK
    with lock:
        old_limit, old_stack = sys.getrecursionlimit(), threading.stack_size()
        try:
            threading.stack_size(_DEEP_STACK)
            sys.setrecursionlimit(max(old_limit, _DEEP_RECURSION))
            thread = threading.Thread(target=run, name="ptranspile-deep")
            thread.start()
            thread.join()
        finally:
            threading.stack_size(old_stack)
            sys.setrecursionlimit(old_limit)
    if failure:
        if not isinstance(failure[0], RecursionError) and _caused_by_recursion(failure[0]):
            raise RecursionError("too deep even with a large stack") from failure[0]
        raise failure[0]
    return outcome[0]


def _caused_by_recursion(exc: BaseException) -> bool:
    """Whether `exc` was raised while a RecursionError was being handled (its context chain)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, RecursionError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


_LOCK = threading.Lock()
