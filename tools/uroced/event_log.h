// The daemon's explained-failure records (docs/explain.md): a bounded ring
// of uroce_explain_record, the newest overwriting the oldest, each given a
// sequence number that only grows, so a reader asking for "everything after
// S" learns how many it missed. Consecutive flushed completions of one QP's
// queue share a record (its count grows): one QP going to error with a deep
// queue would otherwise push every other record out.
// Single-threaded, like the daemon's loop that writes and reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "abi/control.h"

namespace uroce::daemon {

class EventLog {
public:
    // 1024 records of 160 bytes: 160 KiB, and minutes of failures at any
    // rate a test provokes.
    static constexpr std::size_t kDefaultCapacity = 1024;

    explicit EventLog(std::size_t capacity = kDefaultCapacity);

    // Whose records they are: the uid of a client (by client id) at the time
    // of the record; UROCE_EXPLAIN_UID_UNKNOWN when none is set or known.
    void set_uid_of(std::function<std::uint32_t(std::uint32_t client)> uid_of) { uid_of_ = std::move(uid_of); }

    // Stamps `r` (sequence, CLOCK_REALTIME, uid) and keeps it.
    void add(uroce_explain_record r);

    struct Page {
        std::uint64_t last = 0;    // the sequence to ask after next
        std::uint64_t missed = 0;  // records after `after` already overwritten
        std::vector<uroce_explain_record> records;
    };
    // Up to `max` records after sequence `after` that `wanted` accepts, oldest
    // first. An `after` beyond the newest (a daemon restarted under its
    // reader) starts from the oldest kept.
    [[nodiscard]] Page fetch(std::uint64_t after, std::size_t max,
                             const std::function<bool(const uroce_explain_record&)>& wanted) const;

    [[nodiscard]] std::uint64_t newest() const { return next_seq_ - 1; }
    [[nodiscard]] std::uint64_t oldest() const;

private:
    [[nodiscard]] const uroce_explain_record& at(std::uint64_t seq) const { return ring_[(seq - 1) % ring_.size()]; }
    [[nodiscard]] bool coalesces(const uroce_explain_record& r) const;

    std::vector<uroce_explain_record> ring_;
    std::uint64_t next_seq_ = 1;
    std::function<std::uint32_t(std::uint32_t)> uid_of_;
};

}  // namespace uroce::daemon
