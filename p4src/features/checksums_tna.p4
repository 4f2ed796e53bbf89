// Checksums on TNA, with the Checksum extern (checksums.p4 is the v1model build; the field lists
// are shared, checksum_fields.p4).
//
// IPv4: the ingress parser verifies the header checksum (KvsIngress drops a packet that fails, as
// the v1model build does); the egress deparser recomputes it on every packet.
//
// L4: Tofino's deparser cannot sum the payload, so the ingress parser takes the payload's share out
// of the sender's checksum: it subtracts the checksum field and every header field the L4 checksum
// covers, which leaves the ones' complement sum of the payload (the residual, bridged to egress).
// The egress deparser then computes the checksum of the final headers plus the residual when the
// switch changed a covered field (l4_dirty), which is what v1model's update_checksum_with_payload
// computes over the payload. This needs a correct checksum on arrival: a UDP datagram sent
// without one (checksum 0) and rewritten by the switch leaves with a wrong one (docs/tofino.md).
#ifndef KVSWITCH_CHECKSUMS_TNA_P4
#define KVSWITCH_CHECKSUMS_TNA_P4

#include "checksum_fields.p4"

// Ingress parser, after KvsL3Parser: is the IPv4 header checksum right?
parser KvsIpv4Verify(packet_in pkt, in headers_t hdr, out bool ok) {
    Checksum() ipv4_csum;

    // (options apart: a list without a varbit is packed in one step)
    state start {
        transition select(hdr.ipv4_options.isValid()) {
            true: with_options;
            default: no_options;
        }
    }

    state no_options {
        ipv4_csum.add({IPV4_CSUM_FIELDS, hdr.ipv4.hdr_checksum});
        ok = ipv4_csum.verify();
        transition accept;
    }

    state with_options {
        ipv4_csum.add({IPV4_CSUM_FIELDS, hdr.ipv4.hdr_checksum, hdr.ipv4_options.options});
        ok = ipv4_csum.verify();
        transition accept;
    }
}

// Ingress parser, after KvsL4Parser: the payload's share of the sender's L4 checksum.
parser KvsL4Residual(packet_in pkt, in headers_t hdr, in kvs_meta_t meta, out bit<16> residual) {
    Checksum() l4_csum;

    state start {
        residual = 0;
        transition select(hdr.kvs.isValid(), hdr.udp.isValid(), hdr.tcp.isValid(),
                          hdr.tcp_options.isValid()) {
            (true, true, _, _): udp_residual;
            (true, _, true, false): tcp_residual;
            (true, _, true, true): tcp_options_residual;
            default: accept;
        }
    }

    state udp_residual {
        l4_csum.subtract({hdr.udp.checksum});
        l4_csum.subtract({UDP_CSUM_FIELDS});
        residual = l4_csum.get();
        transition accept;
    }

    state tcp_residual {
        l4_csum.subtract({hdr.tcp.checksum});
        l4_csum.subtract({TCP_CSUM_HEAD, TCP_CSUM_TAIL});
        residual = l4_csum.get();
        transition accept;
    }

    state tcp_options_residual {
        l4_csum.subtract({hdr.tcp.checksum});
        l4_csum.subtract({TCP_CSUM_HEAD, hdr.tcp_options.options, TCP_CSUM_TAIL});
        residual = l4_csum.get();
        transition accept;
    }
}

control KvsChecksumUpdate(inout headers_t hdr, in kvs_meta_t meta, in bit<16> residual) {
    Checksum() ipv4_csum;
    Checksum() udp_csum;
    Checksum() tcp_csum;

    apply {
        if (hdr.ipv4_options.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_csum.update({IPV4_CSUM_FIELDS, hdr.ipv4_options.options});
        } else if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_csum.update({IPV4_CSUM_FIELDS});
        }
        if (meta.l4_dirty) {  // only on a KVS message (KvsEgress)
            if (hdr.udp.isValid()) {
                hdr.udp.checksum = udp_csum.update({UDP_CSUM_FIELDS, residual});
            } else if (hdr.tcp_options.isValid()) {
                hdr.tcp.checksum = tcp_csum.update(
                    {TCP_CSUM_HEAD, hdr.tcp_options.options, TCP_CSUM_TAIL, residual});
            } else if (hdr.tcp.isValid()) {
                hdr.tcp.checksum = tcp_csum.update({TCP_CSUM_HEAD, TCP_CSUM_TAIL, residual});
            }
        }
    }
}

#endif  // KVSWITCH_CHECKSUMS_TNA_P4
