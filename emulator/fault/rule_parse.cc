#include "rule_parse.h"

#include <arpa/inet.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace uroce::fault {

namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kPpmPerPercent = 10'000;
constexpr std::uint32_t kMaxQpn = 0xFFFFFF;  // QPNs are 24 bits (BTH DestQP, IBA 9.2)
// Longest time a rule may name (a day): keeps every sum of times in range.
constexpr double kMaxMs = 86'400'000.0;

// Operation names for opcode=, from the opcode table's operations.
struct OperationName {
    std::string_view name;
    wire::Operation operation;
};
constexpr std::array<OperationName, 9> kOperationNames = {{
    {"send", wire::Operation::Send},
    {"write", wire::Operation::RdmaWrite},
    {"read", wire::Operation::RdmaReadRequest},
    {"read_response", wire::Operation::RdmaReadResponse},
    {"ack", wire::Operation::Acknowledge},
    {"atomic_ack", wire::Operation::AtomicAcknowledge},
    {"cmp_swap", wire::Operation::CompareSwap},
    {"fetch_add", wire::Operation::FetchAdd},
    {"cnp", wire::Operation::Cnp},
}};

constexpr std::array<std::string_view, 3> kDirectionNames = {"rx", "tx", "both"};

template <typename Names>
std::string choices(const Names& names) {
    std::string out;
    for (const auto& n : names) {
        if constexpr (requires { n.name; }) {
            out += out.empty() ? "" : ", ";
            out += n.name;
        } else {
            out += out.empty() ? "" : ", ";
            out += n;
        }
    }
    return out;
}

template <typename T>
std::optional<T> whole_number(std::string_view s) {
    T v{};
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) {
        return std::nullopt;
    }
    return v;
}

std::optional<double> decimal(std::string_view s) {
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::fixed);
    if (ec != std::errc{} || end != s.data() + s.size() || s.empty() || !std::isfinite(v)) {
        return std::nullopt;
    }
    return v;
}

std::optional<wire::Gid> address(std::string_view s) {
    if (s.size() >= INET6_ADDRSTRLEN) {
        return std::nullopt;
    }
    char text[INET6_ADDRSTRLEN] = {};
    std::memcpy(text, s.data(), s.size());
    std::array<std::uint8_t, 4> v4{};
    if (::inet_pton(AF_INET, text, v4.data()) == 1) {
        return wire::ipv4_mapped(v4);
    }
    wire::Gid v6{};
    if (::inet_pton(AF_INET6, text, v6.data()) == 1) {
        return v6;
    }
    return std::nullopt;
}

std::string address_text(const wire::Gid& g) {
    char text[INET6_ADDRSTRLEN] = {};
    if (wire::is_ipv4_mapped(g)) {
        const auto v4 = wire::ipv4_of(g);
        ::inet_ntop(AF_INET, v4.data(), text, sizeof text);
    } else {
        ::inet_ntop(AF_INET6, g.data(), text, sizeof text);
    }
    return text;
}

template <typename Names>
std::optional<std::size_t> index_of(const Names& names, std::string_view s) {
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (names[i] == s) {
            return i;
        }
    }
    return std::nullopt;
}

// The keys, and what each one sets. `seen` keeps a key from being given twice.
enum class Key : std::uint8_t { Rate, Nth, Count, Dir, Class, Qp, SrcQp, Opcode, Peer, Depth, Ms, Jitter, Bytes, Count_ };
constexpr std::array<std::string_view, static_cast<std::size_t>(Key::Count_)> kKeyNames = {
    "rate", "nth", "count", "dir", "class", "qp", "src_qp", "opcode", "peer", "depth", "ms", "jitter", "bytes",
};

class Parser {
public:
    ParsedRule run(std::string_view text);

private:
    std::string set(Key key, std::string_view value);
    std::string set_time(std::string_view key, std::string_view value, std::chrono::nanoseconds& out);
    std::string check() const;
    [[nodiscard]] bool has(Key k) const { return seen_[static_cast<std::size_t>(k)]; }

    Rule rule_;
    std::array<bool, static_cast<std::size_t>(Key::Count_)> seen_{};
};

ParsedRule fail(std::string error) { return ParsedRule{std::nullopt, std::move(error)}; }

