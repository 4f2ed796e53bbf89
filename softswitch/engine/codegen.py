"""Translator: types every expression and statement of the checked program and generates Python
source for its parser, controls and deparser, compiled once with ``compile()``.

Run-time representation: bit<N>/int<N>/enum/error values are Python ints, bool is bool, headers and
structs are instances of generated ``__slots__`` classes (headers carry ``_v``, their validity),
header stacks are lists with a ``_n`` next index. Actions are inlined where they are called or where
a table applies them; sub-control instances become functions.
"""

from __future__ import annotations

import itertools
import struct
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol

from lark import Token, Tree

from softswitch.errors import P4Error
from softswitch.frontend.checker import Checker, Scope, Sym, parse_int, trees
from softswitch.frontend.types import (
    BitT,
    BlockT,
    BoolT,
    EnumT,
    ErrorT,
    ExternT,
    IntT,
    ListT,
    P4Type,
    StackT,
    StringT,
    StructLikeT,
    TypeVarT,
    VarbitT,
    VoidT,
    bit_width_of,
    same_type,
)

UNSUPPORTED_EXTERNS = {}


@dataclass
class E:
    """A typed expression: Python code, its P4 type and, for constants, the value."""

    code: str
    type: P4Type
    const: Any = None
    lvalue: bool = False
    table: TableInfo | None = None  # for t.apply().action_run
    items: list[E] | None = None  # the elements of a {a, b, c} list
    slice: tuple[E, int, int] | None = None  # (base, high, low) of a slice, to assign to it
    hdr_base: str | None = None  # a header field: the header's code (for validity checks)
    siblings: list[str] | None = None  # a header_union member: the other members' code

    @property
    def is_const(self) -> bool:
        return self.const is not None


@dataclass
class ActionRunT(P4Type):
    table: TableInfo

    def show(self) -> str:
        return "action_run"


@dataclass
class ActionInfo:
    name: str  # fully-qualified control-plane name
    tree: Tree
    scope: Scope
    params: list[tuple[str, str, P4Type]]  # (name, direction, type)
    annotations: dict[str, list[Any]]


@dataclass
class TableInfo:
    name: str  # fully-qualified control-plane name
    local: str
    tree: Tree
    keys: list[tuple[str, str, E]] = field(default_factory=list)  # (name, match kind, expr)
    actions: list[tuple[ActionInfo, str, dict[str, list[Any]]]] = field(default_factory=list)
    default: tuple[int, list[int]] = (0, [])
    default_const: bool = False
    size: int = 1024
    counters: ExternInst | None = None
    meter: ExternInst | None = None
    const_entries: list[tuple[list[Any], int, list[int], int | None]] = field(default_factory=list)
    has_const_entries: bool = False
    annotations: dict[str, list[Any]] = field(default_factory=dict)
    pyname: str = ""
    runtime: Any = None
    bound: dict[str, list[Any]] = field(
        default_factory=dict
    )  # action -> arguments bound in `actions`
    scope: Scope | None = None


@dataclass
class ExternInst:
    kind: str  # register | counter | direct_counter | meter | direct_meter | action_profile
    name: str  # fully-qualified
    size: int = 0
    width: int = 0  # register element width
    # a register whose element is a struct of bit<> members (TNA's paired registers): the struct's
    # name and (member, width) in order; a cell is kept as one integer, the first member in its
    # most significant bits (the struct's bits, as a header of those fields would be serialised)
    struct_name: str = ""
    members: tuple[tuple[str, int], ...] = ()
    counter_type: str = "packets_and_bytes"
    annotations: dict[str, list[Any]] = field(default_factory=dict)
    pyname: str = ""
    table: str = ""  # direct counter: owning table
    # direct counter: every hit counts (v1model); False: only count() in an action does (TNA)
    count_on_hit: bool = True


_BIT_OPS = {"band": "&", "bor": "|", "bxor": "^"}
_LOGIC_OPS = {"land": "and", "lor": "or"}


class _Ret(Exception):
    """``return`` inside an inlined action or a sub-control."""


class Exit(Exception):
    """``exit``: ends the current top-level control."""


class ParserError(Exception):
    def __init__(self, code: int) -> None:
        self.code = code
        self.off: int | None = None  # set by a sub-parser: where the packet was when it stopped


class Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 1

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def block(self) -> _Indent:
        return _Indent(self)


class _Indent:
    def __init__(self, em: Emitter) -> None:
        self.em = em

    def __enter__(self) -> None:
        self.em.indent += 1

    def __exit__(self, *a: object) -> None:
        self.em.indent -= 1


def mask(w: int) -> int:
    return (1 << w) - 1


def wrap_code(code: str, t: BitT) -> str:
    if t.signed:
        h = 1 << (t.width - 1)
        return f"((({code}) + {h}) & {mask(t.width)}) - {h}"
    return f"(({code}) & {mask(t.width)})"


def wrap_value(v: int, t: BitT) -> int:
    v &= mask(t.width)
    if t.signed and v >> (t.width - 1):
        v -= 1 << t.width
    return v


def eval_const(ck: Checker, expr: Tree, scope: Scope, want: P4Type) -> Any:
    tr = Translator.for_consts(ck)
    e = tr.expr(expr, scope, want)
    if not e.is_const:
        raise ck.error(expr, "expression is not a compile-time constant")
    e = tr.convert(e, want, expr)
    return e.const


class ExternCalls(Protocol):
    """What the translator asks the program's architecture (engine/program.py Architecture)."""

    @abstractmethod
    def extern_method(
        self,
        tr: Translator,
        node: Tree,
        inst: ExternInst,
        method: str,
        args: list[Any],
        scope: Scope,
    ) -> E | None:
        """Translate ``inst.method(args)``: emit code with ``tr``; the value, if any."""

    @abstractmethod
    def extern_function(
        self,
        tr: Translator,
        node: Tree,
        name: str,
        args: list[Any],
        targs: list[Tree],
        scope: Scope,
    ) -> E | None:
        """Translate a call of the extern function ``name`` (core.p4's ``verify`` is the
        translator's own)."""

    # Target rules: an architecture whose hardware cannot do something a P4 program may write
    # rejects it here, while the translator types the program (the defaults accept everything).
    def check_operation(self, tr: Translator, node: Tree, op: str, a: E, b: E) -> None:
        """A binary operation ``a op b`` (``/``, ``%``, ``<<``, ``>>``) the translator typed."""

    def check_assignment(
        self, tr: Translator, node: Tree, lhs: E, src: Any, rhs: E, scope: Scope
    ) -> None:
        """An assignment (or an initialised local) of the expression ``src``, typed ``rhs``."""

    def check_condition(self, tr: Translator, cond: Tree, scope: Scope) -> None:
        """The condition of an if statement (typed bool)."""

    def check_verify(self, tr: Translator, node: Tree) -> None:
        """core.p4's ``verify(condition, error)`` in a parser."""

    def end_parser_state(self, tr: Translator, state: ParserState) -> None:
        """The statements of a parser state are translated (``state``: what they did)."""


@dataclass
class ParserState:
    """What the statements of one parser state did, for an architecture's parser rules."""

    name: str
    node: Tree
    extracted: set[str] = field(default_factory=set)  # code of each header extracted here
    bits: int = 0  # the most bits the state's extracts and advances take (varbits at maximum)
    variable_advance: Tree | None = None  # an advance by a non-constant amount
    pending: list[Any] = field(default_factory=list)  # the architecture's checks for its end


