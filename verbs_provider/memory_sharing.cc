// Written without std::string, std::from_chars or std::string_view: their
// out-of-line template instances would be exported from the plugin (the
// standard library's namespace has default visibility), and the plugin
// exports only uroce_dv_* (tests/integration/provider/check_exports.py).
#include "memory_sharing.h"

#include "common/unique_fd.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <vector>

namespace uroce::provider {

namespace {

// The memfds' name; /proc/self/maps shows "/memfd:uroce-mr (deleted)".
constexpr char kMemfdName[] = "uroce-mr";
constexpr char kMemfdMapsName[] = "/memfd:uroce-mr (deleted)";

// A private anonymous mapping directly above a PROT_NONE mapping this small
// is taken for a thread stack above its guard page (glibc puts the guard at
// the low end, 1 page by default): remapping a stack other threads are
// running on would lose their writes. glibc's malloc arenas have their
// PROT_NONE reserve above the used part, and it is megabytes.
constexpr std::uint64_t kGuardMaxBytes = 1u << 20;

// Registry limits: an eighth of the fd limit, within these bounds.
constexpr std::size_t kMinRanges = 16;
constexpr std::size_t kMaxRanges = 1024;

// /proc/self/maps is read in chunks of this size; a line is at most a path
// (PATH_MAX, 4096) plus about 100 bytes of fields.
constexpr std::size_t kMapsBufferBytes = 16384;

std::uint64_t page_size() {
    static const auto size = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    return size;
}

// What the name column of a mapping says.
enum class VmaName : std::uint8_t {
    Anonymous,       // no name
    Heap,            // [heap]
    Stack,           // [stack], or an anonymous name that says stack
    NamedAnonymous,  // [anon:...] (PR_SET_VMA_ANON_NAME)
    OurMemfd,        // a memfd of ours
    Other,           // a file, [vdso], ...
};

// One line of /proc/self/maps (proc(5)).
struct Vma {
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    bool readable = false;
    bool writable = false;
    bool executable = false;
    bool shared = false;
    std::uint64_t offset = 0;
    unsigned dev_major = 0;
    unsigned dev_minor = 0;
    std::uint64_t inode = 0;
    VmaName name = VmaName::Anonymous;

    [[nodiscard]] int protection() const {
        return (readable ? PROT_READ : 0) | (writable ? PROT_WRITE : 0) | (executable ? PROT_EXEC : 0);
    }
};

// A cursor over one line.
struct Text {
    const char* p;
    const char* end;

