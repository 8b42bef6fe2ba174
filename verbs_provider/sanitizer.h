// The RDMA sanitizer's hooks in the provider's verbs (docs/sanitizer.md).
// Off unless the process runs with UROCE_SANITIZE set (`uroce exec
// --sanitize`); then every hook feeds sanitizer_tracker.h and each finding
// is one line on stderr (and in UROCE_SANITIZE_LOG, when set), or an abort
// with UROCE_SANITIZE=abort. Off, each hook is one load and a branch.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace uroce::provider::sanitizer {

// Whether this process sanitizes (read once from the environment).
[[nodiscard]] bool enabled();

// The WRs from `first` up to (not including) `stop` (*bad_wr, or null when
// every WR went in) were posted to `qp`'s send queue.
void posted_sends(const ibv_qp* qp, bool signal_all, const ibv_send_wr* first, const ibv_send_wr* stop);
// The same for a QP's receive queue (srq null) or an SRQ (qp null).
void posted_receives(const ibv_qp* qp, const ibv_srq* srq, const ibv_recv_wr* first, const ibv_recv_wr* stop);
// The application polled `count` completions from `cq`.
void polled(const ibv_cq* cq, const ibv_wc* wc, int count);
void deregistering(std::uint32_t lkey);
void qp_destroyed(std::uint32_t qp_num);
void srq_destroyed(const ibv_srq* srq);

}  // namespace uroce::provider::sanitizer
