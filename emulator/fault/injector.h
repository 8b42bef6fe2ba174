// The rules in force and the decision for each frame. For every frame the
// port hands it (receive and send, port.h), the injector looks at its rules
// in the order they were added: the first one whose filters admit the frame
// and whose trigger fires decides what happens to it; the rules after it do
// not see that frame. Each rule counts the frames it saw and what it did.
//
// Reproducible: each rule draws from its own SplitMix64 stream (prng.h),
// seeded from the injector's seed and the rule's id, so the same seed, the
// same rules and the same frames give the same decisions.
//
// Time comes from the caller (`now`), so the decisions are a function of
// their inputs; the port decorator (net/fault_port.h) holds the frames a
// decision delays and sends or delivers them when due.
// Not thread-safe: the daemon's one loop owns it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "classify.h"
#include "prng.h"
#include "rule.h"

namespace uroce::fault {

using Clock = std::chrono::steady_clock;

struct RuleCounters {
    std::uint64_t seen = 0;      // frames its filters admitted (that no earlier rule took)
    std::uint64_t injected = 0;  // frames it acted on
};

enum class RuleState : std::uint8_t {
    Active,
    Done,  // its nth/count is used up or its window closed: it sees no more frames
};

struct InstalledRule {
    std::uint32_t id = 0;
    Rule rule;
    std::string text;  // format_rule(rule)
    RuleCounters counters;
    RuleState state = RuleState::Active;
    Clock::time_point since{};  // when it was added (windows count from here)
    SplitMix64 rng;
};

enum class Verdict : std::uint8_t { Pass, Drop, Duplicate, Hold, Corrupt, Truncate };

struct Decision {
    Verdict verdict = Verdict::Pass;
    Action action = Action::Drop;         // of the rule that decided (not Pass)
    std::string_view rule_text;           // valid until the rules change
    Clock::time_point hold_until{};       // Hold: the latest release
    std::uint32_t hold_frames = 0;        // Hold (reorder): released once this many later frames passed
    std::uint32_t corrupt_offset = 0;     // Corrupt: the byte, and what it is XORed with (never 0)
    std::uint8_t corrupt_xor = 0;
    std::uint32_t keep_bytes = 0;         // Truncate: the new length
};

// Frames acted on since the daemon started, by action, over every rule
// (kept when rules are removed).
using ActionTotals = std::array<std::uint64_t, kActionCount>;

class Injector {
public:
    explicit Injector(std::uint64_t seed = 1) : seed_(seed) {}

    // Adds a rule after the others; its id (ids are never reused).
    std::uint32_t add(const Rule& rule, Clock::time_point now);
    // Removes rule `id`; false when there is none.
    bool remove(std::uint32_t id);
    void clear() { rules_.clear(); }
    // A new seed: every rule's stream starts again from it, and so do their
    // nth counts (a scenario can be replayed by seeding before it).
    void reseed(std::uint64_t seed);
    [[nodiscard]] std::uint64_t seed() const { return seed_; }

    // Whether any rule is installed (the port's fast path is taken when none).
    [[nodiscard]] bool armed() const { return !rules_.empty(); }

    [[nodiscard]] Decision decide(Direction way, std::span<const std::uint8_t> frame, Clock::time_point now);

    [[nodiscard]] const std::vector<InstalledRule>& rules() const { return rules_; }
    [[nodiscard]] const ActionTotals& totals() const { return totals_; }

private:
    // Whether `r`'s trigger fires for the frame it just admitted.
    [[nodiscard]] bool fires(InstalledRule& r);
    Decision act(InstalledRule& r, const FrameFacts& facts, std::size_t frame_size, Clock::time_point now);

    std::uint64_t seed_;
    std::uint32_t next_id_ = 1;
    std::vector<InstalledRule> rules_;
    ActionTotals totals_{};
};

}  // namespace uroce::fault
