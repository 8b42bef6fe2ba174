#include "qp_describe.h"

#include <array>
#include <bit>
#include <cstdio>

namespace uroce::qp {

namespace {

// Indexed by bit number; "" for bits verbs.h does not give user space.
constexpr std::array<std::string_view, 26> kMaskBitNames = {
    "STATE",                // 1 << 0
    "CUR_STATE",            // 1 << 1
    "EN_SQD_ASYNC_NOTIFY",  // 1 << 2
    "ACCESS_FLAGS",         // 1 << 3
    "PKEY_INDEX",           // 1 << 4
    "PORT",                 // 1 << 5
    "QKEY",                 // 1 << 6
    "AV",                   // 1 << 7
    "PATH_MTU",             // 1 << 8
    "TIMEOUT",              // 1 << 9
    "RETRY_CNT",            // 1 << 10
    "RNR_RETRY",            // 1 << 11
    "RQ_PSN",               // 1 << 12
    "MAX_QP_RD_ATOMIC",     // 1 << 13
    "ALT_PATH",             // 1 << 14
    "MIN_RNR_TIMER",        // 1 << 15
    "SQ_PSN",               // 1 << 16
    "MAX_DEST_RD_ATOMIC",   // 1 << 17
    "PATH_MIG_STATE",       // 1 << 18
    "CAP",                  // 1 << 19
    "DEST_QPN",             // 1 << 20
    "",                     // 1 << 21
    "",                     // 1 << 22
    "",                     // 1 << 23
    "",                     // 1 << 24
    "RATE_LIMIT",           // 1 << 25
};

}  // namespace

std::string_view describe(QpState s) {
    static constexpr std::array<std::string_view, kQpStateCount> kNames = {
        "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR",
    };
    return is_valid(s) ? kNames[static_cast<std::size_t>(s)] : "UNKNOWN";
}

std::string_view describe(QpType t) {
    switch (t) {
    case QpType::Rc:
        return "RC";
    case QpType::Uc:
        return "UC";
    case QpType::Ud:
        return "UD";
    case QpType::XrcIni:
        return "XRC_INI";
    case QpType::XrcTgt:
        return "XRC_TGT";
    }
    return "UNKNOWN";
}

std::string_view describe(Mtu m) {
    static constexpr std::array<std::string_view, 5> kNames = {"256", "512", "1024", "2048", "4096"};
    return is_valid(m) ? kNames[static_cast<std::size_t>(m) - 1] : "UNKNOWN";
}

std::string transition_name(QpState from, QpState to) {
    std::string s(describe(from));
    s += "->";
    s += describe(to);
    return s;
}

std::string_view attr_mask_bit_name(std::uint32_t bit) {
    if (!std::has_single_bit(bit)) {
        return "";
    }
    const auto i = static_cast<std::size_t>(std::countr_zero(bit));
    return i < kMaskBitNames.size() ? kMaskBitNames[i] : "";
}

std::string describe_attr_mask(std::uint32_t mask) {
    if (mask == 0) {
        return "0";
    }
    std::string s;
    std::uint32_t unnamed = 0;
    for (std::uint32_t rest = mask; rest != 0; rest &= rest - 1) {
        const std::uint32_t bit = rest & (~rest + 1);
        const std::string_view name = attr_mask_bit_name(bit);
        if (name.empty()) {
            unnamed |= bit;
            continue;
        }
        if (!s.empty()) {
            s += '|';
        }
        s += name;
    }
    if (unnamed != 0) {
        char hex[16];
        std::snprintf(hex, sizeof hex, "0x%x", unnamed);
        if (!s.empty()) {
            s += '|';
        }
        s += hex;
    }
    return s;
}

}  // namespace uroce::qp
