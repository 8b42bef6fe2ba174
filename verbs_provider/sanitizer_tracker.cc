#include "sanitizer_tracker.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace uroce::provider::sanitizer {

namespace {

bool overlaps(std::uint64_t a, std::uint64_t a_len, std::uint64_t b, std::uint64_t b_len) {
    return a_len > 0 && b_len > 0 && a < b + b_len && b < a + a_len;
}

bool same_range(const ibv_sge& a, const ibv_sge& b) { return a.addr == b.addr && a.length == b.length; }

std::string format(const char* fmt, auto... args) {
    char line[512];
    std::snprintf(line, sizeof line, fmt, args...);
    return line;
}

std::string describe(const PostedWork& w) {
    return format("QP 0x%x wr_id 0x%" PRIx64 " (%s)", w.qp_num, w.wr_id, w.verb);
}

std::string describe(const ibv_sge& s) {
    return format("[0x%" PRIx64 ", +%u) lkey 0x%x", static_cast<std::uint64_t>(s.addr), s.length, s.lkey);
}

}  // namespace

const char* finding_name(Finding finding) {
    switch (finding) {
        case Finding::SendBufferChanged:
            return "send-buffer-changed";
        case Finding::ReceiveBufferWritten:
            return "receive-buffer-written";
        case Finding::InFlightDeregistered:
            return "mr-deregistered-in-flight";
        case Finding::BufferUnmapped:
            return "buffer-unmapped-in-flight";
        case Finding::OverlappingReceives:
            return "overlapping-receives";
        case Finding::DeviceWriteOverlap:
            return "device-write-overlap";
        case Finding::CqMayOverrun:
            return "cq-may-overrun";
    }
    return "unknown";
}

Tracker::Tracker(Sink sink, MemoryReader reader) : sink_(std::move(sink)), reader_(std::move(reader)) {}

std::uint64_t Tracker::count(Finding finding) const {
    std::lock_guard lock(mutex_);
    return counts_[static_cast<std::size_t>(finding)];
}

void Tracker::report(Finding finding, const std::string& text) {
    ++counts_[static_cast<std::size_t>(finding)];
    sink_(finding, text);
}

void Tracker::posted(PostedWork posted) {
    auto work = std::make_unique<Work>();
    work->posted = std::move(posted);
    for (const ibv_sge& sge : work->posted.sges) {
        Buffer b;
        b.sge = sge;
        b.shadow.resize(sge.length);
        // A buffer not mapped now is the daemon's to refuse (a local
        // protection error); the check at completion then has nothing to compare.
        if (!reader_(sge.addr, b.shadow)) {
            b.shadow.clear();
        }
        work->buffers.push_back(std::move(b));
    }
    std::lock_guard lock(mutex_);
    check_overlaps_at_post(*work);
    count_on_cq(work->posted);
    queues_[work->posted.queue].push_back(std::move(work));
}

// Two buffers in flight at once clash when the device writes one of them
// and they overlap without being the very same range (the scratch-buffer
// idiom), or when a READ or atomic target overlaps a source at all.
void Tracker::check_overlaps_at_post(const Work& work) {
    const PostedWork& mine = work.posted;
    for (const auto& [key, list] : queues_) {
        for (const auto& other : list) {
            const PostedWork& theirs = other->posted;
            if (mine.use == DeviceUse::Reads && theirs.use == DeviceUse::Reads) {
                continue;
            }
            const bool receives = mine.queue.kind != QueueKey::Kind::Send && theirs.queue.kind != QueueKey::Kind::Send;
            const bool target_vs_source = (mine.is_read_or_atomic && theirs.use == DeviceUse::Reads) ||
                                          (theirs.is_read_or_atomic && mine.use == DeviceUse::Reads);
            const bool targets = mine.use == DeviceUse::Writes && theirs.use == DeviceUse::Writes &&
                                 (mine.is_read_or_atomic || theirs.is_read_or_atomic);
            if (!receives && !target_vs_source && !targets) {
                continue;  // a receive buffer that is also a send source: the pingpong idiom
            }
            for (const Buffer& a : work.buffers) {
                for (const Buffer& b : other->buffers) {
                    if (!overlaps(a.sge.addr, a.sge.length, b.sge.addr, b.sge.length) ||
                        (!target_vs_source && same_range(a.sge, b.sge))) {
                        continue;
                    }
                    const Finding f = receives ? Finding::OverlappingReceives : Finding::DeviceWriteOverlap;
                    report(f, format("%s buffer %s overlaps %s buffer %s, posted before and still in flight",
                                     describe(mine).c_str(), describe(a.sge).c_str(), describe(theirs).c_str(),
                                     describe(b.sge).c_str()));
                    return;  // one report per work request
                }
            }
        }
    }
}