ParsedRule Parser::run(std::string_view text) {
    if (text.empty()) {
        return fail(fmt::format("an empty rule; a rule is ACTION[:KEY=VALUE,...], ACTION one of {}",
                                choices(kActionName)));
    }
    if (text.size() > kMaxRuleText) {
        return fail(fmt::format("a rule of {} characters; at most {}", text.size(), kMaxRuleText));
    }
    const std::size_t colon = text.find(':');
    const std::string_view action = text.substr(0, colon);
    const auto a = index_of(kActionName, action);
    if (!a) {
        return fail(fmt::format("'{}': not an action (one of {})", action, choices(kActionName)));
    }
    rule_.action = static_cast<Action>(*a);
    std::string_view rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
    while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        const std::size_t eq = item.find('=');
        if (eq == std::string_view::npos) {
            return fail(fmt::format("'{}': expected KEY=VALUE", item));
        }
        const std::string_view key = item.substr(0, eq);
        const auto k = index_of(kKeyNames, key);
        if (!k) {
            return fail(fmt::format("'{}': not a key (one of {})", key, choices(kKeyNames)));
        }
        if (seen_[*k]) {
            return fail(fmt::format("'{}' given twice", key));
        }
        seen_[*k] = true;
        if (std::string e = set(static_cast<Key>(*k), item.substr(eq + 1)); !e.empty()) {
            return fail(fmt::format("{}: {}", item, e));
        }
    }
    if (std::string e = check(); !e.empty()) {
        return fail(fmt::format("{}: {}", action, e));
    }
    if (rule_.action == Action::LinkDown || rule_.action == Action::PeerSilent) {
        rule_.trigger.kind = TriggerKind::Window;
    }
    return ParsedRule{rule_, {}};
}

std::string Parser::set_time(std::string_view key, std::string_view value, std::chrono::nanoseconds& out) {
    const auto ms = decimal(value);
    if (!ms || *ms < 0 || *ms > kMaxMs) {
        return fmt::format("{} in milliseconds, from 0 to {:.0f} (e.g. {}=2 or {}=0.5)", key, kMaxMs, key, key);
    }
    out = std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(*ms * 1e6)));
    return {};
}

std::string Parser::set(Key key, std::string_view value) {
    Filter& f = rule_.filter;
    switch (key) {
        case Key::Rate: {
            std::string_view number = value;
            if (!number.empty() && number.back() == '%') {
                number.remove_suffix(1);
            }
            const auto percent = decimal(number);
            if (!percent || *percent <= 0 || *percent > 100) {
                return "a percentage above 0 and at most 100 (e.g. rate=5% or rate=0.1%)";
            }
            rule_.trigger.kind = TriggerKind::Rate;
            rule_.trigger.ppm = static_cast<std::uint32_t>(std::llround(*percent * kPpmPerPercent));
            if (rule_.trigger.ppm == 0) {
                return "below the smallest rate, 0.0001%";
            }
            return {};
        }
        case Key::Nth: {
            const auto n = whole_number<std::uint64_t>(value);
            if (!n || *n == 0) {
                return "a frame number counting from 1 (nth=1: the first matching frame)";
            }
            rule_.trigger.kind = TriggerKind::Nth;
            rule_.trigger.nth = *n;
            return {};
        }
        case Key::Count: {
            const auto n = whole_number<std::uint64_t>(value);
            if (!n || *n == 0) {
                return "how many times the rule acts, at least 1";
            }
            rule_.trigger.count = *n;
            return {};
        }
        case Key::Dir: {
            const auto d = index_of(kDirectionNames, value);
            if (!d) {
                return fmt::format("one of {}", choices(kDirectionNames));
            }
            f.directions = static_cast<Directions>(*d);
            return {};
        }
        case Key::Class: {
            const auto c = index_of(kFrameClassName, value);
            if (!c) {
                return fmt::format("one of {}", choices(kFrameClassName));
            }
            f.frame_class = static_cast<FrameClass>(*c);
            return {};
        }
        case Key::Qp:
        case Key::SrcQp: {
            const auto n = whole_number<std::uint32_t>(value);
            if (!n || *n > kMaxQpn) {
                return "a QP number from 0 to 16777215";
            }
            (key == Key::Qp ? f.dest_qp : f.src_qp) = *n;
            return {};
        }
        case Key::Opcode: {
            for (const OperationName& o : kOperationNames) {
                if (o.name == value) {
                    f.operation = o.operation;
                    return {};
                }
            }
            return fmt::format("one of {}", choices(kOperationNames));
        }
        case Key::Peer: {
            const auto g = address(value);
            if (!g) {
                return "an IPv4 or IPv6 address";
            }
            f.peer = *g;
            return {};
        }
        case Key::Depth: {
            const auto n = whole_number<std::uint32_t>(value);
            if (!n || *n == 0 || *n > 4096) {
                return "how many later frames pass first, from 1 to 4096";
            }
            rule_.depth = *n;
            return {};
        }
        case Key::Ms: {
            std::chrono::nanoseconds t{};
            if (std::string e = set_time("ms", value, t); !e.empty()) {
                return e;
            }
            if (rule_.action == Action::LinkDown || rule_.action == Action::PeerSilent) {
                rule_.window = t;
            } else {
                rule_.delay = t;
            }
            return {};
        }
        case Key::Jitter:
            return set_time("jitter", value, rule_.jitter);
        case Key::Bytes: {
            const auto n = whole_number<std::uint32_t>(value);
            if (!n || *n == 0 || *n > 65535) {
                return "how many bytes of the frame are kept, from 1 to 65535";
            }
            rule_.keep_bytes = *n;
            return {};
        }
        case Key::Count_:
            break;
    }
    return "not a key";
}

