"""v1model (BMv2's simple_switch) as an architecture of the engine: ``V1Switch(...) main``, the
v1model externs (``register``, ``counter``, ``direct_counter``, ``meter``, ``direct_meter`` and the
extern functions of v1model.p4) and, in ``v1model_path.py``, the packet path."""

from __future__ import annotations

from typing import Any

from lark import Tree

from softswitch.arch.v1model_path import V1Blocks, V1ModelPipeline
from softswitch.engine.codegen import E, ExternInst, Translator, wrap_code
from softswitch.engine.program import Architecture, Builder, Device, ExternDecl, PacketPath
from softswitch.frontend.checker import Scope, Sym
from softswitch.frontend.types import BitT, BoolT, EnumT, IntT, StructLikeT

SUPPORTED_EXTERN_INSTANCES = {"register", "counter", "direct_counter", "meter", "direct_meter"}
ROLES = ("parser", "verify", "ingress", "egress", "compute", "deparser")


def _hash_algorithm(tr: Translator, node: Any, scope: Scope) -> str:
    e = tr.expr(node, scope)
    if not (isinstance(e.type, EnumT) and e.type.name == "HashAlgorithm"):
        raise tr.err(node, "expected a HashAlgorithm")
    name = next(k for k, v in e.type.members.items() if v == e.const)
    return name