void Tracker::count_on_cq(const PostedWork& work) {
    if (work.cq.id == 0) {
        return;
    }
    const std::uint64_t pending = ++on_cq_[work.cq.id];
    if (pending > work.cq.capacity && !cq_reported_[work.cq.id]) {
        cq_reported_[work.cq.id] = true;
        report(Finding::CqMayOverrun,
               format("%s makes %" PRIu64 " work requests that may complete on CQ 0x%" PRIx64
                      ", which holds %u: completions not polled in time overrun it",
                      describe(work).c_str(), pending, work.cq.id, work.cq.capacity));
    }
}

void Tracker::completed(const ibv_wc& wc, std::uint64_t cq) {
    std::lock_guard lock(mutex_);
    for (const auto& work : retire(wc)) {
        if (work->posted.cq.id == cq && on_cq_[cq] > 0) {
            --on_cq_[cq];
        }
        if (wc.status == IBV_WC_SUCCESS) {
            check_at_completion(*work, wc);
        }
        if (work->posted.use == DeviceUse::Writes) {
            for (const Buffer& b : work->buffers) {
                mark_device_write(b.sge.addr, b.sge.length);
            }
        }
    }
}

// Send queues complete in order: a signalled completion (or an error one,
// which every flushed WR gets) also completes the unsignalled WRs before it.
std::vector<std::unique_ptr<Tracker::Work>> Tracker::retire(const ibv_wc& wc) {
    std::vector<std::unique_ptr<Work>> done;
    if ((wc.opcode & IBV_WC_RECV) != 0) {
        if (auto w = take_receive(wc)) {
            done.push_back(std::move(w));
        }
        return done;
    }
    auto it = queues_.find(QueueKey{QueueKey::Kind::Send, wc.qp_num});
    if (it == queues_.end()) {
        return done;
    }
    WorkList& list = it->second;
    const auto match = std::find_if(list.begin(), list.end(), [&](const auto& w) { return w->posted.wr_id == wc.wr_id; });
    if (match == list.end()) {
        return done;
    }
    const auto end = std::next(match);
    for (auto w = list.begin(); w != end; ++w) {
        done.push_back(std::move(*w));
    }
    list.erase(list.begin(), end);
    return done;
}

// A receive completes from the QP's own receive queue, or from an SRQ.
std::unique_ptr<Tracker::Work> Tracker::take_receive(const ibv_wc& wc) {
    auto take_from = [&](WorkList& list) -> std::unique_ptr<Work> {
        const auto it =
            std::find_if(list.begin(), list.end(), [&](const auto& w) { return w->posted.wr_id == wc.wr_id; });
        if (it == list.end()) {
            return nullptr;
        }
        auto w = std::move(*it);
        list.erase(it);
        return w;
    };
    if (auto it = queues_.find(QueueKey{QueueKey::Kind::Receive, wc.qp_num}); it != queues_.end()) {
        if (auto w = take_from(it->second)) {
            return w;
        }
    }
    for (auto& [key, list] : queues_) {
        if (key.kind == QueueKey::Kind::SharedReceive) {
            if (auto w = take_from(list)) {
                return w;
            }
        }
    }
    return nullptr;
}

void Tracker::check_at_completion(const Work& work, const ibv_wc& wc) {
    if (work.posted.use == DeviceUse::Reads) {
        for (std::size_t i = 0; i < work.buffers.size(); ++i) {
            check_source_unchanged(work, work.buffers[i], i);
        }
    } else if (!work.posted.is_read_or_atomic) {
        check_receive_tail(work, wc);
    }
}

