// What the fault-injection hook (net/fault_port.h) costs with no rule, and
// the capture hook (uroced's CapturingPort and CaptureTap) with no capture
// session: a 64-byte RoCE frame's whole way through the loopback port, send,
// flush, receive and release, directly, through the FaultPort decorator, and
// through both decorators as uroced stacks them (FaultPort -> CapturingPort
// -> port), with the data path's one received-frame check of the tap. The
// difference is the hooks' cost per frame; issue 15 bounds it at 2% of the
// message rate.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <vector>

#include "capturing_port.h"
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
// `tap`, when given, is asked once per received frame, as Datapath does.
void round_trip(benchmark::State& state, net::Port& port, const daemon::CaptureTap* tap = nullptr) {
    const std::vector<std::uint8_t> frame = small_frame();
    std::array<net::RxFrame, 32> rx{};
    for (auto _ : state) {
        for (std::size_t i = 0; i < rx.size(); ++i) {
            benchmark::DoNotOptimize(port.send(frame));
        }
        port.flush();
        const std::size_t n = port.receive(rx);
        if (tap != nullptr) {
            for (std::size_t i = 0; i < n; ++i) {
                benchmark::DoNotOptimize(tap->active());
            }
        }
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

void BM_LoopbackThroughIdleFaultAndCaptureHooks(benchmark::State& state) {
    net::LoopbackPort port(net::LoopbackConfig{});
    daemon::CaptureTap tap;
    daemon::CapturingPort capturing(port, tap);
    net::FaultPort hooked(capturing, 1);
    round_trip(state, hooked, &tap);
}
BENCHMARK(BM_LoopbackThroughIdleFaultAndCaptureHooks);

}  // namespace

BENCHMARK_MAIN();
