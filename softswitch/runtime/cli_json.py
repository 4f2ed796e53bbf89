"""A BMv2-style JSON description of the loaded program, for ``simple_switch_CLI``.

The CLI asks the switch for its JSON (``bm_get_config``) and reads only the parts that tell it
how to parse commands: actions with their parameter widths, tables with their keys and match
kinds, counter/register/meter arrays. BMv2's JSON names a key by (header instance, field) and
looks the width up in the header type; we synthesise one header instance per table whose
fields are the table's keys (by their P4Info names).
"""

from __future__ import annotations

import json
from typing import Any

from softswitch.runtime.p4info_index import P4InfoIndex, TableInfo

# Key kinds the CLI knows; `optional` is entered as a ternary (value&&&mask, mask all ones or 0).
CLI_MATCH_KIND = {
    "exact": "exact",
    "lpm": "lpm",
    "ternary": "ternary",
    "range": "range",
    "optional": "ternary",
}


def table_match_type(table: TableInfo) -> str:
    kinds = {CLI_MATCH_KIND[k.kind] for k in table.keys}
    for kind in ("range", "ternary", "lpm"):
        if kind in kinds:
            return kind
    return "exact"


def header_name(table: TableInfo) -> str:
    """One synthetic header instance per table, so that key names never collide."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in table.name)


def cli_json(index: P4InfoIndex) -> str:
    headers: dict[str, dict[str, int]] = {}  # instance -> field -> width
    tables = []
    for table in index.tables.values():
        keys = []
        for k in table.keys:
            inst, fld = header_name(table), k.name.replace(".", "_")
            headers.setdefault(inst, {})[fld] = k.bitwidth
            keys.append(
                {
                    "match_type": CLI_MATCH_KIND[k.kind],
                    "name": k.name,
                    "target": [inst, fld],
                    "mask": None,
                }
            )
        dc = index.table_direct_counter(table)
        tables.append(
            {
                "name": table.name,
                "id": len(tables),
                "key": keys,
                "match_type": table_match_type(table),
                "type": "simple",
                "max_size": table.size,
                "with_counters": dc is not None,
                "support_timeout": False,
                "direct_meters": None,
                "action_ids": [index.actions[a].id for a in table.action_ids if a in index.actions],
                "actions": [index.actions[a].name for a in table.action_ids if a in index.actions],
            }
        )
    doc: dict[str, Any] = {
        "program": "softswitch",
        "__meta__": {"version": [2, 23], "compiler": "softswitch"},
        "header_types": [
            {"name": f"{inst}_t", "id": i, "fields": [[f, w, False] for f, w in fields.items()]}
            for i, (inst, fields) in enumerate(headers.items())
        ],
        "headers": [
            {"name": inst, "id": i, "header_type": f"{inst}_t", "metadata": True, "pi_omit": True}
            for i, inst in enumerate(headers)
        ],
        "actions": [
            {
                "name": a.name,
                "id": i,
                "runtime_data": [{"name": p.name, "bitwidth": p.bitwidth} for p in a.params],
                "primitives": [],
            }
            for i, a in enumerate(index.actions.values())
        ],
        "pipelines": [
            {
                "name": "ingress",
                "id": 0,
                "init_table": None,
                "tables": tables,
                "action_profiles": [],
                "conditionals": [],
            }
        ],
        "counter_arrays": [
            {"name": c.name, "id": i, "is_direct": False, "size": c.size}
            for i, c in enumerate(index.counters.values())
        ]
        + [
            {
                "name": c.name,
                "id": len(index.counters) + i,
                "is_direct": True,
                "binding": index.tables[c.table_id].name,
            }
            for i, c in enumerate(index.direct_counters.values())
            if c.table_id in index.tables
        ],
        "register_arrays": [
            {"name": r.name, "id": i, "size": r.size, "bitwidth": r.bitwidth}
            for i, r in enumerate(index.registers.values())
        ],
        "meter_arrays": [
            {
                "name": m.preamble.name,
                "id": i,
                "is_direct": False,
                "size": m.size,
                "rate_count": 2,
                "type": "bytes" if m.spec.unit == 1 else "packets",
            }
            for i, m in enumerate(index.info.meters)
        ],
        "calculations": [],
        "parse_vsets": [],
        "learn_lists": [],
    }
    return json.dumps(doc, indent=1)
