// Every table and register size of the KVSwitch data plane. Each one is #ifndef-guarded so a build
// (or a test) can override it: `-DHOT_KEYS=64 -DMAX_SERVERS=8`.
#ifndef KVSWITCH_SIZES_P4
#define KVSWITCH_SIZES_P4

// K: hot-key slots (HotkeyTable, KeyindexTable, MultigroupTable entries; slot_ver, origin_ver and
// rr registers). The paper uses 10 000 on Tofino; 1024 keeps a BMv2 build's registers and tables
// small (valid_ver alone is MAX_SERVERS * HOT_KEYS words) while covering the hot set of a rack.
#ifndef HOT_KEYS
#define HOT_KEYS 1024
#endif

// M: servers in the rack (ServeroffsetTable, PorttoserverTable, LoadcountTable entries; replica
// ordinals per key).
#ifndef MAX_SERVERS
#define MAX_SERVERS 32
#endif

// d: HashPipe stages (1 .. 8).
#ifndef HP_STAGES
#define HP_STAGES 4
#endif

// w: slots per HashPipe stage, about K / d, so HashPipe tracks as many cold candidates as there are
// hot slots (the controller compares 2K candidates per period). Always odd: CRC-32 is affine, so
// stage s's hash is one key hash XOR a per-stage constant; reduced mod a power of two, keys that
// collide in one stage would collide in every stage. Mod an odd w the stages are independent
// (tests/sim/test_model.py). kvswitch.bench.kernel.hashpipe_width computes the same number.
#ifndef HP_SLOTS
#define HP_SLOTS ((HOT_KEYS / HP_STAGES) | 1)
#endif

// IPv4 routes of ipv4_lpm.
#ifndef IPV4_ROUTES
#define IPV4_ROUTES 1024
#endif

// Widths. Everything slot-shaped derives from SLOT_W (K <= 2^SLOT_W); register indices are bit<32>.
#ifndef SLOT_W
#define SLOT_W 16
#endif
#ifndef ORDINAL_W
#define ORDINAL_W 8
#endif

#define VALID_VER_ENTRIES (HOT_KEYS * MAX_SERVERS)

#if HP_STAGES < 1 || HP_STAGES > 8
#error "HP_STAGES must be between 1 and 8"
#endif

#endif  // KVSWITCH_SIZES_P4
