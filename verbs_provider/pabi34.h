// The private provider ABI of libibverbs, version 34 (IBVERBS_PRIVATE_34):
// the structures and functions a provider plugin shares with the library.
// rdma-core used this version name from release 34 through 56, but the
// layouts here are those of 36 to 56 (e.g. Debian 12, Ubuntu 22.04 and
// 24.04): 34 and 35 had a shorter ops table (73, 75 entries) under the same
// name, so verbs_provider/meson.build also checks the release.
//
// Distributions do not ship rdma-core's own driver.h, so these are our
// declarations of the same layouts, written from the published ABI and
// checked against the installed library by the tests in tests/unit/provider/,
// which have libibverbs' own code read and write every structure here rather
// than comparing with numbers of ours.
//
// Everything lives in namespace uroce::pabi34 so that a later ABI (57, 59,
// ...) can get its own header and namespace beside this one; code that does
// not care which ABI it is built for says `namespace pabi = uroce::pabi34;`.
//
// Member names follow the ABI so the rdma-core sources can be read alongside.
// Public types (ibv_*, verbs_context) come from <infiniband/verbs.h>.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>
#include <time.h>

#include <cstddef>
#include <cstdint>

namespace uroce::pabi34 {

// ---------------------------------------------------------------------------
// Matching a device to a provider.

// How a match entry is compared. libibverbs tries, in order: the kernel
// driver id (netlink only), the string "rdma_device:N<ibdev name>" and then
// the contents of <ibdev>/device/modalias, each fnmatch()ed against the
// Modalias entries. With no kernel RDMA only the name form exists.
enum class MatchKind : std::uint8_t {
    Sentinel = 0,  // ends the table
    Pci = 1,
    Modalias = 2,
    DriverId = 3,
};

struct verbs_match_ent {
    void* driver_data;
    union {
        const char* modalias;  // an fnmatch() pattern
        std::uint64_t driver_id;
    } u;
    std::uint16_t vendor;
    std::uint16_t device;
    MatchKind kind;
};

// Bits of verbs_sysfs_dev::flags: which lazily read values are cached.
enum : unsigned int {
    VSYSFS_READ_MODALIAS = 1u << 0,
    VSYSFS_READ_NODE_GUID = 1u << 1,
};

// The intrusive list link libibverbs threads its own lists through (ccan
// list). Providers never follow it; it only has to take the right space.
struct list_node {
    list_node* next;
    list_node* prev;
};

// What libibverbs learnt about one device from sysfs (or netlink). It owns
// the record: a provider may read it (alloc_device receives it, and
// verbs_device::sysfs points at it afterwards) but never writes or frees it.
struct verbs_sysfs_dev {
    list_node entry;
    void* provider_data;
    const verbs_match_ent* match;  // the entry that matched, set before alloc_device
    unsigned int flags;            // VSYSFS_READ_*
    char sysfs_name[IBV_SYSFS_NAME_MAX];  // the uverbs directory name, e.g. uverbs_uroce0
    dev_t sysfs_cdev;
    char ibdev_name[IBV_SYSFS_NAME_MAX];  // e.g. uroce0
    char ibdev_path[IBV_SYSFS_PATH_MAX];  // $SYSFS_PATH/class/infiniband/<ibdev_name>
    char modalias[512];
    std::uint64_t node_guid;  // host order; valid once VSYSFS_READ_NODE_GUID is set
    std::uint32_t driver_id;  // 0 (unknown) without netlink
    enum ibv_node_type node_type;
    int ibdev_idx;            // -1 without netlink
    std::uint32_t num_ports;
    std::uint32_t abi_ver;    // from <uverbs dir>/abi_version, 0 when absent
    struct timespec time_created;
};

struct verbs_device;

// The provider's description of itself, registered once per process.
struct verbs_device_ops {
    const char* name;

    // Accepted range of the device's abi_version (verbs_sysfs_dev::abi_ver).
    std::uint32_t match_min_abi_version;
    std::uint32_t match_max_abi_version;
    const verbs_match_ent* match_table;  // ends with a Sentinel entry
    const verbs_device_ops** static_providers;  // only for static builds of rdma-core

    // Optional; when set it decides alone (after the table was tried).
    bool (*match_device)(verbs_sysfs_dev* sysfs_dev);

