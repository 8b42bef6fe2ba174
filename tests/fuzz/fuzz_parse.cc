// libFuzzer target for the wire parser: arbitrary bytes as one Ethernet frame.
//
// The parser promises never to read outside the frame and to accept only
// packets whose every offset lies inside it. ASan checks the first promise
// while this target reads through every accessor of each accepted packet;
// the checks below state the second, plus the round trip through fields_of
// and build_frame that the tools and tests rely on. A broken invariant traps,
// so libFuzzer keeps the input as a crash reproducer.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "net/group_membership.h"
#include "net/igmp.h"
#include "net/mld.h"
#include "wire/build.h"
#include "wire/describe.h"
#include "wire/fields.h"
#include "wire/parse.h"

namespace {

using namespace uroce::wire;

void require(bool ok) {
    if (!ok) {
        __builtin_trap();
    }
}

bool same_bytes(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i] != b[i]) {
            return false;
        }
    }
    return true;
}

bool all_zero(std::span<const std::uint8_t> bytes) {
    for (std::uint8_t b : bytes) {
        if (b != 0) {
            return false;
        }
    }
    return true;
}

// PadCnt as the builder computes it: what brings the payload to a multiple of 4.
std::size_t pad_needed(std::size_t payload) { return (4 - (payload & 3)) & 3; }

// An extension header the packet hands out must lie between the BTH and the payload.
template <typename H>
void require_ext_inside(const Packet& p, const H* h) {
    if (h == nullptr) {
        return;
    }
    const auto* base = p.frame().data();
    const auto* first = reinterpret_cast<const std::uint8_t*>(h);
    require(first >= base + p.bth_offset() + sizeof(Bth));
    require(first + sizeof(H) <= base + p.payload_offset());
}

// Reads every field the packet exposes, so ASan sees each byte it points at.
// The sum goes into a volatile so the reads cannot be optimised away.
void touch_everything(const Packet& p) {
    std::uint64_t sum = 0;
    sum += p.eth().ether_type.get() + p.eth().dst[0] + p.eth().src[5];
    sum += p.vlan_tci().value_or(0);
    if (const auto* v4 = p.ipv4()) {
        sum += v4->total_length.get() + v4->checksum.get() + v4->src[0] + v4->dst[3];
    }
    if (const auto* v6 = p.ipv6()) {
        sum += v6->flow_label() + v6->payload_length.get() + v6->src[0] + v6->dst[15];
    }
    sum += p.udp().src_port.get() + p.udp().length.get() + p.udp().checksum.get();
    sum += p.opcode() + p.dest_qp() + p.psn().value() + p.bth().pkey.get() + p.pad();
    for (std::uint8_t b : p.src_gid()) {
        sum += b;
    }
    for (std::uint8_t b : p.dst_gid()) {
        sum += b;
    }
    if (const auto* h = p.rdeth()) {
        sum += h->ee_context.get();
    }
    if (const auto* h = p.deth()) {
        sum += h->qkey.get() + h->src_qp.get();
    }
    if (const auto* h = p.xrceth()) {
        sum += h->xrc_srq.get();
    }
    if (const auto* h = p.reth()) {
        sum += h->va.get() + h->rkey.get() + h->dma_length.get();
    }
    if (const auto* h = p.atomic_eth()) {
        sum += h->va.get() + h->rkey.get() + h->swap_add.get() + h->compare.get();
    }
    if (const auto* h = p.aeth()) {
        sum += h->syndrome + h->msn.get();
    }
    if (const auto* h = p.atomic_ack_eth()) {
        sum += h->original.get();
    }
    if (const auto* h = p.immdt()) {
        sum += h->data.get();
    }
    if (const auto* h = p.ieth()) {
        sum += h->rkey.get();
    }
    for (std::uint8_t b : p.payload()) {
        sum += b;
    }
    sum += p.icrc_carried() + p.icrc_expected() + p.trailer_length();
    sum += describe_transport(p).size() + ip_to_string(p.src_gid()).size() + ip_to_string(p.dst_gid()).size();
    sum += to_string(p.eth().src).size();
    volatile std::uint64_t sink = sum;
    (void)sink;
}

