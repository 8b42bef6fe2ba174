// Two ids of one device connect through the loopback connection manager,
// with the events, counts and QP attributes librdmacm relies on.
#include <gtest/gtest.h>

#include <cerrno>

#include "connected_pair.h"

namespace uroce::ucma::test {
namespace {

TEST(UcmaConnect, ConnectAcceptEstablishWithTheKernelsParameters) {
    ConnectedPair p;
    p.listen_and_resolve();
    ASSERT_EQ(p.d.connect(p.client, p.active, 0x11, "hello"), 0);
    EXPECT_EQ(p.d.doorbells(p.server), 1);
    rdma_ucm_event_resp req{};
    ASSERT_EQ(p.d.device().next_event(p.server.id, req), 0);
    EXPECT_EQ(req.event, kConnectRequest);
    EXPECT_EQ(req.uid, 0x5eu);  // the listener's uid, the new id's handle
    EXPECT_NE(req.id, p.listener);
    EXPECT_EQ(req.param.conn.qp_num, 0x11u);
    EXPECT_EQ(req.param.conn.private_data_len, 56);  // the REQ's whole field
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(req.param.conn.private_data), 5), "hello");
    // Resources cross over: the client's initiator depth is our responder resources.
    EXPECT_EQ(req.param.conn.responder_resources, 2);
    EXPECT_EQ(req.param.conn.initiator_depth, 1);
    p.passive = req.id;

    ib_uverbs_qp_attr init{}, rtr{}, rts{};
    ASSERT_EQ(p.d.init_qp_attr(p.server, p.passive, 1, init), 0);
    EXPECT_EQ(init.qp_access_flags, 0xeu);  // remote write, read, atomic
    ASSERT_EQ(p.d.init_qp_attr(p.server, p.passive, 2, rtr), 0);
    EXPECT_EQ(rtr.qp_attr_mask, 0x129181u);
    EXPECT_EQ(rtr.dest_qp_num, 0x11u);
    EXPECT_EQ(rtr.ah_attr.is_global, 1);
    EXPECT_EQ(rtr.ah_attr.grh.sgid_index, 2);  // ::ffff:192.0.2.1 in uroced's table
    ASSERT_EQ(p.d.init_qp_attr(p.server, p.passive, 3, rts), 0);
    EXPECT_EQ(rts.qp_attr_mask, 0x12e01u);
    EXPECT_EQ(rts.timeout, 19);
    EXPECT_EQ(rts.retry_cnt, 7);
    EXPECT_EQ(rts.rnr_retry, 6);

    ASSERT_EQ(p.d.accept(p.server, p.passive, 0xacc, 0x22), 0);
    const auto rep = p.d.next_event(p.client);
    ASSERT_TRUE(rep.has_value());
    EXPECT_EQ(rep->event, kConnectResponse);
    EXPECT_EQ(rep->uid, 0xc1u);
    EXPECT_EQ(rep->param.conn.qp_num, 0x22u);
    EXPECT_EQ(rep->param.conn.private_data_len, 196);

    ib_uverbs_qp_attr crtr{}, crts{};
    ASSERT_EQ(p.d.init_qp_attr(p.client, p.active, 2, crtr), 0);
    ASSERT_EQ(p.d.init_qp_attr(p.client, p.active, 3, crts), 0);
    EXPECT_EQ(crtr.dest_qp_num, 0x22u);
    // Each side sends at the PSN the other receives at.
    EXPECT_EQ(crts.sq_psn, rtr.rq_psn);
    EXPECT_EQ(rts.sq_psn, crtr.rq_psn);
    EXPECT_EQ(crts.rnr_retry, 7);  // from the REP

    ASSERT_EQ(p.d.accept(p.client, p.active, 0, 0, false), 0);
    const auto est = p.d.next_event(p.server);
    ASSERT_TRUE(est.has_value());
    EXPECT_EQ(est->event, kEstablished);
    EXPECT_EQ(est->uid, 0xaccu);  // ACCEPT set it
}

