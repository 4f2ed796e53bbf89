"""P4Info generation with p4c's id scheme (control-plane/p4RuntimeSymbolTable.cpp).

id = (resource-type prefix << 24) | (jenkins one-at-a-time hash of the fully-qualified name & 0xffffff),
assigned in sorted name order per resource type, collisions resolved by linear probing; an ``@id``
annotation wins (its prefix byte is added if missing). Aliases are the shortest unique suffixes.
"""

from __future__ import annotations

from typing import Any

from finsy.proto import p4i
from google.protobuf import text_format

from softswitch.engine.program import Program
from softswitch.frontend.types import BitT, BoolT, bit_width_of

PREFIX = {
    "action": 0x01,
    "table": 0x02,
    "value_set": 0x03,
    "controller_header": 0x04,
    "counter": 0x12,
    "direct_counter": 0x13,
    "meter": 0x14,
    "direct_meter": 0x15,
    "register": 0x16,
    "digest": 0x17,
}

MATCH_TYPES = {
    "exact": p4i.MatchField.EXACT,
    "lpm": p4i.MatchField.LPM,
    "ternary": p4i.MatchField.TERNARY,
    "range": p4i.MatchField.RANGE,
    "optional": p4i.MatchField.OPTIONAL,
}

COUNTER_UNITS = {
    "packets": p4i.CounterSpec.PACKETS,
    "bytes": p4i.CounterSpec.BYTES,
    "packets_and_bytes": p4i.CounterSpec.BOTH,
}


def jenkins_one_at_a_time(data: bytes) -> int:
    h = 0
    for b in data:
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


def assign_ids(
    kind: str, names: list[str], fixed: dict[str, int], taken: set[int]
) -> dict[str, int]:
    prefix = PREFIX[kind]
    out: dict[str, int] = {}
    for n, i in fixed.items():
        if i >> 24 == 0:
            i |= prefix << 24
        out[n] = i
        taken.add(i)
    for n in sorted(set(names) - set(fixed)):
        h = jenkins_one_at_a_time(n.encode())
        while True:
            i = (prefix << 24) | (h & 0xFFFFFF)
            if i not in taken:
                break
            h += 1
        out[n] = i
        taken.add(i)
    return out


