// Writes the seed corpus of fuzz_cm (tests/fuzz/corpus_cm) with the CM
// builders, in fuzz_cm.cc's input format (a mode byte, then the input):
//   make_cm_seeds DIR
// or, for the decode tests, every message in a QP1 frame as a pcap file:
//   make_cm_seeds --pcap FILE
// mode 0: each of the nine messages as a MAD, as Linux fills REQ and REP;
// mode 1: a REQ in an IPv4 and an IPv6 QP1 frame;
// mode 2: a few pseudo-random scenarios (libFuzzer grows real ones).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cm/codec.h"
#include "cm/format.h"
#include "cm/qp1.h"
#include "cm/service_id.h"

namespace {

using namespace uroce::cm;

void write(const std::string& path, std::uint8_t mode, std::span<const std::uint8_t> bytes) {
    std::ofstream f(path, std::ios::binary);
    f.put(static_cast<char>(mode));
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

ReqMsg rping_req() {
    ConnectParams p;
    p.service_id = ip_service_id(PortSpace::Tcp, 7174);
    p.local_ca_guid = 0x505400fffe123456ULL;
    p.qpn = 0x11;
    p.starting_psn = 0x5e7b1;
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.path.local_gid = uroce::wire::ipv4_mapped({10, 0, 0, 1});
    p.path.remote_gid = uroce::wire::ipv4_mapped({10, 0, 0, 2});
    p.path.flow_label = roce_flow_label(35795, 7174);
    (void)make_cma_private_data(CmaHeader{uroce::wire::IpVersion::V4, 35795, p.path.local_gid, p.path.remote_gid},
                                {}, p.private_data);
    return format_req(p, 0x9b3c0e21);
}

std::vector<std::uint8_t> frame_of(const MadBytes& mad, bool v6) {
    CmFrameAddress addr;
    addr.eth.src = {0x52, 0x54, 0, 0x12, 0x34, 0x56};
    addr.eth.dst = {0x52, 0x54, 0, 0x65, 0x43, 0x21};
    addr.ip.version = v6 ? uroce::wire::IpVersion::V6 : uroce::wire::IpVersion::V4;
    addr.ip.src = v6 ? uroce::wire::Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
                     : uroce::wire::ipv4_mapped({10, 0, 0, 1});
    addr.ip.dst = v6 ? uroce::wire::Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
                     : uroce::wire::ipv4_mapped({10, 0, 0, 2});
    std::vector<std::uint8_t> frame(cm_frame_length(addr));
    (void)build_cm_frame(addr, mad, frame);
    return frame;
}

// A classic pcap file (Ethernet link type), one record per frame.
void write_pcap(const std::string& path, const std::vector<std::vector<std::uint8_t>>& frames) {
    std::ofstream f(path, std::ios::binary);
    auto u32 = [&f](std::uint32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
    auto u16 = [&f](std::uint16_t v) { f.write(reinterpret_cast<const char*>(&v), 2); };
    u32(0xa1b2c3d4);
    u16(2);
    u16(4);
    u32(0);
    u32(0);
    u32(65535);
    u32(1);
    for (const auto& fr : frames) {
        u32(0);
        u32(0);
        u32(static_cast<std::uint32_t>(fr.size()));
        u32(static_cast<std::uint32_t>(fr.size()));
        f.write(reinterpret_cast<const char*>(fr.data()), static_cast<std::streamsize>(fr.size()));
    }
}

}  // namespace

int main(int argc, char** argv) {
    const bool pcap = argc == 3 && std::string(argv[1]) == "--pcap";
    if (argc != 2 && !pcap) {
        std::fprintf(stderr, "usage: %s DIR | --pcap FILE\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    AcceptParams a;
    a.qpn = 0x12;
    a.starting_psn = 0xabcde;
    const std::vector<std::pair<std::string, Message>> messages = {
        {"req", rping_req()},
        {"rep", format_rep(a, 0x1111, 0x9b3c0e21)},
        {"rtu", RtuMsg{0x9b3c0e21, 0x1111, {}}},
        {"dreq", DreqMsg{0x9b3c0e21, 0x1111, 0x12, {}}},
        {"drep", DrepMsg{0x1111, 0x9b3c0e21, {}}},
        {"rej", RejMsg{0, 0x9b3c0e21, MsgRef::Req, 0, 8, {}, {}}},
        {"mra", MraMsg{0x1111, 0x9b3c0e21, MsgRef::Req, 24, {}}},
        {"sidr_req", SidrReqMsg{7, 0xFFFF, ip_service_id(PortSpace::Udp, 7174), {}}},
        {"sidr_rep", SidrRepMsg{7, 0, 0, 0, 0x123, ip_service_id(PortSpace::Udp, 7174), 0x01234567, {}, {}}},
    };
    if (pcap) {
        std::vector<std::vector<std::uint8_t>> frames;
        for (const auto& [name, msg] : messages) {
            frames.push_back(frame_of(build_mad(Mad{cm_header(make_tid(2, 0x9b3c0e21)), msg}), false));
        }
        frames.push_back(frame_of(build_mad(Mad{cm_header(make_tid(2, 0x9b3c0e21)), rping_req()}), true));
        write_pcap(argv[2], frames);
        return 0;
    }
    for (const auto& [name, msg] : messages) {
        const MadBytes mad = build_mad(Mad{cm_header(make_tid(2, 0x9b3c0e21)), msg});
        write(dir + "/mad_" + name + ".bin", 0, mad);
    }
    const MadBytes req = build_mad(Mad{cm_header(make_tid(2, 0x9b3c0e21)), rping_req()});
    for (bool v6 : {false, true}) {
        write(dir + (v6 ? "/frame_req_ipv6.bin" : "/frame_req_ipv4.bin"), 1, frame_of(req, v6));
    }
    std::mt19937 rng(13);
    for (int i = 0; i < 4; ++i) {
        std::vector<std::uint8_t> s(600);
        for (auto& b : s) {
            b = static_cast<std::uint8_t>(rng());
        }
        write(dir + "/scenario_" + std::to_string(i) + ".bin", 2, s);
    }
    return 0;
}