TEST(UcmaConnect, DisconnectReachesBothSidesAndCountsMatch) {
    ConnectedPair p;
    p.connect("hello");
    ASSERT_EQ(p.d.disconnect(p.client, p.active), 0);
    auto e = p.d.next_event(p.server);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kDisconnected);
    EXPECT_FALSE(p.d.next_event(p.client).has_value());  // the DREP waits for the server
    ASSERT_EQ(p.d.disconnect(p.server, p.passive), 0);
    e = p.d.next_event(p.client);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kDisconnected);
    EXPECT_EQ(p.d.disconnect(p.server, p.passive), 0);  // again: still 0
    std::uint32_t reported = 0;
    ASSERT_EQ(p.d.destroy_id(p.client, p.active, reported), 0);
    EXPECT_EQ(reported, 4u);  // ADDR, ROUTE, CONNECT_RESPONSE, DISCONNECTED
    ASSERT_EQ(p.d.destroy_id(p.server, p.passive, reported), 0);
    EXPECT_EQ(reported, 2u);  // ESTABLISHED, DISCONNECTED
    ASSERT_EQ(p.d.destroy_id(p.server, p.listener, reported), 0);
    EXPECT_EQ(reported, 1u);  // the CONNECT_REQUEST counts on the listener
    EXPECT_EQ(p.d.device().id_count(), 0u);
    EXPECT_EQ(p.d.cm().connections(), 0u);
}

TEST(UcmaConnect, NoListenerIsRejectedWithReason8) {
    ConnectedPair p;
    std::uint32_t h = 0;
    ASSERT_EQ(p.d.create_id(p.client, 7, RDMA_PS_TCP, h), 0);
    ASSERT_EQ(p.d.resolve_ip(p.client, h, "192.0.2.1", 9999), 0);
    ASSERT_TRUE(p.d.next_event(p.client).has_value());
    ASSERT_EQ(p.d.resolve_route(p.client, h), 0);
    ASSERT_TRUE(p.d.next_event(p.client).has_value());
    ASSERT_EQ(p.d.connect(p.client, h, 5), 0);
    const auto e = p.d.next_event(p.client);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kRejected);
    EXPECT_EQ(static_cast<std::int32_t>(e->status), 8);
    EXPECT_EQ(e->param.conn.private_data_len, 148);
}

TEST(UcmaConnect, DestroyingAListenerTakesUndeliveredRequests) {
    ConnectedPair p;
    p.listen_and_resolve();
    ASSERT_EQ(p.d.connect(p.client, p.active, 1), 0);
    ASSERT_EQ(p.d.device().id_count(), 3u);  // listener, active, the hidden passive id
    std::uint32_t reported = 99;
    ASSERT_EQ(p.d.destroy_id(p.server, p.listener, reported), 0);
    EXPECT_EQ(reported, 0u);
    EXPECT_EQ(p.d.device().id_count(), 1u);
    // The client's REQ was refused when the passive id went (REJ 28).
    const auto e = p.d.next_event(p.client);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kRejected);
    EXPECT_EQ(static_cast<std::int32_t>(e->status), 28);
}

TEST(UcmaConnect, ClosingAChannelDisconnectsItsPeer) {
    ConnectedPair p;
    p.connect("hello");
    p.d.close_channel(p.server);
    EXPECT_EQ(p.d.device().id_count(), 1u);
    const auto e = p.d.next_event(p.client);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kDisconnected);
}

