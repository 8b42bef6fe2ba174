#include "send_batch.h"

#include <cerrno>
#include <cstring>

#include "extended_rules.h"

namespace uroce::provider {

void SendBatch::configure(ibv_qp_type type, std::uint64_t send_ops_flags, std::uint32_t max_sge,
                          std::uint32_t max_inline) {
    type_ = type;
    send_ops_ = send_ops_flags;
    max_sge_ = max_sge;
    max_inline_ = max_inline;
}

void SendBatch::start() {
    mutex_.lock();
    phase_ = Phase::Open;
    error_ = 0;
}

void SendBatch::fail(int err) {
    if (error_ == 0) {
        error_ = err;
    }
}

ibv_send_wr* SendBatch::begin(ibv_wr_opcode op, std::uint64_t wr_id, unsigned int wr_flags) {
    // An opcode the QP was not created for (ibv_create_qp_ex(3):
    // send_ops_flags lists the ones the application will use).
    if (phase_ != Phase::Open || (send_op_flag(op) & send_ops_) == 0) {
        fail(EINVAL);
        return nullptr;
    }
    Pending p{};
    p.wr.wr_id = wr_id;
    p.wr.opcode = op;
    p.wr.send_flags = wr_flags;
    p.payload = Payload::None;
    pending_.push_back(p);
    return &pending_.back().wr;
}

SendBatch::Pending* SendBatch::current() {
    if (phase_ != Phase::Open || pending_.empty()) {
        fail(EINVAL);  // a set_* before any opcode function
        return nullptr;
    }
    return &pending_.back();
}

void SendBatch::set_sges(std::size_t num_sge, const ibv_sge* sg_list) {
    Pending* p = current();
    if (p == nullptr) {
        return;
    }
    if (num_sge > max_sge_ || (num_sge != 0 && sg_list == nullptr)) {
        fail(EINVAL);
        return;
    }
    p->payload = Payload::Sges;
    p->first = sges_.size();
    p->count = num_sge;
    sges_.insert(sges_.end(), sg_list, sg_list + num_sge);
    p->wr.send_flags &= ~static_cast<unsigned int>(IBV_SEND_INLINE);
}

void SendBatch::set_inline(std::size_t num_buf, const ibv_data_buf* buf_list) {
    Pending* p = current();
    if (p == nullptr) {
        return;
    }
    std::size_t total = 0;
    for (std::size_t i = 0; i < num_buf; ++i) {
        total += buf_list[i].length;
        if (total > max_inline_ || (buf_list[i].length != 0 && buf_list[i].addr == nullptr)) {
            fail(EINVAL);  // ibv_wr_post(3): inline data up to max_inline_data
            return;
        }
    }
    p->payload = Payload::Inline;
    p->first = inline_.size();
    p->count = total;
    // Copied now: the buffers are the application's again when this returns.
    for (std::size_t i = 0; i < num_buf; ++i) {
        const auto* bytes = static_cast<const std::uint8_t*>(buf_list[i].addr);
        inline_.insert(inline_.end(), bytes, bytes + buf_list[i].length);
    }
    p->wr.send_flags |= IBV_SEND_INLINE;
}

void SendBatch::set_ud_addr(ibv_ah* ah, std::uint32_t remote_qpn, std::uint32_t remote_qkey) {
    Pending* p = current();
    if (p == nullptr) {
        return;
    }
    if (type_ != IBV_QPT_UD || ah == nullptr) {
        fail(EINVAL);
        return;
    }
    p->wr.wr.ud.ah = ah;
    p->wr.wr.ud.remote_qpn = remote_qpn;
    p->wr.wr.ud.remote_qkey = remote_qkey;
}

void SendBatch::set_xrc_srqn(std::uint32_t remote_srqn) {
    Pending* p = current();
    if (p == nullptr) {
        return;
    }
    if (type_ != IBV_QPT_XRC_SEND) {
        fail(EINVAL);
        return;
    }
    p->wr.qp_type.xrc.remote_srqn = remote_srqn;
}

ibv_send_wr* SendBatch::chain() {
    // Storage is final now: no vector grows after the pointers are taken.
    inline_sges_.clear();
    for (const Pending& p : pending_) {
        if (p.payload == Payload::Inline) {
            ibv_sge s{};
            s.addr = reinterpret_cast<std::uintptr_t>(inline_.data() + p.first);
            s.length = static_cast<std::uint32_t>(p.count);
            inline_sges_.push_back(s);
        }
    }
    std::size_t next_inline = 0;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
        Pending& p = pending_[i];
        switch (p.payload) {
            case Payload::None:
                p.wr.sg_list = nullptr;
                p.wr.num_sge = 0;
                break;
            case Payload::Sges:
                p.wr.sg_list = sges_.data() + p.first;
                p.wr.num_sge = static_cast<int>(p.count);
                break;
            case Payload::Inline:
                p.wr.sg_list = &inline_sges_[next_inline++];
                p.wr.num_sge = 1;
                break;
        }
        p.wr.next = i + 1 < pending_.size() ? &pending_[i + 1].wr : nullptr;
    }
    return &pending_.front().wr;
}

void SendBatch::finish() {
    // clear() keeps the capacity: a steady stream of batches allocates nothing.
    pending_.clear();
    sges_.clear();
    inline_.clear();
    inline_sges_.clear();
    error_ = 0;
    phase_ = Phase::Idle;
    mutex_.unlock();
}

void SendBatch::abort() {
    if (phase_ == Phase::Open) {
        finish();
    }
}

}  // namespace uroce::provider
