// KVSwitch leaf of a fabric, TNA top level: kvswitch_tna.p4 built as a fabric's leaf, as
// kvswitch_leaf.p4 is kvswitch.p4 built as one (read it for what differs).
#define KVS_FABRIC_LEAF

#include "kvswitch_tna.p4"
