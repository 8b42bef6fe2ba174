#include "memif_peer_wake.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace uroce::port {

namespace {

// How often a sender without its peer's page looks for it again: the peer
// starts within this of its memif connecting, and the look is an open().
constexpr std::chrono::milliseconds kPeerLookInterval{20};

constexpr std::size_t kPageBytes = 4096;
static_assert(sizeof(MemifWakePage) <= kPageBytes);
// Two processes share the page: its atomics must be plain memory, no locks.
static_assert(std::atomic<std::uint32_t>::is_always_lock_free && std::atomic<std::uint64_t>::is_always_lock_free);

const char* role_name(MemifRole role) { return role == MemifRole::Server ? "server" : "client"; }

MemifRole other(MemifRole role) { return role == MemifRole::Server ? MemifRole::Client : MemifRole::Server; }

std::system_error os_error(const std::string& what) {
    return std::system_error(errno, std::generic_category(), what);
}

// Opens (creating it if need be) and maps a page file. The file is kept as
// it is when it exists: a peer may have it mapped.
MemifWakePage* map_page(const std::string& path, bool create) {
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd < 0) {
        if (create) {
            throw os_error("memif wake page " + path);
        }
        return nullptr;
    }
    struct stat st {};
    bool ok = fstat(fd, &st) == 0;
    if (ok && st.st_size < static_cast<off_t>(kPageBytes)) {
        // Only the owner grows it; a peer that finds it short waits.
        ok = create && ftruncate(fd, kPageBytes) == 0;
    }
    void* at = ok ? mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    const int err = errno;
    close(fd);
    if (at == MAP_FAILED) {
        errno = err;
        if (create) {
            throw os_error("memif wake page " + path);
        }
        return nullptr;
    }
    // A fresh file is zero-filled: an atomic of all zero bytes is that value.
    return static_cast<MemifWakePage*>(at);
}

sockaddr_un unix_address(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    return a;
}

}  // namespace

std::string MemifPeerWake::page_path(const std::string& socket_path, std::uint32_t id, MemifRole role) {
    return socket_path + ".uroce-wake-" + std::to_string(id) + "-" + role_name(role);
}

MemifPeerWake::MemifPeerWake(const std::string& socket_path, std::uint32_t id, MemifRole role) {
    const std::string own_page = page_path(socket_path, id, role);
    own_socket_ = own_page + ".sock";
    peer_page_ = page_path(socket_path, id, other(role));
    peer_socket_ = peer_page_ + ".sock";
    if (own_socket_.size() >= sizeof(sockaddr_un::sun_path)) {
        errno = ENAMETOOLONG;
        throw os_error("memif wake socket " + own_socket_);
    }
    own_ = map_page(own_page, true);
    own_->armed.store(0);
    drained_rings_ = own_->rings.load();

    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        const auto e = os_error("memif wake socket");
        munmap(own_, kPageBytes);
        throw e;
    }
    unlink(own_socket_.c_str());  // left by an earlier run
    const sockaddr_un a = unix_address(own_socket_);
    if (bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
        const auto e = os_error("memif wake socket " + own_socket_);
        close(fd_);
        munmap(own_, kPageBytes);
        throw e;
    }
}

MemifPeerWake::~MemifPeerWake() {
    own_->armed.store(0);
    close(fd_);
    unlink(own_socket_.c_str());
    munmap(own_, kPageBytes);
    if (peer_ != nullptr) {
        munmap(peer_, kPageBytes);
    }
}

void MemifPeerWake::drain() {
    const std::uint64_t rings = own_->rings.load(std::memory_order_acquire);
    char byte = 0;
    while (recv(fd_, &byte, sizeof(byte), MSG_DONTWAIT) >= 0) {
        counters_.wakes_drained += 1;
    }
    drained_rings_ = rings;
}

bool MemifPeerWake::arm() {
    const bool still_armed = armed_ && own_->armed.load(std::memory_order_relaxed) == 1;
    // A fresh arm drains whatever came (a datagram the peer has sent but not
    // yet counted too); while armed, only a count that moved costs a recv.
    if (!still_armed || own_->rings.load(std::memory_order_relaxed) != drained_rings_) {
        drain();
    }
    if (still_armed) {
        return false;
    }
    // Store, full fence, then the caller's second look at the ring (a load):
    // the mirror of ring_peer()'s. A seq_cst store alone orders a later load
    // only on x86 (where it is an xchg), not in the C++ model.
    own_->armed.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    armed_ = true;
    return true;
}

void MemifPeerWake::disarm() {
    if (armed_) {
        own_->armed.store(0, std::memory_order_relaxed);
        armed_ = false;
    }
}

bool MemifPeerWake::find_peer() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_peer_look_) {
        return false;
    }
    next_peer_look_ = now + kPeerLookInterval;
    peer_ = map_page(peer_page_, false);
    return peer_ != nullptr;
}

void MemifPeerWake::ring_peer() {
    // The PMD's store of the ring's head comes before the load of `armed`.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (peer_ == nullptr && !find_peer()) {
        return;
    }
    if (peer_->armed.load(std::memory_order_relaxed) == 0 || peer_->armed.exchange(0) == 0) {
        return;
    }
    const sockaddr_un a = unix_address(peer_socket_);
    const char byte = 1;
    // EAGAIN: the peer has datagrams it has not read, so it is awake anyway;
    // ENOENT/ECONNREFUSED: no peer daemon now.
    if (sendto(fd_, &byte, sizeof(byte), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 1) {
        peer_->rings.fetch_add(1, std::memory_order_release);
        counters_.rings_sent += 1;
    }
}

}  // namespace uroce::port
