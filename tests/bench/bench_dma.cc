// Costs of the two DMA ways (emulator/dma/client_memory.h) into another
// process: 64 B and 64 KiB reads and writes, and 8-byte fetch-and-add,
// through the shared way (a memfd both map: a memcpy) and the copying way
// (pread/pwrite on /proc/PID/mem: a system call each). The client is a forked
// child that sleeps in read() on a pipe for the whole run; its pages are
// its own (touched after the fork), as a client's registered buffers are.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "dma/client_memory.h"

namespace {

using uroce::dma::ClientMemory;
using uroce::dma::Way;

constexpr std::size_t kRegion = 1 << 20;  // per way

class Client {
public:
    Client() {
        // The shared region: a sealed memfd, mapped here before the fork so
        // the child has it at the same address.
        fd_ = ::memfd_create("uroce-bench-dma", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd_ < 0 || ::ftruncate(fd_, kRegion) != 0 || ::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
            std::abort();
        }
        shared_ = ::mmap(nullptr, kRegion, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
        copied_ = ::mmap(nullptr, kRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        int fds[2];
        int ready[2];
        if (shared_ == MAP_FAILED || copied_ == MAP_FAILED || ::pipe(fds) != 0 || ::pipe(ready) != 0) {
            std::abort();
        }
        pid_ = ::fork();
        if (pid_ < 0) {
            std::abort();
        }
        if (pid_ == 0) {
            ::close(fds[1]);
            std::memset(copied_, 1, kRegion);  // the child's own pages
            std::memset(shared_, 1, kRegion);
            char c = 0;
            if (::write(ready[1], &c, 1) != 1) {
                ::_exit(1);
            }
            while (::read(fds[0], &c, 1) > 0) {
            }
            ::_exit(0);
        }
        ::close(fds[0]);
        ::close(ready[1]);
        char c = 0;
        if (::read(ready[0], &c, 1) != 1) {
            std::abort();
        }
        ::close(ready[0]);
        stop_fd_ = fds[1];
        memory_ = std::make_unique<ClientMemory>(uroce::dma::open_process_memory(pid_));
        if (memory_->add_shared(address(Way::Shared), kRegion, fd_, 0) != 0) {
            std::abort();
        }
    }
    ~Client() {
        ::close(stop_fd_);  // the child's read() returns 0: it exits
        int status = 0;
        ::waitpid(pid_, &status, 0);
    }
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    std::uint64_t address(Way way) const {
        return reinterpret_cast<std::uintptr_t>(way == Way::Shared ? shared_ : copied_);
    }
    ClientMemory& memory() { return *memory_; }

private:
    int fd_ = -1;
    void* shared_ = nullptr;
    void* copied_ = nullptr;
    pid_t pid_ = -1;
    int stop_fd_ = -1;
    std::unique_ptr<ClientMemory> memory_;
};

Client& client() {
    static Client c;
    return c;
}

Way way_of(const benchmark::State& state) { return state.range(0) == 0 ? Way::Shared : Way::Copy; }

void label(benchmark::State& state, std::size_t bytes_per_op) {
    state.SetLabel(way_of(state) == Way::Shared ? "shared" : "copy");
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes_per_op));
}

// Successive operations walk the region so that each touches other lines.
void BM_Read(benchmark::State& state) {
    const auto size = static_cast<std::size_t>(state.range(1));
    ClientMemory& mem = client().memory();
    const std::uint64_t base = client().address(way_of(state));
    if (mem.way(base, size) != way_of(state)) {
        state.SkipWithError("wrong way");
        return;
    }
    std::vector<std::uint8_t> buffer(size);
    std::size_t offset = 0;
    for (auto _ : state) {
        if (mem.read(base + offset, buffer.data(), size) != 0) {
            state.SkipWithError("read failed");
            break;
        }
        benchmark::DoNotOptimize(buffer.data());
        offset = (offset + size) % kRegion;
    }
    label(state, size);
}

void BM_Write(benchmark::State& state) {
    const auto size = static_cast<std::size_t>(state.range(1));
    ClientMemory& mem = client().memory();
    const std::uint64_t base = client().address(way_of(state));
    std::vector<std::uint8_t> buffer(size, 7);
    std::size_t offset = 0;
    for (auto _ : state) {
        if (mem.write(base + offset, buffer.data(), size) != 0) {
            state.SkipWithError("write failed");
            break;
        }
        offset = (offset + size) % kRegion;
    }
    label(state, size);
}

void BM_FetchAdd(benchmark::State& state) {
    ClientMemory& mem = client().memory();
    const std::uint64_t base = client().address(way_of(state));
    std::uint64_t original = 0;
    for (auto _ : state) {
        if (mem.fetch_add(base, 1, original) != 0) {
            state.SkipWithError("fetch_add failed");
            break;
        }
        benchmark::DoNotOptimize(original);
    }
    label(state, 8);
}

// Args: {way (0 shared, 1 copy), bytes}
BENCHMARK(BM_Read)->ArgsProduct({{0, 1}, {64, 64 << 10}});
BENCHMARK(BM_Write)->ArgsProduct({{0, 1}, {64, 64 << 10}});
BENCHMARK(BM_FetchAdd)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