void check_layout(const Packet& p, std::span<const std::uint8_t> frame) {
    const OpcodeInfo& info = p.info();
    require(p.frame().data() == frame.data() && p.frame().size() == frame.size());
    require(info.valid && info.supported);
    require(p.bth().tver() == 0);
    require((p.ipv4() != nullptr) == (p.ip_version() == IpVersion::V4));
    require((p.ipv6() != nullptr) == (p.ip_version() == IpVersion::V6));

    const std::size_t ip_len = p.ip_version() == IpVersion::V4 ? sizeof(Ipv4Hdr) : sizeof(Ipv6Hdr);
    const std::size_t l2_len = sizeof(EthHdr) + (p.vlan_tci() ? sizeof(VlanTag) : 0);
    require(p.l3_offset() == l2_len);
    require(p.bth_offset() == p.l3_offset() + ip_len + sizeof(UdpHdr));
    require(p.payload_offset() == p.bth_offset() + info.header_length);
    require(p.payload_offset() + p.payload().size() + p.pad() == p.icrc_offset());
    require(p.icrc_offset() + kIcrcSize <= frame.size());
    require(p.icrc_offset() + kIcrcSize + p.trailer_length() == frame.size());
    require(info.payload_allowed || p.payload().empty());

    // The IP and UDP lengths must agree with where the parser put the ICRC.
    const std::size_t l3_end = p.icrc_offset() + kIcrcSize;
    require(p.udp().length.get() == l3_end - (p.bth_offset() - sizeof(UdpHdr)));
    if (const auto* v4 = p.ipv4()) {
        require(v4->total_length.get() == l3_end - p.l3_offset());
    } else {
        require(p.ipv6()->payload_length.get() == l3_end - p.l3_offset() - sizeof(Ipv6Hdr));
    }

    require_ext_inside(p, p.rdeth());
    require_ext_inside(p, p.deth());
    require_ext_inside(p, p.xrceth());
    require_ext_inside(p, p.reth());
    require_ext_inside(p, p.atomic_eth());
    require_ext_inside(p, p.aeth());
    require_ext_inside(p, p.atomic_ack_eth());
    require_ext_inside(p, p.immdt());
    require_ext_inside(p, p.ieth());
    require(describe_transport(p).starts_with(info.name_view()));
}

// True when the frame holds nothing fields_of drops: the builder zeroes pad,
// reserved bytes and the IPv4 reserved flag, and derives PadCnt from the
// payload length. For such frames the rebuild must match byte for byte.
bool canonical(const Packet& p) {
    const std::size_t pad_bytes = p.pad();
    if (pad_bytes != pad_needed(p.payload().size())) {
        return false;
    }
    if (!all_zero(p.frame().subspan(p.payload_offset() + p.payload().size(), pad_bytes))) {
        return false;
    }
    if (const auto* v4 = p.ipv4(); v4 != nullptr && (v4->flags_frag.get() & 0x8000) != 0) {
        return false;
    }
    if (const auto* h = p.deth(); h != nullptr && h->reserved != 0) {
        return false;
    }
    if (const auto* h = p.xrceth(); h != nullptr && h->reserved != 0) {
        return false;
    }
    if (p.info().has(Ext::CnpReserved)) {
        const std::size_t off = p.bth_offset() + p.info().offset[static_cast<std::size_t>(Ext::CnpReserved)];
        if (!all_zero(p.frame().subspan(off, sizeof(CnpReserved)))) {
            return false;
        }
    }
    return true;
}

void check_round_trip(const Packet& p) {
    const PacketFields f = fields_of(p);
    std::vector<std::uint8_t> out(frame_length(f));
    const BuildResult built = build_frame(f, out);
    if (built.status == BuildStatus::TooLarge) {
        // Only possible when the carried PadCnt is smaller than the payload
        // needs: the builder pads to a multiple of 4, which can push a packet
        // that was at the 16-bit IP length limit past it.
        const std::size_t ip_length_field = out.size() - p.l3_offset() - (p.ipv6() != nullptr ? sizeof(Ipv6Hdr) : 0);
        require(ip_length_field > 0xFFFF && p.pad() < pad_needed(p.payload().size()));
        return;
    }
    require(built.status == BuildStatus::Ok);
    require(built.length == out.size());

    const ParseResult again = parse_and_verify(out);
    require(again.ok());
    const Packet& q = again.packet;
    require(q.opcode() == p.opcode());
    require(q.psn() == p.psn());
    require(q.dest_qp() == p.dest_qp());
    require(q.ip_version() == p.ip_version());
    require(q.vlan_tci() == p.vlan_tci());
    require(q.src_gid() == p.src_gid() && q.dst_gid() == p.dst_gid());
    require(same_bytes(q.payload(), p.payload()));
    require(q.trailer_length() == 0);

    if (canonical(p)) {
        // Everything up to the ICRC must come back as it was; the ICRC too
        // when the original carried a correct one.
        const std::span<const std::uint8_t> before_icrc = p.frame().first(p.icrc_offset());
        require(q.icrc_offset() == p.icrc_offset());
        require(same_bytes(std::span<const std::uint8_t>(out).first(q.icrc_offset()), before_icrc));
        require(p.icrc_ok() == (q.icrc_carried() == p.icrc_carried()));
    }
}

}  // namespace

