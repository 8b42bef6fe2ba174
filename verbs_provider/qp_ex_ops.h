// The ibv_qp_ex function table (ibv_wr_post(3)) of an extended QP: each
// ibv_wr_* function adds to the QP's SendBatch (send_batch.h) and
// ibv_wr_complete posts the batch.
//
// Two functions connect the table to its QP; verbs_qp.cc defines them for
// the plugin, the unit tests for a QP of their own. Only types of
// <infiniband/verbs.h> are used here.
#pragma once

#include <infiniband/verbs.h>

#include "send_batch.h"

namespace uroce::provider {

// The batch of the QP whose ibv_qp_ex this is.
SendBatch& batch_of(ibv_qp_ex* qp);
// Posts a chain of WRs on the QP's send queue, all or none: 0 or an errno.
int post_batch(ibv_qp_ex* qp, ibv_send_wr* wr);

// Fills every wr_* entry of `qp` (wr_id, wr_flags and comp_mask are the
// application's and ours to zero).
void install_send_ops(ibv_qp_ex& qp);

}  // namespace uroce::provider
