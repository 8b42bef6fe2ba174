// libFuzzer target for the RoCEv2 engine facing a hostile peer and a hostile
// client (issue 5: "Bad input gets a clear error and loses nothing ... The
// daemon never crashes and never writes outside a registered region").
//
// One engine, the victim, with four QPs in RTS: RC (0x11), UC (0x12), UD
// (0x13) and an RC QP on a shared receive queue (0x14). The connected ones
// face a peer that does not exist: what the victim sends goes to a sink,
// which checks that every frame it emits is well formed and keeps the last
// ones so the input can hand them back (swapped as if the peer had echoed
// them: the victim then talks to itself, which reaches deep responder and
// completer states with realistic PSNs).
//
// Memory regions sit in the middle of larger buffers filled with a pattern
// (the guards): one in a sealed memfd the engine maps (the shared DMA way),
// the others reached with pread/pwrite on /proc/self/mem (the copying way); one
// without write rights, one in another PD, one behind an iova, one with a
// page the process cannot touch (DMA faults). A type 2 memory window can be
// bound over the first.
//
// XRC (IBA annex A14): an initiator (0x15) whose requests go to the victim's
// own target (0x16), and three XRC SRQs (2, 3, 4) over two XRC domains: the
// target is in domain 1, SRQs 2 and 3 too, SRQ 4 in domain 2 (or domain 1
// when the flags ask for one domain). SRQ 1 is the ordinary one. The input
// posts XRC WQEs naming any of them or none, sends XRC requests (XRCETH)
// to the target, and re-creates or removes the SRQs and the target.
//
// An input is a flags byte and then a sequence of operations (see Op), each
// an opcode byte and its fields; missing bytes read as zero. Operations
// deliver raw or structured frames, post valid or garbage WQEs and ring
// indices, advance a fake clock, move QPs between states, and echo the
// victim's own frames. After each one the engine is polled and these must
// hold, or the target traps (libFuzzer keeps the input as a reproducer):
//   - no byte outside a registered region changed (the guards);
//   - no byte changed in a region without write rights or in another PD;
//   - each CQ's producer is at most `entries` ahead of its consumer, and
//     every CQE names one of the victim's QPs with a known status and opcode;
//   - every frame the victim sends parses, carries a good ICRC and leaves
//     from one of its GIDs;
// and AddressSanitizer and UBSan watch the rest. Every input starts from the
// same state (QPs, CQs, rings, memory contents and clock rebuilt), so a
// crash reproduces from its input alone.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "engine_harness.h"  // tests/unit/engine: rings in process memory, TestQp
#include "engine/engine.h"
#include "mr/access_flags.h"
#include "mr/keys.h"
#include "mr/mr_table.h"
#include "mr/pd_table.h"
#include "wire/build.h"
#include "wire/icrc.h"
#include "wire/ip_checksum.h"
#include "wire/opcode.h"
#include "wire/parse.h"

namespace {

using namespace uroce;
using engine::Clock;
using engine::test::RingMemory;
using engine::test::TestQp;

// UROCE_FUZZ_TRACE=1: print each operation, the CQEs and the engine's
// counters, to see what a reproducer does.
const bool kTrace = std::getenv("UROCE_FUZZ_TRACE") != nullptr;

void require(bool ok) {
    if (!ok) {
        __builtin_trap();
    }
}

// ---- reading the input ----

// Consumes the input front to back; past its end every read is zero, so any
// prefix of a valid input is one too.
class Input {
public:
    Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

    [[nodiscard]] bool empty() const { return pos_ >= size_; }
    std::uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
    std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | u8() << 8); }
    std::uint32_t u32() { return u16() | static_cast<std::uint32_t>(u16()) << 16; }
    std::uint64_t u64() { return u32() | static_cast<std::uint64_t>(u32()) << 32; }
    // Up to n bytes (fewer when the input ends).
    std::span<const std::uint8_t> bytes(std::size_t n) {
        const std::size_t take = std::min(n, size_ - std::min(pos_, size_));
        std::span<const std::uint8_t> out(data_ + std::min(pos_, size_), take);
        pos_ += take;
        return out;
    }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
};

// ---- the victim's setup ----

constexpr std::uint32_t kOwner = engine::test::kOwner;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kRegionBytes = 4 * kPage;  // guard page, two MR pages, guard page
constexpr std::uint32_t kPsn = 0x100;            // sq_psn and rq_psn: echoed frames arrive in sequence
constexpr std::uint32_t kQkey = 0x11111111;
constexpr std::uint32_t kQpCount = 4;
constexpr std::uint32_t kSrqHandle = 1;
constexpr std::uint32_t kSrqEntries = 16;
constexpr std::uint32_t kAhCount = 3;
constexpr std::uint32_t kXrcSrqFirst = 2;  // XRC SRQ handles 2, 3, 4: their XRCETH numbers
constexpr std::uint32_t kXrcSrqCount = 3;
constexpr std::uint32_t kXrcIniCq = kQpCount + 1;  // CQ handles after the four QPs' own
constexpr std::uint32_t kXrcSrqCq = kQpCount + 2;

struct QpPlan {
    std::uint32_t qpn;
    std::uint32_t peer_qpn;
    qp::QpType type;
    bool srq;
};
constexpr std::array<QpPlan, kQpCount> kQps = {{
    {0x11, 0x21, qp::QpType::Rc, false},
    {0x12, 0x22, qp::QpType::Uc, false},
    {0x13, 0x23, qp::QpType::Ud, false},
    {0x14, 0x24, qp::QpType::Rc, true},
}};
// The two XRC halves, each the other's peer.
constexpr QpPlan kXrcIni = {0x15, 0x16, qp::QpType::XrcIni, false};
constexpr QpPlan kXrcTgt = {0x16, 0x15, qp::QpType::XrcTgt, false};

wire::Gid ipv6_gid(std::uint8_t last) {
    wire::Gid g{};
    g[0] = 0xFD;
    g[15] = last;
    return g;
}

const wire::Gid kVictimGid4 = engine::test::ipv4_gid(1);
const wire::Gid kVictimGid6 = ipv6_gid(1);
const wire::Gid kPeerGid4 = engine::test::ipv4_gid(2);
const wire::Gid kPeerGid6 = ipv6_gid(2);
constexpr wire::MacAddr kVictimMac = {0x02, 0, 0, 0, 0, 1};
constexpr wire::MacAddr kPeerMac = {0x02, 0, 0, 0, 0, 2};

// A buffer with one MR in its middle; everything outside the MR is guard.
struct Region {
    std::uint8_t* base = nullptr;
    std::size_t mr_offset = 0;
    std::size_t mr_length = 0;
    std::uint64_t iova = 0;  // where keys address the MR's first byte
    std::uint32_t access = 0;
    std::uint32_t key = 0;   // lkey == rkey
    // No QP of the victim may change a byte of the MR either (no write
    // right, or another PD).
    bool frozen = false;
    // A page of the MR that is not mapped (0: none): DMA there fails.
    std::size_t no_access_page = 0;
    std::vector<std::uint8_t> pristine;

    // The bytes [from, to) of the region that can be read, as spans.
    template <typename F>
    void for_each_readable(std::size_t from, std::size_t to, F f) const {
        if (no_access_page == 0) {
            f(from, to);
            return;
        }
        const std::size_t hole = no_access_page * kPage;
        if (from < std::min(to, hole)) {
            f(from, std::min(to, hole));
        }
        if (std::max(from, hole + kPage) < to) {
            f(std::max(from, hole + kPage), to);
        }
    }
};

constexpr std::uint32_t kAllRights = mr::Access::kLocalWrite | mr::Access::kRemoteWrite |
                                     mr::Access::kRemoteRead | mr::Access::kRemoteAtomic | mr::Access::kMwBind;

