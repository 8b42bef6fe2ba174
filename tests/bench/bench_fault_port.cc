// What the fault-injection hook (net/fault_port.h) costs with no rule: a
// 64-byte RoCE frame's whole way through the loopback port, send, flush,
// receive and release, directly and through the FaultPort decorator. The
// difference is the hook's cost per frame; issue 15 bounds it at 2% of the
// message rate.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <vector>

#include "net/fault_port.h"
#include "net/loopback_port.h"
#include "wire/build.h"
#include "wire/opcode.h"

namespace {

using namespace uroce;

std::vector<std::uint8_t> small_frame() {
    wire::PacketFields f;
    f.ip.src = wire::ipv4_mapped({10, 77, 0, 1});
    f.ip.dst = wire::ipv4_mapped({10, 77, 0, 2});
    f.bth.opcode = wire::opcode::kRcRdmaWriteOnly;
    f.bth.dest_qp = 17;
    const std::vector<std::uint8_t> payload(64, 0x5A);
    f.payload = payload;
    std::vector<std::uint8_t> out(wire::frame_length(f));
    out.resize(wire::build_frame(f, out).length);
    return out;
}

// A burst of 32 frames round the port: the daemon's receive burst size.
void round_trip(benchmark::State& state, net::Port& port) {
    const std::vector<std::uint8_t> frame = small_frame();
    std::array<net::RxFrame, 32> rx{};
    for (auto _ : state) {
        for (std::size_t i = 0; i < rx.size(); ++i) {
            benchmark::DoNotOptimize(port.send(frame));
        }
        port.flush();
        const std::size_t n = port.receive(rx);
        benchmark::DoNotOptimize(rx[0].bytes.data());
        port.release(std::span(rx.data(), n));
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rx.size()));
}

void BM_LoopbackDirect(benchmark::State& state) {
    net::LoopbackPort port(net::LoopbackConfig{});
    round_trip(state, port);
}
BENCHMARK(BM_LoopbackDirect);

void BM_LoopbackThroughIdleFaultHook(benchmark::State& state) {
    net::LoopbackPort port(net::LoopbackConfig{});
    net::FaultPort hooked(port, 1);
    round_trip(state, hooked);
}
BENCHMARK(BM_LoopbackThroughIdleFaultHook);

}  // namespace

BENCHMARK_MAIN();