TEST(UcmaConnect, MigrateMovesIdAndQueuedEvents) {
    ConnectedPair p;
    p.listen_and_resolve();
    ASSERT_EQ(p.d.connect(p.client, p.active, 1), 0);
    const auto req = p.d.next_event(p.server);
    ASSERT_TRUE(req.has_value());
    p.passive = req->id;
    const Channel fresh = p.d.open_channel();
    std::uint32_t reported = 99;
    ASSERT_EQ(p.d.migrate(fresh, p.server, p.passive, reported), 0);
    EXPECT_EQ(reported, 0u);
    ASSERT_EQ(p.d.accept(fresh, p.passive, 0xacc, 2), 0);
    std::uint32_t ignored = 0;
    EXPECT_EQ(p.d.destroy_id(p.server, p.passive, ignored), EINVAL);  // no longer on the old channel
    ASSERT_TRUE(p.d.next_event(p.client).has_value());
    ASSERT_EQ(p.d.accept(p.client, p.active, 0, 0, false), 0);
    const auto est = p.d.next_event(fresh);
    ASSERT_TRUE(est.has_value());
    EXPECT_EQ(est->event, kEstablished);
    Channel other_user = p.d.open_channel(2000);
    EXPECT_EQ(p.d.migrate(other_user, fresh, p.passive, reported), EINVAL);  // not the owner's channel
}

TEST(UcmaConnect, UdIdsExchangeSidrAndTheActiveSideLearnsThePeer) {
    UcmaDriver d;
    const Channel server = d.open_channel();
    const Channel client = d.open_channel();
    std::uint32_t listener = 0, active = 0;
    ASSERT_EQ(d.create_id(server, 0x5e, RDMA_PS_UDP, listener), 0);
    ASSERT_EQ(d.bind_ip(server, listener, "192.0.2.1", 7174), 0);
    ASSERT_EQ(d.listen(server, listener, 0), 0);
    ASSERT_EQ(d.create_id(client, 0xc1, RDMA_PS_UDP, active), 0);
    ASSERT_EQ(d.resolve_ip(client, active, "192.0.2.1", 7174), 0);
    ASSERT_TRUE(d.next_event(client).has_value());
    ASSERT_EQ(d.resolve_route(client, active), 0);
    ASSERT_TRUE(d.next_event(client).has_value());
    ib_uverbs_qp_attr init{};
    ASSERT_EQ(d.init_qp_attr(client, active, 1, init), 0);
    EXPECT_EQ(init.qp_attr_mask, 0x71u);  // UD: Q_Key instead of access flags
    EXPECT_EQ(init.qkey, 0x01234567u);
    ASSERT_EQ(d.connect(client, active, 0x31), 0);
    const auto req = d.next_event(server);
    ASSERT_TRUE(req.has_value());
    EXPECT_EQ(req->event, kConnectRequest);
    EXPECT_EQ(req->param.ud.private_data_len, 180);
    ASSERT_EQ(d.accept(server, req->id, 0xacc, 0x42), 0);
    const auto est = d.next_event(client);
    ASSERT_TRUE(est.has_value());
    EXPECT_EQ(est->event, kEstablished);
    EXPECT_EQ(est->param.ud.qp_num, 0x42u);
    EXPECT_EQ(est->param.ud.qkey, 0x01234567u);
    EXPECT_EQ(est->param.ud.ah_attr.is_global, 1);
    EXPECT_EQ(est->param.ud.ah_attr.grh.sgid_index, 2);
    EXPECT_FALSE(d.next_event(server).has_value());  // no event after the SIDR_REP
    EXPECT_EQ(d.cm().connections(), 0u);
}

TEST(UcmaConnect, UdConnectWithoutListenerIsUnreachable) {
    UcmaDriver d;
    const Channel client = d.open_channel();
    std::uint32_t active = 0;
    ASSERT_EQ(d.create_id(client, 1, RDMA_PS_UDP, active), 0);
    ASSERT_EQ(d.resolve_ip(client, active, "192.0.2.1", 9), 0);
    ASSERT_TRUE(d.next_event(client).has_value());
    ASSERT_EQ(d.resolve_route(client, active), 0);
    ASSERT_TRUE(d.next_event(client).has_value());
    ASSERT_EQ(d.connect(client, active, 1), 0);
    const auto e = d.next_event(client);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, 7u);  // UNREACHABLE
    EXPECT_EQ(e->status, 1u);  // SIDR status: service ID not supported
}

}  // namespace
}  // namespace uroce::ucma::test
