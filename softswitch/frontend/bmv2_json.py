"""BMv2 JSON (as p4c-bm2-ss writes it) into the engine.

The engine has one representation of a loaded pipeline (``softswitch.engine.program.Program``),
built by one translator from the P4 subset this target checks. A BMv2 JSON is brought to that
subset: header types, parser states, actions, tables, the ingress/egress graphs, checksums and the
deparser are written back as P4-16 v1model source with every control-plane name kept through
``@name(".…")`` (and ids through ``@id`` when the client's P4Info is given), and that source goes
through the usual preprocessor, checker and code generator. Semantics and speed therefore live in
one place.

BMv2 evaluates expressions on unbounded integers and p4c adds a ``& 0xff…`` after every operation
that can overflow; the arithmetic under such a mask is done at the mask's width (congruent modulo
2^w, so the same bits), and an assignment truncates to the destination's width, as BMv2's
``Field::set`` does.

Anything this target cannot run (a primitive, an expression operator, action profiles, header
unions, parse value sets, field lists, signed fields, a pipeline graph that is not structured) is
refused before anything is loaded, with a :class:`Bmv2JsonError` naming the object and the
primitive.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from softswitch.errors import P4Error

FORMAT_KEYS = ("header_types", "headers", "parsers", "deparsers", "actions", "pipelines")
CORE_ERRORS = [
    "NoError",
    "PacketTooShort",
    "NoMatch",
    "StackOutOfBounds",
    "HeaderTooShort",
    "ParserTimeout",
    "ParserInvalidArgument",
]
HASH_ALGOS = {
    "crc32": "crc32",
    "crc32_custom": "crc32_custom",
    "crc16": "crc16",
    "crc16_custom": "crc16_custom",
    "random": "random",
    "identity": "identity",
    "csum16": "csum16",
    "xor16": "xor16",
}
COUNTER_UNITS = {1: "bytes", 2: "packets", 3: "packets_and_bytes"}
ARITH = {"+", "-", "*", "<<", "~"}
COMPARE = {"==", "!=", "<", ">", "<=", ">="}


class Bmv2JsonError(P4Error):
    """A BMv2 JSON this target refuses; the message names the file and the object."""

    def __init__(self, message: str, file: str = "<json>") -> None:
        super().__init__(message, file, 0, 0)
        self.args = (f"{file}: {message}",)

    def __str__(self) -> str:
        return f"{self.file}: {self.msg}"


def looks_like_bmv2_json(data: bytes | str) -> bool:
    """True for a JSON object with BMv2's top-level keys (not a source bundle)."""
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    if not text.lstrip().startswith("{"):
        return False
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(doc, dict) and all(k in doc for k in ("header_types", "pipelines"))


def _ident(name: str, prefix: str) -> str:
    return prefix + re.sub(r"\W", "_", name)


# P4 keywords and the generated code's own parameter names: action parameters keep their JSON
# name (it is their P4Info name) unless it is one of these.
RESERVED = {
    "hdr", "meta", "sm", "packet", "action", "actions", "apply", "bit", "bool", "const", "control",
    "default", "else", "entries", "enum", "error", "exit", "extern", "false", "header", "if", "in",
    "inout", "int", "key", "match_kind", "out", "package", "parser", "return", "select", "size",
    "state", "struct", "switch", "table", "transition", "true", "tuple", "typedef", "varbit",
    "void", "type", "value_set", "list", "this", "abstract", "string",
}  # fmt: skip


def _param(name: str) -> str:
    if re.fullmatch(r"[A-Za-z_]\w*", name) and name not in RESERVED and not name.startswith("p_"):
        return name
    return _ident(name, "p_")


def _sans_source_info(a: dict[str, Any]) -> Any:
    """An action's body and parameters without p4c's source positions (for comparisons)."""

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "source_info"}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return strip((a["primitives"], a["runtime_data"]))


@dataclass
class X:
    """A translated expression: P4 text, kind (bits | bool | int | error) and width."""

    text: str
    kind: str
    width: int = 0
    value: int | None = None  # literal value (kind "int")


@dataclass
class HeaderRef:
    path: str  # hdr.h_x, hdr.h_s[0], meta.m_scalars, sm
    type_name: str
    metadata: bool
    fields: dict[str, tuple[str, int]] = field(default_factory=dict)  # json -> (p4 name, width)


