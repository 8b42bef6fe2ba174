// TIMEWAIT_EXIT: after a disconnection the CM keeps the connection in
// timewait for one path timeout, then rdma_cm reports TIMEWAIT_EXIT to an id
// that saw DISCONNECTED and still exists (cma.c cma_ib_handler).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "connected_pair.h"

namespace uroce::ucma::test {
namespace {

using Clock = std::chrono::steady_clock;

// ACK_TIMEOUT 8 on the client: packet lifetime 7, so the REQ's local
// ACK timeout is the CA's ACK delay 15 and timewait 2^(15-8) = 128 ms.
struct TimewaitPair : ConnectedPair {
    TimewaitPair() { client_ack_timeout = 8; }
};

// Polls the device until `c` has an event, at most `limit`.
std::optional<rdma_ucm_event_resp> wait_event(UcmaDriver& d, const Channel& c, Clock::duration limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
        d.device().poll();
        if (auto e = d.next_event(c)) {
            return e;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return std::nullopt;
}

TEST(UcmaTimewait, BothSidesGetTimewaitExitOnePathTimeoutAfterTheDrep) {
    TimewaitPair p;
    p.connect();
    ASSERT_EQ(p.d.disconnect(p.client, p.active), 0);
    auto e = p.d.next_event(p.server);
    ASSERT_TRUE(e.has_value());
    ASSERT_EQ(e->event, kDisconnected);
    ASSERT_EQ(p.d.disconnect(p.server, p.passive), 0);  // the DREP: both enter timewait
    const auto drep_sent = Clock::now();
    e = p.d.next_event(p.client);
    ASSERT_TRUE(e.has_value());
    ASSERT_EQ(e->event, kDisconnected);
    EXPECT_FALSE(p.d.next_event(p.client).has_value());  // timewait has just begun

    e = wait_event(p.d, p.client, std::chrono::seconds(5));
    ASSERT_TRUE(e.has_value());
    EXPECT_GE(Clock::now() - drep_sent, std::chrono::milliseconds(128));
    EXPECT_EQ(e->event, kTimewaitExit);
    EXPECT_EQ(e->id, p.active);
    EXPECT_EQ(e->uid, 0xc1u);
    EXPECT_EQ(e->status, 0);
    e = wait_event(p.d, p.server, std::chrono::seconds(5));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kTimewaitExit);
    EXPECT_EQ(e->id, p.passive);
    EXPECT_EQ(e->uid, 0xaccu);

    std::uint32_t reported = 0;
    ASSERT_EQ(p.d.destroy_id(p.client, p.active, reported), 0);
    EXPECT_EQ(reported, 5u);  // ADDR, ROUTE, CONNECT_RESPONSE, DISCONNECTED, TIMEWAIT_EXIT
    ASSERT_EQ(p.d.destroy_id(p.server, p.passive, reported), 0);
    EXPECT_EQ(reported, 3u);  // ESTABLISHED, DISCONNECTED, TIMEWAIT_EXIT
    EXPECT_EQ(p.d.cm().in_timewait(), 0u);
}

TEST(UcmaTimewait, AnIdDestroyedInTimewaitGetsNothingAndItsPeerStillDoes) {
    TimewaitPair p;
    p.connect();
    ASSERT_EQ(p.d.disconnect(p.server, p.passive), 0);
    ASSERT_TRUE(p.d.next_event(p.client).has_value());
    ASSERT_EQ(p.d.disconnect(p.client, p.active), 0);
    ASSERT_TRUE(p.d.next_event(p.server).has_value());
    std::uint32_t reported = 0;
    ASSERT_EQ(p.d.destroy_id(p.client, p.active, reported), 0);
    EXPECT_EQ(reported, 4u);
    const auto e = wait_event(p.d, p.server, std::chrono::seconds(5));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kTimewaitExit);
    EXPECT_EQ(p.d.cm().in_timewait(), 0u);
    EXPECT_FALSE(p.d.next_event(p.client).has_value());
}

TEST(UcmaTimewait, ARejectedIdGetsNoTimewaitExit) {
    // cma.c reports TIMEWAIT_EXIT only in RDMA_CM_DISCONNECT; a REJ leaves
    // the id in RDMA_CM_CONNECT.
    UcmaDriver d;
    const Channel client = d.open_channel();
    std::uint32_t h = 0;
    ASSERT_EQ(d.create_id(client, 7, RDMA_PS_TCP, h), 0);
    ASSERT_EQ(d.set_ack_timeout(client, h, 8), 0);
    ASSERT_EQ(d.resolve_ip(client, h, "192.0.2.1", 9999), 0);
    ASSERT_TRUE(d.next_event(client).has_value());
    ASSERT_EQ(d.resolve_route(client, h), 0);
    ASSERT_TRUE(d.next_event(client).has_value());
    ASSERT_EQ(d.connect(client, h, 5), 0);
    const auto e = d.next_event(client);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kRejected);
    d.device().on_timewait_exit(h);  // as the wire CM reports after a REJ's timewait
    EXPECT_FALSE(wait_event(d, client, std::chrono::milliseconds(300)).has_value());
}

}  // namespace
}  // namespace uroce::ucma::test
