"""P4 types of the supported subset, as the checker and the engine see them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class P4Type:
    """Base of all types."""

    def show(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class BitT(P4Type):
    width: int
    signed: bool = False

    def show(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"


@dataclass(frozen=True)
class IntT(P4Type):
    """Arbitrary-precision integer: literals and ``const int`` values."""

    def show(self) -> str:
        return "int"


@dataclass(frozen=True)
class BoolT(P4Type):
    def show(self) -> str:
        return "bool"


@dataclass(frozen=True)
class StringT(P4Type):
    def show(self) -> str:
        return "string"


@dataclass(frozen=True)
class VoidT(P4Type):
    def show(self) -> str:
        return "void"


@dataclass(frozen=True)
class ErrorT(P4Type):
    def show(self) -> str:
        return "error"


@dataclass(frozen=True)
class MatchKindT(P4Type):
    def show(self) -> str:
        return "match_kind"


@dataclass(frozen=True)
class VarbitT(P4Type):
    max_width: int

    def show(self) -> str:
        return f"varbit<{self.max_width}>"


@dataclass(eq=False)
class EnumT(P4Type):
    name: str
    members: dict[str, int]
    underlying: BitT | None = None

    def show(self) -> str:
        return self.name


@dataclass(eq=False)
class StructLikeT(P4Type):
    name: str
    fields: list[tuple[str, P4Type]] = field(default_factory=list)
    kind: str = "struct"  # struct | header | header_union
    annotations: dict[str, list[Any]] = field(default_factory=dict)
    field_annotations: dict[str, dict[str, list[Any]]] = field(default_factory=dict)

    def show(self) -> str:
        return self.name

    def field_type(self, name: str) -> P4Type | None:
        for n, t in self.fields:
            if n == name:
                return t
        return None

    @property
    def is_header(self) -> bool:
        return self.kind == "header"

    def flat_fields(self) -> list[tuple[str, P4Type]]:
        """Fields with the ones of nested structs spelled as dotted paths (``row.a``)."""
        out: list[tuple[str, P4Type]] = []
        for n, t in self.fields:
            if isinstance(t, StructLikeT) and t.kind == "struct":
                out += [(f"{n}.{m}", mt) for m, mt in t.flat_fields()]
            else:
                out.append((n, t))
        return out

    def bit_width(self) -> int:
        return sum(bit_width_of(t) or 0 for _, t in self.flat_fields())

    def varbit_field(self) -> tuple[int, str, int] | None:
        for i, (n, t) in enumerate(self.flat_fields()):
            if isinstance(t, VarbitT):
                return i, n, t.max_width
        return None


@dataclass(eq=False)
class StackT(P4Type):
    elem: StructLikeT
    size: int

    def show(self) -> str:
        return f"{self.elem.name}[{self.size}]"


@dataclass(eq=False)
class ListT(P4Type):
    """Type of a ``{a, b, c}`` list expression."""

    elems: list[P4Type]

    def show(self) -> str:
        return "{" + ", ".join(e.show() for e in self.elems) + "}"


@dataclass(eq=False)
class ExternT(P4Type):
    name: str
    type_args: list[P4Type] = field(default_factory=list)

    def show(self) -> str:
        if self.type_args:
            return f"{self.name}<{', '.join(t.show() for t in self.type_args)}>"
        return self.name


@dataclass(eq=False)
class TypeVarT(P4Type):
    name: str

    def show(self) -> str:
        return self.name


@dataclass(eq=False)
class BlockT(P4Type):
    """A parser, control or package type (used for parameters of packages)."""

    name: str

    def show(self) -> str:
        return self.name


def same_type(a: P4Type, b: P4Type) -> bool:
    if a is b:
        return True
    if isinstance(a, (BitT, BoolT, IntT, ErrorT, StringT, VarbitT, VoidT)):
        return a == b
    if isinstance(a, StackT) and isinstance(b, StackT):
        return a.size == b.size and same_type(a.elem, b.elem)
    return False


def bit_width_of(t: P4Type) -> int | None:
    """Width in bits of a scalar value of type ``t`` (None for non-scalars)."""
    if isinstance(t, BitT):
        return t.width
    if isinstance(t, BoolT):
        return 1
    if isinstance(t, EnumT) and t.underlying is not None:
        return t.underlying.width
    return None
