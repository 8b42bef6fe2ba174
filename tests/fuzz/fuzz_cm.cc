// libFuzzer target for the IB CM (emulator/cm), hostile peer's view.
//
// An input is a mode byte, then:
//  - mode 0: the rest is one MAD. parse_mad must never read outside it;
//    an accepted MAD must rebuild to bytes that parse to the same message
//    and rebuild identically (the codec's round trip).
//  - mode 1: the rest is one Ethernet frame for parse_cm_frame, with the
//    same checks on an accepted MAD; then the same frame through a
//    CmFramer into a listening manager, whose answer frames must parse.
//  - otherwise: a scenario for two ConnectionManagers wired back to back
//    (A and B, fake clock), read with FuzzedDataProvider: the layer-above
//    calls on either side (listen, connect, accept, confirm, reject,
//    disconnect, establish, destroy, SIDR), raw MADs from the fuzzer,
//    MADs a side sent replayed with a byte changed, delivery of queued MADs
//    (lost, duplicated, reordered), time passing. Event upcalls sometimes
//    answer from inside (accept, destroy, reject or drop verdicts).
// Invariants: every MAD a manager sends parses; after the scenario, once
// every ID the test knows is destroyed and timewait is over, neither
// manager holds a connection or a timer (nothing leaks, nothing is stuck).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <span>
#include <vector>

#include "cm/codec.h"
#include "cm/describe.h"
#include "cm/framer.h"
#include "cm/manager.h"
#include "cm/qp1.h"

