// Address resolution waits for the destination's neighbour, as Linux's
// ib_addr does (drivers/infiniband/core/addr.c rdma_resolve_ip): RESOLVE_IP
// and RESOLVE_ADDR answer at once, ADDR_RESOLVED follows when the
// neighbour table knows the peer's MAC, ADDR_ERROR with -ETIMEDOUT when the
// command's timeout_ms passes first (the id back in ADDR_BOUND); own and
// loopback destinations resolve at once, a destroyed id gets nothing. The
// neighbour table is a fake and the device's clock is the test's.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "ucma_driver.h"

namespace uroce::ucma::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kAddrResolved = 0, kAddrError = 1;

wire::Gid gid_of(const std::string& ipv4) {
    std::array<std::uint8_t, 4> a{};
    inet_pton(AF_INET, ipv4.c_str(), a.data());
    return wire::ipv4_mapped(a);
}

// The neighbour table: peers in `known` have a MAC; asking about any other
// counts a request.
class FakeNeighbours final : public NeighbourResolver {
public:
    NeighbourState resolve(const wire::Gid& source, const wire::Gid& destination, Clock::time_point) override {
        if (known.contains(destination)) {
            return NeighbourState::Known;
        }
        ++requests[destination];
        sources.insert(source);
        return NeighbourState::Resolving;
    }
    [[nodiscard]] NeighbourState state_of(const wire::Gid& destination) const override {
        return known.contains(destination) ? NeighbourState::Known : NeighbourState::Resolving;
    }
    std::set<wire::Gid> known;
    std::map<wire::Gid, int> requests;
    std::set<wire::Gid> sources;
};

class AddressResolution : public ::testing::Test {
protected:
    AddressResolution() {
        d.device().set_neighbour_resolver(&neighbours);
        d.device().set_clock([this] { return now; });
    }

    std::uint32_t new_id(std::uint64_t uid) {
        std::uint32_t h = 0;
        EXPECT_EQ(d.create_id(c, uid, RDMA_PS_TCP, h), 0);
        return h;
    }
    // The legacy command (rdma_ucm_resolve_ip, sockaddr_in6-sized slots).
    int resolve_ip(std::uint32_t h, const std::string& dst, std::uint32_t timeout_ms) {
        rdma_ucm_resolve_ip cmd{};
        cmd.id = h;
        sockaddr_in sin{};
        sin.sin_family = AF_INET;
        sin.sin_port = htons(7471);
        inet_pton(AF_INET, dst.c_str(), &sin.sin_addr);
        std::memcpy(&cmd.dst_addr, &sin, sizeof sin);
        cmd.timeout_ms = timeout_ms;
        return d.command(c, RDMA_USER_CM_CMD_RESOLVE_IP, cmd, 0).error;
    }
    // The command librdmacm uses once AF_IB is supported (rdma_ucm_resolve_addr).
    int resolve_addr(std::uint32_t h, const std::string& dst, std::uint32_t timeout_ms) {
        rdma_ucm_resolve_addr cmd{};
        cmd.id = h;
        sockaddr_in sin{};
        sin.sin_family = AF_INET;
        sin.sin_port = htons(7471);
        inet_pton(AF_INET, dst.c_str(), &sin.sin_addr);
        cmd.dst_size = sizeof sin;
        std::memcpy(&cmd.dst_addr, &sin, sizeof sin);
        cmd.timeout_ms = timeout_ms;
        return d.command(c, RDMA_USER_CM_CMD_RESOLVE_ADDR, cmd, 0).error;
    }
    // Moves the clock and runs the device's timers.
    void advance_to(Clock::duration since_start) {
        now = start + since_start;
        d.device().poll();
    }

    UcmaDriver d;
    FakeNeighbours neighbours;
    const Clock::time_point start = Clock::time_point{} + 1h;
    Clock::time_point now = start;
    Channel c = d.open_channel();
};

