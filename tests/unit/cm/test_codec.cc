// The CM MAD codec: every message round-trips, every header check and field
// check has its own status, and reserved bits are ignored on input.
#include <gtest/gtest.h>

#include <random>

#include "cm/codec.h"
#include "cm/layout.h"

namespace uroce::cm {
namespace {

template <std::size_t N>
void fill(std::array<std::uint8_t, N>& a, std::uint8_t seed) {
    for (std::size_t i = 0; i < N; ++i) {
        a[i] = static_cast<std::uint8_t>(seed + i * 7);
    }
}

// Every field set to a value that uses its full width, so a field written
// to the wrong bits or truncated shows up.
ReqMsg full_req() {
    ReqMsg m;
    m.local_comm_id = 0xDEADBEEF;
    m.vendor_id = 0xABCDEF;
    m.service_id = 0x0123456789ABCDEFULL;
    m.local_ca_guid = 0xFEDCBA9876543210ULL;
    m.local_qkey = 0x11223344;
    m.local_qpn = 0xFFFFFE;
    m.responder_resources = 0xFD;
    m.local_eecn = 0x654321;
    m.initiator_depth = 0xFC;
    m.remote_eecn = 0x123456;
    m.remote_cm_response_timeout = 31;
    m.transport_type = TransportType::Uc;
    m.end_to_end_flow_control = true;
    m.starting_psn = 0xABCDEF;
    m.local_cm_response_timeout = 30;
    m.retry_count = 6;
    m.partition_key = 0x7FFF;
    m.path_mtu = 5;
    m.rdc_exists = true;
    m.rnr_retry_count = 5;
    m.max_cm_retries = 14;
    m.srq = true;
    m.extended_transport_type = 0;
    for (PathInfo* p : {&m.primary, &m.alternate}) {
        p->local_lid = 0x1234;
        p->remote_lid = 0x5678;
        fill(p->local_gid, 1);
        fill(p->remote_gid, 100);
        p->flow_label = 0xFFFFE;
        p->packet_rate = 0x3E;
        p->traffic_class = 0xB8;
        p->hop_limit = 0xFE;
        p->sl = 0xE;
        p->subnet_local = true;
        p->local_ack_timeout = 29;
    }
    m.alternate.flow_label = 0x12345;
    m.sap_supported = true;
    fill(m.private_data, 3);
    return m;
}

std::vector<Message> every_message() {
    std::vector<Message> all;
    all.emplace_back(full_req());
    MraMsg mra{0x01020304, 0x05060708, MsgRef::Rep, 24, {}};
    fill(mra.private_data, 9);
    all.emplace_back(mra);
    RejMsg rej{0x11111111, 0x22222222, MsgRef::Other, 72, 28, {}, {}};
    fill(rej.ari, 4);
    fill(rej.private_data, 5);
    all.emplace_back(rej);
    RepMsg rep{0xAAAA5555, 0x5555AAAA, 0x01234567, 0xFFFFFF, 0x000001, 0xFEDCBA, 0x80, 0x7F, 31, 3, true, 7, true,
               0x0011223344556677ULL, 0xC0FFEE, {}};
    fill(rep.private_data, 6);
    all.emplace_back(rep);
    RtuMsg rtu{7, 8, {}};
    fill(rtu.private_data, 7);
    all.emplace_back(rtu);
    DreqMsg dreq{9, 10, 0xABCDEF, {}};
    fill(dreq.private_data, 8);
    all.emplace_back(dreq);
    DrepMsg drep{11, 12, {}};
    fill(drep.private_data, 9);
    all.emplace_back(drep);
    SidrReqMsg sreq{13, 0xFFFF, 0x0000000001111c06ULL, {}};
    fill(sreq.private_data, 10);
    all.emplace_back(sreq);
    SidrRepMsg srep{14, 0, 72, 0xBEEF42, 0x000123, 0x0000000001111c06ULL, 0x01234567, {}, {}};
    fill(srep.info, 11);
    fill(srep.private_data, 12);
    all.emplace_back(srep);
    return all;
}

TEST(CmCodec, EveryMessageRoundTrips) {
    for (const Message& msg : every_message()) {
        SCOPED_TRACE(std::string(attr_name(attr_of(msg))));
        Mad mad{cm_header(0x0000000212345678ULL), msg};
        const MadBytes bytes = build_mad(mad);
        const MadParseResult r = parse_mad(bytes);
        ASSERT_EQ(r.status, CmParseStatus::Ok) << cm_parse_status_info(r.status).name;
        EXPECT_EQ(r.mad.header.tid, 0x0000000212345678ULL);
        EXPECT_EQ(r.mad.header.attr_id, static_cast<std::uint16_t>(attr_of(msg)));
        EXPECT_TRUE(r.mad.message == msg);
        EXPECT_EQ(build_mad(r.mad), bytes);
    }
}

TEST(CmCodec, HeaderIsLaidOutAsIbaSays) {
    Mad mad{cm_header(0x0102030405060708ULL), RtuMsg{}};
    mad.header.attr_mod = 0xA0B0C0D0;
    const MadBytes b = build_mad(mad);
    EXPECT_EQ(b[0], 1);     // base version
    EXPECT_EQ(b[1], 0x07);  // CM class
    EXPECT_EQ(b[2], 2);     // class version
    EXPECT_EQ(b[3], 0x03);  // Send
    EXPECT_EQ(b[4], 0);
    EXPECT_EQ(b[5], 0);
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(b[8 + i], i + 1);
    }
    EXPECT_EQ(b[16], 0x00);
    EXPECT_EQ(b[17], 0x14);  // RTU
    EXPECT_EQ(b[20], 0xA0);
    EXPECT_EQ(b[23], 0xD0);
}

TEST(CmCodec, SingleBitsLandWhereTheTablesPutThem) {
    ReqMsg m{};
    m.end_to_end_flow_control = true;
    m.srq = true;
    m.path_mtu = 1;
    MadBytes b = build_mad(Mad{cm_header(0), m});
    EXPECT_EQ(b[24 + 43], 0x01);  // flow control: byte 43, last bit
    EXPECT_EQ(b[24 + 51], 0x08);  // SRQ: byte 51, bit 4
    EXPECT_EQ(b[24 + 50], 0x10);  // MTU: high nibble of byte 50
}

TEST(CmCodec, ReservedBitsAreIgnoredOnInput) {
    MadBytes b = build_mad(Mad{cm_header(5), full_req()});
    b[24 + 4] = 0xFF;   // reserved byte before the vendor ID
    b[24 + 91] |= 0xC0; // the reserved bits between flow label and rate... (high two bits of byte 91)
    const MadParseResult r = parse_mad(b);
    ASSERT_TRUE(r.ok());
    const auto& req = std::get<ReqMsg>(r.mad.message);
    EXPECT_EQ(req.primary.packet_rate, 0x3E);
    EXPECT_EQ(req.vendor_id, 0xABCDEFu);
}

struct HeaderCase {
    std::size_t byte;
    std::uint8_t value;
    CmParseStatus expected;
};

TEST(CmCodec, EachHeaderCheckHasItsStatus) {
    const MadBytes good = build_mad(Mad{cm_header(1), full_req()});
    const HeaderCase cases[] = {
        {0, 2, CmParseStatus::BadBaseVersion},
        {1, 0x81, CmParseStatus::NotCmClass},
        {2, 1, CmParseStatus::BadClassVersion},
        {3, 0x01, CmParseStatus::BadMethod},
        {17, 0x1B, CmParseStatus::UnknownAttribute},
        {17, 0x19, CmParseStatus::UnsupportedAttribute},
        {17, 0x01, CmParseStatus::UnsupportedAttribute},
    };
    for (const auto& c : cases) {
        MadBytes b = good;
        b[c.byte] = c.value;
        EXPECT_EQ(parse_mad(b).status, c.expected) << cm_parse_status_info(c.expected).name;
    }
}

TEST(CmCodec, WrongSizeIsRefused) {
    const MadBytes good = build_mad(Mad{cm_header(1), RtuMsg{}});
    EXPECT_EQ(parse_mad(std::span(good).first(255)).status, CmParseStatus::BadMadLength);
    std::vector<std::uint8_t> longer(good.begin(), good.end());
    longer.push_back(0);
    EXPECT_EQ(parse_mad(longer).status, CmParseStatus::BadMadLength);
    EXPECT_EQ(parse_mad({}).status, CmParseStatus::BadMadLength);
}

TEST(CmCodec, FieldChecks) {
    {
        ReqMsg m = full_req();
        m.transport_type = TransportType::Rd;
        EXPECT_EQ(parse_mad(build_mad(Mad{cm_header(1), m})).status, CmParseStatus::ReqBadTransportType);
        m.transport_type = TransportType::Extended;
        m.extended_transport_type = 2;
        EXPECT_EQ(parse_mad(build_mad(Mad{cm_header(1), m})).status, CmParseStatus::ReqBadTransportType);
        m.extended_transport_type = 1;  // XRC
        EXPECT_EQ(parse_mad(build_mad(Mad{cm_header(1), m})).status, CmParseStatus::Ok);
        m.path_mtu = 0;
        EXPECT_EQ(parse_mad(build_mad(Mad{cm_header(1), m})).status, CmParseStatus::ReqBadMtu);
        m.path_mtu = 6;
        EXPECT_EQ(parse_mad(build_mad(Mad{cm_header(1), m})).status, CmParseStatus::ReqBadMtu);
    }
    {
        MadBytes b = build_mad(Mad{cm_header(1), MraMsg{}});
        b[24 + 8] = 0xC0;
        EXPECT_EQ(parse_mad(b).status, CmParseStatus::ReservedMessageRef);
    }
    {
        RejMsg rej{};
        MadBytes b = build_mad(Mad{cm_header(1), rej});
        b[24 + 8] = 0xC0;
        EXPECT_EQ(parse_mad(b).status, CmParseStatus::ReservedMessageRef);
        b[24 + 8] = 0;
        b[24 + 9] = 73 << 1;
        EXPECT_EQ(parse_mad(b).status, CmParseStatus::RejBadInfoLength);
    }
    {
        SidrRepMsg s{};
        s.info_length = 73;
        EXPECT_EQ(parse_mad(build_mad(Mad{cm_header(1), s})).status, CmParseStatus::SidrRepBadInfoLength);
    }
}

TEST(CmCodec, EveryStatusHasANameAndADescription) {
    for (std::size_t i = 0; i < kCmParseStatusCount; ++i) {
        const auto& info = cm_parse_status_info(static_cast<CmParseStatus>(i));
        EXPECT_FALSE(info.name.empty());
        EXPECT_FALSE(info.description.empty());
    }
}

TEST(CmCodec, RandomBytesNeverCrashAndOkOnesRebuildStably) {
    std::mt19937 rng(13);
    std::size_t ok = 0;
    for (int i = 0; i < 20000; ++i) {
        MadBytes b{};
        for (auto& x : b) {
            x = static_cast<std::uint8_t>(rng());
        }
        // Make most of them CM MADs so the message parsers run.
        b[0] = 1;
        b[1] = 7;
        b[2] = 2;
        b[3] = 3;
        b[16] = 0;
        b[17] = static_cast<std::uint8_t>(0x10 + rng() % 9);
        const MadParseResult r = parse_mad(b);
        if (r.ok()) {
            ++ok;
            const MadBytes again = build_mad(r.mad);
            const MadParseResult r2 = parse_mad(again);
            ASSERT_TRUE(r2.ok());
            EXPECT_EQ(build_mad(r2.mad), again);
        }
    }
    EXPECT_GT(ok, 1000u);
}

}  // namespace
}  // namespace uroce::cm
