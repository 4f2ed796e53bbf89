"""What Tofino (p4c's Tofino back end, p4c-barefoot) rejects in a TNA program, as load-time errors
at file:line:col. Each rule names the compiler's own message, so that a program the software switch
loads gets past those messages of the compiler too:

- one RegisterAction execute per statement (several in one expression: "too many side-effect in
  one expression", or an instruction or condition the back end cannot build);
- ``/`` and ``%`` only by a power-of-two constant, shifts only by a constant amount, no shift in a
  RegisterAction ("could not evaluate expression at compilation time", "shift count must be a
  constant", "expression too complex for register action");
- at most two comparisons in a RegisterAction's apply ("needs N comparisons but the device only
  has 2 comparison units"), counted as the compiler counts them;
- parser assignments from constants, fields, slices, casts, concatenations and lookahead only
  ("Assignment source cannot be evaluated in the parser");
- parser checksum add/subtract over header fields extracted in the same state ("Operations on the
  checksum fields must be in the same parser state where the fields are extracted"), never over a
  varbit field in subtract ("Checksum subtract is currently not supported to have varbit
  fields"), constants only zero;
- a deparser checksum update under one-bit conditions only ("Tofino only supports 1-bit checksum
  update condition in the deparser");
- the egress parser's longest path at most 160 bytes, the egress intrinsic metadata included
  ("longest path through parser (…B) exceeds maximum parse depth (160B)");
- no ``verify`` in a parser (the compiler drops it: "Parser `verify` is currently unsupported").
"""

from __future__ import annotations

import re
from typing import Any

from lark import Tree

from softswitch.engine.codegen import E, ParserState, Translator
from softswitch.errors import P4Error
from softswitch.frontend.checker import Scope
from softswitch.frontend.types import BitT, BoolT, StructLikeT, VarbitT

CMP_UNITS = 2  # comparison units of a Tofino 1 stateful ALU
EGRESS_PARSE_DEPTH = 160  # bytes: Tofino 1's egress parser
# a comparison and its negation share a unit: the class each operator belongs to
CMP_CLASS = {"==": "==", "!=": "==", "<": "<", ">=": "<", ">": ">", "<=": ">"}
# bool expressions a match-action stage evaluates only as a gateway (if) condition
COMPUTED_BOOL = ("cmp", "land", "lor", "lnot", "cond")
LOCAL = re.compile(r"_v_\w+")  # the translator's code of a local variable
# expressions Tofino's parser writes as they are (after casts and concatenations are split)
PARSER_SOURCES = ("var", "member", "index", "global_var", "type_member", "error_member")


def _calls(node: Tree, method: str) -> list[Tree]:
    """The calls ``x.method(...)`` in an expression."""
    out = []
    for sub in node.iter_subtrees():
        if sub.data in ("call", "generic_call"):
            f = sub.children[0]
            if (
                isinstance(f, Tree)
                and f.data == "member"
                and str(f.children[1].children[0] if isinstance(f.children[1], Tree) else "")
                == method
            ):
                out.append(sub)
    return out