TEST_F(AddressResolution, ResolvedWhenTheNeighbourAnswers) {
    const std::uint32_t h = new_id(0xa1);
    ASSERT_EQ(resolve_ip(h, "192.0.2.2", 2000), 0);
    EXPECT_EQ(neighbours.requests[gid_of("192.0.2.2")], 1);
    EXPECT_EQ(neighbours.sources, std::set<wire::Gid>{gid_of("192.0.2.1")});  // the route's source
    EXPECT_FALSE(d.next_event(c).has_value());
    EXPECT_EQ(d.device().address_queries(), 1u);
    EXPECT_EQ(d.resolve_route(c, h), EINVAL);  // still in ADDR_QUERY
    EXPECT_EQ(resolve_ip(h, "192.0.2.2", 2000), EINVAL);  // cma.c: not ADDR_BOUND

    advance_to(300ms);
    EXPECT_FALSE(d.next_event(c).has_value());
    neighbours.known.insert(gid_of("192.0.2.2"));
    advance_to(310ms);
    const auto e = d.next_event(c);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kAddrResolved);
    EXPECT_EQ(e->status, 0);
    EXPECT_EQ(e->id, h);
    EXPECT_EQ(e->uid, 0xa1u);
    EXPECT_EQ(d.device().address_queries(), 0u);
    EXPECT_EQ(d.resolve_route(c, h), 0);
    rdma_ucm_query_route_resp route{};
    ASSERT_EQ(d.query_route(c, h, route), 0);
    sockaddr_in src{};
    std::memcpy(&src, &route.src_addr, sizeof src);
    EXPECT_EQ(src.sin_addr.s_addr, inet_addr("192.0.2.1"));
}

TEST_F(AddressResolution, NoAnswerWithinTheTimeoutIsAddrErrorEtimedout) {
    const std::uint32_t h = new_id(0xa2);
    ASSERT_EQ(resolve_ip(h, "192.0.2.99", 500), 0);
    advance_to(499ms);
    EXPECT_FALSE(d.next_event(c).has_value());
    advance_to(500ms);  // addr.c process_one_req: time_after_eq(jiffies, timeout)
    const auto e = d.next_event(c);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kAddrError);
    EXPECT_EQ(static_cast<std::int32_t>(e->status), -ETIMEDOUT);
    EXPECT_EQ(e->id, h);
    EXPECT_FALSE(d.next_event(c).has_value());
    EXPECT_EQ(d.resolve_route(c, h), EINVAL);

    // Back in ADDR_BOUND: the program may try again, and the table is asked again.
    ASSERT_EQ(resolve_ip(h, "192.0.2.99", 500), 0);
    EXPECT_EQ(neighbours.requests[gid_of("192.0.2.99")], 2);
    neighbours.known.insert(gid_of("192.0.2.99"));
    advance_to(600ms);
    const auto again = d.next_event(c);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->event, kAddrResolved);
    std::uint32_t reported = 0;
    ASSERT_EQ(d.destroy_id(c, h, reported), 0);
    EXPECT_EQ(reported, 2u);  // ADDR_ERROR and ADDR_RESOLVED
}

TEST_F(AddressResolution, TheAfIbFormOfTheCommandWaitsTheSameWay) {
    const std::uint32_t h = new_id(0xa3);
    ASSERT_EQ(resolve_addr(h, "192.0.2.77", 1000), 0);
    EXPECT_EQ(neighbours.requests[gid_of("192.0.2.77")], 1);
    advance_to(999ms);
    EXPECT_FALSE(d.next_event(c).has_value());
    advance_to(1000ms);
    const auto e = d.next_event(c);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kAddrError);
    EXPECT_EQ(static_cast<std::int32_t>(e->status), -ETIMEDOUT);
}

TEST_F(AddressResolution, ZeroTimeoutFailsAtOnceUnlessTheNeighbourIsKnown) {
    const std::uint32_t h = new_id(0xa4);
    ASSERT_EQ(resolve_ip(h, "192.0.2.50", 0), 0);
    auto e = d.next_event(c);  // the command's own poll ran the expired query
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kAddrError);
    EXPECT_EQ(static_cast<std::int32_t>(e->status), -ETIMEDOUT);
    neighbours.known.insert(gid_of("192.0.2.50"));
    ASSERT_EQ(resolve_ip(h, "192.0.2.50", 0), 0);
    e = d.next_event(c);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kAddrResolved);
}

