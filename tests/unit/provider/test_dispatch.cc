// The entries libibverbs keeps private (it calls them from its own exported
// functions, never publishes them) reached through those public functions on
// a context opened the way ibv_open_device opens one. Each op records its
// name; a member out of place in pabi34.h would run a neighbour instead. Also
// what libibverbs does around some ops: the attr_size given to
// query_device_ex, the MR fields it fills and reads, and the optional access
// flags it strips unless the device's core_support says otherwise.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "fake_device.h"

namespace uroce::provider_test {
namespace {

std::string g_called;
std::size_t g_attr_size = 0;
int g_reg_access = 0;
pabi::verbs_mr* g_dereg_arg = nullptr;

// Objects the ops hand out; the test owns them.
ibv_pd g_pd{};
ibv_dm g_dm{};
pabi::verbs_mr g_mr{};
pabi::verbs_cq g_cq{};

pabi::verbs_context_ops recording_ops() {
    pabi::verbs_context_ops o{};
    o.create_cq_ex = [](ibv_context*, ibv_cq_init_attr_ex*) {
        g_called = "create_cq_ex";
        return &g_cq.cq_ex;
    };
    o.free_context = [](ibv_context* ctx) {
        g_called = "free_context";
        free_context(ctx);
    };
    o.import_dm = [](ibv_context* ctx, std::uint32_t handle) {
        g_called = "import_dm " + std::to_string(handle);
        g_dm.context = ctx;
        return &g_dm;
    };
    o.import_mr = [](ibv_pd* pd, std::uint32_t handle) {
        g_called = "import_mr " + std::to_string(handle);
        g_mr.ibv_mr.context = pd->context;
        return &g_mr.ibv_mr;
    };
    o.import_pd = [](ibv_context* ctx, std::uint32_t handle) {
        g_called = "import_pd " + std::to_string(handle);
        g_pd.context = ctx;
        return &g_pd;
    };
    o.query_ece = [](ibv_qp*, ibv_ece*) {
        g_called = "query_ece";
        return 0;
    };
    o.query_port = [](ibv_context*, std::uint8_t port, ibv_port_attr* attr) {
        g_called = "query_port " + std::to_string(port);
        attr->gid_tbl_len = 7;
        return 0;
    };
    o.query_qp_data_in_order = [](ibv_qp*, ibv_wr_opcode, std::uint32_t) {
        g_called = "query_qp_data_in_order";
        return 1;
    };
    o.reg_dmabuf_mr = [](ibv_pd*, std::uint64_t, std::size_t, std::uint64_t, int fd, int) {
        g_called = "reg_dmabuf_mr " + std::to_string(fd);
        return &g_mr.ibv_mr;
    };
    o.set_ece = [](ibv_qp*, ibv_ece*) {
        g_called = "set_ece";
        return 0;
    };
    o.unimport_dm = [](ibv_dm*) { g_called = "unimport_dm"; };
    o.unimport_mr = [](ibv_mr*) { g_called = "unimport_mr"; };
    o.unimport_pd = [](ibv_pd*) { g_called = "unimport_pd"; };
    // Published ops whose surroundings in libibverbs matter to a provider.
    o.query_device_ex = [](ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*, std::size_t size) {
        g_attr_size = size;
        return 0;
    };
    o.reg_mr = [](ibv_pd*, void*, std::size_t, std::uint64_t, int access) {
        g_reg_access = access;
        g_mr.mr_type = pabi::MrType::Mr;
        g_mr.access = access;
        return &g_mr.ibv_mr;
    };
    o.dereg_mr = [](pabi::verbs_mr* vmr) {
        g_dereg_arg = vmr;
        return 0;
    };
    return o;
}

class Dispatch : public ::testing::Test {
protected:
    void SetUp() override {
        g_called.clear();
        ctx_ = open_with_ops(dev_, recording_ops());
        ASSERT_NE(ctx_, nullptr);
        pd_.context = ctx_;
        qp_.context = ctx_;
    }
    void TearDown() override {
        if (ctx_ != nullptr) {
            ibv_close_device(ctx_);
        }
    }

