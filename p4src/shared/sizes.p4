// Every table and register size of the KVSwitch data plane. Each one is #ifndef-guarded so a build
// (or a test) can override it: `-DHOT_KEYS=64 -DMAX_SERVERS=8`. The spine build (KVS_SPINE,
// kvswitch_spine.p4) has its own defaults: the servers of a whole fabric, holders per key apart.
#ifndef KVSWITCH_SIZES_P4
#define KVSWITCH_SIZES_P4

// K: hot-key slots (HotkeyTable, KeyindexTable, MultigroupTable entries; slot_ver, origin_ver and
// rr registers). The paper uses 10 000 on Tofino; 1024 keeps a BMv2 build's registers and tables
// small (valid_ver alone is MAX_SERVERS * HOT_KEYS words) while covering the hot set of a rack.
#ifndef HOT_KEYS
#define HOT_KEYS 1024
#endif

// M: servers in the rack (ServeroffsetTable, PorttoserverTable, LoadcountTable entries; replica
// ordinals per key). A spine: servers of the fabric (RidtoserverTable, LoadcountTable,
// ReplycountTable, DownTable entries).
#ifndef MAX_SERVERS
#ifdef KVS_SPINE
#define MAX_SERVERS 1024
#else
#define MAX_SERVERS 32
#endif
#endif

// H: holders of one hot key, origin included (ordinals 0 .. H-1 of ServermapTable; valid_ver
// columns per slot). A leaf's holders are its servers (H = M, valid_ver indexed by (slot, server));
// a spine's are any servers of the fabric, so it indexes valid_ver by (slot, ordinal) and keeps
// H columns per slot, not M (docs/fabric.md "Spine program").
#ifndef MAX_HOLDERS
#ifdef KVS_SPINE
#define MAX_HOLDERS 64
#else
#define MAX_HOLDERS MAX_SERVERS
#endif
#endif

// d: HashPipe stages (1 .. 8); the TNA top level's default is 3 (kvswitch_tna.p4: Tofino's egress).
#ifndef HP_STAGES
#define HP_STAGES 4
#endif

// w: slots per HashPipe stage, the smallest power of two >= K / d, so that HashPipe tracks at least
// as many cold candidates as there are hot slots (d * w >= K; the controller compares 2K candidates
// per period), at most twice as many. A power of two because Tofino's hash units give the index as
// the hash's low bits, not a remainder. CRC-32 is affine: with only the seeds differing, stage s's
// hash would be one key hash XOR a per-stage constant, and keys colliding in one stage would
// collide in every stage; so stage s also hashes s zero 32-bit words after the key, a different
// linear map of the key per stage (hashpipe_stages.p4; tests/bench/test_model.py).
// kvswitch.bench.kernel.hashpipe_width computes the same number.
// HP_SLOT_BITS = log2(w): the bits of a slot's index (TNA: the width of the hash unit that
// addresses it). -DHP_SLOTS=w sets w, a power of two.
#ifdef HP_SLOTS
#define HP_WANTED_SLOTS HP_SLOTS
#else
#define HP_WANTED_SLOTS ((HOT_KEYS + HP_STAGES - 1) / HP_STAGES)
#endif
#if HP_WANTED_SLOTS <= 1
#define HP_SLOT_BITS 0
#elif HP_WANTED_SLOTS <= 2
#define HP_SLOT_BITS 1
#elif HP_WANTED_SLOTS <= 4
#define HP_SLOT_BITS 2
#elif HP_WANTED_SLOTS <= 8
#define HP_SLOT_BITS 3
#elif HP_WANTED_SLOTS <= 16
#define HP_SLOT_BITS 4
#elif HP_WANTED_SLOTS <= 32
#define HP_SLOT_BITS 5
#elif HP_WANTED_SLOTS <= 64
#define HP_SLOT_BITS 6
#elif HP_WANTED_SLOTS <= 128
#define HP_SLOT_BITS 7
#elif HP_WANTED_SLOTS <= 256
#define HP_SLOT_BITS 8
#elif HP_WANTED_SLOTS <= 512
#define HP_SLOT_BITS 9
#elif HP_WANTED_SLOTS <= 1024
#define HP_SLOT_BITS 10
#elif HP_WANTED_SLOTS <= 2048
#define HP_SLOT_BITS 11
#elif HP_WANTED_SLOTS <= 4096
#define HP_SLOT_BITS 12
#elif HP_WANTED_SLOTS <= 8192
#define HP_SLOT_BITS 13
#elif HP_WANTED_SLOTS <= 16384
#define HP_SLOT_BITS 14
#elif HP_WANTED_SLOTS <= 32768
#define HP_SLOT_BITS 15
#elif HP_WANTED_SLOTS <= 65536
#define HP_SLOT_BITS 16
#else
#error "HOT_KEYS / HP_STAGES must be at most 65536"
#endif
#ifndef HP_SLOTS
#define HP_SLOTS (1 << HP_SLOT_BITS)
#elif HP_SLOTS < 1 || HP_SLOTS != (1 << HP_SLOT_BITS)
#error "HP_SLOTS must be a power of two"
#endif

