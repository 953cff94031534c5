/*
 * runtime.c - the device handle: context and in-order queue on the selected
 * device, buffers, kernel launches and profiling.
 *
 * The handle is the library's only mutable state. It owns the program set
 * (program.c), the GEMM engine state (gemm/) and, when profiling, the list
 * of launch events, which is folded into per-kernel totals whenever it grows
 * past a bound so that long runs do not accumulate events.
 *
 * Deliberately not here: reading the environment (the CLI passes options in),
 * printing, and any blocking call inside launches.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/runtime_internal.h"

#define PROFILE_PENDING_MAX 4096
#define PROFILE_NAMES_MAX 256

struct clf_buffer {
    cl_mem mem;
    size_t bytes;
    clf_runtime *rt; /* whose allocation count it is in */
};

typedef struct pending_event {
    cl_event ev;
    char name[64];
} pending_event;

struct clf_runtime {
    clf_runtime_options opt;
    char cache_dir[1024];
    char gemm_config[64];
    char kernel_dir[1024];
    char build_options[512]; /* the compiler options of every program */
    char device_key[512];
    clf_device_info info;
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    clf_program_set *programs;
    void *gemm_state;
    /* profiling */
    pending_event *pending;
    int n_pending;
    clf_profile_entry *totals;
    int n_totals;
    /* device memory of live buffers, and its high-water mark */
    size_t mem_now, mem_peak;
    int cache_write_told; /* the "cache-write" notice was given */
    uint64_t drains;      /* host waits for all the queue holds (clf_runtime_drains) */
};

clf_runtime_options clf_runtime_options_default(void)
{
    clf_runtime_options o;
    memset(&o, 0, sizeof o);
    o.gemm = CLF_GEMM_AUTO;
    return o;
}

int clf_binaries_parse(const char *text, clf_binaries *out)
{
    *out = CLF_BINARIES_KEEP;
    if (text == NULL || text[0] == '\0' || strcmp(text, "keep") == 0)
        return 1;
    if (strcmp(text, "notes") == 0) {
        *out = CLF_BINARIES_NOTE;
        return 1;
    }
    return 0;
}

void clf_cache_dir_default(const char *clformer_cache_dir, const char *xdg_cache_home,
                           const char *home, char *out, size_t cap)
{
    if (cap == 0)
        return;
    out[0] = '\0';
    if (clformer_cache_dir != NULL && clformer_cache_dir[0] != '\0')
        snprintf(out, cap, "%s", clformer_cache_dir);
    else if (xdg_cache_home != NULL && xdg_cache_home[0] == '/')
        snprintf(out, cap, "%s/clformer", xdg_cache_home);
    else if (home != NULL && home[0] != '\0')
        snprintf(out, cap, "%s/.cache/clformer", home);
}

