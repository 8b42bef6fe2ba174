// Two channels of one UcmaDriver device, a listener on 0.0.0.0:7174 and a
// client id resolved to it, connected the way librdmacm does it: CONNECT,
// the server's CONNECT_REQUEST, ACCEPT, the client's CONNECT_RESPONSE, the
// RTU (ACCEPT with no QP) and the server's ESTABLISHED.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

#include "ucma_driver.h"

namespace uroce::ucma::test {

// rdma_cm_event_type values (rdma/rdma_cma.h) the tests look for.
inline constexpr std::uint32_t kConnectRequest = 4, kConnectResponse = 5, kRejected = 8, kEstablished = 9,
                               kDisconnected = 10, kTimewaitExit = 15;

struct ConnectedPair {
    UcmaDriver d;
    Channel server = d.open_channel();
    Channel client = d.open_channel();
    std::uint32_t listener = 0, active = 0, passive = 0;
    // RDMA_OPTION_ID_ACK_TIMEOUT for the client's id before it resolves.
    std::optional<std::uint8_t> client_ack_timeout;

    // Listen, then resolve the client's address and route (two events).
    void listen_and_resolve() {
        ASSERT_EQ(d.create_id(server, 0x5e, RDMA_PS_TCP, listener), 0);
        ASSERT_EQ(d.bind_ip(server, listener, "0.0.0.0", 7174), 0);
        ASSERT_EQ(d.listen(server, listener, 3), 0);
        ASSERT_EQ(d.create_id(client, 0xc1, RDMA_PS_TCP, active), 0);
        if (client_ack_timeout) {
            ASSERT_EQ(d.set_ack_timeout(client, active, *client_ack_timeout), 0);
        }
        ASSERT_EQ(d.resolve_ip(client, active, "192.0.2.1", 7174), 0);
        ASSERT_TRUE(d.next_event(client).has_value());
        ASSERT_EQ(d.resolve_route(client, active), 0);
        ASSERT_TRUE(d.next_event(client).has_value());
    }

    // The client's QP is 0x11, the server's 0x22; ACCEPT sets uid 0xacc.
    void connect(const std::string& private_data = "") {
        listen_and_resolve();
        ASSERT_EQ(d.connect(client, active, 0x11, private_data), 0);
        const auto req = d.next_event(server);
        ASSERT_TRUE(req.has_value());
        ASSERT_EQ(req->event, kConnectRequest);
        passive = req->id;
        ASSERT_EQ(d.accept(server, passive, 0xacc, 0x22), 0);
        const auto rep = d.next_event(client);
        ASSERT_TRUE(rep.has_value());
        ASSERT_EQ(rep->event, kConnectResponse);
        ASSERT_EQ(d.accept(client, active, 0, 0, false), 0);  // the RTU
        const auto est = d.next_event(server);
        ASSERT_TRUE(est.has_value());
        ASSERT_EQ(est->event, kEstablished);
    }
};

}  // namespace uroce::ucma::test
