"""Builds a program of any architecture into the engine's one representation (``Program``):
the builder translates parsers, controls and deparsers to Python (once) and keeps what the control
plane needs (tables, actions, registers, counters) with their control-plane names.

An architecture plugs in through :class:`Architecture` (softswitch/arch/: v1model, TNA): it checks
main's package instance and hands its blocks to the builder, instantiates and translates its
externs, and runs packets through the translated blocks over the switch's device state
(:class:`Device`)."""

from __future__ import annotations

import random
from abc import abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from lark import Token, Tree

from softswitch.engine import hashes
from softswitch.engine.codegen import (
    ActionInfo,
    E,
    Emitter,
    Exit,
    ExternCalls,
    ExternInst,
    ParserError,
    ParserState,
    TableInfo,
    Translator,
    _Ret,
    mask,
)
from softswitch.engine.objects import (
    AssertFailed,
    DirectMeter,
    MeterArray,
    PacketContext,
    Stack,
    ValueSet,
)
from softswitch.engine.tables import KeyField, Table, TableAction
from softswitch.errors import P4Error
from softswitch.frontend.checker import Checker, Decl, Scope, Sym, trees
from softswitch.frontend.types import (
    BitT,
    BoolT,
    EnumT,
    ErrorT,
    ExternT,
    P4Type,
    StackT,
    StructLikeT,
    bit_width_of,
)

DROP_PORT = 511  # the device's ports are 0..510; v1model's egress_spec 511 drops


class Device(Protocol):
    """The device state a packet path shares with the control plane (BMv2's bm_sim beside
    simple_switch): ``softswitch.switch.Switch``."""

    program: Program
    mc_groups: dict[int, list[tuple[int, int]]]  # the PRE: group -> (port, rid) per copy

    def session_ports(self, session: int) -> list[tuple[int, int]]:
        """(port, rid) of each copy a mirroring (clone) session makes; none for no session."""
        ...

    def deliver_digests(self, items: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Queue the digests a packet sent: (digest name, field values)."""
        ...


class PacketPath(Protocol):
    """An architecture's packet path over one program (one packet at a time, under the switch's
    lock)."""

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """One packet in; (egress port, bytes) of every packet that leaves, in order."""
        ...

    def set_port_metadata(self, port: int, data: bytes) -> None:
        """The port metadata the parser reads (TNA); refused where the architecture has none."""
        ...


@dataclass
class ExternDecl:
    """An instantiation of an extern type, for the architecture to instantiate."""

    node: Tree
    type: ExternT
    name: str  # the local name
    args: list[Any]  # constructor arguments
    full: str  # the control-plane name
    annotations: dict[str, list[Any]]
    scope: Scope
    control: str  # the fully-qualified name of the control that declares it ("" at top level)


class Architecture(ExternCalls):
    """One P4 architecture: the package type of ``main`` it runs, its externs (instances,
    methods, functions) and its packet path. One instance per loaded program (it keeps what it
    translated); the builder calls it while it builds, the switch asks it for the packet path."""

    name: ClassVar[str]  # P4Info's pkg_info.arch: "v1model", "tna"
    package: ClassVar[str]  # main's package type: "V1Switch", "Switch"

    @abstractmethod
    def build(self, b: Builder) -> None:
        """Check main's package instance, translate its blocks with ``b`` and compile them
        (``b.exec_module()``); fill ``b.prog.blocks`` and ``b.prog.stages``."""

    @abstractmethod
    def extern_instance(self, b: Builder, d: ExternDecl) -> None:
        """Instantiate the extern ``d``: record it in ``b.prog.externs`` (``b.add_extern``) when
        the control plane sees it, and bind its local name in ``d.scope``."""

    @abstractmethod
    def packet_path(self, device: Device) -> PacketPath:
        """The packet path of the built program over ``device``'s state."""


@dataclass
class Program:
    """The checked and translated program, whatever its architecture and whatever it was loaded
    from (P4 source, BMv2 JSON)."""

    architecture: Architecture  # the one of main's package: its externs and its packet path
    tables: dict[str, TableInfo] = field(default_factory=dict)
    actions: dict[str, ActionInfo] = field(default_factory=dict)
    externs: dict[str, ExternInst] = field(default_factory=dict)
    headers: dict[str, StructLikeT] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    blocks: dict[str, str] = field(default_factory=dict)  # role -> P4 type name
    # the generated function of each block, by role in pipeline order (profiling; the packet
    # paths keep their own references)
    stages: dict[str, Callable[..., Any]] = field(default_factory=dict)
    source: str = ""
    ns: dict[str, Any] = field(default_factory=dict)
    controller_headers: list[tuple[str, StructLikeT]] = field(default_factory=list)
    serializable_enums: dict[str, EnumT] = field(default_factory=dict)
    value_sets: dict[str, ValueSet] = field(default_factory=dict)
    digests: dict[str, StructLikeT] = field(default_factory=dict)
    ctx: PacketContext = field(default_factory=PacketContext)

    @property
    def arch(self) -> str:
        """The architecture's name (P4Info's ``pkg_info.arch``): "v1model" or "tna"."""
        return self.architecture.name


