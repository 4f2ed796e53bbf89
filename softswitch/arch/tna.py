"""TNA (Tofino Native Architecture) over the engine's one program representation.

``build_tna`` instantiates ``Switch(Pipeline(...)) main``: the six blocks are translated by the same
builder and translator as v1model's (one ``Program``), with TNA's externs (``Register`` reached only
through ``RegisterAction``, ``Hash`` with ``CRCPolynomial``, ``Checksum``, ``Counter``/
``DirectCounter``, ``Meter``/``DirectMeter``, ``Random``, ``Mirror``, ``Resubmit``, ``Digest``)
translated here. What runs a packet through the blocks (ingress parser → ingress → ingress
deparser → traffic manager → egress parser → egress → egress deparser) is ``tna_path.py``.

Tofino rules the engine can see are load-time errors at file:line:col: a register reached other
than through a RegisterAction, a RegisterAction over something that is not a register of its own
control, two RegisterAction executes of one register on one path of a pass (a stateful ALU runs
once per packet per pass), one register used by ingress and egress.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from lark import Tree

from softswitch.arch.tna_path import TnaBlocks, TnaPipeline
from softswitch.arch.tna_rules import TnaRules
from softswitch.engine import hashes
from softswitch.engine.codegen import E, ExternInst, Translator, mask
from softswitch.engine.program import Architecture, Builder, Device, ExternDecl, PacketPath
from softswitch.frontend.checker import Scope, Sym
from softswitch.frontend.types import (
    BitT,
    BoolT,
    ExternT,
    P4Type,
    StructLikeT,
)

ROLES = (
    "ingress_parser",
    "ingress",
    "ingress_deparser",
    "egress_parser",
    "egress",
    "egress_deparser",
)
ROLE_KINDS = ("parser", "control", "control", "parser", "control", "control")
PACKET_PARAM = dict(zip(ROLES, ("packet_in", "", "packet_out") * 2, strict=True))

# intrinsic metadata types -> the key of the object the switch passes for them
INTRINSIC = {
    "ingress_intrinsic_metadata_t": "ig_intr_md",
    "ingress_intrinsic_metadata_for_tm_t": "ig_tm",
    "ingress_intrinsic_metadata_from_parser_t": "ig_prsr",
    "ingress_intrinsic_metadata_for_deparser_t": "ig_dprsr",
    "egress_intrinsic_metadata_t": "eg_intr_md",
    "egress_intrinsic_metadata_from_parser_t": "eg_prsr",
    "egress_intrinsic_metadata_for_deparser_t": "eg_dprsr",
    "egress_intrinsic_metadata_for_output_port_t": "eg_oport",
}

# TNA's predefined CRCs: (width, polynomial, init, xor out, reflected). CRC16 and CRC32 are the
# ones BMv2's v1model hash() computes as crc16 (CRC-16/ARC) and crc32 (IEEE, zlib).
PREDEFINED_CRC = {
    "CRC8": (8, 0x07, 0x00, 0x00, False),
    "CRC16": (16, 0x8005, 0x0000, 0x0000, True),
    "CRC32": (32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True),
    "CRC64": (64, 0x42F0E1EBA9EA3693, 0, 0, False),
}

_LITTLE = sys.byteorder == "little"
METER_COLOUR = (0, 1, 3)  # RFC 2698 colour (GREEN, YELLOW, RED) -> MeterColor_t


def _fold(s: int) -> int:
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def ones_sum(data: bytes) -> int:
    """The 16-bit ones' complement sum of ``data`` (big-endian words, odd length zero-padded)."""
    if len(data) & 1:
        data += b"\x00"
    # the sum does not depend on byte order: sum native words in C, fold, swap back
    s = _fold(sum(memoryview(data).cast("H")))
    return ((s & 0xFF) << 8) | (s >> 8) if _LITTLE else s


def checksum_add(state: int, data: bytes) -> int:
    return _fold(state + ones_sum(data))


def checksum_subtract(state: int, data: bytes) -> int:
    return _fold(state + (~ones_sum(data) & 0xFFFF))


def checksum_update(data: bytes, zeros_as_ones: bool) -> int:
    r = ~ones_sum(data) & 0xFFFF
    return 0xFFFF if zeros_as_ones and r == 0 else r


def xor_hash(width: int) -> Any:
    nb = width // 8

    def h(data: bytes) -> int:
        if len(data) % nb:
            data += bytes(nb - len(data) % nb)
        out = 0
        for i in range(0, len(data), nb):
            out ^= int.from_bytes(data[i : i + nb], "big")
        return out

    return h


def identity_hash(data: bytes) -> int:
    return int.from_bytes(data, "big")


