// ibv_create_cq_ex and the extended CQ's polling API (ibv_create_cq_ex(3)):
// start_poll / next_poll take one completion at a time from the CQ ring
// (completion_ring.h), end_poll only ends the poll (the slot was released
// when the completion was copied out), and the read_* accessors
// report the completion taken last. Every accessor is installed whatever
// wc_flags asked for; those outside the flags return what the CQE has.
//
// Completion timestamps come from the CQE (abi/rings.h): CLOCK_MONOTONIC
// and CLOCK_REALTIME when uroced wrote it. hca_core_clock is 1 GHz, the
// mask all 64 bits (extended_rules.h), and query_rt_values reads the same
// CLOCK_MONOTONIC (as a cycle count in tv_nsec, mlx5's form), so a
// program can relate completion times to "now".
// Completions flushed after the daemon has gone are stamped when polled.
#include <time.h>

#include <cerrno>
#include <cstring>

#include "extended_rules.h"
#include "provider.h"
#include "sanitizer.h"

namespace uroce::provider {

namespace {

Cq* to_cq(ibv_cq_ex* cq) { return reinterpret_cast<Cq*>(cq); }

std::uint64_t clock_ns(clockid_t clock) {
    timespec ts{};
    ::clock_gettime(clock, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// Takes the next completion into cq->current; 0 or ENOENT.
int take(ibv_cq_ex* ibcq) {
    Cq* cq = to_cq(ibcq);
    if (poll_one(*cq, cq->current, &cq->current_time) == 0) {
        return ENOENT;
    }
    ibcq->status = cq->current.status;
    ibcq->wr_id = cq->current.wr_id;
    return 0;
}

int start_poll(ibv_cq_ex* ibcq, ibv_poll_cq_attr* attr) {
    if (attr != nullptr && attr->comp_mask != 0) {
        return EINVAL;
    }
    // Held from a successful start_poll to end_poll (ibv_create_cq_ex(3):
    // end_poll follows only a start_poll that found a completion), so
    // threads polling one CQ do not overwrite each other's current one.
    Cq* cq = to_cq(ibcq);
    cq->poll_mutex.lock();
    const int err = take(ibcq);
    if (err == ENOENT) {
        cq->poll_mutex.unlock();
        after_empty_poll(cq->yield);  // as poll_cq (verbs_cq.cc)
    } else if (err == 0) {
        cq->yield.found(1);  // start_poll takes one; later ones are next_poll's
    }
    return err;
}

int next_poll(ibv_cq_ex* ibcq) { return take(ibcq); }

void end_poll(ibv_cq_ex* ibcq) { to_cq(ibcq)->poll_mutex.unlock(); }

const ibv_wc& current(ibv_cq_ex* ibcq) { return to_cq(ibcq)->current; }

ibv_wc_opcode read_opcode(ibv_cq_ex* cq) { return current(cq).opcode; }
std::uint32_t read_vendor_err(ibv_cq_ex* cq) { return current(cq).vendor_err; }
std::uint32_t read_byte_len(ibv_cq_ex* cq) { return current(cq).byte_len; }
__be32 read_imm_data(ibv_cq_ex* cq) { return current(cq).imm_data; }
std::uint32_t read_qp_num(ibv_cq_ex* cq) { return current(cq).qp_num; }
std::uint32_t read_src_qp(ibv_cq_ex* cq) { return current(cq).src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* cq) { return current(cq).wc_flags; }
std::uint32_t read_slid(ibv_cq_ex* cq) { return current(cq).slid; }
std::uint8_t read_sl(ibv_cq_ex* cq) { return current(cq).sl; }
std::uint8_t read_dlid_path_bits(ibv_cq_ex* cq) { return current(cq).dlid_path_bits; }
std::uint64_t read_completion_ts(ibv_cq_ex* cq) { return to_cq(cq)->current_time.device_ns; }
std::uint64_t read_completion_wallclock_ns(ibv_cq_ex* cq) { return to_cq(cq)->current_time.wallclock_ns; }
// Not offered (create_cq_ex refuses their wc_flags): no VLAN stripping,
// flow tags or tag matching; the entries exist so a call returns zero
// instead of jumping to null.
std::uint16_t read_cvlan(ibv_cq_ex* /*cq*/) { return 0; }
std::uint32_t read_flow_tag(ibv_cq_ex* /*cq*/) { return 0; }
void read_tm_info(ibv_cq_ex* /*cq*/, ibv_wc_tm_info* tm_info) { *tm_info = ibv_wc_tm_info{}; }

void install_poll_ops(ibv_cq_ex& cq) {
    cq.start_poll = start_poll;
    cq.next_poll = next_poll;
    cq.end_poll = end_poll;
    cq.read_opcode = read_opcode;
    cq.read_vendor_err = read_vendor_err;
    cq.read_byte_len = read_byte_len;
    cq.read_imm_data = read_imm_data;
    cq.read_qp_num = read_qp_num;
    cq.read_src_qp = read_src_qp;
    cq.read_wc_flags = read_wc_flags;
    cq.read_slid = read_slid;
    cq.read_sl = read_sl;
    cq.read_dlid_path_bits = read_dlid_path_bits;
    cq.read_completion_ts = read_completion_ts;
    cq.read_cvlan = read_cvlan;
    cq.read_flow_tag = read_flow_tag;
    cq.read_tm_info = read_tm_info;
    cq.read_completion_wallclock_ns = read_completion_wallclock_ns;
}

}  // namespace

int poll_one(Cq& cq, ibv_wc& wc, CompletionTime* time) {
    int n = cq.completions.poll(1, &wc, time);
    ibv_cq* ibcq = &cq.vcq.cq;
    if (n == 0 && loss_of(ibcq->context).device_gone(link_of(ibcq->context))) {
        n = cq.flushed.poll(loss_of(ibcq->context), ibcq, 1, &wc);
        if (n == 1 && time != nullptr) {
            *time = CompletionTime{clock_ns(CLOCK_MONOTONIC), clock_ns(CLOCK_REALTIME)};
        }
    }
    sanitizer::polled(ibcq, &wc, n);
    return n;
}

ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr) {
    if (const int err = check_cq_init_attr_ex(*attr, ctx->num_comp_vectors); err != 0) {
        errno = err;
        return nullptr;
    }
    ibv_pd* domain = (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) != 0 ? attr->parent_domain : nullptr;
    if (domain != nullptr && domain->context != ctx) {
        errno = EINVAL;
        return nullptr;
    }
    // The daemon stamps CQEs only for CQs that will read the times.
    const bool timestamps = (attr->wc_flags & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                                               IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)) != 0;
    ibv_cq* ibcq = create_cq_flags(ctx, static_cast<int>(attr->cqe), attr->channel,
                                   static_cast<int>(attr->comp_vector), timestamps ? UROCE_CQ_TIMESTAMPS : 0, domain);
    if (ibcq == nullptr) {
        return nullptr;
    }
    Cq* cq = reinterpret_cast<Cq*>(ibcq);
    install_poll_ops(cq->vcq.cq_ex);
    // libibverbs fills context, channel, cq_context, mutex and cond
    // (verbs_init_cq) after we return.
    return &cq->vcq.cq_ex;
}

int query_rt_values(ibv_context* /*ctx*/, ibv_values_ex* values) {
    // Only the raw clock exists; other bits asked for are cleared
    // (ibv_query_rt_values_ex(3): comp_mask returns what was filled in).
    // The device clock's count goes in tv_nsec with tv_sec 0, as mlx5 gives
    // its cycles, so programs that read tv_nsec alone and programs that add
    // tv_sec * 10^9 both get the count read_completion_ts is on.
    std::uint32_t filled = 0;
    if ((values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) != 0) {
        values->raw_clock.tv_sec = 0;
        values->raw_clock.tv_nsec = static_cast<long>(clock_ns(CLOCK_MONOTONIC));
        filled |= IBV_VALUES_MASK_RAW_CLOCK;
    }
    values->comp_mask = filled;
    return 0;
}

}  // namespace uroce::provider
