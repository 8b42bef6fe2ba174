// Helpers of the DMA tests: page-sized anonymous memory, sealed memfds, the
// /proc/self/maps line of an address, and a forked "client" process that the
// test steps through with pipes (never sleeps).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace uroce::dma::test {

inline std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

inline std::uint64_t addr_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

inline std::uint8_t* as_bytes(void* p) { return static_cast<std::uint8_t*>(p); }

// Anonymous private pages, unmapped at the end of the scope.
class Pages {
public:
    explicit Pages(std::size_t count, int prot = PROT_READ | PROT_WRITE)
        : length_(count * page_size()),
          base_(static_cast<std::uint8_t*>(::mmap(nullptr, length_, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))) {}
    ~Pages() {
        if (base_ != MAP_FAILED) {
            ::munmap(base_, length_);
        }
    }
    Pages(const Pages&) = delete;
    Pages& operator=(const Pages&) = delete;

    [[nodiscard]] bool ok() const { return base_ != MAP_FAILED; }
    [[nodiscard]] std::uint8_t* data() const { return base_; }
    [[nodiscard]] std::uint8_t* page(std::size_t i) const { return base_ + i * page_size(); }
    [[nodiscard]] std::size_t length() const { return length_; }

private:
    std::size_t length_;
    std::uint8_t* base_;
};

// A memfd of `length` bytes, sealed against shrinking as the provider's are
// (`sealed` false: left unsealed).
inline int make_memfd(std::size_t length, bool sealed = true) {
    const int fd = ::memfd_create("uroce-dma-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(length)) != 0) {
        return -1;
    }
    if (sealed && ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
        return -1;
    }
    return fd;
}

inline std::uint8_t* map_shared(int fd, std::size_t length, std::size_t offset = 0) {
    void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset));
    return p == MAP_FAILED ? nullptr : static_cast<std::uint8_t*>(p);
}

// The /proc/self/maps line of the mapping holding `p` ("" when none).
inline std::string maps_line(const void* p) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    const std::uint64_t a = addr_of(p);
    while (std::getline(maps, line)) {
        unsigned long long start = 0;
        unsigned long long end = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx", &start, &end) == 2 && start <= a && a < end) {
            return line;
        }
    }
    return "";
}

// The VmFlags of the mapping holding `p` in /proc/self/smaps.
inline std::string vm_flags(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    const std::uint64_t a = addr_of(p);
    bool inside = false;
    while (std::getline(smaps, line)) {
        unsigned long long start = 0;
        unsigned long long end = 0;
        char dash = 0;
        if (std::sscanf(line.c_str(), "%llx%c%llx", &start, &dash, &end) == 3 && dash == '-') {
            inside = start <= a && a < end;
        } else if (inside && line.rfind("VmFlags:", 0) == 0) {
            return line;
        }
    }
    return "";
}

inline void fill(std::uint8_t* p, std::size_t n, std::uint8_t seed) {
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = static_cast<std::uint8_t>(seed + i * 7);
    }
}

inline bool filled(const std::uint8_t* p, std::size_t n, std::uint8_t seed) {
    for (std::size_t i = 0; i < n; ++i) {
        if (p[i] != static_cast<std::uint8_t>(seed + i * 7)) {
            return false;
        }
    }
    return true;
}

// One direction of a step-by-step conversation between test and child.
class Pipe {
public:
    Pipe() {
        if (::pipe2(fds_, O_CLOEXEC) != 0) {
            fds_[0] = fds_[1] = -1;
        }
    }
    ~Pipe() {
        close_read();
        close_write();
    }
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;

    bool send(const void* data, std::size_t n) { return ::write(fds_[1], data, n) == static_cast<ssize_t>(n); }
    bool receive(void* data, std::size_t n) {
        auto* p = static_cast<std::uint8_t*>(data);
        std::size_t got = 0;
        while (got < n) {
            const ssize_t r = ::read(fds_[0], p + got, n - got);
            if (r <= 0) {
                return false;
            }
            got += static_cast<std::size_t>(r);
        }
        return true;
    }
    template <typename T>
    bool send(const T& value) {
        return send(&value, sizeof value);
    }
    template <typename T>
    bool receive(T& value) {
        return receive(&value, sizeof value);
    }
    void close_read() {
        if (fds_[0] >= 0) {
            ::close(fds_[0]);
            fds_[0] = -1;
        }
    }
    void close_write() {
        if (fds_[1] >= 0) {
            ::close(fds_[1]);
            fds_[1] = -1;
        }
    }

private:
    int fds_[2] = {-1, -1};
};

// The child's exit status (its _exit code), or -1 when it did not exit.
inline int wait_exit_code(pid_t child) {
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
        return -1;
    }
    return WEXITSTATUS(status);
}

}  // namespace uroce::dma::test