    FakeDevice dev_;
    ibv_context* ctx_ = nullptr;
    ibv_pd pd_{};
    ibv_qp qp_{};
};

TEST_F(Dispatch, QueryPort) {
    ibv_port_attr attr{};
    EXPECT_EQ(ibv_query_port(ctx_, 1, &attr), 0);
    EXPECT_EQ(g_called, "query_port 1");
    EXPECT_EQ(attr.gid_tbl_len, 7);
}

TEST_F(Dispatch, CreateCqExThenLibibverbsInitialisesTheCq) {
    int cookie = 0;
    ibv_cq_init_attr_ex attr{};
    attr.cqe = 1;
    attr.cq_context = &cookie;
    ibv_cq_ex* cq = ibv_create_cq_ex(ctx_, &attr);
    EXPECT_EQ(g_called, "create_cq_ex");
    ASSERT_EQ(cq, &g_cq.cq_ex);
    EXPECT_EQ(g_cq.cq.context, ctx_);
    EXPECT_EQ(g_cq.cq.cq_context, &cookie);
}

TEST_F(Dispatch, FreeContext) {
    EXPECT_EQ(dev_.vdev.refcount, 2);
    EXPECT_EQ(ibv_close_device(ctx_), 0);
    ctx_ = nullptr;
    EXPECT_EQ(g_called, "free_context");
    EXPECT_EQ(dev_.vdev.refcount, 1);
}

TEST_F(Dispatch, ImportAndUnimport) {
    ibv_pd* pd = ibv_import_pd(ctx_, 41);
    EXPECT_EQ(g_called, "import_pd 41");
    ASSERT_EQ(pd, &g_pd);
    ibv_mr* mr = ibv_import_mr(pd, 42);
    EXPECT_EQ(g_called, "import_mr 42");
    ASSERT_EQ(mr, &g_mr.ibv_mr);
    ibv_dm* dm = ibv_import_dm(ctx_, 43);
    EXPECT_EQ(g_called, "import_dm 43");
    ASSERT_EQ(dm, &g_dm);
    ibv_unimport_dm(dm);
    EXPECT_EQ(g_called, "unimport_dm");
    ibv_unimport_mr(mr);
    EXPECT_EQ(g_called, "unimport_mr");
    ibv_unimport_pd(pd);
    EXPECT_EQ(g_called, "unimport_pd");
}

TEST_F(Dispatch, EceAndDataInOrder) {
    ibv_ece ece{};
    EXPECT_EQ(ibv_query_ece(&qp_, &ece), 0);
    EXPECT_EQ(g_called, "query_ece");
    ece.vendor_id = 1;  // libibverbs refuses a zero vendor before calling the op
    EXPECT_EQ(ibv_set_ece(&qp_, &ece), 0);
    EXPECT_EQ(g_called, "set_ece");
    EXPECT_EQ(ibv_query_qp_data_in_order(&qp_, IBV_WR_RDMA_WRITE, 0), 1);
    EXPECT_EQ(g_called, "query_qp_data_in_order");
}

TEST_F(Dispatch, RegDmabufMrThenLibibverbsFillsTheMr) {
    ibv_mr* mr = ibv_reg_dmabuf_mr(&pd_, 4096, 8192, 0, 17, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_EQ(g_called, "reg_dmabuf_mr 17");
    ASSERT_EQ(mr, &g_mr.ibv_mr);
    EXPECT_EQ(mr->pd, &pd_);
    EXPECT_EQ(mr->length, 8192u);
}

// The sizes the provider sees: the plain query passes only the old structure.
TEST_F(Dispatch, QueryDeviceAttrSizes) {
    ibv_device_attr attr{};
    EXPECT_EQ(ibv_query_device(ctx_, &attr), 0);
    EXPECT_EQ(g_attr_size, sizeof(ibv_device_attr));
    EXPECT_EQ(g_attr_size, 232u);
    ibv_device_attr_ex attr_ex{};
    EXPECT_EQ(ibv_query_device_ex(ctx_, nullptr, &attr_ex), 0);
    EXPECT_EQ(g_attr_size, sizeof(ibv_device_attr_ex));
    EXPECT_EQ(g_attr_size, 400u);
}

// ibv_reg_mr reads verbs_device::core_support: if our member were misplaced
// the optional flag would survive (or vanish) regardless of the bit.
TEST_F(Dispatch, OptionalAccessFlagsFollowCoreSupport) {
    alignas(4096) static char buf[4096];
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING;

    dev_.vdev.core_support = 0;
    ibv_mr* mr = ibv_reg_mr(&pd_, buf, sizeof buf, access);
    ASSERT_EQ(mr, &g_mr.ibv_mr);
    EXPECT_EQ(g_reg_access, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_EQ(mr->context, ctx_);
    EXPECT_EQ(mr->pd, &pd_);
    EXPECT_EQ(mr->addr, buf);
    EXPECT_EQ(mr->length, sizeof buf);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(g_dereg_arg, &g_mr);

    dev_.vdev.core_support = pabi::CORE_SUPPORT_OPTIONAL_MR_ACCESS;
    ASSERT_EQ(ibv_reg_mr(&pd_, buf, sizeof buf, access), &g_mr.ibv_mr);
    EXPECT_EQ(g_reg_access, access);
    EXPECT_EQ(ibv_dereg_mr(&g_mr.ibv_mr), 0);
}

// A missing op is libibverbs' stub: a clean EOPNOTSUPP, no crash.
TEST_F(Dispatch, MissingOpFailsWithEopnotsupp) {
    errno = 0;
    EXPECT_EQ(ibv_alloc_pd(ctx_), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
}

}  // namespace
}  // namespace uroce::provider_test
