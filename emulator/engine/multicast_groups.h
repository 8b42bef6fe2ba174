// The device's multicast groups: which UD QPs are attached to which group
// GID (ibv_attach_mcast / ibv_detach_mcast). A RoCE group GID is the
// group's IP address: IPv4-mapped (::ffff:224.0.0.0/100) or IPv6 (ff00::/8),
// qp::is_multicast_gid. The limits are rdma_rxe's (rxe_param.h), and so are
// the answers: attaching a QP twice is 0, detaching one that is not attached
// EINVAL, a full table ENOMEM. The caller checks the QP's type and the GID.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "wire/headers.h"

namespace uroce::engine {

// The destination QP of every multicast packet (IBA 10.5.2.2, 0xFFFFFF).
inline constexpr std::uint32_t kMulticastQpn = 0xFFFFFF;

// rdma_rxe's RXE_MAX_MCAST_GRP, RXE_MAX_MCAST_QP_ATTACH and
// RXE_MAX_TOT_MCAST_QP_ATTACH: what query_device reports as max_mcast_grp,
// max_mcast_qp_attach and max_total_mcast_qp_attach.
inline constexpr std::size_t kMaxMulticastGroups = 8192;
inline constexpr std::size_t kMaxQpsPerGroup = 56;
inline constexpr std::size_t kMaxTotalAttachments = 0x70000;

// A group gained its first QP or lost its last: the moments a host joins or
// leaves it on the link (IGMP / MLD, net/group_membership.h).
enum class GroupChange { FirstMember, LastMemberGone };

class MulticastGroups {
public:
    using Observer = std::function<void(const wire::Gid& group, GroupChange change)>;
    // Told of every GroupChange, from attach, detach and detach_all.
    void set_observer(Observer observer) { observer_ = std::move(observer); }
    // 0, or ENOMEM when the group is full, the device has kMaxMulticastGroups
    // groups already, or kMaxTotalAttachments attachments.
    int attach(const wire::Gid& group, std::uint32_t qpn);
    // 0, or EINVAL when the QP is not attached to the group.
    int detach(const wire::Gid& group, std::uint32_t qpn);
    // The QP is gone: it leaves every group it was in.
    void detach_all(std::uint32_t qpn);
    // The QPs attached to `group`, in attach order (empty: no such group).
    [[nodiscard]] std::span<const std::uint32_t> members(const wire::Gid& group) const;
    // Groups `qpn` is attached to (ibv_destroy_qp is EBUSY while > 0).
    [[nodiscard]] std::size_t groups_of(std::uint32_t qpn) const;
    [[nodiscard]] std::size_t group_count() const { return groups_.size(); }
    [[nodiscard]] std::size_t attachments() const { return attachments_; }

private:
    struct GidHash {
        std::size_t operator()(const wire::Gid& g) const noexcept;
    };
    std::unordered_map<wire::Gid, std::vector<std::uint32_t>, GidHash> groups_;
    std::unordered_map<std::uint32_t, std::size_t> groups_by_qp_;
    std::size_t attachments_ = 0;
    Observer observer_;

    void tell(const wire::Gid& group, GroupChange change) const {
        if (observer_) {
            observer_(group, change);
        }
    }
};

}  // namespace uroce::engine
