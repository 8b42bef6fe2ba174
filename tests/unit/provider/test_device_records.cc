// verbs_device and the sysfs record as libibverbs reads and writes them:
// ibv_get_device_guid, ibv_get_device_index and ibv_read_ibdev_sysfs_file
// read fields of our verbs_sysfs_dev through our verbs_device::sysfs, and
// dropping the last device reference frees the record and calls
// uninit_device through verbs_device::ops. ibv_qp_to_qp_ex reads verbs_qp.
#include <gtest/gtest.h>
#include <endian.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "fake_device.h"

namespace uroce::provider_test {
namespace {

namespace fs = std::filesystem;

// A directory standing in for $SYSFS_PATH/class/infiniband/<dev>.
class IbdevDir {
public:
    IbdevDir() {
        std::string tmpl = (fs::temp_directory_path() / "uroce_abi_XXXXXX").string();
        if (::mkdtemp(tmpl.data()) != nullptr) {
            path_ = tmpl;
        }
    }
    ~IbdevDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    IbdevDir(const IbdevDir&) = delete;
    IbdevDir& operator=(const IbdevDir&) = delete;

    void write(const std::string& name, const std::string& content) const {
        std::ofstream(path_ / name) << content << '\n';
    }
    [[nodiscard]] const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

// libibverbs frees the record with free() when the device goes away.
pabi::verbs_sysfs_dev* new_record(const fs::path& ibdev_path) {
    auto* rec = static_cast<pabi::verbs_sysfs_dev*>(std::calloc(1, sizeof(pabi::verbs_sysfs_dev)));
    if (rec != nullptr) {
        std::snprintf(rec->ibdev_path, sizeof rec->ibdev_path, "%s", ibdev_path.c_str());
        rec->ibdev_idx = -1;
    }
    return rec;
}

TEST(DeviceRecords, GuidReadFromSysfsIsCachedInTheRecord) {
    IbdevDir dir;
    ASSERT_FALSE(dir.path().empty());
    dir.write("node_guid", "0200:00ff:fe00:0001");
    FakeDevice dev;
    dev.vdev.sysfs = new_record(dir.path());
    ASSERT_NE(dev.vdev.sysfs, nullptr);

    // Not cached yet: libibverbs reads <ibdev_path>/node_guid and stores the
    // value and the flag in our record.
    EXPECT_EQ(be64toh(ibv_get_device_guid(dev.ibdev())), 0x020000fffe000001u);
    EXPECT_EQ(dev.vdev.sysfs->node_guid, 0x020000fffe000001u);
    EXPECT_NE(dev.vdev.sysfs->flags & pabi::VSYSFS_READ_NODE_GUID, 0u);

    // Cached: the value comes from our node_guid member alone.
    dev.vdev.sysfs->node_guid = 0x1122334455667788u;
    EXPECT_EQ(be64toh(ibv_get_device_guid(dev.ibdev())), 0x1122334455667788u);

    std::free(dev.vdev.sysfs);
}

TEST(DeviceRecords, IndexAndFilesComeFromTheRecord) {
    IbdevDir dir;
    ASSERT_FALSE(dir.path().empty());
    dir.write("board_id", "uroce test board");
    FakeDevice dev;
    EXPECT_EQ(ibv_get_device_index(dev.ibdev()), -1) << "no record: not from netlink";
    dev.vdev.sysfs = new_record(dir.path());
    ASSERT_NE(dev.vdev.sysfs, nullptr);
    dev.vdev.sysfs->ibdev_idx = 7;
    EXPECT_EQ(ibv_get_device_index(dev.ibdev()), 7);

    char buf[64] = {};
    EXPECT_GT(pabi::ibv_read_ibdev_sysfs_file(buf, sizeof buf, dev.vdev.sysfs, "%s", "board_id"), 0);
    EXPECT_STREQ(buf, "uroce test board");
    std::free(dev.vdev.sysfs);
}

TEST(DeviceRecords, LastReferenceFreesRecordAndUninitsDevice) {
    FakeDevice dev;
    dev.vdev.refcount = 0;  // only the context below will hold it
    dev.vdev.sysfs = new_record("/nonexistent");
    ASSERT_NE(dev.vdev.sysfs, nullptr);
    const int calls = g_uninit_device_calls;

    ::verbs_context* vctx = alloc_context(dev);
    ASSERT_NE(vctx, nullptr);
    EXPECT_EQ(dev.vdev.refcount, 1);
    free_context(&vctx->context);

    // libibverbs freed our record (a wrong sysfs offset would be a bad free,
    // caught by the sanitizer builds) and called our uninit_device.
    EXPECT_EQ(dev.vdev.refcount, 0);
    EXPECT_EQ(g_uninit_device_calls, calls + 1);
    EXPECT_EQ(g_last_uninit_device, &dev.vdev);
}

TEST(DeviceRecords, QpToQpExReadsVerbsQpCompMask) {
    pabi::verbs_qp vqp{};
    EXPECT_EQ(ibv_qp_to_qp_ex(&vqp.qp), nullptr);
    vqp.comp_mask = pabi::VERBS_QP_EX;
    EXPECT_EQ(ibv_qp_to_qp_ex(&vqp.qp), &vqp.qp_ex);
}

}  // namespace
}  // namespace uroce::provider_test