// A port that keeps what it is given: the reports GroupMembership sends.
class RecordingPort final : public uroce::net::Port {
public:
    std::size_t receive(std::span<uroce::net::RxFrame>) override { return 0; }
    void release(std::span<uroce::net::RxFrame>) override {}
    bool send(std::span<const std::uint8_t> frame) override {
        sent.emplace_back(frame.begin(), frame.end());
        return true;
    }
    void flush() override {}
    [[nodiscard]] MacAddr mac() const override { return {0x02, 0, 0, 0, 0, 1}; }
    [[nodiscard]] std::size_t max_frame() const override { return 1518; }
    [[nodiscard]] bool has_wire() const override { return true; }
    [[nodiscard]] uroce::net::PortCounters counters() const override { return {}; }
    std::vector<std::vector<std::uint8_t>> sent;
};

// The frame as an IGMP or MLD query (net/igmp.h, net/mld.h): a query the
// parser accepts asks about no group or a multicast one, and a host that is
// in that group (and in 239.1.1.1 and ff0e::1) answers it, within the
// response time, with reports that are IGMP/MLD again and no query.
void check_membership(std::span<const std::uint8_t> frame) {
    using namespace uroce::net;
    const QueryParseResult v4 = parse_igmp_query(frame);
    const QueryParseResult v6 = parse_mld_query(frame);
    require(v4.status == QueryParseStatus::NotQuery || is_igmp_frame(frame));
    require(v6.status == QueryParseStatus::NotQuery || is_mld_frame(frame));
    for (const QueryParseResult* r : {&v4, &v6}) {
        if (r->status == QueryParseStatus::Ok) {
            require(r->query.general == all_zero(r->query.group));
        }
        require((r->status == QueryParseStatus::Malformed) == (r->reason != QueryDropReason::None));
    }
    RecordingPort port;
    GroupMembership host(port, port.mac(), {10, 0, 0, 1}, Gid{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
    const auto start = GroupMembership::Clock::time_point{};
    const Gid v4_group = ipv4_mapped({239, 1, 1, 1});
    const Gid v6_group = {0xFF, 0x0E, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    host.joined(v4_group, start);
    host.joined(v6_group, start);
    for (const QueryParseResult* r : {&v4, &v6}) {
        if (r->status == QueryParseStatus::Ok && !r->query.general) {
            host.joined(r->query.group, start);
        }
    }
    port.sent.clear();
    const bool consumed = host.handle_frame(frame, start);
    require(consumed == (is_igmp_frame(frame) || is_mld_frame(frame)));
    const std::uint32_t longest = std::max(v4.query.max_response_ms, v6.query.max_response_ms);
    host.poll(start + std::chrono::milliseconds(longest));
    const MembershipCounters c = host.counters();
    require(c.queries + c.malformed <= 1);
    std::uint64_t dropped = 0;
    for (const std::uint64_t n : c.dropped) {
        dropped += n;
    }
    require(dropped == c.malformed);
    // An older querier's query switches its family to that version
    // (RFC 3376 7.2.1, RFC 3810 8.2.1) for far longer than the poll above.
    require(v4.status != QueryParseStatus::Ok || c.ipv4_version == v4.query.version);
    require(v6.status != QueryParseStatus::Ok || c.ipv6_version == v6.query.version);
    for (const auto& sent : port.sent) {
        require(is_igmp_frame(sent) || is_mld_frame(sent));
        require(parse_igmp_query(sent).status == QueryParseStatus::NotQuery);
        require(parse_mld_query(sent).status == QueryParseStatus::NotQuery);
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::uint8_t> frame(data, size);
    check_membership(frame);
    const ParseResult parsed = parse_frame(frame);
    const ParseResult verified = parse_and_verify(frame);

    // parse_and_verify is parse_frame plus the ICRC, nothing else.
    if (!parsed.ok()) {
        require(verified.status == parsed.status);
        require(parse_status_info(parsed.status).name.size() > 0);
        return 0;
    }
    require(verified.ok() || verified.status == ParseStatus::BadIcrc);
    require(verified.ok() == parsed.packet.icrc_ok());

    check_layout(parsed.packet, frame);
    touch_everything(parsed.packet);
    check_round_trip(parsed.packet);
    return 0;
}