class TnaRules:
    """The rules; mixed into the TNA architecture, which sets ``b`` (the builder), ``role`` (the
    block being built) and ``applying`` (the RegisterActions whose apply is being translated)."""

    b: Any
    role: str
    applying: list[Any]
    exec_stmts: dict[int, Tree]
    computed_bools: set[str]  # locals assigned a comparison, &&, ||, ! or ?: (or a copy of one)

    def err(self, node: Any, msg: str) -> P4Error:
        return self.b.err(node, msg)  # type: ignore[no-any-return]

    def src(self, node: Any) -> str:
        """The source text of an expression, on one line."""
        meta = getattr(node, "meta", None)
        if meta is None or meta.empty:
            return str(node)
        return " ".join(self.b.ck.pre.text[meta.start_pos : meta.end_pos].split())

    # ------------------------------------------------------------------ statements
    def one_execute_per_statement(self, tr: Translator, node: Tree) -> None:
        """A RegisterAction execute at ``node``: the statement has no other."""
        if tr.cur_stmt is None:
            return
        uid = tr.cur_stmt[1]
        first = self.exec_stmts.get(uid)
        if first is None:
            self.exec_stmts[uid] = node
            return
        f, line, col = self.b.ck.where(first)
        raise self.err(
            node,
            f"a second RegisterAction execute in one statement (the first at {f}:{line}:{col}): "
            "Tofino takes one stateful ALU result per expression (p4c-barefoot: too many "
            "side-effect in one expression); execute into a local in a statement of its own",
        )

    def check_operation(self, tr: Translator, node: Tree, op: str, a: E, b: E) -> None:
        if tr.in_parser:
            return  # the parser's own rule (assignments) applies there
        if op in ("<<", ">>"):
            if self.applying:
                raise self.err(
                    node,
                    f"{self.src(node)}: a stateful ALU does not shift (p4c-barefoot: expression "
                    "too complex for register action)",
                )
            if not b.is_const:
                raise self.err(
                    node,
                    f"{self.src(node)}: Tofino shifts by constant amounts only (p4c-barefoot: "
                    "shift count must be a constant)",
                )
            return
        k = b.const if b.is_const else None
        if isinstance(k, int) and k > 0 and k & (k - 1) == 0:
            return  # the compiler makes it a mask or a shift
        raise self.err(
            node,
            f"{self.src(node)}: {op}: the target has no divider, only {op} by a constant power of "
            "two (a shift or a mask) is computed at run time (p4c-barefoot: could not evaluate "
            "expression at compilation time)",
        )

    def check_assignment(self, tr: Translator, node: Tree, lhs: E, src: Any, rhs: E) -> None:
        if self.role in ("ingress", "egress") and not self.applying and not rhs.is_const:
            self._stage_assignment(tr, node, lhs, src, rhs)
        is_call = isinstance(src, Tree) and src.data in ("call", "generic_call")
        if self.role.endswith("deparser") and lhs.hdr_base is not None and not is_call:
            raise self.err(
                node,
                f"{self.src(node)}: a deparser writes a header field only from a Checksum "
                "update (p4c-barefoot: Assignment to a header field in the deparser is only "
                "allowed when the source is checksum update, mirror, resubmit or learning "
                "digest); assign it in a control",
            )
        if tr.in_parser and not rhs.is_const and not self._parser_source(src):
            raise self.err(
                src,
                f"{self.src(src)}: Tofino's parser writes constants, fields, their slices and "
                "lookahead only (p4c-barefoot: Assignment source cannot be evaluated in the "
                "parser); compute it in a control, or select on the fields",
            )

    def _stage_assignment(self, tr: Translator, node: Tree, lhs: E, src: Any, rhs: E) -> None:
        """A match-action stage evaluates comparisons, &&, ||, ! and ?: as gateway conditions
        only: a local that holds one is folded into the ifs that test it, but a field of the
        block's headers or metadata (or a stateful ALU input) cannot be written with one. (A
        sub-control's parameters are left alone: what the compiler makes of them after inlining
        is not known here.)"""
        while isinstance(src, Tree) and src.data == "cast":
            src = src.children[-1]
        kind = src.data if isinstance(src, Tree) else ""
        if kind == "cond" and not isinstance(lhs.type, BoolT):
            raise self.err(
                src,
                f"{self.src(src)}: a match-action stage selects a value only in an if "
                "(p4c-barefoot: Conditions in an action must be simple comparisons of an action "
                "data parameter); assign it in each branch of an if",
            )
        if not isinstance(lhs.type, BoolT):
            return
        local = LOCAL.fullmatch(lhs.code) is not None
        computed = kind in COMPUTED_BOOL or rhs.code in self.computed_bools
        if computed and local:
            self.computed_bools.add(lhs.code)
        elif computed and lhs.code.split(".")[0] in tr.block_params:
            raise self.err(
                node,
                f"{self.src(node)}: a match-action stage cannot write a comparison, &&, ||, ! "
                "or ?: into a field, only test it in an if (p4c-barefoot: source of "
                "modify_field invalid); set the field in the branches of an if",
            )

    def check_stateful_inputs(self, name: str, apply: Tree, scope: Scope) -> None:
        """A RegisterAction reads the control's variables as PHV inputs: not one that holds a
        comparison (or &&, ||, !, ?:), which exists only as a gateway condition."""
        for sub in apply.iter_subtrees():
            if sub.data != "var":
                continue
            sym = scope.lookup(self.b.ck.name_of(sub.children[0]))
            if sym is not None and sym.kind == "var" and sym.code in self.computed_bools:
                raise self.err(
                    sub,
                    f"RegisterAction {name} reads {self.src(sub)}, a bool the control computed "
                    "from a comparison: a stateful ALU input is a PHV field (p4c-barefoot: "
                    "source of modify_field invalid); set it in the branches of an if",
                )

    def _parser_source(self, node: Any) -> bool:
        """Whether Tofino's parser writes ``node`` as it is. (The compiler also takes
        ``x = x | y``, but crashes on it: "Compiler Bug: Exiting with SIGSEGV".)"""
        if not isinstance(node, Tree):
            return False
        d = node.data
        if d in PARSER_SOURCES or d in ("int_lit", "true_lit", "false_lit"):
            return True
        if d == "slice":
            return self._parser_source(node.children[0])
        if d == "cast":
            return self._parser_source(node.children[-1])
        if d == "arith" and str(node.children[1]) == "++":
            return self._parser_source(node.children[0]) and self._parser_source(node.children[2])
        return d in ("call", "generic_call")  # lookahead, Checksum get/verify

    def check_verify(self, tr: Translator, node: Tree) -> None:
        raise self.err(
            node,
            "verify in a TNA parser: Tofino's compiler drops it (p4c-barefoot: Parser `verify` "
            "is currently unsupported), so the packet would go on where this switch stops it; "
            "select on the condition and transition to reject",
        )

    # ------------------------------------------------------------------ RegisterAction
    def count_comparisons(self, name: str, apply: Tree) -> None:
        """A stateful ALU has two comparison units: each distinct comparison in apply() takes
        one (a comparison and its negation share one; a < b and b > a do not), and so does each
        bool from outside apply() that a condition tests (the unit compares it with 1)."""
        seen: dict[tuple[str, str, str], Tree] = {}
        local = {
            self.b.ck.name_of(d.children[2]) for d in apply.iter_subtrees() if d.data == "var_decl"
        }

        def atoms(cond: Any) -> None:  # the bools a condition tests
            if not isinstance(cond, Tree):
                return
            if cond.data in ("land", "lor"):
                atoms(cond.children[0])
                atoms(cond.children[-1])
            elif cond.data == "lnot":
                atoms(cond.children[-1])
            elif cond.data == "member" or (
                cond.data == "var" and self.b.ck.name_of(cond.children[0]) not in local
            ):
                seen.setdefault((self.src(cond), "== 1", ""), cond)

        for sub in apply.iter_subtrees_topdown():
            if sub.data == "cmp":
                op = str(sub.children[1])
                key = (self.src(sub.children[0]), CMP_CLASS[op], self.src(sub.children[2]))
                seen.setdefault(key, sub)
            elif sub.data in ("if_stmt", "cond"):
                atoms(sub.children[0])
            elif sub.data in ("land", "lor", "lnot"):
                atoms(sub)
        if len(seen) > CMP_UNITS:
            listed = ", ".join(self.src(n) for n in seen.values())
            raise self.err(
                apply,
                f"RegisterAction {name}.apply needs {len(seen)} comparisons but a stateful ALU "
                f"has {CMP_UNITS} comparison units ({listed}; p4c-barefoot: needs {len(seen)} "
                f"comparisons but the device only has {CMP_UNITS} comparison units)",
            )

    # ------------------------------------------------------------------ Checksum
    def checksum_items(self, tr: Translator, node: Tree, items: list[E]) -> None:
        """The data of the Checksum add/subtract/update call ``node``, as the translator typed
        it."""
        method = self.b.ck.name_of(node.children[0].children[1])
        if method == "subtract":
            for it in items:
                if isinstance(it.type, VarbitT) or (
                    isinstance(it.type, StructLikeT) and it.type.varbit_field() is not None
                ):
                    raise self.err(
                        node,
                        "Checksum.subtract over a varbit field: p4c-barefoot: Checksum subtract "
                        "is currently not supported to have varbit fields",
                    )
        if method == "update":
            self._update_conditions(tr, node)
            return
        state = tr.parser_state
        if state is None:
            return
        for it in items:
            if it.is_const:
                if it.const:
                    raise self.err(
                        node,
                        f"Checksum.{method} of the constant {it.const}: Tofino's parser checksums "
                        "zero constants and extracted fields only",
                    )
                continue
            header = it.code if isinstance(it.type, StructLikeT) else it.hdr_base
            if header is None:
                raise self.err(
                    node,
                    f"Checksum.{method}: an item is not a header field: Tofino's parser checksums "
                    f"fields extracted in state {state.name} (p4c-barefoot: Operations on the "
                    "checksum fields must be in the same parser state where the fields are "
                    "extracted)",
                )
            state.pending.append((node, method, header))

    def end_parser_state(self, tr: Translator, state: ParserState) -> None:
        for node, method, header in state.pending:
            if header not in state.extracted:
                raise self.err(
                    node,
                    f"Checksum.{method} in parser state {state.name} over a header the state does "
                    "not extract (p4c-barefoot: Operations on the checksum fields must be in the "
                    "same parser state where the fields are extracted)",
                )

    def _update_conditions(self, tr: Translator, node: Tree) -> None:
        if not self.role.endswith("deparser"):
            return
        for cond, scope, _branch in tr.conditions:
            if not self._one_bit(tr, cond, scope):
                raise self.err(
                    cond,
                    f"{self.src(cond)}: a deparser checksum update takes a one-bit condition "
                    "(p4c-barefoot: Tofino only supports 1-bit checksum update condition in the "
                    'deparser, in the form of "cond == 1" ...); compute the bit in a control',
                )

    def _one_bit(self, tr: Translator, cond: Any, scope: Scope) -> bool:
        """A bool field, its negation, a bit<1> field ==/!= a constant, or hdr.isValid()."""
        if not isinstance(cond, Tree):
            return False
        if cond.data == "lnot":
            return self._one_bit(tr, cond.children[-1], scope)
        if cond.data in ("member", "var"):
            return True  # an if condition is bool
        if cond.data == "call" and _calls(cond, "isValid"):
            return True
        if cond.data == "cmp" and str(cond.children[1]) in ("==", "!="):
            sides = []
            for side in (cond.children[0], cond.children[2]):
                e, lines = tr.capture(side, scope)
                if lines:
                    return False
                sides.append(e)
            consts = [e for e in sides if e.is_const]
            fields = [
                e
                for e, side in zip(sides, (cond.children[0], cond.children[2]), strict=True)
                if not e.is_const and isinstance(side, Tree) and side.data in ("member", "var")
            ]
            return (
                len(consts) == 1
                and len(fields) == 1
                and isinstance(fields[0].type, BitT)
                and fields[0].type.width == 1
            )
        return False

    # ------------------------------------------------------------------ parse depth
    def check_egress_parser(
        self, decl: Any, depth: tuple[int, list[str]], states: dict[str, ParserState]
    ) -> None:
        """The egress parser's longest path (the egress intrinsic metadata it extracts included)
        within Tofino's parse depth, and no advance the compiler cannot bound."""
        for state in states.values():
            if state.variable_advance is not None:
                raise self.err(
                    state.variable_advance,
                    f"advance by a non-constant amount in egress parser state {state.name}: "
                    "the egress parse depth must be bounded (p4c-barefoot: Variable-length "
                    "advance statement found)",
                )
        bits, path = depth
        total = bits // 8
        if total > EGRESS_PARSE_DEPTH:
            raise self.err(
                decl.tree,
                f"egress parser {decl.name}: its longest path ({' -> '.join(path)}, varbits at "
                f"their maximum) takes {total} B, more than Tofino's {EGRESS_PARSE_DEPTH} B "
                f"(p4c-barefoot: longest path through parser ({total}B) exceeds maximum parse "
                f"depth ({EGRESS_PARSE_DEPTH}B))",
            )


__all__ = ["CMP_UNITS", "EGRESS_PARSE_DEPTH", "TnaRules"]
