"""A C preprocessor for P4-16 sources, as p4c runs it (cpp subset).

Supports ``#include "..."`` and ``<...>`` (include dirs, then the package's own ``core.p4`` and
``v1model.p4``), object-like and function-like ``#define``, ``#undef``, ``#if/#ifdef/#ifndef/#elif/
#else/#endif`` with integer expressions and ``defined``, ``#line``, ``#error``, ``#pragma`` (kept for
the parser to ignore) and definitions given from the API (``-D``).

The output is one text plus a line map: output line ``i`` (1-based) came from ``line_map[i-1]`` =
(file, line), so errors found later point at the original source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from softswitch.errors import P4Error

BUILTIN_INCLUDE_DIR = Path(__file__).parent / "p4include"

_IDENT = re.compile(r"[A-Za-z_]\w*")
_TOKEN = re.compile(
    r"""(?P<id>[A-Za-z_]\w*)|(?P<num>\d[\w]*)|(?P<str>"(?:[^"\\]|\\.)*")|(?P<ws>\s+)|(?P<op>.)""",
    re.S,
)


@dataclass
class Macro:
    name: str
    body: str
    params: list[str] | None = None  # None: object-like
    variadic: bool = False


@dataclass
class Preprocessed:
    text: str
    line_map: list[tuple[str, int]] = field(default_factory=list)

    def origin(self, line: int) -> tuple[str, int]:
        if 1 <= line <= len(self.line_map):
            return self.line_map[line - 1]
        return ("<input>", line)


def strip_comments(text: str) -> str:
    """Replace comments by spaces (newlines kept) so that line and column numbers stay valid."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class _ExprParser:
    """Integer expressions of ``#if`` (C semantics, identifiers already replaced)."""

    _tok = re.compile(r"\s*(0[xX][0-9a-fA-F]+|\d+|&&|\|\||==|!=|<=|>=|<<|>>|[-+*/%()!~<>&|^?:])")

    def __init__(self, text: str, where: tuple[str, int]) -> None:
        self.where = where
        self.toks: list[str] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = self._tok.match(text, pos)
            if not m:
                self.fail(f"bad token in #if expression: {text[pos:].strip()!r}")
            self.toks.append(m.group(1))
            pos = m.end()
            if text[pos:].strip() == "":
                break
        self.i = 0

    def fail(self, msg: str) -> None:
        raise P4Error(msg, self.where[0], self.where[1], 1)

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        t = self.peek()
        if t is None:
            self.fail("unexpected end of #if expression")
        self.i += 1
        return t  # type: ignore[return-value]

    def parse(self) -> int:
        if not self.toks:
            self.fail("#if with no expression")
        v = self.ternary()
        if self.peek() is not None:
            self.fail(f"unexpected {self.peek()!r} in #if expression")
        return v

    def ternary(self) -> int:
        c = self.binary(0)
        if self.peek() == "?":
            self.take()
            a = self.ternary()
            if self.take() != ":":
                self.fail("expected ':' in #if expression")
            b = self.ternary()
            return a if c else b
        return c

    _levels: tuple[tuple[str, ...], ...] = (
        ("||",),
        ("&&",),
        ("|",),
        ("^",),
        ("&",),
        ("==", "!="),
        ("<", ">", "<=", ">="),
        ("<<", ">>"),
        ("+", "-"),
        ("*", "/", "%"),
    )

    def binary(self, level: int) -> int:
        if level == len(self._levels):
            return self.unary()
        v = self.binary(level + 1)
        while self.peek() in self._levels[level]:
            op = self.take()
            w = self.binary(level + 1)
            v = self.apply(op, v, w)
        return v

    def apply(self, op: str, a: int, b: int) -> int:
        if op in ("/", "%") and b == 0:
            self.fail("division by zero in #if expression")
        ops = {
            "||": lambda: int(bool(a) or bool(b)),
            "&&": lambda: int(bool(a) and bool(b)),
            "|": lambda: a | b,
            "^": lambda: a ^ b,
            "&": lambda: a & b,
            "==": lambda: int(a == b),
            "!=": lambda: int(a != b),
            "<": lambda: int(a < b),
            ">": lambda: int(a > b),
            "<=": lambda: int(a <= b),
            ">=": lambda: int(a >= b),
            "<<": lambda: a << b,
            ">>": lambda: a >> b,
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
            "/": lambda: int(a / b),
            "%": lambda: a - int(a / b) * b,
        }
        return ops[op]()

    def unary(self) -> int:
        t = self.take()
        if t == "!":
            return int(not self.unary())
        if t == "~":
            return ~self.unary()
        if t == "-":
            return -self.unary()
        if t == "+":
            return self.unary()
        if t == "(":
            v = self.ternary()
            if self.take() != ")":
                self.fail("expected ')' in #if expression")
            return v
        if t[0].isdigit():
            return int(t, 0) if not (len(t) > 1 and t[0] == "0" and t[1].isdigit()) else int(t, 8)
        self.fail(f"unexpected {t!r} in #if expression")
        return 0


