// KVSwitch leaf of a fabric, v1model top level (docs/fabric.md "Leaf program"): the rack's switch
// of kvswitch.p4, plus the steering of the fabric-hot keys to their spines and the uplinks' trust
// (features/steering.p4, docs/protocol.md F3 and F5). With FabricHotTable's default action set to
// NoAction and no entries it forwards exactly as kvswitch.p4 (tests/dataplane/test_fabric_leaf.py).
// Build options: as kvswitch.p4, and -DFABRIC_KEYS=.. -DUPLINKS=.. (steering.p4).
#define KVS_FABRIC_LEAF

#include "kvswitch.p4"