// IPv4 routes of ipv4_lpm (and sources of HostportTable). A spine: a /32 per server of the fabric
// in HostportTable, and a subnet per rack.
#ifndef IPV4_ROUTES
#ifdef KVS_SPINE
#define IPV4_ROUTES (MAX_SERVERS + 1024)
#else
#define IPV4_ROUTES 1024
#endif
#endif

// Widths. Everything slot-shaped derives from SLOT_W (K <= 2^SLOT_W); register indices are bit<32>.
#ifndef SLOT_W
#define SLOT_W 16
#endif
#ifndef ORDINAL_W
#define ORDINAL_W 8
#endif

// valid_ver's cells. A leaf: a row of MAX_HOLDERS (= MAX_SERVERS) cells per slot. A spine: a pool
// of HOLDER_CELLS cells from which the fabric controller gives each hot key a row of its own (a
// power of two >= the key's holders, at the base it writes into KeyindexTable and ServermapTable's
// vidx = base + ordinal; controller/fabric_ops.py HolderPool, docs/fabric.md "Holders per key").
// The pool need not hold K rows of MAX_HOLDERS: at the paper's scale 62 keys took 3 083 holders
// (K = 10 000 x MAX_HOLDERS = 255 would be 2.55 M cells, more than valid_ver's four parts).
// Default: K rows of MAX_HOLDERS, as many cells as a spine had before the pool.
#ifdef KVS_SPINE
#ifndef HOLDER_CELLS
#define HOLDER_CELLS (HOT_KEYS * MAX_HOLDERS)
#endif
#if HOLDER_CELLS < HOT_KEYS
#error "HOLDER_CELLS must give every hot-key slot at least one cell (>= HOT_KEYS)"
#endif
#define VALID_VER_ENTRIES HOLDER_CELLS
#else
#define VALID_VER_ENTRIES (HOT_KEYS * MAX_HOLDERS)
#endif

// valid_ver's parts. A register array lives in one MAU stage, whose stateful ALU reaches at most
// 48 SRAM blocks (one map RAM each) of 4 096 32-bit cells: p4c-barefoot places 2^17 cells (32
// blocks) in a stage beside the other tables and refuses K = 10 000 x M = 32 = 320 000 in one.
// Beyond 2^VALID_VER_PART_BITS cells, valid_ver is held as up to four registers, `valid_ver`,
// `valid_ver_1`, `valid_ver_2`, `valid_ver_3`, of 2^VALID_VER_PART_BITS cells each (the last one
// the rest): cell i of the controller's index space is cell i mod 2^b of part i >> b (both builds;
// the controller's driver reads and writes them as one register). One part at the defaults.
#ifndef VALID_VER_PART_BITS
#define VALID_VER_PART_BITS 17
#endif
#define VALID_VER_PART (1 << VALID_VER_PART_BITS)
#if VALID_VER_ENTRIES <= VALID_VER_PART
#define VALID_VER_PARTS 1
#define VALID_VER_SIZE_0 VALID_VER_ENTRIES
#elif VALID_VER_ENTRIES <= 4 * VALID_VER_PART
#define VALID_VER_SIZE_0 VALID_VER_PART
#if VALID_VER_ENTRIES <= 2 * VALID_VER_PART
#define VALID_VER_PARTS 2
#define VALID_VER_SIZE_1 (VALID_VER_ENTRIES - VALID_VER_PART)
#elif VALID_VER_ENTRIES <= 3 * VALID_VER_PART
#define VALID_VER_PARTS 3
#define VALID_VER_SIZE_1 VALID_VER_PART
#define VALID_VER_SIZE_2 (VALID_VER_ENTRIES - 2 * VALID_VER_PART)
#else
#define VALID_VER_PARTS 4
#define VALID_VER_SIZE_1 VALID_VER_PART
#define VALID_VER_SIZE_2 VALID_VER_PART
#define VALID_VER_SIZE_3 (VALID_VER_ENTRIES - 3 * VALID_VER_PART)
#endif
#else
#error "valid_ver (a spine's HOLDER_CELLS, a leaf's HOT_KEYS * MAX_HOLDERS) must fit four parts of 2^VALID_VER_PART_BITS cells"
#endif

// ServeroffsetTable: a leaf names every server of its rack once; a spine names each holder of each
// hot key, (slot, address): at most one per valid_ver cell (ServermapTable's size, too).
#ifdef KVS_SPINE
#define SERVEROFFSET_ENTRIES VALID_VER_ENTRIES
#else
#define SERVEROFFSET_ENTRIES MAX_SERVERS
#endif

#if MAX_HOLDERS > 255
#error "MAX_HOLDERS must fit an ordinal (ORDINAL_W = 8 bits)"
#endif

#if HP_STAGES < 1 || HP_STAGES > 8
#error "HP_STAGES must be between 1 and 8"
#endif

#endif  // KVSWITCH_SIZES_P4