static void make_device_key(clf_runtime *rt)
{
    char raw[1024];
    snprintf(raw, sizeof raw, "%s-%s-%s", rt->info.name, rt->info.driver_version,
             rt->info.platform_version);
    size_t j = 0;
    for (size_t i = 0; raw[i] != '\0' && j + 1 < sizeof rt->device_key; i++) {
        char c = raw[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.';
        rt->device_key[j++] = ok ? c : '_';
    }
    rt->device_key[j] = '\0';
}

clf_status clf_runtime_create(clf_runtime **out, const clf_runtime_options *opt, clf_error *err)
{
    *out = NULL;
    clf_device_info *devs = NULL;
    int n = 0, idx = 0;
    clf_status st = clf_devices_list(&devs, &n, err);
    if (st != CLF_OK)
        return st;
    clf_runtime_options o = opt != NULL ? *opt : clf_runtime_options_default();
    st = clf_devices_select(devs, n, o.device, &idx, err);
    if (st != CLF_OK) {
        free(devs);
        return st;
    }
    clf_runtime *rt = calloc(1, sizeof *rt);
    if (rt == NULL) {
        free(devs);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory creating the runtime");
    }
    rt->opt = o;
    rt->info = devs[idx];
    free(devs);
    if (o.cache_dir != NULL && !o.no_cache) {
        struct stat sb;
        if (stat(o.cache_dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
            free(rt);
            return clf_error_set(err, CLF_ERR_ARG,
                                 "the cache directory %s exists and is not a directory",
                                 o.cache_dir);
        }
        snprintf(rt->cache_dir, sizeof rt->cache_dir, "%s", o.cache_dir);
    }
    if (o.gemm_config != NULL)
        snprintf(rt->gemm_config, sizeof rt->gemm_config, "%s", o.gemm_config);
    if (o.kernel_dir != NULL)
        snprintf(rt->kernel_dir, sizeof rt->kernel_dir, "%s", o.kernel_dir);
    snprintf(rt->build_options, sizeof rt->build_options, "-cl-std=CL1.2%s%s",
             o.build_options != NULL && o.build_options[0] ? " " : "",
             o.build_options != NULL ? o.build_options : "");
    /* The copies above own the strings; the options must not point at caller memory. */
    rt->opt.device = NULL;
    rt->opt.cache_dir = rt->cache_dir[0] ? rt->cache_dir : NULL;
    rt->opt.kernel_dir = rt->kernel_dir[0] ? rt->kernel_dir : NULL;
    rt->opt.gemm_config = rt->gemm_config[0] ? rt->gemm_config : NULL;
    rt->opt.build_options = rt->build_options;
    make_device_key(rt);

    cl_platform_id plats[32];
    cl_uint np = 0;
    cl_int rc = clGetPlatformIDs(32, plats, &np);
    if (clf_cl_check(rc, err, "clGetPlatformIDs") != CLF_OK)
        goto fail;
    rt->platform = plats[rt->info.platform_index];
    cl_device_id ds[64];
    cl_uint nd = 0;
    rc = clGetDeviceIDs(rt->platform, CL_DEVICE_TYPE_ALL, 64, ds, &nd);
    if (clf_cl_check(rc, err, "clGetDeviceIDs") != CLF_OK)
        goto fail;
    rt->device = ds[rt->info.device_index];

    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)rt->platform, 0};
    rt->ctx = clCreateContext(props, 1, &rt->device, NULL, NULL, &rc);
    if (clf_cl_check(rc, err, "clCreateContext") != CLF_OK)
        goto fail;
    cl_command_queue_properties qp = o.profile ? CL_QUEUE_PROFILING_ENABLE : 0;
    /* clCreateCommandQueue is deprecated in 2.0 but is the 1.2 entry point we target. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    rt->queue = clCreateCommandQueue(rt->ctx, rt->device, qp, &rc);
#pragma GCC diagnostic pop
    if (clf_cl_check(rc, err, "clCreateCommandQueue") != CLF_OK)
        goto fail;
    rt->programs = clf_program_set_create();
    if (rt->programs == NULL) {
        clf_error_set(err, CLF_ERR_MEMORY, "out of host memory creating the program set");
        goto fail;
    }
    /* the kernels' shape, before any other program is built (never in a
     * profile: the measurement is the runtime's, not the caller's) */
    rt->opt.profile = 0;
    if (o.notify != NULL)
        o.notify(o.notify_user, "device", rt->info.name);
    clf_shape_decide(rt, &rt->info, o.shape);
    rt->opt.profile = o.profile;
    if (o.profile) {
        rt->pending = calloc(PROFILE_PENDING_MAX, sizeof *rt->pending);
        rt->totals = calloc(PROFILE_NAMES_MAX, sizeof *rt->totals);
        if (rt->pending == NULL || rt->totals == NULL) {
            clf_error_set(err, CLF_ERR_MEMORY, "out of host memory for profiling");
            goto fail;
        }
    }
    *out = rt;
    return CLF_OK;
fail:
    if (err != NULL && err->status != CLF_OK)
        clf_error_prefix(err, "opening device '%s'", rt->info.name);
    clf_runtime_destroy(rt);
    return err != NULL ? err->status : CLF_ERR_OPENCL;
}

static void profile_fold(clf_runtime *rt);

void clf_runtime_destroy(clf_runtime *rt)
{
    if (rt == NULL)
        return;
    if (rt->queue != NULL)
        clFinish(rt->queue);
    if (rt->pending != NULL) {
        for (int i = 0; i < rt->n_pending; i++)
            clReleaseEvent(rt->pending[i].ev);
    }
    free(rt->pending);
    free(rt->totals);
    clf_gemm_state_destroy(rt->gemm_state);
    clf_program_set_destroy(rt->programs);
    if (rt->queue != NULL)
        clReleaseCommandQueue(rt->queue);
    if (rt->ctx != NULL)
        clReleaseContext(rt->ctx);
    free(rt);
}