    bool number(std::uint64_t& value, unsigned base) {
        value = 0;
        const char* first = p;
        for (; p < end; ++p) {
            unsigned digit = 0;
            if (*p >= '0' && *p <= '9') {
                digit = static_cast<unsigned>(*p - '0');
            } else if (base == 16 && *p >= 'a' && *p <= 'f') {
                digit = static_cast<unsigned>(*p - 'a' + 10);
            } else {
                break;
            }
            value = value * base + digit;
        }
        return p > first;
    }
    bool skip(char c) {
        if (p == end || *p != c) {
            return false;
        }
        ++p;
        return true;
    }
    [[nodiscard]] std::size_t size() const { return static_cast<std::size_t>(end - p); }
    [[nodiscard]] bool is(const char* literal) const {
        return size() == std::strlen(literal) && std::memcmp(p, literal, size()) == 0;
    }
    [[nodiscard]] bool starts_with(const char* literal) const {
        const std::size_t n = std::strlen(literal);
        return size() >= n && std::memcmp(p, literal, n) == 0;
    }
    [[nodiscard]] bool contains(const char* literal) const {
        return ::memmem(p, size(), literal, std::strlen(literal)) != nullptr;
    }
};

VmaName classify(const Text& name) {
    if (name.size() == 0) {
        return VmaName::Anonymous;
    }
    if (name.is("[heap]")) {
        return VmaName::Heap;
    }
    if (name.is(kMemfdMapsName)) {
        return VmaName::OurMemfd;
    }
    if (name.starts_with("[stack") || (name.starts_with("[anon:") && name.contains("stack"))) {
        return VmaName::Stack;
    }
    if (name.starts_with("[anon:")) {
        return VmaName::NamedAnonymous;
    }
    return VmaName::Other;
}

// "start-end perms offset major:minor inode   name"
bool parse_vma(Text line, Vma& v) {
    if (!line.number(v.start, 16) || !line.skip('-') || !line.number(v.end, 16) || !line.skip(' ') ||
        line.size() < 5) {
        return false;
    }
    v.readable = line.p[0] == 'r';
    v.writable = line.p[1] == 'w';
    v.executable = line.p[2] == 'x';
    v.shared = line.p[3] == 's';
    line.p += 4;
    std::uint64_t major = 0;
    std::uint64_t minor = 0;
    if (!line.skip(' ') || !line.number(v.offset, 16) || !line.skip(' ') || !line.number(major, 16) ||
        !line.skip(':') || !line.number(minor, 16) || !line.skip(' ') || !line.number(v.inode, 10)) {
        return false;
    }
    v.dev_major = static_cast<unsigned>(major);
    v.dev_minor = static_cast<unsigned>(minor);
    while (line.skip(' ')) {
    }
    v.name = classify(line);
    return true;
}

// Calls visit(const Vma&) for the mappings of this process in address order
// until it returns false, reading /proc/self/maps chunk by chunk into
// `buffer` (kMapsBufferBytes), so that a large process need not be read past
// the range of interest. Allocates nothing. False when the file cannot be
// read or parsed.
template <typename Visit>
bool for_each_vma(char* buffer, Visit visit) {
    const UniqueFd maps(::open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
    if (!maps.valid()) {
        return false;
    }
    bool ok = true;
    std::size_t filled = 0;
    for (bool more = true; more && ok;) {
        const ssize_t got = ::read(maps.get(), buffer + filled, kMapsBufferBytes - filled);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            ok = false;
            break;
        }
        filled += static_cast<std::size_t>(got);
        const char* p = buffer;
        const char* const end = buffer + filled;
        while (more) {
            const auto* eol = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
            if (eol == nullptr) {
                break;
            }
            Vma v;
            if (!parse_vma(Text{p, eol}, v)) {
                ok = false;
                break;
            }
            more = visit(v);
            p = eol + 1;
        }
        const auto rest = static_cast<std::size_t>(end - p);
        if (got == 0) {
            ok = ok && (rest == 0 || !more);
            break;
        }
        if (rest == kMapsBufferBytes) {
            ok = false;  // a line longer than any the kernel writes
            break;
        }
        std::memmove(buffer, p, rest);
        filled = rest;
    }
    return ok;
}

struct MapsBuffer {
    char* data = new (std::nothrow) char[kMapsBufferBytes];
    MapsBuffer() = default;
    MapsBuffer(const MapsBuffer&) = delete;
    MapsBuffer& operator=(const MapsBuffer&) = delete;
    ~MapsBuffer() { delete[] data; }
};

// The mappings overlapping [from, to), and the one just below them
// (`below`: start == end == 0 when none).
bool read_vmas(std::uint64_t from, std::uint64_t to, std::vector<Vma>& overlapping, Vma& below) {
    MapsBuffer buffer;
    if (buffer.data == nullptr) {
        return false;
    }
    return for_each_vma(buffer.data, [&](const Vma& v) {
        if (v.start >= to) {
            return false;  // sorted by address: nothing further overlaps
        }
        if (v.end <= from) {
            below = v;
        } else {
            overlapping.push_back(v);
        }
        return true;
    });
}

// PROCMAP_QUERY (include/uapi/linux/fs.h, Linux 6.11): one mapping of an
// open /proc/self/maps, found by address, without formatting the whole file
// (which costs time in proportion to the mappings a process has). Spelled
// out because the distribution's headers may predate it; the layout is
// kernel ABI (the daemon uses it too: emulator/mr/address_space.cc).
struct ProcmapQuery {
    std::uint64_t size;
    std::uint64_t query_flags;
    std::uint64_t query_addr;
    std::uint64_t vma_start;
    std::uint64_t vma_end;
    std::uint64_t vma_flags;
    std::uint64_t vma_page_size;
    std::uint64_t vma_offset;
    std::uint64_t inode;
    std::uint32_t dev_major;
    std::uint32_t dev_minor;
    std::uint32_t vma_name_size;
    std::uint32_t build_id_size;
    std::uint64_t vma_name_addr;
    std::uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104);
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr std::uint64_t kQueryReadable = 0x01;
constexpr std::uint64_t kQueryWritable = 0x02;
constexpr std::uint64_t kQueryExecutable = 0x04;
constexpr std::uint64_t kQueryShared = 0x08;
constexpr std::uint64_t kQueryCoveringOrNext = 0x10;
// A mapping's name: a path (PATH_MAX) plus " (deleted)".
constexpr std::size_t kVmaNameBytes = 4096 + 16;

enum class Query : std::uint8_t { Found, None, Unsupported };

Query query_vma(int maps, std::uint64_t addr, std::uint64_t flags, Vma& v) {
    char name[kVmaNameBytes];
    ProcmapQuery q{};
    q.size = sizeof q;
    q.query_flags = flags;
    q.query_addr = addr;
    q.vma_name_addr = reinterpret_cast<std::uintptr_t>(name);
    q.vma_name_size = sizeof name;
    if (::ioctl(maps, kProcmapQuery, &q) != 0) {
        return errno == ENOTTY || errno == EINVAL || errno == EOPNOTSUPP ? Query::Unsupported : Query::None;
    }
    v.start = q.vma_start;
    v.end = q.vma_end;
    v.readable = (q.vma_flags & kQueryReadable) != 0;
    v.writable = (q.vma_flags & kQueryWritable) != 0;
    v.executable = (q.vma_flags & kQueryExecutable) != 0;
    v.shared = (q.vma_flags & kQueryShared) != 0;
    v.offset = q.vma_offset;
    v.dev_major = q.dev_major;
    v.dev_minor = q.dev_minor;
    v.inode = q.inode;
    // vma_name_size counts the terminating NUL; 0 when there is no name.
    const std::size_t length = q.vma_name_size > 0 ? q.vma_name_size - 1 : 0;
    v.name = classify(Text{name, name + length});
    return Query::Found;
}

// read_vmas by PROCMAP_QUERY: `below` only when it ends where the first
// overlapping mapping starts (all that is asked of it: a guard page under a
// stack). Unsupported on kernels before 6.11.
Query query_vmas(std::uint64_t from, std::uint64_t to, std::vector<Vma>& overlapping, Vma& below) {
    const UniqueFd maps_file(::open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
    if (!maps_file.valid()) {
        return Query::None;
    }
    const int maps = maps_file.get();
    Query result = Query::Found;
    Vma v;
    for (std::uint64_t at = from; at < to;) {
        const Query q = query_vma(maps, at, kQueryCoveringOrNext, v);
        if (q == Query::Unsupported) {
            result = q;
        }
        if (q != Query::Found || v.start >= to) {
            break;
        }
        overlapping.push_back(v);
        at = v.end;
    }
    const std::uint64_t first = overlapping.empty() ? from : overlapping.front().start;
    if (result == Query::Found && first > 0 && query_vma(maps, first - 1, 0, v) == Query::Found && v.end == first) {
        below = v;
    }
    return result;
}

// Whether [from, to) is mapped, without holes, by `vmas` that all satisfy `ok`.
template <typename Pred>
bool covered(const std::vector<Vma>& vmas, std::uint64_t from, std::uint64_t to, Pred ok) {
    std::uint64_t at = from;
    for (const Vma& v : vmas) {
        if (v.end <= at) {
            continue;
        }
        if (v.start > at || !ok(v)) {
            return false;
        }
        at = v.end;
        if (at >= to) {
            return true;
        }
    }
    return false;
}

bool is_private_anonymous_rw(const Vma& v) {
    return v.readable && v.writable && !v.executable && !v.shared && v.inode == 0 &&
           (v.name == VmaName::Anonymous || v.name == VmaName::Heap || v.name == VmaName::NamedAnonymous);
}

bool is_guard_page(const Vma& v) {
    return v.end > v.start && !v.readable && !v.writable && !v.executable && !v.shared && v.inode == 0 &&
           v.end - v.start <= kGuardMaxBytes;
}

// Registration reads and copies whole pages, bytes around the registered
// ones included. Under AddressSanitizer those hold other objects' redzones,
// so these two functions read past its checks: their loads are not
// instrumented, and the copy is a plain loop there, since ASan intercepts
// memcpy itself (volatile, so that the compiler does not make it a memcpy
// call again; slow, but only in sanitizer builds).
#if defined(__SANITIZE_ADDRESS__)
#define UROCE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UROCE_ASAN 1
#endif
#endif

[[gnu::no_sanitize_address]] void copy_memory(void* dst, const void* src, std::uint64_t bytes) {
#ifdef UROCE_ASAN
    auto* d = static_cast<volatile std::uint64_t*>(dst);
    const auto* s = static_cast<const volatile std::uint64_t*>(src);
    for (std::uint64_t i = 0; i < bytes / sizeof(std::uint64_t); ++i) {
        d[i] = s[i];
    }
#else
    std::memcpy(dst, src, bytes);
#endif
}

[[gnu::no_sanitize_address]] bool all_zero(const std::uint8_t* page, std::uint64_t bytes) {
    const auto* words = static_cast<const std::uint64_t*>(static_cast<const void*>(page));
    constexpr std::size_t kBlock = 64;  // words per early-exit check
    const std::size_t count = bytes / sizeof(std::uint64_t);
    for (std::size_t i = 0; i < count; i += kBlock) {
        std::uint64_t any = 0;
        const std::size_t block_end = i + kBlock < count ? i + kBlock : count;
        for (std::size_t j = i; j < block_end; ++j) {
            any |= words[j];
        }
        if (any != 0) {
            return false;
        }
    }
    return true;
}

// Copies the pages of `src` that hold anything into the fresh memfd view
// `dst`: a memfd reads zeros where nothing was written, and leaving those
// pages out keeps a large, mostly untouched buffer from costing memory.
// (Reading an untouched anonymous page maps the shared zero page; it
// allocates nothing.)
void copy_pages(std::uint8_t* dst, const std::uint8_t* src, std::uint64_t length) {
    const std::uint64_t page = page_size();
    for (std::uint64_t off = 0; off < length; off += page) {
        if (!all_zero(src + off, page)) {
            copy_memory(dst + off, src + off, page);
        }
    }
}

void* as_pointer(std::uint64_t addr) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(addr));
}

bool same_file(int fd, dev_t dev, ino_t ino) {
    struct stat st {};
    return ::fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

// Every MemorySharing, for the fork handlers.
std::mutex instances_mutex;
MemorySharing* newest_instance = nullptr;
std::once_flag fork_handlers_installed;

}  // namespace

MemorySharing::Limits MemorySharing::default_limits() {
    Limits l;
    rlimit nofile{};
    std::size_t max = kMaxRanges;
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
        max = static_cast<std::size_t>(std::min<rlim_t>(nofile.rlim_cur / 8, kMaxRanges));
    }
    l.max_ranges = std::max(max, kMinRanges);
    return l;
}

