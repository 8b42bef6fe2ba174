// fmt formatting of strong identifiers (strong_id.h): an id prints as its raw
// value, with the raw type's format specifiers ("{:#x}" for a key).
#pragma once

#include <fmt/format.h>

#include "common/strong_id.h"

template <typename Tag, typename Raw>
struct fmt::formatter<uroce::Id<Tag, Raw>> : fmt::formatter<Raw> {
    auto format(uroce::Id<Tag, Raw> id, fmt::format_context& ctx) const {
        return fmt::formatter<Raw>::format(id.value(), ctx);
    }
};
