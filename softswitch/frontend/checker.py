"""Declaration checker: collects and checks the program's global declarations (types, constants,
errors, match kinds, externs, parsers, controls, packages) and resolves type references.

Expressions and statements are typed by the engine's translator (softswitch.engine.codegen), which
checks them while it generates code, so a program is typed exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from lark import Token, Tree

from softswitch.errors import P4Error
from softswitch.frontend.preprocessor import Preprocessed
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
)


@dataclass
class Sym:
    """A name in a scope."""

    kind: str  # var | const | action | table | extern | control_inst | block | func
    type: P4Type | None = None
    code: str = ""  # Python expression for a var
    value: Any = None  # constant value / declaration object
    lvalue: bool = False


class Scope:
    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Sym] = {}
        self.types: dict[str, P4Type] = {}

    def lookup(self, name: str) -> Sym | None:
        s: Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def lookup_type(self, name: str) -> P4Type | None:
        s: Scope | None = self
        while s is not None:
            if name in s.types:
                return s.types[name]
            s = s.parent
        return None

    def bind(self, name: str, sym: Sym) -> bool:
        """Declare ``name`` here; False if this scope already declares it (p4c rejects that)."""
        if name in self.names and not (sym.kind == "func" and self.names[name].kind == "func"):
            return False
        self.names[name] = sym
        return True

    def root(self) -> Scope:
        s = self
        while s.parent is not None:
            s = s.parent
        return s


# evaluates a constant expression of the wanted type: (checker, expression, scope, type) -> value
ConstEval = Callable[["Checker", Tree, Scope, P4Type], Any]


@dataclass
class Decl:
    """A parser, control, extern or package declaration kept for later instantiation."""

    kind: str
    name: str
    tree: Tree
    annotations: dict[str, list[Any]] = field(default_factory=dict)


class Checker:
    """Global declarations and type resolution; locations map back through the preprocessor."""

    def __init__(
        self,
        tree: Tree,
        pre: Preprocessed,
        const_eval: ConstEval,
        packages: Collection[str] = (),
    ) -> None:
        self.tree = tree
        self.pre = pre
        # the one expression typer is the translator's (engine/codegen.py eval_const): the caller
        # hands it over, so that the frontend does not import the engine
        self.const_eval = const_eval
        # the package types an architecture runs (V1Switch, Switch): their instance is `main`
        self.packages = packages
        self.globals = Scope()
        self.errors: dict[str, int] = {}
        self.match_kinds: set[str] = set()
        self.decls: dict[str, Decl] = {}
        self.extern_funcs: dict[str, list[Tree]] = {}
        self.main: Tree | None = None

    # ------------------------------------------------------------ locations / errors
    def where(self, node: Tree | Token | None) -> tuple[str, int, int]:
        line, col = 0, 0
        if isinstance(node, Token):
            line, col = node.line or 0, node.column or 0
        elif isinstance(node, Tree) and not node.meta.empty:
            line, col = node.meta.line, node.meta.column
        elif isinstance(node, Tree):
            for c in node.children:
                if isinstance(c, (Tree, Token)):
                    f, ln, cl = self.where(c)
                    if ln:
                        return f, ln, cl
        file, oline = self.pre.origin(line)
        return file, oline, col

    def error(self, node: Tree | Token | None, msg: str) -> P4Error:
        return P4Error(msg, *self.where(node))

    def bind(self, scope: Scope, name: str, sym: Sym, node: Tree | Token | None) -> None:
        if not scope.bind(name, sym):
            raise self.error(node, f"re-declaration of {name}")

    def bind_type(self, scope: Scope, name: str, t: P4Type, node: Tree | Token | None) -> None:
        old = scope.types.get(name)
        # a typedef repeating the same type is accepted (p4c compiles programs that repeat
        # v1model's `typedef bit<9> PortId_t`); anything else is a re-declaration
        if old is not None and not (isinstance(old, BitT) and old == t):
            raise self.error(node, f"re-declaration of type {name}")
        scope.types[name] = t

    # ------------------------------------------------------------ annotations
    def annotations(self, node: Tree | None) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        if node is None:
            return out
        for ann in node.children:
            name = self.name_of(ann.children[0])
            args: list[Any] = []
            if ann.children[1] is not None:
                for a in ann.children[1].children:
                    if a is None:
                        continue
                    if isinstance(a, Tree) and a.data == "string_lit":
                        args.append(str(a.children[0])[1:-1])
                    elif isinstance(a, Tree) and a.data == "int_lit":
                        args.append(parse_int(str(a.children[0]))[0])
                    elif isinstance(a, Tree) and a.data == "var":
                        args.append(self.name_of(a.children[0]))
                    else:
                        args.append(a)
            out[name] = args
        return out

    @staticmethod
    def name_of(node: Tree | Token) -> str:
        if isinstance(node, Token):
            v = str(node)
            return v
        if isinstance(node, Tree):
            return Checker.name_of(node.children[0])
        raise TypeError(node)

    # ------------------------------------------------------------ declarations pass
    def collect(self) -> None:
        for d in self.tree.children:
            self.declare(d, self.globals)

    def declare(self, d: Tree, scope: Scope) -> None:
        k = d.data
        if k == "empty_decl":
            return
        if k == "error_decl":
            for n in d.children[0].children:
                if n is None:
                    continue
                name = self.name_of(n)
                if name not in self.errors:
                    self.errors[name] = len(self.errors)
        elif k == "match_kind_decl":
            for n in d.children[0].children:
                if n is not None:
                    self.match_kinds.add(self.name_of(n))
        elif k in ("header_decl", "struct_decl", "header_union_decl"):
            anns = self.annotations(d.children[0])
            name = str(d.children[1])
            kind = {"header_decl": "header", "struct_decl": "struct"}.get(k, "header_union")
            t = StructLikeT(name, [], kind, anns)
            self.bind_type(scope, name, t, d)
            seen: set[str] = set()
            for f in d.children[2:]:
                ft = self.resolve_type(f.children[1], scope)
                fname = self.name_of(f.children[2])
                if fname in seen:
                    raise self.error(f, f"duplicate field {fname} in {name}")
                seen.add(fname)
                nested_ok = (
                    isinstance(ft, StructLikeT)
                    and ft.kind == "struct"
                    and all(isinstance(x, (BitT, BoolT, EnumT)) for _n, x in ft.flat_fields())
                )
                if (
                    kind == "header"
                    and not nested_ok
                    and not isinstance(ft, (BitT, VarbitT, EnumT, BoolT))
                ):
                    raise self.error(
                        f,
                        f"header field {fname} must be bit<>, int<>, varbit<>, bool or a serializable enum, not {ft.show()}",
                    )
                if kind == "header" and isinstance(ft, EnumT) and ft.underlying is None:
                    raise self.error(
                        f, f"header field {fname}: enum {ft.name} has no underlying type"
                    )
                if kind == "header_union" and not (isinstance(ft, StructLikeT) and ft.is_header):
                    raise self.error(f, f"header_union field {fname} must be a header")
                if isinstance(ft, EnumT) and ft.underlying is not None and kind == "header":
                    pass
                t.fields.append((fname, ft))
                t.field_annotations[fname] = self.annotations(f.children[0])
        elif k == "typedef_decl" or k == "newtype_decl":
            t = self.resolve_type(d.children[1], scope)
            self.bind_type(scope, str(d.children[2]), t, d)
        elif k == "enum_decl":
            name = str(d.children[1])
            members = [self.name_of(n) for n in d.children[2].children if n is not None]
            self.bind_type(scope, name, EnumT(name, {m: i for i, m in enumerate(members)}), d)
        elif k == "ser_enum_decl":
            under = self.resolve_type(d.children[1], scope)
            if not isinstance(under, BitT):
                raise self.error(d, "the underlying type of an enum must be bit<> or int<>")
            name = str(d.children[2])
            members: dict[str, int] = {}
            for m in d.children[3].children:
                if m is None:
                    continue
                v = self.const_value(m.children[1], scope, under)
                members[self.name_of(m.children[0])] = v
            self.bind_type(scope, name, EnumT(name, members, under), d)
        elif k == "const_decl":
            t = self.resolve_type(d.children[1], scope)
            name = self.name_of(d.children[2])
            v = self.const_value(d.children[3], scope, t)
            self.bind(scope, name, Sym("const", t, value=v), d)
        elif k == "extern_decl":
            name = str(d.children[1])
            self.decls[name] = Decl("extern", name, d, self.annotations(d.children[0]))
            scope.types[name] = ExternT(name)
        elif k == "extern_func_decl":
            name = self.name_of(d.children[2])
            self.extern_funcs.setdefault(name, []).append(d)
            self.bind(scope, name, Sym("func", value=name), d)
        elif k in ("parser_decl", "control_decl"):
            name = str(d.children[1])
            kind = "parser" if k == "parser_decl" else "control"
            self.decls[name] = Decl(kind, name, d, self.annotations(d.children[0]))
            scope.types[name] = BlockT(name)
        elif k in ("parser_type_decl", "control_type_decl", "package_decl"):
            name = str(d.children[1])
            self.decls[name] = Decl(k.split("_")[0] + "_type", name, d)
            scope.types[name] = BlockT(name)
        elif k == "action_decl":
            name = self.name_of(d.children[1])
            self.bind(scope, name, Sym("action", value=(d, scope, "")), d)
        elif k == "instantiation":
            tname = d.children[1]
            name = self.name_of(d.children[3])
            pkg = str(tname.children[0]) if tname.data in ("named_type", "specialized_type") else ""
            decl = self.decls.get(pkg)
            if pkg in self.packages and decl is not None and decl.kind == "package_type":
                # the architecture is chosen from main's package (V1Switch: v1model, Switch: TNA)
                if name != "main":
                    raise self.error(d, f"the {pkg} package instance must be called main")
                self.main = d
            else:
                self.bind(scope, name, Sym("global_inst", value=d), d)
        elif k == "function_decl":
            if d.children[3] is not None:
                raise self.error(d, "generic functions are not supported by this target")
            self.bind(scope, str(d.children[2]), Sym("function", value=(d, scope)), d)
        else:
            raise self.error(d, f"unsupported declaration ({k})")

    # ------------------------------------------------------------ types
    def resolve_type(self, node: Tree, scope: Scope) -> P4Type:
        k = node.data
        if k == "type_ref":
            return self.resolve_type(node.children[0], scope)
        if k == "bool_type":
            return BoolT()
        if k == "error_type":
            return ErrorT()
        if k == "string_type":
            return StringT()
        if k == "int_type":
            return IntT()
        if k == "bit1_type":
            return BitT(1)
        if k == "void_type":
            return VoidT()
        if k in ("bit_type", "signed_type", "varbit_type"):
            w = self.width(trees(node)[0], scope)
            if k == "varbit_type":
                return VarbitT(w)
            if w <= 0 and not (w == 0 and k == "bit_type"):
                raise self.error(node, f"invalid width {w}")
            return BitT(w, k == "signed_type")
        if k == "named_type":
            name = str(node.children[0])
            t = scope.lookup_type(name)
            if t is None:
                if name in self.decls:
                    return BlockT(name)
                return TypeVarT(name)
            return t
        if k == "specialized_type":
            name = str(node.children[0])
            args = [self.resolve_type(a, scope) for a in trees(node)[0].children]
            base = scope.lookup_type(name)
            if isinstance(base, ExternT):
                return ExternT(name, args)
            return BlockT(name)
        if k == "stack_type":
            elem = self.resolve_type(node.children[0], scope)
            n = self.const_value(node.children[1], scope, IntT())
            if not (isinstance(elem, StructLikeT) and elem.is_header):
                raise self.error(node, "header stacks must have header elements")
            return StackT(elem, n)
        if k == "dontcare_type":
            return TypeVarT("_")
        if k == "tuple_type":
            return ListT([self.resolve_type(a, scope) for a in trees(node)[0].children])
        raise self.error(node, f"unsupported type ({k})")

    def width(self, node: Tree, scope: Scope) -> int:
        if node.data == "width_int":
            return parse_int(str(node.children[0]))[0]
        if node.data == "width_expr":
            return self.const_value(node.children[0], scope, IntT())
        name = str(node.children[0])
        s = scope.lookup(name)
        if s is None or s.kind != "const" or not isinstance(s.value, int):
            raise self.error(node, f"width {name} is not an integer constant")
        return s.value

    def const_value(self, expr: Tree, scope: Scope, want: P4Type) -> Any:
        """Evaluate a compile-time constant expression (the translator does the typing)."""
        return self.const_eval(self, expr, scope, want)


def trees(node: Tree) -> list[Tree]:
    """The sub-trees of a node (tokens such as keywords and brackets left out)."""
    return [c for c in node.children if isinstance(c, Tree)]


def parse_int(text: str) -> tuple[int, BitT | None]:
    """Parse a P4 integer literal: 42, 0x2a, 8w42, 8s-1 style width prefixes."""
    t = text.replace("_", "")
    width: BitT | None = None
    import re

    m = re.match(r"(\d+)([ws])(.*)$", t)
    if m:
        width = BitT(int(m.group(1)), m.group(2) == "s")
        t = m.group(3)
    low = t.lower()
    if low.startswith("0x"):
        v = int(low[2:], 16)
    elif low.startswith("0b"):
        v = int(low[2:], 2)
    elif low.startswith("0o"):
        v = int(low[2:], 8)
    elif low.startswith("0d"):
        v = int(low[2:], 10)
    else:
        v = int(low, 10)
    return v, width
