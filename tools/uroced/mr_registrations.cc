#include "mr_registrations.h"

#include <cerrno>
#include <cstring>

#include "log.h"

namespace uroce::daemon {

mr::Registered MrRegistrations::reg(const mr::RegRequest& r, const std::optional<SharedMemory>& shared) {
    if (const int err = quota_.admit(r.owner, Charge{}); err != 0) {
        return mr::Registered{err, 0, 0};
    }
    const mr::Registered made = mrs_.reg_mr(r);
    if (made.error == 0) {
        quota_.add(ObjectKind::Mr, made.lkey, r.owner, attach_memory(made.lkey, r, shared));
    }
    return made;
}

int MrRegistrations::rereg(std::uint32_t lkey, std::uint32_t flags, const mr::RegRequest& r,
                           const std::optional<SharedMemory>& shared) {
    const int err = mrs_.rereg_mr(lkey, flags, r);
    if (err == 0 && (flags & mr::rereg::kChangeTranslation) != 0) {
        quota_.add(ObjectKind::Mr, lkey, r.owner, attach_memory(lkey, r, shared));  // replaces its charge
    }
    return err;
}

int MrRegistrations::dereg(std::uint32_t lkey, std::uint32_t owner) {
    const int err = mrs_.dereg_mr(lkey, owner);
    if (err == 0) {
        quota_.remove(ObjectKind::Mr, lkey);
        unshare(lkey);
    }
    return err;
}

void MrRegistrations::forget_client(std::uint32_t client) {
    std::erase_if(shared_by_lkey_, [&](const auto& entry) {
        if (entry.second.client != client) {
            return false;
        }
        if (dma::ClientMemory* m = memory_of_ ? memory_of_(client) : nullptr) {
            m->remove_shared(entry.second.addr, entry.second.length);
        }
        return true;
    });
}

Charge MrRegistrations::attach_memory(std::uint32_t lkey, const mr::RegRequest& r,
                                      const std::optional<SharedMemory>& shared) {
    const std::uint32_t owner = r.owner;
    if (!memory_of_) {
        return Charge{};
    }
    if (!shared) {
        unshare(lkey);
        return Charge{};
    }
    if (shared->addr > r.addr || shared->addr + shared->length < r.addr + r.length || shared->length == 0) {
        log_warn("client {}: shared range does not cover the MR; copying instead", owner);
        unshare(lkey);
        return Charge{};
    }
    const Charge mapped{1, 1, shared->length, 0};  // the MR, and its mapping of the client's memory
    if (quota_.admit(owner, mapped) != 0) {
        log_warn("client {}: no mapping left in its quota for its shared memory; copying instead", owner);
        unshare(lkey);
        return Charge{};
    }
    if (const int err = share(lkey, owner, *shared); err != 0) {
        log_warn("client {}: cannot map its shared memory ({}); copying instead", owner, std::strerror(err));
        return Charge{};
    }
    return mapped;
}

int MrRegistrations::share(std::uint32_t lkey, std::uint32_t client, const SharedMemory& shared) {
    dma::ClientMemory* m = memory_of_(client);
    const int err = m == nullptr ? EINVAL : m->add_shared(shared.addr, shared.length, shared.fd, shared.offset);
    unshare(lkey);  // after the new reference: a mapping both hold stays mapped
    if (err == 0) {
        shared_by_lkey_[lkey] = SharedRange{client, shared.addr, shared.length};
    }
    return err;
}

void MrRegistrations::unshare(std::uint32_t lkey) {
    const auto it = shared_by_lkey_.find(lkey);
    if (it == shared_by_lkey_.end()) {
        return;
    }
    if (dma::ClientMemory* m = memory_of_ ? memory_of_(it->second.client) : nullptr) {
        m->remove_shared(it->second.addr, it->second.length);
    }
    shared_by_lkey_.erase(it);
}

}  // namespace uroce::daemon