const clf_device_info *clf_runtime_device(const clf_runtime *rt) { return &rt->info; }
const clf_runtime_options *clf_runtime_options_get(const clf_runtime *rt) { return &rt->opt; }

void clf_runtime_cache_write_failed(clf_runtime *rt, const char *path, int errnum)
{
    if (rt->cache_write_told || rt->opt.notify == NULL)
        return;
    rt->cache_write_told = 1;
    char what[1400];
    snprintf(what, sizeof what, "%s: %s", path, strerror(errnum != 0 ? errnum : EIO));
    rt->opt.notify(rt->opt.notify_user, "cache-write", what);
}
cl_command_queue clf_runtime_queue(const clf_runtime *rt) { return rt->queue; }
cl_context clf_runtime_context(const clf_runtime *rt) { return rt->ctx; }
cl_device_id clf_runtime_device_id(const clf_runtime *rt) { return rt->device; }
const char *clf_runtime_cache_dir(const clf_runtime *rt) { return rt->cache_dir; }
const char *clf_runtime_device_key(const clf_runtime *rt) { return rt->device_key; }
void **clf_runtime_gemm_slot(clf_runtime *rt) { return &rt->gemm_state; }
clf_program_set *clf_runtime_programs(clf_runtime *rt) { return rt->programs; }
int clf_runtime_profiling(const clf_runtime *rt) { return rt->opt.profile; }

clf_status clf_runtime_finish(clf_runtime *rt, clf_error *err)
{
    rt->drains++;
    return clf_cl_check(clFinish(rt->queue), err, "clFinish");
}

uint64_t clf_runtime_drains(const clf_runtime *rt) { return rt->drains; }

clf_status clf_runtime_marker(clf_runtime *rt, clf_event **done, clf_error *err)
{
    cl_event ev = NULL;
    *done = NULL;
    clf_status s = clf_cl_check(clEnqueueMarkerWithWaitList(rt->queue, 0, NULL, &ev), err,
                                "clEnqueueMarkerWithWaitList");
    if (s == CLF_OK)
        *done = (clf_event *)(void *)ev;
    return s;
}

clf_status clf_runtime_flush(clf_runtime *rt, clf_error *err)
{
    return clf_cl_check(clFlush(rt->queue), err, "clFlush");
}

/* ---- buffers ---------------------------------------------------------------- */

