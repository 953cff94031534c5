/*
 * device.c - enumerating OpenCL platforms and devices and resolving a device
 * selector.
 *
 * Enumeration creates nothing: it only queries clGetPlatformIDs /
 * clGetDeviceIDs / clGetDeviceInfo into plain clf_device_info records, so
 * `clformer devices` works even where a context could not be created.
 *
 * Selectors, tried in this order:
 *   ""/NULL           first GPU, else first CPU, else device 0
 *   "N"               global index N
 *   "P:D"             device D of platform P
 *   "gpu" "cpu" "accelerator" [":K"]   K-th device of that type (default 0)
 *   anything else     case-insensitive substring of the device name (first match)
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"

#define MAX_PLATFORMS 32
#define MAX_DEVICES 64

static void info_str(cl_device_id d, cl_device_info what, char *out, size_t cap)
{
    out[0] = '\0';
    if (clGetDeviceInfo(d, what, cap, out, NULL) != CL_SUCCESS)
        snprintf(out, cap, "?");
    out[cap - 1] = '\0';
    /* Trim trailing spaces some drivers leave. */
    size_t n = strlen(out);
    while (n > 0 && isspace((unsigned char)out[n - 1]))
        out[--n] = '\0';
}

/* The device's extension string (malloc'ed; "" when it reports none), or
 * NULL when out of memory: a failed allocation must not read as a missing
 * extension (other kernels would be built). */
static char *extensions(cl_device_id d)
{
    size_t n = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS)
        n = 0;
    char *s = malloc(n + 1);
    if (s == NULL)
        return NULL;
    if (n == 0 || clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, s, NULL) != CL_SUCCESS)
        n = 0;
    s[n] = '\0';
    return s;
}

static int has_extension(const char *s, const char *ext)
{
    const size_t el = strlen(ext);
    for (const char *p = strstr(s, ext); p != NULL; p = strstr(p + 1, ext))
        if ((p == s || p[-1] == ' ') && (p[el] == ' ' || p[el] == '\0'))
            return 1;
    return 0;
}

/* o from the device's queries; 0, or -1 when out of host memory. */
static int fill_info(cl_platform_id p, cl_device_id d, clf_device_info *o)
{
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof o->platform, o->platform, NULL);
    o->platform[sizeof o->platform - 1] = '\0';
    clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof o->platform_version, o->platform_version,
                      NULL);
    o->platform_version[sizeof o->platform_version - 1] = '\0';
    info_str(d, CL_DEVICE_NAME, o->name, sizeof o->name);
    info_str(d, CL_DEVICE_VENDOR, o->vendor, sizeof o->vendor);
    info_str(d, CL_DRIVER_VERSION, o->driver_version, sizeof o->driver_version);
    info_str(d, CL_DEVICE_OPENCL_C_VERSION, o->cl_c_version, sizeof o->cl_c_version);

    cl_device_type t = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    snprintf(o->type, sizeof o->type, "%s",
             (t & CL_DEVICE_TYPE_GPU)           ? "gpu"
             : (t & CL_DEVICE_TYPE_CPU)         ? "cpu"
             : (t & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                : "other");
    cl_uint u = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof u, &u, NULL);
    o->compute_units = u;
    u = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof u, &u, NULL);
    o->clock_mhz = u;
    cl_ulong ul = 0;
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof ul, &ul, NULL);
    o->global_mem = ul;
    ul = 0;
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof ul, &ul, NULL);
    o->local_mem = ul;
    cl_device_local_mem_type lt = CL_LOCAL;
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_TYPE, sizeof lt, &lt, NULL);
    o->local_mem_is_global = lt == CL_GLOBAL;
    ul = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ul, &ul, NULL);
    o->max_alloc = ul;
    size_t wg = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    o->max_work_group = wg;
    u = 0;
    clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof u, &u, NULL);
    o->mem_base_align = u;
    u = 0;
    clGetDeviceInfo(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof u, &u, NULL);
    o->pref_vec_float = u;
    char *ext = extensions(d);
    if (ext == NULL)
        return -1;
    o->fp16 = has_extension(ext, "cl_khr_fp16");
    o->fp64 = has_extension(ext, "cl_khr_fp64");
    o->subgroups =
        has_extension(ext, "cl_khr_subgroups") || has_extension(ext, "cl_intel_subgroups");
    free(ext);
    /* a device that reports both CPU and GPU (a simulator) is taken as a GPU */
    o->serial_groups =
        ((t & CL_DEVICE_TYPE_CPU) && !(t & CL_DEVICE_TYPE_GPU)) || o->local_mem_is_global;
    return 0;
}

