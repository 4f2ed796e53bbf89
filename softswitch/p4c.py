"""``kvswitch p4c``: what p4c-bm2-ss gives a P4Runtime user, from P4 source, with this target.

    kvswitch p4c [-D NAME=VAL] [-I DIR] [-o prog.json] [--p4runtime-files prog.p4info.txtpb]
                 [--device-config prog.bin] prog.p4

Options are spelled as p4c's:
- ``--p4runtime-files`` writes the P4Info, one file per comma-separated name, its format from the
  extension as p4c chooses it: ``.txt``/``.txtpb`` protobuf text, ``.json`` JSON, anything else
  binary.
- ``-o`` writes a BMv2-style JSON: what BMv2's own tools read (actions, tables and their keys,
  counters, registers, meters, as ``bm_get_config`` hands them to simple_switch_CLI) with the
  P4 source bundle inside. The software switch runs it (``kvswitch switch prog.json``, or as the
  device config of SetForwardingPipelineConfig); BMv2 cannot (it needs p4c-bm2-ss's JSON, which
  the software switch runs too).
- ``--device-config`` writes the P4 source bundle alone (``softswitch-p4-source/1``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from google.protobuf import json_format, text_format

from softswitch.errors import P4Error
from softswitch.main import Parser, add_preprocessor_options
from softswitch.runtime.bundle import BUNDLE_KEY, Bundle
from softswitch.runtime.cli_json import cli_json
from softswitch.runtime.p4info_index import P4InfoIndex


def p4info_bytes(info: object, path: str) -> bytes:
    """The P4Info in the format p4c picks for ``path``'s extension."""
    suffix = Path(path).suffix.lower()
    if suffix in (".txt", ".txtpb"):
        return text_format.MessageToString(info).encode()  # type: ignore[arg-type]
    if suffix == ".json":
        return json_format.MessageToJson(info).encode()  # type: ignore[arg-type]
    return info.SerializeToString()  # type: ignore[attr-defined, no-any-return]


def bmv2_style_json(bundle: Bundle, index: P4InfoIndex) -> bytes:
    doc = json.loads(cli_json(index))
    doc[BUNDLE_KEY] = json.loads(bundle.to_bytes())
    return json.dumps(doc, indent=1).encode()


def parser() -> Parser:
    p = Parser(prog="kvswitch p4c", description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="P4-16 v1model program")
    p.add_argument("-o", dest="output", metavar="FILE", help="BMv2-style JSON (runnable here)")
    p.add_argument(
        "--p4runtime-files",
        metavar="FILES",
        help="comma-separated P4Info files: .txt/.txtpb text, .json JSON, else binary",
    )
    p.add_argument("--device-config", metavar="FILE", help="the P4 source bundle alone")
    add_preprocessor_options(p)
    p.add_argument("--std", choices=("p4-16",), default="p4-16", help="language (p4-16 only)")
    p.add_argument("--arch", choices=("v1model",), default="v1model", help="architecture")
    p.add_argument("--target", choices=("bmv2",), default="bmv2", help="target (as p4c's)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        bundle = Bundle.from_file(args.source, dict(args.defines), args.includes)
        switch = bundle.compile()
    except P4Error as exc:
        print(f"kvswitch p4c: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"kvswitch p4c: cannot read {args.source}: {exc}", file=sys.stderr)
        return 1
    outputs: list[tuple[str, bytes]] = []
    for name in filter(None, (args.p4runtime_files or "").split(",")):
        outputs.append((name, p4info_bytes(switch.p4info, name)))
    if args.output:
        outputs.append((args.output, bmv2_style_json(bundle, P4InfoIndex(switch.p4info))))
    if args.device_config:
        outputs.append((args.device_config, bundle.to_bytes()))
    for name, data in outputs:
        try:
            Path(name).write_bytes(data)
        except OSError as exc:
            print(f"kvswitch p4c: cannot write {name}: {exc.strerror}", file=sys.stderr)
            return 1
    return 0