clf_status clf_buffer_create(clf_runtime *rt, size_t bytes, clf_buffer **out, clf_error *err)
{
    *out = NULL;
    if (bytes == 0)
        return clf_error_set(err, CLF_ERR_ARG, "a buffer of 0 bytes was requested");
    if (bytes > rt->info.max_alloc)
        return clf_error_set(err, CLF_ERR_MEMORY,
                             "a buffer of %zu bytes exceeds the device's largest allocation "
                             "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu bytes on %s)",
                             bytes, (unsigned long long)rt->info.max_alloc, rt->info.name);
    clf_buffer *b = calloc(1, sizeof *b);
    if (b == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    cl_int rc;
    b->mem = clCreateBuffer(rt->ctx, CL_MEM_READ_WRITE, bytes, NULL, &rc);
    if (clf_cl_check(rc, err, "clCreateBuffer") != CLF_OK) {
        clf_error_prefix(err, "allocating %zu bytes", bytes);
        free(b);
        return CLF_ERR_OPENCL;
    }
    b->bytes = bytes;
    b->rt = rt;
    rt->mem_now += bytes;
    if (rt->mem_now > rt->mem_peak)
        rt->mem_peak = rt->mem_now;
    *out = b;
    return CLF_OK;
}

void clf_buffer_destroy(clf_buffer *b)
{
    if (b == NULL)
        return;
    if (b->mem != NULL)
        clReleaseMemObject(b->mem);
    b->rt->mem_now -= b->bytes;
    free(b);
}

size_t clf_buffer_size(const clf_buffer *b) { return b->bytes; }
cl_mem clf_buffer_mem(const clf_buffer *b) { return b->mem; }

static clf_status check_range(const clf_buffer *b, size_t off, size_t bytes, clf_error *err,
                              const char *what)
{
    if (b == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "%s: NULL buffer", what);
    if (off > b->bytes || bytes > b->bytes - off)
        return clf_error_set(err, CLF_ERR_ARG,
                             "%s: range [%zu, %zu) is outside the buffer of %zu bytes", what, off,
                             off + bytes, b->bytes);
    return CLF_OK;
}

clf_status clf_buffer_write(clf_runtime *rt, clf_buffer *b, size_t byte_off, const void *src,
                            size_t bytes, clf_error *err)
{
    if (check_range(b, byte_off, bytes, err, "buffer write") != CLF_OK)
        return CLF_ERR_ARG;
    if (bytes == 0)
        return CLF_OK;
    rt->drains++;
    return clf_cl_check(
        clEnqueueWriteBuffer(rt->queue, b->mem, CL_TRUE, byte_off, bytes, src, 0, NULL, NULL), err,
        "clEnqueueWriteBuffer");
}

clf_status clf_buffer_write_async(clf_runtime *rt, clf_buffer *b, size_t byte_off, const void *src,
                                  size_t bytes, clf_error *err)
{
    if (check_range(b, byte_off, bytes, err, "buffer write") != CLF_OK)
        return CLF_ERR_ARG;
    if (bytes == 0)
        return CLF_OK;
    return clf_cl_check(
        clEnqueueWriteBuffer(rt->queue, b->mem, CL_FALSE, byte_off, bytes, src, 0, NULL, NULL), err,
        "clEnqueueWriteBuffer");
}

clf_status clf_buffer_read(clf_runtime *rt, clf_buffer *b, size_t byte_off, void *dst, size_t bytes,
                           clf_error *err)
{
    if (check_range(b, byte_off, bytes, err, "buffer read") != CLF_OK)
        return CLF_ERR_ARG;
    if (bytes == 0)
        return CLF_OK;
    rt->drains++;
    return clf_cl_check(
        clEnqueueReadBuffer(rt->queue, b->mem, CL_TRUE, byte_off, bytes, dst, 0, NULL, NULL), err,
        "clEnqueueReadBuffer");
}

/* A clf_event is the OpenCL event itself. */
clf_status clf_buffer_read_async(clf_runtime *rt, clf_buffer *b, size_t byte_off, void *dst,
                                 size_t bytes, clf_event **done, clf_error *err)
{
    *done = NULL;
    if (check_range(b, byte_off, bytes, err, "buffer read") != CLF_OK)
        return CLF_ERR_ARG;
    cl_event ev = NULL;
    clf_status s = clf_cl_check(bytes > 0 ? clEnqueueReadBuffer(rt->queue, b->mem, CL_FALSE,
                                                                byte_off, bytes, dst, 0, NULL, &ev)
                                          : clEnqueueMarkerWithWaitList(rt->queue, 0, NULL, &ev),
                                err, "clEnqueueReadBuffer");
    if (s != CLF_OK)
        return s;
    *done = (clf_event *)(void *)ev;
    /* start it (and what precedes it) now: the host will wait on it later */
    return clf_cl_check(clFlush(rt->queue), err, "clFlush");
}

clf_status clf_event_wait(clf_event *e, clf_error *err)
{
    if (e == NULL)
        return CLF_OK;
    cl_event ev = (cl_event)(void *)e;
    clf_status s = clf_cl_check(clWaitForEvents(1, &ev), err, "clWaitForEvents");
    clReleaseEvent(ev);
    return s;
}

void clf_event_release(clf_event *e)
{
    if (e != NULL)
        clReleaseEvent((cl_event)(void *)e);
}

clf_status clf_buffer_fill(clf_runtime *rt, clf_buffer *b, size_t byte_off, size_t bytes,
                           uint32_t pattern, clf_error *err)
{
    if (check_range(b, byte_off, bytes, err, "buffer fill") != CLF_OK)
        return CLF_ERR_ARG;
    if (bytes % 4 != 0 || byte_off % 4 != 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "buffer fill: offset %zu and size %zu must be multiples of 4",
                             byte_off, bytes);
    if (bytes == 0)
        return CLF_OK;
    cl_event ev = NULL;
    cl_int rc = clEnqueueFillBuffer(rt->queue, b->mem, &pattern, sizeof pattern, byte_off, bytes, 0,
                                    NULL, rt->opt.profile ? &ev : NULL);
    if (ev != NULL)
        clf_profile_record_event(rt, "fill_buffer", ev);
    return clf_cl_check(rc, err, "clEnqueueFillBuffer");
}

clf_status clf_buffer_copy(clf_runtime *rt, clf_buffer *src, size_t src_off, clf_buffer *dst,
                           size_t dst_off, size_t bytes, clf_error *err)
{
    if (check_range(src, src_off, bytes, err, "buffer copy (source)") != CLF_OK ||
        check_range(dst, dst_off, bytes, err, "buffer copy (destination)") != CLF_OK)
        return CLF_ERR_ARG;
    if (bytes == 0)
        return CLF_OK;
    cl_event ev = NULL;
    cl_int rc = clEnqueueCopyBuffer(rt->queue, src->mem, dst->mem, src_off, dst_off, bytes, 0, NULL,
                                    rt->opt.profile ? &ev : NULL);
    if (ev != NULL)
        clf_profile_record_event(rt, "copy_buffer", ev);
    return clf_cl_check(rc, err, "clEnqueueCopyBuffer");
}

clf_status clf_ptr_write(clf_runtime *rt, clf_ptr p, const float *src, size_t n, clf_error *err)
{
    return clf_buffer_write(rt, p.buf, p.off * 4, src, n * 4, err);
}

clf_status clf_ptr_read(clf_runtime *rt, clf_ptr p, float *dst, size_t n, clf_error *err)
{
    return clf_buffer_read(rt, p.buf, p.off * 4, dst, n * 4, err);
}

clf_status clf_ptr_zero(clf_runtime *rt, clf_ptr p, size_t n, clf_error *err)
{
    return clf_buffer_fill(rt, p.buf, p.off * 4, n * 4, 0u, err);
}

size_t clf_kernel_max_work_group(const clf_kernel *k) { return k->max_wg; }

size_t clf_kernel_required_group(const clf_kernel *k) { return k->reqd_wg; }

clf_status clf_kernel_launch(clf_runtime *rt, clf_kernel *k, int dims, const size_t *global,
                             const size_t *local, int nargs, const clf_arg *args, clf_error *err)
{
    if (dims < 1 || dims > 3)
        return clf_error_set(err, CLF_ERR_ARG, "kernel %s: %d dimensions (1 to 3 allowed)", k->name,
                             dims);
    size_t g[3], l[3];
    size_t items = 1;
    for (int d = 0; d < dims; d++) {
        g[d] = global[d];
        if (local != NULL) {
            l[d] = local[d];
            if (l[d] == 0)
                return clf_error_set(err, CLF_ERR_ARG, "kernel %s: local size 0", k->name);
            g[d] = (g[d] + l[d] - 1) / l[d] * l[d];
            items *= l[d];
        }
        if (g[d] == 0)
            return CLF_OK; /* nothing to do */
    }
    if (local != NULL && items > k->max_wg)
        return clf_error_set(err, CLF_ERR_ARG,
                             "kernel %s: work-group of %zu items exceeds its limit of %zu on "
                             "this device",
                             k->name, items, k->max_wg);
    /* Dimensions 1 and 2 hold at most CLF_MAX_GROUPS_YZ work-groups on some
     * drivers (those built on CUDA grids); OpenCL has no query for it, so
     * every launch keeps to it on every device and long axes go in
     * dimension 0. */
    for (int d = 1; d < dims; d++)
        if (g[d] / (local != NULL ? l[d] : 1) > CLF_MAX_GROUPS_YZ)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "kernel %s: %zu work-groups in dimension %d; dimensions 1 and 2 "
                                 "may hold at most %d (some GPU drivers cap them): put the long "
                                 "axis in dimension 0",
                                 k->name, g[d] / (local != NULL ? l[d] : 1), d, CLF_MAX_GROUPS_YZ);
    for (int i = 0; i < nargs; i++) {
        const clf_arg *a = &args[i];
        cl_int rc;
        switch (a->kind) {
            case CLF_ARG_KIND_BUF: {
                if (a->v.buf == NULL)
                    return clf_error_set(err, CLF_ERR_ARG,
                                         "kernel %s: argument %d is a NULL buffer", k->name, i);
                cl_mem m = a->v.buf->mem;
                rc = clSetKernelArg(k->k, (cl_uint)i, sizeof m, &m);
                break;
            }
            case CLF_ARG_KIND_I32: rc = clSetKernelArg(k->k, (cl_uint)i, 4, &a->v.i32); break;
            case CLF_ARG_KIND_U32: rc = clSetKernelArg(k->k, (cl_uint)i, 4, &a->v.u32); break;
            case CLF_ARG_KIND_U64: {
                cl_ulong v = a->v.u64;
                rc = clSetKernelArg(k->k, (cl_uint)i, sizeof v, &v);
                break;
            }
            case CLF_ARG_KIND_F32: rc = clSetKernelArg(k->k, (cl_uint)i, 4, &a->v.f32); break;
            case CLF_ARG_KIND_LOCAL: rc = clSetKernelArg(k->k, (cl_uint)i, a->v.local, NULL); break;
            default:
                return clf_error_set(err, CLF_ERR_ARG, "kernel %s: argument %d has an unknown kind",
                                     k->name, i);
        }
        if (rc != CL_SUCCESS) {
            char what[128];
            snprintf(what, sizeof what, "clSetKernelArg(%s, %d)", k->name, i);
            return clf_cl_check(rc, err, what);
        }
    }
    cl_event ev = NULL;
    cl_int rc =
        clEnqueueNDRangeKernel(rt->queue, k->k, (cl_uint)dims, NULL, g, local != NULL ? l : NULL, 0,
                               NULL, rt->opt.profile ? &ev : NULL);
    if (rc != CL_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", k->name);
        return clf_cl_check(rc, err, what);
    }
    if (ev != NULL)
        clf_profile_record_event(rt, k->name, ev);
    return CLF_OK;
}

