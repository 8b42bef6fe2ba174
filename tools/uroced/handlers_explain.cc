#include "handlers_explain.h"

#include <algorithm>

namespace uroce::daemon {

uroce_ctrl_explain_reply explain_reply(const EventLog& log, const uroce_ctrl_explain_fetch& request,
                                       const ExplainReader& reader) {
    const auto wanted = [&](const uroce_explain_record& r) {
        const bool visible = reader.sees_all || r.uid == static_cast<std::uint32_t>(reader.uid);
        return visible && (request.qpn == UROCE_EXPLAIN_ANY_QP || r.qpn == request.qpn);
    };
    const EventLog::Page page = log.fetch(request.after, UROCE_EXPLAIN_PER_REPLY, wanted);
    uroce_ctrl_explain_reply reply{};
    reply.last = page.last;
    reply.missed = page.missed;
    reply.count = static_cast<std::uint32_t>(page.records.size());
    std::copy(page.records.begin(), page.records.end(), reply.records);
    return reply;
}

}  // namespace uroce::daemon
