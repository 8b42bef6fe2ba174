// Per-packet costs of the wire layer: ICRC, raw CRC-32, parse and build.
//
// Every figure is per packet (one iteration is one packet). The ICRC and
// CRC benchmarks also report throughput over the bytes the CRC covers (IP
// header to pad, i.e. without Ethernet header and ICRC), which is what the
// "GB/s" targets refer to. Google Benchmark prints that rate in binary units
// (1 Gi/s = 1.074 GB/s).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "wire/build.h"
#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/parse.h"

namespace {

using namespace uroce::wire;

std::vector<std::uint8_t> make_payload(std::size_t size) {
    std::vector<std::uint8_t> payload(size);
    for (std::size_t i = 0; i < size; ++i) {
        payload[i] = static_cast<std::uint8_t>(i * 131 + 7);
    }
    return payload;
}

// Fields of a typical data packet; `payload` must outlive the result.
PacketFields make_fields(std::uint8_t opcode, IpVersion ip, std::span<const std::uint8_t> payload) {
    PacketFields f;
    f.eth.dst = {0x02, 0x42, 0x0a, 0x4d, 0x00, 0x02};
    f.eth.src = {0x02, 0x42, 0x0a, 0x4d, 0x00, 0x01};
    f.ip.version = ip;
    if (ip == IpVersion::V4) {
        f.ip.src = ipv4_mapped({10, 77, 0, 1});
        f.ip.dst = ipv4_mapped({10, 77, 0, 2});
    } else {
        f.ip.src = Gid{0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        f.ip.dst = Gid{0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
        f.ip.flow_label = 0x12345;
    }
    f.udp.src_port = 0xC0DE;
    f.bth.opcode = opcode;
    f.bth.dest_qp = 0x000011;
    f.bth.psn = Psn(0x123456);
    f.bth.ack_req = true;
    f.ext.reth = {0x00007f0000000000, 0x1234, static_cast<std::uint32_t>(payload.size())};
    f.payload = payload;
    return f;
}

std::vector<std::uint8_t> make_frame(const PacketFields& f) {
    std::vector<std::uint8_t> frame(frame_length(f));
    const BuildResult r = build_frame(f, frame);
    if (r.status != BuildStatus::Ok) {
        frame.clear();  // reported by the caller through SkipWithError
    }
    return frame;
}

// One built packet, with the span the ICRC covers.
struct Sample {
    std::vector<std::uint8_t> payload;
    std::vector<std::uint8_t> frame;
    ParseResult parsed;

    Sample(std::uint8_t opcode, IpVersion ip, std::size_t payload_size)
        : payload(make_payload(payload_size)),
          frame(make_frame(make_fields(opcode, ip, payload))),
          parsed(parse_and_verify(frame)) {}
    // `parsed` points into `frame`, so a copy would dangle.
    Sample(const Sample&) = delete;
    Sample& operator=(const Sample&) = delete;

    [[nodiscard]] bool ok() const { return parsed.ok(); }
    [[nodiscard]] std::span<const std::uint8_t> icrc_covered() const {
        const Packet& p = parsed.packet;
        return p.frame().subspan(p.l3_offset(), p.icrc_offset() - p.l3_offset());
    }
};

void set_rates(benchmark::State& state, std::size_t bytes_per_packet) {
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes_per_packet));
    state.counters["bytes"] = static_cast<double>(bytes_per_packet);
}

void BM_Icrc(benchmark::State& state, std::uint8_t opcode, IpVersion ip) {
    const Sample s(opcode, ip, static_cast<std::size_t>(state.range(0)));
    if (!s.ok()) {
        state.SkipWithError("could not build the frame");
        return;
    }
    const std::span<const std::uint8_t> covered = s.icrc_covered();
    const std::uint32_t expected = s.parsed.packet.icrc_carried();
    for (auto _ : state) {
        // Hiding the pointer keeps the compiler from assuming the data is
        // unchanged between iterations (it cannot see into icrc_compute anyway,
        // but LTO could).
        const std::uint8_t* data = covered.data();
        benchmark::DoNotOptimize(data);
        std::uint32_t crc = icrc_compute(ip, std::span(data, covered.size()));
        benchmark::DoNotOptimize(crc);
    }
    if (icrc_compute(ip, covered) != expected) {
        state.SkipWithError("ICRC does not match the built frame");
    }
    set_rates(state, covered.size());
}

void BM_Crc32Ieee(benchmark::State& state) {
    const std::vector<std::uint8_t> data = make_payload(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        const std::uint8_t* p = data.data();
        benchmark::DoNotOptimize(p);
        std::uint32_t crc = crc32_ieee(0, std::span(p, data.size()));
        benchmark::DoNotOptimize(crc);
    }
    set_rates(state, data.size());
}

void BM_ParseFrame(benchmark::State& state, IpVersion ip) {
    const Sample s(opcode::kRcRdmaWriteOnly, ip, static_cast<std::size_t>(state.range(0)));
    if (!s.ok()) {
        state.SkipWithError("could not build the frame");
        return;
    }
    for (auto _ : state) {
        const std::uint8_t* data = s.frame.data();
        benchmark::DoNotOptimize(data);
        ParseResult r = parse_frame(std::span(data, s.frame.size()));
        benchmark::DoNotOptimize(r);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["bytes"] = static_cast<double>(s.frame.size());
}

// The full receive-side check: structure, then the ICRC.
void BM_ParseAndVerify(benchmark::State& state, IpVersion ip) {
    const Sample s(opcode::kRcRdmaWriteOnly, ip, static_cast<std::size_t>(state.range(0)));
    if (!s.ok()) {
        state.SkipWithError("could not build the frame");
        return;
    }
    for (auto _ : state) {
        const std::uint8_t* data = s.frame.data();
        benchmark::DoNotOptimize(data);
        ParseResult r = parse_and_verify(std::span(data, s.frame.size()));
        benchmark::DoNotOptimize(r);
    }
    set_rates(state, s.icrc_covered().size());
}

// Building includes copying the payload and computing the ICRC.
void BM_BuildFrame(benchmark::State& state, IpVersion ip) {
    const std::vector<std::uint8_t> payload = make_payload(static_cast<std::size_t>(state.range(0)));
    const PacketFields f = make_fields(opcode::kRcRdmaWriteOnly, ip, payload);
    std::vector<std::uint8_t> out(frame_length(f));
    for (auto _ : state) {
        BuildResult r = build_frame(f, out);
        benchmark::DoNotOptimize(r);
        benchmark::ClobberMemory();  // the frame written counts as used
    }
    if (build_frame(f, out).status != BuildStatus::Ok || !parse_and_verify(out).ok()) {
        state.SkipWithError("build_frame did not produce a valid frame");
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["bytes"] = static_cast<double>(out.size());
}

constexpr std::int64_t kSmall = 64;
constexpr std::int64_t kLarge = 4096;

BENCHMARK_CAPTURE(BM_Icrc, rc_send_only_ipv4, opcode::kRcSendOnly, IpVersion::V4)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(BM_Icrc, rc_send_only_ipv6, opcode::kRcSendOnly, IpVersion::V6)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(BM_Icrc, rc_write_only_ipv4, opcode::kRcRdmaWriteOnly, IpVersion::V4)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(BM_Icrc, rc_write_only_ipv6, opcode::kRcRdmaWriteOnly, IpVersion::V6)->Arg(kSmall)->Arg(kLarge);
// The CRC alone over a 64 B packet's covered bytes (IPv4 SEND_ONLY: 104) and
// over 4 KiB shows what the ICRC adds on top: the header copy and a second call.
BENCHMARK(BM_Crc32Ieee)->Arg(104)->Arg(kLarge);
BENCHMARK_CAPTURE(BM_ParseFrame, ipv4, IpVersion::V4)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(BM_ParseFrame, ipv6, IpVersion::V6)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(BM_ParseAndVerify, ipv4, IpVersion::V4)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(BM_ParseAndVerify, ipv6, IpVersion::V6)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(BM_BuildFrame, ipv4, IpVersion::V4)->Arg(kSmall)->Arg(kLarge);
BENCHMARK_CAPTURE(BM_BuildFrame, ipv6, IpVersion::V6)->Arg(kSmall)->Arg(kLarge);

}  // namespace

BENCHMARK_MAIN();