    // cmd_fd is the opened /dev/infiniband node (or -1); ownership passes in,
    // and it must be closed on failure.
    ::verbs_context* (*alloc_context)(ibv_device* device, int cmd_fd, void* private_data);
    ::verbs_context* (*import_context)(ibv_device* device, int cmd_fd);

    verbs_device* (*alloc_device)(verbs_sysfs_dev* sysfs_dev);
    void (*uninit_device)(verbs_device* device);
};

// Bits of verbs_device::core_support.
enum : std::uint64_t {
    // The device honours the optional MR access flags (e.g. relaxed ordering);
    // without it ibv_reg_mr strips them before the provider sees them.
    CORE_SUPPORT_OPTIONAL_MR_ACCESS = 1u << 0,
};

// One device, allocated by the provider in alloc_device (usually as the first
// member of a larger structure) and freed in uninit_device when libibverbs
// drops its last reference. libibverbs fills in `device`, ops, refcount and
// sysfs after alloc_device returns.
struct verbs_device {
    ibv_device device;  // first: libibverbs converts ibv_device* back by cast
    const verbs_device_ops* ops;
    int refcount;       // a C11 atomic_int in libibverbs, which alone touches it
    list_node entry;
    verbs_sysfs_dev* sysfs;  // null for devices not found through sysfs
    std::uint64_t core_support;  // CORE_SUPPORT_*, set by the provider
};

struct verbs_mr;

// ---------------------------------------------------------------------------
// The operations of an open context. The order is the ABI (rdma-core keeps
// the table sorted by name); verbs_set_ops() copies every non-null entry and
// a null entry keeps libibverbs' stub, which fails with EOPNOTSUPP.
struct verbs_context_ops {
    int (*advise_mr)(ibv_pd* pd, enum ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* sg_list,
                     std::uint32_t num_sges);
    ibv_dm* (*alloc_dm)(ibv_context* context, ibv_alloc_dm_attr* attr);
    ibv_mw* (*alloc_mw)(ibv_pd* pd, enum ibv_mw_type type);
    ibv_mr* (*alloc_null_mr)(ibv_pd* pd);
    ibv_pd* (*alloc_parent_domain)(ibv_context* context, ibv_parent_domain_init_attr* attr);
    ibv_pd* (*alloc_pd)(ibv_context* context);
    ibv_td* (*alloc_td)(ibv_context* context, ibv_td_init_attr* init_attr);
    void (*async_event)(ibv_context* context, ibv_async_event* event);
    int (*attach_counters_point_flow)(ibv_counters* counters, ibv_counter_attach_attr* attr, ibv_flow* flow);
    int (*attach_mcast)(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid);
    int (*bind_mw)(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind);
    int (*close_xrcd)(ibv_xrcd* xrcd);
    void (*cq_event)(ibv_cq* cq);
    ibv_ah* (*create_ah)(ibv_pd* pd, ibv_ah_attr* attr);
    ibv_counters* (*create_counters)(ibv_context* context, ibv_counters_init_attr* init_attr);
    ibv_cq* (*create_cq)(ibv_context* context, int cqe, ibv_comp_channel* channel, int comp_vector);
    ibv_cq_ex* (*create_cq_ex)(ibv_context* context, ibv_cq_init_attr_ex* init_attr);
    ibv_flow* (*create_flow)(ibv_qp* qp, ibv_flow_attr* flow_attr);
    ibv_flow_action* (*create_flow_action_esp)(ibv_context* context, ibv_flow_action_esp_attr* attr);
    ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
    ibv_qp* (*create_qp_ex)(ibv_context* context, ibv_qp_init_attr_ex* qp_init_attr_ex);
    ibv_rwq_ind_table* (*create_rwq_ind_table)(ibv_context* context, ibv_rwq_ind_table_init_attr* init_attr);
    ibv_srq* (*create_srq)(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr);
    ibv_srq* (*create_srq_ex)(ibv_context* context, ibv_srq_init_attr_ex* srq_init_attr_ex);
    ibv_wq* (*create_wq)(ibv_context* context, ibv_wq_init_attr* wq_init_attr);
    int (*dealloc_mw)(ibv_mw* mw);
    int (*dealloc_pd)(ibv_pd* pd);
    int (*dealloc_td)(ibv_td* td);
    int (*dereg_mr)(verbs_mr* vmr);
    int (*destroy_ah)(ibv_ah* ah);
    int (*destroy_counters)(ibv_counters* counters);
    int (*destroy_cq)(ibv_cq* cq);
    int (*destroy_flow)(ibv_flow* flow);
    int (*destroy_flow_action)(ibv_flow_action* action);
    int (*destroy_qp)(ibv_qp* qp);
    int (*destroy_rwq_ind_table)(ibv_rwq_ind_table* rwq_ind_table);
    int (*destroy_srq)(ibv_srq* srq);
    int (*destroy_wq)(ibv_wq* wq);
    int (*detach_mcast)(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid);
    void (*free_context)(ibv_context* context);
    int (*free_dm)(ibv_dm* dm);
    int (*get_srq_num)(ibv_srq* srq, std::uint32_t* srq_num);
    ibv_dm* (*import_dm)(ibv_context* context, std::uint32_t dm_handle);
    ibv_mr* (*import_mr)(ibv_pd* pd, std::uint32_t mr_handle);
    ibv_pd* (*import_pd)(ibv_context* context, std::uint32_t pd_handle);
    int (*modify_cq)(ibv_cq* cq, ibv_modify_cq_attr* attr);
    int (*modify_flow_action_esp)(ibv_flow_action* action, ibv_flow_action_esp_attr* attr);
    int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
    int (*modify_qp_rate_limit)(ibv_qp* qp, ibv_qp_rate_limit_attr* attr);
    int (*modify_srq)(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask);
    int (*modify_wq)(ibv_wq* wq, ibv_wq_attr* wq_attr);
    ibv_qp* (*open_qp)(ibv_context* context, ibv_qp_open_attr* attr);
    ibv_xrcd* (*open_xrcd)(ibv_context* context, ibv_xrcd_init_attr* xrcd_init_attr);
    int (*poll_cq)(ibv_cq* cq, int num_entries, ibv_wc* wc);
    int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
    int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
    int (*post_srq_ops)(ibv_srq* srq, ibv_ops_wr* op, ibv_ops_wr** bad_op);
    int (*post_srq_recv)(ibv_srq* srq, ibv_recv_wr* recv_wr, ibv_recv_wr** bad_recv_wr);
    // attr_size is how much of *attr the caller has: 232 bytes (the plain
    // ibv_device_attr) from ibv_query_device, sizeof(ibv_device_attr_ex)
    // from ibv_query_device_ex. Write no more than that.
    int (*query_device_ex)(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                           std::size_t attr_size);
    int (*query_ece)(ibv_qp* qp, ibv_ece* ece);
    int (*query_port)(ibv_context* context, std::uint8_t port_num, ibv_port_attr* port_attr);
    int (*query_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr);
    int (*query_qp_data_in_order)(ibv_qp* qp, enum ibv_wr_opcode op, std::uint32_t flags);
    int (*query_rt_values)(ibv_context* context, ibv_values_ex* values);
    int (*query_srq)(ibv_srq* srq, ibv_srq_attr* srq_attr);
    int (*read_counters)(ibv_counters* counters, std::uint64_t* counters_value, std::uint32_t ncounters,
                         std::uint32_t flags);
    ibv_mr* (*reg_dm_mr)(ibv_pd* pd, ibv_dm* dm, std::uint64_t dm_offset, std::size_t length, unsigned int access);
    ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd,
                             int access);
    // Must return the ibv_mr inside a verbs_mr with mr_type and access set.
    ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t hca_va, int access);
    int (*req_notify_cq)(ibv_cq* cq, int solicited_only);
    int (*rereg_mr)(verbs_mr* vmr, int flags, ibv_pd* pd, void* addr, std::size_t length, int access);
    int (*resize_cq)(ibv_cq* cq, int cqe);
    int (*set_ece)(ibv_qp* qp, ibv_ece* ece);
    void (*unimport_dm)(ibv_dm* dm);
    void (*unimport_mr)(ibv_mr* mr);
    void (*unimport_pd)(ibv_pd* pd);
};