/* ---- profiling ------------------------------------------------------------------ */

static void profile_add_total(clf_runtime *rt, const char *name, uint64_t count, double s)
{
    for (int i = 0; i < rt->n_totals; i++)
        if (strcmp(rt->totals[i].name, name) == 0) {
            rt->totals[i].count += count;
            rt->totals[i].seconds += s;
            return;
        }
    if (rt->n_totals == PROFILE_NAMES_MAX)
        return;
    clf_profile_entry *e = &rt->totals[rt->n_totals++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->count = count;
    e->seconds = s;
}

/* Wait for pending events and fold their times into the totals. */
static void profile_fold(clf_runtime *rt)
{
    if (rt->n_pending == 0)
        return;
    cl_event evs[PROFILE_PENDING_MAX];
    for (int i = 0; i < rt->n_pending; i++)
        evs[i] = rt->pending[i].ev;
    clWaitForEvents((cl_uint)rt->n_pending, evs);
    for (int i = 0; i < rt->n_pending; i++) {
        cl_ulong t0 = 0, t1 = 0;
        double s = 0.0;
        if (clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) ==
                CL_SUCCESS &&
            clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) ==
                CL_SUCCESS &&
            t1 >= t0)
            s = (double)(t1 - t0) * 1e-9;
        profile_add_total(rt, rt->pending[i].name, 1, s);
        clReleaseEvent(evs[i]);
    }
    rt->n_pending = 0;
}

