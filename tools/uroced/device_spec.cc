#include "device_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <set>

#include "device/gid_table.h"

namespace uroce::daemon {

namespace {

enum class SpecKey : std::uint8_t { Name, Port, Ip, StateDir, Mtu, Netns };

struct KeyName {
    std::string_view text;
    SpecKey key;
};

constexpr std::array<KeyName, 6> kKeys{{{"name", SpecKey::Name},
                                        {"port", SpecKey::Port},
                                        {"ip", SpecKey::Ip},
                                        {"state-dir", SpecKey::StateDir},
                                        {"mtu", SpecKey::Mtu},
                                        {"netns", SpecKey::Netns}}};

std::optional<SpecKey> key_of(std::string_view part) {
    const std::string_view key = part.substr(0, part.find('='));
    for (const KeyName& k : kKeys) {
        if (k.text == key && part.size() > key.size()) {  // "key=" with the '='
            return k.key;
        }
    }
    return std::nullopt;
}

std::vector<std::string_view> split_commas(std::string_view text) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        parts.push_back(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (comma == std::string_view::npos) {
            return parts;
        }
        start = comma + 1;
    }
}

// A state directory as one path, whichever way it was written ("./x/", "x").
std::filesystem::path normal_dir(const std::string& dir) {
    std::filesystem::path p = std::filesystem::absolute(dir).lexically_normal();
    return p.has_filename() ? p : p.parent_path();
}

ParsedDeviceSpec failed(std::string why) { return {std::nullopt, std::move(why)}; }

}  // namespace

ParsedDeviceSpec parse_device_spec(std::string_view text) {
    DeviceSpec spec;
    spec.name.clear();
    spec.state_dir.clear();
    std::set<SpecKey> seen;
    bool in_port = false;  // the last key was port=: devargs follow
    for (const std::string_view part : split_commas(text)) {
        const std::optional<SpecKey> key = key_of(part);
        if (!key) {
            if (in_port && !part.empty()) {
                spec.port += ',';
                spec.port += part;
                continue;
            }
            return failed(fmt::format("'{}': expected key=value with a key of name, port, ip, state-dir, mtu, netns "
                                      "(a port's own devargs go after port=)",
                                      part));
        }
        const std::string_view value = part.substr(part.find('=') + 1);
        if (value.empty()) {
            return failed(fmt::format("'{}': no value", part));
        }
        if (*key != SpecKey::Ip && !seen.insert(*key).second) {
            return failed(fmt::format("'{}': {} given twice", part, part.substr(0, part.find('='))));
        }
        in_port = *key == SpecKey::Port;
        switch (*key) {
            case SpecKey::Name:
                spec.name = value;
                break;
            case SpecKey::Port:
                spec.port = value;
                break;
            case SpecKey::Ip:
                spec.ips.emplace_back(value);
                break;
            case SpecKey::StateDir:
                spec.state_dir = value;
                break;
            case SpecKey::Mtu: {
                const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), spec.mtu);
                if (ec != std::errc{} || end != value.data() + value.size() || spec.mtu < kMinMtu ||
                    spec.mtu > kMaxMtu) {
                    return failed(fmt::format("'{}': the MTU must be a number from {} to {}", part, kMinMtu, kMaxMtu));
                }
                break;
            }
            case SpecKey::Netns:
                spec.netns = value;
                break;
        }
    }
    for (const auto& [what, missing] : {std::pair{"name=", spec.name.empty()}, std::pair{"port=", spec.port.empty()},
                                        std::pair{"ip=", spec.ips.empty()},
                                        std::pair{"state-dir=", spec.state_dir.empty()}}) {
        if (missing) {
            return failed(fmt::format("no {} (a device needs name, port, ip and state-dir)", what));
        }
    }
    if (std::string problem = check_device_spec(spec); !problem.empty()) {
        return failed(std::move(problem));
    }
    return {std::move(spec), {}};
}

std::string check_device_spec(const DeviceSpec& spec) {
    if (spec.name.rfind("uroce", 0) != 0 || spec.name.size() > 32 || spec.name.find('/') != std::string::npos) {
        return fmt::format("name {}: must start with 'uroce' (the provider claims that prefix), at most 32 "
                           "characters, no '/'",
                           spec.name);
    }
    for (const std::string& ip : spec.ips) {
        if (!device::parse_ip(ip)) {
            return fmt::format("ip {}: not an IPv4 or IPv6 address", ip);
        }
    }
    if (!spec.netns.empty() &&
        (spec.netns.find('/') != std::string::npos || spec.netns == "." || spec.netns == "..")) {
        return fmt::format("netns {}: the name of a namespace under /run/netns (as `ip netns` makes), no '/'",
                           spec.netns);
    }
    if (!spec.netns.empty() && spec.port == "loopback") {
        return fmt::format("netns {}: a loopback port has no network to be in", spec.netns);
    }
    return {};
}

std::string check_device_set(const std::vector<DeviceSpec>& specs) {
    for (std::size_t i = 0; i < specs.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j) {
            if (specs[i].name == specs[j].name) {
                return fmt::format("two devices named {}: give each its own name", specs[i].name);
            }
            if (normal_dir(specs[i].state_dir) == normal_dir(specs[j].state_dir)) {
                return fmt::format("{} and {} share the state directory {}: give each its own (libibverbs sees "
                                   "one device per state directory)",
                                   specs[j].name, specs[i].name, specs[i].state_dir);
            }
        }
    }
    return {};
}

}  // namespace uroce::daemon