// Every entry is one function pointer; the test checks libibverbs finds each
// of them where we put it.
inline constexpr std::size_t kContextOpsCount = 76;
static_assert(sizeof(verbs_context_ops) == kContextOpsCount * sizeof(void (*)()),
              "verbs_context_ops must be exactly the ABI's 76 function pointers");

// ---------------------------------------------------------------------------
// Objects whose layout libibverbs reads.

// What kind of memory region: ibv_dereg_mr reads it (with access) to decide
// whether to undo the fork protection ibv_reg_mr applied.
enum class MrType : std::uint32_t {
    Mr = 0,
    NullMr = 1,
    ImportedMr = 2,
    DmabufMr = 3,
};

// reg_mr hands libibverbs the ibv_mr inside one of these.
struct verbs_mr {
    ::ibv_mr ibv_mr;  // first: libibverbs converts ibv_mr* back by cast
    MrType mr_type;
    int access;     // the access flags as registered
};

// Bits of verbs_qp::comp_mask.
enum : std::uint32_t {
    VERBS_QP_XRCD = 1u << 0,
    VERBS_QP_EX = 1u << 1,  // qp_ex is valid: ibv_qp_to_qp_ex() returns it
};

struct verbs_xrcd;  // only the kernel command helpers look inside

// A queue pair as libibverbs sees it: ibv_qp_to_qp_ex() reads comp_mask right
// after the union, so every QP a provider creates must be laid out like this
// (comp_mask 0 when the extended work-request API is not offered).
struct verbs_qp {
    union {
        ibv_qp qp;
        ibv_qp_ex qp_ex;
    };
    std::uint32_t comp_mask;
    verbs_xrcd* xrcd;
};