class V1Model(Architecture):
    """v1model: ``V1Switch(parser, verify, ingress, egress, compute, deparser) main``."""

    name = "v1model"
    package = "V1Switch"

    def __init__(self) -> None:
        self.blocks: V1Blocks | None = None

    # ------------------------------------------------------------------ package
    def build(self, b: Builder) -> None:
        main = b.ck.main
        assert main is not None
        args = main.children[2]
        blocks = [] if args is None else list(args.children)
        if len(blocks) != 6:
            raise b.err(main, f"V1Switch takes 6 blocks, {len(blocks)} given")
        decls = [b.package_arg(blk, "V1Switch", ("parser", "control")) for blk in blocks]
        b.instantiate_globals()
        if decls[0][0].kind != "parser" or any(d.kind != "control" for d, _ in decls[1:]):
            raise b.err(main, "V1Switch needs a parser and five controls")
        names: dict[str, str] = {}
        for role, (decl, cargs) in zip(ROLES, decls, strict=True):
            names[role] = (
                b.build_parser(decl, cargs)
                if role == "parser"
                else b.build_control(decl, decl.name, cargs, top=True)["func"]
            )
            b.prog.blocks[role] = decl.name
        # header/meta classes from the parser's parameter types
        ptree = decls[0][0].tree
        ptypes = [
            b.tr.resolve_type(p.children[2], b.ck.globals) for p in ptree.children[2].children
        ]
        if len(ptypes) != 4:
            raise b.err(
                ptree,
                "the v1model parser takes (packet_in, out H, inout M, inout standard_metadata_t)",
            )
        hdr_t, meta_t, sm_t = ptypes[1], ptypes[2], ptypes[3]
        for t in (hdr_t, meta_t):
            if not isinstance(t, StructLikeT) or t.is_header:
                raise b.err(ptree, f"v1model headers and metadata must be structs, got {t.show()}")
        if not (isinstance(sm_t, StructLikeT) and sm_t.name == "standard_metadata_t"):
            raise b.err(ptree, "the last parser parameter must be standard_metadata_t")
        assert isinstance(hdr_t, StructLikeT) and isinstance(meta_t, StructLikeT)
        cls = {k: b.tr.py_class(t) for k, t in (("hdr", hdr_t), ("meta", meta_t), ("sm", sm_t))}
        ns = b.exec_module()
        b.prog.stages = {role: ns[names[role]] for role in ROLES}
        self.blocks = V1Blocks(
            *b.prog.stages.values(),
            hdr_cls=ns[cls["hdr"]],
            meta_cls=ns[cls["meta"]],
            sm_cls=ns[cls["sm"]],
            meta_type=meta_t,
        )

    def packet_path(self, device: Device) -> PacketPath:
        assert self.blocks is not None, "the program is not built"
        return V1ModelPipeline(device, self.blocks)

    # ------------------------------------------------------------------ externs
    def extern_instance(self, b: Builder, d: ExternDecl) -> None:
        node, t, args, scope = d.node, d.type, d.args, d.scope
        if node.children[4] is not None:
            raise b.err(node.children[4], f"extern {t.name} has no abstract methods to implement")
        if t.name not in SUPPORTED_EXTERN_INSTANCES:
            raise b.err(node, f"extern {t.name} is not supported by this target")
        x = ExternInst(t.name, d.full, annotations=d.annotations, pyname=f"X_{next(b.tr.uid)}")
        if t.name == "register":
            if not t.type_args or not isinstance(t.type_args[0], BitT):
                raise b.err(node, "register<T> needs a bit<> element type")
            x.width = t.type_args[0].width
            if len(args) != 1:
                raise b.err(node, "register(size)")
            x.size = b.const_int(args[0], scope)
        elif t.name == "counter":
            if len(args) != 2:
                raise b.err(node, "counter(size, CounterType)")
            x.size = b.const_int(args[0], scope)
            x.counter_type = b.enum_member(args[1], scope, "CounterType")
        elif t.name == "meter":
            if len(args) != 2:
                raise b.err(node, "meter(size, MeterType)")
            x.size = b.const_int(args[0], scope)
            x.counter_type = b.enum_member(args[1], scope, "MeterType")
        elif t.name == "direct_meter":
            if len(args) != 1:
                raise b.err(node, "direct_meter(MeterType)")
            x.counter_type = b.enum_member(args[0], scope, "MeterType")
        elif t.name == "direct_counter":
            if len(args) != 1:
                raise b.err(node, "direct_counter(CounterType)")
            x.counter_type = b.enum_member(args[0], scope, "CounterType")
        b.add_extern(node, x)
        b.ck.bind(scope, d.name, Sym("extern", value=x), node)

    def extern_method(
        self,
        tr: Translator,
        node: Tree,
        inst: ExternInst,
        method: str,
        args: list[Any],
        scope: Scope,
    ) -> E | None:
        P = inst.pyname
        if inst.kind == "register":
            idx_t = BitT(32)
            if method == "read":
                if len(args) == 1:
                    i = tr.convert(tr.expr(args[0], scope, idx_t), idx_t, args[0])
                    it = tr.tmp("i")
                    return E(
                        f"({P}[{it}] if ({it} := {i.code}) < {inst.size} else 0)", BitT(inst.width)
                    )
                if len(args) != 2:
                    raise tr.err(node, "register.read(out value, in index)")
                dst = tr.expr(args[0], scope)
                if not dst.lvalue:
                    raise tr.err(args[0], "register.read needs an lvalue")
                tr.convert(E("0", BitT(inst.width)), dst.type, args[0], "register.read: ")
                i = tr.convert(tr.expr(args[1], scope, idx_t), idx_t, args[1])
                it = tr.tmp("i")
                tr.assign_to(
                    dst,
                    E(f"({P}[{it}] if ({it} := {i.code}) < {inst.size} else 0)", dst.type),
                    node,
                )
                return None
            if method == "write":
                if len(args) != 2:
                    raise tr.err(node, "register.write(in index, in value)")
                i = tr.convert(tr.expr(args[0], scope, idx_t), idx_t, args[0])
                v = tr.convert(tr.expr(args[1], scope, BitT(inst.width)), BitT(inst.width), args[1])
                it = tr.tmp("i")
                tr.em(f"if ({it} := {i.code}) < {inst.size}: {P}[{it}] = {v.code}")
                return None
        if inst.kind == "counter" and method == "count":
            if len(args) != 1:
                raise tr.err(node, "counter.count(in index)")
            i = tr.convert(tr.expr(args[0], scope, BitT(32)), BitT(32), args[0])
            it = tr.tmp("i")
            tr.em(f"if ({it} := {i.code}) < {inst.size}: {P}_p[{it}] += 1; {P}_b[{it}] += _G.plen")
            return None
        if inst.kind == "meter" and method == "execute_meter":
            if len(args) != 2:
                raise tr.err(node, "meter.execute_meter(in index, out result)")
            i = tr.convert(tr.expr(args[0], scope, BitT(32)), BitT(32), args[0])
            dst = tr.expr(args[1], scope)
            if not (dst.lvalue and isinstance(dst.type, BitT)):
                raise tr.err(args[1], "execute_meter: the result must be a bit<> lvalue")
            tr.assign_to(
                dst, E(wrap_code(f"{P}.execute({i.code}, _G.plen)", dst.type), dst.type), node
            )
            return None
        if inst.kind == "direct_meter" and method == "read":
            if len(args) != 1:
                raise tr.err(node, "direct_meter.read(out result)")
            dst = tr.expr(args[0], scope)
            if not (dst.lvalue and isinstance(dst.type, BitT)):
                raise tr.err(args[0], "direct_meter.read: the result must be a bit<> lvalue")
            tr.assign_to(dst, E(wrap_code("_G.dmeter", dst.type), dst.type), node)
            return None
        if inst.kind == "direct_counter" and method == "count":
            return None  # BMv2 counts direct counters on every hit of the owning table
        raise tr.err(node, f"{inst.kind}.{method} is not supported by this target")

    def extern_function(
        self,
        tr: Translator,
        node: Tree,
        name: str,
        args: list[Any],
        targs: list[Tree],
        scope: Scope,
    ) -> E | None:
        if name in ("resubmit_preserving_field_list", "recirculate_preserving_field_list"):
            if len(args) != 1:
                raise tr.err(node, f"{name}(bit<8> index)")
            idx = tr.convert(tr.expr(args[0], scope, BitT(8)), BitT(8), args[0])
            if not idx.is_const:
                raise tr.err(args[0], f"{name}: the field list index must be a constant")
            what = "resubmit" if name.startswith("resubmit") else "recirculate"
            tr.em(f"_G.{what} = {idx.const}")
            return None
        if name in ("clone", "clone_preserving_field_list"):
            if len(args) != (2 if name == "clone" else 3):
                raise tr.err(node, f"{name}: wrong number of arguments")
            ct = tr.expr(args[0], scope)
            if not (isinstance(ct.type, EnumT) and ct.type.name == "CloneType"):
                raise tr.err(args[0], f"{name}: expected a CloneType")
            sess = tr.convert(tr.expr(args[1], scope, BitT(32)), BitT(32), args[1])
            fl = 0
            if name != "clone":
                idx = tr.convert(tr.expr(args[2], scope, BitT(8)), BitT(8), args[2])
                if not idx.is_const:
                    raise tr.err(args[2], f"{name}: the field list index must be a constant")
                fl = idx.const
            tr.em(f"_G.clone = ({ct.code}, {sess.code}, {fl})")
            return None
        if name == "truncate":
            if len(args) != 1:
                raise tr.err(node, "truncate(in bit<32> length)")
            n = tr.convert(tr.expr(args[0], scope, BitT(32)), BitT(32), args[0])
            tr.em(f"_G.truncate = {n.code}")
            return None
        if name == "digest":
            if len(args) != 2:
                raise tr.err(node, "digest(in bit<32> receiver, in T data)")
            tr.convert(tr.expr(args[0], scope, BitT(32)), BitT(32), args[0])
            data = tr.expr(args[1], scope)
            if targs:
                want = tr.resolve_type(targs[0], scope)
                data = tr.convert(data, want, args[1])
            tr.emit_digest(data, args[1])
            return None
        if name == "mark_to_drop":
            if len(args) != 1:
                raise tr.err(node, "mark_to_drop(standard_metadata)")
            sm = tr.expr(args[0], scope)
            tr.em(f"{sm.code}.egress_spec = 511; {sm.code}.mcast_grp = 0")
            return None
        if name == "random":
            dst = tr.expr(args[0], scope)
            if not (dst.lvalue and isinstance(dst.type, BitT)):
                raise tr.err(args[0], "random: result must be a bit<> lvalue")
            lo = tr.convert(tr.expr(args[1], scope, dst.type), dst.type, args[1])
            hi = tr.convert(tr.expr(args[2], scope, dst.type), dst.type, args[2])
            tr.assign_to(dst, E(f"_randint({lo.code}, {hi.code})", dst.type), node)
            return None
        if name == "hash":
            if len(args) != 5:
                raise tr.err(node, "hash(out result, in algo, in base, in data, in max)")
            dst = tr.expr(args[0], scope)
            if not (dst.lvalue and isinstance(dst.type, BitT)):
                raise tr.err(args[0], "hash: result must be a bit<> lvalue")
            algo = _hash_algorithm(tr, args[1], scope)
            base = tr.expr(args[2], scope)
            data, _ = tr.data_list(args[3], scope)
            mx = tr.expr(args[4], scope)
            for x, a in ((base, args[2]), (mx, args[4])):
                if not isinstance(x.type, (BitT, IntT)):
                    raise tr.err(a, "hash: base and max must be bit<> values")
            hv = f"_H_{algo}({data})"
            if mx.is_const:
                code = f"({base.code} + {hv} % {mx.code})" if mx.const else f"({base.code} + {hv})"
            else:
                m = tr.tmp("m")
                code = f"({base.code} + ({hv} % {m} if ({m} := {mx.code}) else {hv}))"
            tr.assign_to(dst, E(wrap_code(code, dst.type), dst.type), node)
            return None
        if name in (
            "verify_checksum",
            "update_checksum",
            "verify_checksum_with_payload",
            "update_checksum_with_payload",
        ):
            if len(args) != 4:
                raise tr.err(node, f"{name}(condition, data, checksum, algo)")
            c = tr.expr(args[0], scope)
            if not isinstance(c.type, BoolT):
                raise tr.err(args[0], f"{name}: condition must be bool")
            data, _ = tr.data_list(args[1], scope)
            if name.endswith("_with_payload"):
                data = f"({data} + _G.payload)"
            ck = tr.expr(args[2], scope)
            if not isinstance(ck.type, BitT):
                raise tr.err(args[2], f"{name}: checksum must be a bit<> field")
            algo = _hash_algorithm(tr, args[3], scope)
            if algo not in ("csum16", "crc16", "crc32", "identity", "xor16"):
                raise tr.err(args[3], f"{name}: algorithm {algo} is not supported")
            value = wrap_code(f"_H_{algo}({data})", ck.type)
            if name.startswith("verify"):
                tr.em(f"if {c.code} and {ck.code} != {value}: _G.sm.checksum_error = 1")
            else:
                if not ck.lvalue:
                    raise tr.err(args[2], f"{name}: checksum must be an lvalue")
                tr.em(f"if {c.code}:")
                with tr.em.block():
                    tr.assign_to(ck, E(value, ck.type), node)
            return None
        if name in ("log_msg", "assume"):
            return None
        if name == "assert":
            c = tr.expr(args[0], scope)
            tr.em(f"if not {c.code}: raise _Assert()")
            return None
        raise tr.err(node, f"extern function {name} is not supported by this target")


__all__ = ["V1Model"]
