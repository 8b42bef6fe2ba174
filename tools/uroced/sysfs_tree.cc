#include "sysfs_tree.h"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>
#include <system_error>

namespace uroce::daemon {

namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& p, const std::string& content) {
    fs::create_directories(p.parent_path());
    std::ofstream f(p, std::ios::trunc);
    f << content << '\n';
    if (!f) {
        throw std::runtime_error("cannot write " + p.string());
    }
}

std::string guid_text(std::uint64_t g) {
    return fmt::format("{:04x}:{:04x}:{:04x}:{:04x}", (g >> 48) & 0xFFFF, (g >> 32) & 0xFFFF, (g >> 16) & 0xFFFF,
                       g & 0xFFFF);
}

// Whether `dir` holds nothing but `name`.
bool only_entry(const fs::path& dir, const std::string& name) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (e.path().filename() != name) {
            return false;
        }
    }
    return !ec;
}

// The type file of an unused GID slot. A kernel device fails the read with
// EINVAL there, which libibverbs' sysfs fallback (the GID queries of a
// device without the uverbs ioctl) takes as "IB/RoCE v1"; the all-zero GID
// then makes ibv_query_gid_ex ENODATA and ibv_query_gid_table skip the slot.
// A plain file cannot fail a read, so it says what the kernel's error means
// to libibverbs; an empty file made every one of those queries EINVAL.
constexpr const char* kUnusedSlotType = "IB/RoCE v1";

}  // namespace

SysfsTree::SysfsTree(fs::path root, const SysfsDevice& dev) : root_(std::move(root)), name_(dev.name) {
    std::error_code ec;
    removed_stale_ = fs::remove_all(root_ / "class/infiniband" / name_, ec) > 0;
    removed_stale_ = fs::remove_all(root_ / "class/infiniband_verbs" / uverbs_name(), ec) > 0 || removed_stale_;
    // ABI version 6 of the uverbs interface: what libibverbs 44 requires (3..6).
    write_file(root_ / "class/infiniband_verbs/abi_version", "6");
    // The ucma ABI librdmacm reads when netlink has no RDMA: 4, what the
    // emulated /dev/infiniband/rdma_cm speaks (docs/rdmacm-device.md).
    write_file(root_ / "class/misc/rdma_cm/abi_version", "4");
    const fs::path uv = root_ / "class/infiniband_verbs" / uverbs_name();
    write_file(uv / "ibdev", dev.name);
    write_file(uv / "dev", "0:0");  // 0:0 turns libibverbs' major:minor check off
    write_file(uv / "abi_version", "1");

    const fs::path ib = root_ / "class/infiniband" / dev.name;
    write_file(ib / "node_type", "1: CA");
    write_file(ib / "node_guid", guid_text(dev.node_guid));
    write_file(ib / "sys_image_guid", guid_text(dev.node_guid));
    write_file(ib / "board_id", dev.board_id);
    write_file(ib / "uroce_control_socket", dev.control_socket);
    const fs::path port = ib / "ports/1";
    write_file(port / "pkeys/0", "0xffff");
    write_file(port / "link_layer", "Ethernet");
    for (std::size_t i = 0; i < device::kGidTableLength; ++i) {
        const bool used = i < dev.gids.size();
        write_file(port / "gids" / std::to_string(i), device::sysfs_gid_text(used ? dev.gids[i].gid : wire::Gid{}));
        write_file(port / "gid_attrs/types" / std::to_string(i), used ? device::sysfs_gid_type_text(dev.gids[i].type)
                                                                       : std::string(kUnusedSlotType));
    }
}

SysfsTree::~SysfsTree() {
    std::error_code ec;
    fs::remove_all(root_ / "class/infiniband" / name_, ec);
    fs::remove_all(root_ / "class/infiniband_verbs" / uverbs_name(), ec);
    // The skeleton goes with the last device (fs::remove leaves a non-empty
    // directory alone). Daemons of different names on one state directory
    // lock their names only: one starting at the very instant another
    // stops could lose abi_version here.
    const fs::path verbs = root_ / "class/infiniband_verbs";
    if (only_entry(verbs, "abi_version")) {
        fs::remove(verbs / "abi_version", ec);
        fs::remove(verbs, ec);
        fs::remove(root_ / "class/misc/rdma_cm/abi_version", ec);
        fs::remove(root_ / "class/misc/rdma_cm", ec);
        fs::remove(root_ / "class/misc", ec);
    }
    fs::remove(root_ / "class/infiniband", ec);
    fs::remove(root_ / "class", ec);
    fs::remove(root_, ec);
}

}  // namespace uroce::daemon
