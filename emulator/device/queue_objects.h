// The client-owned queue objects of one device: completion queues, queue
// pairs, shared receive queues and address handles. Like PDs and MRs
// (mr/pd_table.h, mr/mr_table.h) each belongs to the client that created it:
// naming another client's object gets EINVAL, as if it did not exist, and
// destroy_owner() removes everything a departed client left behind.
//
// Validation follows the verbs man pages and what kernel drivers refuse:
// sizes within the device limits, objects in the caller's PD, a QP's CQs and
// SRQ owned by the caller, and every ibv_modify_qp(3) through the IBTA state
// machine of qp/qp_state_machine.h. Destroying a CQ, SRQ (or a PD, through
// PdTable's references) that a QP still uses fails with EBUSY.
//
// Control path only (the daemon's control thread): one mutex serialises it.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "mr/pd_table.h"
#include "qp/qp_attr.h"
#include "qp/qp_state_machine.h"
#include "qp/qp_types.h"

namespace uroce::device {

// Limits reported by QUERY_DEVICE and enforced here.
struct QueueLimits {
    std::uint32_t max_cq = 1u << 16;
    // As large as a ConnectX (mlx5: 2^22 - 1): libfabric's ofi_rxm asks one
    // MSG CQ for (rx + tx size) x FI_UNIVERSE_SIZE = (512 + 512) x 256 entries.
    std::uint32_t max_cqe = 1u << 22;
    std::uint32_t max_qp = 1u << 16;
    std::uint32_t max_qp_wr = 1u << 14;
    std::uint32_t max_sge = 32;
    std::uint32_t max_inline_data = 256;
    std::uint32_t max_srq = 1u << 12;
    std::uint32_t max_srq_wr = 1u << 14;
    std::uint32_t max_srq_sge = 32;
    std::uint32_t max_ah = 1u << 16;
};

// The owner of an XRC target QP: no client (clients count from 1); its
// handles say who may use it.
inline constexpr std::uint32_t kNoClient = 0;

// One client's handle on a shared (XRC target) QP: who holds it and the
// user pointer its async events carry.
struct SharedQpHandle {
    std::uint32_t owner = 0;
    std::uint64_t cookie = 0;
};

struct Created {
    int error = 0;
    std::uint32_t handle = 0;  // CQ / SRQ / AH handle, or the QPN
};

struct QpCreate {
    std::uint32_t pd = 0;
    qp::QpType type = qp::QpType::Rc;
    std::uint32_t send_cq = 0;
    std::uint32_t recv_cq = 0;
    std::uint32_t srq = 0;  // 0: none
    bool sq_sig_all = false;
    qp::QpCap cap;  // asked for; granted values are written back
};

struct SrqAttr {
    std::uint32_t max_wr = 0;
    std::uint32_t max_sge = 0;
    std::uint32_t srq_limit = 0;
};

// ibv_open_xrcd(3): which domain to open. `inode` names the file the
// application passed (its st_dev, st_ino); none: a domain of its own.
struct XrcdOpen {
    struct Inode {
        std::uint64_t dev = 0;
        std::uint64_t ino = 0;
        bool operator==(const Inode&) const = default;
    };
    std::optional<Inode> inode;
    bool create = false;     // O_CREAT
    bool exclusive = false;  // O_EXCL
};

// ibv_modify_srq(3) mask bits (enum ibv_srq_attr_mask).
inline constexpr std::uint32_t kSrqMaxWr = 1u << 0;
inline constexpr std::uint32_t kSrqLimit = 1u << 1;

struct QueueCounts {
    std::size_t cqs = 0;
    std::size_t qps = 0;
    std::size_t srqs = 0;
    std::size_t ahs = 0;
};

class QueueObjects {
public:
    QueueObjects(mr::PdTable& pds, QueueLimits limits, qp::PortLimits port);

    [[nodiscard]] const QueueLimits& limits() const { return limits_; }
    [[nodiscard]] const qp::PortLimits& port_limits() const { return port_; }

