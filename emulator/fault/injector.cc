#include "injector.h"

#include <algorithm>

#include "rule_parse.h"

namespace uroce::fault {

namespace {

constexpr std::uint64_t kPpm = 1'000'000;

Verdict verdict_of(Action a) {
    switch (a) {
        case Action::Duplicate:
            return Verdict::Duplicate;
        case Action::Reorder:
        case Action::Delay:
            return Verdict::Hold;
        case Action::Corrupt:
            return Verdict::Corrupt;
        case Action::Truncate:
            return Verdict::Truncate;
        default:
            return Verdict::Drop;  // drop, down, silent
    }
}

}  // namespace

std::uint32_t Injector::add(const Rule& rule, Clock::time_point now) {
    InstalledRule r;
    r.id = next_id_++;
    r.rule = rule;
    r.text = format_rule(rule);
    r.since = now;
    r.rng = SplitMix64(stream_seed(seed_, r.id));
    rules_.push_back(std::move(r));
    return rules_.back().id;
}

bool Injector::remove(std::uint32_t id) {
    return std::erase_if(rules_, [id](const InstalledRule& r) { return r.id == id; }) != 0;
}

void Injector::reseed(std::uint64_t seed) {
    seed_ = seed;
    for (InstalledRule& r : rules_) {
        r.rng = SplitMix64(stream_seed(seed_, r.id));
        r.counters = RuleCounters{};
        r.state = RuleState::Active;
    }
}

bool Injector::fires(InstalledRule& r) {
    const Trigger& t = r.rule.trigger;
    switch (t.kind) {
        case TriggerKind::Window:
            return true;
        case TriggerKind::Nth: {
            const std::uint64_t times = t.count != 0 ? t.count : 1;
            const std::uint64_t number = r.counters.seen + 1;  // this frame's, counting from 1
            if (number < t.nth) {
                return false;
            }
            if (number + 1 >= t.nth + times) {
                r.state = RuleState::Done;  // this is its last frame
            }
            return true;
        }
        case TriggerKind::Rate: {
            const bool hit = r.rng.below(kPpm) < t.ppm;
            if (hit && t.count != 0 && r.counters.injected + 1 >= t.count) {
                r.state = RuleState::Done;
            }
            return hit;
        }
    }
    return false;
}

Decision Injector::act(InstalledRule& r, const FrameFacts& facts, std::size_t frame_size, Clock::time_point now) {
    ++r.counters.injected;
    ++totals_[static_cast<std::size_t>(r.rule.action)];
    Decision d;
    d.verdict = verdict_of(r.rule.action);
    d.action = r.rule.action;
    d.rule_text = r.text;
    switch (r.rule.action) {
        case Action::Reorder:
            d.hold_frames = r.rule.depth;
            d.hold_until = now + (r.rule.delay.count() != 0 ? r.rule.delay : kDefaultReorderHold);
            break;
        case Action::Delay: {
            const std::int64_t jitter = r.rule.jitter.count();
            const std::int64_t offset =
                jitter == 0 ? 0 : static_cast<std::int64_t>(r.rng.below(2 * static_cast<std::uint64_t>(jitter) + 1)) - jitter;
            d.hold_until = now + r.rule.delay + std::chrono::nanoseconds(offset);
            break;
        }
        case Action::Corrupt:
            d.corrupt_offset = facts.corrupt_first + static_cast<std::uint32_t>(
                                                         r.rng.below(facts.corrupt_end - facts.corrupt_first));
            d.corrupt_xor = static_cast<std::uint8_t>(1 + r.rng.below(255));  // any change but none
            break;
        case Action::Truncate: {
            const std::size_t keep = r.rule.keep_bytes != 0 ? r.rule.keep_bytes : frame_size / 2;
            d.keep_bytes = static_cast<std::uint32_t>(std::min(keep, frame_size - 1));
            break;
        }
        default:
            break;
    }
    return d;
}

Decision Injector::decide(Direction way, std::span<const std::uint8_t> frame, Clock::time_point now) {
    const FrameFacts facts = classify(frame);
    for (InstalledRule& r : rules_) {
        if (r.state == RuleState::Done) {
            continue;
        }
        if (r.rule.window && now - r.since >= *r.rule.window) {
            r.state = RuleState::Done;  // the link is up again, the peer answers again
            continue;
        }
        // Only down acts on what is not RoCE (ARP, ND); a corruption or
        // truncation must land in a RoCE packet to mean anything.
        if (r.rule.action != Action::LinkDown && !facts.roce) {
            continue;
        }
        if (!admits(r.rule.filter, facts, way)) {
            continue;
        }
        const bool hit = fires(r);
        ++r.counters.seen;
        if (hit) {
            return act(r, facts, frame.size(), now);
        }
    }
    return Decision{};
}

}  // namespace uroce::fault
