// IGMP / MLD: the reports we build are byte for byte what the Linux kernel
// sends (frames captured on a veth, 02:00:00:00:00:0a with 192.0.2.1 and
// fe80::ff:fe00:a, joining 239.1.1.1 and ff0e::1); the queries a Linux
// bridge sends (mcast_querier 1) parse, and no truncation or broken checksum
// does; GroupMembership reports joins and leaves (each twice), answers
// general and group-specific queries within the response time, stays quiet
// about groups it is not in, and sends nothing on a port without a wire.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
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
// `code`, hop-by-hop Router Alert first (as Linux bridges send them).
Frame mld_query(std::uint16_t code, const wire::Gid& group = {}) {
    Frame f(14 + 40 + 8 + 28, 0);
    f[12] = 0x86;
    f[13] = 0xDD;
    auto* ip = reinterpret_cast<wire::Ipv6Hdr*>(f.data() + 14);
    ip->vtc_flow.set(6u << 28);
    ip->payload_length.set(8 + 28);
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
    const std::uint16_t sum = icmpv6_checksum(ip->src, ip->dst, std::span(icmp, 28));
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
    EXPECT_TRUE(host_.handle_frame(kBridgeGeneralQuery, t0_ + 10s));
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
    host_.handle_frame(kBridgeGroupQuery, t0_ + 10s);
    host_.poll(t0_ + 11s);
    ASSERT_EQ(port_.sent.size(), 1u);
    EXPECT_EQ(igmp_records(port_.sent[0]), 1u);

    port_.sent.clear();
    host_.left(kGroup4, t0_ + 20s);
    host_.poll(t0_ + 22s);
    port_.sent.clear();
    host_.handle_frame(kBridgeGroupQuery, t0_ + 30s);
    host_.poll(t0_ + 31s);
    EXPECT_TRUE(port_.sent.empty());
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
    EXPECT_EQ(host_.counters().queries, 0u);
    EXPECT_TRUE(host_.handle_frame(kKernelIgmpJoin, t0_));  // another host's report: consumed, not counted
    EXPECT_EQ(host_.counters().malformed, 1u);
    const Frame arp(60, 0);
    EXPECT_FALSE(host_.handle_frame(arp, t0_));
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
