#include "random_packet.h"

#include "wire/opcode.h"

namespace uroce::test {

namespace {

template <typename T>
T any(Rng& rng) {
    return static_cast<T>(rng());
}

}  // namespace

wire::PacketFields random_fields(Rng& rng, const RandomPacketOptions& opt, std::vector<std::uint8_t>& payload) {
    using wire::Ext;
    const wire::OpcodeInfo& info = wire::opcode_info(opt.opcode);
    wire::PacketFields f;
    for (auto& b : f.eth.dst) {
        b = any<std::uint8_t>(rng);
    }
    for (auto& b : f.eth.src) {
        b = any<std::uint8_t>(rng);
    }
    if (opt.vlan) {
        f.eth.vlan_tci = any<std::uint16_t>(rng);
    }

    f.ip.version = opt.ip;
    if (opt.ip == wire::IpVersion::V4) {
        f.ip.src = wire::ipv4_mapped({any<std::uint8_t>(rng), any<std::uint8_t>(rng), any<std::uint8_t>(rng),
                                      any<std::uint8_t>(rng)});
        f.ip.dst = wire::ipv4_mapped({any<std::uint8_t>(rng), any<std::uint8_t>(rng), any<std::uint8_t>(rng),
                                      any<std::uint8_t>(rng)});
        f.ip.ipv4_id = any<std::uint16_t>(rng);
        f.ip.dont_fragment = (rng() & 1) != 0;
    } else {
        for (auto& b : f.ip.src) {
            b = any<std::uint8_t>(rng);
        }
        for (auto& b : f.ip.dst) {
            b = any<std::uint8_t>(rng);
        }
        f.ip.src[0] = 0xfe;
        f.ip.dst[0] = 0x20;
        f.ip.flow_label = static_cast<std::uint32_t>(rng() & 0xFFFFF);
    }
    f.ip.traffic_class = any<std::uint8_t>(rng);
    f.ip.ttl = any<std::uint8_t>(rng);

    f.udp.src_port = any<std::uint16_t>(rng);
    f.udp.checksum = any<std::uint16_t>(rng);

    f.bth.opcode = opt.opcode;
    f.bth.solicited = (rng() & 1) != 0;
    f.bth.mig_req = (rng() & 1) != 0;
    f.bth.pkey = any<std::uint16_t>(rng);
    f.bth.resv8a = any<std::uint8_t>(rng);
    f.bth.dest_qp = static_cast<std::uint32_t>(rng() & 0xFFFFFF);
    f.bth.ack_req = (rng() & 1) != 0;
    f.bth.resv7 = static_cast<std::uint8_t>(rng() & 0x7F);
    f.bth.psn = wire::Psn(static_cast<std::uint32_t>(rng()));

    if (info.has(Ext::Deth)) {
        f.ext.deth = {any<std::uint32_t>(rng), static_cast<std::uint32_t>(rng() & 0xFFFFFF)};
    }
    if (info.has(Ext::Reth)) {
        f.ext.reth = {rng(), any<std::uint32_t>(rng), any<std::uint32_t>(rng)};
    }
    if (info.has(Ext::AtomicEth)) {
        f.ext.atomic_eth = {rng(), any<std::uint32_t>(rng), rng(), rng()};
    }
    if (info.has(Ext::Aeth)) {
        f.ext.aeth = {any<std::uint8_t>(rng), static_cast<std::uint32_t>(rng() & 0xFFFFFF)};
    }
    if (info.has(Ext::AtomicAckEth)) {
        f.ext.atomic_ack_original = rng();
    }
    if (info.has(Ext::ImmDt)) {
        f.ext.immediate = any<std::uint32_t>(rng);
    }
    if (info.has(Ext::Ieth)) {
        f.ext.invalidate_rkey = any<std::uint32_t>(rng);
    }

    payload.clear();
    if (info.payload_allowed) {
        payload.resize(static_cast<std::size_t>(rng() % (opt.max_payload + 1)));
        for (auto& b : payload) {
            b = any<std::uint8_t>(rng);
        }
    }
    f.payload = payload;
    return f;
}

std::vector<std::uint8_t> buildable_opcodes() {
    std::vector<std::uint8_t> out;
    for (unsigned op = 0; op < 256; ++op) {
        const auto& info = wire::opcode_info(static_cast<std::uint8_t>(op));
        if (info.valid && info.supported) {
            out.push_back(static_cast<std::uint8_t>(op));
        }
    }
    return out;
}

}  // namespace uroce::test