def expr_text(node: Any) -> str:
    """Source-like text of a key expression (P4Info match-field names, as p4c prints them)."""
    if isinstance(node, Token):
        return str(node)
    d = node.data
    if d in ("var", "field_name", "name", "kw_name"):
        return expr_text(node.children[0])
    if d == "member":
        return f"{expr_text(node.children[0])}.{expr_text(node.children[1])}"
    if d == "index":
        return f"{expr_text(node.children[0])}[{expr_text(node.children[1])}]"
    if d == "slice":
        return f"{expr_text(node.children[0])}[{expr_text(node.children[1])}:{expr_text(node.children[2])}]"
    if d == "int_lit":
        return str(node.children[0])
    if d == "call":
        return f"{expr_text(node.children[0])}()"
    return "".join(expr_text(c) for c in node.children if c is not None)


class Builder:
    """Builds the checked program ``ck`` with the architecture of its main package (one of
    ``architectures``)."""

    def __init__(self, ck: Checker, architectures: Iterable[type[Architecture]]) -> None:
        self.ck = ck
        by_package = {a.package: a for a in architectures}
        main = ck.main
        if main is None:
            raise P4Error(
                f"no {' or '.join(f'{p}(...)' for p in by_package)} main; package "
                "instantiation found",
                ck.pre.origin(1)[0],
                1,
                1,
            )
        self.arch = by_package[str(main.children[1].children[0])]()
        self.tr = Translator(ck, self.arch)
        self.prog = Program(self.arch, errors=dict(ck.errors))
        self.funcs: list[str] = []
        self.tr.instantiate_block = self._implicit_instance
        self.inline_states: dict[str, Tree] | None = None
        # the parser being built: what each of its states did (ParserState), by state name
        self.state_facts: dict[str, ParserState] = {}
        # each top-level parser's function -> its longest path (bits, states) and its states'
        # facts, for an architecture's rules
        self.parser_depth: dict[str, tuple[int, list[str]]] = {}
        self.parser_states: dict[str, dict[str, ParserState]] = {}
        self.parser_scope = ck.globals
        self.accept_code = "return _off"

    def err(self, node: Any, msg: str) -> P4Error:
        return self.ck.error(node, msg)

    def _implicit_instance(self, decl: Decl, fq: str, scope: Scope) -> dict[str, Any]:
        if decl.kind == "parser":
            return self.build_parser(decl, [], fq=fq, caller=scope)  # type: ignore[no-any-return]
        return self.build_control(decl, fq, [], top=False, caller=scope)

    # ------------------------------------------------------------------ package
    def build(self) -> Program:
        """Main's package instance, its blocks and externs translated and compiled."""
        self.arch.build(self)
        return self.finish()

    def package_arg(self, b: Any, package: str, kinds: tuple[str, ...]) -> tuple[Decl, list[Any]]:
        """A package argument given as a constructor call or as a named top-level instance: the
        declaration it instantiates and the constructor arguments."""
        if isinstance(b, Tree) and b.data == "ctor_call":
            name = str(b.children[0])
            cargs = [] if b.children[1] is None else list(b.children[1].children)
        elif isinstance(b, Tree) and b.data == "var":
            inst = self.ck.globals.lookup(self.ck.name_of(b.children[0]))
            if inst is None or inst.kind != "global_inst":
                raise self.err(b, f"{package} arguments must be {' or '.join(kinds)} instances")
            it = inst.value
            name = str(it.children[1].children[0])
            cargs = [] if it.children[2] is None else list(it.children[2].children)
        else:
            raise self.err(b, f"{package} arguments must be {' or '.join(kinds)} instances")
        decl = self.ck.decls.get(name)
        if decl is None or decl.kind not in kinds:
            raise self.err(b, f"{name} is not a {' or '.join(kinds)}")
        return decl, cargs

    def instantiate_globals(self) -> None:
        """Extern instances declared at the top level (e.g. a register shared by two controls)."""
        for gname, sym in list(self.ck.globals.names.items()):
            if sym.kind == "global_inst":
                t = self.tr.resolve_type(sym.value.children[1], self.ck.globals)
                if isinstance(t, ExternT):
                    del self.ck.globals.names[gname]
                    self.instantiate(sym.value, self.ck.globals, "")

    def finish(self) -> Program:
        """What every architecture keeps after translation: digests, enums, headers."""
        self.prog.digests = dict(self.tr.digest_types)
        for t in self.ck.globals.types.values():
            if isinstance(t, EnumT) and t.underlying is not None:
                self.prog.serializable_enums[t.name] = t
            if isinstance(t, StructLikeT) and t.is_header:
                self.prog.headers[t.name] = t
                if "controller_header" in t.annotations:
                    self.prog.controller_headers.append(
                        (str(t.annotations["controller_header"][0]), t)
                    )
        return self.prog

    def exec_module(self) -> dict[str, Any]:
        """Compile the generated source with its run-time objects (tables, extern state)."""
        tr = self.tr
        src = "\n\n".join(tr.class_src) + "\n\n" + "\n\n".join(self.funcs) + "\n"
        self.prog.source = src
        ns: dict[str, Any] = self.prog.ns
        ns.update(
            {
                "_Stack": Stack,
                "_PErr": ParserError,
                "_Exit": Exit,
                "_Ret": _Ret,
                "_Assert": AssertFailed,
                "_pack": hashes.pack_fields,
                "_pack_v": hashes.pack_fields_valid,
                "_randint": random.randint,
                "_G": self.prog.ctx,
            }
        )
        ns.update(tr.ns)
        for n, f in hashes.ALGORITHMS.items():
            ns[f"_H_{n}"] = f
        for t in self.prog.tables.values():
            ns[t.pyname] = t.runtime
            ns[t.pyname + "_exact"] = t.runtime.exact
        for x in self.prog.externs.values():
            if x.kind == "register":
                ns[x.pyname] = [0] * x.size
            elif x.kind == "counter":
                ns[x.pyname + "_p"] = [0] * x.size
                ns[x.pyname + "_b"] = [0] * x.size
            elif x.kind == "meter":
                ns[x.pyname] = MeterArray(x.name, x.size, x.counter_type == "bytes")
            elif x.kind == "direct_meter":
                ns[x.pyname] = DirectMeter(x.name, 0, x.counter_type == "bytes")
        code = compile(src, "<softswitch-generated>", "exec")
        exec(code, ns)
        self.prog.actions = dict(tr.actions)
        return ns

    # ------------------------------------------------------------------ params
    def bind_ctor(
        self, tree: Tree, ctor_node: Tree | None, cargs: list[Any], scope: Scope, caller: Scope
    ) -> None:
        cparams = (
            []
            if ctor_node is None or ctor_node.children[0] is None
            else list(ctor_node.children[0].children)
        )
        if len(cparams) != len(cargs):
            raise self.err(tree, f"constructor takes {len(cparams)} arguments, {len(cargs)} given")
        for p, a in zip(cparams, cargs, strict=True):
            t = self.tr.resolve_type(p.children[2], scope)
            e = self.tr.convert(self.tr.expr(a, caller, t), t, a)
            if not e.is_const:
                raise self.err(a, "constructor arguments must be compile-time constants")
            scope.names[self.ck.name_of(p.children[3])] = Sym("const", t, value=e.const)

    def bind_params(
        self, params_node: Tree | None, scope: Scope
    ) -> tuple[list[str], list[tuple[str, str, P4Type]]]:
        py: list[str] = []
        info: list[tuple[str, str, P4Type]] = []
        if params_node is None:
            return py, info
        for p in params_node.children:
            d = p.children[1]
            direction = str(d.children[0]) if d is not None else ""
            t = self.tr.resolve_type(p.children[2], scope)
            name = self.ck.name_of(p.children[3])
            if isinstance(t, ExternT) and t.name == "packet_in":
                scope.names[name] = Sym("packet_in")
                py.append("_pkt")
            elif isinstance(t, ExternT) and t.name == "packet_out":
                scope.names[name] = Sym("packet_out")
                py.append("_out")
            else:
                code = f"p_{name}_{next(self.tr.uid)}"
                scope.names[name] = Sym("var", t, code=code, lvalue=direction != "in")
                py.append(code)
            info.append((name, direction, t))
        return py, info

    # ------------------------------------------------------------------ controls
    def build_control(
        self, decl: Decl, fq: str, cargs: list[Any], top: bool, caller: Scope | None = None
    ) -> dict[str, Any]:
        tree = decl.tree
        ch = tree.children
        params_node, ctor_node = ch[2], ch[3]
        body = ch[-1]
        local_decls = [c for c in ch[4:-2] if isinstance(c, Tree)]
        scope = Scope(self.ck.globals)
        self.bind_ctor(tree, ctor_node, cargs, scope, caller or self.ck.globals)
        py, info = self.bind_params(params_node, scope)
        fname = f"ctl_{decl.name}_{next(self.tr.uid)}"
        saved = (self.tr.em, self.tr.fq, self.tr.in_parser)
        if top:
            self.tr.block_params = set(py)
        em = Emitter()
        self.tr.em, self.tr.fq, self.tr.in_parser = em, fq, False
        for ld in local_decls:
            self.control_local(ld, scope, fq)
        em("try:")
        with em.block():
            em("pass")
            self.tr.block(body, scope)
        em("except _Ret:")
        with em.block():
            em("pass")
        outs = [
            scope.names[n].code
            for n, d, t in info
            if d in ("out", "inout")
            and not isinstance(t, (StructLikeT, StackT))
            and scope.names[n].kind == "var"
        ]
        self.tr.em, self.tr.fq, self.tr.in_parser = saved
        if top:
            self.funcs.append(f"def {fname}({', '.join(py)}):\n" + "\n".join(em.lines))
        # sub-control instances are inlined where they are applied (no call per apply)
        return {
            "name": fq,
            "func": fname,
            "params": info,
            "py": py,
            "outs": outs,
            "lines": em.lines,
            "params_node": params_node,
        }

    def control_local(self, node: Tree, scope: Scope, fq: str) -> None:
        k = node.data
        if k == "const_decl":
            self.tr.s_const_decl(node, scope)
        elif k == "var_decl":
            self.tr.s_var_decl(node, scope)
        elif k == "action_decl":
            self.ck.bind(
                scope,
                self.ck.name_of(node.children[1]),
                Sym("action", value=(node, scope, fq)),
                node,
            )
        elif k == "instantiation":
            self.instantiate(node, scope, fq)
        elif k == "table_decl":
            self.table(node, scope, fq)
        else:
            raise self.err(node, f"unsupported declaration in a control ({k})")

    def instantiate(self, node: Tree, scope: Scope, fq: str) -> None:
        anns = self.ck.annotations(node.children[0])
        tref = node.children[1]
        t = self.tr.resolve_type(tref, scope)
        name = self.ck.name_of(node.children[3])
        args = [] if node.children[2] is None else list(node.children[2].children)
        full = self.tr.control_plane_name(fq, name, anns)
        tname = str(tref.children[0]) if tref.data in ("named_type", "specialized_type") else ""
        if tname in self.ck.decls and self.ck.decls[tname].kind == "parser":
            if not self.tr.in_parser:
                raise self.err(node, "parsers can only be instantiated inside parsers")
            inst = self.build_parser(self.ck.decls[tname], args, fq=full, caller=scope)
            self.ck.bind(scope, name, Sym("parser_inst", value=inst), node)
            return
        if tname in self.ck.decls and self.ck.decls[tname].kind == "control":
            inst = self.build_control(self.ck.decls[tname], full, args, top=False, caller=scope)
            self.ck.bind(scope, name, Sym("control_inst", value=inst), node)
            return
        if not isinstance(t, ExternT):
            raise self.err(node, f"cannot instantiate {t.show()} here")
        self.arch.extern_instance(self, ExternDecl(node, t, name, args, full, anns, scope, fq))

    def add_extern(self, node: Tree, x: ExternInst) -> None:
        """An extern instance the control plane sees, by its control-plane name."""
        if x.name in self.prog.externs:
            raise self.err(node, f"duplicate name {x.name}")
        self.prog.externs[x.name] = x

    def const_int(self, node: Any, scope: Scope) -> int:
        e = self.tr.expr(node, scope)
        if not e.is_const or not isinstance(e.const, int):
            raise self.err(node, "expected an integer constant")
        return int(e.const)

    def enum_member(self, node: Any, scope: Scope, enum: str) -> str:
        e = self.tr.expr(node, scope)
        if not (isinstance(e.type, EnumT) and e.type.name == enum):
            raise self.err(node, f"expected a {enum}")
        return next(k for k, v in e.type.members.items() if v == e.const)

    # ------------------------------------------------------------------ tables
    def table(self, node: Tree, scope: Scope, fq: str) -> None:
        anns = self.ck.annotations(node.children[0])
        local = self.ck.name_of(node.children[1])
        full = self.tr.control_plane_name(fq, local, anns)
        ti = TableInfo(full, local, node, annotations=anns, pyname=f"T_{next(self.tr.uid)}")
        ti.scope = scope
        entries_node = None
        default_node = None
        for prop in node.children[2:]:
            if prop.data == "table_key":
                for ke in trees(prop):
                    e = self.tr.expr(ke.children[0], scope)
                    kind = str(ke.children[1])
                    kanns = self.ck.annotations(ke.children[2])
                    if kind not in self.ck.match_kinds:
                        raise self.err(ke, f"unknown match kind {kind}")
                    if kind not in ("exact", "lpm", "ternary", "optional", "range"):
                        raise self.err(ke, f"match kind {kind} is not supported by this target")
                    t = e.type
                    if isinstance(t, BoolT):
                        e = E(f"int({e.code})", BitT(1))
                    elif isinstance(t, EnumT) and t.underlying is not None:
                        e = E(e.code, t.underlying)
                    elif isinstance(t, ErrorT):
                        e = E(e.code, BitT(32))
                    elif not isinstance(e.type, BitT):
                        raise self.err(ke, f"table key must be bit<>/bool/enum, got {t.show()}")
                    kname = str(kanns["name"][0]) if "name" in kanns else expr_text(ke.children[0])
                    ti.keys.append((kname, kind, e))
            elif prop.data == "table_actions":
                for ar in trees(prop):
                    aanns = self.ck.annotations(ar.children[0])
                    aname = self.ck.name_of(ar.children[1])
                    s = scope.lookup(aname)
                    if s is None or s.kind != "action":
                        raise self.err(ar, f"{aname} is not an action")
                    info = self.tr.action_info(s)
                    bound = [] if ar.children[2] is None else list(ar.children[2].children)
                    if len(bound) > len(info.params):
                        raise self.err(ar, f"action {aname} takes {len(info.params)} arguments")
                    ti.bound[info.name] = bound
                    scope_kind = (
                        "tableonly"
                        if "tableonly" in aanns
                        else "defaultonly"
                        if "defaultonly" in aanns
                        else ""
                    )
                    if any(a[0].name == info.name for a in ti.actions):
                        raise self.err(ar, f"action {aname} listed twice")
                    for pname, d, pt in info.params[len(bound) :]:
                        if d:
                            raise self.err(
                                ar,
                                f"action {aname}: parameter {pname} has a direction; table actions take directionless parameters only",
                            )
                        if bit_width_of(pt) is None:
                            raise self.err(ar, f"action {aname}: parameter {pname} must be bit<>")
                    ti.actions.append((info, scope_kind, aanns))
            elif prop.data == "table_entries":
                if prop.children[1] is None:
                    raise self.err(prop, "non-const entries are not supported by this target")
                entries_node = prop
            elif prop.data == "table_prop":
                pname = str(prop.children[2])
                val = prop.children[3]
                if pname == "default_action":
                    default_node = val
                    ti.default_const = prop.children[1] is not None
                elif pname == "size":
                    ti.size = self.const_int(val, scope)
                elif pname == "counters":
                    ti.counters = self.direct_extern(val, scope, "direct_counter", full)
                elif pname == "meters":
                    ti.meter = self.direct_extern(val, scope, "direct_meter", full)
                elif pname == "registers":  # TNA's DirectRegister, run by its actions
                    self.direct_extern(val, scope, "direct_register", full)
                elif pname == "implementation":
                    raise self.err(
                        val,
                        "table implementations (action profiles) are not supported by this target",
                    )
                elif pname in ("support_timeout", "idle_timeout_with_auto_delete"):
                    raise self.err(val, f"table property {pname} is not supported by this target")
                else:
                    raise self.err(prop, f"unknown table property {pname}")
        # default action
        if default_node is None:
            noaction = self.ck.globals.lookup("NoAction")
            idx = next((i for i, a in enumerate(ti.actions) if a[0].name == "NoAction"), None)
            if idx is None:
                assert noaction is not None
                ti.actions.append((self.tr.action_info(noaction), "defaultonly", {}))
                idx = len(ti.actions) - 1
            ti.default = (idx, [])
        else:
            idx, args = self.action_call(default_node, ti, scope)
            if ti.actions[idx][1] == "tableonly":
                raise self.err(default_node, "a @tableonly action cannot be the default action")
            ti.default = (idx, args)
        if ti.pyname and any(t.name == full for t in self.prog.tables.values()):
            raise self.err(node, f"duplicate table name {full}")
        ti.runtime = Table(
            full,
            [KeyField(n, k, e.type.width) for n, k, e in ti.keys],  # type: ignore[attr-defined]
            [
                TableAction(
                    a.name,
                    i,
                    [
                        (pn, bit_width_of(pt) or 0)
                        for pn, _d, pt in a.params[len(ti.bound.get(a.name, [])) :]
                    ],
                    sk,
                )
                for i, (a, sk, _an) in enumerate(ti.actions)
            ],
            ti.size,
            ti.default[0],
            tuple(ti.default[1]),
            ti.default_const,
            ti.counters is not None,
        )
        if entries_node is not None:
            self.const_entries(entries_node, ti, scope)
        self.prog.tables[full] = ti
        self.ck.bind(scope, local, Sym("table", value=ti), node)

    def direct_extern(self, val: Tree, scope: Scope, kind: str, table: str) -> ExternInst:
        """The direct_counter/direct_meter a table property names; it now belongs to ``table``."""
        name = self.ck.name_of(val.children[0]) if val.data == "var" else ""
        s = scope.lookup(name)
        if s is None or s.kind != "extern" or s.value.kind != kind:
            raise self.err(val, f"the table property must name a {kind}")
        s.value.table = table
        return s.value  # type: ignore[no-any-return]

    def action_call(self, node: Any, ti: TableInfo, scope: Scope) -> tuple[int, list[int]]:
        if node.data in ("call", "action_call_expr"):
            target = node.children[0]
            aname = self.ck.name_of(
                target.children[0] if isinstance(target, Tree) and target.data == "var" else target
            )
            args = [] if node.children[1] is None else list(node.children[1].children)
        elif node.data == "var":
            aname = self.ck.name_of(node.children[0])
            args = []
        else:
            raise self.err(node, "expected an action call")
        s = scope.lookup(aname)
        if s is None or s.kind != "action":
            raise self.err(node, f"{aname} is not an action")
        info = self.tr.action_info(s)
        idx = next((i for i, a in enumerate(ti.actions) if a[0].name == info.name), None)
        if idx is None:
            raise self.err(node, f"action {aname} is not in the table's action list")
        if len(args) != len(info.params):
            raise self.err(
                node, f"action {aname} takes {len(info.params)} arguments, {len(args)} given"
            )
        vals = []
        nbound = len(ti.bound.get(info.name, []))
        for (_pn, _d, pt), a in list(zip(info.params, args, strict=True))[nbound:]:
            e = self.tr.convert(self.tr.expr(a, scope, pt), pt, a)
            if not e.is_const:
                raise self.err(a, "action arguments here must be constants")
            vals.append(int(e.const) & mask(bit_width_of(pt) or 1))
        return idx, vals

    def const_entries(self, prop: Tree, ti: TableInfo, scope: Scope) -> None:
        entries = [c for c in prop.children[3:] if isinstance(c, Tree)]
        rt: Table = ti.runtime
        n = len(entries)
        for i, ent in enumerate(entries):
            eanns = self.ck.annotations(ent.children[0])
            ks = ent.children[1]
            items = (
                list(ks.children) if isinstance(ks, Tree) and ks.data == "tuple_keyset" else [ks]
            )
            if len(items) != len(ti.keys):
                raise self.err(
                    ent, f"entry has {len(items)} key values, table has {len(ti.keys)} keys"
                )
            match: dict[str, Any] = {}
            for (kname, kind, ke), item in zip(ti.keys, items, strict=True):
                w = ke.type.width  # type: ignore[attr-defined]
                full = mask(w)
                if isinstance(item, Tree) and item.data in ("dontcare_keyset", "default_keyset"):
                    if kind == "exact":
                        raise self.err(item, "exact keys need a value")
                    match[kname] = None
                    continue
                if isinstance(item, Tree) and item.data == "mask_keyset":
                    v = self.const_int(item.children[0], scope) & full
                    m = self.const_int(item.children[1], scope) & full
                    if kind == "lpm":
                        plen = bin(m).count("1")
                        match[kname] = (v & m, plen)
                    else:
                        match[kname] = (v & m, m)
                    continue
                if isinstance(item, Tree) and item.data == "range_keyset":
                    match[kname] = (
                        self.const_int(item.children[0], scope),
                        self.const_int(item.children[1], scope),
                    )
                    continue
                v = self.const_int(item, scope) & full
                if kind == "range":
                    match[kname] = (v, v)
                else:
                    match[kname] = v if kind in ("exact", "optional", "lpm") else (v, full)
            idx, args = self.action_call(ent.children[2], ti, scope)
            info = ti.actions[idx][0]
            prio = (
                int(eanns["priority"][0])
                if "priority" in eanns
                else (n - i if rt.needs_priority() else None)
            )
            params = {pn: a for (pn, _d, _t), a in zip(info.params, args, strict=True)}
            try:
                rt.add(match, info.name, params, prio, const=True)
            except Exception as exc:
                raise self.err(ent, f"bad const entry: {exc}") from None
            ti.const_entries.append((items, idx, args, prio))
        rt.const_entries = True
        ti.has_const_entries = True

    # ------------------------------------------------------------------ parsers
    def build_parser(
        self,
        decl: Decl,
        cargs: list[Any],
        fq: str = "",
        caller: Scope | None = None,
    ) -> Any:
        """The top-level parser (returns its function name) or, with ``fq``, a sub-parser instance
        (returns its instance record: a function taking and returning the packet offset)."""
        sub = bool(fq)
        tree = decl.tree
        ch = tree.children
        params_node, ctor_node = ch[2], ch[3]
        rest = [c for c in ch[4:] if isinstance(c, Tree)]
        local_decls = [c for c in rest if c.data != "parser_state"]
        states = [c for c in rest if c.data == "parser_state"]
        scope = Scope(self.ck.globals)
        self.bind_ctor(tree, ctor_node, cargs, scope, caller or self.ck.globals)
        py, info = self.bind_params(params_node, scope)
        fname = f"prs_{decl.name}_{next(self.tr.uid)}"
        saved = (self.tr.em, self.tr.fq, self.tr.in_parser, self.inline_states)
        saved_scope, saved_accept = self.parser_scope, self.accept_code
        saved_facts, self.state_facts = self.state_facts, {}
        em = Emitter()
        self.tr.em, self.tr.fq, self.tr.in_parser = em, fq or decl.name, True
        outs = [
            scope.names[n].code
            for n, d, t in info
            if d in ("out", "inout") and not isinstance(t, (StructLikeT, StackT))
        ]
        self.accept_code = (
            f"return (_off, {''.join(o + ', ' for o in outs)})" if sub else "return _off"
        )
        if not sub:
            em("_plen = len(_pkt); _off = 0")
        for ld in local_decls:
            if ld.data == "value_set_decl":
                self.value_set(ld, scope, fq or decl.name)
                continue
            self.control_local(ld, scope, fq or decl.name)
        index: dict[str, int] = {}
        for s in states:
            sname = self.ck.name_of(s.children[2])
            if sname in index or sname in ("accept", "reject"):
                raise self.err(s, f"duplicate or reserved state name {sname}")
            index[sname] = len(index)
        if "start" not in index:
            raise self.err(tree, f"parser {decl.name} has no start state")
        by_name = {self.ck.name_of(st.children[2]): st for st in states}
        dag = self.parse_graph_is_small_dag(by_name)
        if sub and dag:
            # an acyclic sub-parser is inlined where it is applied (no call per packet): its
            # states run inside a one-pass loop that `accept` leaves
            self.accept_code = "break"
        self.parser_scope = scope
        body = Emitter()
        body.indent = em.indent + 1
        self.tr.em = body
        if dag:
            # straight-line code: each state inlined where it is reached (no dispatch loop)
            self.inline_states = by_name
            self.emit_state(by_name["start"], scope, index)
        else:
            self.inline_states = None
            body(f"_st = {index['start']}")
            body("while True:")
            with body.block():
                for i, s in enumerate(states):
                    body(f"{'if' if i == 0 else 'elif'} _st == {i}:")
                    with body.block():
                        self.emit_state(s, scope, index)
        depth = self.longest_path(by_name)
        facts, self.state_facts = self.state_facts, saved_facts
        if sub and dag:
            self.tr.em, self.tr.fq, self.tr.in_parser, self.inline_states = saved
            self.parser_scope, self.accept_code = saved_scope, saved_accept
            inline = [*em.lines, "    while True:", *body.lines, "        break"]
            return {
                "name": fq,
                "inline": inline,
                "params": info,
                "py": py,
                "params_node": params_node,
                "depth_bits": depth[0],
            }
        em("try:")
        em.lines += body.lines
        em("except _PErr as _err:")
        with em.block():
            if sub:
                # the caller continues from where this sub-parser stopped
                em("if _err.off is None: _err.off = _off")
                em("raise")
            else:
                # parser errors stop the parser; the packet goes on with what was extracted
                em("if _err.off is not None: _off = _err.off")
                em("_G.sm.parser_error = _err.code")
        if not sub:
            em("return _off")
        args = ", ".join(["_pkt", "_off", "_plen"] if sub else [])
        params = (
            ", ".join(x for x in [args, *[q for q in py if q != "_pkt"]] if x)
            if sub
            else ", ".join(py)
        )
        self.funcs.append(f"def {fname}({params}):\n" + "\n".join(em.lines))
        self.tr.em, self.tr.fq, self.tr.in_parser, self.inline_states = saved
        self.parser_scope, self.accept_code = saved_scope, saved_accept
        if not sub:
            self.parser_depth[fname], self.parser_states[fname] = depth, facts
            return fname
        return {
            "name": fq,
            "func": fname,
            "params": info,
            "py": py,
            "outs": outs,
            "params_node": params_node,
            "depth_bits": depth[0],
        }

    def emit_state(self, st: Tree, scope: Scope, index: dict[str, int]) -> None:
        sc = Scope(scope)
        self.tr.em("pass")
        name = self.ck.name_of(st.children[2])
        saved, self.tr.parser_state = self.tr.parser_state, ParserState(name, st)
        try:
            for stmt in st.children[3:-1]:
                self.tr.stmt(stmt, sc)
            self.prog.architecture.end_parser_state(self.tr, self.tr.parser_state)
            self.state_facts[name] = self.tr.parser_state
        finally:
            self.tr.parser_state = saved
        self.transition(st.children[-1], sc, index)

    @staticmethod
    def successors(states: dict[str, Tree]) -> dict[str, list[str]]:
        """The states each state may go to (accept and reject left out)."""
        succ: dict[str, list[str]] = {}
        for name, st in states.items():
            tr = st.children[-1]
            if tr.data == "transition_direct":
                targets = [Checker.name_of(tr.children[0])]
            else:
                targets = [Checker.name_of(c.children[1]) for c in tr.children[0].children[1:]]
            succ[name] = [t for t in targets if t in states]
        return succ

    def longest_path(self, states: dict[str, Tree]) -> tuple[int, list[str]]:
        """The most bits a path from start extracts and advances over (each state at most once
        on a path, varbits at their maximum, sub-parsers at their longest path), and the path."""
        succ = self.successors(states)
        facts = self.state_facts
        memo: dict[str, tuple[int, list[str]]] = {}
        budget = [100_000]  # paths of a parser with loops are walked one by one: a bound

        def walk(n: str, on_path: frozenset[str]) -> tuple[int, list[str]]:
            if n in memo:
                return memo[n]
            here = facts[n].bits if n in facts else 0
            best: tuple[int, list[str]] = (0, [])
            cut = False  # a successor on the path: the result depends on the path
            for t in succ[n]:
                budget[0] -= 1
                if t in on_path or budget[0] < 0:
                    cut = True
                    continue
                sub = walk(t, on_path | {t})
                cut = cut or t not in memo
                if sub[0] > best[0]:
                    best = sub
            result = (here + best[0], [n, *best[1]])
            if not cut:
                memo[n] = result
            return result

        return walk("start", frozenset({"start"}))

    def parse_graph_is_small_dag(self, states: dict[str, Tree], limit: int = 64) -> bool:
        """True when the state graph has no cycle and inlining every path stays small."""
        succ = self.successors(states)
        paths: dict[str, int] = {}
        depth: dict[str, int] = {}
        visiting: set[str] = set()

        def count(n: str) -> int:  # number of inlined copies of the states below n
            if n in paths:
                return paths[n]
            if n in visiting:
                raise RecursionError
            visiting.add(n)
            total = 1 + sum(count(t) for t in succ[n])
            depth[n] = 1 + max((depth[t] for t in succ[n]), default=0)
            visiting.discard(n)
            paths[n] = total
            return total

        try:
            # Python allows about 100 indentation levels; each inlined state nests two
            return count("start") <= limit and depth["start"] <= 30
        except RecursionError:
            return False

    def jump(self, name_node: Any, index: dict[str, int], scope: Scope) -> None:
        name = self.ck.name_of(name_node)
        if self.inline_states is not None and name in self.inline_states:
            self.emit_state(self.inline_states[name], self.parser_scope, index)
            return
        self.tr.em(self.goto(name_node, index))

    def goto(self, name_node: Any, index: dict[str, int]) -> str:
        name = self.ck.name_of(name_node)
        if name == "accept":
            return self.accept_code
        if name == "reject":
            return f"raise _PErr({self.ck.errors.get('NoError', 0)})"
        if name not in index:
            raise self.err(name_node, f"unknown parser state {name}")
        return f"_st = {index[name]}; continue"

    def transition(self, node: Tree, scope: Scope, index: dict[str, int]) -> None:
        em = self.tr.em
        if node.data == "transition_direct":
            self.jump(node.children[0], index, scope)
            return
        sel = node.children[0]
        keys = [self.tr.expr(k, scope) for k in sel.children[0].children if k is not None]
        for k, kn in zip(keys, sel.children[0].children, strict=False):
            if not isinstance(k.type, (BitT, ErrorT, EnumT, BoolT)):
                raise self.err(kn, f"cannot select on {k.type.show()}")
        kv = []
        for k in keys:
            v = self.tr.tmp("k")
            em(f"{v} = {k.code}")
            kv.append(v)
        first = True
        has_default = False
        for case in sel.children[1:]:
            ks, target = case.children[0], case.children[1]
            items = (
                list(ks.children) if isinstance(ks, Tree) and ks.data == "tuple_keyset" else [ks]
            )
            if (
                len(items) == 1
                and isinstance(items[0], Tree)
                and items[0].data in ("default_keyset", "dontcare_keyset")
            ):
                conds = ["True"]
            else:
                if len(items) != len(keys):
                    raise self.err(case, f"keyset has {len(items)} values, select has {len(keys)}")
                conds = []
                for k, v, item in zip(keys, kv, items, strict=True):
                    conds.append(self.keyset_cond(item, k, v, scope))
            cond = " and ".join(c for c in conds if c != "True") or "True"
            if cond == "True":
                has_default = True
            em(f"{'if' if first else 'elif'} {cond}:")
            first = False
            with em.block():
                self.jump(target, index, scope)
        nomatch = self.ck.errors["NoMatch"]
        if first:
            em(f"raise _PErr({nomatch})")
        elif not has_default:
            em("else:")
            with em.block():
                em(f"raise _PErr({nomatch})")

    def value_set(self, node: Tree, scope: Scope, fq: str) -> None:
        anns = self.ck.annotations(node.children[0])
        trs = trees(node)
        t = self.tr.resolve_type(trs[-3], scope)
        if not isinstance(t, BitT):
            raise self.err(
                node, "value_set elements must be bit<> (struct elements are not supported)"
            )
        size = self.const_int(trs[-2], scope)
        name = self.ck.name_of(trs[-1])
        full = self.tr.control_plane_name(fq, name, anns)
        vs = ValueSet(full, t.width, size)
        pyname = f"VS_{next(self.tr.uid)}"
        self.prog.ns[pyname] = vs
        self.prog.value_sets[full] = vs
        self.ck.bind(scope, name, Sym("value_set", t, code=pyname, value=vs), node)

    def keyset_cond(self, item: Any, k: E, v: str, scope: Scope) -> str:
        t = k.type
        if isinstance(item, Tree) and item.data == "var":
            s = scope.lookup(self.ck.name_of(item.children[0]))
            if s is not None and s.kind == "value_set":
                if not (isinstance(t, BitT) and s.type == t):
                    raise self.err(
                        item, f"value_set of {s.type.show() if s.type else '?'} used on {t.show()}"
                    )
                return f"{s.code}.match({v})"
        if isinstance(item, Tree) and item.data in ("default_keyset", "dontcare_keyset"):
            return "True"
        if isinstance(item, Tree) and item.data == "mask_keyset":
            a = self.tr.convert(self.tr.expr(item.children[0], scope, t), t, item)
            m = self.tr.convert(self.tr.expr(item.children[1], scope, t), t, item)
            if not (a.is_const and m.is_const):
                raise self.err(item, "keyset values must be constants")
            return f"({v} & {m.const}) == {a.const & m.const}"
        if isinstance(item, Tree) and item.data == "range_keyset":
            lo = self.tr.convert(self.tr.expr(item.children[0], scope, t), t, item)
            hi = self.tr.convert(self.tr.expr(item.children[1], scope, t), t, item)
            if not (lo.is_const and hi.is_const):
                raise self.err(item, "keyset values must be constants")
            return f"{lo.const} <= {v} <= {hi.const}"
        e = self.tr.expr(item, scope, t)
        if isinstance(t, BitT) and isinstance(e.type, EnumT) and e.type.underlying == t:
            e = E(e.code, t, e.const)
        e = self.tr.convert(e, t, item)
        if not e.is_const:
            raise self.err(item, "keyset values must be constants")
        return f"{v} == {e.const!r}"


__all__ = [
    "DROP_PORT",
    "Architecture",
    "Builder",
    "Device",
    "ExternDecl",
    "PacketPath",
    "Program",
    "expr_text",
]