namespace {

using namespace uroce::cm;

void require(bool ok) {
    if (!ok) {
        __builtin_trap();
    }
}

void check_round_trip(const Mad& mad) {
    const MadBytes again = build_mad(mad);
    const MadParseResult r = parse_mad(again);
    require(r.ok());
    require(build_mad(r.mad) == again);
    (void)describe(summarize(r.mad));
}

void fuzz_mad(std::span<const std::uint8_t> bytes) {
    const MadParseResult r = parse_mad(bytes);
    if (r.ok()) {
        require(bytes.size() == kMadSize);
        check_round_trip(r.mad);
    }
}

// The receiving side of a port: frames through a CmFramer into a manager
// that listens, answering whatever it is asked to through frames of its own.
struct FrameCollector : FramePort {
    std::size_t frames = 0;
    std::optional<uroce::wire::EthFields> ethernet_to(const uroce::wire::Gid&) override {
        return uroce::wire::EthFields{};
    }
    void send_frame(std::span<const std::uint8_t> frame) override {
        ++frames;
        require(parse_cm_frame(frame).ok());
    }
};

struct NullClock : CmClock {
    CmTime now() const override { return CmTime(0); }
};

struct KeepAll : CmEventSink {
    Verdict on_cm_event(const CmEvent&) override { return Verdict::keep(); }
};

void fuzz_frame(std::span<const std::uint8_t> bytes) {
    const CmFrameResult r = parse_cm_frame(bytes);
    if (r.ok()) {
        require(r.packet.payload().size() == kMadSize);
        require(r.packet.dest_qp() == kGsiQpn);
        check_round_trip(r.mad);
    }
    NullClock clock;
    FrameCollector port;
    CmFramer framer(port);
    KeepAll sink;
    ConnectionManager cm(CmConfig{}, clock, framer, sink);
    framer.attach(cm);
    cm.listen(0x0000000001061c06ULL, 1);
    cm.listen(0x0000000001111c06ULL, 2);
    require(framer.receive_frame(bytes) == r.status);
    require(cm.connection_count() <= 1);
}

struct Clock : CmClock {
    CmTime t{0};
    CmTime now() const override { return t; }
};

struct Queue : MadSender {
    std::deque<MadBytes> q;
    std::vector<MadBytes> recent;
    void send_mad(const PeerAddress&, const MadBytes& mad) override {
        require(parse_mad(mad).ok());
        q.push_back(mad);
        if (recent.size() < 32) {
            recent.push_back(mad);
        }
    }
};

const uroce::wire::Gid kA = uroce::wire::ipv4_mapped({10, 0, 0, 1});
const uroce::wire::Gid kB = uroce::wire::ipv4_mapped({10, 0, 0, 2});

struct Side;

struct Sink : CmEventSink {
    Side* side = nullptr;
    Verdict on_cm_event(const CmEvent& e) override;
};

struct Side {
    Queue out;
    Sink sink;
    ConnectionManager cm;
    std::set<CommId> ids;
    FuzzedDataProvider* fdp = nullptr;
    Side(std::uint64_t guid, std::uint32_t seed, const Clock& clock)
        : cm(make_config(guid, seed), clock, out, sink) {
        sink.side = this;
    }
    static CmConfig make_config(std::uint64_t guid, std::uint32_t seed) {
        CmConfig c;
        c.ca_guid = guid;
        c.random_seed = seed;
        return c;
    }
    CommId pick() {
        if (ids.empty()) {
            return fdp->ConsumeIntegral<CommId>();
        }
        auto it = ids.begin();
        std::advance(it, fdp->ConsumeIntegralInRange<std::size_t>(0, ids.size() - 1));
        return *it;
    }
};

Verdict Sink::on_cm_event(const CmEvent& e) {
    side->ids.insert(e.id);
    if (e.type != CmEventType::ReqReceived && e.type != CmEventType::SidrReqReceived) {
        return Verdict::keep();
    }
    switch (side->fdp->ConsumeIntegralInRange<int>(0, 5)) {
    case 0: return Verdict::drop();
    case 1: return Verdict::reject(RejReason::ConsumerDefined);
    case 2: {
        AcceptParams a;
        a.qpn = side->fdp->ConsumeIntegralInRange<std::uint32_t>(2, 40);
        (void)side->cm.accept(e.id, a);
        return Verdict::keep();
    }
    case 3: side->cm.destroy(e.id); return Verdict::keep();
    default: return Verdict::keep();
    }
}

constexpr std::uint64_t kSid = 0x0000000001061c06ULL;

void deliver(Side& from, Side& to, bool from_a, FuzzedDataProvider& fdp) {
    if (from.out.q.empty()) {
        return;
    }
    const MadBytes m = from.out.q.front();
    from.out.q.pop_front();
    const PeerAddress addr = from_a ? PeerAddress{kB, kA} : PeerAddress{kA, kB};
    switch (fdp.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return;  // lost
    case 1: to.cm.receive(addr, m); to.cm.receive(addr, m); return;  // duplicated
    case 2: from.out.q.push_back(m); return;  // reordered
    default: to.cm.receive(addr, m); return;
    }
}

void act(Side& self, Side& peer, bool is_a, FuzzedDataProvider& fdp, Clock& clock) {
    const PeerAddress to_peer = is_a ? PeerAddress{kA, kB} : PeerAddress{kB, kA};
    switch (fdp.ConsumeIntegralInRange<int>(0, 14)) {
    case 0: self.cm.listen(kSid + fdp.ConsumeIntegralInRange<int>(0, 1), 1); break;
    case 1: {
        ConnectParams p;
        p.service_id = kSid + fdp.ConsumeIntegralInRange<int>(0, 1);
        p.qpn = fdp.ConsumeIntegralInRange<std::uint32_t>(2, 40);
        p.local_ca_guid = is_a ? 0xA : 0xB;
        p.max_cm_retries = fdp.ConsumeIntegralInRange<std::uint8_t>(0, 15);
        if (auto id = self.cm.connect(to_peer, p)) {
            self.ids.insert(*id);
        }
        break;
    }
    case 2: (void)self.cm.accept(self.pick(), AcceptParams{}); break;
    case 3: (void)self.cm.confirm(self.pick()); break;
    case 4: (void)self.cm.reject(self.pick(), static_cast<RejReason>(fdp.ConsumeIntegral<std::uint16_t>())); break;
    case 5: (void)self.cm.disconnect(self.pick()); break;
    case 6: (void)self.cm.establish(self.pick()); break;
    case 7: self.cm.destroy(self.pick()); break;
    case 8: {
        SidrRequestParams s;
        s.service_id = kSid + fdp.ConsumeIntegralInRange<int>(0, 1);
        if (auto id = self.cm.sidr_request(to_peer, s)) {
            self.ids.insert(*id);
        }
        break;
    }
    case 9: (void)self.cm.sidr_reply(self.pick(), SidrReplyParams{}); break;
    case 10: {  // raw bytes from the fuzzer as a MAD from the peer
        MadBytes m{};
        const auto raw = fdp.ConsumeBytes<std::uint8_t>(kMadSize);
        std::copy(raw.begin(), raw.end(), m.begin());
        if (fdp.ConsumeBool()) {  // mostly a CM MAD so the messages are reached
            m[0] = 1;
            m[1] = 7;
            m[2] = 2;
            m[3] = 3;
            m[16] = 0;
            m[17] = static_cast<std::uint8_t>(0x10 + fdp.ConsumeIntegralInRange<int>(0, 8));
        }
        self.cm.receive(PeerAddress{to_peer.local, to_peer.remote}, m);
        break;
    }
    case 11: {  // something the peer sent earlier, with one byte changed
        if (peer.out.recent.empty()) {
            break;
        }
        MadBytes m = peer.out.recent[fdp.ConsumeIntegralInRange<std::size_t>(0, peer.out.recent.size() - 1)];
        m[fdp.ConsumeIntegralInRange<std::size_t>(0, kMadSize - 1)] = fdp.ConsumeIntegral<std::uint8_t>();
        self.cm.receive(PeerAddress{to_peer.local, to_peer.remote}, m);
        break;
    }
    case 12:
        clock.t += CmTime(fdp.ConsumeIntegralInRange<int>(0, 70000));
        self.cm.on_timer();
        peer.cm.on_timer();
        break;
    case 13:
        if (auto d = self.cm.next_deadline()) {
            clock.t = std::max(clock.t, *d);
            self.cm.on_timer();
        }
        break;
    default: deliver(peer, self, !is_a, fdp); break;
    }
}

void fuzz_scenario(std::span<const std::uint8_t> bytes) {
    FuzzedDataProvider fdp(bytes.data(), bytes.size());
    Clock clock;
    Side a(0xA, fdp.ConsumeIntegral<std::uint32_t>(), clock);
    Side b(0xB, fdp.ConsumeIntegral<std::uint32_t>(), clock);
    a.fdp = &fdp;
    b.fdp = &fdp;
    for (int step = 0; step < 400 && fdp.remaining_bytes() > 0; ++step) {
        const bool on_a = fdp.ConsumeBool();
        act(on_a ? a : b, on_a ? b : a, on_a, fdp, clock);
    }
    // Everything the layers above know of goes away; after timewait nothing
    // may be left (no connection, no timer) on either side.
    for (Side* s : {&a, &b}) {
        for (CommId id : std::set<CommId>(s->ids)) {
            s->cm.destroy(id);
        }
        s->ids.clear();
    }
    for (int i = 0; i < 4; ++i) {
        a.out.q.clear();
        b.out.q.clear();
        clock.t += CmTime(10'000'000);
        a.cm.on_timer();
        b.cm.on_timer();
    }
    for (Side* s : {&a, &b}) {
        // Connections that only ever existed inside an upcall the sink
        // dropped are gone already; any left must belong to unknown IDs.
        for (CommId id : std::set<CommId>(s->ids)) {
            s->cm.destroy(id);
        }
        clock.t += CmTime(10'000'000);
        s->cm.on_timer();
        require(s->cm.connection_count() == 0);
        require(!s->cm.next_deadline().has_value());
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return 0;
    }
    const std::span<const std::uint8_t> rest(data + 1, size - 1);
    switch (data[0] % 4) {
    case 0: fuzz_mad(rest); break;
    case 1: fuzz_frame(rest); break;
    default: fuzz_scenario(rest); break;
    }
    return 0;
}
