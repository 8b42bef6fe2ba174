// Two connection managers wired back to back through queues, with a fake
// clock: the test decides which MADs arrive (loss, duplication) and when
// time passes. Side A is 10.0.0.1 (CA GUID 0xA...), side B 10.0.0.2.
#pragma once

#include <deque>
#include <functional>
#include <vector>

#include "cm/manager.h"

namespace uroce::cm::test {

struct FakeClock : CmClock {
    CmTime t{1000};
    CmTime now() const override { return t; }
};

struct Sent {
    PeerAddress to;
    MadBytes mad;
};

struct Link : MadSender {
    std::deque<Sent> queue;
    std::vector<MadBytes> log;
    void send_mad(const PeerAddress& to, const MadBytes& mad) override {
        queue.push_back({to, mad});
        log.push_back(mad);
    }
};

struct Recorder : CmEventSink {
    std::vector<CmEvent> events;
    std::function<Verdict(const CmEvent&)> reply;
    Verdict on_cm_event(const CmEvent& e) override {
        events.push_back(e);
        return reply ? reply(e) : Verdict::keep();
    }
    [[nodiscard]] std::size_t count(CmEventType t) const {
        std::size_t n = 0;
        for (const auto& e : events) {
            n += e.type == t ? 1 : 0;
        }
        return n;
    }
    [[nodiscard]] const CmEvent* last(CmEventType t) const {
        for (auto it = events.rbegin(); it != events.rend(); ++it) {
            if (it->type == t) {
                return &*it;
            }
        }
        return nullptr;
    }
};

inline AttrId attr(const MadBytes& mad) { return static_cast<AttrId>((mad[16] << 8) | mad[17]); }

inline std::size_t count_attr(const std::vector<MadBytes>& log, AttrId a) {
    std::size_t n = 0;
    for (const auto& m : log) {
        n += attr(m) == a ? 1 : 0;
    }
    return n;
}

template <typename M>
M message_of(const MadBytes& mad) {
    return std::get<M>(parse_mad(mad).mad.message);
}

constexpr std::uint64_t kGuidA = 0xAAAA'0000'0000'0001ULL;
constexpr std::uint64_t kGuidB = 0xBBBB'0000'0000'0002ULL;
constexpr std::uint64_t kSid = 0x0000000001061c06ULL;
constexpr std::uint64_t kListenerContext = 77;
constexpr std::uint32_t kQpnA = 0x11;
constexpr std::uint32_t kQpnB = 0x12;

inline const wire::Gid kIpA = wire::ipv4_mapped({10, 0, 0, 1});
inline const wire::Gid kIpB = wire::ipv4_mapped({10, 0, 0, 2});

inline CmConfig config(std::uint64_t guid, std::uint32_t seed) {
    CmConfig c;
    c.ca_guid = guid;
    c.random_seed = seed;
    return c;
}

struct CmPair {
    FakeClock clock;
    Link a_out, b_out;
    Recorder a_ev, b_ev;
    ConnectionManager a{config(kGuidA, 1), clock, a_out, a_ev};
    ConnectionManager b{config(kGuidB, 2), clock, b_out, b_ev};
    // Return true to lose a MAD; `from_a` says which way it goes.
    std::function<bool(const MadBytes&, bool from_a)> lose;

    ConnectParams connect_params(std::uint32_t qpn = kQpnA) const {
        ConnectParams p;
        p.service_id = kSid;
        p.local_ca_guid = kGuidA;
        p.qpn = qpn;
        p.starting_psn = 0x1000;
        p.responder_resources = 1;
        p.initiator_depth = 1;
        p.path.local_gid = kIpA;
        p.path.remote_gid = kIpB;
        return p;
    }
    static AcceptParams accept_params() {
        AcceptParams p;
        p.qpn = kQpnB;
        p.starting_psn = 0x2000;
        p.responder_resources = 1;
        p.initiator_depth = 1;
        p.local_ca_guid = kGuidB;
        return p;
    }

    CommId connect(std::uint32_t qpn = kQpnA) {
        auto id = a.connect(PeerAddress{kIpA, kIpB}, connect_params(qpn));
        EXPECT_TRUE(id.has_value());
        return id.value_or(0);
    }

    // Delivers queued MADs both ways until both queues are empty.
    void pump() {
        for (int guard = 0; guard < 10000 && (!a_out.queue.empty() || !b_out.queue.empty()); ++guard) {
            deliver_one(a_out, b, true);
            deliver_one(b_out, a, false);
        }
    }

    void deliver_one(Link& from, ConnectionManager& to, bool from_a) {
        if (from.queue.empty()) {
            return;
        }
        const Sent s = from.queue.front();
        from.queue.pop_front();
        if (lose && lose(s.mad, from_a)) {
            return;
        }
        to.receive(PeerAddress{s.to.remote, s.to.local}, s.mad);
    }

    void advance(Millis d) {
        clock.t += d;
        a.on_timer();
        b.on_timer();
        pump();
    }

    // The passive side's connection ID from its last ReqReceived.
    CommId passive_id() const {
        const CmEvent* e = b_ev.last(CmEventType::ReqReceived);
        return e == nullptr ? 0 : e->id;
    }

    // Listen, connect, accept, confirm: both ESTABLISHED.
    std::pair<CommId, CommId> establish() {
        b.listen(kSid, kListenerContext);
        const CommId ida = connect();
        pump();
        const CommId idb = passive_id();
        EXPECT_EQ(b.accept(idb, accept_params()), CallStatus::Ok);
        pump();
        EXPECT_EQ(a.confirm(ida), CallStatus::Ok);
        pump();
        EXPECT_EQ(a.state(ida), CmState::Established);
        EXPECT_EQ(b.state(idb), CmState::Established);
        return {ida, idb};
    }
};

}  // namespace uroce::cm::test
