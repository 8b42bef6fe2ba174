// CM_LIST_IDS (abi/control.h, op 150): the rdma_cm ids for `uroce cm`, with
// the process behind each id's channel, as `rdma resource show cm_id` shows
// the kernel's (docs/rdmacm-device.md, "Listing the ids").
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/unique_fd.h"
#include "control_server.h"
#include "messages.h"
#include "ucma/id_listing.h"

namespace uroce::daemon {

namespace {

// The process's name (/proc/PID/comm, at most TASK_COMM_LEN bytes), or
// empty once it is gone. The pid is SO_PEERCRED's at connect; the process
// keeps it while its connection (and so its channels) lives.
std::array<char, UROCE_CM_COMM_BYTES> process_name(pid_t pid) {
    std::array<char, UROCE_CM_COMM_BYTES> name{};
    if (pid <= 0) {
        return name;
    }
    const std::string path = "/proc/" + std::to_string(pid) + "/comm";
    const UniqueFd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (!fd.valid()) {
        return name;
    }
    const ssize_t n = ::read(fd.get(), name.data(), name.size() - 1);
    for (ssize_t i = 0; i < n; ++i) {
        if (name[static_cast<std::size_t>(i)] == '\n') {
            name[static_cast<std::size_t>(i)] = '\0';
        }
    }
    return name;
}

}  // namespace

std::size_t ControlServer::list_cm_ids(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                       std::uint8_t* out) {
    std::unordered_map<ucma::ChannelId, std::uint32_t> client_of;  // channel -> the client that opened it
    for (const auto& [fd, ch] : cm_channels_) {
        client_of[ch.channel] = ch.client;
    }
    const OwnerFilter visible = visible_to(c);
    std::unordered_map<std::uint32_t, ucma::ChannelOwner> owners;  // by client: one /proc read each
    const ucma::ChannelOwnerLookup owner_of =
        [&](ucma::ChannelId channel) -> std::optional<ucma::ChannelOwner> {
        const auto it = client_of.find(channel);
        if (it == client_of.end() || !visible(it->second)) {
            return std::nullopt;
        }
        const auto [o, added] = owners.try_emplace(it->second);
        if (added) {
            const pid_t pid = device_.client_pid(it->second);
            o->second.pid = static_cast<std::uint32_t>(pid);
            o->second.comm = process_name(pid);
        }
        return o->second;
    };
    return write_reply(out, h, 0,
                       ucma::list_ids_page(ucma_.ids(), read_as<uroce_ctrl_cm_list_ids>(msg).first_handle, owner_of));
}

}  // namespace uroce::daemon
