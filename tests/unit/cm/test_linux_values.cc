// A REQ and a REP built as Linux 6.1's CM builds them for an rping
// connection over rdma_rxe, checked field by field and byte by byte against
// the values seen in captures of such connections (docs/ib-cm.md).
#include <gtest/gtest.h>

#include "cm/codec.h"
#include "cm/format.h"
#include "cm/service_id.h"
#include "cm/timers.h"

namespace uroce::cm {
namespace {

constexpr std::uint16_t kRpingPort = 7174;
// An active-side port that gives the IPv4 flow label seen in the capture.
constexpr std::uint16_t kActivePortV4 = 35795;
constexpr std::uint16_t kActivePortV6 = 39699;

ConnectParams rping_connect() {
    ConnectParams p;
    p.service_id = ip_service_id(PortSpace::Tcp, kRpingPort);
    p.local_ca_guid = 0x5054'00ff'fe12'3456ULL;  // EUI-64 of 52:54:00:12:34:56
    p.qpn = 0x11;
    p.starting_psn = 0x5e7b1;
    p.responder_resources = 1;  // rping's CONNECT
    p.initiator_depth = 1;
    p.path.local_gid = wire::ipv4_mapped({10, 0, 0, 1});
    p.path.remote_gid = wire::ipv4_mapped({10, 0, 0, 2});
    p.path.flow_label = roce_flow_label(kActivePortV4, kRpingPort);
    const CmaHeader h{wire::IpVersion::V4, kActivePortV4, p.path.local_gid, p.path.remote_gid};
    EXPECT_TRUE(make_cma_private_data(h, {}, p.private_data));
    return p;
}

TEST(LinuxValues, FlowLabelsOfTheCaptures) {
    EXPECT_EQ(roce_flow_label(kActivePortV4, kRpingPort), 0x10a93u);
    EXPECT_EQ(roce_flow_label(kActivePortV6, kRpingPort), 0x2e353u);
}

TEST(LinuxValues, RpingReqFields) {
    const ReqMsg m = format_req(rping_connect(), 0x9b3c0e21);
    EXPECT_EQ(m.local_comm_id, 0x9b3c0e21u);
    EXPECT_EQ(m.service_id, 0x0000000001061c06ULL);
    EXPECT_EQ(m.local_ca_guid, 0x5054'00ff'fe12'3456ULL);
    EXPECT_EQ(m.local_qkey, 0u);
    EXPECT_EQ(m.local_qpn, 0x11u);
    EXPECT_EQ(m.responder_resources, 1);
    EXPECT_EQ(m.initiator_depth, 1);
    EXPECT_EQ(m.remote_cm_response_timeout, 20);
    EXPECT_EQ(m.local_cm_response_timeout, 20);
    EXPECT_EQ(m.transport_type, TransportType::Rc);
    EXPECT_FALSE(m.end_to_end_flow_control);
    EXPECT_EQ(m.starting_psn, 0x5e7b1u);
    EXPECT_EQ(m.retry_count, 7);
    EXPECT_EQ(m.rnr_retry_count, 7);
    EXPECT_EQ(m.partition_key, 0xFFFF);
    EXPECT_EQ(m.path_mtu, 3);
    EXPECT_EQ(m.max_cm_retries, 15);
    EXPECT_FALSE(m.srq);
    EXPECT_FALSE(m.rdc_exists);
    EXPECT_EQ(m.extended_transport_type, 0);
    EXPECT_EQ(m.primary.local_lid, 0xFFFF);
    EXPECT_EQ(m.primary.remote_lid, 0xFFFF);
    EXPECT_EQ(m.primary.local_gid, wire::ipv4_mapped({10, 0, 0, 1}));
    EXPECT_EQ(m.primary.remote_gid, wire::ipv4_mapped({10, 0, 0, 2}));
    EXPECT_EQ(m.primary.flow_label, 0x10a93u);
    EXPECT_EQ(m.primary.packet_rate, 0);
    EXPECT_EQ(m.primary.traffic_class, 0);
    EXPECT_EQ(m.primary.hop_limit, 64);
    EXPECT_EQ(m.primary.sl, 0);
    EXPECT_FALSE(m.primary.subnet_local);
    EXPECT_EQ(m.primary.local_ack_timeout, 19);
    EXPECT_EQ(m.alternate, PathInfo{});
}

TEST(LinuxValues, RpingReqBytes) {
    const MadBytes b = build_mad(Mad{cm_header(make_tid(2, 0x9b3c0e21)), format_req(rping_connect(), 0x9b3c0e21)});
    const std::uint8_t head[] = {1, 7, 2, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0x9b, 0x3c, 0x0e, 0x21, 0, 0x10, 0, 0, 0, 0, 0, 0};
    for (std::size_t i = 0; i < sizeof head; ++i) {
        EXPECT_EQ(b[i], head[i]) << "header byte " << i;
    }
    auto at = [&b](std::size_t msg_byte) { return b[24 + msg_byte]; };
    EXPECT_EQ(at(0), 0x9b);
    const std::uint8_t sid[] = {0, 0, 0, 0, 0x01, 0x06, 0x1c, 0x06};
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(at(8 + i), sid[i]);
    }
    EXPECT_EQ(at(34), 0x11);  // QPN low byte
    EXPECT_EQ(at(35), 1);     // responder resources
    EXPECT_EQ(at(39), 1);     // initiator depth
    EXPECT_EQ(at(43), 20 << 3);        // remote CM response timeout, RC, no flow control
    EXPECT_EQ(at(44), 0x05);           // starting PSN 0x05e7b1
    EXPECT_EQ(at(46), 0xb1);
    EXPECT_EQ(at(47), (20 << 3) | 7);  // local CM response timeout, retry 7
    EXPECT_EQ(at(48), 0xFF);
    EXPECT_EQ(at(49), 0xFF);
    EXPECT_EQ(at(50), (3 << 4) | 7);   // MTU 1024, RNR retry 7
    EXPECT_EQ(at(51), 15 << 4);        // max CM retries
    EXPECT_EQ(at(52), 0xFF);           // permissive LIDs
    EXPECT_EQ(at(55), 0xFF);
    EXPECT_EQ(at(66), 0xFF);           // ::ffff:10.0.0.1
    EXPECT_EQ(at(68), 10);
    EXPECT_EQ(at(87), 2);
    // Flow label 0x10a93 in the top 20 bits, packet rate 0 in the low 6.
    EXPECT_EQ(at(88), 0x10);
    EXPECT_EQ(at(89), 0xa9);
    EXPECT_EQ(at(90), 0x30);
    EXPECT_EQ(at(91), 0x00);
    EXPECT_EQ(at(93), 64);             // hop limit
    EXPECT_EQ(at(95), 19 << 3);        // local ACK timeout
    for (std::size_t i = 96; i < 140; ++i) {
        EXPECT_EQ(at(i), 0) << "alternate path byte " << i;
    }
    // CMA header at the start of the private data.
    EXPECT_EQ(at(140), 0x00);
    EXPECT_EQ(at(141), 0x40);
    EXPECT_EQ(at(142), kActivePortV4 >> 8);
    EXPECT_EQ(at(143), kActivePortV4 & 0xFF);
    EXPECT_EQ(at(156), 10);
    EXPECT_EQ(at(175), 2);
}

TEST(LinuxValues, RepAsThePassiveRpingSendsIt) {
    AcceptParams a;
    a.qpn = 0x12;
    a.starting_psn = 0xabcde;
    a.responder_resources = 1;
    a.initiator_depth = 1;
    a.local_ca_guid = 0x5054'00ff'fe65'4321ULL;
    const RepMsg m = format_rep(a, 0x1111, 0x9b3c0e21);
    const MadBytes b = build_mad(Mad{cm_header(make_tid(2, 0x9b3c0e21)), m});
    auto at = [&b](std::size_t msg_byte) { return b[24 + msg_byte]; };
    EXPECT_EQ(b[17], 0x13);
    EXPECT_EQ(at(7), 0x21);   // remote comm ID = the REQ's
    EXPECT_EQ(at(8), 0);      // Q_Key 0
    EXPECT_EQ(at(14), 0x12);  // QPN
    EXPECT_EQ(at(20), 0x0a);  // starting PSN
    EXPECT_EQ(at(24), 1);
    EXPECT_EQ(at(25), 1);
    EXPECT_EQ(at(26), 15 << 3);  // target ACK delay 15, failover 0, no flow control
    EXPECT_EQ(at(27), 7 << 5);   // RNR retry 7, no SRQ
    EXPECT_EQ(at(28), 0x50);
}

TEST(LinuxValues, Timers) {
    EXPECT_EQ(req_timeout(18, 20), Millis(6144));
    EXPECT_EQ(iba_time_to_ms(20), Millis(4096));  // REP and SIDR_REQ resend
    EXPECT_EQ(timewait_duration(18), Millis(2048));
    EXPECT_EQ(iba_time_to_ms(24), Millis(65536));  // lazy MRA's service timeout
    EXPECT_EQ(iba_time_to_ms(0), Millis(1));
}

}  // namespace
}  // namespace uroce::cm