class Translator:
    def __init__(self, doc: dict[str, Any], filename: str, p4info: Any = None) -> None:
        self.doc = doc
        self.file = filename
        self.p4info = p4info
        self.out: list[str] = []
        self.headers: dict[str, HeaderRef] = {}
        self.stacks: dict[str, str] = {}  # json stack name -> p4 path
        self.stack_fields: dict[str, dict[str, tuple[str, int]]] = {}
        # inside a parser state: lookahead reads to emit before the statement being translated
        self.parser_locals: list[str] | None = None
        self.pre_lines: list[str] = []
        self.actions: dict[int, dict[str, Any]] = {a["id"]: a for a in doc.get("actions", [])}
        self.action_ident: dict[int, str] = {}
        self.action_by_name: dict[str, dict[str, Any]] = {}
        self.calcs = {c["name"]: c for c in doc.get("calculations", [])}
        self.registers = {r["name"]: r for r in doc.get("register_arrays", [])}
        self.counters = {c["name"]: c for c in doc.get("counter_arrays", [])}
        self.meters = {m["name"]: m for m in doc.get("meter_arrays", [])}
        self.extern_ident: dict[str, str] = {}
        self.errors: dict[int, str] = {}
        self.tmp_n = 0
        self.ids: dict[tuple[str, str], int] = {}
        self.units: dict[str, str] = {}
        self.p4info_tables: set[str] | None = None
        self.p4info_params: dict[str, list[tuple[str, int]]] = {}  # action -> (param, width)
        self.scopes: dict[tuple[str, str], str] = {}  # (table, action) -> @tableonly/@defaultonly
        if p4info is not None:
            self._read_p4info(p4info)

    # ------------------------------------------------------------------ helpers
    def fail(self, what: str, msg: str) -> Bmv2JsonError:
        return Bmv2JsonError(f"{what}: {msg}", self.file)

    def _read_p4info(self, info: Any) -> None:
        for kind in ("tables", "actions", "counters", "direct_counters", "registers", "meters"):
            for ent in getattr(info, kind):
                self.ids[(kind, ent.preamble.name)] = ent.preamble.id
        for kind in ("counters", "direct_counters"):
            for ent in getattr(info, kind):
                self.units[ent.preamble.name] = COUNTER_UNITS.get(
                    int(ent.spec.unit), "packets_and_bytes"
                )
        self.p4info_tables = {t.preamble.name for t in info.tables}
        for a in info.actions:
            self.p4info_params[a.preamble.name] = [(p.name, p.bitwidth) for p in a.params]
        act_names = {a.preamble.id: a.preamble.name for a in info.actions}
        for t in info.tables:
            for ref in t.action_refs:
                if ref.scope:  # 1 TABLE_ONLY, 2 DEFAULT_ONLY
                    scope = "@tableonly" if ref.scope == 1 else "@defaultonly"
                    self.scopes[(t.preamble.name, act_names.get(ref.id, ""))] = scope

    def annots(self, kind: str, name: str) -> str:
        ann = f'@name(".{name}")'
        if (kind, name) in self.ids:
            ann += f" @id({self.ids[(kind, name)]})"
        return ann

    # ------------------------------------------------------------------ types
    def declare_types(self) -> None:
        doc = self.doc
        if doc.get("header_unions") or doc.get("header_union_stacks"):
            raise self.fail("header_unions", "header unions are not supported")
        if doc.get("parse_vsets"):
            raise self.fail("parse_vsets", "parser value sets in BMv2 JSON are not supported")
        if doc.get("learn_lists"):
            raise self.fail("learn_lists", "digests (generate_digest) are not supported")
        types = {t["name"]: t for t in doc["header_types"]}
        for name, value in doc.get("errors", []):
            self.errors[int(value)] = name
        user = [n for v, n in sorted(self.errors.items()) if n not in CORE_ERRORS]
        for v, n in self.errors.items():
            if n in CORE_ERRORS and CORE_ERRORS.index(n) != v:
                raise self.fail(f"error {n}", f"value {v} differs from v1model's")
        if user:
            self.out.append("error { " + ", ".join(user) + " }")
        used_as: dict[str, set[bool]] = {}
        for h in doc["headers"]:
            used_as.setdefault(h["header_type"], set()).add(bool(h["metadata"]))
        decl_fields: dict[str, dict[str, tuple[str, int]]] = {}
        for tname, t in types.items():
            if tname == "standard_metadata" or tname not in used_as:
                continue
            if len(used_as[tname]) > 1:
                raise self.fail(f"header type {tname}", "used both as a header and as metadata")
            is_meta = True in used_as[tname]
            fixed = sum(f[1] for f in t["fields"] if f[1] != "*")
            lines = []
            fmap: dict[str, tuple[str, int]] = {}
            for f in t["fields"]:
                fname, width = f[0], f[1]
                if len(f) > 2 and f[2]:
                    raise self.fail(f"field {tname}.{fname}", "signed fields are not supported")
                ident = _ident(fname, "f_")
                if width == "*":
                    if t.get("max_length") is None:
                        raise self.fail(f"header type {tname}", "varbit field without max_length")
                    vw = t["max_length"] * 8 - fixed
                    lines.append(f"    varbit<{vw}> {ident};")
                    fmap[fname] = (ident, -1)
                else:
                    lines.append(f"    bit<{width}> {ident};")
                    fmap[fname] = (ident, int(width))
            kw = "struct" if is_meta else "header"
            self.out.append(f"{kw} {_ident(tname, 't_')} {{\n" + "\n".join(lines) + "\n}")
            decl_fields[tname] = fmap
        sm_fields = {
            f[0]: (f[0], int(f[1]))
            for f in types.get("standard_metadata", {"fields": []})["fields"]
            if not f[0].startswith("_padding")
        }
        stack_members: dict[str, tuple[str, int]] = {}
        stack_decls: list[str] = []
        for s in doc.get("header_stacks", []):
            ident = _ident(s["name"], "s_")
            self.stacks[s["name"]] = f"hdr.{ident}"
            self.stack_fields[s["name"]] = decl_fields[s["header_type"]]
            stack_decls.append(f"    {_ident(s['header_type'], 't_')}[{s['size']}] {ident};")
            for i, hid in enumerate(s["header_ids"]):
                stack_members[str(hid)] = (f"hdr.{ident}[{i}]", i)
        hdr_lines: list[str] = []
        meta_lines: list[str] = []
        for h in doc["headers"]:
            name, tname = h["name"], h["header_type"]
            if tname == "standard_metadata":
                self.headers[name] = HeaderRef("sm", tname, True, sm_fields)
                continue
            ident = _ident(name, "h_")
            if str(h["id"]) in stack_members:
                path = stack_members[str(h["id"])][0]
            elif h["metadata"] and name == "scalars":
                # p4c's flattened user metadata and temporaries: fields of meta_t itself (one
                # attribute access less per use in the generated code)
                path = "meta"
                if any(w < 0 for _, w in decl_fields[tname].values()):
                    raise self.fail("header scalars", "a varbit field in metadata")
                meta_lines += [f"    bit<{w}> {i};" for i, w in decl_fields[tname].values()]
            elif h["metadata"]:
                path = f"meta.{ident}"
                meta_lines.append(f"    {_ident(tname, 't_')} {ident};")
            else:
                path = f"hdr.{ident}"
                hdr_lines.append(f"    {_ident(tname, 't_')} {ident};")
            self.headers[name] = HeaderRef(path, tname, bool(h["metadata"]), decl_fields[tname])
        self.out.append("struct headers_t {\n" + "\n".join(hdr_lines + stack_decls) + "\n}")
        self.out.append("struct meta_t {\n" + "\n".join(meta_lines) + "\n}")

    def declare_externs(self) -> None:
        for name, r in self.registers.items():
            ident = _ident(name, "r_")
            self.extern_ident[name] = ident
            self.out.append(
                f"{self.annots('registers', name)} register<bit<{r['bitwidth']}>>({r['size']}) {ident};"
            )
        for name, c in self.counters.items():
            ident = _ident(name, "c_")
            self.extern_ident[name] = ident
            unit = self.units.get(name, "packets_and_bytes")
            if c.get("is_direct"):
                self.out.append(
                    f"{self.annots('direct_counters', name)} direct_counter(CounterType.{unit}) {ident};"
                )
            else:
                self.out.append(
                    f"{self.annots('counters', name)} counter({c['size']}, CounterType.{unit}) {ident};"
                )
        for name, m in self.meters.items():
            if m.get("is_direct"):
                raise self.fail(f"meter {name}", "direct meters in BMv2 JSON are not supported")
            ident = _ident(name, "mt_")
            self.extern_ident[name] = ident
            mtype = "bytes" if m.get("type") == "bytes" else "packets"
            self.out.append(
                f"{self.annots('meters', name)} meter({m['size']}, MeterType.{mtype}) {ident};"
            )
        if self.doc.get("extern_instances"):
            names = [e["name"] for e in self.doc["extern_instances"]]
            raise self.fail(f"extern_instances {names}", "extern instances are not supported")

    # ------------------------------------------------------------------ expressions
    def field(self, ref: list[str], what: str, varbit: bool = False) -> X:
        hname, fname = ref
        if hname in self.stacks:
            raise self.fail(what, f"stack field reference {hname}.{fname} is not supported")
        h = self.headers.get(hname)
        if h is None:
            raise self.fail(what, f"unknown header {hname!r}")
        if fname == "$valid$":
            if h.metadata:
                return X("1w1", "bits", 1)
            return X(f"((bit<1>){h.path}.isValid())", "bits", 1)
        if fname not in h.fields:
            raise self.fail(what, f"unknown field {hname}.{fname}")
        ident, width = h.fields[fname]
        if h.path == "sm" and fname == "parser_error":
            return X("sm.parser_error", "error", 32)
        if width < 0 and varbit:
            return X(f"{h.path}.{ident}", "varbit", 0)
        if width < 0:
            raise self.fail(what, f"varbit field {hname}.{fname} in an expression")
        return X(f"{h.path}.{ident}", "bits", width)

    def header_path(self, name: Any, what: str) -> str:
        if not isinstance(name, str):
            raise self.fail(what, f"a header given by an expression ({json.dumps(name)[:60]})")
        if name in self.headers and not self.headers[name].metadata:
            return self.headers[name].path
        if name in self.stacks:
            return self.stacks[name]
        raise self.fail(what, f"unknown header {name!r}")

    def bits(self, x: X, w: int) -> str:
        """``x`` as a ``bit<w>`` (literals reduced, bools through bit<1>, others cast)."""
        if x.kind == "int":
            assert x.value is not None
            return f"{w}w{x.value % (1 << w)}"
        if x.kind == "bool":
            inner = f"((bit<1>)({x.text}))"
            return inner if w == 1 else f"((bit<{w}>){inner})"
        if x.kind == "error":
            raise Bmv2JsonError("parser_error used as a number", self.file)
        return x.text if x.width == w else f"((bit<{w}>){x.text})"

    def boolean(self, x: X) -> str:
        if x.kind == "bool":
            return x.text
        if x.kind == "int":
            return "true" if x.value else "false"
        m = re.fullmatch(r"\(\(bit<1>\)(.*\.isValid\(\))\)", x.text)
        if m:
            return m.group(1)
        return f"({x.text} != 0)"

    def error_name(self, x: X, what: str) -> str:
        if x.kind == "error":
            return x.text
        if x.kind == "int" and x.value in self.errors:
            return f"error.{self.errors[x.value]}"
        raise self.fail(what, f"not an error value: {x.text}")

    def expr(self, node: Any, what: str, env: dict[int, X], ctx: int = 0) -> X:
        if node is None:
            raise self.fail(what, "missing operand")
        t = node.get("type")
        v = node.get("value")
        if t == "expression":
            if isinstance(v, dict) and "op" in v:
                return self.op(v, what, env, ctx)
            return self.expr(v, what, env, ctx)
        if t == "field":
            return self.field(v, what)
        if t == "hexstr":
            return X(str(int(v, 16)), "int", 0, int(v, 16))
        if t == "bool":
            return X("true" if v else "false", "bool")
        if t in ("runtime_data", "local"):
            # an action parameter: "runtime_data" as a primitive's operand, "local" inside an
            # expression tree (BMv2's JSON_format.md)
            if v not in env:
                raise self.fail(what, f"{t} {v} out of range")
            return env[v]
        if t == "stack_field":  # a field of the stack's last extracted element
            stack, fname = v
            if stack not in self.stacks or fname not in self.stack_fields[stack]:
                raise self.fail(what, f"unknown stack field {stack}.{fname}")
            ident, width = self.stack_fields[stack][fname]
            if width < 0:
                raise self.fail(what, f"varbit field {stack}.{fname} in an expression")
            return X(f"{self.stacks[stack]}.last.{ident}", "bits", width)
        if t == "lookahead" and self.parser_locals is not None:
            return self.lookahead(int(v[0]), int(v[1]))
        raise self.fail(what, f"expression type {t!r} is not supported")

    def lookahead(self, offset: int, width: int) -> X:
        """``width`` bits ``offset`` bits ahead: read before the statement, in a parser local."""
        assert self.parser_locals is not None
        self.tmp_n += 1
        la = f"la_{self.tmp_n}"
        self.parser_locals.append(f"    bit<{offset + width}> {la};")
        self.pre_lines.append(f"{la} = packet.lookahead<bit<{offset + width}>>();")
        return X(f"{la}[{width - 1}:0]", "bits", width)

    def width_of(self, *xs: X) -> int:
        return max([x.width for x in xs if x.kind == "bits"] or [0])

    def op(self, e: dict[str, Any], what: str, env: dict[int, X], ctx: int) -> X:
        o = e["op"]
        if o == "&" and e["right"] and e["right"].get("type") == "hexstr":
            m = int(e["right"]["value"], 16)
            if m > 0 and m & (m + 1) == 0:  # & (2^k - 1): the operand wraps at k bits
                k = m.bit_length()
                a = self.expr(e["left"], what, env, k)
                if a.kind == "int":
                    assert a.value is not None
                    return X(str(a.value & m), "int", 0, a.value & m)
                # a value of at most k bits needs no mask; a wider one is truncated by a cast
                return X(self.bits(a, k), "bits", k)
        if o == "usat_cast":
            return self.usat_cast(e, what, env)
        if o in ("d2b",):
            return X(self.boolean(self.expr(e["right"], what, env)), "bool")
        if o == "b2d":
            return X(f"((bit<1>)({self.boolean(self.expr(e['right'], what, env))}))", "bits", 1)
        if o == "not":
            return X(f"(!{self.boolean(self.expr(e['right'], what, env))})", "bool")
        if o in ("and", "or"):
            a = self.boolean(self.expr(e["left"], what, env))
            b = self.boolean(self.expr(e["right"], what, env))
            return X(f"({a} {'&&' if o == 'and' else '||'} {b})", "bool")
        if o == "valid":
            r = e["right"]
            if r.get("type") != "header":
                raise self.fail(what, "valid() of a non-header")
            return X(f"{self.header_path(r['value'], what)}.isValid()", "bool")
        if o == "?":
            c = self.boolean(self.expr(e["cond"], what, env))
            a = self.expr(e["left"], what, env, ctx)
            b = self.expr(e["right"], what, env, ctx)
            if a.kind == "bool" and b.kind == "bool":
                return X(f"({c} ? {a.text} : {b.text})", "bool")
            w = max(self.width_of(a, b), 1) if a.kind != "int" or b.kind != "int" else 64
            return X(f"({c} ? {self.bits(a, w)} : {self.bits(b, w)})", "bits", w)
        if o == "~":
            a = self.expr(e["right"], what, env)
            w = max(ctx, self.width_of(a))
            if w == 0:
                raise self.fail(what, "~ of an untyped literal")
            return X(f"(~{self.bits(a, w)})", "bits", w)
        if o in COMPARE:
            a = self.expr(e["left"], what, env)
            b = self.expr(e["right"], what, env)
            if a.kind == "error" or b.kind == "error":
                return X(f"({self.error_name(a, what)} {o} {self.error_name(b, what)})", "bool")
            if a.kind == "bool" and b.kind == "bool":
                return X(f"({a.text} {o} {b.text})", "bool")
            if a.kind == "int" and b.kind == "int":
                assert a.value is not None and b.value is not None
                r = eval(f"{a.value} {o} {b.value}")
                return X("true" if r else "false", "bool")
            w = self.width_of(a, b) or 1
            return X(f"({self.bits(a, w)} {o} {self.bits(b, w)})", "bool")
        if o in ("+", "-", "*", "&", "|", "^", "/", "%"):
            a = self.expr(e["left"], what, env, ctx if o in ARITH else 0)
            b = self.expr(e["right"], what, env, ctx if o in ARITH else 0)
            if a.kind == "int" and b.kind == "int":
                assert a.value is not None and b.value is not None
                val = {
                    "+": a.value + b.value,
                    "-": a.value - b.value,
                    "*": a.value * b.value,
                    "&": a.value & b.value,
                    "|": a.value | b.value,
                    "^": a.value ^ b.value,
                    "/": a.value // b.value if b.value else 0,
                    "%": a.value % b.value if b.value else 0,
                }[o]
                if val < 0 and ctx:
                    val %= 1 << ctx
                return X(str(val), "int", 0, val)
            w = self.width_of(a, b)
            if o in ARITH:
                if ctx:
                    w = max(w, ctx)
                elif o == "+":
                    w += 1
                elif o == "*":
                    w = a.width + b.width if a.kind == b.kind == "bits" else w * 2
                elif o == "-":
                    raise self.fail(what, "subtraction without a wrap-around mask")
            return X(f"({self.bits(a, w)} {o} {self.bits(b, w)})", "bits", w)
        if o in ("<<", ">>"):
            a = self.expr(e["left"], what, env)
            b = self.expr(e["right"], what, env)
            w = self.width_of(a)
            if o == "<<":
                if ctx:
                    w = max(w, ctx)
                elif b.kind == "int":
                    assert b.value is not None
                    w += b.value
                else:
                    raise self.fail(what, "<< by a variable without a wrap-around mask")
            if w == 0:
                raise self.fail(what, f"{o} of an untyped literal")
            amount = str(b.value) if b.kind == "int" else self.bits(b, max(b.width, 1))
            return X(f"({self.bits(a, w)} {o} {amount})", "bits", w)
        raise self.fail(what, f"expression operator {o!r} is not supported")

    def usat_cast(self, e: dict[str, Any], what: str, env: dict[int, X]) -> X:
        """P4's ``a |+| b`` and ``a |-| b`` on bit<w>: BMv2 computes ``a ± b`` exactly and
        clamps it to [0, 2^w - 1] (``usat_cast``)."""
        inner, wx = e.get("left") or {}, e.get("right") or {}
        if inner.get("type") != "expression" or wx.get("type") != "hexstr":
            raise self.fail(what, "usat_cast of anything but an expression and a width")
        i = inner["value"]
        if i.get("op") not in ("+", "-"):
            raise self.fail(what, f"usat_cast of {i.get('op')!r}: only + and - saturate")
        w = int(wx["value"], 16)
        a = self.expr(i["left"], what, env, w)
        b = self.expr(i["right"], what, env, w)
        if a.kind == "int" and b.kind == "int":
            assert a.value is not None and b.value is not None
            v = a.value + b.value if i["op"] == "+" else a.value - b.value
            v = min(max(v, 0), (1 << w) - 1)
            return X(str(v), "int", 0, v)
        if self.width_of(a, b) > w:  # (p4c gives both operands the result's type)
            raise self.fail(what, f"usat_cast to {w} bits of a wider operand")
        return X(f"({self.bits(a, w)} |{i['op']}| {self.bits(b, w)})", "bits", w)

    # ------------------------------------------------------------------ statements
    def assign(self, dst: X, src: X, what: str) -> str:
        if dst.kind == "error":
            return f"{dst.text} = {self.error_name(src, what)};"
        if dst.kind != "bits" or dst.text.startswith("((bit<1>)"):
            raise self.fail(what, f"cannot assign to {dst.text}")
        return f"{dst.text} = {self.bits(src, dst.width)};"

    def fresh(self, prefix: str) -> str:
        self.tmp_n += 1
        return f"{prefix}{self.tmp_n}"

    def extern_name(self, p: dict[str, Any], kind: str, table: dict[str, Any], what: str) -> str:
        if p.get("type") != kind or p.get("value") not in table:
            raise self.fail(what, f"expected a {kind}, got {p}")
        return self.extern_ident[p["value"]]

    def primitive(self, prim: dict[str, Any], what: str, env: dict[int, X]) -> list[str]:
        op = prim["op"]
        ps = prim.get("parameters", [])
        w = f"{what}, primitive {op!r}"

        def ex(i: int) -> X:
            return self.expr(ps[i], w, env)

        if op == "assign":
            return [self.assign(ex(0), ex(1), w)]
        if op == "assign_header":
            a = self.header_path(ps[0]["value"], w)
            b = self.header_path(ps[1]["value"], w)
            return [f"{a} = {b};"]
        if op == "mark_to_drop":
            return ["mark_to_drop(sm);"]
        if op in ("add_header", "remove_header"):
            h = self.header_path(ps[0]["value"], w)
            return [f"{h}.{'setValid' if op == 'add_header' else 'setInvalid'}();"]
        if op == "exit":
            return ["exit;"]
        if op == "log_msg":
            return []
        if op in ("assert", "assume"):
            return [f"{op}({self.boolean(ex(0))});"]
        if op == "register_read":
            dst = ex(0)
            reg = self.extern_name(ps[1], "register_array", self.registers, w)
            rw = self.registers[ps[1]["value"]]["bitwidth"]
            idx = self.bits(ex(2), 32)
            if dst.kind == "bits" and dst.width == rw:
                return [f"{reg}.read({dst.text}, {idx});"]
            tmp = self.fresh("rr_")
            return [
                f"bit<{rw}> {tmp};",
                f"{reg}.read({tmp}, {idx});",
                self.assign(dst, X(tmp, "bits", rw), w),
            ]
        if op == "register_write":
            reg = self.extern_name(ps[0], "register_array", self.registers, w)
            rw = self.registers[ps[0]["value"]]["bitwidth"]
            return [f"{reg}.write({self.bits(ex(1), 32)}, {self.bits(ex(2), rw)});"]
        if op == "count":
            ctr = self.extern_name(ps[0], "counter_array", self.counters, w)
            return [f"{ctr}.count({self.bits(ex(1), 32)});"]
        if op == "execute_meter":
            mtr = self.extern_name(ps[0], "meter_array", self.meters, w)
            dst = ex(2)
            return [f"{mtr}.execute_meter({self.bits(ex(1), 32)}, {dst.text});"]
        if op == "modify_field_with_hash_based_offset":
            dst = ex(0)
            calc = self.calcs.get(ps[2].get("value"))
            if ps[2].get("type") != "calculation" or calc is None:
                raise self.fail(w, "expected a calculation")
            algo = self.algo(calc, w)
            data, payload = self.field_list(calc, w)
            if payload:
                raise self.fail(w, "hash over the payload is not supported")
            base, mx = self.bits(ex(1), 64), self.bits(ex(3), 64)
            return [f"hash({dst.text}, HashAlgorithm.{algo}, {base}, {{{data}}}, {mx});"]
        if op == "modify_field_rng_uniform":
            dst = ex(0)
            return [
                f"random({dst.text}, {self.bits(ex(1), dst.width)}, {self.bits(ex(2), dst.width)});"
            ]
        if op == "truncate":
            return [f"truncate({self.bits(ex(0), 32)});"]
        if op in ("push", "pop"):
            stack = self.stacks.get(ps[0].get("value"))
            if stack is None:
                raise self.fail(w, "expected a header stack")
            n = ex(1)
            fn = "push_front" if op == "push" else "pop_front"
            return [f"{stack}.{fn}({n.value if n.kind == 'int' else n.text});"]
        raise self.fail(w, "primitive not supported")

    def algo(self, calc: dict[str, Any], what: str) -> str:
        a = calc.get("algo")
        if a not in HASH_ALGOS:
            raise self.fail(
                f"{what}, calculation {calc['name']}", f"algorithm {a!r} is not supported"
            )
        return HASH_ALGOS[a]

    def field_list(self, calc: dict[str, Any], what: str) -> tuple[str, bool]:
        items: list[str] = []
        payload = False
        for inp in calc["input"]:
            if inp.get("type") == "payload":
                payload = True
                continue
            if payload:
                raise self.fail(f"{what}, calculation {calc['name']}", "fields after the payload")
            if inp.get("type") == "hexstr":
                bw = inp.get("bitwidth")
                if not bw:
                    raise self.fail(
                        f"{what}, calculation {calc['name']}", "constant without bitwidth"
                    )
                items.append(f"{bw}w{int(inp['value'], 16) % (1 << bw)}")
                continue
            if inp.get("type") == "field":
                x = self.field(inp["value"], f"{what}, calculation {calc['name']}", varbit=True)
            else:
                x = self.expr(inp, f"{what}, calculation {calc['name']}", {})
            if x.kind == "int":
                raise self.fail(f"{what}, calculation {calc['name']}", "untyped constant")
            items.append(x.text if x.kind != "bool" else self.bits(x, 1))
        return ", ".join(items), payload

    # ------------------------------------------------------------------ parser
    def parser(self) -> None:
        parsers = self.doc["parsers"]
        if len(parsers) != 1:
            raise self.fail("parsers", f"{len(parsers)} parsers (v1model has one)")
        p = parsers[0]
        states = {s["name"]: s for s in p["parse_states"]}

        def sname(n: str | None) -> str:
            if n is None:
                return "accept"
            return "start" if n == p["init_state"] else _ident(n, "st_")

        body: list[str] = []
        self.parser_locals = []
        for s in p["parse_states"]:
            what = f"parser state {s['name']}"
            lines: list[str] = []
            for pop in s["parser_ops"]:
                start = len(lines)
                op, ps = pop["op"], pop["parameters"]
                w = f"{what}, op {op!r}"
                if op == "extract":
                    kind, name = ps[0]["type"], ps[0]["value"]
                    if kind == "regular":
                        lines.append(f"packet.extract({self.header_path(name, w)});")
                    elif kind == "stack" and name in self.stacks:
                        lines.append(f"packet.extract({self.stacks[name]}.next);")
                    else:
                        raise self.fail(w, f"extract of {kind} {name!r} is not supported")
                elif op == "extract_VL":
                    h = self.header_path(ps[0]["value"], w)
                    n = self.expr(ps[1], w, {})
                    lines.append(f"packet.extract({h}, {self.bits(n, 32)});")
                elif op == "set":
                    lines.append(self.assign(self.expr(ps[0], w, {}), self.expr(ps[1], w, {}), w))
                elif op == "verify":
                    c = self.boolean(self.expr(ps[0], w, {}))
                    lines.append(f"verify({c}, {self.error_name(self.expr(ps[1], w, {}), w)});")
                elif op == "primitive":
                    for prim in ps:
                        lines += self.primitive(prim["value"] if "op" not in prim else prim, w, {})
                elif op == "advance":
                    lines.append(f"packet.advance({self.bits(self.expr(ps[0], w, {}), 32)});")
                else:
                    raise self.fail(w, "parser operation not supported")
                lines[start:start] = self.pre_lines  # lookaheads the operation reads come first
                self.pre_lines = []
            keys: list[tuple[str, int]] = []
            for k in s["transition_key"]:
                if k["type"] == "field":
                    x = self.field(k["value"], what)
                    keys.append((x.text, x.width))
                elif k["type"] == "lookahead":
                    x = self.lookahead(int(k["value"][0]), int(k["value"][1]))
                    lines += self.pre_lines
                    self.pre_lines = []
                    keys.append((x.text, x.width))
                elif k["type"] == "stack_field":
                    x = self.expr(k, what, {})
                    keys.append((x.text, x.width))
                else:
                    raise self.fail(what, f"transition key {k['type']!r} is not supported")
            trans = s["transitions"]
            if not keys:
                nxt = [t for t in trans if t["type"] == "default"]
                tail = f"transition {sname(nxt[0]['next_state'] if nxt else None)};"
            else:
                cases = []
                for t in trans:
                    if t["type"] == "default":
                        cases.append(f"        default: {sname(t['next_state'])};")
                        continue
                    if t["type"] != "hexstr":
                        raise self.fail(what, f"transition type {t['type']!r} is not supported")
                    vals = self.split_key(t["value"], keys, what)
                    masks = self.split_key(t["mask"], keys, what) if t.get("mask") else None
                    parts = []
                    for i, (v, (_, kw)) in enumerate(zip(vals, keys, strict=True)):
                        m = masks[i] if masks else (1 << kw) - 1
                        if v & ~m & ((1 << kw) - 1) or (v >> kw and (v >> kw) & (m >> kw)):
                            raise self.fail(what, f"transition value {t['value']} does not fit")
                        v &= (1 << kw) - 1
                        m &= (1 << kw) - 1
                        parts.append(f"{kw}w{v}" if masks is None else f"{kw}w{v} &&& {kw}w{m}")
                    label = parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"
                    cases.append(f"        {label}: {sname(t['next_state'])};")
                sel = ", ".join(k for k, _ in keys)
                tail = f"transition select({sel}) {{\n" + "\n".join(cases) + "\n    }"
            if s["name"] not in states:
                continue
            body.append(
                f"    state {sname(s['name'])} {{\n"
                + "".join(f"        {ln}\n" for ln in lines)
                + f"        {tail}\n    }}"
            )
        locals_ = self.parser_locals
        self.parser_locals = None
        self.out.append(
            "parser ParserImpl(packet_in packet, out headers_t hdr, inout meta_t meta,"
            " inout standard_metadata_t sm) {\n" + "\n".join(locals_ + body) + "\n}"
        )

    def split_key(self, hexval: str, keys: list[tuple[str, int]], what: str) -> list[int]:
        raw = bytes.fromhex(hexval[2:] if hexval.startswith("0x") else hexval)
        sizes = [(w + 7) // 8 for _, w in keys]
        if len(raw) != sum(sizes):
            raise self.fail(what, f"transition value {hexval} does not match the key widths")
        out = []
        pos = 0
        for n in sizes:
            out.append(int.from_bytes(raw[pos : pos + n], "big"))
            pos += n
        return out

    # ------------------------------------------------------------------ controls
    def action_env(self, a: dict[str, Any], consts: list[str] | None) -> dict[int, X]:
        env: dict[int, X] = {}
        for i, rd in enumerate(a["runtime_data"]):
            if consts is None:
                env[i] = X(_param(rd["name"]), "bits", int(rd["bitwidth"]))
            else:
                v = int(consts[i], 16)
                env[i] = X(str(v), "int", 0, v)
        return env

    def action_body(self, a: dict[str, Any], env: dict[int, X]) -> list[str]:
        out: list[str] = []
        for prim in a["primitives"]:
            out += self.primitive(prim, f"action {a['name']}", env)
        return out

    def declare_action(self, aid: int, lines: list[str]) -> str:
        if aid in self.action_ident:
            return self.action_ident[aid]
        a = self.actions.get(aid)
        if a is None:
            raise self.fail(f"action id {aid}", "unknown action")
        if a["name"] == "NoAction" and not a["primitives"] and not a["runtime_data"]:
            self.action_ident[aid] = "NoAction"
            return "NoAction"
        ident = _ident(a["name"], "a_")
        self.action_ident[aid] = ident
        # p4c may write one action several times (a copy per table): declare it once
        twin = self.action_by_name.get(a["name"])
        if twin is not None:
            if _sans_source_info(twin) != _sans_source_info(a):
                raise self.fail(f"action {a['name']}", "two different actions with this name")
            return ident
        self.action_by_name[a["name"]] = a
        env = self.action_env(a, None)
        params = ", ".join(f"bit<{x.width}> {x.text}" for x in env.values())
        body = self.action_body(a, env)
        lines.append(
            f"    {self.annots('actions', a['name'])} action {ident}({params}) {{\n"
            + "".join(f"        {ln}\n" for ln in body)
            + "    }"
        )
        return ident

    def inline_table(self, t: dict[str, Any]) -> bool:
        if self.p4info_tables is not None:
            return t["name"] not in self.p4info_tables
        d = t.get("default_entry") or {}
        return not t["key"] and len(t["actions"]) == 1 and bool(d.get("action_entry_const"))

    def inline_call(self, t: dict[str, Any], lines: list[str]) -> list[str]:
        """The statements of an inlined table's constant action.

        p4c wraps each direct action call (``refuse();`` in an apply block) in a hidden keyless
        table. An action the client's P4Info lists is declared and called, so the program keeps
        it with its name and id as p4c's P4Info does; p4c may have put the call's constant
        arguments into the body of its copy, and then the arguments are read back against the copy
        that has P4Info's parameters. p4c's own hidden actions (assignments, ``tbl_prog123``),
        a call that cannot be matched so, and a copy whose body differs from the one declared
        under its name (``f(1); f(2);`` where p4c's P4Info lists ``f`` without parameters), are
        written out in place."""
        d = t["default_entry"]
        a = self.actions[d["action_id"]]
        env = self.action_env(a, d["action_data"])
        params = self.p4info_params.get(a["name"])
        if params is not None:
            for g in (a, *(g for g in self.actions.values() if g["name"] == a["name"])):
                if [(rd["name"], int(rd["bitwidth"])) for rd in g["runtime_data"]] != params:
                    continue
                twin = self.action_by_name.get(g["name"])
                if twin is not None and _sans_source_info(twin) != _sans_source_info(g):
                    continue  # two calls that p4c specialised apart: the first one is declared
                args = env if g is a else self.call_args(g, a)
                if args is not None:
                    text = ", ".join(self.bits(args[i], w) for i, (_, w) in enumerate(params))
                    return [f"{self.declare_action(g['id'], lines)}({text});"]
        return self.action_body(a, env)

    def call_args(self, generic: dict[str, Any], copy: dict[str, Any]) -> dict[int, X] | None:
        """The constant arguments that make ``generic``'s body ``copy``'s (None when they don't:
        ``copy`` has parameters of its own, or differs elsewhere, or an argument is not a
        constant). A parameter the body does not read gets 0."""
        if copy["runtime_data"]:
            return None
        found: dict[int, Any] = {}

        def unify(g: Any, c: Any) -> bool:
            if isinstance(g, dict) and g.get("type") in ("runtime_data", "local"):
                if not isinstance(c, dict) or c.get("type") not in ("hexstr", "bool"):
                    return False
                return found.setdefault(g["value"], c) == c
            if isinstance(g, dict):
                return (
                    isinstance(c, dict)
                    and g.keys() == c.keys()
                    and all(unify(g[k], c[k]) for k in g)
                )
            if isinstance(g, list):
                return (
                    isinstance(c, list)
                    and len(g) == len(c)
                    and all(unify(x, y) for x, y in zip(g, c, strict=True))
                )
            return bool(g == c)

        if not unify(_sans_source_info(generic)[0], _sans_source_info(copy)[0]):
            return None
        what = f"action {copy['name']}"
        zero = {"type": "hexstr", "value": "0x0"}
        return {
            i: self.expr(found.get(i, zero), what, {}) for i in range(len(generic["runtime_data"]))
        }

    def declare_table(self, t: dict[str, Any], lines: list[str]) -> str:
        what = f"table {t['name']}"
        if t.get("type", "simple") != "simple":
            raise self.fail(what, f"table type {t['type']!r} (action profiles) is not supported")
        if t.get("direct_meters"):
            raise self.fail(what, "direct meters are not supported")
        if t.get("support_timeout"):
            raise self.fail(what, "support_timeout (entry ageing) is not supported")
        keys = []
        for k in t["key"]:
            mt = k["match_type"]
            if mt not in ("exact", "lpm", "ternary", "range", "optional"):
                raise self.fail(what, f"match kind {mt!r} is not supported")
            if k.get("mask"):
                raise self.fail(what, f"masked key {k['name']} is not supported")
            x = self.field(k["target"], what)
            key_text = self.boolean(x) if k["target"][1] == "$valid$" else x.text
            keys.append(f'            {key_text} : {mt} @name("{k["name"]}");')
        acts = [
            f"{self.scopes.get((t['name'], self.actions[aid]['name']), '')} "
            f"{self.declare_action(aid, lines)};".lstrip()
            for aid in t["action_ids"]
        ]
        props = []
        if keys:
            props.append("        key = {\n" + "\n".join(keys) + "\n        }")
        props.append("        actions = { " + " ".join(acts) + " }")
        props.append(f"        size = {t['max_size']};")
        d = t.get("default_entry")
        if d:
            a = self.actions[d["action_id"]]
            env = self.action_env(a, d["action_data"])
            args = ", ".join(
                self.bits(env[i], int(rd["bitwidth"])) for i, rd in enumerate(a["runtime_data"])
            )
            const = "const " if d.get("action_const") and d.get("action_entry_const") else ""
            props.append(
                f"        {const}default_action = {self.declare_action(d['action_id'], lines)}({args});"
            )
        if t.get("with_counters"):
            dc = [
                n
                for n, c in self.counters.items()
                if c.get("is_direct") and c.get("binding") == t["name"]
            ]
            if len(dc) != 1:
                raise self.fail(what, "with_counters but no direct counter bound to it")
            props.append(f"        counters = {self.extern_ident[dc[0]]};")
        if t.get("entries"):
            props.append(self.const_entries(t, what, lines))
        ident = _ident(t["name"], "tbl_")
        lines.append(
            f"    {self.annots('tables', t['name'])} table {ident} {{\n"
            + "\n".join(props)
            + "\n    }"
        )
        return ident

    def const_entries(self, t: dict[str, Any], what: str, lines: list[str]) -> str:
        rows = []
        for ent in sorted(t["entries"], key=lambda e: e.get("priority", 0)):
            parts = []
            for mk, k in zip(ent["match_key"], t["key"], strict=True):
                mt = mk["match_type"]
                v = int(mk["start" if mt == "range" else "key"], 16)
                if mt == "exact":
                    parts.append(hex(v))
                elif mt == "ternary":
                    parts.append(f"{hex(v)} &&& {mk['mask']}")
                elif mt == "lpm":
                    width = self.field(k["target"], what).width
                    plen = int(mk["prefix_length"])
                    m = ((1 << plen) - 1) << (width - plen)
                    parts.append(f"{hex(v)} &&& {hex(m)}")
                elif mt == "range":
                    parts.append(f"{hex(v)} .. {hex(int(mk['end'], 16))}")
                else:
                    raise self.fail(what, f"const entry match kind {mt!r} is not supported")
            a = self.actions[ent["action_entry"]["action_id"]]
            env = self.action_env(a, ent["action_entry"]["action_data"])
            args = ", ".join(
                self.bits(env[i], int(rd["bitwidth"])) for i, rd in enumerate(a["runtime_data"])
            )
            ident = self.declare_action(a["id"], lines)
            label = parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"
            rows.append(f"            {label} : {ident}({args});")
        return "        const entries = {\n" + "\n".join(rows) + "\n        }"

    def control(self, pipe: dict[str, Any], name: str) -> None:
        self.action_ident, self.action_by_name = {}, {}  # actions are declared per control
        tables = {t["name"]: t for t in pipe["tables"]}
        conds = {c["name"]: c for c in pipe["conditionals"]}
        if pipe.get("action_profiles"):
            raise self.fail(f"pipeline {pipe['name']}", "action profiles are not supported")

        def succ(n: str) -> list[str | None]:
            if n in conds:
                return [conds[n]["true_next"], conds[n]["false_next"]]
            nt = tables[n]["next_tables"]
            return list(dict.fromkeys(nt.values())) or [tables[n].get("base_default_next")]

        # post-dominators over the DAG (None = end of the control)
        pdom: dict[str | None, set[str | None]] = {None: {None}}

        def get_pdom(n: str | None, stack: tuple[str, ...] = ()) -> set[str | None]:
            if n in pdom:
                return pdom[n]
            assert n is not None
            if n in stack:
                raise self.fail(f"pipeline {pipe['name']}", f"loop through {n}")
            if n not in tables and n not in conds:
                raise self.fail(f"pipeline {pipe['name']}", f"unknown node {n!r}")
            ss = [get_pdom(s, (*stack, n)) for s in succ(n)]
            res = set.intersection(*ss) if ss else {None}
            pdom[n] = res | {n}
            return pdom[n]

        def ipdom(n: str) -> str | None:
            cands = get_pdom(n) - {n}
            # the nearest: the one whose own post-dominators include all the others
            for c in cands:
                if cands <= get_pdom(c):
                    return c
            return None

        decls: list[str] = []
        done: set[str] = set()

        def emit(n: str | None, stop: str | None, ind: str) -> list[str]:
            out: list[str] = []
            while n is not None and n != stop:
                if n in done:
                    raise self.fail(f"pipeline {pipe['name']}", f"node {n} is reached twice")
                done.add(n)
                if n in conds:
                    c = conds[n]
                    j = ipdom(n)
                    cond = self.boolean(self.expr(c["expression"], f"condition {n}", {}))
                    out.append(f"{ind}if ({cond}) {{")
                    out += emit(c["true_next"], j, ind + "    ")
                    out.append(f"{ind}}} else {{")
                    out += emit(c["false_next"], j, ind + "    ")
                    out.append(f"{ind}}}")
                    n = j
                    continue
                t = tables[n]
                nt = t["next_tables"]
                if self.inline_table(t):
                    aname = self.actions[t["default_entry"]["action_id"]]["name"]
                    out += [ind + ln for ln in self.inline_call(t, decls)]
                    n = nt.get(aname, t.get("base_default_next"))
                    continue
                ident = self.declare_table(t, decls)
                nexts = set(nt.values())
                if len(nexts) <= 1:
                    out.append(f"{ind}{ident}.apply();")
                    n = next(iter(nexts)) if nexts else t.get("base_default_next")
                    continue
                j = ipdom(n)
                if "__HIT__" in nt or "__MISS__" in nt:
                    out.append(f"{ind}if ({ident}.apply().hit) {{")
                    out += emit(nt.get("__HIT__"), j, ind + "    ")
                    out.append(f"{ind}}} else {{")
                    out += emit(nt.get("__MISS__"), j, ind + "    ")
                    out.append(f"{ind}}}")
                else:
                    out.append(f"{ind}switch ({ident}.apply().action_run) {{")
                    by_next: dict[str | None, list[str]] = {}
                    for aname, nx in nt.items():
                        if nx != j:
                            by_next.setdefault(nx, []).append(aname)
                    ids = {self.actions[i]["name"]: i for i in t["action_ids"]}
                    for nx, anames in by_next.items():
                        labels = [self.action_ident[ids[a]] for a in anames]
                        for lab in labels[:-1]:
                            out.append(f"{ind}    {lab}:")
                        out.append(f"{ind}    {labels[-1]}: {{")
                        out += emit(nx, j, ind + "        ")
                        out.append(f"{ind}    }}")
                    out.append(f"{ind}}}")
                n = j
            return out

        body = emit(pipe["init_table"], None, "        ")
        self.out.append(
            f"control {name}(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n"
            + "\n".join(decls)
            + "\n    apply {\n"
            + "\n".join(body)
            + "\n    }\n}"
        )

    def checksums(self, verify: bool) -> None:
        lines = []
        for ck in self.doc.get("checksums", []):
            if not (ck.get("verify", False) if verify else ck.get("update", True)):
                continue
            what = f"checksum {ck['name']}"
            calc = self.calcs.get(ck["calculation"])
            if calc is None:
                raise self.fail(what, f"unknown calculation {ck['calculation']!r}")
            algo = self.algo(calc, what)
            data, payload = self.field_list(calc, what)
            target = self.field(ck["target"], what).text
            cond = (
                "true"
                if ck.get("if_cond") is None
                else self.boolean(self.expr(ck["if_cond"], what, {}))
            )
            fn = ("verify_checksum" if verify else "update_checksum") + (
                "_with_payload" if payload else ""
            )
            lines.append(f"        {fn}({cond}, {{{data}}}, {target}, HashAlgorithm.{algo});")
        name = "VerifyImpl" if verify else "ComputeImpl"
        self.out.append(
            f"control {name}(inout headers_t hdr, inout meta_t meta) {{\n    apply {{\n"
            + "\n".join(lines)
            + "\n    }\n}"
        )

    def deparser(self) -> None:
        ds = self.doc["deparsers"]
        if len(ds) != 1:
            raise self.fail("deparsers", f"{len(ds)} deparsers (v1model has one)")
        if ds[0].get("primitives"):
            raise self.fail("deparser", "deparser primitives are not supported")
        lines = [f"        packet.emit({self.header_path(h, 'deparser')});" for h in ds[0]["order"]]
        self.out.append(
            "control DeparserImpl(packet_out packet, in headers_t hdr) {\n    apply {\n"
            + "\n".join(lines)
            + "\n    }\n}"
        )

    def translate(self) -> str:
        self.out.append("#include <core.p4>\n#include <v1model.p4>")
        self.declare_types()
        self.declare_externs()
        self.parser()
        self.checksums(True)
        pipes = {p["name"]: p for p in self.doc["pipelines"]}
        if set(pipes) != {"ingress", "egress"}:
            raise self.fail("pipelines", f"expected ingress and egress, got {sorted(pipes)}")
        self.control(pipes["ingress"], "IngressImpl")
        self.control(pipes["egress"], "EgressImpl")
        self.checksums(False)
        self.deparser()
        for fl in self.doc.get("field_lists", []):
            raise self.fail(
                f"field list {fl.get('name')}",
                "field lists (resubmit, recirculate, clone) are not supported",
            )
        self.out.append(
            "V1Switch(ParserImpl(), VerifyImpl(), IngressImpl(), EgressImpl(), ComputeImpl(),"
            " DeparserImpl()) main;"
        )
        return "\n\n".join(self.out) + "\n"


def bmv2_json_to_p4(
    data: bytes | str | dict[str, Any], filename: str = "<json>", p4info: Any = None
) -> str:
    """P4-16 v1model source equivalent to a BMv2 JSON (raises :class:`Bmv2JsonError`)."""
    if isinstance(data, dict):
        doc = data
    else:
        try:
            doc = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise Bmv2JsonError(f"not JSON: {exc}", filename) from None
    if not isinstance(doc, dict) or any(k not in doc for k in FORMAT_KEYS):
        raise Bmv2JsonError(f"not a BMv2 JSON (needs the keys {', '.join(FORMAT_KEYS)})", filename)
    try:
        return Translator(doc, filename, p4info).translate()
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise Bmv2JsonError(f"malformed BMv2 JSON: {type(exc).__name__}: {exc}", filename) from None