TEST_F(AddressResolution, OwnAndLoopbackDestinationsResolveAtOnceWithoutAsking) {
    for (const char* dst : {"192.0.2.1", "127.0.0.1", "0.0.0.0"}) {
        const std::uint32_t h = new_id(0xb0);
        ASSERT_EQ(resolve_ip(h, dst, 2000), 0) << dst;
        const auto e = d.next_event(c);
        ASSERT_TRUE(e.has_value()) << dst;
        EXPECT_EQ(e->event, kAddrResolved) << dst;
        std::uint32_t reported = 0;
        ASSERT_EQ(d.destroy_id(c, h, reported), 0);
    }
    EXPECT_TRUE(neighbours.requests.empty());
}

TEST_F(AddressResolution, DestroyWhileResolvingLeaksNoEvent) {
    const std::uint32_t h = new_id(0xa5);
    ASSERT_EQ(resolve_ip(h, "192.0.2.2", 2000), 0);
    EXPECT_EQ(d.doorbells(c), 0);
    std::uint32_t reported = 7;
    ASSERT_EQ(d.destroy_id(c, h, reported), 0);
    EXPECT_EQ(reported, 0u);
    EXPECT_EQ(d.device().address_queries(), 0u);  // cma.c: rdma_addr_cancel
    // A new id takes the freed handle: the answer and the timeout of the old
    // query must not reach it.
    const std::uint32_t next = new_id(0xa6);
    EXPECT_EQ(next, h);
    neighbours.known.insert(gid_of("192.0.2.2"));
    advance_to(100ms);
    advance_to(3s);
    EXPECT_EQ(d.doorbells(c), 0);
    EXPECT_FALSE(d.next_event(c).has_value());
}

TEST_F(AddressResolution, ClosingTheChannelCancelsItsQueries) {
    Channel other = d.open_channel();
    std::uint32_t h = 0;
    ASSERT_EQ(d.create_id(other, 0xc1, RDMA_PS_TCP, h), 0);
    rdma_ucm_resolve_ip cmd{};
    cmd.id = h;
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    inet_pton(AF_INET, "192.0.2.3", &sin.sin_addr);
    std::memcpy(&cmd.dst_addr, &sin, sizeof sin);
    cmd.timeout_ms = 2000;
    ASSERT_EQ(d.command(other, RDMA_USER_CM_CMD_RESOLVE_IP, cmd, 0).error, 0);
    EXPECT_EQ(d.device().address_queries(), 1u);
    d.close_channel(other);
    EXPECT_EQ(d.device().address_queries(), 0u);
    advance_to(3s);
    EXPECT_EQ(d.doorbells(c), 0);
}

TEST_F(AddressResolution, SeveralIdsWaitingOnOneNeighbourAllResolve) {
    const std::uint32_t a = new_id(0xd1);
    const std::uint32_t b = new_id(0xd2);
    const std::uint32_t shortest = new_id(0xd3);
    ASSERT_EQ(resolve_ip(a, "192.0.2.9", 2000), 0);
    ASSERT_EQ(resolve_addr(b, "192.0.2.9", 2000), 0);
    ASSERT_EQ(resolve_ip(shortest, "192.0.2.9", 100), 0);
    EXPECT_EQ(d.device().address_queries(), 3u);

    advance_to(100ms);  // the one with the shortest timeout gives up alone
    auto e = d.next_event(c);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->id, shortest);
    EXPECT_EQ(e->event, kAddrError);
    EXPECT_FALSE(d.next_event(c).has_value());

    neighbours.known.insert(gid_of("192.0.2.9"));  // one answer serves the others
    advance_to(150ms);
    std::set<std::uint32_t> resolved;
    while (const auto ev = d.next_event(c)) {
        EXPECT_EQ(ev->event, kAddrResolved);
        resolved.insert(ev->id);
    }
    EXPECT_EQ(resolved, (std::set<std::uint32_t>{a, b}));
    EXPECT_EQ(d.device().address_queries(), 0u);
    advance_to(3s);
    EXPECT_FALSE(d.next_event(c).has_value());  // nothing more: no late timeouts
}

TEST(AddressResolutionWithoutNeighbours, EveryAddressResolvesAtOnce) {
    UcmaDriver d;  // no resolver set: the device answers as before
    Channel c = d.open_channel();
    std::uint32_t h = 0;
    ASSERT_EQ(d.create_id(c, 0xe1, RDMA_PS_TCP, h), 0);
    ASSERT_EQ(d.resolve_ip(c, h, "192.0.2.200", 7471), 0);
    const auto e = d.next_event(c);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kAddrResolved);
}

}  // namespace
}  // namespace uroce::ucma::test
