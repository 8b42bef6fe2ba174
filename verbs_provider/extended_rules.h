// What the extended creation verbs accept (ibv_create_qp_ex(3),
// ibv_create_cq_ex(3)), as pure functions of their attributes so the unit
// tests check them without a device. Attributes a kernel would refuse
// (no PD, a CQ of no entries) are EINVAL; extensions uroce does not offer
// (XRC, TSO, RSS, parent domains, CVLAN/flow-tag/tag-matching fields) are
// EOPNOTSUPP, as mlx5 and rdma_rxe answer them.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace uroce::provider {

// The IBV_QP_EX_WITH_* bits a QP of `type` may ask for: the opcodes
// ibv_post_send(3) allows it (work_queue.h opcode_allowed); 0 for a type
// uroce does not offer.
[[nodiscard]] std::uint64_t send_ops_offered(ibv_qp_type type);

// The IBV_QP_EX_WITH_* bit of a send opcode (0 for none).
[[nodiscard]] std::uint64_t send_op_flag(ibv_wr_opcode op);

// ibv_create_qp_ex: 0, EINVAL or EOPNOTSUPP.
[[nodiscard]] int check_qp_init_attr_ex(const ibv_qp_init_attr_ex& attr);

// The wc_flags an extended CQ can report: the standard fields and both
// completion timestamps.
inline constexpr std::uint64_t kCqWcFlagsOffered =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

// ibv_create_cq_ex: 0, EINVAL or EOPNOTSUPP (`num_comp_vectors` of the
// context for the comp_vector check).
[[nodiscard]] int check_cq_init_attr_ex(const ibv_cq_init_attr_ex& attr, int num_comp_vectors);

// The device clock of completion timestamps (abi/rings.h uroce_cqe):
// CLOCK_MONOTONIC in nanoseconds, so a 1 GHz clock (hca_core_clock is in
// kHz) that uses all 64 bits.
inline constexpr std::uint64_t kHcaCoreClockKhz = 1'000'000;
inline constexpr std::uint64_t kCompletionTimestampMask = UINT64_MAX;

}  // namespace uroce::provider
