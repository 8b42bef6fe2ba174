#include "event_log.h"

#include <time.h>

#include <algorithm>

#include "engine/failure_event.h"

namespace uroce::daemon {

namespace {

std::uint64_t realtime_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

bool is_flush(const uroce_explain_record& r) {
    return r.kind == static_cast<std::uint32_t>(engine::FailureKind::ErrorCompletion) &&
           r.check == static_cast<std::uint32_t>(engine::FailureCheck::Flushed);
}

}  // namespace

EventLog::EventLog(std::size_t capacity) : ring_(std::max<std::size_t>(capacity, 1)) {}

std::uint64_t EventLog::oldest() const {
    return next_seq_ > ring_.size() ? next_seq_ - ring_.size() : 1;
}

bool EventLog::coalesces(const uroce_explain_record& r) const {
    if (next_seq_ == 1 || !is_flush(r)) {
        return false;
    }
    const uroce_explain_record& last = at(next_seq_ - 1);
    return is_flush(last) && last.qpn == r.qpn && last.client == r.client &&
           (last.flags & UROCE_EXPLAIN_SEND_QUEUE) == (r.flags & UROCE_EXPLAIN_SEND_QUEUE);
}

void EventLog::add(uroce_explain_record r) {
    r.time_ns = realtime_ns();
    if (coalesces(r)) {
        uroce_explain_record& last = ring_[(next_seq_ - 2) % ring_.size()];
        ++last.count;
        last.time_ns = r.time_ns;
        last.wr_id = r.wr_id;  // the last one flushed
        return;
    }
    r.uid = uid_of_ ? uid_of_(r.client) : UROCE_EXPLAIN_UID_UNKNOWN;
    r.seq = next_seq_++;
    ring_[(r.seq - 1) % ring_.size()] = r;
}

EventLog::Page EventLog::fetch(std::uint64_t after, std::size_t max,
                               const std::function<bool(const uroce_explain_record&)>& wanted) const {
    Page page;
    if (after > newest()) {
        after = 0;
    }
    std::uint64_t seq = after + 1;
    if (seq < oldest()) {
        page.missed = oldest() - seq;
        seq = oldest();
    }
    page.last = after;
    for (; seq < next_seq_ && page.records.size() < max; ++seq) {
        page.last = seq;
        if (wanted(at(seq))) {
            page.records.push_back(at(seq));
        }
    }
    return page;
}

}  // namespace uroce::daemon
