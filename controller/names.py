"""Control-plane names of the P4 program (``p4src/``), in one place.

Every table, action, action parameter, match field and register the controller touches is named
here and nowhere else, so aligning with the P4 program is a one-file change. The layout contracts
that the planner relies on are stated next to the names they concern.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

# Tables (``@name`` in the P4 program, identical on v1model and TNA).
HOTKEY_TABLE: Final = "HotkeyTable"  # key -> (slot, holders); direct counter = queries per hot key
KEYINDEX_TABLE: Final = "KeyindexTable"  # key -> base index of the key's row in valid_ver
SERVERMAP_TABLE: Final = "ServermapTable"  # (slot, ordinal) -> server; ordinal 0 is the origin
SERVEROFFSET_TABLE: Final = "ServeroffsetTable"  # server -> offset in the key's valid_ver row
MULTIGROUP_TABLE: Final = "MultigroupTable"  # key -> multicast group of its replicas
PORTTOSERVER_TABLE: Final = "PorttoserverTable"  # egress port -> server address (static)
# a spine's instead (docs/fabric.md "Spine program"): replication id -> server address (static)
RIDTOSERVER_TABLE: Final = "RidtoserverTable"
LOADCOUNT_TABLE: Final = "LoadcountTable"  # egress: direct counter per server
HOSTPORT_TABLE: Final = "HostportTable"  # source address -> its port, server or not (trust.p4)
REPLYCOUNT_TABLE: Final = (
    "ReplycountTable"  # replies by source server; direct counter (liveness.p4)
)
DOWN_TABLE: Final = "DownTable"  # request destination -> a server declared dead (liveness.p4)
# a fabric's leaf (steering.p4, docs/fabric.md "Leaf program")
FABRIC_HOT_TABLE: Final = "FabricHotTable"  # key -> its spine's port and MAC; default hold
SPINE_HOLD_TABLE: Final = "SpineHoldTable"  # a spine's, keyless; default hold until reinstalled
UPLINK_TABLE: Final = "UplinkTable"  # ingress port -> a port to a spine (static)

# Direct counters.
HOTKEY_COUNTER: Final = "hotkey_counter"

# Indexed counters.
HOTKEY_WRITES: Final = "hotkey_writes"  # [K] Sets and Deletes per hot-key slot
LOAD_COUNTER: Final = "load_counter"

# Actions and their parameters (docs/dataplane.md "Tables and what the controller installs").
ACT_SET_HOT: Final = "set_hot"  # (slot, n); a spine's (slot, n, rotate)
PARAM_SLOT: Final = "slot"
PARAM_HOLDERS: Final = "n"  # holders including the origin
PARAM_ROTATE: Final = "rotate"  # a spine's: 1 = the key's writes rotate (docs/protocol.md F7)
ACT_SET_BASE: Final = "set_key_index"  # (slot, base, floor)
PARAM_BASE: Final = "base"
PARAM_FLOOR: Final = "floor"  # confirms of versions <= floor are ignored (rule 3)
ACT_SET_SERVER: Final = "set_server"  # (vidx, ip, mac, port); vidx = base + offset(server)
PARAM_VIDX: Final = "vidx"
PARAM_IP: Final = "ip"
PARAM_MAC: Final = "mac"
PARAM_PORT: Final = "port"
ACT_SET_OFFSET: Final = "set_server_offset"  # (offset, port)
PARAM_OFFSET: Final = "offset"
ACT_SET_GROUP: Final = "set_mcast_group"  # (group)
PARAM_GROUP: Final = "group"
ACT_SET_REPLICA: Final = "set_replica"  # PorttoserverTable: (ip, mac)
ACT_COUNT_LOAD: Final = "count_load"  # LoadcountTable
ACT_COUNT_REPLY: Final = "count_reply"  # ReplycountTable
ACT_SET_DOWN: Final = "set_down"  # DownTable
ACT_SET_SOURCE: Final = "set_source"  # HostportTable: (port, server); server = 1 for a server
PARAM_SERVER: Final = "server"
ACT_SET_SPINE: Final = "set_spine"  # FabricHotTable: (port, dmac)
PARAM_DMAC: Final = "dmac"
ACT_HOLD: Final = "hold"  # FabricHotTable's (SpineHoldTable's) default until (re)installed
ACT_PASS: Final = "NoAction"  # ... and once it is
ACT_SET_UPLINK: Final = "set_uplink"  # UplinkTable

# Match fields.
MATCH_KEY: Final = "key"
MATCH_SLOT: Final = "slot"
MATCH_ORDINAL: Final = "ordinal"
MATCH_SERVER_IP: Final = "server_ip"
MATCH_PORT: Final = "port"
MATCH_RID: Final = "rid"  # RidtoserverTable
MATCH_DST: Final = "dst_addr"
MATCH_SRC: Final = "src_addr"

# Registers.
REG_RR: Final = "rr"  # [K] next round-robin turn of a slot
REG_SLOT_VER: Final = "slot_ver"  # [K] version of the newest write of the slot's key
REG_ORIGIN_VER: Final = "origin_ver"  # [K] newest version the origin acknowledged
REG_VALID_VER: Final = "valid_ver"  # [K*M] version each replica confirmed
REG_GLOBAL_VER: Final = "global_ver"  # [1]
# a spine's (docs/protocol.md F7): [K] ordinal of the holder whose report last raised origin_ver
REG_DONE_BY: Final = "done_by"
REG_ROTATED: Final = "rotated"  # a spine's: the last request's rotation flag, for its replies
REG_EPOCH: Final = "epoch"  # [1]


#: A HashPipe key is kept as this many 32-bit words, the first holding the key's first bytes
#: (p4src/features/hashpipe.p4: BMv2's Thrift API carries register cells as signed 64-bit ints).
HP_KEY_WORDS: Final = 4


def hp_stage(stage: int) -> str:
    """HashPipe stage ``stage``'s instance: its registers are named ``hp_stage<s>.<register>``."""
    return f"hp_stage{stage}"