// What each action needs and refuses, once every key is read.
std::string Parser::check() const {
    const bool windowed = rule_.action == Action::LinkDown || rule_.action == Action::PeerSilent;
    auto refuse = [&](Key k, std::string_view why) -> std::string {
        return has(k) ? fmt::format("{}= {}", kKeyNames[static_cast<std::size_t>(k)], why) : std::string{};
    };
    if (windowed) {
        for (Key k : {Key::Rate, Key::Nth, Key::Count, Key::Class, Key::Qp, Key::SrcQp, Key::Opcode, Key::Depth,
                      Key::Jitter, Key::Bytes}) {
            if (std::string e = refuse(k, "does not apply: it acts on every frame while its window is open");
                !e.empty()) {
                return e;
            }
        }
        if (rule_.action == Action::PeerSilent && !has(Key::Peer)) {
            return "needs peer=ADDRESS (whose frames are lost)";
        }
        if (rule_.action == Action::LinkDown && has(Key::Peer)) {
            return "peer= does not apply (every frame is lost); for one peer use silent:peer=ADDRESS";
        }
        return {};
    }
    if (has(Key::Rate) == has(Key::Nth)) {
        return "needs exactly one trigger: rate=PERCENT or nth=N";
    }
    if (rule_.action != Action::Reorder && has(Key::Depth)) {
        return "depth= applies to reorder only";
    }
    if (rule_.action == Action::Reorder && !has(Key::Depth)) {
        return "needs depth=N (how many later frames pass it)";
    }
    if (rule_.action != Action::Delay && rule_.action != Action::Reorder && has(Key::Ms)) {
        return "ms= applies to delay, reorder (the longest hold), down and silent";
    }
    if (rule_.action == Action::Delay && !has(Key::Ms)) {
        return "needs ms=MILLISECONDS (how long frames are held)";
    }
    if (rule_.action != Action::Delay && has(Key::Jitter)) {
        return "jitter= applies to delay only";
    }
    if (rule_.action == Action::Delay && rule_.jitter > rule_.delay) {
        return "jitter= larger than ms= (a frame cannot leave before it came)";
    }
    if (rule_.action != Action::Truncate && has(Key::Bytes)) {
        return "bytes= applies to truncate only";
    }
    return {};
}

// A fixed-point decimal of `value` / `scale` (scale a power of ten), without
// trailing zeros: what the parser reads back exactly ({:g} would switch to
// an exponent the parser refuses).
std::string exact_decimal(std::uint64_t value, std::uint64_t scale, int digits) {
    std::string out = std::to_string(value / scale);
    if (const std::uint64_t fraction = value % scale; fraction != 0) {
        std::string f = fmt::format("{:0{}}", fraction, digits);
        f.erase(f.find_last_not_of('0') + 1);
        out += '.' + f;
    }
    return out;
}

std::string ms_text(std::chrono::nanoseconds t) {
    return exact_decimal(static_cast<std::uint64_t>(t.count()), 1'000'000, 6);  // ns per ms
}

}  // namespace

ParsedRule parse_rule(std::string_view text) { return Parser().run(text); }

std::string format_rule(const Rule& r) {
    std::string out(kActionName[static_cast<std::size_t>(r.action)]);
    char sep = ':';
    auto add = [&](std::string_view key, const std::string& value) {
        out += sep;
        out += key;
        out += '=';
        out += value;
        sep = ',';
    };
    switch (r.trigger.kind) {
        case TriggerKind::Rate:
            add("rate", exact_decimal(r.trigger.ppm, kPpmPerPercent, 4) + "%");
            break;
        case TriggerKind::Nth:
            add("nth", std::to_string(r.trigger.nth));
            break;
        case TriggerKind::Window:
            break;
    }
    if (r.trigger.count != 0) {
        add("count", std::to_string(r.trigger.count));
    }
    if (r.filter.directions != Directions::Both) {
        add("dir", std::string(kDirectionNames[static_cast<std::size_t>(r.filter.directions)]));
    }
    if (r.filter.frame_class != FrameClass::Any) {
        add("class", std::string(kFrameClassName[static_cast<std::size_t>(r.filter.frame_class)]));
    }
    if (r.filter.dest_qp) {
        add("qp", std::to_string(*r.filter.dest_qp));
    }
    if (r.filter.src_qp) {
        add("src_qp", std::to_string(*r.filter.src_qp));
    }
    if (r.filter.operation) {
        for (const OperationName& o : kOperationNames) {
            if (o.operation == *r.filter.operation) {
                add("opcode", std::string(o.name));
            }
        }
    }
    if (r.filter.peer) {
        add("peer", address_text(*r.filter.peer));
    }
    if (r.action == Action::Reorder) {
        add("depth", std::to_string(r.depth));
    }
    if (r.action == Action::Delay || (r.action == Action::Reorder && r.delay.count() != 0)) {
        add("ms", ms_text(r.delay));
    }
    if (r.action == Action::Delay && r.jitter.count() != 0) {
        add("jitter", ms_text(r.jitter));
    }
    if (r.window) {
        add("ms", ms_text(*r.window));
    }
    if (r.action == Action::Truncate && r.keep_bytes != 0) {
        add("bytes", std::to_string(r.keep_bytes));
    }
    return out;
}

}  // namespace uroce::fault
