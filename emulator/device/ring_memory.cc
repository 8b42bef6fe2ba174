#include "ring_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <utility>

namespace uroce::device {

namespace {

// The size can neither shrink nor grow, and no one can lift the seals.
constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

constexpr std::uint32_t round_up(std::uint32_t v, std::uint32_t multiple) {
    return (v + multiple - 1) / multiple * multiple;
}

}  // namespace

std::uint32_t ring_entries(std::uint32_t asked) {
    if (asked > kMaxRingEntries) {
        return 0;
    }
    return std::bit_ceil(std::max(asked, 1u));
}

std::uint32_t sq_stride(std::uint32_t max_send_sge, std::uint32_t max_inline) {
    const std::uint32_t sges = max_send_sge * static_cast<std::uint32_t>(sizeof(uroce_sge));
    const std::uint32_t payload = std::max(sges, round_up(max_inline, 16));
    return round_up(static_cast<std::uint32_t>(sizeof(uroce_send_wqe)) + payload, 64);
}

std::uint32_t rq_stride(std::uint32_t max_sge) {
    return static_cast<std::uint32_t>(sizeof(uroce_recv_wqe)) +
           std::max(max_sge, 1u) * static_cast<std::uint32_t>(sizeof(uroce_sge));
}

WqGeometry sq_geometry(std::uint32_t max_send_wr, std::uint32_t max_send_sge, std::uint32_t max_inline) {
    return {ring_entries(max_send_wr), sq_stride(max_send_sge, max_inline), max_send_sge, max_inline};
}

WqGeometry rq_geometry(std::uint32_t max_recv_wr, std::uint32_t max_recv_sge) {
    return {ring_entries(max_recv_wr), rq_stride(max_recv_sge), max_recv_sge, 0};
}

std::size_t cq_ring_bytes(std::uint32_t entries) {
    return sizeof(uroce_cq_ring) + std::size_t{entries} * UROCE_CQE_BYTES;
}

void init_wq_ring(uroce_wq_ring& header, const WqGeometry& g) {
    header = uroce_wq_ring{};
    header.version = UROCE_RING_VERSION;
    header.entries = g.entries;
    header.stride = g.stride;
    header.max_sge = g.max_sge;
    header.max_inline = g.max_inline;
}

void init_cq_ring(uroce_cq_ring& header, std::uint32_t entries) {
    header = uroce_cq_ring{};
    header.version = UROCE_RING_VERSION;
    header.entries = entries;
}

RingMemory::~RingMemory() { reset(); }

RingMemory::RingMemory(RingMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::move(other.fd_)) {}

RingMemory& RingMemory::operator=(RingMemory&& other) noexcept {
    if (this != &other) {
        reset();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        fd_ = std::move(other.fd_);
    }
    return *this;
}

void RingMemory::reset() {
    if (data_ != nullptr) {
        ::munmap(data_, size_);
        data_ = nullptr;
        size_ = 0;
    }
    fd_.reset();
}

int RingMemory::create(const char* name, std::size_t size, RingMemory& out) {
    out.reset();
    if (size == 0) {
        return EINVAL;
    }
    UniqueFd owned(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));  // closed on every failure below
    const int fd = owned.get();
    if (!owned.valid()) {
        return errno;
    }
    // The client gets this memfd: sealed, its size is fixed for good, so no
    // ftruncate of the client's can turn the daemon's next access into a
    // SIGBUS (memfd_create(2), "File sealing").
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0 || ::fcntl(fd, F_ADD_SEALS, kSizeSeals) != 0) {
        return errno;
    }
    void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
        return errno;
    }
    out.data_ = static_cast<std::uint8_t*>(mem);
    out.size_ = size;
    out.fd_ = std::move(owned);
    return 0;
}

int RingMemory::dup_fd() const {
    if (!fd_.valid()) {
        errno = EBADF;
        return -1;
    }
    return ::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0);
}

int RingMemory::release_fd() { return fd_.release(); }

}  // namespace uroce::device