void Tracker::check_source_unchanged(const Work& work, const Buffer& buffer, std::size_t index) {
    if (buffer.shadow.empty() || buffer.device_wrote ||
        device_may_write(buffer.sge.addr, buffer.sge.length, &work)) {
        return;
    }
    std::vector<std::uint8_t> now(buffer.shadow.size());
    if (!reader_(buffer.sge.addr, now)) {
        report(Finding::BufferUnmapped, format("%s sge %zu %s was unmapped before its completion was polled",
                                               describe(work.posted).c_str(), index, describe(buffer.sge).c_str()));
        return;
    }
    const auto diff = std::mismatch(now.begin(), now.end(), buffer.shadow.begin());
    if (diff.first == now.end()) {
        return;
    }
    const auto offset = static_cast<std::size_t>(diff.first - now.begin());
    report(Finding::SendBufferChanged,
           format("%s sge %zu %s changed between posting and completion: byte %zu was 0x%02x, is 0x%02x "
                  "(the wire may carry either)",
                  describe(work.posted).c_str(), index, describe(buffer.sge).c_str(), offset, *diff.second,
                  *diff.first));
}

// The device wrote the first byte_len bytes of the receive buffers; the
// rest must be as it was posted.
void Tracker::check_receive_tail(const Work& work, const ibv_wc& wc) {
    std::uint64_t skip = wc.byte_len;
    for (std::size_t i = 0; i < work.buffers.size(); ++i) {
        const Buffer& b = work.buffers[i];
        const std::uint64_t written = std::min<std::uint64_t>(skip, b.sge.length);
        skip -= written;
        const std::uint64_t tail = b.sge.length - written;
        if (tail == 0 || b.shadow.empty() || b.device_wrote ||
            device_may_write(b.sge.addr + written, tail, &work)) {
            continue;
        }
        std::vector<std::uint8_t> now(tail);
        if (!reader_(b.sge.addr + written, now)) {
            report(Finding::BufferUnmapped, format("%s sge %zu %s was unmapped before its completion was polled",
                                                   describe(work.posted).c_str(), i, describe(b.sge).c_str()));
            continue;
        }
        const auto diff = std::mismatch(now.begin(), now.end(), b.shadow.begin() + static_cast<long>(written));
        if (diff.first != now.end()) {
            const auto offset = written + static_cast<std::size_t>(diff.first - now.begin());
            report(Finding::ReceiveBufferWritten,
                   format("%s sge %zu %s: byte %zu, beyond the %u bytes received, changed while the receive was "
                          "posted (the application used the buffer before its completion)",
                          describe(work.posted).c_str(), i, describe(b.sge).c_str(), offset, wc.byte_len));
        }
    }
}

void Tracker::mark_device_write(std::uint64_t addr, std::uint64_t length) {
    for (auto& [key, list] : queues_) {
        for (auto& w : list) {
            for (Buffer& b : w->buffers) {
                if (overlaps(addr, length, b.sge.addr, b.sge.length)) {
                    b.device_wrote = true;
                }
            }
        }
    }
}

bool Tracker::device_may_write(std::uint64_t addr, std::uint64_t length, const Work* self) const {
    for (const auto& [key, list] : queues_) {
        for (const auto& w : list) {
            if (w.get() == self || w->posted.use != DeviceUse::Writes) {
                continue;
            }
            for (const Buffer& b : w->buffers) {
                if (overlaps(addr, length, b.sge.addr, b.sge.length)) {
                    return true;
                }
            }
        }
    }
    return false;
}

void Tracker::deregistering(std::uint32_t lkey) {
    std::lock_guard lock(mutex_);
    for (const auto& [key, list] : queues_) {
        for (const auto& w : list) {
            for (const Buffer& b : w->buffers) {
                if (b.sge.lkey == lkey) {
                    report(Finding::InFlightDeregistered,
                           format("MR lkey 0x%x deregistered while %s, which names it (%s), is in flight", lkey,
                                  describe(w->posted).c_str(), describe(b.sge).c_str()));
                    return;
                }
            }
        }
    }
}

void Tracker::queue_destroyed(const QueueKey& queue) {
    std::lock_guard lock(mutex_);
    if (auto it = queues_.find(queue); it != queues_.end()) {
        for (const auto& w : it->second) {
            if (w->posted.cq.id != 0 && on_cq_[w->posted.cq.id] > 0) {
                --on_cq_[w->posted.cq.id];
            }
        }
        queues_.erase(it);
    }
}

}  // namespace uroce::provider::sanitizer
