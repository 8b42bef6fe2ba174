// Drives a UcmaDevice with the bytes librdmacm writes: builds each command
// (rdma/rdma_user_cm.h), executes it and decodes the answer. Channels have
// real doorbell socketpairs, so tests can count the bytes the device rings.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "ucma/loopback_cm.h"
#include "ucma/ucma_device.h"

namespace uroce::ucma::test {

struct Channel {
    ChannelId id = 0;
    int program_fd = -1;  // the end the program would hold
};

class UcmaDriver {
public:
    // A device with IPv4 address 192.0.2.1 and the GID table uroced builds.
    UcmaDriver();
    ~UcmaDriver();

    Channel open_channel(uid_t owner = 1000);
    // Closes the program's end and tells the device, as the daemon does on hang-up.
    void close_channel(Channel& c);
    // Doorbell bytes waiting on the program's end.
    int doorbells(const Channel& c) const;

    // Raw execution: the error and the answer bytes.
    CommandResult raw(const Channel& c, std::vector<std::uint8_t> bytes, std::vector<std::uint8_t> option = {});
    template <typename T>
    CommandResult command(const Channel& c, std::uint32_t cmd, const T& body, std::uint16_t out,
                          std::vector<std::uint8_t> option = {}) {
        std::vector<std::uint8_t> bytes(sizeof(rdma_ucm_cmd_hdr) + sizeof(T));
        rdma_ucm_cmd_hdr h{cmd, static_cast<std::uint16_t>(sizeof(T)), out};
        std::memcpy(bytes.data(), &h, sizeof h);
        std::memcpy(bytes.data() + sizeof h, &body, sizeof(T));
        return raw(c, std::move(bytes), std::move(option));
    }

    // Commands with the arguments tests vary; each returns the errno.
    int create_id(const Channel& c, std::uint64_t uid, std::uint16_t ps, std::uint32_t& handle);
    int destroy_id(const Channel& c, std::uint32_t handle, std::uint32_t& events_reported);
    int bind_ip(const Channel& c, std::uint32_t handle, const std::string& ip, std::uint16_t port);
    int resolve_ip(const Channel& c, std::uint32_t handle, const std::string& dst, std::uint16_t port);
    int resolve_route(const Channel& c, std::uint32_t handle);
    int listen(const Channel& c, std::uint32_t handle, std::uint32_t backlog);
    int connect(const Channel& c, std::uint32_t handle, std::uint32_t qpn, const std::string& data = "");
    int accept(const Channel& c, std::uint32_t handle, std::uint64_t uid, std::uint32_t qpn, bool valid = true);
    int disconnect(const Channel& c, std::uint32_t handle);
    int init_qp_attr(const Channel& c, std::uint32_t handle, std::uint32_t state, ib_uverbs_qp_attr& attr);
    int query_route(const Channel& c, std::uint32_t handle, rdma_ucm_query_route_resp& resp);
    int migrate(const Channel& to, const Channel& from, std::uint32_t handle, std::uint32_t& events_reported);
    // SET_OPTION RDMA_OPTION_ID_ACK_TIMEOUT (rdma_set_option), one byte.
    int set_ack_timeout(const Channel& c, std::uint32_t handle, std::uint8_t timeout);

    // GET_EVENT as the preload does it: one doorbell, then the event.
    std::optional<rdma_ucm_event_resp> next_event(const Channel& c);

    UcmaDevice& device() { return device_; }
    LoopbackConnectionManager& cm() { return cm_; }

private:
    LoopbackConnectionManager cm_;
    UcmaDevice device_;
    std::vector<int> fds_;
};

}  // namespace uroce::ucma::test
