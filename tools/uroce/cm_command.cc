#include "cm_command.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "abi/control_client.h"
#include "device_locator.h"
#include "ucma/id_names.h"

namespace uroce::tools {

namespace {

// Every id the daemon lets us see, page after page (CM_LIST_IDS). 0 or an errno.
int list_ids(abi::ControlClient& c, std::vector<uroce_ctrl_cm_id_entry>& out) {
    std::uint32_t first = 0;
    for (;;) {
        uroce_ctrl_cm_list_ids req{};
        req.hdr.op = UROCE_CTRL_CM_LIST_IDS;
        req.first_handle = first;
        uroce_ctrl_cm_list_ids_reply reply{};
        if (const int err = c.call(&req, sizeof req, &reply, sizeof reply); err != 0) {
            return err;
        }
        if (reply.count > UROCE_CM_LIST_IDS_PER_REPLY) {
            return EPROTO;
        }
        out.insert(out.end(), reply.entries, reply.entries + reply.count);
        // Pages go up in handle order; anything else would loop forever.
        if (reply.more == 0 || reply.next_handle <= first) {
            return 0;
        }
        first = reply.next_handle;
    }
}

// An address as iproute2's ss_ntop prints it (AF_IB: the GID, which iproute2 skips).
std::string address(std::uint8_t family, const std::uint8_t (&bytes)[16]) {
    char text[INET6_ADDRSTRLEN] = {};
    const int af = family == AF_INET ? AF_INET : AF_INET6;
    if (::inet_ntop(af, bytes, text, sizeof text) == nullptr) {
        return "?";
    }
    return text;
}

std::string comm_of(const uroce_ctrl_cm_id_entry& e) {
    return std::string(e.comm, ::strnlen(e.comm, sizeof e.comm));
}

std::string port_text(const uroce_ctrl_cm_id_entry& e) {
    return e.port == 0 ? std::string("-") : std::to_string(e.port);
}

void print_text(const std::string& device, const std::vector<uroce_ctrl_cm_id_entry>& ids) {
    for (const uroce_ctrl_cm_id_entry& e : ids) {
        std::string line = fmt::format("link {}/{} ", device, port_text(e));
        if (e.lqpn != 0) {  // nldev reports the QP and its type once the id has one
            line += fmt::format("lqpn {} qp-type {} ", e.lqpn, ucma::qp_type_name(e.qp_type));
        }
        line += fmt::format("state {} ps {} pid {} comm {} cm-idn {} ", ucma::cm_state_name(e.state),
                            ucma::port_space_name(e.port_space), e.pid, comm_of(e), e.handle);
        if (e.src_family != 0) {
            line += fmt::format("src-addr {}:{} ", address(e.src_family, e.src_addr), e.src_port);
        }
        if (e.dst_family != 0) {
            line += fmt::format("dst-addr {}:{} ", address(e.dst_family, e.dst_addr), e.dst_port);
        }
        line.pop_back();
        fmt::print("{}\n", line);
    }
}

void print_json(const std::string& device, const std::vector<uroce_ctrl_cm_id_entry>& ids) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const uroce_ctrl_cm_id_entry& e : ids) {
        nlohmann::ordered_json j;
        j["ifname"] = device;
        if (e.port != 0) {
            j["port"] = e.port;
        }
        if (e.lqpn != 0) {
            j["lqpn"] = e.lqpn;
            j["qp-type"] = ucma::qp_type_name(e.qp_type);
        }
        j["state"] = ucma::cm_state_name(e.state);
        j["ps"] = ucma::port_space_name(e.port_space);
        j["pid"] = e.pid;
        j["comm"] = comm_of(e);
        j["cm-idn"] = e.handle;
        if (e.src_family != 0) {
            j["src-addr"] = address(e.src_family, e.src_addr);
            j["src-port"] = e.src_port;
        }
        if (e.dst_family != 0) {
            j["dst-addr"] = address(e.dst_family, e.dst_addr);
            j["dst-port"] = e.dst_port;
        }
        list.push_back(std::move(j));
    }
    fmt::print("{}\n", list.dump());
}

int show(const DeviceLocation& loc, bool json) {
    abi::ControlClient c;
    if (int err = c.connect(loc.socket_path()); err != 0) {
        fmt::print(stderr, "uroce cm: no daemon at {} ({})\n", loc.socket_path(), std::strerror(err));
        return 1;
    }
    std::vector<uroce_ctrl_cm_id_entry> ids;
    if (const int err = list_ids(c, ids); err != 0) {
        fmt::print(stderr, "uroce cm: the daemon at {} did not list its rdma_cm ids: {}\n", loc.socket_path(),
                   std::strerror(err));
        return 1;
    }
    if (json) {
        print_json(loc.device, ids);
    } else {
        print_text(loc.device, ids);
    }
    return 0;
}

}  // namespace

void add_cm_command(CLI::App& app) {
    auto loc = std::make_shared<DeviceLocation>();
    loc->state_dir = default_state_dir();
    auto json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("cm", "Show the daemon's rdma_cm ids, as `rdma resource show cm_id` does");
    cmd->add_option("--state-dir", loc->state_dir, "where uroced publishes the device")->capture_default_str();
    cmd->add_option("--device", loc->device, "device name")->capture_default_str();
    cmd->add_flag("--json", *json, "one JSON list, an object per id");
    cmd->callback([loc, json] { throw CLI::RuntimeError(show(*loc, *json)); });
}

}  // namespace uroce::tools
