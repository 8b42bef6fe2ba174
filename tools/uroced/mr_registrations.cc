#include "mr_registrations.h"

#include <unistd.h>

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

mr::Registered MrRegistrations::reg_dmabuf(mr::RegRequest r, int fd) {
    dma::ClientMemory* m = memory_of_ ? memory_of_(r.owner) : nullptr;
    if (!memory_of_) {
        return reg(r, std::nullopt);  // no data path: nothing would read it
    }
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t lead = r.addr % page;  // the MR's start inside its first page
    if (m == nullptr || r.length == 0 || r.length > (std::uint64_t{1} << kDmaBufWindowShift) - lead) {
        return mr::Registered{EINVAL, 0, 0};
    }
    const std::uint64_t mapped = (lead + r.length + page - 1) / page * page;
    const Charge charge{1, 1, mapped, 0};  // the MR, and the daemon's mapping of the dma-buf
    if (const int err = quota_.admit(r.owner, charge); err != 0) {
        return mr::Registered{err, 0, 0};
    }
    // The next window no mapping of this client holds.
    std::uint64_t window = 0;
    for (std::uint64_t tries = 0; tries < kDmaBufWindows; ++tries) {
        window = kDmaBufWindowBase + ((next_dmabuf_window_++ % kDmaBufWindows) << kDmaBufWindowShift);
        if (m->way(window, 1) == dma::Way::Copy) {
            break;
        }
    }
    if (int err = m->add_shared(window, mapped, fd, r.addr - lead); err != 0) {
        // As ib_umem_dmabuf_get: what is not a dma-buf (here: an unsealed
        // file) is EINVAL.
        return mr::Registered{err == EPERM ? EINVAL : err, 0, 0};
    }
    r.addr = window + lead;  // the translation: iova -> the window
    const mr::Registered made = mrs_.reg_mr(r);
    if (made.error != 0) {
        m->remove_shared(window, mapped);
        return made;
    }
    shared_by_lkey_[made.lkey] = SharedRange{r.owner, window, mapped};
    quota_.add(ObjectKind::Mr, made.lkey, r.owner, charge);
    return made;
}

bool MrRegistrations::is_mapped_dmabuf(std::uint32_t lkey) const {
    const auto it = shared_by_lkey_.find(lkey);
    return it != shared_by_lkey_.end() && it->second.addr >= kDmaBufWindowBase;
}

int MrRegistrations::rereg(std::uint32_t lkey, std::uint32_t flags, const mr::RegRequest& r,
                           const std::optional<SharedMemory>& shared) {
    // A dma-buf MR keeps its pages: a new translation is not offered (as
    // mlx5 refuses IB_MR_REREG_TRANS on a dma-buf MR); access and PD change.
    if (is_mapped_dmabuf(lkey) && (flags & mr::rereg::kChangeTranslation) != 0) {
        return EOPNOTSUPP;
    }
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
