// A strong identifier: a raw number (a QPN, a memory key, an object handle)
// wrapped in a type of its own, so one kind cannot be passed where another
// is expected. Construction from the raw value is explicit and there is no
// conversion back except value(); two ids compare only with their own kind.
// Zero cost: one raw member, trivially copyable, constexpr throughout.
//
// Raw integers stay in the wire layer (packet fields) and the ABI structs
// (shared with C code): they become ids at the boundary that reads them.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>

namespace uroce {

// `Tag` is an empty struct naming the kind (ids.h).
template <typename Tag, typename Raw = std::uint32_t>
class Id {
public:
    using raw_type = Raw;

    constexpr Id() noexcept = default;
    constexpr explicit Id(Raw raw) noexcept : raw_(raw) {}

    [[nodiscard]] constexpr Raw value() const noexcept { return raw_; }

    friend constexpr bool operator==(Id, Id) noexcept = default;
    friend constexpr auto operator<=>(Id, Id) noexcept = default;

private:
    Raw raw_ = 0;
};

}  // namespace uroce

template <typename Tag, typename Raw>
struct std::hash<uroce::Id<Tag, Raw>> {
    std::size_t operator()(uroce::Id<Tag, Raw> id) const noexcept { return std::hash<Raw>{}(id.value()); }
};
