// GoogleTest printers, so failed expectations show names instead of bytes.
#pragma once

#include <ostream>

#include "wire/build.h"
#include "wire/parse_status.h"
#include "wire/psn.h"

namespace uroce::wire {

inline void PrintTo(ParseStatus s, std::ostream* os) {
    if (static_cast<std::size_t>(s) < kParseStatusCount) {
        *os << parse_status_info(s).name;
    } else {
        *os << "ParseStatus(" << static_cast<int>(s) << ")";
    }
}

inline void PrintTo(BuildStatus s, std::ostream* os) {
    switch (s) {
        case BuildStatus::Ok:
            *os << "Ok";
            return;
        case BuildStatus::UnsupportedOpcode:
            *os << "UnsupportedOpcode";
            return;
        case BuildStatus::PayloadNotAllowed:
            *os << "PayloadNotAllowed";
            return;
        case BuildStatus::TooLarge:
            *os << "TooLarge";
            return;
        case BuildStatus::BufferTooSmall:
            *os << "BufferTooSmall";
            return;
    }
    *os << "BuildStatus(" << static_cast<int>(s) << ")";
}

inline void PrintTo(IpVersion v, std::ostream* os) { *os << (v == IpVersion::V4 ? "IPv4" : "IPv6"); }

inline void PrintTo(Psn p, std::ostream* os) { *os << "Psn(" << p.value() << ")"; }

}  // namespace uroce::wire