clf_status clf_devices_list(clf_device_info **out, int *count, clf_error *err)
{
    *out = NULL;
    *count = 0;
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    cl_int rc = clGetPlatformIDs(MAX_PLATFORMS, plats, &np);
    if (rc == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (rc == CL_SUCCESS && np == 0))
        return clf_error_set(
            err, CLF_ERR_NO_PLATFORM,
            "no OpenCL platform found. Install a driver: for the CPU, "
            "`apt-get install pocl-opencl-icd ocl-icd-libopencl1` (Debian/Ubuntu); "
            "for GPUs, the vendor's OpenCL driver, which must register an .icd "
            "file in /etc/OpenCL/vendors/");
    if (clf_cl_check(rc, err, "clGetPlatformIDs") != CLF_OK)
        return CLF_ERR_OPENCL;
    if (np > MAX_PLATFORMS)
        np = MAX_PLATFORMS;

    clf_device_info *list = calloc(MAX_PLATFORMS * MAX_DEVICES, sizeof *list);
    if (list == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory listing devices");
    int n = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = 0;
        rc = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd);
        if (rc == CL_DEVICE_NOT_FOUND || nd == 0)
            continue;
        if (rc != CL_SUCCESS)
            continue; /* a broken platform must not hide the others */
        if (nd > MAX_DEVICES)
            nd = MAX_DEVICES;
        for (cl_uint d = 0; d < nd; d++) {
            clf_device_info *o = &list[n];
            if (fill_info(plats[p], devs[d], o) != 0) {
                free(list);
                return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory listing devices");
            }
            o->index = n;
            o->platform_index = (int)p;
            o->device_index = (int)d;
            n++;
        }
    }
    if (n == 0) {
        free(list);
        return clf_error_set(err, CLF_ERR_NO_PLATFORM,
                             "OpenCL platforms were found but they report no devices. For the "
                             "CPU install PoCL: `apt-get install pocl-opencl-icd`");
    }
    *out = list;
    *count = n;
    return CLF_OK;
}

static int parse_uint(const char *s, const char *end, int *out)
{
    if (s == end)
        return 0;
    long v = 0;
    for (const char *p = s; p < end; p++) {
        if (!isdigit((unsigned char)*p) || v > 100000)
            return 0;
        v = v * 10 + (*p - '0');
    }
    *out = (int)v;
    return 1;
}

static int icontains(const char *hay, const char *needle)
{
    size_t nl = strlen(needle);
    for (const char *h = hay; *h; h++) {
        size_t i = 0;
        while (i < nl && h[i] && tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == nl)
            return 1;
    }
    return nl == 0;
}

static int nth_of_type(const clf_device_info *devs, int count, const char *type, int k)
{
    for (int i = 0; i < count; i++)
        if (strcmp(devs[i].type, type) == 0 && k-- == 0)
            return i;
    return -1;
}

static clf_status no_match(const clf_device_info *devs, int count, const char *sel, const char *why,
                           clf_error *err)
{
    char list[4096];
    size_t used = 0;
    list[0] = '\0';
    for (int i = 0; i < count && used < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "\n  %d (%d:%d) %s: %s [%s]", i,
                         devs[i].platform_index, devs[i].device_index, devs[i].type, devs[i].name,
                         devs[i].platform);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return clf_error_set(err, CLF_ERR_NO_DEVICE,
                         "device selector '%s' %s. Selectors: an index (0), platform:device "
                         "(1:0), a type (gpu, cpu, accelerator, gpu:1) or part of a device "
                         "name. Available devices:%s",
                         sel, why, list);
}

clf_status clf_devices_select(const clf_device_info *devs, int count, const char *sel, int *index,
                              clf_error *err)
{
    if (count <= 0)
        return clf_error_set(err, CLF_ERR_NO_DEVICE, "no OpenCL devices to select from");
    if (sel == NULL || sel[0] == '\0') {
        int i = nth_of_type(devs, count, "gpu", 0);
        if (i < 0)
            i = nth_of_type(devs, count, "cpu", 0);
        *index = i < 0 ? 0 : i;
        return CLF_OK;
    }
    const char *end = sel + strlen(sel);
    const char *colon = strchr(sel, ':');
    int a, b;
    if (colon == NULL && parse_uint(sel, end, &a)) {
        if (a >= count)
            return no_match(devs, count, sel, "is out of range", err);
        *index = a;
        return CLF_OK;
    }
    if (colon != NULL && parse_uint(sel, colon, &a) && parse_uint(colon + 1, end, &b)) {
        for (int i = 0; i < count; i++)
            if (devs[i].platform_index == a && devs[i].device_index == b) {
                *index = i;
                return CLF_OK;
            }
        return no_match(devs, count, sel, "names no platform:device pair", err);
    }
    static const char *const types[] = {"gpu", "cpu", "accelerator"};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t tl = strlen(types[t]);
        if (strncmp(sel, types[t], tl) != 0)
            continue;
        int k = 0;
        if (sel[tl] == ':') {
            if (!parse_uint(sel + tl + 1, end, &k))
                return no_match(devs, count, sel, "has a bad ordinal after the type", err);
        } else if (sel[tl] != '\0') {
            continue;
        }
        int i = nth_of_type(devs, count, types[t], k);
        if (i < 0)
            return no_match(devs, count, sel, "matches no device of that type", err);
        *index = i;
        return CLF_OK;
    }
    for (int i = 0; i < count; i++)
        if (icontains(devs[i].name, sel)) {
            *index = i;
            return CLF_OK;
        }
    return no_match(devs, count, sel, "matches no device", err);
}
