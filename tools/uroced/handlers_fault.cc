// The fault-injection ops (abi/control.h, ops 90-94; docs/fault-injection.md).
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "control_server.h"
#include "fault/rule_parse.h"
#include "log.h"
#include "messages.h"

namespace uroce::daemon {

namespace {

// ADD, CLEAR and SEED change what happens to every client's frames: only
// root and the daemon's own user may (the socket is open to every user).
bool may_change_faults(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

template <std::size_t N>
void copy_text(char (&out)[N], std::string_view text) {
    const std::size_t n = std::min(text.size(), N - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
}

}  // namespace

std::size_t ControlServer::dispatch_fault(const Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                          std::uint8_t* out) {
    if (faults_ == nullptr) {
        return status_only(out, h, ENOTSUP);  // started with --no-fault-hook
    }
    const bool changes = h.op == UROCE_CTRL_FAULT_ADD || h.op == UROCE_CTRL_FAULT_CLEAR || h.op == UROCE_CTRL_FAULT_SEED;
    if (changes && !may_change_faults(c.uid)) {
        log_warn("client {} (uid {}): refused to change fault rules: only root or uid {} may", c.client, c.uid,
                 ::geteuid());
        return status_only(out, h, EPERM);
    }
    switch (h.op) {
        case UROCE_CTRL_FAULT_ADD: {
            const auto req = read_as<uroce_ctrl_fault_add>(msg);
            const std::string_view text(req.rule, ::strnlen(req.rule, sizeof req.rule));
            uroce_ctrl_fault_add_reply r{};
            const fault::ParsedRule parsed = fault::parse_rule(text);
            if (!parsed.rule) {
                copy_text(r.message, parsed.error);
                return write_reply(out, h, EINVAL, r);
            }
            r.id = faults_->add_rule(*parsed.rule);
            log_info("client {}: fault rule {} added: {}", c.client, r.id, fault::format_rule(*parsed.rule));
            return write_reply(out, h, 0, r);
        }
        case UROCE_CTRL_FAULT_LIST: {
            const auto req = read_as<uroce_ctrl_fault_list>(msg);
            const auto& rules = faults_->injector().rules();
            uroce_ctrl_fault_list_reply r{};
            r.rules = static_cast<std::uint32_t>(rules.size());
            r.seed = faults_->injector().seed();
            if (req.index >= rules.size()) {
                return write_reply(out, h, ENOENT, r);
            }
            const fault::InstalledRule& rule = rules[req.index];
            r.id = rule.id;
            r.seen = rule.counters.seen;
            r.injected = rule.counters.injected;
            r.state = rule.state == fault::RuleState::Active ? UROCE_FAULT_RULE_ACTIVE : UROCE_FAULT_RULE_DONE;
            copy_text(r.rule, rule.text);
            return write_reply(out, h, 0, r);
        }
        case UROCE_CTRL_FAULT_CLEAR: {
            const std::uint32_t id = read_as<uroce_ctrl_fault_clear>(msg).id;
            if (id == 0) {
                faults_->clear_rules();
                log_info("client {}: every fault rule removed", c.client);
                return status_only(out, h, 0);
            }
            const bool removed = faults_->remove_rule(id);
            if (removed) {
                log_info("client {}: fault rule {} removed", c.client, id);
            }
            return status_only(out, h, removed ? 0 : ENOENT);
        }
        case UROCE_CTRL_FAULT_SEED: {
            const std::uint64_t seed = read_as<uroce_ctrl_fault_seed>(msg).seed;
            faults_->reseed(seed);
            log_info("client {}: fault seed {}", c.client, seed);
            return status_only(out, h, 0);
        }
        case UROCE_CTRL_FAULT_TOTALS: {
            uroce_ctrl_fault_totals_reply r{};
            const auto& totals = faults_->injector().totals();
            static_assert(fault::kActionCount == UROCE_FAULT_ACTIONS);
            std::copy(totals.begin(), totals.end(), r.injected);
            r.held = faults_->held();
            r.rules = static_cast<std::uint32_t>(faults_->injector().rules().size());
            return write_reply(out, h, 0, r);
        }
        default:
            return status_only(out, h, EINVAL);
    }
}

}  // namespace uroce::daemon