// The slot a client writes its next WQE into, cleared.
std::uint8_t* next_slot(uroce_wq_ring* h) {
    std::uint8_t* slot =
        reinterpret_cast<std::uint8_t*>(h + 1) + std::size_t{h->producer & (h->entries - 1)} * h->stride;
    std::memset(slot, 0, h->stride);
    return slot;
}

// Every frame the victim sends must be one a receiver accepts; the last ones
// are kept so the input can echo them back.
class Sink : public engine::FrameSink {
public:
    static constexpr std::size_t kKept = 64;

    bool send_ip(std::span<std::uint8_t> frame, const wire::Gid& dst, Clock::time_point) override {
        const wire::ParseResult r = wire::parse_and_verify(frame);
        require(r.ok());
        const wire::Gid src = r.packet.src_gid();
        require(src == kVictimGid4 || src == kVictimGid6);
        require(r.packet.dst_gid() == dst);
        if (frames.size() == kKept) {
            frames.pop_front();
        }
        frames.emplace_back(frame.begin(), frame.end());
        return true;
    }

    std::deque<std::vector<std::uint8_t>> frames;
};

class Victim {
public:
    Victim();
    ~Victim();
    Victim(const Victim&) = delete;
    Victim& operator=(const Victim&) = delete;

    void run(Input& in);

private:
    enum class Op : std::uint8_t {
        RawFrame,       // bytes as a frame, optionally aimed at a QP, ICRC fixed
        Request,        // a request built field by field to a victim QP
        Response,       // a response (ACK, NAK, READ response, atomic ACK) to an RC QP
        PostSend,       // a send WQE as a client would post it, fields from the input
        Garbage,        // raw bytes into a ring slot, or a ring index overwritten
        PostRecv,       // receive WQEs into an RQ or the SRQ
        Clock,          // time passes: retransmit and RNR timers fire
        Modify,         // ibv_modify_qp: back to RTS through RESET, to ERR, to SQD
        Echo,           // the victim's own frames come back as if from the peer
        XrcPostSend,    // a send WQE on the XRC initiator, naming an XRC SRQ or none
        XrcRequest,     // an XRC request (XRCETH) to the XRC target, as Request
        XrcObjects,     // XRC SRQs and the target re-created, removed, refilled, moved
        Count,
    };
    struct Flags {
        static constexpr std::uint8_t kNoDrain = 1u << 0;     // let CQs fill up (overrun)
        static constexpr std::uint8_t kNoRecover = 1u << 1;   // QPs that enter ERR stay there
        static constexpr std::uint8_t kForever = 1u << 2;     // retry_cnt and rnr_retry 7
        static constexpr std::uint8_t kNoTimeout = 1u << 3;   // timeout 0: never retransmit
        static constexpr std::uint8_t kSrqLimit = 1u << 4;    // arm the SRQ limit event
        static constexpr std::uint8_t kXrcOneDomain = 1u << 5;  // every XRC SRQ in the target's domain
    };

    // Every input starts from the same state, and gives back at its end
    // all it allocated (else libFuzzer runs a leak check after each input).
    void setup(std::uint8_t flags);
    void teardown();
    qp::QpAttr rts_attr(std::size_t i) const;
    qp::QpAttr rts_attr(const QpPlan& plan) const;
    void to_rts(std::size_t i);
    void to_rts(const QpPlan& plan);
    void add_xrc_srq(std::uint32_t k, std::uint32_t domain);
    void add_xrc_tgt(std::uint32_t domain);
    void recover_xrc();
    void post_standard_recvs(std::size_t i, std::uint32_t count);
    uroce_wq_ring* recv_ring(std::size_t i);

    // Field choosers: mostly values that pass, sometimes ones that should not.
    std::uint32_t choose_key(Input& in);
    std::uint64_t choose_address(Input& in);
    std::uint32_t choose_length(Input& in);
    wire::Psn choose_psn(Input& in, wire::Psn base);
    uroce_sge choose_sge(Input& in);
    std::uint32_t choose_xrc_srqn(Input& in);

    void op_raw_frame(Input& in);
    void op_request(Input& in);
    void op_response(Input& in);
    void op_post_send(Input& in);
    void op_garbage(Input& in);
    void op_post_recv(Input& in);
    void op_clock(Input& in);
    void op_modify(Input& in);
    void op_echo(Input& in);
    void op_xrc_post_send(Input& in);
    void op_xrc_request(Input& in) { request(in, true); }
    void op_xrc_objects(Input& in);
    void request(Input& in, bool xrc);
    void post_send(Input& in, TestQp& q, qp::QpType type, std::uint32_t xrc_srqn);
    void post_recvs(Input& in, uroce_wq_ring* h);
    void settle_cq(TestQp& q);

    // Points a parsed frame at victim QP `qpn` from the peer, then fixes
    // the IPv4 checksum and the ICRC.
    static void aim(std::span<std::uint8_t> frame, const wire::Packet& p, std::uint32_t qpn, bool swap_addresses);
    static void fix_icrc(std::span<std::uint8_t> frame, const wire::Packet& p);
    void deliver(std::span<const std::uint8_t> frame);
    void deliver_built(wire::PacketFields& f);
    void settle();
    void check();

    mr::PdTable pds_;
    mr::MrTable mrs_{pds_};
    dma::ClientMemory memory_{dma::open_process_memory(::getpid())};
    Sink sink_;
    std::unique_ptr<engine::Engine> engine_;
    std::uint32_t pd_ = 0;
    std::array<Region, 7> regions_{};
    std::uint32_t other_pd_ = 0;
    int memfd_ = -1;
    std::uint32_t mw_key_ = 0;
    std::array<TestQp, kQpCount> qps_{};
    RingMemory srq_mem_;
    TestQp xrc_ini_;  // the initiator's send queue and CQ
    TestQp xrc_cq_;   // only its CQ: the XRC SRQs' completions
    std::array<RingMemory, kXrcSrqCount> xrc_srq_mem_;
    std::uint32_t xrc_tgt_domain_ = 0;                           // 0: the target does not exist now
    std::array<int, kQpCount> channel_read_{-1, -1, -1, -1};
    std::uint8_t flags_ = 0;
    bool cq_scribbled_ = false;
    Clock::time_point now_{};
    std::vector<std::uint8_t> frame_buffer_ = std::vector<std::uint8_t>(16384);
    std::vector<std::uint8_t> payload_buffer_ = std::vector<std::uint8_t>(8192);
};

