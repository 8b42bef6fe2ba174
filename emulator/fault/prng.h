// The injector's random numbers: SplitMix64 (Steele, Lea and Flood, "Fast
// splittable pseudorandom number generators", OOPSLA 2014), one stream per
// rule. Its whole state is one 64-bit word, so a stream is re-made exactly
// from the seed: the same seed and the same frames give the same decisions.
#pragma once

#include <cstdint>

namespace uroce::fault {

class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t seed = 0) : state_(seed) {}

    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);  // the golden-ratio increment of SplitMix64
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

    // Uniform in [0, bound) (bound > 0); the modulo bias is below 2^-40 for
    // the bounds used here (a million, a frame length).
    std::uint64_t below(std::uint64_t bound) { return next() % bound; }

private:
    std::uint64_t state_;
};

// The seed of rule `rule_id`'s stream: the injector's seed and the id mixed,
// so adding a rule does not change the decisions of the others.
[[nodiscard]] inline std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t rule_id) {
    SplitMix64 mix(seed ^ (rule_id * 0xD1B54A32D192ED03ull));  // an odd constant spreads consecutive ids
    return mix.next();
}

}  // namespace uroce::fault