    // `cqe` in: entries asked for (1..max_cqe); out: granted.
    Created create_cq(std::uint32_t owner, std::uint32_t& cqe);
    int destroy_cq(std::uint32_t owner, CqHandle cq);  // EBUSY while a QP uses it

    Created create_srq(std::uint32_t owner, std::uint32_t pd, SrqAttr& attr);
    int modify_srq(std::uint32_t owner, SrqHandle srq, std::uint32_t mask, const SrqAttr& attr);
    int query_srq(std::uint32_t owner, SrqHandle srq, SrqAttr& attr) const;
    int destroy_srq(std::uint32_t owner, SrqHandle srq);  // EBUSY while a QP uses it

    Created create_ah(std::uint32_t owner, std::uint32_t pd, const qp::AhAttr& attr);
    int destroy_ah(std::uint32_t owner, std::uint32_t ah);

    // XRC (queue_objects_xrc.cc). A domain is shared by every client that
    // opens the same file; each open is a reference of its own (the handle
    // returned), and the domain lives while a reference, an XRC SRQ or an
    // XRC target QP names it.
    Created open_xrcd(std::uint32_t owner, const XrcdOpen& how);
    // EBUSY while an XRC SRQ or a target QP made or opened through this
    // reference lives (the kernel's uxrcd refcnt, ib_destroy_usecnt); the
    // domain itself stays while its SRQs or target QPs live.
    int close_xrcd(std::uint32_t owner, std::uint32_t xrcd);
    // The domain a reference of `owner` names (0: none), for the data path.
    [[nodiscard]] std::uint32_t xrc_domain(std::uint32_t owner, std::uint32_t xrcd) const;
    // An SRQ of type XRC in the domain of reference `xrcd`, completing into `cq`.
    Created create_xrc_srq(std::uint32_t owner, std::uint32_t pd, std::uint32_t xrcd, CqHandle cq, SrqAttr& attr);
    // An XRC target QP of the domain of reference `xrcd`: no PD, CQ or rings.
    // It belongs to no client: each create or open_xrc_tgt is a handle of its
    // opener's, destroy_qp closes one, and the last close destroys the QP
    // (the kernel's ib_open_qp / ib_close_qp sharing).
    // `cookie` is the handle's user pointer (its ibv_qp), echoed in the
    // async events delivered to that handle.
    Created create_xrc_tgt(std::uint32_t owner, std::uint32_t xrcd, std::uint64_t cookie = 0);
    // ibv_open_qp(3): one more handle on target QP `qpn` of the domain of
    // reference `xrcd`; EINVAL when `qpn` is no target QP of that domain.
    int open_xrc_tgt(std::uint32_t owner, std::uint32_t xrcd, Qpn qpn, std::uint64_t cookie = 0);
    // Closes the handle of `owner` on target QP `qpn` made or opened with
    // `cookie` (one owner may hold several: destroy_qp closes any one);
    // EINVAL when there is none. The last close destroys the QP.
    int close_xrc_tgt(std::uint32_t owner, Qpn qpn, std::uint64_t cookie);
    // The handles on target QP `qpn` (none when it is no target QP): a
    // shared QP's async events go to every one of them, as the kernel's
    // __ib_shared_qp_event_handler calls each opener's handler.
    [[nodiscard]] std::vector<SharedQpHandle> xrc_tgt_handles(std::uint32_t qpn) const;
    // Closes every target-QP handle of `owner` (a departing client); returns
    // the QPNs whose last handle that was, now destroyed.
    std::vector<std::uint32_t> close_xrc_tgts_of(std::uint32_t owner);
    [[nodiscard]] bool qp_exists(Qpn qpn) const;

