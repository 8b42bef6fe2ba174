// uroced links DPDK's shared libraries, which are compiled for a minimum x86
// CPU (RTE_MACHINE; Debian's: corei7, up to SSE4.2, the flags listed in
// RTE_COMPILE_TIME_CPUFLAGS of rte_build_config.h). On a CPU without one of
// those extensions (QEMU's default TCG model qemu64 has SSE3 but no SSSE3 or
// SSE4), librte_eal's own constructors execute an instruction the CPU lacks
// and the kernel kills the daemon with SIGILL before main() has logged a word.
//
// This check runs from the executable's .preinit_array, which the dynamic
// loader calls before the initialisers of any shared library (System V gABI,
// "Initialization and Termination Functions"), and says so plainly instead.
// Everything here is compiled for the baseline x86-64 (the rest of uroced
// takes DPDK's -march through its dependency) and uses only write(2) and
// _exit(2): libc is relocated but its constructors have not all run.
#include <rte_config.h>
#include <rte_cpuflags.h>
#include <unistd.h>

#include <cstring>

#if defined(RTE_ARCH_X86_64) && defined(RTE_COMPILE_TIME_CPUFLAGS)

namespace {

#define UROCE_BASELINE __attribute__((target("arch=x86-64")))
#define UROCE_TEXT(x) UROCE_TEXT_OF(x)
#define UROCE_TEXT_OF(x) #x

struct KnownFlag {
    rte_cpu_flag_t flag;
    const char* name;
};

// The flags a DPDK build for x86 may list; __builtin_cpu_supports needs a
// literal name, hence the switch below instead of a name lookup.
UROCE_BASELINE bool cpu_has(rte_cpu_flag_t flag) {
    switch (flag) {
        case RTE_CPUFLAG_SSE: return __builtin_cpu_supports("sse");
        case RTE_CPUFLAG_SSE2: return __builtin_cpu_supports("sse2");
        case RTE_CPUFLAG_SSE3: return __builtin_cpu_supports("sse3");
        case RTE_CPUFLAG_SSSE3: return __builtin_cpu_supports("ssse3");
        case RTE_CPUFLAG_SSE4_1: return __builtin_cpu_supports("sse4.1");
        case RTE_CPUFLAG_SSE4_2: return __builtin_cpu_supports("sse4.2");
        case RTE_CPUFLAG_POPCNT: return __builtin_cpu_supports("popcnt");
        case RTE_CPUFLAG_AVX: return __builtin_cpu_supports("avx");
        case RTE_CPUFLAG_AVX2: return __builtin_cpu_supports("avx2");
        case RTE_CPUFLAG_AVX512F: return __builtin_cpu_supports("avx512f");
        default: return true;  // not one we can ask about; let DPDK's own check speak
    }
}

UROCE_BASELINE const char* flag_name(rte_cpu_flag_t flag) {
    switch (flag) {
        case RTE_CPUFLAG_SSE: return "SSE";
        case RTE_CPUFLAG_SSE2: return "SSE2";
        case RTE_CPUFLAG_SSE3: return "SSE3";
        case RTE_CPUFLAG_SSSE3: return "SSSE3";
        case RTE_CPUFLAG_SSE4_1: return "SSE4.1";
        case RTE_CPUFLAG_SSE4_2: return "SSE4.2";
        case RTE_CPUFLAG_POPCNT: return "POPCNT";
        case RTE_CPUFLAG_AVX: return "AVX";
        case RTE_CPUFLAG_AVX2: return "AVX2";
        case RTE_CPUFLAG_AVX512F: return "AVX512F";
        default: return "?";
    }
}

UROCE_BASELINE void say(const char* text) {
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, text, std::strlen(text));
}

UROCE_BASELINE void check_cpu_for_dpdk(int, char**, char**) {
    __builtin_cpu_init();  // constructors (which would do this) have not run yet
    static constexpr rte_cpu_flag_t kBuiltFor[] = {RTE_COMPILE_TIME_CPUFLAGS};
    bool missing = false;
    for (const rte_cpu_flag_t flag : kBuiltFor) {
        if (cpu_has(flag)) {
            continue;
        }
        if (!missing) {
            say("uroced error: this CPU lacks");
            missing = true;
        }
        say(" ");
        say(flag_name(flag));
    }
    if (!missing) {
        return;
    }
    say(", which the DPDK libraries uroced is linked with were built for (RTE_MACHINE " UROCE_TEXT(RTE_MACHINE)
        "); they would stop the daemon with an illegal instruction. In a QEMU guest, give it a CPU model "
        "that has them (-cpu Nehalem or newer, -cpu max, or -cpu host with KVM).\n");
    ::_exit(1);
}

}  // namespace

// Called by the dynamic loader before any shared library's constructors.
__attribute__((section(".preinit_array"), used)) static void (*uroce_cpu_check_entry)(int, char**, char**) =
    check_cpu_for_dpdk;

#endif
