// KVSwitch wire protocol constants: the P4 copy of docs/protocol.md (one place per language).
// tests/ parses this file and checks it against kvswitch/protocol.py and the C header, so keep the
// `NAME = value` shapes below (one per line) when editing.
#ifndef KVSWITCH_PROTOCOL_P4
#define KVSWITCH_PROTOCOL_P4

// Reserved L4 port, UDP and TCP: requests have it as destination port, replies as source port.
const bit<16> KVS_PORT = 8900;

// Header length in bytes (op .. key); the value follows and is not parsed by the switch.
const bit<16> KVS_HDR_LEN = 36;

// Largest value carried over UDP.
const bit<16> KVS_MAX_VALUE = 8192;

// `flags` bit 0: the switch rewrote this multicast copy from TCP to UDP.
const bit<16> KVS_F_TCP = 0x0001;
const bit<16> KVS_F_DUP = 0x0002;  // reply repeats the first result of a request id
// `flags` bit 2 (requests): the switch redirected this Get to a replica in the key's read set
// (rule 4); an agent serves a key it does not own only then (docs/protocol.md "Membership").
const bit<16> KVS_F_REDIRECT = 0x0004;
// `flags` bit 3 (stamped writes and their copies): no earlier write of the key was on its way to
// the origin when this one was stamped (rule 1); only such a repeat of a request id may move the
// first application's value to its version (docs/protocol.md "Agent rules").
const bit<16> KVS_F_SETTLED = 0x0008;

// Operation codes (`op`, 8 bits).
enum bit<8> KvsOp {
    GET = 1,
    GET_REPLY = 2,
    SET = 3,
    SET_REPLY = 4,
    DEL = 5,
    DEL_REPLY = 6,
    UPDATE = 7,
    UPDATE_DEL = 8,
    CONFIRM = 9,
    PUSH = 10,
    SYNC = 11,
    SYNC_DONE = 12,
    REMOVE = 13,
    REMOVE_REPLY = 14,
    // Membership (docs/protocol.md "Membership"): forwarded like plain IP, no KVSwitch state;
    // trust.p4 lets clients send RING_GET (servers answer RING_REPLY).
    RING_GET = 15,
    RING_REPLY = 16
}

// Status codes (`status`, 8 bits): 0 in requests, the result in replies.
enum bit<8> KvsStatus {
    OK = 0,
    NOT_FOUND = 1,
    BAD_REQUEST = 2,
    TOO_LARGE = 3,
    STALE = 4,
    DUPLICATE = 5,
    SERVER_ERROR = 6,
    UNAVAILABLE = 7,
    MOVED = 8,  // agent: not this server's key under its ring (value: its ring version)
    RETRY = 9   // agent: the key is being handed over; send again shortly
}

// HashPipe stage seeds: seed_s = (0x9E3779B9 * (s + 1)) mod 2^32 (docs/protocol.md, "HashPipe
// hashing"); the simulator and tests/dataplane/hashpipe_model.py compute the same.
const bit<32> HP_SEED_0 = 0x9E3779B9;
const bit<32> HP_SEED_1 = 0x3C6EF372;
const bit<32> HP_SEED_2 = 0xDAA66D2B;
const bit<32> HP_SEED_3 = 0x78DDE6E4;
const bit<32> HP_SEED_4 = 0x1715609D;
const bit<32> HP_SEED_5 = 0xB54CDA56;
const bit<32> HP_SEED_6 = 0x5384540F;
const bit<32> HP_SEED_7 = 0xF1BBCDC8;
// The seed of a key's HashPipe tag (the next in the row: (0x9E3779B9 * 9) mod 2^32), which later
// stages compare instead of the 128-bit key (features/hashpipe_carry.p4).
const bit<32> HP_TAG_SEED = 0x8FF34781;

#endif  // KVSWITCH_PROTOCOL_P4
