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
      fd_(std::exchange(other.fd_, -1)) {}

RingMemory& RingMemory::operator=(RingMemory&& other) noexcept {
    if (this != &other) {
        reset();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

void RingMemory::reset() {
    if (data_ != nullptr) {
        ::munmap(data_, size_);
        data_ = nullptr;
        size_ = 0;
    }
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

int RingMemory::create(const char* name, std::size_t size, RingMemory& out) {
    out.reset();
    if (size == 0) {
        return EINVAL;
    }
    const int fd = ::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        return errno;
    }
    // Sealed at its size: a client that truncated the file would make the
    // daemon's next touch of the ring a SIGBUS (found by fuzz_control).
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0 ||
        ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        const int err = errno;
        ::close(fd);
        return err;
    }
    void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        return err;
    }
    out.data_ = static_cast<std::uint8_t*>(mem);
    out.size_ = size;
    out.fd_ = fd;
    return 0;
}

int RingMemory::dup_fd() const {
    if (fd_ < 0) {
        errno = EBADF;
        return -1;
    }
    return ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
}

int RingMemory::release_fd() { return std::exchange(fd_, -1); }

}  // namespace uroce::device
