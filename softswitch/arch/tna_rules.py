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
- no ``verify`` in a parser (the compiler drops it: "Parser `verify` is currently unsupported");
- an if in a control compares two run-time values with == and != only ("condition too complex,
  one operand of a < b must be constant"), and each term of its condition's disjunctive normal
  form reads at most 4 bytes + 12 bits of PHV ("condition too complex, limit of 4 bytes + 12 bits
  of PHV input exceeded"), counted as the back end counts them;
- one ALU operation per assigned expression in a control or an action, after folding the locals
  assigned once and the fields assigned earlier in the same action body ("action spanning multiple
  stages");
- a RegisterAction's index a field, a slice, a cast, a concatenation or a constant, with no
  operation ("The index is too complex for the primitive to be handled.");
- at most two PHV inputs (fields or slices the control sets) read by all the RegisterActions of
  one Register together ("… requires more than 2 PHV inputs").
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
SALU_INPUTS = 2  # PHV inputs of a stateful ALU, shared by its Register's RegisterActions
EGRESS_PARSE_DEPTH = 160  # bytes: Tofino 1's egress parser
# a comparison and its negation share a unit: the class each operator belongs to
CMP_CLASS = {"==": "==", "!=": "==", "<": "<", ">=": "<", ">": ">", "<=": ">"}
# bool expressions a match-action stage evaluates only as a gateway (if) condition
COMPUTED_BOOL = ("cmp", "land", "lor", "lnot", "cond")
LOCAL = re.compile(r"_v_\w+")  # the translator's code of a local variable
# operations a match-action stage's ALU computes (one per action per destination)
ALU_OPS = ("arith", "band", "bor", "bxor", "shift", "bnot", "neg")
GATEWAY_BYTES, GATEWAY_BITS = 4, 12  # a Tofino 1 gateway's PHV input: match bytes, hash bits
DNF_CAP = 64  # terms of a condition's DNF looked at
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


def _calls_in(node: Any) -> bool:
    return isinstance(node, Tree) and any(
        sub.data in ("call", "generic_call") for sub in node.iter_subtrees()
    )


class TnaRules:
    """The rules; mixed into the TNA architecture, which sets ``b`` (the builder), ``role`` (the
    block being built) and ``applying`` (the RegisterActions whose apply is being translated)."""

    b: Any
    role: str
    applying: list[Any]
    exec_stmts: dict[int, Tree]
    computed_bools: set[str]  # locals assigned a comparison, &&, ||, ! or ?: (or a copy of one)
    # code -> (the assigned expression, or its ALU operations; the action body's scope that
    # assigned it, None for the control's own statements). The scope itself, not its id(): a
    # finished body's Scope is freed and a later one could reuse its address.
    defs: dict[str, tuple[Any, Scope | None]]
    assigned: dict[str, int]  # code -> times assigned in the blocks built so far
    salu_inputs: dict[str, dict[str, Tree]]  # Register -> the PHV inputs its actions read

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

    def check_assignment(
        self, tr: Translator, node: Tree, lhs: E, src: Any, rhs: E, scope: Scope
    ) -> None:
        if self.role in ("ingress", "egress") and not self.applying:
            if rhs.is_const:
                self._define(tr, lhs.code, -1, scope)
            else:
                self._stage_assignment(tr, node, lhs, src, rhs)
                self._one_operation(tr, node, lhs, src, scope)
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
            self.defs[lhs.code + "?"] = (src, None)
        elif computed and lhs.code.split(".")[0] in tr.block_params:
            raise self.err(
                node,
                f"{self.src(node)}: a match-action stage cannot write a comparison, &&, ||, ! "
                "or ?: into a field, only test it in an if (p4c-barefoot: source of "
                "modify_field invalid); set the field in the branches of an if",
            )

    # ------------------------------------------------------------------ ALU operations
    def _one_operation(self, tr: Translator, node: Tree, lhs: E, src: Any, scope: Scope) -> None:
        """A stage's action writes each destination with one ALU operation: the compiler folds a
        local assigned once (and a field assigned earlier in the same action body) into the
        expressions that read it, so those count as the operations that computed them."""
        n = self._ops(tr, src, scope)
        self._define(tr, lhs.code, n, scope)
        if self._mask(tr, src, scope):
            self.defs[lhs.code + "&"] = (True, None)
        if n > 1:
            raise self.err(
                node,
                f"{self.src(node)}: {n} dependent operations in one action (the locals it reads "
                "folded in): a stage's ALU does one per destination (p4c-barefoot: action "
                "spanning multiple stages ... require multiple stages for a single action); "
                "split it over actions or stages",
            )

    def _define(self, tr: Translator, code: str, ops: int, scope: Scope) -> None:
        """``code`` is assigned a value of ``ops`` ALU operations (-1: a constant). A local
        assigned once in the control's own statements is folded wherever it is read; one
        assigned in an action body (a field too) only in the rest of that body."""
        self.assigned[code] = self.assigned.get(code, 0) + 1
        if LOCAL.fullmatch(code) or tr.in_action:
            self.defs[code] = (ops, scope if tr.in_action else None)

    def _folded(self, tr: Translator, node: Tree, scope: Scope) -> int | None:
        """The ALU operations (-1: a constant) the compiler folds in for a local or field."""
        code = self._code(tr, node, scope)
        got = self.defs.get(code or "")
        if code is None or got is None:
            return None
        if got[1] is None:
            return int(got[0]) if self.assigned.get(code) == 1 else None
        return int(got[0]) if got[1] is scope else None

    def _ops(self, tr: Translator, node: Any, scope: Scope) -> int:
        """The ALU operations an expression takes, those of the locals it reads included."""
        if not isinstance(node, Tree) or node.data in ("call", "generic_call"):
            return 0
        if node.data in ("var", "member"):
            return max(self._folded(tr, node, scope) or 0, 0)
        if self._const(tr, node, scope):
            return 0
        n = sum(self._ops(tr, c, scope) for c in node.children)
        if node.data in ALU_OPS and not (node.data == "arith" and str(node.children[1]) == "++"):
            n += 1
        return n

    def _mask(self, tr: Translator, node: Any, scope: Scope) -> bool:
        """``field & constant`` (or a local holding one, folded): a gateway's masked
        comparison."""
        if not isinstance(node, Tree):
            return False
        if node.data in ("var", "member"):
            code = self._code(tr, node, scope) or ""
            return code + "&" in self.defs and self._folded(tr, node, scope) is not None
        if node.data != "band":
            return False
        a, b = node.children[0], node.children[-1]
        if self._const(tr, a, scope):
            a, b = b, a
        return self._const(tr, b, scope) and self._ops(tr, a, scope) == 0

    def _code(self, tr: Translator, node: Any, scope: Scope) -> str | None:
        try:
            e, _ = tr.capture(node, scope)
        except P4Error:
            return None
        return e.code

    def _const(self, tr: Translator, node: Any, scope: Scope) -> bool:
        """A constant to the compiler: its locals assigned constants once are folded."""
        if not isinstance(node, Tree) or node.data in ("call", "generic_call"):
            return False
        if node.data in ("var", "member") and self._folded(tr, node, scope) == -1:
            return True
        try:
            e, _ = tr.capture(node, scope)
        except P4Error:
            return False
        if e.is_const:
            return True
        if node.data in ("var", "member", "index", "prevalued"):
            return False
        kids = [c for c in node.children if isinstance(c, Tree)]
        return bool(kids) and all(self._const(tr, c, scope) for c in kids if c.data != "type_ref")

    def check_index(self, tr: Translator, name: str, arg: Any, scope: Scope) -> None:
        """A RegisterAction's index is a PHV field (or its slice, cast, concatenation) or a
        constant: the compiler builds no operation for it."""
        if isinstance(arg, Tree) and arg.data == "named_arg":
            arg = arg.children[-1]
        if self._ops(tr, arg, scope):
            raise self.err(
                arg,
                f"{name}.execute({self.src(arg)}): a stateful ALU's index is a field or a "
                "constant, not an operation (p4c-barefoot: The index is too complex for the "
                "primitive to be handled.); compute it into a field in an earlier stage",
            )

    # ------------------------------------------------------------------ gateways
    def check_condition(self, tr: Translator, cond: Tree, scope: Scope) -> None:
        """An if in a control is a gateway: it compares a field with a constant (== and != of
        two fields XOR them), and reads at most 4 bytes + 12 bits of PHV per term of its
        condition's DNF (the back end splits the terms over gateways)."""
        if self.role not in ("ingress", "egress") or self.applying:
            return
        for term in self._terms(tr, cond, False, scope)[:DNF_CAP]:
            eq: dict[str, int] = {}  # field -> width, compared ==/!= (match bytes)
            rng: dict[str, int] = {}  # field -> width, compared <, > (hash bits)
            bits = 0
            for atom in term:
                bits += self._atom(tr, atom, scope, eq, rng)
            nbytes = 0
            bits += sum(rng.values())
            for w in sorted(eq.values(), reverse=True):
                size = (w + 7) // 8
                if size == 1 and nbytes + 1 > GATEWAY_BYTES and bits + w <= GATEWAY_BITS:
                    bits += w
                else:
                    nbytes += size
            if nbytes > GATEWAY_BYTES or bits > GATEWAY_BITS:
                raise self.err(
                    cond,
                    f"{self.src(cond)}: a gateway reads {nbytes} bytes + {bits} bits of PHV, more "
                    f"than Tofino's {GATEWAY_BYTES} bytes + {GATEWAY_BITS} bits (<, > take their "
                    "field's bits; p4c-barefoot: condition too complex, limit of 4 bytes + 12 "
                    "bits of PHV input exceeded); test part of it in an earlier if",
                )

    def _terms(self, tr: Translator, node: Any, neg: bool, scope: Scope) -> list[list[Any]]:
        """The terms (lists of atoms) of a condition's DNF, locals holding bools folded in."""
        if isinstance(node, Tree):
            d = node.data
            if d == "lnot":
                return self._terms(tr, node.children[-1], not neg, scope)
            if d in ("land", "lor"):
                left = self._terms(tr, node.children[0], neg, scope)
                right = self._terms(tr, node.children[-1], neg, scope)
                if (d == "land") != neg:
                    return [a + b for a in left for b in right][:DNF_CAP]
                return (left + right)[:DNF_CAP]
            if d == "cond":
                c = self._terms(tr, node.children[0], False, scope)
                out = [a + b for a in c for b in self._terms(tr, node.children[1], neg, scope)]
                out += [a + b for a in c for b in self._terms(tr, node.children[2], neg, scope)]
                return out[:DNF_CAP]
            if d == "var":
                got = self.defs.get((self._code(tr, node, scope) or "") + "?")
                if got is not None:
                    return self._terms(tr, got[0], neg, scope)
        return [[node]]

    def _atom(
        self, tr: Translator, atom: Any, scope: Scope, eq: dict[str, int], rng: dict[str, int]
    ) -> int:
        """Adds the fields an atom of a condition reads to ``eq`` and ``rng``; its other hash
        bits (a header's valid bit)."""
        if not isinstance(atom, Tree):
            return 0
        if atom.data in ("call", "generic_call"):
            return 1 if _calls(atom, "isValid") else 0
        sides = [atom.children[0], atom.children[2]] if atom.data == "cmp" else [atom]
        for side in sides:
            if self._ops(tr, side, scope) and not self._mask(tr, side, scope):
                raise self.err(
                    side,
                    f"{self.src(side)}: a gateway tests PHV fields, not operations, and the "
                    "compiler folds a local assigned once into the ifs that read it (p4c-barefoot: "
                    "condition expression too complex); compute the value in an action, or in "
                    "both branches of an if",
                )
        if atom.data != "cmp":
            e = self._typed(tr, atom, scope)
            if e is not None and not e.is_const:
                eq[e.code] = self._width(e)
            return 0
        op = str(atom.children[1])
        a = self._typed(tr, atom.children[0], scope)
        b = self._typed(tr, atom.children[2], scope)
        if a is None or b is None or (a.is_const and b.is_const):
            return 0
        if op not in ("==", "!="):
            if not a.is_const and not b.is_const:
                raise self.err(
                    atom,
                    f"{self.src(atom)}: a gateway compares a field with a constant by {op} "
                    f"(p4c-barefoot: condition too complex, one operand of {self.src(atom)} "
                    "must be constant); compare the sign of their difference, computed in an "
                    "earlier action",
                )
            if a.is_const:  # k < x is x > k, ...
                a, b, op = b, a, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
            self._range(a, op, int(b.const), eq, rng)
            return 0
        f = a if b.is_const else b  # (of two fields, the left one is XORed with the right)
        eq[f.code] = self._width(f)
        return 0

    def _range(self, f: E, op: str, k: int, eq: dict[str, int], rng: dict[str, int]) -> None:
        """``f op k`` as the back end canonicalizes it: x <= k is x < k + 1, x > k is
        x >= k + 1; then the bits below k's lowest one are sliced off the field, and where k
        becomes 1 the comparison is the slice ==/!= 0 (match bytes), else a range (hash bits)."""
        w = self._width(f)
        if op in ("<=", ">"):
            k += 1
        if k <= 0 or k >= 1 << w:
            return  # always true or false
        low = (k & -k).bit_length() - 1
        key = f"{f.code}[{w - 1}:{low}]"
        (eq if k >> low == 1 else rng)[key] = w - low

    def _typed(self, tr: Translator, node: Any, scope: Scope) -> E | None:
        if _calls_in(node):
            return None
        try:
            e, _ = tr.capture(node, scope)
        except P4Error:
            return None
        return e

    @staticmethod
    def _width(e: E) -> int:
        return e.type.width if isinstance(e.type, BitT) else 1

    def check_stateful_inputs(self, x: Any, apply: Tree, scope: Scope) -> None:
        """A RegisterAction (``apply``: its body; ``scope``: its parameters over its declaration's
        scope) reads the control's variables as PHV inputs: not one that holds a comparison (or
        &&, ||, !, ?:), which exists only as a gateway condition; and its Register's stateful
        ALU has two, for all the Register's RegisterActions together."""
        for sub in apply.iter_subtrees():
            if sub.data != "var":
                continue
            sym = scope.lookup(self.b.ck.name_of(sub.children[0]))
            if sym is not None and sym.kind == "var" and sym.code in self.computed_bools:
                raise self.err(
                    sub,
                    f"RegisterAction {x.name} reads {self.src(sub)}, a bool the control computed "
                    "from a comparison: a stateful ALU input is a PHV field (p4c-barefoot: "
                    "source of modify_field invalid); set it in the branches of an if",
                )
        own = set(scope.names) | {
            self.b.ck.name_of(d.children[2]) for d in apply.iter_subtrees() if d.data == "var_decl"
        }
        reg = x.register.name
        inputs = self.salu_inputs.setdefault(reg, {})

        def phv(node: Any) -> None:  # the outermost field or slice rooted at a control variable
            if not isinstance(node, Tree):
                return
            root = node
            while root.data in ("member", "slice"):
                root = root.children[0]
            if root.data == "var":
                ident = self.b.ck.name_of(root.children[0])
                sym = scope.lookup(ident)
                if ident not in own and sym is not None and sym.kind == "var":
                    inputs.setdefault(self.src(node), node)
                return
            for c in node.children:
                phv(c)

        phv(apply)
        if len(inputs) > SALU_INPUTS:
            raise self.err(
                list(inputs.values())[SALU_INPUTS],
                f"the RegisterActions of {reg} read {len(inputs)} PHV inputs "
                f"({', '.join(inputs)}) but a stateful ALU takes {SALU_INPUTS} (p4c-barefoot: "
                f"{reg} requires more than {SALU_INPUTS} PHV inputs); split them over "
                "RegisterActions on exclusive paths, or compute one input in an action",
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