@dataclass
class TnaExtern(ExternInst):
    """A TNA extern instance: ``kind`` is what the control plane sees (register, counter, ...);
    ``tna_type`` is the TNA extern."""

    tna_type: str = ""
    ctl: str = ""  # fully-qualified name of the control that declares it ("" at top level)
    node: Any = None
    type_args: list[P4Type] = field(default_factory=list)
    init: int = 0  # Register initial value
    register: TnaExtern | None = None  # RegisterAction: its Register
    apply: tuple[Tree, Scope] | None = None  # RegisterAction: apply() and its scope
    fn: str = ""  # Hash: name of the hash function in the generated module's namespace
    params: tuple[Any, ...] = ()  # CRCPolynomial parameters


class Tna(TnaRules, Architecture):
    """TNA: ``Switch(Pipeline(...)) main``, one Tofino pipe; its extern instances and methods
    (one instance per loaded program: it keeps the execute sites and checksum units it
    translated, then the translated blocks)."""

    name = "tna"
    package = "Switch"

    def __init__(self) -> None:
        self.b: Builder  # while building
        self.tr: Translator
        self.blocks: TnaBlocks | None = None
        self.sites: dict[int, tuple[Any, TnaExtern]] = {}  # execute site id -> (node, register)
        self.applying: list[TnaExtern] = []  # the RegisterAction whose apply is being translated
        self.checksums: list[str] = []
        self.role = ""  # the block being built
        self.exec_stmts: dict[int, Tree] = {}  # statement translation -> its execute
        self.computed_bools: set[str] = set()
        self.salu_inputs: dict[str, dict[str, Tree]] = {}
        # locals (and fields in an action body) and the expressions assigned them, which the
        # compiler's copy propagation folds into later expressions
        self.defs: dict[str, tuple[Any, int]] = {}
        self.assigned: dict[str, int] = {}

    def build(self, b: Builder) -> None:
        self.b, self.tr = b, b.tr
        self.blocks = build_tna(b, self)
        b.prog.stages = dict(self.blocks.funcs)

    def packet_path(self, device: Device) -> PacketPath:
        assert self.blocks is not None, "the program is not built"
        return TnaPipeline(device, self.blocks)

    # ------------------------------------------------------------------ instances
    def extern_instance(self, b: Builder, d: ExternDecl) -> None:
        node, t, args, scope = d.node, d.type, d.args, d.scope
        tr = self.tr
        tn = t.name
        handler = getattr(self, f"i_{tn}", None)
        if handler is None:
            raise self.err(node, f"extern {tn} is not supported by this target")
        if node.children[4] is not None and not tn.endswith("RegisterAction"):
            raise self.err(node.children[4], f"extern {tn} has no abstract methods to implement")
        x = TnaExtern(
            "",
            d.full,
            annotations=d.annotations,
            pyname=f"X_{next(tr.uid)}",
            tna_type=tn,
            ctl=d.control,
            node=node,
            type_args=list(t.type_args),
        )
        handler(x, node, args, scope)
        if x.kind in (
            "register",
            "counter",
            "direct_counter",
            "meter",
            "direct_meter",
            "direct_register",
        ):
            b.add_extern(node, x)
        b.ck.bind(scope, d.name, Sym("extern", value=x), node)

    def _nargs(self, node: Tree, args: list[Any], counts: tuple[int, ...], sig: str) -> None:
        if len(args) not in counts:
            raise self.err(node, f"{sig}: {len(args)} arguments given")

    def _bit_arg(self, x: TnaExtern, i: int, node: Tree, what: str) -> BitT:
        t = x.type_args[i] if len(x.type_args) > i else None
        if not isinstance(t, BitT):
            raise self.err(node, f"{x.tna_type}: {what} must be bit<>")
        return t

    def _enum_arg(self, node: Any, scope: Scope, enum: str) -> str:
        return self.b.enum_member(node, scope, enum)

    def i_Register(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (1, 2), "Register<T, I>(size[, initial_value])")
        if len(x.type_args) != 2:
            raise self.err(node, "Register<T, I> takes two type arguments")
        t = x.type_args[0]
        self._bit_arg(x, 1, node, "the index type")
        x.kind = "register"
        if isinstance(t, StructLikeT):
            x.members = self._pair_members(node, t)
            x.struct_name, x.width = t.name, sum(w for _, w in x.members)
        elif isinstance(t, BitT):
            x.width = t.width
        else:
            raise self.err(
                node,
                f"Register<{t.show()}, ...>: a Tofino register holds bit<W> or a pair "
                "(a struct of two bit<W> of one width)",
            )
        x.size = self.b.const_int(args[0], scope)
        if len(args) == 2:
            x.init = self._register_init(args[1], x, scope)
        self.tr.ns[x.pyname] = [x.init] * x.size

    def _pair_members(self, node: Tree, t: StructLikeT) -> tuple[tuple[str, int], ...]:
        """A paired register's halves: a stateful ALU in paired mode holds two words of one width
        (8, 16 or 32 bits on Tofino 1, up to 64 on Tofino 2), compared and updated together."""
        members = tuple(
            (n, ft.width) for n, ft in t.fields if isinstance(ft, BitT) and not ft.signed
        )
        if (
            t.kind != "struct"
            or len(t.fields) != 2
            or len(members) != 2
            or members[0][1] != members[1][1]
            or members[0][1] not in (8, 16, 32, 64)
        ):
            raise self.err(
                node,
                f"Register<{t.show()}, ...>: a paired register's struct has two bit<W> members "
                "of one width W (8, 16, 32 or 64)",
            )
        return members

    def _register_init(self, a: Any, x: TnaExtern, scope: Scope) -> int:
        """Register(size, initial_value): a constant, or {lo, hi} for a pair (packed as a cell)."""
        if not x.members:
            return self.b.const_int(a, scope) & mask(x.width)
        items = list(a.children[0].children) if a.data == "list_expr" and a.children[0] else []
        if len(items) != len(x.members):
            raise self.err(a, f"the initial value of {x.name} is a list of {len(x.members)}")
        cell = 0
        for item, (_, w) in zip(items, x.members, strict=True):
            cell = cell << w | (self.b.const_int(item, scope) & mask(w))
        return cell

    def i_DirectRegister(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (0, 1), "DirectRegister<T>([initial_value])")
        t = self._bit_arg(x, 0, node, "T (this target's registers hold bit<>)")
        x.kind, x.width = "direct_register", t.width
        if args:
            x.init = self.b.const_int(args[0], scope) & mask(t.width)
        self.tr.ns[x.pyname] = {}  # table entry handle -> value

    def i_RegisterAction(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        direct = x.tna_type == "DirectRegisterAction"
        reg_type = "DirectRegister" if direct else "Register"
        self._nargs(node, args, (1,), f"{x.tna_type}(reg)")
        if len(x.type_args) != (2 if direct else 3):
            raise self.err(node, f"{x.tna_type} takes {2 if direct else 3} type arguments")
        a = args[0]
        s = scope.lookup(self.b.ck.name_of(a.children[0])) if a.data == "var" else None
        reg = s.value if s is not None and s.kind == "extern" else None
        if not (isinstance(reg, TnaExtern) and reg.tna_type == reg_type):
            raise self.err(a, f"a {x.tna_type} is declared over a {reg_type} instance")
        if reg.ctl not in ("", x.ctl):
            raise self.err(
                node,
                f"{x.tna_type} {x.name} is declared outside its register's control "
                f"({reg.name} belongs to {reg.ctl}): a stateful ALU sits beside its register",
            )
        for i, what in ((0, "value"), (1, "index"))[: 1 if direct else 2]:
            if x.type_args[i] != reg.type_args[i]:
                raise self.err(
                    node,
                    f"{x.tna_type} {what} type {x.type_args[i].show()} differs from register "
                    f"{reg.name}'s {reg.type_args[i].show()}",
                )
        x.kind, x.register = "register_action", reg
        init = node.children[4]
        methods = [] if init is None else [m for m in init.children if isinstance(m, Tree)]
        applies = [m for m in methods if str(m.children[2]) == "apply"]
        for m in methods:
            if str(m.children[2]) != "apply":
                raise self.err(m, f"RegisterAction has no abstract method {m.children[2]}")
        if len(applies) != 1:
            raise self.err(node, "a RegisterAction implements apply(inout T value[, out U rv])")
        body = applies[0].children[4]
        self.count_comparisons(x.name, applies[0])
        for sub in body.iter_subtrees():
            if sub.data in ("call", "generic_call", "table_decl") and not _is_predicate(sub):
                raise self.err(
                    sub,
                    "a RegisterAction's apply only computes on the value (the stateful ALU "
                    "makes no calls but this.predicate(cmplo, cmphi))",
                )
        x.apply = (applies[0], scope)

    def i_CRCPolynomial(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (6,), "CRCPolynomial<T>(coeff, reversed, msb, extended, init, xor)")
        t = self._bit_arg(x, 0, node, "T")
        vals = []
        for a in args:
            e = self.tr.expr(a, scope)
            if not e.is_const:
                raise self.err(a, "CRCPolynomial parameters must be constants")
            vals.append(e.const)
        coeff, reversed_, msb, extended, init, xor = vals
        if extended:
            raise self.err(node, "CRCPolynomial: extended polynomials are not supported")
        width = t.width - 1 if msb else t.width
        x.kind = "crc_polynomial"
        x.params = (width, int(coeff) & mask(width), int(init), int(xor), bool(reversed_))

    def i_Hash(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (1, 2), "Hash<W>(algo[, poly])")
        w = self._bit_arg(x, 0, node, "W")
        algo = self._enum_arg(args[0], scope, "HashAlgorithm_t")
        x.kind, x.width = "hash", w.width
        fn: Any
        if algo == "CUSTOM" or len(args) == 2:
            if len(args) != 2:
                raise self.err(node, "Hash(HashAlgorithm_t.CUSTOM, poly) needs a CRCPolynomial")
            poly = self._polynomial(args[1], scope)
            width, coeff, init, xor, refl = poly.params
            fn = hashes.make_crc(width, coeff, init, xor, refl, refl)
        elif algo in PREDEFINED_CRC:
            width, coeff, init, xor, refl = PREDEFINED_CRC[algo]
            fn = (
                hashes.crc32
                if algo == "CRC32"
                else hashes.make_crc(width, coeff, init, xor, refl, refl)
            )
        elif algo == "IDENTITY":
            fn = identity_hash
        elif algo in ("XOR8", "XOR16", "XOR32"):
            fn = xor_hash(int(algo[3:]))
        elif algo == "RANDOM":
            fn = hashes.random_hash
        else:
            raise self.err(args[0], f"hash algorithm {algo} is not supported")
        x.fn = f"_TH_{x.pyname}"
        self.tr.ns[x.fn] = fn

    def _polynomial(self, a: Any, scope: Scope) -> TnaExtern:
        if isinstance(a, Tree) and a.data == "var":
            s = scope.lookup(self.b.ck.name_of(a.children[0]))
            if s is not None and s.kind == "extern" and s.value.tna_type == "CRCPolynomial":
                return s.value  # type: ignore[no-any-return]
        if (
            isinstance(a, Tree)
            and a.data == "generic_ctor_call"
            and str(a.children[0]) == "CRCPolynomial"
        ):
            t = self.tr.resolve_type(Tree("specialized_type", a.children[:4]), scope)
            assert isinstance(t, ExternT)
            x = TnaExtern("", "", tna_type="CRCPolynomial", type_args=list(t.type_args))
            cargs = [] if a.children[-1] is None else list(a.children[-1].children)
            self.i_CRCPolynomial(x, a, cargs, scope)
            return x
        raise self.err(a, "expected a CRCPolynomial")

    def i_Checksum(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (0,), "Checksum()")
        x.kind = "checksum"
        self.tr.ns[x.pyname] = [0]
        self.checksums.append(x.pyname)

    def i_Random(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (0,), "Random<W>()")
        x.kind, x.width = "random", self._bit_arg(x, 0, node, "W").width

    def i_Counter(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (2,), "Counter<W, I>(size, CounterType_t)")
        self._bit_arg(x, 0, node, "W")
        x.kind = "counter"
        x.size = self.b.const_int(args[0], scope)
        x.counter_type = self._enum_arg(args[1], scope, "CounterType_t").lower()

    def i_DirectCounter(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (1,), "DirectCounter<W>(CounterType_t)")
        x.kind, x.count_on_hit = "direct_counter", False
        x.counter_type = self._enum_arg(args[0], scope, "CounterType_t").lower()

    def i_Meter(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (2, 5), "Meter<I>(size, MeterType_t[, red, yellow, green])")
        if len(args) == 5:
            raise self.err(node, "Meter: colour encodings other than TNA's are not supported")
        x.kind = "meter"
        x.size = self.b.const_int(args[0], scope)
        x.counter_type = self._enum_arg(args[1], scope, "MeterType_t").lower()

    def i_DirectMeter(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (1,), "DirectMeter(MeterType_t)")
        x.kind = "direct_meter"
        x.counter_type = self._enum_arg(args[0], scope, "MeterType_t").lower()

    def _typed_session(self, x: TnaExtern, node: Tree, args: list[Any], scope: Scope) -> None:
        self._nargs(node, args, (0, 1), f"{x.tna_type}([type])")
        x.kind = x.tna_type.lower()
        if args:
            x.size = self.b.const_int(args[0], scope)  # the mirror/resubmit/digest type

    i_Mirror = i_Resubmit = i_Digest = _typed_session
    i_DirectRegisterAction = i_RegisterAction

    # ------------------------------------------------------------------ methods
    def extern_method(
        self,
        tr: Translator,
        node: Tree,
        inst: ExternInst,
        method: str,
        args: list[Any],
        scope: Scope,
    ) -> E | None:
        x = inst
        if not isinstance(x, TnaExtern):
            raise self.err(node, f"{x.kind}.{method} is not supported by this target")
        fn = getattr(self, f"m_{x.tna_type}", None)
        if fn is None:
            raise self.err(node, f"{x.tna_type} has no data-plane methods")
        return fn(tr, node, x, method, args, scope)  # type: ignore[no-any-return]

    def extern_function(
        self,
        tr: Translator,
        node: Tree,
        name: str,
        args: list[Any],
        targs: list[Tree],
        scope: Scope,
    ) -> E | None:
        raise self.err(node, f"extern function {name} is not supported by this target")

    def _expect(
        self, node: Tree, x: TnaExtern, method: str, allowed: dict[str, tuple[int, ...]]
    ) -> None:
        if method not in allowed:
            raise self.err(node, f"{x.tna_type}.{method} is not supported by this target")

    def m_DirectRegister(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        return self.m_Register(tr, node, x, method, args, scope)

    def m_Register(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        raise self.err(
            node,
            f"{x.name}.{method}: on Tofino a register is read and written only by a RegisterAction "
            "(declare one over it and call its execute(index))",
        )

    def m_RegisterAction(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        direct = x.tna_type == "DirectRegisterAction"
        if method == "predicate":
            return self._predicate(tr, node, x, args, scope)
        if method != "execute" or len(args) != (0 if direct else 1):
            raise self.err(node, f"{x.tna_type} supports execute({'' if direct else 'index'})")
        if tr.in_parser:
            raise self.err(
                node, f"{x.tna_type}.execute in a parser: stateful ALUs are in the stages"
            )
        self.one_execute_per_statement(tr, node)
        if not direct:
            self.check_index(tr, x.name, args[0], scope)
        reg = x.register
        assert reg is not None and x.apply is not None
        vt, ut = x.type_args[0], x.type_args[-1]
        uid = next(tr.uid)
        ri, v, rv = f"_ri{uid}", f"_ra{uid}_v", f"_ra{uid}_rv"
        R, n = reg.pyname, reg.size
        # the site marker: `_ra<uid>_v = ...` is the register's one read (checked per path below)
        if direct:
            te = tr.table_entry
            if te is None or te[0].name != reg.table:
                raise self.err(
                    node, f"{x.name}.execute() belongs in an action of {reg.name}'s table"
                )
            e = te[1]
            tr.em(f"{v} = {R}.get({e}.handle, {reg.init}) if {e} is not None else {reg.init}")
            store = f"if {e} is not None: {R}[{e}.handle] = {v}"
        else:
            it_t = x.type_args[1]
            i = tr.convert(tr.expr(args[0], scope, it_t), it_t, args[0])
            tr.em(f"{ri} = {i.code}")
            if reg.members:  # a pair: the cell unpacked into the struct apply() works on
                assert isinstance(vt, StructLikeT)
                (m0, w), (m1, _) = reg.members
                tr.em(f"_ra{uid}_c = {R}[{ri}] if {ri} < {n} else 0")
                tr.em(f"{v} = {tr.py_class(vt)}()")
                tr.em(f"{v}.{m0} = _ra{uid}_c >> {w}; {v}.{m1} = _ra{uid}_c & {mask(w)}")
                store = f"if {ri} < {n}: {R}[{ri}] = {v}.{m0} << {w} | {v}.{m1}"
            else:
                tr.em(f"{v} = {R}[{ri}] if {ri} < {n} else 0")
                store = f"if {ri} < {n}: {R}[{ri}] = {v}"
        tr.em(f"{rv} = {tr.zero(ut)}")
        tree, decl_scope = x.apply
        params = [] if tree.children[3] is None else list(tree.children[3].children)
        if not 1 <= len(params) <= 2:
            raise self.err(tree, "apply(inout T value[, out U rv])")
        sc = Scope(decl_scope)
        for p, code, want, want_dir in (
            (params[0], v, vt, "inout"),
            *((p, rv, ut, "out") for p in params[1:]),
        ):
            d = p.children[1]
            direction = str(d.children[0]) if d is not None else ""
            pt = tr.resolve_type(p.children[2], decl_scope)
            if direction != want_dir or pt != want:
                raise self.err(p, f"apply parameter must be {want_dir} {want.show()}")
            sc.names[self.b.ck.name_of(p.children[3])] = Sym("var", pt, code=code, lvalue=True)
        sc.names["this"] = Sym("extern", value=x)  # this.predicate(...)
        self.check_stateful_inputs(x, tree.children[4], sc)
        self.applying.append(x)
        try:
            tr.action_body(tree.children[4], sc)
        finally:
            self.applying.pop()
        tr.em(store)
        self.sites[uid] = (node, reg)
        return E(rv, ut)

    def _predicate(
        self, tr: Translator, node: Tree, x: TnaExtern, args: list[Any], scope: Scope
    ) -> E:
        """``this.predicate(cmplo, cmphi)`` in a RegisterAction's apply: the stateful ALU's 4-bit
        predicate output, one-hot over the two conditions: 1 << (cmplo + 2 * cmphi), i.e. 1 when
        neither holds, 2 cmplo alone, 4 cmphi alone, 8 both (an omitted condition is false)."""
        if not self.applying or self.applying[-1] is not x:
            raise self.err(node, f"{x.name}.predicate() is called inside {x.name}'s own apply")
        if len(args) > 2:
            raise self.err(node, "predicate(cmplo, cmphi) takes at most two conditions")
        bits = []
        for a, bit in zip(args, (1, 2), strict=False):
            c = tr.expr(a, scope, BoolT())
            if not isinstance(c.type, BoolT):
                raise self.err(a, "predicate: a condition is bool")
            bits.append(f"({bit} if {c.code} else 0)")
        ut = x.type_args[-1]
        if not isinstance(ut, BitT) or ut.width < 4:
            raise self.err(
                node, "predicate() returns the 4-bit predicate: U must be bit<4> or wider"
            )
        return E(f"(1 << ({' | '.join(bits) or '0'}))", ut)

    def m_Hash(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        if method != "get" or len(args) != 1:
            raise self.err(node, "Hash supports get(data)")
        data, _ = tr.data_list(args[0], scope)
        return E(f"({x.fn}({data}) & {mask(x.width)})", BitT(x.width))

    def m_Random(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        if method != "get" or args:
            raise self.err(node, "Random supports get()")
        return E(f"_randint(0, {mask(x.width)})", BitT(x.width))

    def _bytes(self, tr: Translator, node: Any, scope: Scope, call: Tree | None = None) -> str:
        """The bytes of a Checksum's data (``call``: the method call, for the target rules)."""
        items: list[E] = []
        data, _ = tr.data_list(node, scope, items)
        if call is not None:
            self.checksum_items(tr, call, items)
        return data

    def m_Checksum(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        P = x.pyname
        if method in ("add", "subtract") and len(args) == 1:
            fn = "_ck_add" if method == "add" else "_ck_sub"
            tr.em(f"{P}[0] = {fn}({P}[0], {self._bytes(tr, args[0], scope, node)})")
            return None
        if method == "verify" and not args:
            return E(f"({P}[0] == 0xFFFF)", BoolT())
        if method == "get" and not args:
            return E(f"{P}[0]", BitT(16))
        if method == "update" and len(args) in (1, 2):
            zao = "False"
            if len(args) == 2:
                z = tr.expr(args[1], scope)
                if not isinstance(z.type, BoolT):
                    raise self.err(args[1], "update: zeros_as_ones must be bool")
                zao = z.code
            return E(f"_ck_update({self._bytes(tr, args[0], scope, node)}, {zao})", BitT(16))
        raise self.err(node, f"Checksum.{method} with {len(args)} arguments is not supported")

    def m_Counter(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        if method != "count" or len(args) not in (1, 2):
            raise self.err(node, "Counter supports count(index[, adjust_byte_count])")
        it_t = x.type_args[1] if len(x.type_args) > 1 else BitT(32)
        i = tr.convert(tr.expr(args[0], scope, it_t), it_t, args[0])
        adj = self._adjust(tr, args[1:], scope)
        P, t = x.pyname, tr.tmp("i")
        tr.em(f"if ({t} := {i.code}) < {x.size}: {P}_p[{t}] += 1; {P}_b[{t}] += _G.plen{adj}")
        return None

    def _adjust(self, tr: Translator, args: list[Any], scope: Scope) -> str:
        if not args:
            return ""
        a = tr.convert(tr.expr(args[0], scope, BitT(32)), BitT(32), args[0])
        return f" - {a.code}"

    def _entry(self, tr: Translator, node: Tree, x: TnaExtern, what: str) -> str:
        te = tr.table_entry
        own = None if te is None else (te[0].counters if what == "counters" else te[0].meter)
        if te is None or own is not x:
            raise self.err(
                node, f"{x.tna_type} {x.name} is used from an action of the table that owns it"
            )
        return te[1]

    def m_DirectCounter(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        if method != "count" or len(args) > 1:
            raise self.err(node, "DirectCounter supports count([adjust_byte_count])")
        e = self._entry(tr, node, x, "counters")
        adj = self._adjust(tr, args, scope)
        tr.em(f"if {e} is not None: {e}.packets += 1; {e}.bytes += _G.plen{adj}")
        return None

    def m_Meter(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        if method != "execute" or not 1 <= len(args) <= 3:
            raise self.err(node, "Meter supports execute(index[, color][, adjust_byte_count])")
        it_t = x.type_args[0] if x.type_args else BitT(32)
        i = tr.convert(tr.expr(args[0], scope, it_t), it_t, args[0])
        return E(f"_meter_colour[{x.pyname}.execute({i.code}, _G.plen)]", BitT(8))

    def m_DirectMeter(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        if method != "execute" or len(args) > 2:
            raise self.err(node, "DirectMeter supports execute([color][, adjust_byte_count])")
        self._entry(tr, node, x, "meter")
        return E("_meter_colour[_G.dmeter]", BitT(8))

    def _header_bytes(self, tr: Translator, call: Tree, node: Any, scope: Scope) -> str:
        """Bytes of the header argument of emit / emit<T> (a header, or a list as a T)."""
        targs = tr.call_parts(call)[2]
        want = tr.resolve_type(targs[0], scope) if targs else None
        h = tr.expr(node, scope, want)
        if want is not None:
            h = tr.convert(h, want, node)
        t = h.type
        if not (isinstance(t, StructLikeT) and t.is_header) or t.varbit_field() is not None:
            raise self.err(node, "expected a fixed-size header")
        v = tr.tmp("mh")
        tr.em(f"{v} = {h.code}")
        return f"({tr.header_pack(t, v)} if {v}._v else b'')"

    def m_Mirror(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        if method != "emit" or len(args) not in (1, 2):
            raise self.err(node, "Mirror supports emit(session_id[, hdr])")
        sess = tr.convert(tr.expr(args[0], scope, BitT(10)), BitT(10), args[0])
        hdr = self._header_bytes(tr, node, args[1], scope) if len(args) == 2 else "b''"
        tr.em(f"_G.clone = ({sess.code}, {hdr})")
        return None

    def m_Resubmit(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        if method != "emit" or len(args) > 1:
            raise self.err(node, "Resubmit supports emit([hdr])")
        hdr = self._header_bytes(tr, node, args[0], scope) if args else "b''"
        tr.em(f"_G.resubmit = {hdr}")
        return None

    def m_Digest(
        self, tr: Translator, node: Tree, x: TnaExtern, method: str, args: list[Any], scope: Scope
    ) -> E | None:
        if method != "pack" or len(args) != 1:
            raise self.err(node, "Digest supports pack(data)")
        data = tr.expr(args[0], scope)
        if x.type_args:
            data = tr.convert(data, x.type_args[0], args[0])
        tr.emit_digest(data, args[0], x.name)
        return None

    m_DirectRegisterAction = m_RegisterAction

    # ------------------------------------------------------------------ rules
    def check_paths(self, func_src: str, role: str, gress_of: dict[str, str]) -> None:
        """At most one RegisterAction execute per register on every path of one pass, and no
        register shared by ingress and egress. Checked on the generated code, whose if/else
        structure holds every branch of the P4 source (if, switch, table actions, ?:, &&, ||)."""
        fdef = ast.parse(func_src).body[0]
        assert isinstance(fdef, ast.FunctionDef)
        gress = "ingress" if role.startswith("ingress") else "egress"

        def site(stmt: ast.stmt) -> int | None:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                tg = stmt.targets[0]
                if isinstance(tg, ast.Name):
                    m = re.fullmatch(r"_ra(\d+)_v", tg.id)
                    if m and int(m.group(1)) in self.sites:
                        return int(m.group(1))
            return None

        def walk(stmts: list[ast.stmt], seen: dict[str, int]) -> dict[str, int]:
            for st in stmts:
                uid = site(st)
                if uid is not None and seen.get(self.sites[uid][1].name) == uid:
                    continue  # the apply body assigning the value read at this site
                if uid is not None:
                    node, reg = self.sites[uid]
                    if role not in ("ingress", "egress"):
                        raise self.err(
                            node,
                            f"RegisterAction.execute in the {role}: stateful ALUs are in the match-action stages",
                        )
                    other = gress_of.setdefault(reg.name, gress)
                    if other != gress:
                        raise self.err(
                            node,
                            f"register {reg.name} is used by ingress and egress: a register belongs to one stage of one pipeline",
                        )
                    if reg.name in seen:
                        f, line, col = self.b.ck.where(self.sites[seen[reg.name]][0])
                        raise self.err(
                            node,
                            f"register {reg.name} is accessed twice on one path of the {gress} "
                            f"pass (first at {f}:{line}:{col}): its stateful ALU runs once per "
                            "packet; merge the two RegisterActions or move one into another branch",
                        )
                    seen = {**seen, reg.name: uid}
                elif isinstance(st, ast.If) and isinstance(st.test, ast.Constant):
                    # a condition known at load time (e.g. a constructor parameter): one branch
                    seen = walk(st.body if st.test.value else st.orelse, seen)
                elif isinstance(st, ast.If):
                    a = walk(st.body, seen)
                    b = walk(st.orelse, seen)
                    seen = {**a, **b}
                elif isinstance(st, ast.Try):
                    seen = walk(st.body, seen)
                    for h in st.handlers:
                        seen = {**seen, **walk(h.body, seen)}
                    seen = walk(st.finalbody, seen)
                elif isinstance(st, (ast.While, ast.For, ast.With)):
                    seen = walk(st.body, seen)
            return seen

        walk(fdef.body, {})


def _is_predicate(call: Tree) -> bool:
    """``this.predicate(...)``: the stateful ALU's predicate output, allowed in apply()."""
    f = call.children[0]
    return (
        call.data == "call"
        and isinstance(f, Tree)
        and f.data == "member"
        and isinstance(f.children[0], Tree)
        and f.children[0].data == "var"
        and str(f.children[0].children[0]) == "this"
        and str(f.children[1].children[0] if isinstance(f.children[1], Tree) else f.children[1])
        == "predicate"
    )


def _param_key(side: str, t: P4Type, n_user: int) -> str:
    if isinstance(t, StructLikeT) and t.name in INTRINSIC:
        return INTRINSIC[t.name]
    return f"{side}_{('hdr', 'meta')[n_user]}" if n_user < 2 else ""


def build_tna(b: Builder, ext: Tna) -> TnaBlocks:
    """Instantiate ``Switch(pipe) main`` with ``pipe = Pipeline(ingress parser, ingress, ingress
    deparser, egress parser, egress, egress deparser)`` into the builder's Program."""
    ck, tr = b.ck, b.tr
    main = ck.main
    assert main is not None
    prog = b.prog
    margs = [] if main.children[2] is None else list(main.children[2].children)
    if len(margs) != 1:
        raise b.err(main, "Switch: the software switch runs one pipe (pipe0 only)")
    pipe = margs[0]
    if isinstance(pipe, Tree) and pipe.data == "var":
        s = ck.globals.lookup(ck.name_of(pipe.children[0]))
        if s is None or s.kind != "global_inst":
            raise b.err(pipe, "Switch takes a Pipeline instance")
        pipe = s.value
        pname, pargs = str(pipe.children[1].children[0]), pipe.children[2]
    elif isinstance(pipe, Tree) and pipe.data == "ctor_call":
        pname, pargs = str(pipe.children[0]), pipe.children[1]
    else:
        raise b.err(pipe, "Switch takes a Pipeline instance")
    if pname != "Pipeline":
        raise b.err(pipe, f"Switch takes a Pipeline, not {pname}")
    blocks = [] if pargs is None else list(pargs.children)
    if len(blocks) != 6:
        raise b.err(pipe, f"Pipeline takes 6 blocks, {len(blocks)} given")
    decls = [
        b.package_arg(blk, "Pipeline", (kind,))
        for blk, kind in zip(blocks, ROLE_KINDS, strict=True)
    ]
    b.instantiate_globals()
    names: dict[str, str] = {}
    args: dict[str, list[str]] = {}
    types: dict[str, StructLikeT] = {}
    for role, (decl, cargs) in zip(ROLES, decls, strict=True):
        side = "ig" if role.startswith("ingress") else "eg"
        ext.role = role
        if role.endswith("parser") and not role.endswith("deparser"):
            names[role] = b.build_parser(decl, cargs)
            if role == "egress_parser":
                f = names[role]
                ext.check_egress_parser(decl, b.parser_depth[f], b.parser_states[f])
            params = [
                (ck.name_of(p.children[3]), tr.resolve_type(p.children[2], ck.globals), p)
                for p in decl.tree.children[2].children
            ]
        else:
            inst = b.build_control(decl, decl.name, cargs, top=True)
            names[role] = inst["func"]
            ptree = decl.tree.children[2]
            params = [
                (n, t, p)
                for (n, _d, t), p in zip(
                    inst["params"], ptree.children if ptree else [], strict=True
                )
            ]
        prog.blocks[role] = decl.name
        keys: list[str] = []
        want = PACKET_PARAM[role]
        if want:
            first = params[0][1] if params else None
            if not (isinstance(first, ExternT) and first.name == want):
                raise b.err(decl.tree, f"the TNA {role.replace('_', ' ')} takes {want} first")
            params = params[1:]
        n_user = 0
        for pname_, t, p in params:
            key = _param_key(side, t, n_user)
            if not key or not key.startswith(side):
                raise b.err(
                    p,
                    f"{pname_}: {t.show()} is not a parameter of the TNA {role.replace('_', ' ')}",
                )
            if not isinstance(t, StructLikeT):
                raise b.err(p, f"{pname_}: headers and metadata must be structs, got {t.show()}")
            if key.endswith(("_hdr", "_meta")):
                n_user += 1
                if t.is_header:
                    raise b.err(
                        p, f"{pname_}: headers and metadata must be structs, got {t.show()}"
                    )
            if key in types and types[key] is not t:
                raise b.err(
                    p,
                    f"{pname_}: {t.show()} differs from {types[key].show()} of the other "
                    f"{'ingress' if side == 'ig' else 'egress'} blocks",
                )
            types[key] = t
            keys.append(key)
        if n_user != 2:
            raise b.err(
                decl.tree, f"the TNA {role.replace('_', ' ')} takes the headers and the metadata"
            )
        args[role] = keys
    for k in INTRINSIC.values():  # objects of intrinsic metadata a program does not name
        if k not in types:
            t = ck.globals.lookup_type(next(n for n, v in INTRINSIC.items() if v == k))
            assert isinstance(t, StructLikeT)
            types[k] = t
    cls = {k: tr.py_class(t) for k, t in types.items()}
    # the Tofino rules, on the generated code of each block
    gress_of: dict[str, str] = {}
    for role in ROLES:
        src = next(f for f in b.funcs if f.startswith(f"def {names[role]}("))
        ext.check_paths(src, role, gress_of)
    tr.ns.update(
        {
            "_ck_add": checksum_add,
            "_ck_sub": checksum_subtract,
            "_ck_update": checksum_update,
            "_meter_colour": METER_COLOUR,
        }
    )
    ns = b.exec_module()
    for x in prog.externs.values():  # Register(size, initial_value)
        if isinstance(x, TnaExtern) and x.kind == "register":
            ns[x.pyname][:] = [x.init] * x.size
    reads = {
        g: ".parser_err" in next(f for f in b.funcs if f.startswith(f"def {names[g]}("))
        for g in ("ingress", "egress")
    }
    return TnaBlocks(
        funcs={r: ns[names[r]] for r in ROLES},
        args=args,
        types=types,
        classes={k: ns[c] for k, c in cls.items()},
        checksums=[ns[p] for p in ext.checksums],
        reads_parser_err=reads,
    )


__all__ = ["INTRINSIC", "ROLES", "Tna", "TnaExtern", "ones_sum"]