MemorySharing::MemorySharing(bool enabled, Limits limits) : enabled_(enabled), limits_(limits) {
    std::call_once(fork_handlers_installed, [] { ::pthread_atfork(lock_all, unlock_all, privatise_in_child); });
    std::lock_guard lock(instances_mutex);
    older_ = newest_instance;
    if (older_ != nullptr) {
        older_->newer_ = this;
    }
    newest_instance = this;
}

MemorySharing::~MemorySharing() {
    {
        std::lock_guard lock(instances_mutex);
        if (newer_ != nullptr) {
            newer_->older_ = older_;
        } else {
            newest_instance = older_;
        }
        if (older_ != nullptr) {
            older_->newer_ = newer_;
        }
    }
    ranges_.clear();  // closes every memfd
}

std::size_t MemorySharing::ranges_held() const {
    std::lock_guard lock(mutex_);
    return static_cast<std::size_t>(
        std::count_if(ranges_.begin(), ranges_.end(), [](const auto& e) { return e.second.fd.valid(); }));
}

SharedMemory MemorySharing::share(const void* addr, std::size_t length, bool keep_from_fork) {
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const std::uint64_t page = page_size();
    if (!enabled_ || length == 0 || a + length < a || a + length + page < a + length) {
        return {};
    }
    const std::uint64_t start = a & ~(page - 1);
    const std::uint64_t end = (a + length + page - 1) & ~(page - 1);

    std::lock_guard lock(mutex_);
    std::vector<Vma> vmas;
    Vma below;
    if (query_vmas(start, end, vmas, below) == Query::Unsupported) {
        vmas.clear();
        below = Vma{};
        if (!read_vmas(start, end, vmas, below)) {
            return {};
        }
    }

    // Ranges remapped before that the registration touches: still our memfd
    // there (the application may have unmapped and reused the addresses)?
    auto containing = ranges_.end();
    bool partial_overlap = false;
    for (auto it = ranges_.begin(); it != ranges_.end();) {
        const auto next = std::next(it);
        const Range& r = it->second;
        const std::uint64_t r_end = r.start + r.length;
        if (r.live && r.start < end && start < r_end) {
            const auto ours = [&r](const Vma& v) {
                return v.shared && v.inode == r.ino && makedev(v.dev_major, v.dev_minor) == r.dev &&
                       v.start >= r.start && v.offset == v.start - r.start;
            };
            if (!covered(vmas, std::max(start, r.start), std::min(end, r_end), ours)) {
                forget(it);
            } else if (r.start <= start && end <= r_end) {
                containing = it;
            } else {
                partial_overlap = true;
            }
        }
        it = next;
    }
    if (containing != ranges_.end()) {
        return reuse(containing);
    }
    if (partial_overlap) {
        return {};  // would need two memfds for one MR: copy instead
    }

    // Fresh: only private anonymous read-write memory, not a stack.
    const auto frame = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    const Vma* previous = &below;
    for (const Vma& v : vmas) {
        const bool my_stack = v.start <= frame && frame < v.end;
        const bool above_guard = previous->end == v.start && is_guard_page(*previous);
        if (my_stack || above_guard) {
            return {};
        }
        previous = &v;
    }
    if (!covered(vmas, start, end, is_private_anonymous_rw) || !make_room()) {
        return {};
    }
    return remap(start, end - start, keep_from_fork);
}

