// The process-wide sanitizer (sanitizer.h): the environment that switches
// it on, the verbs' work requests turned into sanitizer_tracker.h's terms,
// and where findings go.
#include "sanitizer.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/unique_fd.h"
#include "sanitizer_tracker.h"

namespace uroce::provider::sanitizer {

namespace {

enum class Mode : std::uint8_t { Off, Report, Abort };

Mode mode_from_environment() {
    const char* v = std::getenv("UROCE_SANITIZE");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0) {
        return Mode::Off;
    }
    return std::strcmp(v, "abort") == 0 ? Mode::Abort : Mode::Report;
}

// Our own memory, read without faulting: process_vm_readv(2) on ourselves
// fails with EFAULT where a plain copy would crash the program.
bool read_own_memory(std::uint64_t addr, std::span<std::uint8_t> out) {
    if (out.empty()) {
        return true;
    }
    iovec local{out.data(), out.size()};
    iovec remote{reinterpret_cast<void*>(addr), out.size()};
    return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(out.size());
}

void write_line(int fd, const std::string& line) {
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        const ssize_t n = ::write(fd, p, left);
        if (n <= 0) {
            return;  // a report is best effort; the program goes on
        }
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

void emit(Mode mode, Finding finding, const std::string& text) {
    const std::string line =
        "uroce-sanitizer[" + std::to_string(::getpid()) + "]: " + finding_name(finding) + ": " + text + "\n";
    write_line(STDERR_FILENO, line);
    if (const char* path = std::getenv("UROCE_SANITIZE_LOG"); path != nullptr && *path != '\0') {
        const UniqueFd log(::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
        if (log.valid()) {
            write_line(log.get(), line);
        }
    }
    if (mode == Mode::Abort) {
        std::abort();
    }
}

struct State {
    Mode mode = mode_from_environment();
    Tracker tracker{[this](Finding f, const std::string& text) { emit(mode, f, text); }, read_own_memory};
};

// Made on first use, never destroyed: completions may be polled from
// threads that outlive static destruction.
State* state() {
    static State* s = mode_from_environment() == Mode::Off ? nullptr : new State;
    return s;
}

const char* verb_name(ibv_wr_opcode op) {
    switch (op) {
        case IBV_WR_SEND:
            return "SEND";
        case IBV_WR_SEND_WITH_IMM:
            return "SEND_WITH_IMM";
        case IBV_WR_SEND_WITH_INV:
            return "SEND_WITH_INV";
        case IBV_WR_RDMA_WRITE:
            return "RDMA_WRITE";
        case IBV_WR_RDMA_WRITE_WITH_IMM:
            return "RDMA_WRITE_WITH_IMM";
        case IBV_WR_RDMA_READ:
            return "RDMA_READ";
        case IBV_WR_ATOMIC_CMP_AND_SWP:
            return "ATOMIC_CMP_AND_SWP";
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            return "ATOMIC_FETCH_AND_ADD";
        case IBV_WR_BIND_MW:
            return "BIND_MW";
        case IBV_WR_LOCAL_INV:
            return "LOCAL_INV";
        default:
            return "other";
    }
}

bool targets_local_memory(ibv_wr_opcode op) {
    return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

bool carries_buffers(const ibv_send_wr& wr) {
    // Inline data is copied at post; binds and invalidations name no buffer.
    return (wr.send_flags & IBV_SEND_INLINE) == 0 && wr.opcode != IBV_WR_BIND_MW && wr.opcode != IBV_WR_LOCAL_INV &&
           wr.sg_list != nullptr && wr.num_sge > 0;
}

}  // namespace

bool enabled() { return state() != nullptr; }

void posted_sends(const ibv_qp* qp, bool signal_all, const ibv_send_wr* first, const ibv_send_wr* stop) {
    State* s = state();
    if (s == nullptr) {
        return;
    }
    for (const ibv_send_wr* wr = first; wr != nullptr && wr != stop; wr = wr->next) {
        PostedWork w;
        w.queue = QueueKey{QueueKey::Kind::Send, qp->qp_num};
        w.qp_num = qp->qp_num;
        w.wr_id = wr->wr_id;
        w.verb = verb_name(wr->opcode);
        w.is_read_or_atomic = targets_local_memory(wr->opcode);
        w.use = w.is_read_or_atomic ? DeviceUse::Writes : DeviceUse::Reads;
        if (signal_all || (wr->send_flags & IBV_SEND_SIGNALED) != 0) {
            w.cq = CqSlot{reinterpret_cast<std::uint64_t>(qp->send_cq), static_cast<std::uint32_t>(qp->send_cq->cqe)};
        }
        if (carries_buffers(*wr)) {
            w.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
        }
        s->tracker.posted(std::move(w));
    }
}

void posted_receives(const ibv_qp* qp, const ibv_srq* srq, const ibv_recv_wr* first, const ibv_recv_wr* stop) {
    State* s = state();
    if (s == nullptr) {
        return;
    }
    for (const ibv_recv_wr* wr = first; wr != nullptr && wr != stop; wr = wr->next) {
        PostedWork w;
        if (qp != nullptr) {
            w.queue = QueueKey{QueueKey::Kind::Receive, qp->qp_num};
            w.qp_num = qp->qp_num;
            w.cq = CqSlot{reinterpret_cast<std::uint64_t>(qp->recv_cq), static_cast<std::uint32_t>(qp->recv_cq->cqe)};
        } else {
            w.queue = QueueKey{QueueKey::Kind::SharedReceive, reinterpret_cast<std::uint64_t>(srq)};
        }
        w.wr_id = wr->wr_id;
        w.verb = "RECV";
        w.use = DeviceUse::Writes;
        if (wr->sg_list != nullptr && wr->num_sge > 0) {
            w.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
        }
        s->tracker.posted(std::move(w));
    }
}

void polled(const ibv_cq* cq, const ibv_wc* wc, int count) {
    if (State* s = state(); s != nullptr) {
        for (int i = 0; i < count; ++i) {
            s->tracker.completed(wc[i], reinterpret_cast<std::uint64_t>(cq));
        }
    }
}

void deregistering(std::uint32_t lkey) {
    if (State* s = state(); s != nullptr) {
        s->tracker.deregistering(lkey);
    }
}

void qp_destroyed(std::uint32_t qp_num) {
    if (State* s = state(); s != nullptr) {
        s->tracker.queue_destroyed(QueueKey{QueueKey::Kind::Send, qp_num});
        s->tracker.queue_destroyed(QueueKey{QueueKey::Kind::Receive, qp_num});
    }
}

void srq_destroyed(const ibv_srq* srq) {
    if (State* s = state(); s != nullptr) {
        s->tracker.queue_destroyed(QueueKey{QueueKey::Kind::SharedReceive, reinterpret_cast<std::uint64_t>(srq)});
    }
}

}  // namespace uroce::provider::sanitizer
