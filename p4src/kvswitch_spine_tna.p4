// KVSwitch spine, TNA top level: kvswitch_tna.p4 built as a spine, as kvswitch_spine.p4 is
// kvswitch.p4 built as one (read it for what differs). Same tables, actions, registers and counters
// as the v1model spine.
#define KVS_SPINE

#include "kvswitch_tna.p4"