    // `c.cap` is updated to what was granted.
    Created create_qp(std::uint32_t owner, QpCreate& c);
    // 0 or EINVAL (the reason, for logs, in `reason`).
    int modify_qp(std::uint32_t owner, Qpn qpn, std::uint32_t mask, const qp::QpAttr& attr, const char*& reason);
    [[nodiscard]] std::optional<qp::QpAttr> query_qp(std::uint32_t owner, Qpn qpn) const;
    // The data path moved a QP to a state on its own (ERR after a fatal
    // completion error, IBA 10.3.1): keep the record the state machine checks
    // against in step.
    void set_state_from_engine(Qpn qpn, qp::QpState state);
    int destroy_qp(std::uint32_t owner, Qpn qpn);

    // Destroys every object of `owner` (QPs first); returns how many.
    std::size_t destroy_owner(std::uint32_t owner);
    [[nodiscard]] QueueCounts counts() const;

private:
    struct Cq {
        std::uint32_t owner = 0;
        std::uint32_t cqe = 0;
        std::uint32_t users = 0;  // QPs
    };
    struct Srq {
        std::uint32_t owner = 0;
        std::uint32_t pd = 0;
        SrqAttr attr;
        std::uint32_t users = 0;
        std::uint32_t xrc_domain = 0;  // XRC SRQs: their domain, the reference made through, and CQ
        std::uint32_t xrcd_ref = 0;
        std::uint32_t cq = 0;
    };
    struct XrcDomain {
        std::optional<XrcdOpen::Inode> inode;
        std::uint32_t users = 0;  // references, SRQs, target QPs
    };
    struct XrcdRef {
        std::uint32_t owner = 0;
        std::uint32_t domain = 0;
        std::uint32_t users = 0;  // XRC SRQs and target-QP handles made through this reference
    };
    // One handle on an XRC target QP: its client and the domain reference
    // it was made or opened through.
    struct XrcTgtHandle {
        std::uint32_t owner = 0;
        std::uint32_t xrcd_ref = 0;
        std::uint64_t cookie = 0;
    };
    struct Ah {
        std::uint32_t owner = 0;
        std::uint32_t pd = 0;
        qp::AhAttr attr;
    };
    struct Qp {
        std::uint32_t owner = 0;
        std::uint32_t pd = 0;
        qp::QpType type = qp::QpType::Rc;
        std::uint32_t send_cq = 0;
        std::uint32_t recv_cq = 0;
        std::uint32_t srq = 0;
        bool sq_sig_all = false;
        std::uint32_t xrc_domain = 0;  // XRC target QPs: their domain and handles
        std::vector<XrcTgtHandle> handles;
        qp::QpAttr attr;
    };

    void unref_domain(std::uint32_t domain);
    void unref_xrcd_ref(std::uint32_t ref);
    // `owner` may use QP `q`: it created it, or holds a handle on a target QP.
    [[nodiscard]] static bool may_use(const Qp& q, std::uint32_t owner);
    // Drops one handle of `owner` on target QP `it` (the one with `cookie`
    // when given); true when it was the last (the QP is then erased).
    bool close_tgt_handle(std::unordered_map<std::uint32_t, Qp>::iterator it, std::uint32_t owner,
                          std::optional<std::uint64_t> cookie = std::nullopt);
    void release_srq_refs(const Srq& s);
    [[nodiscard]] int check_ah(const qp::AhAttr& a) const;
    std::uint32_t next_qpn();
    void release_qp_refs(const Qp& q);

    mr::PdTable& pds_;
    QueueLimits limits_;
    qp::PortLimits port_;
    mutable std::mutex mutex_;
    std::unordered_map<std::uint32_t, Cq> cqs_;
    std::unordered_map<std::uint32_t, Srq> srqs_;
    std::unordered_map<std::uint32_t, Ah> ahs_;
    std::unordered_map<std::uint32_t, Qp> qps_;
    std::unordered_map<std::uint32_t, XrcDomain> domains_;
    std::unordered_map<std::uint32_t, XrcdRef> xrcd_refs_;
    std::uint32_t next_domain_ = 1;
    std::uint32_t next_handle_ = 1;
    std::uint32_t next_qpn_ = 0x11;  // QP0 and QP1 are the special QPs; rdma_rxe starts at 17 too
};

}  // namespace uroce::device
