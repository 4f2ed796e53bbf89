"""P4-16 parser: lark LALR(1) over the preprocessed text, with a p4c-style lexer feedback.

The post-lexer turns identifiers that name types into TYPE_IDENTIFIER tokens, a ``<`` that opens a
type-argument list into L_TARGS, and ``>>`` inside a type-argument list back into two ``>``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from softswitch.errors import P4Error
from softswitch.frontend.preprocessor import Preprocessed

GRAMMAR = Path(__file__).with_name("p4.lark")
_LOCK = threading.Lock()

_TYPE_DECL = re.compile(
    r"(?<![.\w])(?:header|header_union|struct|parser|control|package)\s+([A-Za-z_]\w*)"
    r"|(?<![.\w])enum\s+(?:(?:bit|int)\s*<[^>]*>\s+|[A-Za-z_]\w*\s+(?=[A-Za-z_]\w*\s*\{))?([A-Za-z_]\w*)\s*\{"
    r"|(?<![.\w])extern\s+([A-Za-z_]\w*)\s*(?:<[^>]*>)?\s*\{"
    r"|(?<![.\w])typedef\s+[^;{}=]*?\b([A-Za-z_]\w*)\s*;"
    r"|(?<![.\w])type\s+[^;{}()=]*?\b([A-Za-z_]\w*)\s*;"
)
_TYPE_PARAMS = re.compile(r"\b[A-Za-z_]\w*\s*<\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*>\s*[({]")
_KEYWORDS = {
    "bit", "int", "varbit", "bool", "error", "string", "void", "tuple", "header", "struct",
    "enum", "extern", "parser", "control", "package", "typedef", "type", "const", "action",
    "table", "state", "transition", "select", "apply", "if", "else", "switch", "return", "exit",
    "default", "true", "false", "in", "out", "inout", "key", "actions", "entries",
}  # fmt: skip

_TYPE_START = {"BIT", "INT_KW", "VARBIT", "BOOL", "ERROR", "STRING_KW", "TUPLE", "VOID"}


def collect_type_names(text: str) -> set[str]:
    names: set[str] = set()
    for m in _TYPE_DECL.finditer(text):
        for g in m.groups():
            if g and g not in _KEYWORDS:
                names.add(g)
    for m in _TYPE_PARAMS.finditer(text):
        items = [s.strip() for s in m.group(1).split(",")]
        # a type-parameter list is a list of fresh names; skip things like `lookahead<ipv4_t>(`
        names.update(s for s in items if s not in _KEYWORDS)
    return names


class _PostLex:
    always_accept = ("IDENTIFIER",)

    def __init__(self, type_names: set[str]) -> None:
        self.type_names = type_names

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        toks = list(stream)
        for t in toks:
            if t.type == "IDENTIFIER" and t.value in self.type_names:
                t.type = "TYPE_IDENTIFIER"
        angle = 0  # depth of open type-argument / bit<...> brackets
        prev: Token | None = None
        n = len(toks)
        for i, t in enumerate(toks):
            if t.type == "LT" and prev is not None:
                nxt = toks[i + 1] if i + 1 < n else None
                if prev.type in ("BIT", "INT_KW", "VARBIT"):
                    angle += 1
                elif prev.type in ("IDENTIFIER", "TYPE_IDENTIFIER", "VALUE_SET", "TUPLE") and (
                    nxt is not None
                    and (
                        nxt.type in _TYPE_START
                        or (
                            nxt.type == "TYPE_IDENTIFIER"
                            and not (i + 2 < n and toks[i + 2].value == ".")
                        )
                        or nxt.value == "_"
                    )
                ):
                    t.type = "L_TARGS"
                    angle += 1
            elif t.type == "GT" and angle:
                angle -= 1
            elif t.type == "SHR" and angle:
                first = Token.new_borrow_pos("GT", ">", t)
                second = Token(
                    "GT",
                    ">",
                    t.start_pos + 1,
                    t.line,
                    t.column + 1,
                    t.end_line,
                    t.end_column,
                    t.end_pos,
                )
                angle -= 1
                yield first
                if angle:
                    angle -= 1
                yield second
                prev = second
                continue
            elif t.type == "LPAR" and angle:
                pass
            yield t
            prev = t


@cache
def _lark() -> Lark:
    return Lark(
        GRAMMAR.read_text(),
        parser="lalr",
        lexer="basic",
        propagate_positions=True,
        maybe_placeholders=True,
        postlex=_PostLex(set()),
    )


def parse(pre: Preprocessed) -> Tree:
    """Parse preprocessed text; syntax errors become P4Error at the original file:line:col."""
    lark = _lark()
    post = _PostLex(collect_type_names(pre.text))
    # the parser object is shared; give it the post-lexer of this program (one parse at a time)
    try:
        with _LOCK:
            lark.parser.lexer.postlexer = post  # type: ignore[attr-defined]
            return lark.parse(pre.text)
    except UnexpectedInput as e:
        file, line = pre.origin(e.line)
        if isinstance(e, UnexpectedToken):
            tok = e.token
            what = "end of input" if tok.type == "$END" else repr(str(tok.value))
            msg = f"syntax error: unexpected {what}"
        elif isinstance(e, UnexpectedCharacters):
            msg = f"syntax error: unexpected character {pre.text[e.pos_in_stream]!r}"
        else:
            msg = "syntax error"
        raise P4Error(msg, file, line, e.column) from None