void clf_profile_record_event(clf_runtime *rt, const char *name, cl_event ev)
{
    if (!rt->opt.profile || rt->pending == NULL) {
        clReleaseEvent(ev);
        return;
    }
    if (rt->n_pending == PROFILE_PENDING_MAX)
        profile_fold(rt);
    pending_event *p = &rt->pending[rt->n_pending++];
    p->ev = ev;
    snprintf(p->name, sizeof p->name, "%s", name);
}

static int cmp_entry(const void *a, const void *b)
{
    double x = ((const clf_profile_entry *)a)->seconds, y = ((const clf_profile_entry *)b)->seconds;
    return (x < y) - (x > y);
}

clf_status clf_profile_report(clf_runtime *rt, clf_profile_entry **out, int *count, clf_error *err)
{
    *out = NULL;
    *count = 0;
    if (!rt->opt.profile)
        return clf_error_set(err, CLF_ERR_ARG, "profiling was not enabled for this runtime");
    clFinish(rt->queue);
    profile_fold(rt);
    if (rt->n_totals == 0)
        return CLF_OK;
    clf_profile_entry *e = malloc((size_t)rt->n_totals * sizeof *e);
    if (e == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    memcpy(e, rt->totals, (size_t)rt->n_totals * sizeof *e);
    qsort(e, (size_t)rt->n_totals, sizeof *e, cmp_entry);
    *out = e;
    *count = rt->n_totals;
    return CLF_OK;
}

void clf_profile_reset(clf_runtime *rt)
{
    if (!rt->opt.profile)
        return;
    clFinish(rt->queue);
    profile_fold(rt);
    rt->n_totals = 0;
}

void clf_runtime_memory(const clf_runtime *rt, size_t *now, size_t *peak)
{
    if (now != NULL)
        *now = rt->mem_now;
    if (peak != NULL)
        *peak = rt->mem_peak;
}
