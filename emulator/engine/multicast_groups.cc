#include "multicast_groups.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

namespace uroce::engine {

std::size_t MulticastGroups::GidHash::operator()(const wire::Gid& g) const noexcept {
    // Groups differ in their last bytes (the IPv4 group, or an IPv6 group ID).
    std::uint64_t low = 0;
    std::uint64_t high = 0;
    std::memcpy(&high, g.data(), sizeof high);
    std::memcpy(&low, g.data() + sizeof high, sizeof low);
    return static_cast<std::size_t>((low ^ (high * 0x9E3779B97F4A7C15ull)) * 0xFF51AFD7ED558CCDull);
}

int MulticastGroups::attach(const wire::Gid& group, std::uint32_t qpn) {
    auto it = groups_.find(group);
    if (it != groups_.end() && std::find(it->second.begin(), it->second.end(), qpn) != it->second.end()) {
        return 0;  // attached already (rxe_attach_mcg)
    }
    if (attachments_ >= kMaxTotalAttachments) {
        return ENOMEM;
    }
    if (it == groups_.end()) {
        if (groups_.size() >= kMaxMulticastGroups) {
            return ENOMEM;
        }
        it = groups_.emplace(group, std::vector<std::uint32_t>{}).first;
    }
    if (it->second.size() >= kMaxQpsPerGroup) {
        return ENOMEM;
    }
    it->second.push_back(qpn);
    ++groups_by_qp_[qpn];
    ++attachments_;
    if (it->second.size() == 1) {
        tell(group, GroupChange::FirstMember);
    }
    return 0;
}

int MulticastGroups::detach(const wire::Gid& group, std::uint32_t qpn) {
    const auto it = groups_.find(group);
    if (it == groups_.end()) {
        return EINVAL;
    }
    const auto member = std::find(it->second.begin(), it->second.end(), qpn);
    if (member == it->second.end()) {
        return EINVAL;
    }
    it->second.erase(member);
    if (it->second.empty()) {
        groups_.erase(it);
        tell(group, GroupChange::LastMemberGone);
    }
    if (auto q = groups_by_qp_.find(qpn); q != groups_by_qp_.end() && --q->second == 0) {
        groups_by_qp_.erase(q);
    }
    --attachments_;
    return 0;
}

void MulticastGroups::detach_all(std::uint32_t qpn) {
    if (groups_by_qp_.find(qpn) == groups_by_qp_.end()) {
        return;
    }
    std::vector<wire::Gid> emptied;
    for (auto it = groups_.begin(); it != groups_.end();) {
        attachments_ -= std::erase(it->second, qpn);
        if (it->second.empty()) {
            emptied.push_back(it->first);
            it = groups_.erase(it);
        } else {
            it = std::next(it);
        }
    }
    groups_by_qp_.erase(qpn);
    for (const wire::Gid& group : emptied) {
        tell(group, GroupChange::LastMemberGone);
    }
}

std::span<const std::uint32_t> MulticastGroups::members(const wire::Gid& group) const {
    const auto it = groups_.find(group);
    if (it == groups_.end()) {
        return {};
    }
    return it->second;
}

std::size_t MulticastGroups::groups_of(std::uint32_t qpn) const {
    const auto it = groups_by_qp_.find(qpn);
    return it == groups_by_qp_.end() ? 0 : it->second;
}

}  // namespace uroce::engine