Victim::Victim() {
    pd_ = pds_.alloc(kOwner).pd;
    other_pd_ = pds_.alloc(kOwner).pd;
    // Region 1 lives in a sealed memfd so the engine's DMA takes the shared
    // way; region 6 is a private mapping with a page unmapped; the
    // others are plain heap. All but region 1 are reached by
    // pread/pwrite on /proc/self/mem.
    memfd_ = ::memfd_create("fuzz_engine", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    require(memfd_ >= 0 && ::ftruncate(memfd_, kRegionBytes) == 0 && ::fcntl(memfd_, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
    for (std::size_t r = 0; r < regions_.size(); ++r) {
        Region& g = regions_[r];
        if (r == 1 || r == 6) {
            const int flags = r == 1 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS;
            void* p = ::mmap(nullptr, kRegionBytes, PROT_READ | PROT_WRITE, flags, r == 1 ? memfd_ : -1, 0);
            require(p != MAP_FAILED);
            g.base = static_cast<std::uint8_t*>(p);
        } else {
            g.base = static_cast<std::uint8_t*>(std::aligned_alloc(kPage, kRegionBytes));
        }
        g.pristine.resize(kRegionBytes);
        for (std::size_t i = 0; i < kRegionBytes; ++i) {
            g.pristine[i] = static_cast<std::uint8_t>((i * 131 + r * 29 + (i >> 9)) ^ 0xA5);
        }
        std::memcpy(g.base, g.pristine.data(), kRegionBytes);
    }
    // 0: every right, odd boundaries (guards share the MR's first and last pages).
    regions_[0].mr_offset = kPage + 24;
    regions_[0].mr_length = 2 * kPage - 40;
    regions_[0].access = kAllRights;
    // 1: every right, shared mapping, page aligned.
    regions_[1].mr_offset = kPage;
    regions_[1].mr_length = 2 * kPage;
    regions_[1].access = kAllRights;
    // 2: remote read only.
    regions_[2].mr_offset = kPage + 8;
    regions_[2].mr_length = kPage;
    regions_[2].access = mr::Access::kRemoteRead;
    regions_[2].frozen = true;
    // 3: local write only: receives may land, remote writes and atomics may not.
    regions_[3].mr_offset = kPage;
    regions_[3].mr_length = kPage + 100;
    regions_[3].access = mr::Access::kLocalWrite;
    // 4: every right, addressed through an iova that is the address of
    // region 2's MR: a write that skipped the translation would land in the
    // region nothing may change.
    regions_[4].mr_offset = kPage + 64;
    regions_[4].mr_length = kPage;
    regions_[4].access = kAllRights;
    // 5: every right, but in a PD none of the victim's QPs is in.
    regions_[5].mr_offset = kPage + 16;
    regions_[5].mr_length = kPage;
    regions_[5].access = kAllRights;
    regions_[5].frozen = true;
    // 6: every right, and its second page is unmapped: the checks pass, the
    // DMA fails (as when a client unmaps registered memory). Unmapped, not
    // PROT_NONE: the copying way (/proc/PID/mem, FOLL_FORCE) reaches a
    // PROT_NONE page, as a debugger does (docs/security.md).
    regions_[6].mr_offset = kPage;
    regions_[6].mr_length = 2 * kPage;
    regions_[6].access = kAllRights;
    regions_[6].no_access_page = 2;
    require(::munmap(regions_[6].base + 2 * kPage, kPage) == 0);
    for (std::size_t r = 0; r < regions_.size(); ++r) {
        Region& g = regions_[r];
        mr::RegRequest req;
        req.pd = r == 5 ? other_pd_ : pd_;
        req.owner = kOwner;
        req.addr = reinterpret_cast<std::uintptr_t>(g.base + g.mr_offset);
        req.length = g.mr_length;
        req.access = g.access;
        if (r == 4) {
            req.iova = reinterpret_cast<std::uintptr_t>(regions_[2].base + regions_[2].mr_offset);
        }
        const mr::Registered reg = mrs_.reg_mr(req);
        require(reg.error == 0);
        g.key = reg.lkey;
        g.iova = req.iova.value_or(req.addr);
    }
    require(memory_.add_shared(reinterpret_cast<std::uintptr_t>(regions_[1].base), kRegionBytes, memfd_, 0) == 0);

    engine::EngineConfig cfg;
    cfg.mac = kVictimMac;
    cfg.gids.push_back(device::GidEntry{kVictimGid4, device::GidType::RoceV2});
    cfg.gids.push_back(device::GidEntry{kVictimGid6, device::GidType::RoceV2});
    cfg.send_window = 16;  // small, so the window-full wait is reachable
    engine_ = std::make_unique<engine::Engine>(
        cfg, mrs_, sink_, [this](std::uint32_t owner) { return owner == kOwner ? &memory_ : nullptr; },
        [](std::uint32_t, std::uint64_t, engine::AsyncEvent) {});
    // UD address handles: the peer over IPv4, over IPv6, and one naming a
    // source GID index the port does not have.
    std::array<qp::AhAttr, kAhCount> ahs{};
    std::copy(kPeerGid4.begin(), kPeerGid4.end(), ahs[0].dgid.begin());
    std::copy(kPeerGid6.begin(), kPeerGid6.end(), ahs[1].dgid.begin());
    ahs[1].sgid_index = 1;
    ahs[2].sgid_index = 9;
    for (std::uint32_t h = 0; h < kAhCount; ++h) {
        ahs[h].is_global = true;
        engine_->add_ah(h + 1, ahs[h]);
    }
    mw_key_ = mrs_.alloc_mw(pd_, kOwner, mr::MwType::Type2).key;
    for (std::size_t i = 0; i < kQpCount; ++i) {
        TestQp& q = qps_[i];
        q.qpn = kQps[i].qpn;
        q.sq_entries = 16;
        q.rq_entries = 16;
        q.cq_entries = 64;
        q.sq_mem = engine::test::make_wq(q.sq_entries, q.sq_stride, 4, 128);
        q.rq_mem = engine::test::make_wq(q.rq_entries, q.rq_stride, 4, 0);
        q.cq_mem = engine::test::make_cq(q.cq_entries);
    }
    srq_mem_ = engine::test::make_wq(kSrqEntries, qps_[0].rq_stride, 4, 0);
    xrc_ini_.qpn = kXrcIni.qpn;
    xrc_ini_.sq_entries = 16;
    xrc_ini_.cq_entries = 64;
    xrc_ini_.sq_mem = engine::test::make_wq(xrc_ini_.sq_entries, xrc_ini_.sq_stride, 4, 128);
    xrc_ini_.cq_mem = engine::test::make_cq(xrc_ini_.cq_entries);
    xrc_cq_.cq_entries = 64;
    xrc_cq_.cq_mem = engine::test::make_cq(xrc_cq_.cq_entries);
    for (RingMemory& m : xrc_srq_mem_) {
        m = engine::test::make_wq(kSrqEntries, qps_[0].rq_stride, 4, 0);
    }
}

Victim::~Victim() { engine_.reset(); }

qp::QpAttr Victim::rts_attr(std::size_t i) const { return rts_attr(kQps[i]); }

qp::QpAttr Victim::rts_attr(const QpPlan& plan) const {
    qp::QpAttr a;
    a.state = qp::QpState::Rts;
    a.path_mtu = qp::Mtu::Mtu256;  // multi-packet messages from few input bytes
    a.dest_qp_num = plan.peer_qpn;
    a.rq_psn = kPsn;
    a.sq_psn = kPsn;
    a.qp_access_flags = qp::QpAccess::kRemoteWrite | qp::QpAccess::kRemoteRead | qp::QpAccess::kRemoteAtomic;
    a.timeout = (flags_ & Flags::kNoTimeout) != 0 ? 0 : 10;  // 4.2 ms
    a.retry_cnt = (flags_ & Flags::kForever) != 0 ? 7 : 2;
    a.rnr_retry = (flags_ & Flags::kForever) != 0 ? 7 : 2;
    a.min_rnr_timer = 1;
    a.max_rd_atomic = 2;
    a.max_dest_rd_atomic = 2;
    a.qkey = kQkey;
    std::copy(kPeerGid4.begin(), kPeerGid4.end(), a.ah_attr.dgid.begin());
    a.ah_attr.is_global = true;
    a.ah_attr.hop_limit = 64;
    return a;
}

void Victim::to_rts(std::size_t i) { to_rts(kQps[i]); }

void Victim::to_rts(const QpPlan& plan) {
    constexpr std::uint32_t kAll = qp::AttrMask::kState | qp::AttrMask::kAv | qp::AttrMask::kPathMtu |
                                   qp::AttrMask::kDestQpn | qp::AttrMask::kRqPsn | qp::AttrMask::kSqPsn |
                                   qp::AttrMask::kAccessFlags | qp::AttrMask::kTimeout | qp::AttrMask::kRetryCnt |
                                   qp::AttrMask::kRnrRetry | qp::AttrMask::kMinRnrTimer |
                                   qp::AttrMask::kMaxQpRdAtomic | qp::AttrMask::kMaxDestRdAtomic |
                                   qp::AttrMask::kQkey;
    qp::QpAttr attr = rts_attr(plan);
    qp::QpAttr reset_attr = attr;
    reset_attr.state = qp::QpState::Reset;
    engine_->modify_qp(Qpn{plan.qpn}, reset_attr, qp::AttrMask::kState);
    engine_->modify_qp(Qpn{plan.qpn}, attr, kAll);
}

// XRC SRQ kXrcSrqFirst + k, empty but for two receive WQEs, in `domain`.
void Victim::add_xrc_srq(std::uint32_t k, std::uint32_t domain) {
    const std::uint32_t handle = kXrcSrqFirst + k;
    engine_->remove_srq(SrqHandle{handle});
    RingMemory& m = xrc_srq_mem_[k];
    uroce_wq_ring* h = m.wq();
    std::memset(reinterpret_cast<std::uint8_t*>(h + 1), 0, std::size_t{h->entries} * h->stride);
    h->producer = h->consumer = h->doorbell_armed = h->error = 0;
    engine_->add_srq(SrqHandle{handle}, ClientId{kOwner}, PdHandle{pd_},
                     engine::WorkRing(h, kSrqEntries, qps_[0].rq_stride, 4, 0), 0x5B00 + k, 0,
                     engine::XrcSrq{domain, CqHandle{kXrcSrqCq}});
    for (std::uint32_t n = 0; n < 2; ++n) {
        const Region& g = regions_[n];
        const uroce_sge sge{g.iova + 128 * (k + 1), 600, g.key};
        uroce_recv_wqe w{0x6000u + 16 * k + n, 1, 0};
        std::uint8_t* slot = next_slot(h);
        std::memcpy(slot, &w, sizeof w);
        std::memcpy(slot + sizeof w, &sge, sizeof sge);
        ++h->producer;
    }
}

// The XRC target as uroced makes it: no PD, CQ or rings of its own.
void Victim::add_xrc_tgt(std::uint32_t domain) {
    engine_->remove_qp(Qpn{kXrcTgt.qpn});
    engine::QpSetup s;
    s.qpn = kXrcTgt.qpn;
    s.owner = kOwner;
    s.type = kXrcTgt.type;
    s.xrc_domain = domain;
    s.cookie = 0xD6;
    engine_->add_qp(s);
    to_rts(kXrcTgt);
    xrc_tgt_domain_ = domain;
}

// XRC QPs that went to ERR come back to RTS.
void Victim::recover_xrc() {
    if (engine_->qp_state(Qpn{kXrcIni.qpn}) == qp::QpState::Err) {
        to_rts(kXrcIni);
    }
    if (xrc_tgt_domain_ != 0 && engine_->qp_state(Qpn{kXrcTgt.qpn}) == qp::QpState::Err) {
        to_rts(kXrcTgt);
    }
}

uroce_wq_ring* Victim::recv_ring(std::size_t i) { return kQps[i].srq ? srq_mem_.wq() : qps_[i].rq(); }

void Victim::post_standard_recvs(std::size_t i, std::uint32_t count) {
    uroce_wq_ring* ring = recv_ring(i);
    for (std::uint32_t n = 0; n < count; ++n) {
        if (ring->producer - ring->consumer >= ring->entries) {
            return;
        }
        // 600 bytes: a UD datagram's 40-byte GRH plus a 256-byte payload,
        // or a two-packet SEND.
        const Region& g = regions_[(ring->producer & 1) != 0 ? 1 : 0];
        const uroce_sge sge{g.iova + 64 * (ring->producer & 7), 600, g.key};
        uroce_recv_wqe w{0x5000u + ring->producer, 1, 0};
        std::uint8_t* slot = next_slot(ring);
        std::memcpy(slot, &w, sizeof w);
        std::memcpy(slot + sizeof w, &sge, sizeof sge);
        ++ring->producer;
    }
}

void Victim::teardown() {
    for (const QpPlan& plan : kQps) {
        engine_->remove_qp(Qpn{plan.qpn});
    }
    engine_->remove_srq(SrqHandle{kSrqHandle});
    engine_->remove_qp(Qpn{kXrcIni.qpn});
    engine_->remove_qp(Qpn{kXrcTgt.qpn});
    for (std::uint32_t k = 0; k < kXrcSrqCount; ++k) {
        engine_->remove_srq(SrqHandle{kXrcSrqFirst + k});
    }
    engine_->remove_cq(CqHandle{kXrcIniCq});
    engine_->remove_cq(CqHandle{kXrcSrqCq});
    for (std::size_t i = 0; i < kQpCount; ++i) {
        engine_->remove_cq(CqHandle{static_cast<std::uint32_t>(i + 1)});  // closes the channel's write end
        if (channel_read_[i] >= 0) {
            ::close(channel_read_[i]);
            channel_read_[i] = -1;
        }
    }
    sink_.frames.clear();
    // Unbind the window, whatever key byte the input bound it with (a
    // type 2 window's key changes with each bind).
    for (std::uint32_t b = 0; b < 256; ++b) {
        if (mrs_.invalidate(mr::make_key(mr::key_index(mw_key_), static_cast<std::uint8_t>(b)), pd_, std::nullopt) ==
            0) {
            break;
        }
    }
}

void Victim::setup(std::uint8_t flags) {
    flags_ = flags;
    cq_scribbled_ = false;
    now_ = Clock::time_point(std::chrono::hours(1));
    for (const Region& g : regions_) {
        g.for_each_readable(0, kRegionBytes, [&g](std::size_t from, std::size_t to) {
            std::memcpy(g.base + from, g.pristine.data() + from, to - from);
        });
    }
    auto clear_wq = [](RingMemory& m) {
        uroce_wq_ring* h = m.wq();
        std::memset(reinterpret_cast<std::uint8_t*>(h + 1), 0, std::size_t{h->entries} * h->stride);
        h->producer = h->consumer = h->doorbell_armed = h->error = 0;
    };
    clear_wq(srq_mem_);
    engine_->add_srq(SrqHandle{kSrqHandle}, ClientId{kOwner}, PdHandle{pd_},
                     engine::WorkRing(srq_mem_.wq(), kSrqEntries, qps_[0].rq_stride, 4, 0),
                     0x5A5A, (flags & Flags::kSrqLimit) != 0 ? 3 : 0);
    for (std::size_t i = 0; i < kQpCount; ++i) {
        TestQp& q = qps_[i];
        clear_wq(q.sq_mem);
        clear_wq(q.rq_mem);
        uroce_cq_ring* cq = q.cq();
        std::memset(reinterpret_cast<std::uint8_t*>(cq + 1), 0, std::size_t{q.cq_entries} * sizeof(uroce_cqe));
        cq->producer = cq->consumer = cq->notify_request = cq->overrun = 0;
        q.cq_consumer = 0;
        // Completion channels on half the CQs, so events are written too.
        int channel_write = -1;
        if (i % 2 == 0) {
            int fds[2];
            require(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
            channel_read_[i] = fds[0];
            channel_write = fds[1];
        }
        const std::uint32_t cq_handle = static_cast<std::uint32_t>(i + 1);
        engine_->add_cq(CqHandle{cq_handle}, ClientId{kOwner}, engine::CqRing(cq, q.cq_entries), channel_write,
                        0xC0 + i);
        engine::QpSetup s;
        s.qpn = kQps[i].qpn;
        s.owner = kOwner;
        s.pd = pd_;
        s.type = kQps[i].type;
        s.send_cq = cq_handle;
        s.recv_cq = cq_handle;
        s.srq = kQps[i].srq ? kSrqHandle : 0;
        s.cookie = 0xD0 + i;
        s.sq = engine::WorkRing(q.sq(), q.sq_entries, q.sq_stride, 4, 128);
        if (!kQps[i].srq) {
            s.rq = engine::WorkRing(q.rq(), q.rq_entries, q.rq_stride, 4, 0);
        }
        engine_->add_qp(s);
        to_rts(i);
        post_standard_recvs(i, 4);
    }
    // XRC: the initiator, the SRQs' CQ, the SRQs, the target.
    for (TestQp* q : {&xrc_ini_, &xrc_cq_}) {
        uroce_cq_ring* cq = q->cq();
        std::memset(reinterpret_cast<std::uint8_t*>(cq + 1), 0, std::size_t{q->cq_entries} * sizeof(uroce_cqe));
        cq->producer = cq->consumer = cq->notify_request = cq->overrun = 0;
        q->cq_consumer = 0;
    }
    clear_wq(xrc_ini_.sq_mem);
    engine_->add_cq(CqHandle{kXrcIniCq}, ClientId{kOwner}, engine::CqRing(xrc_ini_.cq(), xrc_ini_.cq_entries), -1,
                    0xC5);
    engine_->add_cq(CqHandle{kXrcSrqCq}, ClientId{kOwner}, engine::CqRing(xrc_cq_.cq(), xrc_cq_.cq_entries), -1, 0xC6);
    engine::QpSetup ini;
    ini.qpn = kXrcIni.qpn;
    ini.owner = kOwner;
    ini.pd = pd_;
    ini.type = kXrcIni.type;
    ini.send_cq = kXrcIniCq;
    ini.recv_cq = kXrcIniCq;
    ini.cookie = 0xD5;
    ini.sq = engine::WorkRing(xrc_ini_.sq(), xrc_ini_.sq_entries, xrc_ini_.sq_stride, 4, 128);
    engine_->add_qp(ini);
    to_rts(kXrcIni);
    const std::uint32_t last_domain = (flags & Flags::kXrcOneDomain) != 0 ? 1 : 2;
    for (std::uint32_t k = 0; k < kXrcSrqCount; ++k) {
        add_xrc_srq(k, k + 1 < kXrcSrqCount ? 1 : last_domain);
    }
    add_xrc_tgt(1);
}

// ---- choosers ----

std::uint32_t Victim::choose_key(Input& in) {
    const std::uint8_t sel = in.u8();
    const std::size_t n = regions_.size();
    if (sel % (n + 3) < n) {
        return regions_[sel % (n + 3)].key;
    }
    switch (sel % (n + 3) - n) {
        case 0:
            return (mw_key_ & ~0xFFu) | in.u8();  // the window, with a key byte from the input
        case 1:
            return in.u32();
        default:
            return regions_[in.u8() % n].key + 1;  // a stale key byte
    }
}

std::uint64_t Victim::choose_address(Input& in) {
    const std::uint8_t sel = in.u8();
    if (sel >= 240) {
        return in.u64();
    }
    const Region& g = regions_[sel % regions_.size()];
    switch (sel / regions_.size() % 3) {
        case 0:
            return g.iova + in.u16() % (g.mr_length + 64);
        case 1:
            return g.iova + static_cast<std::uint64_t>(static_cast<std::int16_t>(in.u16()));
        default:
            return g.iova + g.mr_length + static_cast<std::uint64_t>(static_cast<std::int8_t>(in.u8()));
    }
}

std::uint32_t Victim::choose_length(Input& in) {
    const std::uint8_t sel = in.u8();
    switch (sel % 4) {
        case 0:
            return in.u8();
        case 1:
        case 2:
            return in.u16() % 4096;
        default:
            return in.u32();
    }
}

wire::Psn Victim::choose_psn(Input& in, wire::Psn base) {
    const std::uint8_t sel = in.u8();
    const std::uint8_t off = in.u8();
    if (sel >= 250) {
        return wire::Psn(in.u32());
    }
    return base + static_cast<std::uint32_t>(static_cast<std::int32_t>(static_cast<std::int8_t>(off)));
}

// The SRQ number an XRC WQE or XRCETH names: one in the target's domain,
// one maybe in another, the ordinary SRQ, or one that does not exist.
std::uint32_t Victim::choose_xrc_srqn(Input& in) {
    const std::uint8_t sel = in.u8();
    switch (sel % 6) {
        case 0:
        case 1:
        case 2:
            return kXrcSrqFirst + sel % 6;
        case 3:
            return kSrqHandle;
        case 4:
            return kXrcSrqFirst + kXrcSrqCount;
        default:
            return in.u32();
    }
}

uroce_sge Victim::choose_sge(Input& in) {
    uroce_sge s{};
    s.addr = choose_address(in);
    s.length = choose_length(in);
    s.lkey = choose_key(in);
    return s;
}

// ---- frames in ----

void Victim::fix_icrc(std::span<std::uint8_t> frame, const wire::Packet& p) {
    if (p.ipv4() != nullptr) {
        auto* v4 = reinterpret_cast<wire::Ipv4Hdr*>(frame.data() + p.l3_offset());
        v4->checksum.set(wire::ipv4_header_checksum(*v4));
    }
    const std::uint32_t icrc =
        wire::icrc_compute(p.ip_version(), frame.subspan(p.l3_offset(), p.icrc_offset() - p.l3_offset()));
    wire::icrc_store(frame.data() + p.icrc_offset(), icrc);
}

void Victim::aim(std::span<std::uint8_t> frame, const wire::Packet& p, std::uint32_t qpn, bool swap_addresses) {
    std::uint8_t* l3 = frame.data() + p.l3_offset();
    if (p.ipv4() != nullptr) {
        auto* v4 = reinterpret_cast<wire::Ipv4Hdr*>(l3);
        if (swap_addresses) {
            std::swap(v4->src, v4->dst);
        } else {
            std::copy_n(kPeerGid4.begin() + 12, 4, v4->src.begin());
            std::copy_n(kVictimGid4.begin() + 12, 4, v4->dst.begin());
        }
    } else {
        auto* v6 = reinterpret_cast<wire::Ipv6Hdr*>(l3);
        if (swap_addresses) {
            std::swap(v6->src, v6->dst);
        } else {
            v6->src = kPeerGid6;
            v6->dst = kVictimGid6;
        }
    }
    reinterpret_cast<wire::Bth*>(frame.data() + p.bth_offset())->dest_qp.set(qpn);
    fix_icrc(frame, p);
}

void Victim::deliver(std::span<const std::uint8_t> frame) {
    const wire::ParseResult r = wire::parse_frame(frame);
    if (r.ok()) {
        engine_->receive(r.packet, now_);
    }
}

void Victim::deliver_built(wire::PacketFields& f) {
    const wire::BuildResult b = wire::build_frame(f, frame_buffer_);
    if (b.status == wire::BuildStatus::Ok) {
        deliver(std::span<const std::uint8_t>(frame_buffer_.data(), b.length));
    }
}

void Victim::op_raw_frame(Input& in) {
    const std::uint8_t how = in.u8();
    const std::size_t len = in.u16() % 4200;
    const auto bytes = in.bytes(len);
    std::vector<std::uint8_t> frame(bytes.begin(), bytes.end());
    const wire::ParseResult r = wire::parse_frame(frame);
    if (!r.ok()) {
        return;
    }
    // bit 0: leave it exactly as it came (ICRC and all); bit 1: aim it at a
    // victim QP from the peer; bits 2-3: which QP.
    if ((how & 1) == 0) {
        if ((how & 2) != 0) {
            aim(frame, r.packet, kQps[(how >> 2) % kQpCount].qpn, false);
        } else {
            fix_icrc(frame, r.packet);
        }
    }
    deliver(frame);
}

void Victim::op_request(Input& in) { request(in, false); }

// A request field by field; `xrc`: an XRC one to the XRC target (or, for
// target selector 3, to the initiator, which has no responder).
void Victim::request(Input& in, bool xrc) {
    static constexpr std::array<std::uint8_t, 20> kRcCodes = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
                                                              0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x13,
                                                              0x14, 0x16, 0x17, 0x11, 0x10, 0x81};
    const std::uint8_t target = in.u8();
    const std::uint8_t code_sel = in.u8();
    const std::uint8_t bits = in.u8();
    const std::size_t i = target % kQpCount;
    const QpPlan& plan = !xrc ? kQps[i] : i == 3 ? kXrcIni : kXrcTgt;
    const engine::QueuePair* qp = engine_->find_qp(Qpn{plan.qpn});
    require(qp != nullptr || plan.qpn == kXrcTgt.qpn);  // the XRC target may have been removed
    const wire::Psn epsn = qp != nullptr ? qp->epsn : wire::Psn(kPsn);

    wire::PacketFields f;
    f.eth.dst = kVictimMac;
    f.eth.src = kPeerMac;
    const bool v6 = (target & 0x04) != 0;
    f.ip.version = v6 ? wire::IpVersion::V6 : wire::IpVersion::V4;
    f.ip.src = v6 ? kPeerGid6 : kPeerGid4;
    f.ip.dst = v6 ? kVictimGid6 : kVictimGid4;
    if ((target & 0x08) != 0) {
        f.ip.src[15] = in.u8();  // someone other than the connected peer
    }
    // The opcode: one of the QP's transport, or (bit 4) of another one.
    std::uint8_t code = kRcCodes[code_sel % kRcCodes.size()];
    std::uint8_t transport = plan.type == qp::QpType::Rc   ? 0x00
                             : plan.type == qp::QpType::Uc ? 0x20
                             : xrc                         ? 0xA0
                                                           : 0x60;
    if ((target & 0x10) != 0) {
        transport = static_cast<std::uint8_t>((code_sel >> 5) << 5);
    }
    if (plan.type == qp::QpType::Ud && (target & 0x10) == 0) {
        code = (code_sel & 1) != 0 ? 0x05 : 0x04;
    }
    f.bth.opcode = code == 0x81 ? code : static_cast<std::uint8_t>(transport | code);
    f.bth.solicited = (bits & 0x01) != 0;
    f.bth.ack_req = (bits & 0x02) != 0;
    f.bth.mig_req = (bits & 0x04) != 0;
    f.bth.pkey = (bits & 0x08) != 0 ? in.u16() : 0xFFFF;
    f.bth.resv8a = (bits & 0x10) != 0 ? 0xC0 : 0;  // FECN/BECN
    f.bth.dest_qp = (target & 0x20) != 0 ? in.u32() : plan.qpn;
    f.bth.psn = choose_psn(in, epsn);
    f.ext.reth.va = choose_address(in);
    f.ext.reth.rkey = choose_key(in);
    f.ext.reth.dma_length = choose_length(in);
    f.ext.atomic_eth.va = choose_address(in);
    f.ext.atomic_eth.rkey = choose_key(in);
    f.ext.atomic_eth.swap_add = in.u64();
    f.ext.atomic_eth.compare = in.u64();
    f.ext.immediate = in.u32();
    f.ext.invalidate_rkey = choose_key(in);
    f.ext.deth.qkey = (bits & 0x20) != 0 ? in.u32() : kQkey;
    f.ext.deth.src_qp = in.u32() & qp::kQpnMask;
    f.ext.aeth.syndrome = in.u8();
    f.ext.aeth.msn = in.u32();
    // Payload: an exact MTU (FIRST, MIDDLE), or any length up to a few MTUs.
    const std::uint16_t len_sel = in.u16();
    const std::uint32_t mtu = qp != nullptr ? qp->mtu : 256;
    std::size_t len = (len_sel & 0x8000) != 0 ? mtu : len_sel % (mtu + 300);
    if (!wire::opcode_info(f.bth.opcode).payload_allowed) {
        len = 0;
    }
    // RDMA WRITE ONLY: the DMA length agrees with the payload unless asked otherwise.
    const wire::OpcodeInfo& info = wire::opcode_info(f.bth.opcode);
    if ((bits & 0x40) == 0 && info.operation == wire::Operation::RdmaWrite && info.segment == wire::Segment::Only) {
        f.ext.reth.dma_length = static_cast<std::uint32_t>(len);
    }
    const std::uint8_t fill = in.u8();
    for (std::size_t b = 0; b < len; ++b) {
        payload_buffer_[b] = static_cast<std::uint8_t>(fill + b);
    }
    f.payload = std::span<const std::uint8_t>(payload_buffer_.data(), len);
    if (xrc) {
        f.ext.xrc_srq = choose_xrc_srqn(in) & 0xFFFFFF;  // XRCETH: 24 bits
    }
    deliver_built(f);
}

void Victim::op_response(Input& in) {
    static constexpr std::array<std::uint8_t, 6> kCodes = {0x11, 0x12, 0x0D, 0x0E, 0x0F, 0x10};
    const std::uint8_t target = in.u8();
    const std::uint8_t code_sel = in.u8();
    const std::size_t i = (target & 1) != 0 ? 3 : 0;  // the two RC QPs
    const engine::QueuePair* qp = engine_->find_qp(Qpn{kQps[i].qpn});
    require(qp != nullptr);

    wire::PacketFields f;
    f.eth.dst = kVictimMac;
    f.eth.src = kPeerMac;
    f.ip.src = kPeerGid4;
    f.ip.dst = kVictimGid4;
    f.bth.opcode = kCodes[code_sel % kCodes.size()];
    f.bth.dest_qp = (target & 0x02) != 0 ? in.u32() : kQps[i].qpn;
    // PSNs around the oldest unacknowledged one, or the last one sent.
    f.bth.psn = choose_psn(in, (target & 0x04) != 0 ? qp->next_psn - 1 : qp->unacked);
    const std::uint8_t syndrome_sel = in.u8();
    const std::uint8_t value = in.u8();
    switch (syndrome_sel % 4) {
        case 0:
            f.ext.aeth.syndrome = wire::make_syndrome(wire::AckKind::Ack, 0x1F);
            break;
        case 1:
            f.ext.aeth.syndrome = wire::make_syndrome(wire::AckKind::RnrNak, value & 0x1F);
            break;
        case 2:
            f.ext.aeth.syndrome = wire::make_syndrome(wire::AckKind::Nak, value % 5);
            break;
        default:
            f.ext.aeth.syndrome = value;
            break;
    }
    f.ext.aeth.msn = in.u32();
    f.ext.atomic_ack_original = in.u64();
    const std::uint16_t len_sel = in.u16();
    std::size_t len = (len_sel & 0x8000) != 0 ? qp->mtu : len_sel % (qp->mtu + 64);
    if (!wire::opcode_info(f.bth.opcode).payload_allowed) {
        len = 0;
    }
    const std::uint8_t fill = in.u8();
    for (std::size_t b = 0; b < len; ++b) {
        payload_buffer_[b] = static_cast<std::uint8_t>(fill ^ b);
    }
    f.payload = std::span<const std::uint8_t>(payload_buffer_.data(), len);
    deliver_built(f);
}

// ---- the client's side of the rings ----

void Victim::op_post_send(Input& in) {
    const std::uint8_t target = in.u8();
    post_send(in, qps_[target % kQpCount], kQps[target % kQpCount].type, 0);
}

void Victim::op_xrc_post_send(Input& in) {
    const std::uint32_t srqn = choose_xrc_srqn(in);
    post_send(in, xrc_ini_, kXrcIni.type, srqn);
}

// Any WQE the provider's ibv_post_send and ibv_wr_* paths write (every
// opcode, inline or gathered), fields from the input.
void Victim::post_send(Input& in, TestQp& q, qp::QpType type, std::uint32_t xrc_srqn) {
    uroce_send_wqe w{};
    w.xrc_remote_srqn = xrc_srqn;
    w.wr_id = 0x1000u + in.u8();
    const std::uint8_t op = in.u8();
    w.opcode = op < 250 ? static_cast<std::uint8_t>(op % engine::kWrOpcodeLimit) : op;
    w.send_flags = in.u8() & 0x0F;
    w.num_sge = static_cast<std::uint8_t>(in.u8() % 6);
    w.imm_data = in.u32();
    w.inline_len = in.u8();
    switch (static_cast<engine::WrOpcode>(w.opcode)) {
        case engine::WrOpcode::AtomicCmpAndSwp:
        case engine::WrOpcode::AtomicFetchAndAdd:
            w.u.atomic.remote_addr = choose_address(in);
            w.u.atomic.rkey = choose_key(in);
            w.u.atomic.compare_add = in.u64();
            w.u.atomic.swap = in.u64();
            break;
        case engine::WrOpcode::BindMw:
            w.u.bind.addr = choose_address(in);
            w.u.bind.length = choose_length(in);
            w.u.bind.mw_rkey = (mw_key_ & ~0xFFu) | in.u8();
            w.u.bind.mr_lkey = choose_key(in);
            w.u.bind.access = in.u8() & 0x0F;
            break;
        case engine::WrOpcode::LocalInv:
        case engine::WrOpcode::SendWithInv:
            w.imm_data = choose_key(in);
            break;
        default:
            if (type == qp::QpType::Ud) {
                w.u.ud.ah = in.u8() % (kAhCount + 2);
                w.u.ud.remote_qpn = (in.u8() & 1) != 0 ? in.u32() : kQps[2].qpn;
                w.u.ud.remote_qkey = (in.u8() & 1) != 0 ? in.u32() : kQkey;
            } else {
                w.u.rdma.remote_addr = choose_address(in);
                w.u.rdma.rkey = choose_key(in);
            }
            break;
    }
    std::array<uroce_sge, 5> sges{};
    for (std::size_t s = 0; s < w.num_sge; ++s) {
        sges[s] = choose_sge(in);
    }
    // A well-behaved client: never more WQEs outstanding than the ring holds.
    uroce_wq_ring* h = q.sq();
    if (h->producer - h->consumer >= h->entries) {
        return;
    }
    std::uint8_t* slot = next_slot(h);
    std::memcpy(slot, &w, sizeof w);
    const std::size_t body = h->stride - sizeof w;
    if ((w.send_flags & engine::SendFlag::kInline) != 0) {
        for (std::size_t b = 0; b < std::min<std::size_t>(w.inline_len, body); ++b) {
            slot[sizeof w + b] = static_cast<std::uint8_t>(w.wr_id + b);
        }
    } else {
        std::memcpy(slot + sizeof w, sges.data(), std::min(body, w.num_sge * sizeof(uroce_sge)));
    }
    ++h->producer;
}

void Victim::op_garbage(Input& in) {
    const std::uint8_t what = in.u8();
    const std::size_t i = (what >> 3) % kQpCount;
    TestQp& q = qps_[i];
    auto scribble_slot = [&in](uroce_wq_ring* h) {
        std::uint8_t* slot = next_slot(h);
        const auto bytes = in.bytes(h->stride);
        std::copy(bytes.begin(), bytes.end(), slot);
        ++h->producer;
    };
    switch (what % 8) {
        case 0:
            scribble_slot(q.sq());
            break;
        case 1:
            scribble_slot(recv_ring(i));
            break;
        case 2:
            q.sq()->producer = in.u32();
            break;
        case 3:
            recv_ring(i)->producer = in.u32();
            break;
        case 4:
            q.cq()->consumer = in.u32();
            cq_scribbled_ = true;  // the client broke its own CQ: no promise left to check
            break;
        case 5:
            q.cq()->notify_request = in.u32();
            break;
        case 6:
            q.sq()->consumer = in.u32();  // the daemon's index: it must not trust it
            break;
        default:
            recv_ring(i)->consumer = in.u32();
            break;
    }
}

void Victim::op_post_recv(Input& in) {
    const std::size_t i = in.u8() % kQpCount;
    post_recvs(in, recv_ring(i));
}

void Victim::post_recvs(Input& in, uroce_wq_ring* h) {
    const std::uint8_t count = in.u8() % 5;
    for (std::uint8_t n = 0; n < count; ++n) {
        uroce_recv_wqe w{0x2000u + n, static_cast<std::uint32_t>(in.u8() % 6), 0};
        std::array<uroce_sge, 5> sges{};
        for (std::size_t s = 0; s < w.num_sge; ++s) {
            sges[s] = choose_sge(in);
        }
        if (h->producer - h->consumer >= h->entries) {
            return;
        }
        std::uint8_t* slot = next_slot(h);
        std::memcpy(slot, &w, sizeof w);
        const std::size_t body = h->stride - sizeof w;
        std::memcpy(slot + sizeof w, sges.data(), std::min<std::size_t>(body, w.num_sge * sizeof(uroce_sge)));
        ++h->producer;
    }
}

void Victim::op_clock(Input& in) {
    // 0: to the engine's next timer; else up to 3.3 s, past the 4.2 ms ACK
    // timeout and the longest RNR wait (655 ms).
    const std::uint16_t ticks = in.u16();
    if (ticks == 0) {
        now_ = std::max(now_, engine_->next_deadline().value_or(now_));
    } else {
        now_ += std::chrono::microseconds(std::uint64_t{ticks} * 50);
    }
}

void Victim::op_modify(Input& in) {
    const std::uint8_t sel = in.u8();
    const std::size_t i = (sel >> 2) % kQpCount;
    qp::QpAttr attr = rts_attr(i);
    switch (sel % 4) {
        case 0:
            to_rts(i);
            post_standard_recvs(i, 2);
            return;
        case 1:
            attr.state = qp::QpState::Err;
            break;
        case 2:
            attr.state = qp::QpState::Sqd;
            break;
        default:
            // RTS to RTS may change the remote rights the QP grants.
            attr.state = qp::QpState::Rts;
            attr.qp_access_flags = in.u8() & qp::QpAccess::kAllowed;
            engine_->modify_qp(Qpn{kQps[i].qpn}, attr, qp::AttrMask::kState | qp::AttrMask::kAccessFlags);
            return;
    }
    engine_->modify_qp(Qpn{kQps[i].qpn}, attr, qp::AttrMask::kState);
}

void Victim::op_echo(Input& in) {
    const std::uint8_t how = in.u8();
    auto map_qpn = [](std::uint32_t qpn) {
        for (const QpPlan& plan : kQps) {
            if (qpn == plan.peer_qpn) {
                return plan.qpn;
            }
        }
        return qpn;  // UD sends already name the victim's QP when the WQE did
    };
    if ((how & 0x80) == 0) {
        // Everything sent so far comes back, in order, as if the peer were
        // the victim itself.
        auto frames = std::move(sink_.frames);
        sink_.frames.clear();
        for (auto& frame : frames) {
            const wire::ParseResult r = wire::parse_frame(frame);
            require(r.ok());
            aim(frame, r.packet, map_qpn(r.packet.dest_qp()), true);
            deliver(frame);
        }
        return;
    }
    // One of them, with one byte changed (ICRC fixed unless bit 6).
    if (sink_.frames.empty()) {
        return;
    }
    std::vector<std::uint8_t> frame = sink_.frames[in.u8() % sink_.frames.size()];
    const std::uint16_t at = in.u16();
    const std::uint8_t x = in.u8();
    wire::ParseResult r = wire::parse_frame(frame);
    require(r.ok());
    aim(frame, r.packet, map_qpn(r.packet.dest_qp()), true);
    frame[at % frame.size()] ^= x;
    r = wire::parse_frame(frame);
    if (!r.ok()) {
        return;
    }
    if ((how & 0x40) == 0) {
        fix_icrc(frame, r.packet);
    }
    deliver(frame);
}

// The selector byte: bits 0-2 what, bits 3-4 which XRC SRQ, bit 6 the
// target rather than the initiator, bit 7 domain 2 (or SQD rather than ERR).
void Victim::op_xrc_objects(Input& in) {
    const std::uint8_t sel = in.u8();
    const std::uint32_t k = ((sel >> 3) & 3) % kXrcSrqCount;
    const std::uint32_t domain = (sel & 0x80) != 0 ? 2 : 1;
    switch (sel & 7) {
        case 0:  // re-created, empty but for two WQEs, perhaps in the other domain
            add_xrc_srq(k, domain);
            break;
        case 1:  // destroyed, maybe under a message in flight
            engine_->remove_srq(SrqHandle{kXrcSrqFirst + k});
            break;
        case 2:  // the target re-created, perhaps in the other domain
            add_xrc_tgt(domain);
            break;
        case 3:  // the target destroyed
            engine_->remove_qp(Qpn{kXrcTgt.qpn});
            xrc_tgt_domain_ = 0;
            break;
        case 4:  // receive WQEs into an XRC SRQ
            post_recvs(in, xrc_srq_mem_[k].wq());
            break;
        case 5: {  // the initiator or the target to ERR or SQD
            const QpPlan& plan = (sel & 0x40) != 0 ? kXrcTgt : kXrcIni;
            qp::QpAttr attr = rts_attr(plan);
            attr.state = (sel & 0x80) != 0 ? qp::QpState::Sqd : qp::QpState::Err;
            engine_->modify_qp(Qpn{plan.qpn}, attr, qp::AttrMask::kState);
            break;
        }
        case 6: {  // raw bytes as the initiator's next WQE
            uroce_wq_ring* h = xrc_ini_.sq();
            std::uint8_t* slot = next_slot(h);
            const auto bytes = in.bytes(h->stride);
            std::copy(bytes.begin(), bytes.end(), slot);
            ++h->producer;
            break;
        }
        default:  // the initiator's producer index overwritten
            xrc_ini_.sq()->producer = in.u32();
            break;
    }
}

// ---- after each operation ----

void Victim::settle() {
    // A few rounds, so responses, timers and flushes run.
    for (int round = 0; round < 4; ++round) {
        if (!engine_->poll(now_)) {
            break;
        }
    }
    now_ += std::chrono::microseconds(10);
    engine_->arm_doorbells();  // as the daemon does before it sleeps
    for (int fd : channel_read_) {
        if (fd >= 0) {
            std::array<std::uint8_t, 512> drain;
            while (::read(fd, drain.data(), drain.size()) > 0) {
            }
        }
    }
    check();
    for (TestQp& q : qps_) {
        settle_cq(q);
    }
    settle_cq(xrc_ini_);
    settle_cq(xrc_cq_);
    if (kTrace) {
        const engine::EngineCounters& c = engine_->counters();
        std::fprintf(stderr,
                     "  rx %" PRIu64 " tx %" PRIu64 " dropped %" PRIu64 " retransmits %" PRIu64 " timeouts %" PRIu64
                     " rnr %" PRIu64 "/%" PRIu64 " seq %" PRIu64 "/%" PRIu64 " dup %" PRIu64 " bad_wqes %" PRIu64
                     " overruns %" PRIu64 "\n",
                     c.rx_packets, c.tx_packets, c.rx_dropped, c.retransmits, c.timeouts, c.rnr_naks_sent,
                     c.rnr_naks_received, c.seq_naks_sent, c.seq_naks_received, c.duplicates, c.bad_wqes,
                     c.cq_overruns);
        std::fprintf(stderr, "  qp states");
        for (const QpPlan& plan : kQps) {
            const auto state = engine_->qp_state(Qpn{plan.qpn});
            std::fprintf(stderr, " %#x:%d", plan.qpn, state ? static_cast<int>(*state) : -1);
        }
        for (const QpPlan* plan : {&kXrcIni, &kXrcTgt}) {
            const auto state = engine_->qp_state(Qpn{plan->qpn});
            std::fprintf(stderr, " %#x:%d", plan->qpn, state ? static_cast<int>(*state) : -1);
        }
        std::fprintf(stderr, "\n");
    }
    if ((flags_ & Flags::kNoRecover) == 0) {
        for (std::size_t i = 0; i < kQpCount; ++i) {
            if (engine_->qp_state(Qpn{kQps[i].qpn}) == qp::QpState::Err) {
                to_rts(i);
                post_standard_recvs(i, 2);
            }
        }
        recover_xrc();
    }
}

// A CQ's promises: never more than `entries` ahead of the consumer, and
// every CQE from one of the victim's QPs with a known status and opcode.
void Victim::settle_cq(TestQp& q) {
    const std::uint32_t produced = q.cq()->producer;
    if (!cq_scribbled_) {
        require(produced - q.cq_consumer <= q.cq_entries);
    }
    if ((flags_ & Flags::kNoDrain) != 0) {
        return;
    }
    for (const uroce_cqe& e : q.poll()) {
        if (kTrace) {
            std::fprintf(stderr, "  cqe qp %#x wr_id %#" PRIx64 " status %u opcode %u len %u\n", e.qp_num, e.wr_id,
                         e.status, e.opcode, e.byte_len);
        }
        const bool ours = std::any_of(kQps.begin(), kQps.end(), [&e](const QpPlan& p) { return p.qpn == e.qp_num; }) ||
                          e.qp_num == kXrcIni.qpn || e.qp_num == kXrcTgt.qpn;
        require(ours || cq_scribbled_);
        require(e.status <= 21 || cq_scribbled_);  // IBV_WC_GENERAL_ERR is the last status
        require(e.opcode <= 6 || e.opcode == 128 || e.opcode == 129 || cq_scribbled_);
    }
}

void Victim::check() {
    for (const Region& g : regions_) {
        auto unchanged = [&g](std::size_t from, std::size_t to) {
            require(std::memcmp(g.base + from, g.pristine.data() + from, to - from) == 0);
        };
        const std::size_t mr_end = g.mr_offset + g.mr_length;
        g.for_each_readable(0, g.mr_offset, unchanged);
        g.for_each_readable(mr_end, kRegionBytes, unchanged);
        if (g.frozen) {
            g.for_each_readable(g.mr_offset, mr_end, unchanged);
        }
    }
}

void Victim::run(Input& in) {
    setup(in.u8());
    // Bounded, so one input cannot run for long.
    for (int n = 0; n < 256 && !in.empty(); ++n) {
        const auto op = static_cast<Op>(in.u8() % static_cast<std::uint8_t>(Op::Count));
        if (kTrace) {
            std::fprintf(stderr, "op %d\n", static_cast<int>(op));
        }
        switch (op) {
            case Op::RawFrame:
                op_raw_frame(in);
                break;
            case Op::Request:
                op_request(in);
                break;
            case Op::Response:
                op_response(in);
                break;
            case Op::PostSend:
                op_post_send(in);
                break;
            case Op::Garbage:
                op_garbage(in);
                break;
            case Op::PostRecv:
                op_post_recv(in);
                break;
            case Op::Clock:
                op_clock(in);
                break;
            case Op::Modify:
                op_modify(in);
                break;
            case Op::Echo:
                op_echo(in);
                break;
            case Op::XrcPostSend:
                op_xrc_post_send(in);
                break;
            case Op::XrcRequest:
                op_xrc_request(in);
                break;
            case Op::XrcObjects:
                op_xrc_objects(in);
                break;
            case Op::Count:
                break;
        }
        settle();
    }
    teardown();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static Victim* victim = new Victim();  // lives for the process: the MR table and mappings are set up once
    Input in(data, size);
    victim->run(in);
    return 0;
}
