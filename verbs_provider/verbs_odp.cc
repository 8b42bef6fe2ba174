// On-demand paging: the capabilities query_device_ex reports, and
// ibv_advise_mr(3).
//
// uroced reaches a client's memory through its /proc/PID/mem (or a shared
// mapping) at the moment of each access and checks an on-demand MR's pages
// then (emulator/mr/mr_check.cc), so nothing is pinned at registration: an
// IBV_ACCESS_ON_DEMAND MR works for every operation of every transport, and
// so does an implicit one (addr 0, length SIZE_MAX). ibv_advise_mr checks
// each SGE with the daemon (ADVISE_MR: an on-demand MR of this PD, writable
// for PREFETCH_WRITE, the range inside it) and then faults the pages in
// here, in the process that owns them, with MADV_POPULATE_READ/WRITE.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "provider.h"

namespace uroce::provider {
namespace {

// What every transport does with on-demand memory: its own operations
// (UC has no READ or atomics, UD only SENDs) and receives through an SRQ.
constexpr std::uint32_t kRcOdpCaps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                                     IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
constexpr std::uint32_t kUcOdpCaps =
    IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV;
constexpr std::uint32_t kUdOdpCaps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;

enum class Fault : std::uint8_t { Read, Write, None };

struct Prefetch {
    std::uint64_t host;
    std::uint32_t length;
};

// One SGE checked by the daemon: 0 and its client address, or an errno.
int check_sge(ibv_pd* pd, const ibv_sge& sge, Fault fault, Prefetch& out) {
    auto req = request<uroce_ctrl_advise_mr>(UROCE_CTRL_ADVISE_MR);
    req.pd = pd->handle;
    req.lkey = sge.lkey;
    req.addr = sge.addr;
    req.length = sge.length;
    req.write = fault == Fault::Write ? 1 : 0;
    uroce_ctrl_advise_mr_reply reply{};
    if (const int err = link_of(pd->context).call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        return err;
    }
    out = Prefetch{reply.host_addr, sge.length};
    return 0;
}

// Faults the whole pages under [host, host + length) in, as a write would
// when `fault` is Write (without writing anything).
int populate(const Prefetch& p, Fault fault) {
    if (p.length == 0 || fault == Fault::None) {
        return 0;
    }
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t start = p.host & ~(page - 1);
    const std::uint64_t end = (p.host + p.length + page - 1) & ~(page - 1);
    const int advice = fault == Fault::Write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the client's own address
    return ::madvise(reinterpret_cast<void*>(start), end - start, advice) == 0 ? 0 : EFAULT;
}

}  // namespace

void report_odp_caps(ibv_device_attr_ex& attr) {
    attr.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
    attr.odp_caps.per_transport_caps.rc_odp_caps = kRcOdpCaps;
    attr.odp_caps.per_transport_caps.uc_odp_caps = kUcOdpCaps;
    attr.odp_caps.per_transport_caps.ud_odp_caps = kUdOdpCaps;
}

int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* sg_list,
              std::uint32_t num_sge) {
    Fault fault = Fault::Read;
    switch (advice) {
        case IBV_ADVISE_MR_ADVICE_PREFETCH:
            break;
        case IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE:
            fault = Fault::Write;
            break;
        case IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT:
            fault = Fault::None;  // map what is present: nothing to do here
            break;
        default:
            return EOPNOTSUPP;  // as mlx5
    }
    // The kernel's uverbs layer: unknown flags and an empty list are EINVAL.
    if ((flags & ~static_cast<std::uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) != 0 || num_sge == 0 || sg_list == nullptr) {
        return EINVAL;
    }
    // Without FLUSH the prefetch is a hint done in the background on mlx5:
    // only the lkeys are judged, and a range it cannot fault is no error.
    // With FLUSH it is done before returning, and every failure counts.
    const bool flush = (flags & IBV_ADVISE_MR_FLAG_FLUSH) != 0;
    std::vector<Prefetch> ranges;
    ranges.reserve(num_sge);
    for (std::uint32_t i = 0; i < num_sge; ++i) {
        Prefetch p{};
        const int err = check_sge(pd, sg_list[i], fault, p);
        if (err == EFAULT && !flush) {
            continue;
        }
        if (err != 0) {
            return err;
        }
        ranges.push_back(p);
    }
    for (const Prefetch& p : ranges) {
        if (const int err = populate(p, fault); err != 0 && flush) {
            return err;
        }
    }
    return 0;
}

}  // namespace uroce::provider
