// Local comm ID allocation. Linux hands out comm IDs from a cyclic counter
// XORed with a random operand (cm.c), so that IDs look random on the wire
// and are not reused soon after a connection ends; uroce does the same.
// 0 is never handed out: it means "not known yet" in REJ and MRA.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <unordered_set>

namespace uroce::cm {

class CommIdAllocator {
public:
    explicit CommIdAllocator(std::uint32_t seed) : rng_(seed), next_(static_cast<std::uint32_t>(rng_())),
                                                   operand_(static_cast<std::uint32_t>(rng_())) {}

    // A fresh ID, or nullopt when every ID is taken (never in practice: IDs
    // are held only by live connections and those in timewait).
    [[nodiscard]] std::optional<std::uint32_t> allocate() {
        for (std::uint32_t tries = 0; tries < kMaxTries; ++tries) {
            const std::uint32_t id = next_++ ^ operand_;
            if (id != 0 && used_.insert(id).second) {
                return id;
            }
        }
        return std::nullopt;
    }

    void release(std::uint32_t id) { used_.erase(id); }
    [[nodiscard]] bool in_use(std::uint32_t id) const { return used_.contains(id); }
    [[nodiscard]] std::size_t count() const { return used_.size(); }

private:
    static constexpr std::uint32_t kMaxTries = 1u << 20;
    std::mt19937 rng_;
    std::uint32_t next_;
    std::uint32_t operand_;
    std::unordered_set<std::uint32_t> used_;
};

}  // namespace uroce::cm
