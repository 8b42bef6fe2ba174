// IGMP / MLD: the reports we build are byte for byte what the Linux kernel
// sends (frames captured on a veth, 02:00:00:00:00:0a with 192.0.2.1 and
// fe80::ff:fe00:a, joining 239.1.1.1 and ff0e::1); the queries a Linux
// bridge sends (mcast_querier 1) parse, and no truncation or broken checksum
// does; GroupMembership reports joins and leaves (each twice), answers
// general and group-specific queries within the response time, stays quiet
// about groups it is not in, and sends nothing on a port without a wire.
// With an older querier present (RFC 3376 7.2.1, RFC 3810 8.2.1) it sends
// the IGMPv1/v2 and MLDv1 messages Linux sends (captured the same way with
// force_igmp_version 2 or 1 and force_mld_version 1) until the Older
// Version Querier Present Timeout runs out.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "net/group_membership.h"
#include "net/igmp.h"
#include "net/mld.h"
#include "net/nd.h"

namespace uroce::net {
namespace {

using namespace std::chrono_literals;
using Frame = std::vector<std::uint8_t>;

constexpr wire::MacAddr kMac = {0x02, 0, 0, 0, 0, 0x0A};
constexpr std::array<std::uint8_t, 4> kIp4 = {192, 0, 2, 1};
constexpr wire::Gid kLinkLocal = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFE, 0, 0, 0x0A};
constexpr wire::Gid kGroup4 = wire::ipv4_mapped({239, 1, 1, 1});
constexpr wire::Gid kGroup6 = {0xFF, 0x0E, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};

// Kernel IGMPv3 report: 192.0.2.1 joins 239.1.1.1 (CHANGE_TO_EXCLUDE, no sources).
const Frame kKernelIgmpJoin = {
    0x01, 0x00, 0x5e, 0x00, 0x00, 0x16, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x08, 0x00, 0x46, 0xc0,
    0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0x41, 0xf8, 0xc0, 0x00, 0x02, 0x01, 0xe0, 0x00,
    0x00, 0x16, 0x94, 0x04, 0x00, 0x00, 0x22, 0x00, 0xe9, 0xfb, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00,
    0x00, 0x00, 0xef, 0x01, 0x01, 0x01,
};

// Kernel MLDv2 report: fe80::ff:fe00:a joins ff0e::1.
const Frame kKernelMldJoin = {
    0x33, 0x33, 0x00, 0x00, 0x00, 0x16, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x24, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xff, 0xfe, 0x00, 0x00, 0x0a, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x16, 0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00, 0x8f, 0x00,
    0x70, 0xf4, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0xff, 0x0e, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
};

Frame from_hex(std::string_view hex) {
    Frame f;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
        f.push_back(static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    }
    return f;
}

// Kernel IGMPv2 report of 239.1.1.1 (to the group), its v2 leave (to
// 224.0.0.2) and, with force_igmp_version 1, its v1 report.
const Frame kKernelIgmpV2Report = from_hex(
    "01005e01010102000000000a080046c000200000400001023214c0000201ef010101940400001600f9fcef010101");
const Frame kKernelIgmpV2Leave = from_hex(
    "01005e00000202000000000a080046c000200000400001024214c0000201e0000002940400001700f8fcef010101");
const Frame kKernelIgmpV1Report = from_hex(
    "01005e01010102000000000a080046c000200000400001023214c0000201ef010101940400001200fdfcef010101");
// Kernel MLDv1 report of ff0e::1 (to the group) and its done (to ff02::2).
const Frame kKernelMldV1Report = from_hex(
    "33330000000102000000000a86dd6000000000200001fe80000000000000000000fffe00000aff0e0000000000000000000000"
    "0000013a000502000001008300810200000000ff0e0000000000000000000000000001");
const Frame kKernelMldV1Done = from_hex(
    "33330000000202000000000a86dd6000000000200001fe80000000000000000000fffe00000aff020000000000000000000000"
    "0000023a000502000001008400800d00000000ff0e0000000000000000000000000001");

// An IGMP query from 192.0.2.254 to 224.0.0.1: 8 bytes (v1 when `code` is
// 0, else v2) or, with `v3`, 12 bytes carrying `qrv` and `qqic`.
Frame igmp_query(std::uint8_t code, const std::array<std::uint8_t, 4>& group = {}, bool v3 = false,
                 std::uint8_t qrv = 0, std::uint8_t qqic = 0) {
    const std::size_t igmp_length = v3 ? 12 : 8;
    Frame f(14 + 24 + igmp_length, 0);
    f[12] = 0x08;
    auto* ip = reinterpret_cast<wire::Ipv4Hdr*>(f.data() + 14);
    ip->version_ihl = 0x46;
    ip->total_length.set(static_cast<std::uint16_t>(24 + igmp_length));
    ip->ttl = 1;
    ip->protocol = kIpProtoIgmp;
    ip->src = {192, 0, 2, 254};
    ip->dst = kAllSystemsGroup;
    f[34] = 0x94;
    f[35] = 0x04;
    ip->checksum.set(internet_checksum(std::span(f).subspan(14, 24)));
    std::uint8_t* igmp = f.data() + 38;
    igmp[0] = 0x11;
    igmp[1] = code;
    std::copy(group.begin(), group.end(), igmp + 4);
    if (v3) {
        igmp[8] = qrv;
        igmp[9] = qqic;
    }
    const std::uint16_t sum = internet_checksum(std::span(igmp, igmp_length));
    igmp[2] = static_cast<std::uint8_t>(sum >> 8);
    igmp[3] = static_cast<std::uint8_t>(sum);
    return f;
}

// A Linux bridge's IGMPv2 general query (0.0.0.0 to 224.0.0.1, Max Resp 10 s).
const Frame kBridgeGeneralQuery = {
    0x01, 0x00, 0x5e, 0x00, 0x00, 0x01, 0x1e, 0x4f, 0xd1, 0xab, 0x4a, 0xff, 0x08, 0x00, 0x46, 0xc0,
    0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0x04, 0x17, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x00,
    0x00, 0x01, 0x94, 0x04, 0x00, 0x00, 0x11, 0x64, 0xee, 0x9b, 0x00, 0x00, 0x00, 0x00,
};

// Its group-specific query for 239.1.1.1 after a leave (Max Resp 1 s).
const Frame kBridgeGroupQuery = {
    0x01, 0x00, 0x5e, 0x00, 0x00, 0x01, 0x1e, 0x4f, 0xd1, 0xab, 0x4a, 0xff, 0x08, 0x00, 0x46, 0xc0,
    0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0x04, 0x17, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x00,
    0x00, 0x01, 0x94, 0x04, 0x00, 0x00, 0x11, 0x0a, 0xfe, 0xf2, 0xef, 0x01, 0x01, 0x01,
};

// An MLDv2 general query from fe80::1 to ff02::1 with Maximum Response Code
// `code`, hop-by-hop Router Alert first (as Linux bridges send them); with
// `v1` an MLDv1 query (24 bytes, the code in milliseconds).
Frame mld_query(std::uint16_t code, const wire::Gid& group = {}, bool v1 = false, std::uint8_t qrv = 0,
                std::uint8_t qqic = 0) {
    const std::size_t icmp_length = v1 ? 24 : 28;
    Frame f(14 + 40 + 8 + icmp_length, 0);
    f[12] = 0x86;
    f[13] = 0xDD;
    auto* ip = reinterpret_cast<wire::Ipv6Hdr*>(f.data() + 14);
    ip->vtc_flow.set(6u << 28);
    ip->payload_length.set(static_cast<std::uint16_t>(8 + icmp_length));
    ip->next_header = 0;
    ip->hop_limit = 1;
    ip->src = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
    ip->dst = kAllNodesMulticast;
    const std::array<std::uint8_t, 8> hop_by_hop = {58, 0, 0x05, 0x02, 0, 0, 0x01, 0};
    std::copy(hop_by_hop.begin(), hop_by_hop.end(), f.begin() + 54);
    std::uint8_t* icmp = f.data() + 62;
    icmp[0] = 130;
    icmp[4] = static_cast<std::uint8_t>(code >> 8);
    icmp[5] = static_cast<std::uint8_t>(code);
    std::copy(group.begin(), group.end(), icmp + 8);
    if (!v1) {
        icmp[24] = qrv;
        icmp[25] = qqic;
    }
    const std::uint16_t sum = icmpv6_checksum(ip->src, ip->dst, std::span(icmp, icmp_length));
    icmp[2] = static_cast<std::uint8_t>(sum >> 8);
    icmp[3] = static_cast<std::uint8_t>(sum);
    return f;
}

TEST(IgmpFrames, JoinReportIsTheKernels) {
    Frame out(kIgmpReportOverhead + kIgmpRecordSize);
    const std::size_t n = build_igmp_report(out, kMac, kIp4, GroupRecordType::ChangeToExclude, std::span(&kGroup4, 1));
    out.resize(n);
    EXPECT_EQ(out, kKernelIgmpJoin);
    EXPECT_TRUE(is_igmp_frame(out));
    EXPECT_EQ(parse_igmp_query(out).status, QueryParseStatus::NotQuery);
}

TEST(MldFrames, JoinReportIsTheKernels) {
    Frame out(kMldReportOverhead + kMldRecordSize);
    const std::size_t n =
        build_mld_report(out, kMac, kLinkLocal, GroupRecordType::ChangeToExclude, std::span(&kGroup6, 1));
    out.resize(n);
    EXPECT_EQ(out, kKernelMldJoin);
    EXPECT_TRUE(is_mld_frame(out));
    EXPECT_EQ(parse_mld_query(out).status, QueryParseStatus::NotQuery);
}

TEST(IgmpFrames, BridgeQueriesParse) {
    const QueryParseResult general = parse_igmp_query(kBridgeGeneralQuery);
    ASSERT_EQ(general.status, QueryParseStatus::Ok);
    EXPECT_TRUE(general.query.general);
    EXPECT_EQ(general.query.max_response_ms, 10'000u);
    EXPECT_EQ(general.query.version, ProtocolVersion::V2);  // a bridge's default mcast_igmp_version
    const QueryParseResult group = parse_igmp_query(kBridgeGroupQuery);
    ASSERT_EQ(group.status, QueryParseStatus::Ok);
    EXPECT_FALSE(group.query.general);
    EXPECT_EQ(group.query.group, kGroup4);
    EXPECT_EQ(group.query.max_response_ms, 1'000u);
}

TEST(IgmpFrames, TruncatedOrCorruptQueriesNeverParse) {
    for (std::size_t len = 0; len < kBridgeGroupQuery.size(); ++len) {
        const Frame cut(kBridgeGroupQuery.begin(), kBridgeGroupQuery.begin() + static_cast<std::ptrdiff_t>(len));
        EXPECT_NE(parse_igmp_query(cut).status, QueryParseStatus::Ok) << len;
    }
    for (const std::size_t at : {std::size_t{24}, std::size_t{39}, std::size_t{44}}) {  // IP checksum, IGMP checksum, group
        Frame bad = kBridgeGroupQuery;
        bad[at] ^= 0x01;
        EXPECT_EQ(parse_igmp_query(bad).status, QueryParseStatus::Malformed) << at;
    }
    Frame forwarded = kBridgeGroupQuery;
    forwarded[22] = 2;  // TTL 2 (and the header checksum fixed): not from this link
    forwarded[24] = 0;
    forwarded[25] = 0;
    const std::uint16_t sum = internet_checksum(std::span(forwarded).subspan(14, 24));
    forwarded[24] = static_cast<std::uint8_t>(sum >> 8);
    forwarded[25] = static_cast<std::uint8_t>(sum);
    EXPECT_EQ(parse_igmp_query(forwarded).status, QueryParseStatus::Malformed);
}

TEST(IgmpFrames, MaxResponseCodes) {
    EXPECT_EQ(igmp_max_response_ms(100), 10'000u);
    EXPECT_EQ(igmp_max_response_ms(0x80), 12'800u);  // RFC 3376 4.1.1: (0x10 << 3) tenths
    EXPECT_EQ(igmp_max_response_ms(0xFF), 3'174'400u);  // (0x1F << 10) tenths
    EXPECT_EQ(mld_max_response_ms(10'000), 10'000u);
    EXPECT_EQ(mld_max_response_ms(0x8000), 32'768u);  // RFC 3810 5.1.3: 0x1000 << 3
}

TEST(MldFrames, QueriesParseAndChecksAreKept) {
    const QueryParseResult general = parse_mld_query(mld_query(10'000));
    ASSERT_EQ(general.status, QueryParseStatus::Ok);
    EXPECT_TRUE(general.query.general);
    EXPECT_EQ(general.query.max_response_ms, 10'000u);
    const QueryParseResult group = parse_mld_query(mld_query(1'000, kGroup6));
    ASSERT_EQ(group.status, QueryParseStatus::Ok);
    EXPECT_EQ(group.query.group, kGroup6);

    Frame global_source = mld_query(1'000);
    global_source[22] = 0x20;  // 2000::1 is no link-local source (RFC 3810 5.1.14)
    EXPECT_EQ(parse_mld_query(global_source).status, QueryParseStatus::Malformed);
    Frame bad_sum = mld_query(1'000);
    bad_sum[64] ^= 0xFF;
    EXPECT_EQ(parse_mld_query(bad_sum).status, QueryParseStatus::Malformed);
    const Frame good = mld_query(1'000);
    for (std::size_t len = 0; len < good.size(); ++len) {
        const Frame cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len));
        EXPECT_NE(parse_mld_query(cut).status, QueryParseStatus::Ok) << len;
    }
}

TEST(IgmpFrames, V1AndV2MessagesAreTheKernels) {
    Frame out(kIgmpV2MessageFrameSize);
    ASSERT_EQ(build_igmp_v1v2_message(out, kMac, kIp4, IgmpType::V2MembershipReport, kGroup4), out.size());
    EXPECT_EQ(out, kKernelIgmpV2Report);
    ASSERT_EQ(build_igmp_v1v2_message(out, kMac, kIp4, IgmpType::V2LeaveGroup, kGroup4), out.size());
    EXPECT_EQ(out, kKernelIgmpV2Leave);
    ASSERT_EQ(build_igmp_v1v2_message(out, kMac, kIp4, IgmpType::V1MembershipReport, kGroup4), out.size());
    EXPECT_EQ(out, kKernelIgmpV1Report);
    EXPECT_TRUE(is_igmp_frame(out));
    EXPECT_EQ(parse_igmp_query(out).status, QueryParseStatus::NotQuery);
}

TEST(MldFrames, V1MessagesAreTheKernels) {
    Frame out(kMldV1MessageFrameSize);
    ASSERT_EQ(build_mldv1_message(out, kMac, kLinkLocal, MldType::V1Report, kGroup6), out.size());
    EXPECT_EQ(out, kKernelMldV1Report);
    ASSERT_EQ(build_mldv1_message(out, kMac, kLinkLocal, MldType::V1Done, kGroup6), out.size());
    EXPECT_EQ(out, kKernelMldV1Done);
    EXPECT_TRUE(is_mld_frame(out));
    EXPECT_EQ(parse_mld_query(out).status, QueryParseStatus::NotQuery);
}

TEST(IgmpFrames, QueryVersionsAndQuerierValues) {
    const QueryParseResult v1 = parse_igmp_query(igmp_query(0));
    ASSERT_EQ(v1.status, QueryParseStatus::Ok);
    EXPECT_EQ(v1.query.version, ProtocolVersion::V1);
    EXPECT_EQ(v1.query.max_response_ms, 10'000u);  // RFC 3376 7.1
    const QueryParseResult v2 = parse_igmp_query(igmp_query(25, {239, 1, 1, 1}));
    ASSERT_EQ(v2.status, QueryParseStatus::Ok);
    EXPECT_EQ(v2.query.version, ProtocolVersion::V2);
    EXPECT_EQ(v2.query.max_response_ms, 2'500u);
    EXPECT_EQ(v2.query.group, kGroup4);
    const QueryParseResult v3 = parse_igmp_query(igmp_query(50, {}, true, 0x0B, 0x8F));  // S flag and QRV 3
    ASSERT_EQ(v3.status, QueryParseStatus::Ok);
    EXPECT_EQ(v3.query.version, ProtocolVersion::V3);
    EXPECT_EQ(v3.query.robustness, 3u);
    EXPECT_EQ(v3.query.query_interval_s, 248u);  // (0x0F | 0x10) << 3 seconds (RFC 3376 4.1.7)

    const QueryParseResult m1 = parse_mld_query(mld_query(1'500, kGroup6, true));
    ASSERT_EQ(m1.status, QueryParseStatus::Ok);
    EXPECT_EQ(m1.query.version, ProtocolVersion::V1);
    EXPECT_EQ(m1.query.max_response_ms, 1'500u);
    const QueryParseResult m2 = parse_mld_query(mld_query(1'000, {}, false, 4, 30));
    ASSERT_EQ(m2.status, QueryParseStatus::Ok);
    EXPECT_EQ(m2.query.version, ProtocolVersion::V2);
    EXPECT_EQ(m2.query.robustness, 4u);
    EXPECT_EQ(m2.query.query_interval_s, 30u);
}

TEST(IgmpFrames, DroppedQueriesSayWhy) {
    Frame bad_sum = igmp_query(100);
    bad_sum[40] ^= 0x01;
    EXPECT_EQ(parse_igmp_query(bad_sum).reason, QueryDropReason::Checksum);
    EXPECT_EQ(parse_igmp_query(igmp_query(100, {10, 0, 0, 1})).reason, QueryDropReason::Group);
    Frame cut = igmp_query(100, {}, true);
    cut.pop_back();  // an IGMP message of 11 bytes: neither v1/v2 nor v3
    auto* ip = reinterpret_cast<wire::Ipv4Hdr*>(cut.data() + 14);
    ip->total_length.set(35);
    ip->checksum.set(0);
    ip->checksum.set(internet_checksum(std::span(cut).subspan(14, 24)));
    EXPECT_EQ(parse_igmp_query(cut).reason, QueryDropReason::Length);
    Frame global_source = mld_query(1'000, {}, true);
    global_source[22] = 0x20;
    EXPECT_EQ(parse_mld_query(global_source).reason, QueryDropReason::Source);
    Frame hop_limit = mld_query(1'000);
    hop_limit[21] = 2;
    EXPECT_EQ(parse_mld_query(hop_limit).reason, QueryDropReason::HopLimit);
    EXPECT_EQ(parse_mld_query(mld_query(1'000)).reason, QueryDropReason::None);
}

// A port with a wire that keeps what it is given.
class RecordingPort final : public Port {
public:
    explicit RecordingPort(bool wire = true) : wire_(wire) {}
    std::size_t receive(std::span<RxFrame>) override { return 0; }
    void release(std::span<RxFrame>) override {}
    bool send(std::span<const std::uint8_t> frame) override {
        sent.emplace_back(frame.begin(), frame.end());
        return true;
    }
    void flush() override {}
    [[nodiscard]] wire::MacAddr mac() const override { return kMac; }
    [[nodiscard]] std::size_t max_frame() const override { return 1518; }
    [[nodiscard]] bool has_wire() const override { return wire_; }
    [[nodiscard]] PortCounters counters() const override { return {}; }
    std::vector<Frame> sent;

private:
    bool wire_;
};

// The record type of the first record of an IGMPv3 report.
std::uint8_t igmp_record_type(const Frame& f) { return f[14 + 24 + 8]; }
std::uint16_t igmp_records(const Frame& f) { return static_cast<std::uint16_t>(f[14 + 24 + 6] << 8 | f[14 + 24 + 7]); }
std::uint8_t mld_record_type(const Frame& f) { return f[14 + 40 + 8 + 8]; }

class MembershipTest : public ::testing::Test {
protected:
    RecordingPort port_;
    GroupMembership host_{port_, kMac, kIp4, kLinkLocal};
    const GroupMembership::Clock::time_point t0_ = GroupMembership::Clock::time_point{} + 1h;
};

TEST_F(MembershipTest, JoinAndLeaveAreReportedTwice) {
    host_.joined(kGroup4, t0_);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(igmp_record_type(port_.sent[0]), static_cast<std::uint8_t>(GroupRecordType::ChangeToExclude));
    host_.poll(t0_ + 999ms);
    EXPECT_EQ(port_.sent.size(), 1u);
    ASSERT_TRUE(host_.next_deadline().has_value());
    EXPECT_EQ(*host_.next_deadline(), t0_ + 1s);
    host_.poll(t0_ + 1s);
    ASSERT_EQ(port_.sent.size(), 2u);
    EXPECT_EQ(port_.sent[1], port_.sent[0]);
    host_.poll(t0_ + 5s);
    EXPECT_EQ(port_.sent.size(), 2u);
    EXPECT_EQ(host_.counters().groups, 1u);

    host_.left(kGroup4, t0_ + 10s);
    ASSERT_EQ(port_.sent.size(), 3u);
    EXPECT_EQ(igmp_record_type(port_.sent[2]), static_cast<std::uint8_t>(GroupRecordType::ChangeToInclude));
    host_.poll(t0_ + 11s);
    ASSERT_EQ(port_.sent.size(), 4u);
    EXPECT_EQ(port_.sent[3], port_.sent[2]);
    EXPECT_EQ(host_.counters().reports_sent, 2u);
    EXPECT_EQ(host_.counters().leaves_sent, 2u);
    EXPECT_EQ(host_.counters().groups, 0u);
    EXPECT_FALSE(host_.next_deadline().has_value());
}

TEST_F(MembershipTest, Ipv6GroupsGoOutAsMld) {
    host_.joined(kGroup6, t0_);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(port_.sent[0], kKernelMldJoin);
    host_.left(kGroup6, t0_ + 1s);
    ASSERT_EQ(port_.sent.size(), 2u);
    EXPECT_EQ(mld_record_type(port_.sent[1]), static_cast<std::uint8_t>(GroupRecordType::ChangeToInclude));
}

TEST_F(MembershipTest, GeneralQueryGetsEveryGroupWithinTheResponseTime) {
    const wire::Gid other = wire::ipv4_mapped({239, 2, 2, 2});
    host_.joined(kGroup4, t0_);
    host_.joined(other, t0_);
    host_.joined(kGroup6, t0_);
    host_.poll(t0_ + 2s);  // the joins' repeats
    port_.sent.clear();
    EXPECT_TRUE(host_.handle_frame(igmp_query(100, {}, true), t0_ + 10s));  // v3, 10 s
    ASSERT_TRUE(host_.next_deadline().has_value());
    EXPECT_LT(*host_.next_deadline(), t0_ + 20s);
    host_.poll(t0_ + 20s);
    ASSERT_EQ(port_.sent.size(), 1u);  // one IGMP report; the MLD groups were not asked about
    EXPECT_EQ(igmp_records(port_.sent[0]), 2u);
    EXPECT_EQ(igmp_record_type(port_.sent[0]), static_cast<std::uint8_t>(GroupRecordType::ModeIsExclude));
    EXPECT_EQ(host_.counters().queries, 1u);

    port_.sent.clear();
    EXPECT_TRUE(host_.handle_frame(mld_query(1'000), t0_ + 30s));
    host_.poll(t0_ + 31s);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(mld_record_type(port_.sent[0]), static_cast<std::uint8_t>(GroupRecordType::ModeIsExclude));
}

TEST_F(MembershipTest, GroupQueryIsAnsweredOnlyForOurGroups) {
    host_.joined(kGroup4, t0_);
    host_.poll(t0_ + 2s);
    port_.sent.clear();
    const Frame v3_group_query = igmp_query(10, {239, 1, 1, 1}, true);
    host_.handle_frame(v3_group_query, t0_ + 10s);
    host_.poll(t0_ + 11s);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(igmp_records(port_.sent[0]), 1u);
    EXPECT_EQ(host_.counters().queries_answered, 1u);

    port_.sent.clear();
    host_.left(kGroup4, t0_ + 20s);
    host_.poll(t0_ + 22s);
    port_.sent.clear();
    host_.handle_frame(v3_group_query, t0_ + 30s);
    host_.poll(t0_ + 31s);
    EXPECT_TRUE(port_.sent.empty());
    EXPECT_EQ(host_.counters().queries, 2u);
    EXPECT_EQ(host_.counters().queries_answered, 1u);
}

TEST_F(MembershipTest, DelaysAreReproducible) {
    RecordingPort other_port;
    GroupMembership twin(other_port, kMac, kIp4, kLinkLocal);
    host_.handle_frame(kBridgeGeneralQuery, t0_);
    twin.handle_frame(kBridgeGeneralQuery, t0_);
    ASSERT_TRUE(host_.next_deadline().has_value());
    EXPECT_EQ(host_.next_deadline(), twin.next_deadline());
}

TEST_F(MembershipTest, MalformedQueriesAreCountedAndConsumed) {
    Frame bad = kBridgeGeneralQuery;
    bad[39] ^= 0x01;
    EXPECT_TRUE(host_.handle_frame(bad, t0_));
    EXPECT_EQ(host_.counters().malformed, 1u);
    EXPECT_EQ(host_.counters().dropped[static_cast<std::size_t>(QueryDropReason::Checksum)], 1u);
    EXPECT_EQ(host_.counters().queries, 0u);
    EXPECT_EQ(host_.counters().ipv4_version, ProtocolVersion::V3);  // a malformed v2 query switches nothing
    EXPECT_TRUE(host_.handle_frame(kKernelIgmpJoin, t0_));  // another host's report: consumed, not counted
    EXPECT_EQ(host_.counters().malformed, 1u);
    const Frame arp(60, 0);
    EXPECT_FALSE(host_.handle_frame(arp, t0_));
}

TEST_F(MembershipTest, AnIgmpV2QuerierBringsV2ReportsUntilItsTimeout) {
    host_.joined(kGroup4, t0_);
    host_.poll(t0_ + 2s);
    port_.sent.clear();
    host_.handle_frame(kBridgeGeneralQuery, t0_ + 10s);  // v2, Max Resp Time 10 s
    EXPECT_EQ(host_.counters().ipv4_version, ProtocolVersion::V2);
    EXPECT_EQ(host_.counters().ipv6_version, ProtocolVersion::V2);  // MLD is not touched
    EXPECT_EQ(host_.counters().older_queries, 1u);
    EXPECT_EQ(host_.counters().queries_answered, 1u);
    ASSERT_TRUE(host_.next_deadline().has_value());
    EXPECT_LT(*host_.next_deadline(), t0_ + 20s);
    host_.poll(t0_ + 20s);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(port_.sent[0], kKernelIgmpV2Report);

    // A join: a v2 report now, repeated after 10 s (RFC 2236 8.10).
    port_.sent.clear();
    const wire::Gid other = wire::ipv4_mapped({239, 2, 2, 2});
    host_.joined(other, t0_ + 30s);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(port_.sent[0][14 + 24], static_cast<std::uint8_t>(IgmpType::V2MembershipReport));
    host_.poll(t0_ + 39s);
    EXPECT_EQ(port_.sent.size(), 1u);
    host_.poll(t0_ + 40s);
    ASSERT_EQ(port_.sent.size(), 2u);
    EXPECT_EQ(port_.sent[1], port_.sent[0]);

    // A leave: one v2 leave to 224.0.0.2, not repeated.
    port_.sent.clear();
    host_.left(kGroup4, t0_ + 50s);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(port_.sent[0], kKernelIgmpV2Leave);
    host_.poll(t0_ + 70s);
    EXPECT_EQ(port_.sent.size(), 1u);

    // 2 x 125 s + 10 s after the query (RFC 3376 8.12), back to v3.
    host_.poll(t0_ + 270s - 1ms);
    EXPECT_EQ(host_.counters().ipv4_version, ProtocolVersion::V2);
    ASSERT_TRUE(host_.next_deadline().has_value());
    EXPECT_EQ(*host_.next_deadline(), t0_ + 270s);
    host_.poll(t0_ + 270s);
    EXPECT_EQ(host_.counters().ipv4_version, ProtocolVersion::V3);
    port_.sent.clear();
    host_.joined(kGroup4, t0_ + 280s);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(port_.sent[0], kKernelIgmpJoin);
}

TEST_F(MembershipTest, TheTimeoutComesFromTheLastV3Query) {
    host_.joined(kGroup4, t0_);
    // QRV 3, QQIC 20 s, Max Resp Time 5 s: 3 x 20 s + 5 s = 65 s.
    host_.handle_frame(igmp_query(50, {}, true, 3, 20), t0_ + 1s);
    host_.handle_frame(kBridgeGroupQuery, t0_ + 2s);
    EXPECT_EQ(host_.counters().ipv4_version, ProtocolVersion::V2);
    host_.poll(t0_ + 67s - 1ms);
    EXPECT_EQ(host_.counters().ipv4_version, ProtocolVersion::V2);
    host_.poll(t0_ + 67s);
    EXPECT_EQ(host_.counters().ipv4_version, ProtocolVersion::V3);
}

TEST_F(MembershipTest, SwitchingCancelsPendingV3Repeats) {
    host_.joined(kGroup4, t0_);
    ASSERT_EQ(port_.sent.size(), 1u);  // the v3 join; its repeat is due at t0 + 1 s
    port_.sent.clear();
    host_.handle_frame(igmp_query(1, {239, 1, 1, 1}), t0_ + 500ms);  // v2, 100 ms
    host_.poll(t0_ + 5s);
    ASSERT_EQ(port_.sent.size(), 1u);  // the answer, and no v3 repeat
    EXPECT_EQ(port_.sent[0], kKernelIgmpV2Report);
}

TEST_F(MembershipTest, AQuerySoonerThanAV2JoinsRepeatBringsItForward) {
    host_.handle_frame(kBridgeGeneralQuery, t0_);  // v2 from now on
    host_.joined(kGroup4, t0_ + 1s);                // repeat due at t0 + 11 s
    port_.sent.clear();
    host_.handle_frame(igmp_query(5, {239, 1, 1, 1}), t0_ + 2s);  // v2, 500 ms
    ASSERT_TRUE(host_.next_deadline().has_value());
    EXPECT_LT(*host_.next_deadline(), t0_ + 2500ms);
    host_.poll(t0_ + 2500ms);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(port_.sent[0], kKernelIgmpV2Report);
}

TEST_F(MembershipTest, AnIgmpV1QuerierBringsV1ReportsAndNoLeave) {
    const wire::Gid other = wire::ipv4_mapped({239, 2, 2, 2});
    host_.joined(kGroup4, t0_);
    host_.joined(other, t0_);
    host_.poll(t0_ + 2s);
    port_.sent.clear();
    host_.handle_frame(igmp_query(0), t0_ + 10s);
    EXPECT_EQ(host_.counters().ipv4_version, ProtocolVersion::V1);
    host_.poll(t0_ + 20s);  // within 10 s, one report per group
    ASSERT_EQ(port_.sent.size(), 2u);
    EXPECT_TRUE(port_.sent[0] == kKernelIgmpV1Report || port_.sent[1] == kKernelIgmpV1Report);
    EXPECT_EQ(port_.sent[0][14 + 24], static_cast<std::uint8_t>(IgmpType::V1MembershipReport));
    EXPECT_EQ(port_.sent[1][14 + 24], static_cast<std::uint8_t>(IgmpType::V1MembershipReport));
    EXPECT_NE(port_.sent[0], port_.sent[1]);

    // A v3 group-specific query about another group is a general one to a
    // v1 host.
    port_.sent.clear();
    host_.handle_frame(igmp_query(10, {239, 9, 9, 9}, true), t0_ + 30s);
    host_.poll(t0_ + 40s);
    EXPECT_EQ(port_.sent.size(), 2u);

    port_.sent.clear();
    host_.left(kGroup4, t0_ + 50s);
    host_.poll(t0_ + 60s);
    EXPECT_TRUE(port_.sent.empty());
    EXPECT_EQ(host_.counters().groups, 1u);
}

TEST_F(MembershipTest, AnMldV1QuerierBringsMldV1Messages) {
    host_.joined(kGroup6, t0_);
    host_.joined(kGroup4, t0_);
    host_.poll(t0_ + 2s);
    port_.sent.clear();
    host_.handle_frame(mld_query(1'000, {}, true), t0_ + 10s);
    EXPECT_EQ(host_.counters().ipv6_version, ProtocolVersion::V1);
    EXPECT_EQ(host_.counters().ipv4_version, ProtocolVersion::V3);
    host_.poll(t0_ + 11s);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(port_.sent[0], kKernelMldV1Report);
    port_.sent.clear();
    host_.left(kGroup6, t0_ + 20s);
    host_.poll(t0_ + 40s);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(port_.sent[0], kKernelMldV1Done);
    EXPECT_EQ(host_.counters().leaves_sent, 1u);
    // 2 x 125 s + 10 s (RFC 3810 9.12).
    host_.poll(t0_ + 270s);
    EXPECT_EQ(host_.counters().ipv6_version, ProtocolVersion::V2);
}

TEST(Membership, NothingGoesOutWithoutAWire) {
    RecordingPort loopback(false);
    GroupMembership host(loopback, kMac, kIp4, kLinkLocal);
    const auto t0 = GroupMembership::Clock::time_point{} + 1h;
    host.joined(kGroup4, t0);
    host.handle_frame(kBridgeGeneralQuery, t0);
    host.left(kGroup4, t0 + 1s);
    host.poll(t0 + 60s);
    EXPECT_TRUE(loopback.sent.empty());
}

}  // namespace
}  // namespace uroce::net