SharedMemory MemorySharing::reuse(Ranges::iterator it) {
    Range& r = it->second;
    // The application may have closed our descriptor (closing "all fds"),
    // and the number may now be one of its own files: then it is not ours
    // to send, nor to close.
    if (!same_file(r.fd.get(), r.dev, r.ino)) {
        static_cast<void>(r.fd.release());
        forget(it);
        return {};
    }
    ++r.refs;
    return SharedMemory{r.fd.get(), r.start, r.length, 0, it->first};
}

SharedMemory MemorySharing::remap(std::uint64_t start, std::uint64_t length, bool keep_from_fork) {
    UniqueFd memfd(::memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!memfd.valid()) {
        return {};
    }
    const int fd = memfd.get();
    // A fixed size: the daemon maps it too, and a file shrinking under its
    // mapping would raise SIGBUS there (the daemon refuses unsealed files).
    struct stat st {};
    if (::ftruncate(fd, static_cast<off_t>(length)) != 0 ||
        ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 || ::fstat(fd, &st) != 0) {
        return {};
    }
    void* staging = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (staging == MAP_FAILED) {
        return {};
    }
    copy_pages(static_cast<std::uint8_t*>(staging), static_cast<const std::uint8_t*>(as_pointer(start)), length);
    // MAP_FIXED replaces the private pages by the memfd's in one call; it
    // checks the mapping-count limit before it unmaps anything. Between the
    // copy and here another thread's store into the range would be lost
    // (the caveat in the header).
    void* placed = ::mmap(as_pointer(start), length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    ::munmap(staging, length);
    if (placed == MAP_FAILED) {
        return {};
    }
    if (keep_from_fork) {
        ::madvise(placed, length, MADV_DONTFORK);
    }
    const std::uint64_t token = next_token_++;
    Range& r = ranges_[token];
    r.start = start;
    r.length = length;
    r.fd = std::move(memfd);
    r.dev = st.st_dev;
    r.ino = st.st_ino;
    r.refs = 1;
    return SharedMemory{fd, start, length, 0, token};
}

void MemorySharing::release(std::uint64_t token) {
    std::lock_guard lock(mutex_);
    auto it = ranges_.find(token);
    if (it == ranges_.end() || it->second.refs == 0) {
        return;
    }
    Range& r = it->second;
    if (--r.refs > 0) {
        return;
    }
    if (!r.live || !r.fd.valid()) {
        drop(it);
        return;
    }
    // The mapping stays as it is: it is the application's memory now. Keep
    // the memfd among the idle ones so that registering it again is cheap.
    r.idle_since = ++release_clock_;
    std::size_t idle = 0;
    auto oldest = ranges_.end();
    for (auto i = ranges_.begin(); i != ranges_.end(); ++i) {
        if (i->second.refs == 0) {
            ++idle;
            if (oldest == ranges_.end() || i->second.idle_since < oldest->second.idle_since) {
                oldest = i;
            }
        }
    }
    if (idle > limits_.idle_kept) {
        drop(oldest);
    }
}

void MemorySharing::forget(Ranges::iterator it) {
    it->second.live = false;
    if (it->second.refs == 0) {
        drop(it);
    }
}

void MemorySharing::drop(Ranges::iterator it) {
    ranges_.erase(it);  // closes its memfd
}

bool MemorySharing::make_room() {
    if (ranges_.size() < limits_.max_ranges) {
        return true;
    }
    auto oldest = ranges_.end();
    for (auto i = ranges_.begin(); i != ranges_.end(); ++i) {
        if (i->second.refs == 0 && (oldest == ranges_.end() || i->second.idle_since < oldest->second.idle_since)) {
            oldest = i;
        }
    }
    if (oldest == ranges_.end()) {
        return false;
    }
    drop(oldest);
    return true;
}

int MemorySharing::fd_of(dev_t dev, ino_t ino) const {
    for (const auto& [token, r] : ranges_) {
        if (r.fd.valid() && r.dev == dev && r.ino == ino) {
            return r.fd.get();
        }
    }
    return -1;
}

// pthread_atfork: no registration runs across a fork, so the child finds
// every registry consistent (and its mutexes held by its one thread).
void MemorySharing::lock_all() {
    instances_mutex.lock();
    for (MemorySharing* m = newest_instance; m != nullptr; m = m->older_) {
        m->mutex_.lock();
    }
}

void MemorySharing::unlock_all() {
    for (MemorySharing* m = newest_instance; m != nullptr; m = m->older_) {
        m->mutex_.unlock();
    }
    instances_mutex.unlock();
}

// In the child, before fork() returns there: every mapping of one of our
// memfds (tracked or not: a range whose memfd was closed stays shared too)
// becomes private. With the memfd at hand that is a MAP_PRIVATE mapping of
// it (no copy); without, a private copy of the bytes moved over the range.
// The child has one thread; it allocates nothing here. Then the child's
// registries forget everything: their ranges are not shared any more.
void MemorySharing::privatise_in_child() {
    // A batch of mappings at a time: /proc/self/maps is not read while the
    // mappings it lists change; each pass makes those it found private.
    constexpr std::size_t kBatch = 64;
    static char buffer[kMapsBufferBytes];
    static Vma found[kBatch];
    for (;;) {
        std::size_t count = 0;
        const bool read = for_each_vma(buffer, [&](const Vma& v) {
            if (v.shared && v.name == VmaName::OurMemfd) {
                found[count++] = v;
            }
            return count < kBatch;
        });
        std::size_t privatised = 0;
        for (std::size_t i = 0; read && i < count; ++i) {
            const Vma& v = found[i];
            const std::uint64_t length = v.end - v.start;
            int fd = -1;
            for (MemorySharing* m = newest_instance; m != nullptr && fd < 0; m = m->older_) {
                fd = m->fd_of(makedev(v.dev_major, v.dev_minor), v.inode);
            }
            void* done = MAP_FAILED;
            if (fd >= 0) {
                done = ::mmap(as_pointer(v.start), length, v.protection(), MAP_PRIVATE | MAP_FIXED, fd,
                              static_cast<off_t>(v.offset));
            } else if (void* copy = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                           -1, 0);
                       copy != MAP_FAILED) {
                if (v.readable || ::mprotect(as_pointer(v.start), length, PROT_READ) == 0) {
                    copy_memory(copy, as_pointer(v.start), length);
                }
                ::mprotect(copy, length, v.protection());
                done = ::mremap(copy, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, as_pointer(v.start));
                if (done == MAP_FAILED) {
                    ::munmap(copy, length);
                }
            }
            privatised += done != MAP_FAILED ? 1 : 0;
        }
        if (!read || count < kBatch || privatised == 0) {
            break;
        }
    }
    for (MemorySharing* m = newest_instance; m != nullptr; m = m->older_) {
        m->ranges_.clear();  // closes their memfds
    }
    unlock_all();
}

MemorySharing& process_memory_sharing() {
    // Never destroyed: MRs may be deregistered from atexit handlers or other
    // static destructors that run after ours would have.
    static auto* sharing = new MemorySharing(share_memory_setting(std::getenv("UROCE_SHARE_MEMORY")));
    return *sharing;
}

bool share_memory_setting(const char* value) {
    if (value == nullptr) {
        return true;
    }
    for (const char* no : {"0", "no", "off", "false"}) {
        if (std::strcmp(value, no) == 0) {
            return false;
        }
    }
    return true;
}

int open_process_files(int& mem_fd, int& maps_fd) {
    mem_fd = -1;
    maps_fd = -1;
    UniqueFd mem(::open("/proc/self/mem", O_RDWR | O_CLOEXEC));
    if (!mem.valid()) {
        return errno;
    }
    UniqueFd maps(::open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
    if (!maps.valid()) {
        return errno;  // read before `mem` closes
    }
    mem_fd = mem.release();
    maps_fd = maps.release();
    return 0;
}

}  // namespace uroce::provider