class Translator:
    """Types and translates the program into one Python module."""

    def __init__(self, ck: Checker, arch: ExternCalls | None = None) -> None:
        self.ck = ck
        # the program's architecture translates its externs (None: constant expressions only)
        self.arch = arch
        self.uid = itertools.count(1)
        self.classes: dict[str, str] = {}  # struct name -> python class name
        self.class_src: list[str] = []
        self.funcs: list[str] = []
        self.ns: dict[str, Any] = {}
        self.struct_names: dict[str, str] = {}
        self.in_action = 0
        self.digest_types: dict[str, StructLikeT] = {}
        self.implicit_instances: dict[str, dict[str, Any]] = {}
        # set by the program builder: instantiates a parser/control declaration (decl, fq, scope)
        self.instantiate_block: Any = None
        self.prevalued: dict[str, E] = {}
        self.functions: list[tuple[str, P4Type, int]] = []  # (result temp, type, action depth)
        self.function_trees: list[tuple[Tree]] = []
        self.tables: list[TableInfo] = []
        self.actions: dict[str, ActionInfo] = {}
        self.externs: list[ExternInst] = []
        self.em = Emitter()
        self.fq = ""  # fully-qualified prefix of the current control
        self.in_parser = False
        self.lookahead_used = False
        # (table, entry variable) while a table's actions are inlined (TNA's DirectCounter.count())
        self.table_entry: tuple[TableInfo, str] | None = None
        # the statement being translated: (its tree, a number of its own per translation)
        self.cur_stmt: tuple[Tree, int] | None = None
        self.parser_state: ParserState | None = None  # the parser state being translated
        self.block_params: set[str] = set()  # code of the top-level block's parameters
        # the enclosing if conditions in the block being translated: (condition, scope, branch)
        self.conditions: list[tuple[Tree, Scope, bool]] = []

    @classmethod
    def for_consts(cls, ck: Checker) -> Translator:
        return cls(ck)

    def err(self, node: Any, msg: str) -> P4Error:
        return self.ck.error(node, msg)

    def tmp(self, base: str = "t") -> str:
        return f"_{base}{next(self.uid)}"

    # ================================================================ classes
    def py_class(self, t: StructLikeT) -> str:
        if t.name in self.classes:
            return self.classes[t.name]
        cname = f"S_{t.name}_{next(self.uid)}"
        self.classes[t.name] = cname
        slots: list[str] = []
        init: list[str] = []
        copy: list[str] = []
        setf: list[str] = []
        inval: list[str] = []
        if t.is_header:
            slots.append("_v")
            init.append("self._v = False")
            copy.append("n._v = self._v")
            setf.append("self._v = o._v")
            inval.append("self._v = False")
        for fname, ft in t.fields:
            slots.append(fname)
            if isinstance(ft, StructLikeT):
                sub = self.py_class(ft)
                init.append(f"self.{fname} = {sub}()")
                copy.append(f"n.{fname} = self.{fname}._copy()")
                setf.append(f"self.{fname}._set(o.{fname})")
                inval.append(f"self.{fname}._reset()")  # a struct inside a header
            elif isinstance(ft, StackT):
                sub = self.py_class(ft.elem)
                init.append(f"self.{fname} = _Stack({sub}() for _ in range({ft.size}))")
                copy.append(
                    f"n.{fname} = _Stack(x._copy() for x in self.{fname}); n.{fname}._n = self.{fname}._n"
                )
                setf.append(f"self.{fname}._set(o.{fname})")
            else:
                zero = "False" if isinstance(ft, BoolT) else "0"
                init.append(f"self.{fname} = {zero}")
                copy.append(f"n.{fname} = self.{fname}")
                setf.append(f"self.{fname} = o.{fname}")
                inval.append(f"self.{fname} = 0")
                if isinstance(ft, VarbitT):
                    slots.append(f"{fname}__len")
                    init.append(f"self.{fname}__len = 0")
                    copy.append(f"n.{fname}__len = self.{fname}__len")
                    setf.append(f"self.{fname}__len = o.{fname}__len")
                    inval.append(f"self.{fname}__len = 0")
        if t.name == "standard_metadata_t":
            slots.append("_payload")
            init.append("self._payload = b''")
            copy.append("n._payload = self._payload")
            setf.append("self._payload = o._payload")
        src = [f"class {cname}:", f"    __slots__ = {tuple(slots)!r}"]
        src.append("    def __init__(self):")
        src += ["        " + x for x in init] or ["        pass"]
        src.append("    def _copy(self):")
        src.append(f"        n = {cname}.__new__({cname})")
        src += ["        " + x for x in copy]
        src.append("        return n")
        src.append("    def _set(self, o):")
        src += ["        " + x for x in setf] or ["        pass"]
        plain = [f for f, ft in t.fields if not isinstance(ft, (StackT, VarbitT))]
        if len(plain) == len(t.fields):
            src.append("    @staticmethod")
            src.append(f"    def _of({', '.join('a_' + f for f in plain)}):")
            src.append(f"        n = {cname}.__new__({cname})")
            if t.is_header:
                src.append("        n._v = True")
            src += [f"        n.{f} = a_{f}" for f in plain]
            if t.name == "standard_metadata_t":
                src.append("        n._payload = b''")
            src.append("        return n")
        src.append("    def _eq(self, o):")
        if t.is_header:
            # P4: two headers are equal when both are invalid, or both valid with equal fields
            src.append("        if not (self._v and o._v): return self._v == o._v")
        eqs = []
        for fname, ft in t.fields:
            if isinstance(ft, StructLikeT):
                eqs.append(f"self.{fname}._eq(o.{fname})")
            elif isinstance(ft, StackT):
                eqs.append(f"all(x._eq(y) for x, y in zip(self.{fname}, o.{fname}))")
            else:
                eqs.append(f"self.{fname} == o.{fname}")
        src.append(f"        return {' and '.join(eqs) or 'True'}")
        src.append("    def _reset(self):")
        src += ["        " + x for x in self.reset_lines(t, "self")] or ["        pass"]
        if t.is_header:
            src.append("    def _inv(self):")
            src += ["        " + x for x in inval]
            src += self._pack_methods(t)
        self.class_src.append("\n".join(src))
        return cname

    # ---- byte-aligned layouts: struct.Struct packs/unpacks a whole header in one C call
    def layout(self, widths: list[int]) -> tuple[str, list[tuple[list[int], list[int]]]] | None:
        """Chunks of fields that end on byte boundaries, each split into 8/4/2/1-byte struct
        codes: (struct name, [(field indices, part sizes)]), or None if not byte aligned."""
        chunks: list[tuple[list[int], list[int]]] = []
        cur: list[int] = []
        bits = 0
        fmt = ">"
        for i, w in enumerate(widths):
            cur.append(i)
            bits += w
            if bits % 8 == 0:
                nbytes = bits // 8
                sizes = []
                for size in (8, 4, 2, 1):
                    while nbytes >= size:
                        sizes.append(size)
                        nbytes -= size
                fmt += "".join({8: "Q", 4: "I", 2: "H", 1: "B"}[z] for z in sizes)
                chunks.append((cur, sizes))
                cur, bits = [], 0
        if cur or not chunks:
            return None
        name = self.struct_names.get(fmt)
        if name is None:
            name = f"_ST{len(self.struct_names)}"
            self.struct_names[fmt] = name
            self.ns[name] = struct.Struct(fmt)
        return name, chunks

    def struct_unpack_lines(self, t: StructLikeT, obj: str, tup: str) -> list[str] | None:
        fields = [(n, bit_width_of(ft) or 0, ft) for n, ft in t.flat_fields()]
        lay = self.layout([w for _, w, _ in fields])
        if lay is None:
            return None
        name, chunks = lay
        out = [f"{tup} = {name}.unpack_from(_pkt, _off)"]
        k = 0
        for idxs, sizes in chunks:
            parts = [f"{tup}[{k + j}]" for j in range(len(sizes))]
            k += len(sizes)
            val = parts[0]
            if len(parts) > 1:
                val = "(" + " | ".join(self._combine(parts, sizes)) + ")"
            if len(idxs) > 1:
                cv = self.tmp("c")
                out.append(f"{cv} = {val}")
                val = cv
            total = sum(sizes) * 8
            sh = total
            for i in idxs:
                n, w, ft = fields[i]
                sh -= w
                out.append(f"{obj}.{n} = {self.field_of(val, total, sh, w, ft)}")
        out.append(f"{obj}._v = True")
        return out

    @staticmethod
    def field_of(val: str, total: int, shift: int, w: int, ft: P4Type) -> str:
        """The ``w``-bit field at ``shift`` of the ``total``-bit integer ``val``."""
        expr = f"({val} >> {shift})" if shift else val
        if shift + w < total:
            expr = f"({expr} & {mask(w)})"
        if isinstance(ft, BitT) and ft.signed:
            expr = wrap_code(expr, ft)
        return expr

    @staticmethod
    def _combine(parts: list[str], sizes: list[int]) -> list[str]:
        out = []
        rest = sum(sizes) * 8
        for p, z in zip(parts, sizes, strict=True):
            rest -= z * 8
            out.append(f"({p} << {rest})" if rest else p)
        return out

    def struct_pack_expr(
        self, vals: list[str], widths: list[int], masked: list[bool]
    ) -> str | None:
        lay = self.layout(widths)
        if lay is None:
            return None
        name, chunks = lay
        args: list[str] = []
        for idxs, sizes in chunks:
            total = sum(sizes) * 8
            sh = total
            terms = []
            for i in idxs:
                sh -= widths[i]
                v = f"({vals[i]} & {mask(widths[i])})" if masked[i] else vals[i]
                terms.append(f"({v} << {sh})" if sh else v)
            combined = " | ".join(terms)
            if len(sizes) == 1:
                args.append(combined)
                continue
            cv = f"({combined})" if len(terms) > 1 else combined
            rest = total
            for z in sizes:
                rest -= z * 8
                piece = f"({cv} >> {rest})" if rest else cv
                args.append(f"({piece} & {mask(z * 8)})" if rest < total - z * 8 else piece)
        return f"{name}.pack({', '.join(args)})"

    def header_pack(self, t: StructLikeT, obj: str) -> str:
        fields = [(n, bit_width_of(ft) or 0, ft) for n, ft in t.flat_fields()]
        e = self.struct_pack_expr(
            [f"{obj}.{n}" for n, _, _ in fields],
            [w for _, w, _ in fields],
            [isinstance(ft, BitT) and ft.signed for _, _, ft in fields],
        )
        return e if e is not None else self.pack_expr(t, obj)

    @staticmethod
    def unpack_lines(t: StructLikeT, obj: str, x: str) -> list[str]:
        """Statements setting the fields of header ``obj`` from the integer ``x`` (fixed size)."""
        widths = [(n, bit_width_of(ft) or 0, ft) for n, ft in t.flat_fields()]
        total = sum(w for _, w, _ in widths)
        out = []
        shift = total
        for n, w, ft in widths:
            shift -= w
            out.append(f"{obj}.{n} = {Translator.field_of(x, total, shift, w, ft)}")
        out.append(f"{obj}._v = True")
        return out

    @staticmethod
    def pack_expr(t: StructLikeT, obj: str) -> str:
        """Expression serialising header ``obj`` (fixed size) to bytes."""
        widths = [(n, bit_width_of(ft) or 0, ft) for n, ft in t.flat_fields()]
        total = sum(w for _, w, _ in widths)
        parts = []
        shift = total
        for n, w, ft in widths:
            shift -= w
            # unsigned fields always hold in-range values; signed ones are negative ints
            v = f"({obj}.{n} & {mask(w)})" if isinstance(ft, BitT) and ft.signed else f"{obj}.{n}"
            parts.append(f"({v} << {shift})" if shift else v)
        return f"({' | '.join(parts) or '0'}).to_bytes({(total + 7) // 8}, 'big')"

    def reset_lines(self, t: StructLikeT, obj: str) -> list[str]:
        """Flat statements putting ``obj`` back in its initial state (all invalid, all zero)."""
        out: list[str] = []
        if t.is_header:
            out.append(f"{obj}._v = False")
        for fname, ft in t.fields:
            if isinstance(ft, StructLikeT):
                sub = self.tmp("r")
                out.append(f"{sub} = {obj}.{fname}")
                out += self.reset_lines(ft, sub)
            elif isinstance(ft, StackT):
                sub = self.tmp("r")
                out.append(f"{sub} = {obj}.{fname}")
                out.append(f"{sub}._n = 0")
                out.append(f"for _e in {sub}: _e._reset()")
            else:
                out.append(f"{obj}.{fname} = {'False' if isinstance(ft, BoolT) else '0'}")
                if isinstance(ft, VarbitT):
                    out.append(f"{obj}.{fname}__len = 0")
        if t.name == "standard_metadata_t":
            out.append(f"{obj}._payload = b''")
        return out

    def _pack_methods(self, t: StructLikeT) -> list[str]:
        vb = t.varbit_field()
        out: list[str] = []
        widths = [(n, bit_width_of(ft) or 0, ft) for n, ft in t.flat_fields()]
        if vb is None:
            out.append("    def _ux(self, x):")
            out += ["        " + line for line in self.unpack_lines(t, "self", "x")]
            out.append("    def _pk(self):")
            out.append(f"        return {self.pack_expr(t, 'self')}")
        else:
            idx, _vname, _maxw = vb
            out.append("    def _uxv(self, x, total, vlen):")
            out.append("        s = total")
            for i, (n, w, ft) in enumerate(widths):
                if i == idx:
                    out.append("        s -= vlen")
                    out.append(f"        self.{n} = (x >> s) & ((1 << vlen) - 1)")
                    out.append(f"        self.{n}__len = vlen")
                else:
                    out.append(f"        s -= {w}")
                    expr = f"((x >> s) & {mask(w)})"
                    if isinstance(ft, BitT) and ft.signed:
                        expr = wrap_code(expr, ft)
                    out.append(f"        self.{n} = {expr}")
            out.append("        self._v = True")
            out.append("    def _pk(self):")
            out.append("        x = 0")
            out.append("        total = 0")
            for i, (n, w, _ft) in enumerate(widths):
                if i == idx:
                    out.append(f"        x = (x << self.{n}__len) | self.{n}")
                    out.append(f"        total += self.{n}__len")
                else:
                    out.append(f"        x = (x << {w}) | (self.{n} & {mask(w)})")
                    out.append(f"        total += {w}")
            out.append("        return x.to_bytes((total + 7) // 8, 'big')")
        return out

    # ================================================================ types helpers
    def resolve_type(self, node: Tree, scope: Scope) -> P4Type:
        return self.ck.resolve_type(node, scope)

    def convert(self, e: E, want: P4Type | None, node: Any, what: str = "") -> E:
        """Implicit conversion of ``e`` to ``want`` as P4 allows it; error otherwise."""
        if want is None or isinstance(want, TypeVarT):
            return e
        t = e.type
        if same_type(t, want) or (isinstance(want, IntT) and isinstance(t, IntT)):
            return e
        if isinstance(want, BitT) and isinstance(t, IntT):
            if e.is_const:
                v = wrap_value(e.const, want)
                return E(repr(v), want, v)
            raise self.err(
                node, f"{what}cannot use a non-constant int where {want.show()} is expected"
            )
        if isinstance(want, IntT) and isinstance(t, BitT) and e.is_const:
            return E(repr(e.const), want, e.const)
        if isinstance(want, BitT) and isinstance(t, EnumT) and t.underlying == want:
            return E(e.code, want, e.const)
        if isinstance(t, EnumT) and isinstance(want, EnumT) and t is want:
            return e
        if isinstance(t, StructLikeT) and isinstance(want, StructLikeT) and t.name == want.name:
            return e
        if isinstance(t, ListT) and isinstance(want, StructLikeT):
            return self.list_to_struct(e, want, node)
        if isinstance(t, ListT) and isinstance(want, ListT):
            if len(t.elems) != len(want.elems):
                raise self.err(node, f"{what}type mismatch: expected {want.show()}, got {t.show()}")
            items = e.items or [E(f"{e.code}[{i}]", et) for i, et in enumerate(t.elems)]
            conv = [
                self.convert(it, wt, node, what) for it, wt in zip(items, want.elems, strict=True)
            ]
            return E("(" + "".join(c.code + ", " for c in conv) + ")", want, items=conv)
        if isinstance(t, ErrorT) and isinstance(want, ErrorT):
            return e
        raise self.err(node, f"{what}type mismatch: expected {want.show()}, got {t.show()}")

    def list_to_struct(self, e: E, want: StructLikeT, node: Any) -> E:
        """A ``{a, b, ...}`` list as a struct or (valid) header value."""
        items = e.items or []
        if len(items) != len(want.fields):
            raise self.err(
                node, f"{want.name} has {len(want.fields)} fields, the list has {len(items)}"
            )
        codes = []
        for it, (fname, ft) in zip(items, want.fields, strict=True):
            if isinstance(ft, (StackT, VarbitT)):
                raise self.err(
                    node, f"field {fname}: list initialisers of stacks/varbits are not supported"
                )
            codes.append(self.convert(it, ft, node, f"field {fname}: ").code)
        return E(f"{self.py_class(want)}._of({', '.join(codes)})", want)

    # ================================================================ expressions
    def expr(self, node: Tree | Token, scope: Scope, want: P4Type | None = None) -> E:
        if isinstance(node, Token):
            raise self.err(node, f"unexpected token {node!s}")
        if node.data in _BIT_OPS:
            return self._bitop(node, scope, _BIT_OPS[node.data])
        if node.data in _LOGIC_OPS:
            return self._logic(node, scope, _LOGIC_OPS[node.data])
        fn = getattr(self, "x_" + node.data, None)
        if fn is None:
            raise self.err(node, f"unsupported expression ({node.data})")
        return fn(node, scope, want)

    def x_int_lit(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        v, w = parse_int(str(node.children[0]))
        if w is not None:
            if w.width <= 0:
                raise self.err(node, "invalid literal width")
            if not w.signed and v >> w.width:
                raise self.err(node, f"value {v} does not fit {w.show()}")
            v = wrap_value(v, w)
            return E(repr(v), w, v)
        return E(repr(v), IntT(), v)

    def x_true_lit(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        return E("True", BoolT(), True)

    def x_false_lit(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        return E("False", BoolT(), False)

    def x_string_lit(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        s = str(node.children[0])[1:-1]
        return E(repr(s), StringT(), s)

    def sym_expr(self, node: Any, name: str, sym: Sym) -> E:
        if sym.kind == "const":
            t = sym.type or IntT()
            return E(repr(sym.value), t, sym.value)
        if sym.kind == "var":
            return E(sym.code, sym.type or IntT(), lvalue=sym.lvalue)
        raise self.err(node, f"{name} ({sym.kind}) cannot be used as a value")

    def x_var(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        name = self.ck.name_of(node.children[0])
        sym = scope.lookup(name)
        if sym is None:
            raise self.err(node, f"unknown name {name}")
        return self.sym_expr(node, name, sym)

    def x_global_var(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        name = str(node.children[0])
        sym = scope.root().lookup(name)
        if sym is None:
            raise self.err(node, f"unknown name .{name}")
        return self.sym_expr(node, name, sym)

    def x_type_member(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        tname = str(node.children[0])
        member = self.ck.name_of(node.children[1])
        t = scope.lookup_type(tname)
        if isinstance(t, EnumT):
            if member not in t.members:
                raise self.err(node, f"enum {tname} has no member {member}")
            v = t.members[member]
            return E(repr(v), t, v)
        raise self.err(node, f"{tname}.{member}: not an enum member")

    def x_error_member(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        member = self.ck.name_of(node.children[1])
        if member not in self.ck.errors:
            raise self.err(node, f"unknown error {member}")
        v = self.ck.errors[member]
        return E(repr(v), ErrorT(), v)

    def x_list_expr(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        items: list[E] = []
        for c in node.children[0].children:
            if c is None:
                continue
            sub = (
                want.fields[len(items)][1]
                if isinstance(want, StructLikeT) and len(items) < len(want.fields)
                else None
            )
            it, lines = self.capture(c, scope, sub)
            if lines:  # left to right: earlier items are read before this one's side effects
                for i, prev in enumerate(items):
                    if not prev.is_const and not isinstance(
                        prev.type, (StructLikeT, StackT, ListT)
                    ):
                        t = self.tmp("li")
                        self.em(f"{t} = {prev.code}")
                        items[i] = E(t, prev.type)
                self.em.lines += lines
            items.append(it)
        if isinstance(want, StructLikeT):
            if len(items) != len(want.fields):
                raise self.err(
                    node, f"{want.name} has {len(want.fields)} fields, list has {len(items)}"
                )
            items = [
                self.convert(i, ft, node) for i, (_, ft) in zip(items, want.fields, strict=True)
            ]
        e = E("(" + "".join(i.code + ", " for i in items) + ")", ListT([i.type for i in items]))
        e.items = items
        return e

    def x_member(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        base_node = node.children[0]
        member = self.ck.name_of(node.children[1])
        # t.apply().hit / .miss / .action_run
        if isinstance(base_node, Tree) and base_node.data == "call":
            tbl = self.table_of_apply(base_node, scope)
            if tbl is not None:
                a, h = self.apply_table(tbl, base_node)
                if member == "hit":
                    return E(h, BoolT())
                if member == "miss":
                    return E(f"(not {h})", BoolT())
                if member == "action_run":
                    return E(a, ActionRunT(tbl), table=tbl)
                raise self.err(node, f"table apply result has no member {member}")
        if isinstance(base_node, Tree) and base_node.data == "var":
            bname = self.ck.name_of(base_node.children[0])
            s = scope.lookup(bname)
            if s is not None and s.kind in ("table", "extern", "control_inst", "action"):
                raise self.err(node, f"{bname}.{member} must be called")
        base = self.expr(base_node, scope)
        bt = base.type
        if isinstance(bt, StackT):
            if member == "size":
                return E(repr(bt.size), BitT(32), bt.size)
            if member == "nextIndex":
                return E(f"{base.code}._n", BitT(32))
            if member == "lastIndex":
                return E(f"(({base.code}._n - 1) & 0xffffffff)", BitT(32))
            if member == "last":
                return E(f"{base.code}._last()", bt.elem, lvalue=True)
            if member == "next":
                if not self.in_parser:
                    raise self.err(node, "stack.next can only be used in a parser")
                return E(f"{base.code}._next()", bt.elem, lvalue=True)
            raise self.err(node, f"header stack has no member {member}")
        if not isinstance(bt, StructLikeT):
            raise self.err(node, f"{bt.show()} has no member {member}")
        ft = bt.field_type(member)
        if ft is None:
            raise self.err(node, f"{bt.name} has no field {member}")
        e = E(f"{base.code}.{member}", ft, lvalue=base.lvalue)
        if bt.is_header:
            e.hdr_base = base.code
        if bt.kind == "header_union":
            e.siblings = [f"{base.code}.{f}" for f, _t in bt.fields if f != member]
        return e

    def x_index(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        base = self.expr(node.children[0], scope)
        if not isinstance(base.type, StackT):
            raise self.err(node, f"cannot index a value of type {base.type.show()}")
        idx = self.expr(node.children[1], scope)
        if idx.is_const:
            if not 0 <= idx.const < base.type.size:
                raise self.err(node, f"index {idx.const} out of bounds of {base.type.show()}")
            return E(f"{base.code}[{idx.const}]", base.type.elem, lvalue=base.lvalue)
        if not isinstance(idx.type, BitT):
            raise self.err(node, "stack index must be bit<>")
        return E(f"{base.code}._at({idx.code})", base.type.elem, lvalue=base.lvalue)

    def x_slice(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        base = self.expr(node.children[0], scope)
        hi = self.expr(node.children[1], scope)
        lo = self.expr(node.children[2], scope)
        if not (hi.is_const and lo.is_const):
            raise self.err(node, "slice bounds must be compile-time constants")
        if not isinstance(base.type, BitT):
            raise self.err(node, f"cannot slice a value of type {base.type.show()}")
        h, lo_ = int(hi.const), int(lo.const)
        if not (0 <= lo_ <= h < base.type.width):
            raise self.err(node, f"slice [{h}:{lo_}] out of range of {base.type.show()}")
        w = h - lo_ + 1
        code = f"(({base.code} >> {lo_}) & {mask(w)})" if lo_ else f"({base.code} & {mask(w)})"
        v = None
        if base.is_const:
            v = (base.const >> lo_) & mask(w)
        e = E(code, BitT(w), v)
        e.slice = (base, h, lo_)
        e.lvalue = base.lvalue
        return e

    def x_cast(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        target = self.resolve_type(node.children[0], scope)
        e = self.expr(node.children[1], scope, target)
        return self.cast(e, target, node)

    def cast(self, e: E, target: P4Type, node: Any) -> E:
        t = e.type
        if isinstance(target, BitT):
            if isinstance(t, IntT):
                v = wrap_value(e.const, target) if e.is_const else None
                return E(repr(v) if v is not None else wrap_code(e.code, target), target, v)
            if isinstance(t, BitT):
                if t == target:
                    return e
                if t.signed != target.signed and t.width != target.width:
                    raise self.err(
                        node,
                        f"cannot cast {t.show()} to {target.show()} directly: change the width "
                        "or the signedness in two casts",
                    )
                if e.is_const:
                    v = wrap_value(e.const, target)
                    return E(repr(v), target, v)
                if not target.signed and not t.signed and target.width >= t.width:
                    return E(e.code, target)
                return E(wrap_code(e.code, target), target)
            if isinstance(t, BoolT):
                if target.width != 1 or target.signed:
                    raise self.err(node, "bool can only be cast to bit<1>")
                return E(
                    f"(1 if {e.code} else 0)", target, None if e.const is None else int(e.const)
                )
            if isinstance(t, EnumT) and t.underlying is not None:
                return self.cast(E(e.code, t.underlying, e.const), target, node)
        if isinstance(target, BoolT):
            if isinstance(t, BoolT):
                return e
            if isinstance(t, BitT) and t.width == 1 and not t.signed:
                return E(f"({e.code} == 1)", target, None if e.const is None else e.const == 1)
            raise self.err(node, f"cannot cast {t.show()} to bool")
        if isinstance(target, EnumT) and target.underlying is not None:
            if isinstance(t, (BitT, IntT)):
                inner = self.cast(e, target.underlying, node)
                return E(inner.code, target, inner.const)
            if t is target:
                return e
        if isinstance(target, IntT) and e.is_const:
            return E(repr(e.const), target, e.const)
        if same_type(t, target) or t is target:
            return e
        if isinstance(target, StructLikeT) and isinstance(t, ListT):
            return e
        raise self.err(node, f"cannot cast {t.show()} to {target.show()}")

    # ---- operators
    def unify(self, a: E, b: E, node: Any, op: str) -> tuple[E, E, P4Type]:
        ta, tb = a.type, b.type
        if isinstance(ta, EnumT) and ta.underlying is not None and not isinstance(tb, EnumT):
            a = E(a.code, ta.underlying, a.const)
            ta = a.type
        if isinstance(tb, EnumT) and tb.underlying is not None and not isinstance(ta, EnumT):
            b = E(b.code, tb.underlying, b.const)
            tb = b.type
        if isinstance(ta, IntT) and isinstance(tb, IntT):
            return a, b, IntT()
        if isinstance(ta, BitT) and isinstance(tb, IntT):
            return a, self.convert(b, ta, node), ta
        if isinstance(tb, BitT) and isinstance(ta, IntT):
            return self.convert(a, tb, node), b, tb
        if isinstance(ta, BitT) and isinstance(tb, BitT):
            if ta != tb:
                raise self.err(node, f"{op}: cannot mix {ta.show()} and {tb.show()} without a cast")
            return a, b, ta
        if op in ("==", "!=") and (same_type(ta, tb) or (ta is tb)):
            return a, b, ta
        raise self.err(node, f"{op}: invalid operand types {ta.show()} and {tb.show()}")

    def fold(self, code: str, t: P4Type, *ops: E) -> E:
        if all(o.is_const for o in ops):
            v = eval(code, {"__builtins__": {}, "min": min, "max": max})
            return E(repr(v), t, v)
        return E(code, t)

    def capture(self, node: Any, scope: Scope, want: P4Type | None = None) -> tuple[E, list[str]]:
        """Translate an expression and take back the statements it emitted (calls of functions,
        table applies), so that the caller can order or guard them."""
        start = len(self.em.lines)
        e = self.expr(node, scope, want)
        lines = self.em.lines[start:]
        del self.em.lines[start:]
        return e, lines

    def operands(self, left: Any, right: Any, scope: Scope) -> tuple[E, E]:
        """Both operands, evaluated left to right even when the right one has side effects."""
        a = self.expr(left, scope)
        b, lines = self.capture(right, scope)
        if lines and not a.is_const:
            t = self.tmp("lv")
            self.em(f"{t} = {a.code}")
            a = E(t, a.type, hdr_base=a.hdr_base)
        self.em.lines += lines
        return a, b

    def x_arith(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        op = str(node.children[1])
        a, b = self.operands(node.children[0], node.children[2], scope)
        if op == "++":
            for x in (a, b):
                if isinstance(x.type, EnumT) and x.type.underlying is not None:
                    x.type = x.type.underlying
                if not isinstance(x.type, BitT):
                    raise self.err(node, f"++: operands need a width, got {x.type.show()}")
            ta, tb = a.type, b.type
            assert isinstance(ta, BitT) and isinstance(tb, BitT)
            t = BitT(ta.width + tb.width, ta.signed)
            code = (
                f"((({a.code}) & {mask(ta.width)}) << {tb.width} | (({b.code}) & {mask(tb.width)}))"
            )
            if t.signed:
                code = wrap_code(code, t)
            return self.fold(code, t, a, b)
        a, b, t = self.unify(a, b, node, op)
        if isinstance(t, BoolT) or not isinstance(t, (BitT, IntT)):
            raise self.err(node, f"{op}: arithmetic needs bit<>/int<> operands, got {t.show()}")
        if op in ("|+|", "|-|"):
            if not isinstance(t, BitT):
                raise self.err(node, f"{op} needs operands with a width")
            raw = f"({a.code} {'+' if op == '|+|' else '-'} {b.code})"
            if t.signed:
                lo, hi = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
            else:
                lo, hi = 0, mask(t.width)
            return self.fold(f"min(max({raw}, {lo}), {hi})", t, a, b)
        if op in ("/", "%"):
            if isinstance(t, BitT) and t.signed:
                raise self.err(node, f"{op} is not defined on signed values")
            if self.arch is not None and not (a.is_const and b.is_const):
                self.arch.check_operation(self, node, op, a, b)
            pyop = "//" if op == "/" else "%"
            if b.is_const and b.const == 0:
                raise self.err(node, "division by zero")
            if b.is_const:
                code = f"({a.code} {pyop} {b.code})"
            else:
                code = f"(({a.code} {pyop} {b.code}) if {b.code} else 0)"
            return self.fold(code, t, a, b)
        code = f"({a.code} {op} {b.code})"
        if isinstance(t, BitT):
            code = wrap_code(code, t)
        return self.fold(code, t, a, b)

    def x_neg(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        a = self.expr(node.children[-1], scope, want)
        if isinstance(a.type, IntT):
            return self.fold(f"(-{a.code})", a.type, a)
        if not isinstance(a.type, BitT):
            raise self.err(node, f"unary -: invalid operand type {a.type.show()}")
        return self.fold(wrap_code(f"-{a.code}", a.type), a.type, a)

    def x_pos(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        return self.expr(node.children[-1], scope, want)

    def x_bnot(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        a = self.expr(node.children[-1], scope, want)
        if isinstance(a.type, EnumT) and a.type.underlying is not None:
            a = E(a.code, a.type.underlying, a.const)
        if not isinstance(a.type, BitT):
            raise self.err(node, f"~: operand needs a width, got {a.type.show()}")
        return self.fold(wrap_code(f"~{a.code}", a.type), a.type, a)

    def x_lnot(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        a = self.expr(node.children[-1], scope)
        if not isinstance(a.type, BoolT):
            raise self.err(node, f"!: operand must be bool, got {a.type.show()}")
        return self.fold(f"(not {a.code})", BoolT(), a)

    def _bitop(self, node: Tree, scope: Scope, op: str) -> E:
        a, b = self.operands(node.children[0], node.children[-1], scope)
        a, b, t = self.unify(a, b, node, op)
        if not isinstance(t, (BitT, IntT)):
            raise self.err(node, f"{op}: invalid operand type {t.show()}")
        return self.fold(f"({a.code} {op} {b.code})", t, a, b)

    def x_shift(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        op = str(node.children[1])
        a, b = self.operands(node.children[0], node.children[2], scope)
        if isinstance(a.type, EnumT) and a.type.underlying is not None:
            a = E(a.code, a.type.underlying, a.const)
        if isinstance(b.type, BitT) and b.type.signed:
            raise self.err(node, f"{op}: the shift amount must be unsigned")
        if not isinstance(b.type, (BitT, IntT)):
            raise self.err(node, f"{op}: invalid shift amount type {b.type.show()}")
        if isinstance(b.type, IntT) and (not b.is_const or b.const < 0):
            raise self.err(node, f"{op}: the shift amount must be a non-negative constant or bit<>")
        t = a.type
        if self.arch is not None and not (a.is_const and b.is_const):
            self.arch.check_operation(self, node, op, a, b)
        if isinstance(t, IntT):
            if not b.is_const:
                raise self.err(node, f"{op}: shifting an int needs a constant amount")
            return self.fold(f"({a.code} {op} {b.code})", t, a, b)
        if not isinstance(t, BitT):
            raise self.err(node, f"{op}: invalid operand type {t.show()}")
        if op == ">>":
            return self.fold(f"({a.code} >> {b.code})", t, a, b)
        if b.is_const:
            if b.const >= t.width:
                return E("0", t, 0)
            return self.fold(wrap_code(f"{a.code} << {b.code}", t), t, a, b)
        bt = self.tmp("s")
        return E(
            f"({wrap_code(f'{a.code} << {bt}', t)} if ({bt} := {b.code}) < {t.width} else 0)", t
        )

    def x_cmp(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        op = str(node.children[1])
        a, b = self.operands(node.children[0], node.children[2], scope)
        if op in ("==", "!="):
            if isinstance(a.type, BoolT) or isinstance(b.type, BoolT):
                if not (isinstance(a.type, BoolT) and isinstance(b.type, BoolT)):
                    raise self.err(
                        node, f"{op}: cannot compare {a.type.show()} with {b.type.show()}"
                    )
                return self.fold(f"({a.code} {op} {b.code})", BoolT(), a, b)
            if isinstance(a.type, (StructLikeT, ListT)) or isinstance(b.type, (StructLikeT, ListT)):
                target = a.type if isinstance(a.type, StructLikeT) else b.type
                if not isinstance(target, StructLikeT):
                    raise self.err(node, f"{op} on lists is not supported by this target")
                a, b = self.convert(a, target, node), self.convert(b, target, node)
                code = f"{a.code}._eq({b.code})"
                return E(code if op == "==" else f"(not {code})", BoolT())
            if isinstance(a.type, StackT):
                raise self.err(node, f"{op} on {a.type.show()} is not supported by this target")
        a, b, t = self.unify(a, b, node, op)
        if op not in ("==", "!=") and not isinstance(t, (BitT, IntT)):
            raise self.err(node, f"{op}: cannot order values of type {t.show()}")
        return self.fold(f"({a.code} {op} {b.code})", BoolT(), a, b)

    def _logic(self, node: Tree, scope: Scope, op: str) -> E:
        a = self.expr(node.children[0], scope)
        b, lines = self.capture(node.children[-1], scope)
        for x in (a, b):
            if not isinstance(x.type, BoolT):
                raise self.err(node, f"{op}: operands must be bool, got {x.type.show()}")
        if lines:
            # short circuit: the right operand's statements run only when it is evaluated
            t = self.tmp("sc")
            self.em(f"{t} = {a.code}")
            self.em(f"if {'' if op == 'and' else 'not '}{t}:")
            self.em.lines += ["    " + line for line in lines]
            self.em(f"    {t} = {b.code}")
            return E(t, BoolT())
        return self.fold(f"({a.code} {op} {b.code})", BoolT(), a, b)

    def x_cond(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        c = self.expr(node.children[0], scope)
        if not isinstance(c.type, BoolT):
            raise self.err(node, f"?: condition must be bool, got {c.type.show()}")
        a, la = self.capture(node.children[1], scope, want)
        b, lb = self.capture(node.children[2], scope, want)
        if isinstance(a.type, IntT) and isinstance(b.type, IntT) and want is not None:
            a, b = self.convert(a, want, node), self.convert(b, want, node)
        if isinstance(a.type, BoolT) and isinstance(b.type, BoolT):
            t: P4Type = BoolT()
        else:
            a, b, t = self.unify(a, b, node, "?:")
        if isinstance(t, IntT) and not c.is_const:
            raise self.err(node, "?: with int operands needs a width (cast one branch)")
        if la or lb:
            # only the chosen branch's statements run
            r = self.tmp("mx")
            self.em(f"if {c.code}:")
            self.em.lines += ["    " + line for line in la]
            self.em(f"    {r} = {a.code}")
            self.em("else:")
            self.em.lines += ["    " + line for line in lb]
            self.em(f"    {r} = {b.code}")
            return E(r, t)
        return self.fold(f"({a.code} if {c.code} else {b.code})", t, c, a, b)

    # ---- calls in expressions
    def x_call(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        r = self.call(node, scope, stmt=False)
        if r is None:
            raise self.err(node, "this call returns no value")
        return r

    def x_generic_call(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        return self.x_call(node, scope, want)

    def x_ctor_call(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        raise self.err(node, "constructor calls are only allowed in instantiations")

    x_generic_ctor_call = x_ctor_call

    # ================================================================ calls
    def call_parts(self, node: Tree) -> tuple[Tree, list[Any], list[Tree]]:
        target = node.children[0]
        if node.data == "generic_call":
            targs = list(trees(node.children[2]))
            args_node = node.children[-1]
        else:
            targs = []
            args_node = node.children[1]
        args = [] if args_node is None else list(args_node.children)
        for a in args:
            if isinstance(a, Tree) and a.data == "named_arg":
                raise self.err(a, "named arguments are not supported by this target")
        return target, args, targs

    def table_of_apply(self, node: Tree, scope: Scope) -> TableInfo | None:
        target = node.children[0]
        if node.data != "call" or not (isinstance(target, Tree) and target.data == "member"):
            return None
        if self.ck.name_of(target.children[1]) != "apply":
            return None
        base = target.children[0]
        if isinstance(base, Tree) and base.data == "var":
            s = scope.lookup(self.ck.name_of(base.children[0]))
            if s is not None and s.kind == "table":
                if node.children[1] is not None:
                    raise self.err(node, "table apply takes no arguments")
                return s.value
        return None

    def call(self, node: Tree, scope: Scope, stmt: bool) -> E | None:
        target, args, targs = self.call_parts(node)
        if isinstance(target, Tree) and target.data == "member":
            base = target.children[0]
            method = self.ck.name_of(target.children[1])
            if isinstance(base, Tree) and base.data == "var":
                bname = self.ck.name_of(base.children[0])
                s = scope.lookup(bname)
                if s is not None and s.kind == "table":
                    if method != "apply":
                        raise self.err(node, f"tables have no method {method}")
                    a, _h = self.apply_table(s.value, node)
                    return E(a, ActionRunT(s.value), table=s.value)
                if s is not None and s.kind == "extern":
                    return self.extern_method(node, s.value, method, args, scope)
                if s is not None and s.kind == "control_inst":
                    if method != "apply":
                        raise self.err(node, f"controls have no method {method}")
                    self.call_control(node, s.value, args, scope)
                    return None
                if s is not None and s.kind == "parser_inst":
                    if method != "apply":
                        raise self.err(node, f"parsers have no method {method}")
                    self.call_subparser(node, s.value, args, scope)
                    return None
                if s is not None and s.kind == "packet_in":
                    return self.packet_in_method(node, method, args, targs, scope)
                if s is not None and s.kind == "packet_out":
                    if method != "emit" or len(args) != 1:
                        raise self.err(node, "packet_out supports emit(hdr)")
                    self.emit_call(self.expr(args[0], scope), node)
                    return None
            obj = self.expr(base, scope)
            return self.builtin_method(node, obj, method, args, scope)
        if isinstance(target, Tree) and target.data == "type_member":
            # direct application of a parser or control type: an implicit instance
            tname = str(target.children[0])
            method = self.ck.name_of(target.children[1])
            decl = self.ck.decls.get(tname)
            if method == "apply" and decl is not None and decl.kind in ("parser", "control"):
                fq = f"{self.fq}.{tname}" if self.fq else tname
                inst = self.implicit_instances.get(fq)
                if inst is None:
                    if decl.kind == "parser" and not self.in_parser:
                        raise self.err(node, "parsers can only be applied from parsers")
                    inst = self.instantiate_block(decl, fq, scope)
                    self.implicit_instances[fq] = inst
                if decl.kind == "parser":
                    self.call_subparser(node, inst, args, scope)
                else:
                    self.call_control(node, inst, args, scope)
                return None
        if isinstance(target, Tree) and target.data == "var":
            name = self.ck.name_of(target.children[0])
            s = scope.lookup(name)
            if s is None:
                raise self.err(node, f"unknown function or action {name}")
            if s.kind == "action":
                self.inline_action_call(node, s, args, scope)
                return None
            if s.kind == "func":
                return self.extern_func(node, name, args, targs, scope)
            if s.kind == "function":
                return self.inline_function(node, name, s, args, scope)
            raise self.err(node, f"{name} is not callable")
        raise self.err(node, "unsupported call")

    @staticmethod
    def with_defaults(args: list[Any], params_node: Tree | None, n: int) -> list[Any]:
        """Arguments completed with the parameters' default values (``in bit<8> y = 5``)."""
        if params_node is None or len(args) >= n:
            return args
        out = list(args)
        for p in params_node.children[len(args) :]:
            if p.children[4] is None:
                break
            out.append(p.children[4])
        return out

    def invalidate_siblings(self, member: E) -> None:
        """A header_union member became valid: the other members become invalid."""
        for sib in member.siblings or []:
            self.em(f"{sib}._inv()")

    def builtin_method(
        self, node: Tree, obj: E, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        t = obj.type
        if isinstance(t, StructLikeT) and t.is_header:
            if args:
                raise self.err(node, f"{method} takes no arguments")
            if method == "isValid":
                return E(f"{obj.code}._v", BoolT())
            if method == "setValid":
                self.em(f"{obj.code}._v = True")
                self.invalidate_siblings(obj)
                return None
            if method == "setInvalid":
                self.em(f"{obj.code}._inv()")
                return None
        if isinstance(t, StructLikeT) and t.kind == "header_union" and method == "isValid":
            if args:
                raise self.err(node, "isValid takes no arguments")
            return E("(" + " or ".join(f"{obj.code}.{f}._v" for f, _t in t.fields) + ")", BoolT())
        if isinstance(t, StackT) and method in ("push_front", "pop_front"):
            if len(args) != 1:
                raise self.err(node, f"{method} takes one argument")
            n = self.expr(args[0], scope)
            if not n.is_const:
                raise self.err(node, f"{method} needs a constant count")
            self.em(f"{obj.code}._{method}({int(n.const)})")
            return None
        raise self.err(node, f"{t.show()} has no method {method}")

    # ---- actions
    def action_info(self, sym: Sym) -> ActionInfo:
        tree, decl_scope, fq = sym.value
        name = self.ck.name_of(tree.children[1])
        anns = self.ck.annotations(tree.children[0])
        full = self.control_plane_name(fq, name, anns)
        if full in self.actions and self.actions[full].tree is tree:
            return self.actions[full]
        params: list[tuple[str, str, P4Type]] = []
        if tree.children[2] is not None:
            for p in tree.children[2].children:
                d = p.children[1]
                direction = str(d.children[0]) if d is not None else ""
                pt = self.resolve_type(p.children[2], decl_scope)
                params.append((self.ck.name_of(p.children[3]), direction, pt))
        info = ActionInfo(full, tree, decl_scope, params, anns)
        self.actions[full] = info
        return info

    def control_plane_name(self, fq: str, name: str, anns: dict[str, list[Any]]) -> str:
        if anns.get("name"):
            n = str(anns["name"][0])
            if n.startswith("."):
                return n[1:]
            return f"{fq}.{n}" if fq else n
        return f"{fq}.{name}" if fq else name

    def inline_action(
        self, info: ActionInfo, bind: list[tuple[str, str, P4Type, str | None]]
    ) -> list[tuple[str, str]]:
        """Emit an action body; bind: (param, direction, type, python value or None).

        Returns (param local, direction) for copy-out."""
        sc = Scope(info.scope)
        outs: list[tuple[str, str]] = []
        for pname, direction, pt, value in bind:
            local = self.tmp(f"a_{pname}_")
            if value is None:
                self.em(f"{local} = {self.zero(pt)}")
            else:
                self.em(f"{local} = {value}")
            # directionless and `in` parameters are read-only, as p4c says
            sc.names[pname] = Sym("var", pt, code=local, lvalue=direction in ("out", "inout"))
            outs.append((local, direction))
        saved_fq = self.fq
        self.action_body(info.tree.children[3], sc)
        self.fq = saved_fq
        return outs

    def action_body(self, body: Tree, sc: Scope) -> None:
        """The body of an action (or of a TNA RegisterAction's apply), inlined: `return` ends it."""
        self.in_action += 1
        if self.contains(body, "return_stmt"):
            self.em("try:")
            with self.em.block():
                self.em("pass")
                self.block(body, sc)
            self.em("except _Ret:")
            with self.em.block():
                self.em("pass")
        else:
            self.block(body, sc)
        self.in_action -= 1

    @staticmethod
    def contains(node: Tree, kind: str) -> bool:
        return any(isinstance(n, Tree) and n.data == kind for n in node.iter_subtrees())

    @staticmethod
    def copy_in(e: E) -> str:
        """Copy-in of an argument: headers, structs and stacks are copied (the callee may alias)."""
        if isinstance(e.type, (StructLikeT, StackT)):
            return f"{e.code}._copy()"
        return e.code

    def inline_action_call(self, node: Tree, sym: Sym, args: list[Any], scope: Scope) -> None:
        info = self.action_info(sym)
        args = self.with_defaults(args, info.tree.children[2], len(info.params))
        if len(args) != len(info.params):
            raise self.err(
                node, f"action {info.name} takes {len(info.params)} arguments, {len(args)} given"
            )
        bind = []
        lvals = []
        for param, a in zip(info.params, args, strict=True):
            binding, lv = self.bind_argument(param, a, scope)
            bind.append(binding)
            lvals.append((lv, a))
        has_out = any(d in ("out", "inout") for _p, d, _t in info.params)
        guard = has_out and self.contains(info.tree.children[3], "exit_stmt")
        if guard:
            # `exit` still copies out/inout parameters back (P4 spec; p4c and BMv2 do so)
            self.em("try:")
            self.em.indent += 1
        outs = self.inline_action(info, bind)
        if guard:
            self.em.indent -= 1
            self.em("finally:")
            self.em.indent += 1
            self.em("pass")
        for (local, direction), (lv, a) in zip(outs, lvals, strict=True):
            if direction in ("out", "inout") and lv is not None:
                self.assign_to(lv, E(local, lv.type), a)
        if guard:
            self.em.indent -= 1

    def bind_argument(
        self, param: tuple[str, str, P4Type], a: Any, scope: Scope
    ) -> tuple[tuple[str, str, P4Type, str | None], E | None]:
        """One action argument: its binding for :meth:`inline_action` (copy-in value, None for
        ``out``) and, for ``out``/``inout``, the lvalue to copy back to."""
        pname, direction, pt = param
        if direction in ("out", "inout"):
            lv = self.expr(a, scope)
            if not lv.lvalue:
                raise self.err(a, f"argument for {direction} parameter {pname} must be an lvalue")
            self.convert(lv, pt, a)
            return (pname, direction, pt, self.copy_in(lv) if direction == "inout" else None), lv
        e = self.convert(self.expr(a, scope, pt), pt, a)
        return (pname, direction, pt, self.copy_in(e)), None

    def zero(self, t: P4Type) -> str:
        if isinstance(t, BoolT):
            return "False"
        if isinstance(t, StructLikeT):
            return f"{self.py_class(t)}()"
        if isinstance(t, StackT):
            return f"_Stack({self.py_class(t.elem)}() for _ in range({t.size}))"
        if isinstance(t, ListT):
            return "(" + "".join(self.zero(x) + ", " for x in t.elems) + ")"
        return "0"

    # ---- tables
    def apply_table(self, tbl: TableInfo, node: Any) -> tuple[str, str]:
        if self.in_action:
            raise self.err(node, "tables cannot be applied from actions")
        n = next(self.uid)
        a, p, h, e = f"_a{n}", f"_p{n}", f"_h{n}", f"_e{n}"
        T = tbl.pyname
        if not tbl.keys:
            self.em(f"{e} = None")
        else:
            kcode = (
                tbl.keys[0][2].code
                if len(tbl.keys) == 1
                else "(" + ", ".join(k[2].code for k in tbl.keys) + ",)"
            )
            kinds = {k[1] for k in tbl.keys}
            if kinds <= {"exact"}:
                self.em(f"{e} = {T}_exact.get({kcode})")
            else:
                self.em(f"{e} = {T}.lookup({kcode})")
        self.em(f"if {e} is None:")
        with self.em.block():
            self.em(f"{a} = {T}.default_action; {p} = {T}.default_params; {h} = False")
            if tbl.meter is not None:
                self.em("_G.dmeter = 0")
        self.em("else:")
        with self.em.block():
            self.em(f"{a} = {e}.a; {p} = {e}.p; {h} = True")
            if tbl.counters is not None and tbl.counters.count_on_hit:
                self.em(f"{e}.packets += 1; {e}.bytes += _G.plen")
            if tbl.meter is not None:
                self.em(f"_G.dmeter = {tbl.meter.pyname}.execute_entry({e}.handle, _G.plen)")
        first = True
        saved_entry, self.table_entry = self.table_entry, (tbl, e)
        for idx, (info, _scope_kind, _anns) in enumerate(tbl.actions):
            self.em(f"{'if' if first else 'elif'} {a} == {idx}:")
            first = False
            with self.em.block():
                self.em("pass")
                bound = tbl.bound.get(info.name, [])
                if bound:
                    assert tbl.scope is not None
                    self.bound_action(info, bound, tbl.scope, p, node)
                    continue
                bind = [
                    (pname, "", pt, f"{p}[{i}]") for i, (pname, _d, pt) in enumerate(info.params)
                ]
                self.inline_action(info, bind)
        self.table_entry = saved_entry
        return a, h

    def bound_action(
        self, info: ActionInfo, bound: list[Any], scope: Scope, p: str, node: Any
    ) -> None:
        """A table action whose first arguments are bound in the `actions` list (copy-in/out)."""
        bind: list[tuple[str, str, P4Type, str | None]] = []
        lvals: list[E | None] = []
        for i, (pname, direction, pt) in enumerate(info.params):
            if i < len(bound):
                binding, lv = self.bind_argument((pname, direction, pt), bound[i], scope)
                bind.append(binding)
                lvals.append(lv)
            else:
                bind.append((pname, "", pt, f"{p}[{i - len(bound)}]"))
                lvals.append(None)
        outs = self.inline_action(info, bind)
        for (local, direction), lv in zip(outs, lvals, strict=True):
            if direction in ("out", "inout") and lv is not None:
                self.assign_to(lv, E(local, lv.type), node)

    # ---- sub-controls
    def call_control(self, node: Tree, inst: dict[str, Any], args: list[Any], scope: Scope) -> None:
        params: list[tuple[str, str, P4Type]] = inst["params"]
        args = self.with_defaults(args, inst.get("params_node"), len(params))
        if len(args) != len(params):
            raise self.err(
                node, f"control {inst['name']} takes {len(params)} arguments, {len(args)} given"
            )
        outs: list[tuple[E, str]] = []
        for (pname, direction, pt), a, local in zip(params, args, inst["py"], strict=True):
            if isinstance(pt, ExternT) and pt.name == "packet_out":
                # a deparser's sub-control emits into the same output (both name it `_out`)
                s = scope.lookup(self.ck.name_of(a.children[0])) if a.data == "var" else None
                if s is None or s.kind != "packet_out":
                    raise self.err(a, "pass the packet_out to a sub-control")
                continue
            e = self.expr(a, scope, pt)
            e = self.convert(e, pt, a, f"argument {pname}: ")
            if direction in ("out", "inout") and not e.lvalue:
                raise self.err(a, f"argument for {direction} parameter {pname} must be an lvalue")
            self.em(f"{local} = {e.code}")
            if direction in ("out", "inout") and not isinstance(pt, (StructLikeT, StackT)):
                outs.append((e, local))
        if outs:
            self.em("try:")  # copy-out also when the control exits
            self.em.indent += 1
        pad = "    " * (self.em.indent - 1)
        self.em.lines.extend(pad + line for line in inst["lines"])
        if outs:
            self.em.indent -= 1
            self.em("finally:")
            self.em.indent += 1
            self.em("pass")
        for e, local in outs:
            self.assign_to(e, E(local, e.type), node)
        if outs:
            self.em.indent -= 1

    def call_subparser(
        self, node: Tree, inst: dict[str, Any], args: list[Any], scope: Scope
    ) -> None:
        params: list[tuple[str, str, P4Type]] = inst["params"]
        args = self.with_defaults(args, inst.get("params_node"), len(params))
        if len(args) != len(params):
            raise self.err(
                node, f"parser {inst['name']} takes {len(params)} arguments, {len(args)} given"
            )
        codes = ["_pkt", "_off", "_plen"]
        outs = []
        inline = inst.get("inline")
        if self.parser_state is not None:  # the sub-parser's longest path, as if inlined here
            self.parser_state.bits += inst.get("depth_bits", 0)
        locals_: list[str] = []
        for (pname, direction, pt), a, local in zip(params, args, inst["py"], strict=True):
            if isinstance(pt, ExternT) and pt.name == "packet_in":
                s = scope.lookup(self.ck.name_of(a.children[0])) if a.data == "var" else None
                if s is None or s.kind != "packet_in":
                    raise self.err(a, "pass the packet_in to a sub-parser")
                continue
            e = self.convert(self.expr(a, scope, pt), pt, a, f"argument {pname}: ")
            if direction in ("out", "inout") and not e.lvalue:
                raise self.err(a, f"argument for {direction} parameter {pname} must be an lvalue")
            codes.append(e.code)
            if direction in ("out", "inout") and not isinstance(pt, (StructLikeT, StackT)):
                outs.append(e)
                locals_.append(local)
            if inline is not None:
                self.em(f"{local} = {e.code}")
        if inline is not None:
            # the sub-parser's code in place: same packet, offset and error handling as here
            pad = "    " * (self.em.indent - 1)
            self.em.lines.extend(pad + line for line in inline)
            for e, local in zip(outs, locals_, strict=True):
                self.assign_to(e, E(local, e.type), node)
            return
        r = self.tmp("sp")
        self.em(f"{r} = {inst['func']}({', '.join(codes)})")
        self.em(f"_off = {r}[0]")
        for i, e in enumerate(outs, 1):
            self.assign_to(e, E(f"{r}[{i}]", e.type), node)

    # ---- externs: the architecture's (engine/program.py Architecture)
    def extern_method(
        self, node: Tree, inst: ExternInst, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        if self.arch is None:
            raise self.err(node, f"{inst.kind}.{method} is not a compile-time constant")
        return self.arch.extern_method(self, node, inst, method, args, scope)

    def data_list(self, node: Any, scope: Scope, typed: list[E] | None = None) -> tuple[str, int]:
        """Code building the byte string of a field list. As BMv2 does, fields are packed at bit
        granularity, fields of invalid headers are left out, and the result is zero-padded.
        ``typed`` receives the list's items as typed."""
        e = self.expr(node, scope)
        if e.items is None and isinstance(e.type, ListT):  # a variable of a tuple type
            e = E(
                e.code, e.type, items=[E(f"{e.code}[{i}]", t) for i, t in enumerate(e.type.elems)]
            )
        items: list[E] = e.items or [e]
        if typed is not None:
            typed.extend(items)
        vals: list[str] = []
        widths: list[str] = []
        valid: list[str] = []
        signed: list[bool] = []
        for it in items:
            t = it.type
            if isinstance(t, EnumT) and t.underlying is not None:
                t = t.underlying
            if isinstance(t, StructLikeT) and t.is_header:
                for fname, ft in t.flat_fields():
                    vals.append(f"{it.code}.{fname}")
                    signed.append(isinstance(ft, BitT) and ft.signed)
                    w = bit_width_of(ft)
                    widths.append(f"{it.code}.{fname}__len" if w is None else str(w))
                    valid.append(f"{it.code}._v")
                continue
            hb = it.hdr_base
            valid.append(f"{hb}._v" if hb else "True")
            signed.append(isinstance(t, BitT) and t.signed)
            if isinstance(t, VarbitT):
                vals.append(it.code)
                widths.append(f"{it.code}__len")
                continue
            if isinstance(t, BoolT):
                vals.append(f"int({it.code})")
                widths.append("1")
                continue
            if not isinstance(t, BitT):
                raise self.err(node, f"hash/checksum data must have widths, got {t.show()}")
            vals.append(it.code)
            widths.append(str(t.width))
        generic = f"_pack([{', '.join(vals)}], [{', '.join(widths)}])"
        if all(w.isdigit() for w in widths):
            generic = self.inline_pack(vals, [int(w) for w in widths], signed)
        if all(v == "True" for v in valid):
            return generic, 0
        bases = sorted({v for v in valid if v != "True"})
        if all(w.isdigit() for w in widths):
            slow = f"_pack_v([{', '.join(vals)}], [{', '.join(widths)}], [{', '.join(valid)}])"
            return f"({generic} if {' and '.join(bases)} else {slow})", 0
        return (
            f"_pack_v([{', '.join(vals)}], [{', '.join(widths)}], [{', '.join(valid)}])",
            0,
        )

    def inline_pack(self, vals: list[str], widths: list[int], signed: list[bool]) -> str:
        # unsigned values always hold in-range values; only signed ones need a mask
        fast = self.struct_pack_expr(vals, widths, signed)
        if fast is not None:
            return fast
        total = sum(widths)
        pad = (-total) % 8
        parts = []
        shift = total + pad
        for v, w in zip(vals, widths, strict=True):
            shift -= w
            parts.append(f"(({v}) & {mask(w)}) << {shift}" if shift else f"(({v}) & {mask(w)})")
        return f"({' | '.join(parts) or '0'}).to_bytes({(total + pad) // 8}, 'big')"

    def emit_digest(self, data: E, node: Any, name: str = "") -> None:
        """Queue a digest of the struct ``data`` (v1model's digest(), named by the struct; TNA's
        Digest.pack, named by the Digest instance)."""
        t = data.type
        if isinstance(t, ListT):
            raise self.err(node, "digest data must be a struct (declare one for the list)")
        if not (isinstance(t, StructLikeT) and not t.is_header):
            raise self.err(node, f"digest data must be a struct, got {t.show()}")
        for fname, ft in t.fields:
            if bit_width_of(ft) is None:
                raise self.err(node, f"digest field {fname} must be bit<>/bool/enum")
        name = name or t.name
        self.digest_types[name] = t
        dv = self.tmp("dg")
        self.em(f"{dv} = {data.code}")
        values = ", ".join(f"{dv}.{f}" for f, _t in t.fields)
        self.em(f"_G.digests.append(({name!r}, ({values}{',' if t.fields else ''})))")

    def extern_func(
        self, node: Tree, name: str, args: list[Any], targs: list[Tree], scope: Scope
    ) -> E | None:
        if name in UNSUPPORTED_EXTERNS:
            raise self.err(node, f"{UNSUPPORTED_EXTERNS[name]} is not supported by this target")
        if name == "verify":  # core.p4's, in every architecture
            if not self.in_parser:
                raise self.err(node, "verify can only be called in a parser")
            if self.arch is not None:
                self.arch.check_verify(self, node)
            c = self.expr(args[0], scope)
            if not isinstance(c.type, BoolT):
                raise self.err(args[0], "verify: condition must be bool")
            er = self.convert(self.expr(args[1], scope), ErrorT(), args[1])
            self.em(f"if not {c.code}: raise _PErr({er.code})")
            return None
        if self.arch is None:
            raise self.err(node, f"{name}() is not a compile-time constant")
        return self.arch.extern_function(self, node, name, args, targs, scope)

    # ---- packet_in / packet_out
    def packet_in_method(
        self, node: Tree, method: str, args: list[Any], targs: list[Tree], scope: Scope
    ) -> E | None:
        if method == "extract":
            if len(args) not in (1, 2):
                raise self.err(node, "extract(hdr) or extract(hdr, bits)")
            h = self.expr(args[0], scope)
            if not (isinstance(h.type, StructLikeT) and h.type.is_header):
                raise self.err(args[0], f"extract needs a header, got {h.type.show()}")
            t = h.type
            vb = t.varbit_field()
            if self.parser_state is not None:
                self.parser_state.extracted.add(h.code)
                self.parser_state.bits += t.bit_width() + (0 if vb is None else vb[2])
            hv = self.tmp("x")
            self.em(f"{hv} = {h.code}")
            self.invalidate_siblings(h)
            if vb is None:
                if len(args) == 2:
                    raise self.err(node, "two-argument extract needs a header with a varbit field")
                total = t.bit_width()
                if total % 8:
                    raise self.err(
                        node, f"header {t.name} is {total} bits, not a whole number of bytes"
                    )
                nb = total // 8
                self.em(f"if _off + {nb} > _plen: raise _PErr({self.ck.errors['PacketTooShort']})")
                lines = self.struct_unpack_lines(t, hv, self.tmp("tu"))
                if lines is None:
                    xv = self.tmp("xi")
                    lines = [f"{xv} = int.from_bytes(_pkt[_off:_off + {nb}], 'big')"]
                    lines += self.unpack_lines(t, hv, xv)
                for line in lines:
                    self.em(line)
                self.em(f"_off += {nb}")
            else:
                if len(args) != 2:
                    raise self.err(
                        node, f"header {t.name} has a varbit field: extract needs its size"
                    )
                n = self.convert(self.expr(args[1], scope, BitT(32)), BitT(32), args[1])
                fixed = t.bit_width()
                vl = self.tmp("vl")
                self.em(f"{vl} = {n.code}")
                self.em(f"if {vl} > {vb[2]}: raise _PErr({self.ck.errors['HeaderTooShort']})")
                self.em(
                    f"if ({vl} + {fixed}) % 8: raise _PErr({self.ck.errors['ParserInvalidArgument']})"
                )
                nb = self.tmp("nb")
                self.em(f"{nb} = ({vl} + {fixed}) >> 3")
                self.em(f"if _off + {nb} > _plen: raise _PErr({self.ck.errors['PacketTooShort']})")
                self.em(
                    f"{hv}._uxv(int.from_bytes(_pkt[_off:_off + {nb}], 'big'), {fixed} + {vl}, {vl}); _off += {nb}"
                )
            return None
        if method == "advance":
            n = self.convert(self.expr(args[0], scope, BitT(32)), BitT(32), args[0])
            if self.parser_state is not None:
                if n.is_const:
                    self.parser_state.bits += n.const
                else:
                    self.parser_state.variable_advance = node
            v = self.tmp("adv")
            self.em(f"{v} = {n.code}")
            self.em(f"if {v} & 7: raise _PErr({self.ck.errors['ParserInvalidArgument']})")
            self.em(
                f"if _off + ({v} >> 3) > _plen: raise _PErr({self.ck.errors['PacketTooShort']})"
            )
            self.em(f"_off += {v} >> 3")
            return None
        if method == "length":
            return E("_plen * 8", BitT(32))
        if method == "lookahead":
            if len(targs) != 1 or args:
                raise self.err(node, "lookahead<T>()")
            t = self.resolve_type(targs[0], scope)
            if isinstance(t, BitT):
                nb = (t.width + 7) // 8
                self.em(f"if _off + {nb} > _plen: raise _PErr({self.ck.errors['PacketTooShort']})")
                shift = nb * 8 - t.width
                code = f"(int.from_bytes(_pkt[_off:_off + {nb}], 'big') >> {shift})"
                return E(code if not t.signed else wrap_code(code, t), t)
            if isinstance(t, StructLikeT) and t.is_header and t.varbit_field() is None:
                nb = t.bit_width() // 8
                self.em(f"if _off + {nb} > _plen: raise _PErr({self.ck.errors['PacketTooShort']})")
                v = self.tmp("la")
                self.em(
                    f"{v} = {self.py_class(t)}(); {v}._ux(int.from_bytes(_pkt[_off:_off + {nb}], 'big'))"
                )
                return E(v, t)
            raise self.err(node, f"lookahead of {t.show()} is not supported")
        raise self.err(node, f"packet_in has no method {method}")

    def emit_call(self, e: E, node: Any) -> None:
        t = e.type
        if isinstance(t, StructLikeT) and t.is_header:
            if t.varbit_field() is None and t.bit_width() % 8:
                raise self.err(node, f"header {t.name} is not a whole number of bytes")
            v = self.tmp("h")
            self.em(f"{v} = {e.code}")
            if t.varbit_field() is None:
                self.em(f"if {v}._v: _out.append({self.header_pack(t, v)})")
            else:
                self.em(f"if {v}._v: _out.append({v}._pk())")
        elif isinstance(t, StructLikeT):
            for fname, _ft in t.fields:
                self.emit_call(E(f"{e.code}.{fname}", _ft), node)
        elif isinstance(t, StackT):
            v = self.tmp("st")
            self.em(f"for {v} in {e.code}:")
            with self.em.block():
                self.em(f"if {v}._v: _out.append({v}._pk())")
        else:
            raise self.err(node, f"emit needs a header, struct or stack, got {t.show()}")

    # ================================================================ statements
    def block(self, node: Tree, scope: Scope) -> None:
        sc = Scope(scope)
        for st in node.children:
            self.stmt(st, sc)

    def stmt(self, node: Tree, scope: Scope) -> None:
        fn = getattr(self, "s_" + node.data, None)
        if fn is None:
            raise self.err(node, f"unsupported statement ({node.data})")
        saved, self.cur_stmt = self.cur_stmt, (node, next(self.uid))
        try:
            fn(node, scope)
        finally:
            self.cur_stmt = saved

    def s_block(self, node: Tree, scope: Scope) -> None:
        self.block(node, scope)

    def s_annotated_block(self, node: Tree, scope: Scope) -> None:
        self.block(node.children[1], scope)  # e.g. @atomic { ... }: one packet at a time anyway

    def s_empty_stmt(self, node: Tree, scope: Scope) -> None:
        pass

    def s_exit_stmt(self, node: Tree, scope: Scope) -> None:
        if self.in_parser:
            raise self.err(node, "exit is not allowed in a parser")
        self.em("raise _Exit()")

    def s_return_stmt(self, node: Tree, scope: Scope) -> None:
        fn = self.functions[-1] if self.functions else None
        if node.children[0] is not None:
            if fn is None or self.in_action > fn[2]:
                raise self.err(node, "return with a value is only allowed in functions")
            result, rtype, _depth = fn
            e = self.convert(self.expr(node.children[0], scope, rtype), rtype, node.children[0])
            self.em(f"{result} = {e.code}")
        elif fn is not None and not isinstance(fn[1], VoidT) and self.in_action == fn[2]:
            raise self.err(node, "this function must return a value")
        self.em("raise _Ret()")

    def inline_function(
        self, node: Tree, name: str, sym: Sym, args: list[Any], scope: Scope
    ) -> E | None:
        """A P4 function, inlined at its call: parameters copied in/out, result in a temporary."""
        tree, decl_scope = sym.value
        rtype = self.resolve_type(tree.children[1], decl_scope)
        params: list[tuple[str, str, P4Type]] = []
        if tree.children[4] is not None:
            for p in tree.children[4].children:
                d = p.children[1]
                params.append(
                    (
                        self.ck.name_of(p.children[3]),
                        str(d.children[0]) if d is not None else "in",
                        self.resolve_type(p.children[2], decl_scope),
                    )
                )
        args = self.with_defaults(args, tree.children[4], len(params))
        if len(args) != len(params):
            raise self.err(
                node, f"function {name} takes {len(params)} arguments, {len(args)} given"
            )
        if any(f[0] is tree for f in self.function_trees):
            raise self.err(node, f"function {name} calls itself")
        sc = Scope(decl_scope)
        copy_out = []
        for (pname, direction, pt), a in zip(params, args, strict=True):
            local = self.tmp(f"f_{pname}_")
            if direction in ("out", "inout"):
                lv = self.expr(a, scope)
                if not lv.lvalue:
                    raise self.err(
                        a, f"argument for {direction} parameter {pname} must be an lvalue"
                    )
                self.convert(lv, pt, a)
                self.em(f"{local} = {self.copy_in(lv) if direction == 'inout' else self.zero(pt)}")
                copy_out.append((lv, local))
            else:
                e = self.convert(self.expr(a, scope, pt), pt, a)
                self.em(f"{local} = {self.copy_in(e)}")
            sc.names[pname] = Sym("var", pt, code=local, lvalue=direction in ("out", "inout"))
        result = self.tmp("fr")
        self.em(f"{result} = {self.zero(rtype) if not isinstance(rtype, VoidT) else 'None'}")
        self.functions.append((result, rtype, self.in_action))
        self.function_trees.append((tree,))
        self.em("try:")
        with self.em.block():
            self.em("pass")
            self.block(tree.children[5], sc)
        self.em("except _Ret:")
        with self.em.block():
            self.em("pass")
        self.functions.pop()
        self.function_trees.pop()
        for lv, local in copy_out:
            self.assign_to(lv, E(local, lv.type), node)
        return None if isinstance(rtype, VoidT) else E(result, rtype)

    def s_const_decl(self, node: Tree, scope: Scope) -> None:
        t = self.resolve_type(node.children[1], scope)
        name = self.ck.name_of(node.children[2])
        e = self.convert(self.expr(node.children[3], scope, t), t, node.children[3])
        if not e.is_const:
            raise self.err(node, f"const {name} needs a compile-time constant")
        self.ck.bind(scope, name, Sym("const", t, value=e.const), node)

    def s_var_decl(self, node: Tree, scope: Scope) -> None:
        t = self.resolve_type(node.children[1], scope)
        name = self.ck.name_of(node.children[2])
        if isinstance(t, (TypeVarT, BlockT, ExternT, VoidT)):
            raise self.err(node, f"cannot declare a variable of type {t.show()}")
        local = self.tmp(f"v_{name}_")
        if node.children[3] is not None:
            e = self.convert(self.expr(node.children[3], scope, t), t, node.children[3])
            if self.arch is not None:
                self.arch.check_assignment(self, node, E(local, t), node.children[3], e, scope)
            self.ck.bind(scope, name, Sym("var", t, code=local, lvalue=True), node)
            if isinstance(t, (StructLikeT, StackT)):
                self.em(f"{local} = {self.zero(t)}")
                self.assign_to(E(local, t, lvalue=True), e, node)
            else:
                self.em(f"{local} = {e.code}")
        else:
            self.em(f"{local} = {self.zero(t)}")
            self.ck.bind(scope, name, Sym("var", t, code=local, lvalue=True), node)

    def s_assignment(self, node: Tree, scope: Scope) -> None:
        lhs = self.expr(node.children[0], scope)
        if not lhs.lvalue:
            raise self.err(node.children[0], "cannot assign to this expression")
        rhs = self.expr(node.children[1], scope, lhs.type)
        if self.arch is not None:
            self.arch.check_assignment(self, node, lhs, node.children[1], rhs, scope)
        self.assign_to(lhs, rhs, node)

    def s_op_assignment(self, node: Tree, scope: Scope) -> None:
        """``a op= b`` is ``a = a op b`` (a is a side-effect-free lvalue)."""
        target, tok, value = node.children
        op = str(tok)[:-1]
        kinds = {"&": "band", "|": "bor", "^": "bxor", "<<": "shift", ">>": "shift"}
        kind = kinds.get(op, "arith")
        op_tok = Token({"<<": "SHL", ">>": "SHR"}.get(op, "OP"), op)
        lhs = self.expr(target, scope)  # evaluated once (its index may have side effects)
        if not lhs.lvalue:
            raise self.err(target, "cannot assign to this expression")
        key = f"pv{next(self.uid)}"
        self.prevalued[key] = lhs
        pre = Tree("prevalued", [Token("KEY", key)], meta=node.meta)
        children = [pre, value] if kind in ("band", "bor", "bxor") else [pre, op_tok, value]
        expr = Tree(kind, children, meta=node.meta)
        rhs = self.expr(expr, scope, lhs.type)
        if self.arch is not None:
            self.arch.check_assignment(self, node, lhs, expr, rhs, scope)
        self.assign_to(lhs, rhs, node)
        del self.prevalued[key]

    def x_prevalued(self, node: Tree, scope: Scope, want: P4Type | None) -> E:
        return self.prevalued[str(node.children[0])]

    def assign_to(self, lhs: E, rhs: E, node: Any) -> None:
        t = lhs.type
        if isinstance(t, VarbitT):
            if not isinstance(rhs.type, VarbitT) or rhs.type != t:
                raise self.err(node, f"type mismatch: expected {t.show()}, got {rhs.type.show()}")
            self.em(f"{lhs.code} = {rhs.code}; {lhs.code}__len = {rhs.code}__len")
            return
        rhs = self.convert(rhs, t, node)
        sl = lhs.slice
        if sl is not None:
            base, h, lo = sl
            m = mask(h - lo + 1) << lo
            self.assign_to(
                E(base.code, base.type, lvalue=True, table=None) if base.slice is None else base,
                E(
                    f"(({base.code}) & {~m & mask(base.type.width)}) | ((({rhs.code}) << {lo}) & {m})",
                    base.type,
                ),
                node,
            )
            return
        if isinstance(t, StructLikeT):
            if isinstance(rhs.type, ListT):
                items = rhs.items or []
                if t.is_header:
                    self.em(f"{lhs.code}._v = True")
                for (fname, ft), it in zip(t.fields, items, strict=True):
                    self.assign_to(E(f"{lhs.code}.{fname}", ft, lvalue=True), it, node)
                return
            self.em(f"{lhs.code}._set({rhs.code})")
            if lhs.siblings:
                self.em(f"if {lhs.code}._v:")
                with self.em.block():
                    self.invalidate_siblings(lhs)
            return
        if isinstance(t, StackT):
            self.em(f"{lhs.code}._set({rhs.code})")
            return
        self.em(f"{lhs.code} = {rhs.code}")

    def s_call_stmt(self, node: Tree, scope: Scope) -> None:
        e = node.children[0]
        if not (isinstance(e, Tree) and e.data in ("call", "generic_call")):
            raise self.err(node, "expression statements must be calls")
        self.call(e, scope, stmt=True)

    def s_if_stmt(self, node: Tree, scope: Scope) -> None:
        c = self.expr(node.children[0], scope)
        if not isinstance(c.type, BoolT):
            raise self.err(node.children[0], f"if condition must be bool, got {c.type.show()}")
        self.em(f"if {c.code}:")
        cond = node.children[0]
        if self.arch is not None:
            self.arch.check_condition(self, cond, scope)
        try:
            self.conditions.append((cond, scope, True))
            with self.em.block():
                self.em("pass")
                self.stmt(node.children[1], Scope(scope))
            if node.children[2] is not None:
                self.conditions[-1] = (cond, scope, False)
                self.em("else:")
                with self.em.block():
                    self.em("pass")
                    self.stmt(node.children[2], Scope(scope))
        finally:
            self.conditions.pop()

    def s_switch_stmt(self, node: Tree, scope: Scope) -> None:
        sel = self.expr(node.children[0], scope)
        v = self.tmp("sw")
        self.em(f"{v} = {sel.code}")
        pending: list[str] = []
        first = True
        seen_default = False
        for case in node.children[1:]:
            label = case.children[0]
            if label.data == "default_label":
                cond = "True"
                seen_default = True
            elif isinstance(sel.type, ActionRunT):
                lname_node = label.children[0]
                if not (isinstance(lname_node, Tree) and lname_node.data == "var"):
                    raise self.err(label, "switch on action_run needs action names as labels")
                lname = self.ck.name_of(lname_node.children[0])
                idx = None
                for i, (info, _s, _a) in enumerate(sel.type.table.actions):
                    local = self.ck.name_of(info.tree.children[1])  # as declared (an @name
                    if lname in (info.name, info.name.rsplit(".", 1)[-1], local):  # may differ)
                        idx = i
                if idx is None:
                    raise self.err(
                        label, f"{lname} is not an action of table {sel.type.table.local}"
                    )
                cond = f"{v} == {idx}"
            else:
                if not isinstance(sel.type, (BitT, EnumT, ErrorT)):
                    raise self.err(node, f"cannot switch on {sel.type.show()}")
                e = self.convert(self.expr(label.children[0], scope, sel.type), sel.type, label)
                if not e.is_const:
                    raise self.err(label, "switch labels must be constants")
                cond = f"{v} == {e.code}"
            pending.append(cond)
            if case.data == "switch_case_block":
                full = " or ".join(f"({c})" for c in pending)
                self.em(f"{'if' if first else 'elif'} {full}:")
                first = False
                with self.em.block():
                    self.em("pass")
                    self.block(case.children[1], scope)
                pending = []
            elif seen_default:
                raise self.err(case, "default label cannot fall through")
        if pending:
            raise self.err(node, "the last switch label needs a block")