class Preprocessor:
    def __init__(
        self,
        defines: Mapping[str, str | int] | None = None,
        include_dirs: Iterable[str | Path] | None = None,
    ) -> None:
        self.macros: dict[str, Macro] = {}
        self.include_dirs = [Path(d) for d in (include_dirs or [])]
        self.out_lines: list[str] = []
        self.line_map: list[tuple[str, int]] = []
        self.depth = 0
        for name, value in (defines or {}).items():
            self.macros[name] = Macro(name, "1" if value is None else str(value))

    # ---------------------------------------------------------------- entry points
    def run_file(self, path: str | Path) -> Preprocessed:
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise P4Error(f"cannot read {p}: {e.strerror}", str(p), 0, 0) from None
        return self.run(text, str(p))

    def run(self, text: str, filename: str) -> Preprocessed:
        self._process(text, filename)
        return Preprocessed("\n".join(self.out_lines) + "\n", self.line_map)

    # ---------------------------------------------------------------- internals
    def _find_include(self, name: str, angled: bool, cur: str, where: tuple[str, int]) -> Path:
        dirs: list[Path] = []
        if not angled:
            dirs.append(Path(cur).parent)
        dirs.extend(self.include_dirs)
        dirs.append(BUILTIN_INCLUDE_DIR)
        for d in dirs:
            cand = d / name
            if cand.is_file():
                return cand
        raise P4Error(f"#include file not found: {name}", where[0], where[1], 1)

    def _process(self, text: str, filename: str) -> None:
        self.depth += 1
        if self.depth > 64:
            raise P4Error("#include nested too deeply", filename, 1, 1)
        lines = strip_comments(text).split("\n")
        # stack of (this branch active, some branch already taken, parent active)
        cond: list[tuple[bool, bool, bool]] = []
        active = True
        cur_file, line_delta = filename, 0
        i = 0
        while i < len(lines):
            start = i
            line = lines[i]
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i]
            i += 1
            where = (cur_file, start + 1 + line_delta)
            stripped = line.strip()
            if stripped.startswith("#"):
                directive = stripped[1:].strip()
                m = _IDENT.match(directive)
                word = m.group(0) if m else ""
                rest = directive[len(word) :].strip()
                if word in ("if", "ifdef", "ifndef"):
                    if not active:
                        cond.append((False, True, False))
                    else:
                        if word == "if":
                            val = self._eval_if(rest, where)
                        else:
                            name = self._macro_name(rest, where)
                            val = (name in self.macros) == (word == "ifdef")
                        cond.append((val, val, True))
                    active = cond[-1][0]
                elif word == "elif":
                    if not cond:
                        raise P4Error("#elif without #if", *where, 1)
                    _, taken, parent = cond[-1]
                    val = parent and not taken and self._eval_if(rest, where)
                    cond[-1] = (val, taken or val, parent)
                    active = val
                elif word == "else":
                    if not cond:
                        raise P4Error("#else without #if", *where, 1)
                    _, taken, parent = cond[-1]
                    cond[-1] = (parent and not taken, True, parent)
                    active = cond[-1][0]
                elif word == "endif":
                    if not cond:
                        raise P4Error("#endif without #if", *where, 1)
                    cond.pop()
                    active = cond[-1][0] if cond else True
                elif not active:
                    pass
                elif word == "define":
                    self._define(rest, where)
                elif word == "undef":
                    self.macros.pop(self._macro_name(rest, where), None)
                elif word == "include":
                    self._include(rest, cur_file, where)
                elif word == "line":
                    parts = self._expand(rest, where).split()
                    if not parts or not parts[0].isdigit():
                        raise P4Error("#line needs a line number", *where, 1)
                    line_delta = int(parts[0]) - (i + 1)
                    if len(parts) > 1:
                        cur_file = parts[1].strip('"')
                elif word == "error":
                    raise P4Error(f"#error {rest}", *where, 1)
                elif word in ("pragma", "warning", ""):
                    pass
                else:
                    raise P4Error(f"unknown preprocessor directive #{word}", *where, 1)
                for k in range(start, i):
                    self._emit("", (cur_file, k + 1 + line_delta))
                continue
            for k in range(start, i - 1):
                self._emit("", (cur_file, k + 1 + line_delta))
            self._emit(self._expand(line, where) if active else "", where)
        if cond:
            raise P4Error("unterminated #if", filename, len(lines), 1)
        self.depth -= 1

    def _emit(self, text: str, where: tuple[str, int]) -> None:
        self.out_lines.append(text)
        self.line_map.append(where)

    def _macro_name(self, rest: str, where: tuple[str, int]) -> str:
        m = _IDENT.match(rest)
        if not m:
            raise P4Error("macro name expected", *where, 1)
        return m.group(0)

    def _define(self, rest: str, where: tuple[str, int]) -> None:
        name = self._macro_name(rest, where)
        after = rest[len(name) :]
        if after.startswith("("):
            close = after.find(")")
            if close < 0:
                raise P4Error(f"missing ')' in parameters of macro {name}", *where, 1)
            raw = [p.strip() for p in after[1:close].split(",") if p.strip()]
            variadic = bool(raw) and raw[-1] == "..."
            params = raw[:-1] if variadic else raw
            for p in params:
                if not _IDENT.fullmatch(p):
                    raise P4Error(f"bad parameter {p!r} in macro {name}", *where, 1)
            self.macros[name] = Macro(name, after[close + 1 :].strip(), params, variadic)
        else:
            self.macros[name] = Macro(name, after.strip())

    def _include(self, rest: str, cur: str, where: tuple[str, int]) -> None:
        rest = rest.strip()
        if not rest.startswith(('"', "<")):
            rest = self._expand(rest, where).strip()
        m = re.fullmatch(r'"([^"]+)"|<([^>]+)>', rest)
        if not m:
            raise P4Error(f"bad #include {rest!r}", *where, 1)
        angled = m.group(2) is not None
        path = self._find_include(m.group(1) or m.group(2), angled, cur, where)
        self._process(path.read_text(), str(path))

    def _eval_if(self, expr: str, where: tuple[str, int]) -> bool:
        def repl_defined(m: re.Match[str]) -> str:
            return "1" if (m.group(1) or m.group(2)) in self.macros else "0"

        expr = re.sub(
            r"\bdefined\s*(?:\(\s*([A-Za-z_]\w*)\s*\)|([A-Za-z_]\w*))", repl_defined, expr
        )
        expanded = self._expand(expr, where)
        expanded = re.sub(r"\b[A-Za-z_]\w*\b", "0", expanded)
        expanded = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expanded)
        return bool(_ExprParser(expanded, where).parse())

    # macro expansion ----------------------------------------------------------
    def _expand(self, text: str, where: tuple[str, int], hide: frozenset[str] = frozenset()) -> str:
        if not self.macros or not any(
            m in text for m in self.macros
        ):  # fast path: most lines use no macro
            return text
        toks = [m for m in _TOKEN.finditer(text)]
        out: list[str] = []
        k = 0
        while k < len(toks):
            t = toks[k]
            s = t.group(0)
            k += 1
            if t.lastgroup != "id" or s not in self.macros or s in hide:
                out.append(s)
                continue
            mac = self.macros[s]
            if mac.params is None:
                out.append(self._expand(mac.body, where, hide | {s}))
                continue
            j = k
            while j < len(toks) and toks[j].lastgroup == "ws":
                j += 1
            if j >= len(toks) or toks[j].group(0) != "(":
                out.append(s)
                continue
            args, k = self._collect_args(toks, j + 1, s, where)
            out.append(self._substitute(mac, args, where, hide | {s}))
        return "".join(out)

    def _collect_args(
        self, toks: list[re.Match[str]], k: int, name: str, where: tuple[str, int]
    ) -> tuple[list[str], int]:
        args: list[str] = []
        cur: list[str] = []
        depth = 0
        while k < len(toks):
            s = toks[k].group(0)
            k += 1
            if s == "(":
                depth += 1
            elif s == ")":
                if depth == 0:
                    args.append("".join(cur).strip())
                    return args, k
                depth -= 1
            elif s == "," and depth == 0:
                args.append("".join(cur).strip())
                cur = []
                continue
            cur.append(s)
        raise P4Error(f"unterminated argument list invoking macro {name}", *where, 1)

    def _substitute(
        self, mac: Macro, args: list[str], where: tuple[str, int], hide: frozenset[str]
    ) -> str:
        params = mac.params or []
        if args == [""] and not params:
            args = []
        if len(args) != len(params) and not (mac.variadic and len(args) >= len(params)):
            raise P4Error(
                f"macro {mac.name} takes {len(params)} arguments, {len(args)} given", *where, 1
            )
        values = {p: a for p, a in zip(params, args, strict=False)}
        if mac.variadic:
            values["__VA_ARGS__"] = ", ".join(args[len(params) :])
        body_toks = list(_TOKEN.finditer(mac.body))
        out: list[str] = []
        k = 0
        while k < len(body_toks):
            s = body_toks[k].group(0)
            if s == "#" and k + 1 < len(body_toks) and body_toks[k + 1].group(0) == "#":
                while out and out[-1].isspace():
                    out.pop()
                k += 2
                while k < len(body_toks) and body_toks[k].lastgroup == "ws":
                    k += 1
                continue
            if s == "#" and k + 1 < len(body_toks) and body_toks[k + 1].group(0) in values:
                out.append('"' + values[body_toks[k + 1].group(0)].replace('"', '\\"') + '"')
                k += 2
                continue
            if body_toks[k].lastgroup == "id" and s in values:
                out.append(self._expand(values[s], where, hide))
            else:
                out.append(s)
            k += 1
        return self._expand("".join(out), where, hide)


def preprocess(
    text: str,
    filename: str = "<input>",
    defines: Mapping[str, str | int] | None = None,
    include_dirs: Iterable[str | Path] | None = None,
) -> Preprocessed:
    return Preprocessor(defines, include_dirs).run(text, filename)