// A completion queue usable both as ibv_cq and ibv_cq_ex (whose first member
// is laid out like ibv_cq).
struct verbs_cq {
    union {
        ibv_cq cq;
        ibv_cq_ex cq_ex;
    };
};

// ---------------------------------------------------------------------------
// Functions libibverbs exports with symbol version IBVERBS_PRIVATE_34. They
// bind to that version at link time; verbs_register_driver_34 exists in no
// other version, so a plugin built here fails to load (rather than misbehave)
// under a libibverbs with a different private ABI.
extern "C" {

// Adds the provider to libibverbs' list; call it from a constructor of the
// plugin.
void verbs_register_driver_34(const verbs_device_ops* ops);

// Allocates alloc_size zeroed bytes and initialises the verbs_context found
// `context_offset` bytes into them (the offset is passed as a pointer value,
// as in offsetof). Takes ownership of cmd_fd (closed on failure). Sets
// async_fd to -1 and every op to libibverbs' stubs. Holds a reference on
// the device until verbs_uninit_context. (verbs_init_context, which would
// initialise a context the provider allocated itself, is not exported.)
void* _verbs_init_and_alloc_context(ibv_device* device, int cmd_fd, std::size_t alloc_size,
                                    ::verbs_context* context_offset, std::uint32_t driver_id);

// Installs the non-null entries of *ops.
void verbs_set_ops(::verbs_context* vctx, const verbs_context_ops* ops);

// Releases what _verbs_init_and_alloc_context set up, closes cmd_fd and
// async_fd when not -1, and drops the device reference. Does not free the
// allocation.
void verbs_uninit_context(::verbs_context* vctx);

// Fills the generic part of a new CQ (context, channel, user context,
// counters, mutex, cond), taking a reference on the channel.
void verbs_init_cq(ibv_cq* cq, ibv_context* context, ibv_comp_channel* channel, void* cq_context);

// What ibv_open_device runs: opens the device node when the device came from
// sysfs, calls the provider's alloc_context, then installs libibverbs' own
// wrappers on top (e.g. for query_port and create_cq_ex).
ibv_context* verbs_open_device(ibv_device* device, void* private_data);

// Reads <ibdev_path>/<formatted name> into buf (trailing newline removed);
// returns the length or -1 with errno.
int ibv_read_ibdev_sysfs_file(char* buf, std::size_t size, verbs_sysfs_dev* sysfs_dev, const char* fnfmt, ...)
    __attribute__((format(printf, 4, 5)));

}  // extern "C"

}  // namespace uroce::pabi34
