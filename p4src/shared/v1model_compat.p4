// Tofino (TNA) type names on v1model, so that shared code reads the same on both targets.
// A TNA build includes tna.p4 instead, which defines these.
#ifndef KVSWITCH_V1MODEL_COMPAT_P4
#define KVSWITCH_V1MODEL_COMPAT_P4

// v1model.p4 declares `typedef bit<9> PortId_t` itself from V1MODEL_VERSION 20200408 on (the
// default); declaring it again would be a re-declaration error in p4c.
#if V1MODEL_VERSION < 20200408
typedef bit<9> PortId_t;            // v1model egress_spec / ingress_port width
#endif
typedef bit<16> MulticastGroupId_t; // v1model mcast_grp width
typedef bit<16> ReplicationId_t;    // v1model egress_rid width

#endif  // KVSWITCH_V1MODEL_COMPAT_P4