def aliases(names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    parts = {n: n.split(".") for n in names}
    for n, comps in parts.items():
        for k in range(1, len(comps) + 1):
            suffix = comps[-k:]
            if sum(1 for o in parts.values() if o[-k:] == suffix) < 2:
                out[n] = ".".join(suffix)
                break
        else:
            out[n] = n
    return out


def _id_ann(anns: dict[str, list[Any]]) -> int | None:
    if anns.get("id"):
        return int(anns["id"][0])
    return None


def _preamble(msg: Any, pid: int, name: str, alias: str, anns: dict[str, list[Any]]) -> None:
    msg.preamble.id = pid
    msg.preamble.name = name
    msg.preamble.alias = alias
    for k, v in anns.items():
        if k in ("name", "id"):
            continue
        if v:
            args = ", ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in v)
            msg.preamble.annotations.append(f"@{k}({args})")
        else:
            msg.preamble.annotations.append(f"@{k}")


def build_p4info(prog: Program) -> Any:
    info = p4i.P4Info()
    info.pkg_info.arch = prog.arch
    taken: set[int] = set()
    all_names: list[str] = []

    # actions referenced by tables or present in the program
    actions = dict(prog.actions)
    act_ids = assign_ids(
        "action",
        list(actions),
        {n: i for n, a in actions.items() if (i := _id_ann(a.annotations)) is not None},
        taken,
    )
    tbl_ids = assign_ids(
        "table",
        list(prog.tables),
        {n: i for n, t in prog.tables.items() if (i := _id_ann(t.annotations)) is not None},
        taken,
    )
    by_kind: dict[str, dict[str, int]] = {}
    for kind in ("counter", "direct_counter", "register", "meter", "direct_meter"):
        xs = {n: x for n, x in prog.externs.items() if x.kind == kind}
        by_kind[kind] = assign_ids(
            kind,
            list(xs),
            {n: i for n, x in xs.items() if (i := _id_ann(x.annotations)) is not None},
            taken,
        )
    ch_ids = assign_ids("controller_header", [n for n, _ in prog.controller_headers], {}, taken)
    vs_ids = assign_ids("value_set", list(prog.value_sets), {}, taken)
    dg_ids = assign_ids("digest", list(prog.digests), {}, taken)
    all_names = list(actions) + list(prog.tables) + [n for d in by_kind.values() for n in d]
    alias = aliases(
        sorted(
            set(all_names)
            | {n for n, _ in prog.controller_headers}
            | set(prog.value_sets)
            | set(prog.digests)
        )
    )

    for n in sorted(actions, key=lambda x: act_ids[x]):
        a = actions[n]
        msg = info.actions.add()
        _preamble(msg, act_ids[n], n, alias[n], a.annotations)
        # directional parameters are bound in the program, only directionless ones are in P4Info
        for i, (pname, _d, pt) in enumerate([x for x in a.params if not x[1]], 1):
            p = msg.params.add()
            p.id = i
            p.name = pname
            p.bitwidth = bit_width_of(pt) or 0
    for n in sorted(prog.tables, key=lambda x: tbl_ids[x]):
        t = prog.tables[n]
        msg = info.tables.add()
        _preamble(msg, tbl_ids[n], n, alias[n], t.annotations)
        for i, (kname, kind, e) in enumerate(t.keys, 1):
            mf = msg.match_fields.add()
            mf.id = i
            mf.name = kname
            assert isinstance(e.type, BitT)
            mf.bitwidth = e.type.width
            mf.match_type = MATCH_TYPES[kind]
        for a, scope, anns in t.actions:
            ref = msg.action_refs.add()
            ref.id = act_ids[a.name]
            if scope == "tableonly":
                ref.scope = p4i.ActionRef.TABLE_ONLY
            elif scope == "defaultonly":
                ref.scope = p4i.ActionRef.DEFAULT_ONLY
            for k in anns:
                if k not in ("tableonly", "defaultonly"):
                    ref.annotations.append(f"@{k}")
        if t.default_const:
            msg.const_default_action_id = act_ids[t.actions[t.default[0]][0].name]
        if t.counters is not None:
            msg.direct_resource_ids.append(by_kind["direct_counter"][t.counters.name])
        if t.meter is not None:
            msg.direct_resource_ids.append(by_kind["direct_meter"][t.meter.name])
        msg.size = t.size
        if t.has_const_entries:
            msg.is_const_table = True
            msg.has_initial_entries = True
    for kind, field in (("counter", info.counters), ("direct_counter", info.direct_counters)):
        ids = by_kind[kind]
        for n in sorted(ids, key=lambda x: ids[x]):
            x = prog.externs[n]
            msg = field.add()
            _preamble(msg, ids[n], n, alias[n], x.annotations)
            msg.spec.unit = COUNTER_UNITS[x.counter_type]
            if kind == "counter":
                msg.size = x.size
            elif x.table:
                msg.direct_table_id = tbl_ids[x.table]
    ids = by_kind["meter"]
    for n in sorted(ids, key=lambda x: ids[x]):
        x = prog.externs[n]
        msg = info.meters.add()
        _preamble(msg, ids[n], n, alias[n], x.annotations)
        msg.spec.unit = p4i.MeterSpec.BYTES if x.counter_type == "bytes" else p4i.MeterSpec.PACKETS
        msg.size = x.size
    ids = by_kind["direct_meter"]
    for n in sorted(ids, key=lambda x: ids[x]):
        x = prog.externs[n]
        msg = info.direct_meters.add()
        _preamble(msg, ids[n], n, alias[n], x.annotations)
        msg.spec.unit = p4i.MeterSpec.BYTES if x.counter_type == "bytes" else p4i.MeterSpec.PACKETS
        if x.table:
            msg.direct_table_id = tbl_ids[x.table]
    ids = by_kind["register"]
    for n in sorted(ids, key=lambda x: ids[x]):
        x = prog.externs[n]
        msg = info.registers.add()
        _preamble(msg, ids[n], n, alias[n], x.annotations)
        if x.members:  # a paired register (TNA): its struct, as p4c describes a struct type
            msg.type_spec.struct.name = x.struct_name
            st = info.type_info.structs[x.struct_name]
            if not st.members:
                for mname, w in x.members:
                    m = st.members.add()
                    m.name = mname
                    m.type_spec.bitstring.bit.bitwidth = w
        else:
            msg.type_spec.bitstring.bit.bitwidth = x.width
        msg.size = x.size
    for name, t in prog.controller_headers:
        msg = info.controller_packet_metadata.add()
        _preamble(msg, ch_ids[name], name, alias.get(name, name), {})
        for i, (fname, ft) in enumerate(t.fields, 1):
            md = msg.metadata.add()
            md.id = i
            md.name = fname
            md.bitwidth = bit_width_of(ft) or 0
    for n in sorted(vs_ids, key=lambda x: vs_ids[x]):
        vs = prog.value_sets[n]
        msg = info.value_sets.add()
        _preamble(msg, vs_ids[n], n, alias[n], {})
        mf = msg.match.add()
        mf.id = 1
        mf.bitwidth = vs.width
        mf.match_type = p4i.MatchField.TERNARY
        msg.size = vs.size
    for n in sorted(dg_ids, key=lambda x: dg_ids[x]):
        msg = info.digests.add()
        _preamble(msg, dg_ids[n], n, alias[n], {})
        # v1model names a digest by its struct; TNA by its Digest instance (bf-p4c)
        msg.type_spec.struct.name = prog.digests[n].name
        st = info.type_info.structs[prog.digests[n].name]
        for fname, ft in prog.digests[n].fields:
            m = st.members.add()
            m.name = fname
            if isinstance(ft, BoolT):
                m.type_spec.bool.SetInParent()
            else:
                m.type_spec.bitstring.bit.bitwidth = bit_width_of(ft) or 0
    for name in sorted(prog.serializable_enums):
        et = prog.serializable_enums[name]
        assert et.underlying is not None
        w = et.underlying.width
        spec = info.type_info.serializable_enums[name]
        spec.underlying_type.bitwidth = w
        for mname, value in et.members.items():
            m = spec.members.add()
            m.name = mname
            m.value = (value & ((1 << w) - 1)).to_bytes((w + 7) // 8, "big")
    return info


def p4info_text(info: Any) -> str:
    """The P4Info in protobuf text format (what p4c writes with --p4runtime-files x.txt)."""
    return text_format.MessageToString(info)