def hp_stage_of(instance: str) -> int | None:
    """The stage whose instance name (:func:`hp_stage`) ``instance`` is; None for other names."""
    digits = instance.removeprefix(hp_stage(0)[:-1])
    return int(digits) if digits != instance and digits.isdigit() else None


def reg_hp_key(stage: int, word: int) -> str:
    """HashPipe key register ``word`` (0 = the key's first four bytes) of ``stage``."""
    return f"{hp_stage(stage)}.hp_key{word}"


def hp_key_from_words(words: Sequence[int]) -> bytes:
    """The 16-byte key of a HashPipe slot from its ``HP_KEY_WORDS`` words, first word first."""
    return b"".join(int(w).to_bytes(4, "big") for w in words)


def reg_hp_cnt(stage: int) -> str:
    """HashPipe count register of ``stage`` (a slot is empty when its count is 0)."""
    return f"{hp_stage(stage)}.hp_cnt"


def valid_base(slot: int, servers: int) -> int:
    """Base of ``slot``'s row in ``valid_ver`` (paper Figure 5: valid index = base + offset)."""
    return slot * servers


def multicast_group(slot: int) -> int:
    """Multicast group of the key in ``slot`` (group 0 is reserved: no group). The group holds the
    origin's port with replication id 0 and each replica's port with rid = its ordinal."""
    return slot + 1


def slot_of_group(group: int) -> int:
    """The slot whose key's multicast group is ``group`` (:func:`multicast_group`)."""
    return group - 1


def spine_rid(server: int) -> int:
    """A spine's replication id of the copy of a write to ``server`` (its number in the fabric):
    RidtoserverTable turns it back into the server's address; rid 0 is the origin's unchanged
    copy."""
    return server + 1
