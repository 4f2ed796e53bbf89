// KVSwitch spine, v1model top level (docs/fabric.md "Spine program"). A spine of a leaf-spine
// fabric serializes the fabric-hot keys: for each of them it runs the rack's rules 1-6
// (docs/protocol.md, "Many racks" F2) over holders in any rack, with the leaf's pipeline and
// feature files. What differs is chosen by KVS_SPINE in the files themselves:
//   - shared/sizes.p4: servers of the whole fabric (MAX_SERVERS), holders per key (MAX_HOLDERS);
//   - features/replicas.p4: ServeroffsetTable keyed (slot, server address) -> (ordinal, leaf port),
//     valid_ver indexed (slot, ordinal); rule 6 judges every read reply but the origin's;
//   - features/multicast.p4: write copies told apart by replication id (RidtoserverTable), since
//     all servers of a rack sit behind one leaf port;
//   - no HashPipe: the rack controllers find the candidates; a spine counts its own hot keys.
// Build options: as kvswitch.p4 (-DHOT_KEYS=.. -DMAX_SERVERS=.. -DMAX_HOLDERS=..).
#define KVS_SPINE

#include "kvswitch.p4"
