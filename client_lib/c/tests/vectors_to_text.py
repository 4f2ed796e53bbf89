"""Turn the shared vectors (tests/vectors/*.json) into lines the C tests read with sscanf.

usage: python3 vectors_to_text.py VECTOR_DIR > vectors.txt

Lines (hex strings, "-" for an empty one):
  hash <input_hex> <fnv1a64> <hash>
  case <servers> <vnodes> <key_hex> <key16_hex> <position> <origin>
  mring <vnodes> <id,id,...> <key16_hex> <origin>   (consistent_hash.json "member_rings")
  msg <name> <op> <status> <vlen> <cid> <seq> <epoch> <flags> <ver> <key_hex> <value_hex>
      <bytes_hex>   (all on one line)
  bad <name> <bytes_hex>
  const <name> <value>
A vector file that is missing yields a "missing <file>" line, a missing "member_rings" section a
"missing member_rings" line; the C test then skips that part with a message.
"""

import json
import sys
from pathlib import Path


def h(text: str) -> str:
    return text if text else "-"


def main(argv: list[str]) -> int:
    folder = Path(argv[1])
    out: list[str] = []
    ch = folder / "consistent_hash.json"
    if ch.is_file():
        data = json.loads(ch.read_text())
        for e in data["hashes"]:
            out.append(f"hash {h(e['input_hex'])} {e['fnv1a64']} {e['hash']}")
        for c in data["cases"]:
            out.append(
                f"case {c['servers']} {c['vnodes']} {h(c['key_hex'])} {c['key16_hex']} "
                f"{c['position']} {c['origin']}"
            )
        rings = data.get("member_rings")
        if rings is None:
            out.append("missing member_rings")
        for r in rings or []:
            ids = ",".join(str(i) for i in r["members"])
            for key_hex, origin in r["origins"].items():  # application key -> origin id
                key16 = key_hex.ljust(32, "0")  # right-padded with zero bytes to 16
                out.append(f"mring {r['vnodes']} {ids} {key16} {origin}")
    else:
        out.append("missing consistent_hash.json")
        out.append("missing member_rings")
    ms = folder / "messages.json"
    if ms.is_file():
        data = json.loads(ms.read_text())
        out.append(f"const header_len {data['header_len']}")
        out.append(f"const kvs_port {data['kvs_port']}")
        out.append(f"const max_value {data['max_value']}")
        for name, value in data["ops"].items():
            out.append(f"const op_{name} {value}")
        for name, value in data["statuses"].items():
            out.append(f"const status_{name} {value}")
        for name, value in data.get("flags", {}).items():
            out.append(f"const flag_{name} {value}")
        for m in data["messages"]:
            fields = " ".join(
                str(m[k]) for k in ("op", "status", "vlen", "cid", "seq", "epoch", "flags", "ver")
            )
            out.append(
                f"msg {m['name']} {fields} {m['key_hex']} {h(m['value_hex'])} {h(m['bytes_hex'])}"
            )
        for b in data["malformed"]:
            out.append(f"bad {b['name']} {h(b['bytes_hex'])}")
    else:
        out.append("missing messages.json")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
