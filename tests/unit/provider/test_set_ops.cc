// verbs_set_ops against our verbs_context_ops: every slot of the table holds
// a different function, and each entry libibverbs publishes (in verbs_context
// or ibv_context.ops, where the inline functions of verbs.h and old binaries
// call them) must be the function we put under the same name. A member out
// of place in pabi34.h would make libibverbs publish a neighbour instead.
// The 13 entries libibverbs keeps private are checked in test_dispatch.cc.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "fake_device.h"

namespace uroce::provider_test {
namespace {

using AnyFn = void (*)();

template <typename F>
AnyFn erase(F f) {
    // Only compared, never called through this type.
    return reinterpret_cast<AnyFn>(f);
}

// One distinct function per slot; distinct bodies so that no optimisation
// can fold two of them into one address.
int g_slot_hits[pabi::kContextOpsCount];
template <std::size_t N>
void slot_fn() {
    ++g_slot_hits[N];
}
template <std::size_t... I>
constexpr std::array<AnyFn, sizeof...(I)> make_slots(std::index_sequence<I...>) {
    return {&slot_fn<I>...};
}
const std::array<AnyFn, pabi::kContextOpsCount> kSlots = make_slots(std::make_index_sequence<pabi::kContextOpsCount>{});

// The table filled slot by slot in memory order, without naming members.
pabi::verbs_context_ops distinct_ops() {
    pabi::verbs_context_ops ops;
    static_assert(sizeof ops == sizeof kSlots);
    std::memcpy(&ops, kSlots.data(), sizeof ops);
    return ops;
}

struct Published {
    const char* name;
    AnyFn seen_by_libibverbs;
    AnyFn ours;
};

// Where libibverbs 44's verbs_set_ops publishes each entry (dummy_ops.c).
std::vector<Published> published(const ::verbs_context* v, const pabi::verbs_context_ops& o) {
    const ibv_context_ops& c = v->context.ops;
#define IN_VCTX(name) Published{"verbs_context." #name, erase(v->name), erase(o.name)}
#define IN_OPS(name) Published{"ibv_context.ops." #name, erase(c.name), erase(o.name)}
#define IN_COMPAT(name) Published{"ibv_context.ops._compat_" #name, erase(c._compat_##name), erase(o.name)}
    return {
        IN_VCTX(advise_mr),
        IN_VCTX(alloc_dm),
        IN_OPS(alloc_mw),
        IN_VCTX(alloc_null_mr),
        IN_VCTX(alloc_parent_domain),
        IN_COMPAT(alloc_pd),
        IN_VCTX(alloc_td),
        IN_COMPAT(async_event),
        IN_VCTX(attach_counters_point_flow),
        IN_COMPAT(attach_mcast),
        IN_OPS(bind_mw),
        IN_VCTX(close_xrcd),
        IN_COMPAT(cq_event),
        IN_COMPAT(create_ah),
        IN_VCTX(create_counters),
        IN_COMPAT(create_cq),
        Published{"verbs_context.ibv_create_flow", erase(v->ibv_create_flow), erase(o.create_flow)},
        IN_VCTX(create_flow_action_esp),
        IN_COMPAT(create_qp),
        IN_VCTX(create_qp_ex),
        IN_VCTX(create_rwq_ind_table),
        IN_COMPAT(create_srq),
        IN_VCTX(create_srq_ex),
        IN_VCTX(create_wq),
        IN_OPS(dealloc_mw),
        IN_COMPAT(dealloc_pd),
        IN_VCTX(dealloc_td),
        IN_COMPAT(dereg_mr),
        IN_COMPAT(destroy_ah),
        IN_VCTX(destroy_counters),
        IN_COMPAT(destroy_cq),
        Published{"verbs_context.ibv_destroy_flow", erase(v->ibv_destroy_flow), erase(o.destroy_flow)},
        IN_VCTX(destroy_flow_action),
        IN_COMPAT(destroy_qp),
        IN_VCTX(destroy_rwq_ind_table),
        IN_COMPAT(destroy_srq),
        IN_VCTX(destroy_wq),
        IN_COMPAT(detach_mcast),
        IN_VCTX(free_dm),
        IN_VCTX(get_srq_num),
        IN_VCTX(modify_cq),
        IN_VCTX(modify_flow_action_esp),
        IN_COMPAT(modify_qp),
        IN_VCTX(modify_qp_rate_limit),
        IN_COMPAT(modify_srq),
        IN_VCTX(modify_wq),
        IN_VCTX(open_qp),
        IN_VCTX(open_xrcd),
        IN_OPS(poll_cq),
        IN_OPS(post_recv),
        IN_OPS(post_send),
        IN_VCTX(post_srq_ops),
        IN_OPS(post_srq_recv),
        IN_VCTX(query_device_ex),
        IN_COMPAT(query_qp),
        IN_VCTX(query_rt_values),
        IN_COMPAT(query_srq),
        IN_VCTX(read_counters),
        IN_VCTX(reg_dm_mr),
        IN_COMPAT(reg_mr),
        IN_OPS(req_notify_cq),
        IN_COMPAT(rereg_mr),
        IN_COMPAT(resize_cq),
    };
#undef IN_VCTX
#undef IN_OPS
#undef IN_COMPAT
}

// The entries libibverbs keeps to itself; test_dispatch.cc reaches each one
// through the public function that calls it.
std::vector<AnyFn> private_only(const pabi::verbs_context_ops& o) {
    return {
        erase(o.create_cq_ex),
        erase(o.free_context),
        erase(o.import_dm),
        erase(o.import_mr),
        erase(o.import_pd),
        erase(o.query_ece),
        erase(o.query_port),
        erase(o.query_qp_data_in_order),
        erase(o.reg_dmabuf_mr),
        erase(o.set_ece),
        erase(o.unimport_dm),
        erase(o.unimport_mr),
        erase(o.unimport_pd),
    };
}

TEST(SetOps, EveryPublishedEntryIsTheOneWeNamed) {
    FakeDevice dev;
    ::verbs_context* vctx = alloc_context(dev);
    ASSERT_NE(vctx, nullptr);
    const pabi::verbs_context_ops ops = distinct_ops();
    pabi::verbs_set_ops(vctx, &ops);

    const auto entries = published(vctx, ops);
    EXPECT_EQ(entries.size(), 63u);
    for (const Published& p : entries) {
        EXPECT_EQ(p.seen_by_libibverbs, p.ours) << p.name;
    }
    free_context(&vctx->context);
}

TEST(SetOps, NullEntriesKeepLibibverbsStubs) {
    FakeDevice dev;
    ::verbs_context* vctx = alloc_context(dev);
    ASSERT_NE(vctx, nullptr);
    const AnyFn stub_poll = erase(vctx->context.ops.poll_cq);
    const AnyFn stub_qdev = erase(vctx->query_device_ex);
    ASSERT_NE(stub_poll, nullptr);

    pabi::verbs_context_ops only_post_send{};
    only_post_send.post_send = [](ibv_qp*, ibv_send_wr*, ibv_send_wr**) { return 0; };
    pabi::verbs_set_ops(vctx, &only_post_send);
    EXPECT_EQ(erase(vctx->context.ops.post_send), erase(only_post_send.post_send));
    EXPECT_EQ(erase(vctx->context.ops.poll_cq), stub_poll);
    EXPECT_EQ(erase(vctx->query_device_ex), stub_qdev);
    free_context(&vctx->context);
}

// The two lists together name every slot once: nothing in the table goes
// unchecked. (This checks the test, not the ABI.)
TEST(SetOps, PublishedAndPrivateCoverEverySlot) {
    const pabi::verbs_context_ops ops = distinct_ops();
    ::verbs_context dummy{};
    std::set<AnyFn> seen;
    for (const Published& p : published(&dummy, ops)) {
        EXPECT_TRUE(seen.insert(p.ours).second) << p.name << " listed twice";
    }
    for (AnyFn f : private_only(ops)) {
        EXPECT_TRUE(seen.insert(f).second);
    }
    EXPECT_EQ(seen.size(), pabi::kContextOpsCount);
    EXPECT_EQ(seen, std::set<AnyFn>(kSlots.begin(), kSlots.end()));
}

}  // namespace
}  // namespace uroce::provider_test
