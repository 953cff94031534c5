/*
 * inject.c - fault injection for the test build of the clformer executable
 * (CMake -DCLF_FAULT=ON; never in a release build): the executable is
 * linked with -Wl,--wrap=NAME for every function below, so each call our
 * code makes to one of them comes here first and is a numbered point.
 *
 *   CLFORMER_FAULT=N        the N-th point reached fails, once, with what
 *                           that call returns on a failing system: NULL and
 *                           ENOMEM (allocations), ENOSPC (writes, mkdir), EIO
 *                           (opens, fsync, rename, unlink), CL_OUT_OF_RESOURCES
 *                           (enqueues, clFinish), CL_MEM_OBJECT_ALLOCATION_FAILURE
 *                           (clCreateBuffer), CL_BUILD_PROGRAM_FAILURE
 *                           (clBuildProgram), CL_OUT_OF_HOST_MEMORY (the other
 *                           creations); the rest succeed
 *   CLFORMER_FAULT_COUNT=1  at exit, "clformer-fault: K points, failed: NAME"
 *                           on stderr (K points reached, the failed one named)
 *
 * tests/fault_sweep.sh runs commands once per point. Only our objects'
 * calls are wrapped (the linker's --wrap rewrites the references of the
 * objects it links into the executable); the OpenCL implementation, CLBlast
 * and libc call the real functions. The counter is this test build's only
 * global state; it is atomic because the trainer's helper threads allocate.
 */
#include <CL/cl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static atomic_long reached; /* points reached so far */
static long fail_at = -2;   /* -2: not read yet; 0: none */
static int report;          /* CLFORMER_FAULT_COUNT set */
static const char *failed_name = "none";

static void print_count(void)
{
    fprintf(stderr, "clformer-fault: %ld points, failed: %s\n", (long)atomic_load(&reached),
            failed_name);
}

/* Whether this point (of kind `name`) fails. */
static int hit(const char *name)
{
    if (fail_at == -2) {
        const char *f = getenv("CLFORMER_FAULT"), *c = getenv("CLFORMER_FAULT_COUNT");
        fail_at = f != NULL ? strtol(f, NULL, 10) : 0;
        report = c != NULL && c[0] == '1';
        if (report)
            atexit(print_count);
    }
    const long n = atomic_fetch_add(&reached, 1) + 1;
    if (n != fail_at)
        return 0;
    failed_name = name;
    return 1;
}

/* ---- allocations ------------------------------------------------------------ */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);

void *__wrap_malloc(size_t n)
{
    if (hit("malloc")) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t s)
{
    if (hit("calloc")) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_calloc(n, s);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (hit("realloc")) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    if (hit("strdup")) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_strdup(s);
}

/* ---- files ------------------------------------------------------------------ */

FILE *__real_fopen(const char *path, const char *mode);
int __real_open(const char *path, int flags, ...);
size_t __real_fwrite(const void *p, size_t size, size_t n, FILE *f);
int __real_fflush(FILE *f);
int __real_fsync(int fd);
int __real_rename(const char *from, const char *to);
int __real_unlink(const char *path);
int __real_mkdir(const char *path, mode_t mode);

FILE *__wrap_fopen(const char *path, const char *mode)
{
    if (hit("fopen")) {
        errno = EIO;
        return NULL;
    }
    return __real_fopen(path, mode);
}

int __wrap_open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = (mode_t)va_arg(ap, int);
    va_end(ap);
    if (hit("open")) {
        errno = EIO;
        return -1;
    }
    return __real_open(path, flags, mode);
}

size_t __wrap_fwrite(const void *p, size_t size, size_t n, FILE *f)
{
    if (hit("fwrite")) {
        errno = ENOSPC;
        return 0;
    }
    return __real_fwrite(p, size, n, f);
}

int __wrap_fflush(FILE *f)
{
    if (hit("fflush")) {
        errno = ENOSPC;
        return EOF;
    }
    return __real_fflush(f);
}

int __wrap_fsync(int fd)
{
    if (hit("fsync")) {
        errno = EIO;
        return -1;
    }
    return __real_fsync(fd);
}

int __wrap_rename(const char *from, const char *to)
{
    if (hit("rename")) {
        errno = EIO;
        return -1;
    }
    return __real_rename(from, to);
}

int __wrap_unlink(const char *path)
{
    if (hit("unlink")) {
        errno = EIO;
        return -1;
    }
    return __real_unlink(path);
}

int __wrap_mkdir(const char *path, mode_t mode)
{
    if (hit("mkdir")) {
        errno = ENOSPC;
        return -1;
    }
    return __real_mkdir(path, mode);
}

/* ---- OpenCL ----------------------------------------------------------------- */

#define CL_CREATE(T, NAME, ERRC, PARAMS, ARGS)                                                     \
    T __real_##NAME PARAMS;                                                                        \
    T __wrap_##NAME PARAMS                                                                         \
    {                                                                                              \
        if (hit(#NAME)) {                                                                          \
            if (errcode_ret != NULL)                                                               \
                *errcode_ret = ERRC;                                                               \
            return NULL;                                                                           \
        }                                                                                          \
        return __real_##NAME ARGS;                                                                 \
    }
#define CL_CALL(NAME, ERRC, PARAMS, ARGS)                                                          \
    cl_int __real_##NAME PARAMS;                                                                   \
    cl_int __wrap_##NAME PARAMS { return hit(#NAME) ? ERRC : __real_##NAME ARGS; }

CL_CREATE(cl_context, clCreateContext, CL_OUT_OF_HOST_MEMORY,
          (const cl_context_properties *p, cl_uint n, const cl_device_id *d,
           void(CL_CALLBACK *cb)(const char *, const void *, size_t, void *), void *u,
           cl_int *errcode_ret),
          (p, n, d, cb, u, errcode_ret))
CL_CREATE(cl_command_queue, clCreateCommandQueue, CL_OUT_OF_HOST_MEMORY,
          (cl_context c, cl_device_id d, cl_command_queue_properties p, cl_int *errcode_ret),
          (c, d, p, errcode_ret))
CL_CREATE(cl_mem, clCreateBuffer, CL_MEM_OBJECT_ALLOCATION_FAILURE,
          (cl_context c, cl_mem_flags f, size_t n, void *h, cl_int *errcode_ret),
          (c, f, n, h, errcode_ret))
CL_CREATE(cl_program, clCreateProgramWithSource, CL_OUT_OF_HOST_MEMORY,
          (cl_context c, cl_uint n, const char **s, const size_t *l, cl_int *errcode_ret),
          (c, n, s, l, errcode_ret))
CL_CREATE(cl_program, clCreateProgramWithBinary, CL_OUT_OF_HOST_MEMORY,
          (cl_context c, cl_uint n, const cl_device_id *d, const size_t *l, const unsigned char **b,
           cl_int *st, cl_int *errcode_ret),
          (c, n, d, l, b, st, errcode_ret))
CL_CREATE(cl_kernel, clCreateKernel, CL_OUT_OF_HOST_MEMORY,
          (cl_program p, const char *name, cl_int *errcode_ret), (p, name, errcode_ret))
CL_CALL(clBuildProgram, CL_BUILD_PROGRAM_FAILURE,
        (cl_program p, cl_uint n, const cl_device_id *d, const char *o,
         void(CL_CALLBACK *cb)(cl_program, void *), void *u),
        (p, n, d, o, cb, u))
CL_CALL(clEnqueueNDRangeKernel, CL_OUT_OF_RESOURCES,
        (cl_command_queue q, cl_kernel k, cl_uint dims, const size_t *off, const size_t *g,
         const size_t *l, cl_uint nw, const cl_event *w, cl_event *e),
        (q, k, dims, off, g, l, nw, w, e))
CL_CALL(clEnqueueReadBuffer, CL_OUT_OF_RESOURCES,
        (cl_command_queue q, cl_mem m, cl_bool b, size_t off, size_t n, void *p, cl_uint nw,
         const cl_event *w, cl_event *e),
        (q, m, b, off, n, p, nw, w, e))
CL_CALL(clEnqueueWriteBuffer, CL_OUT_OF_RESOURCES,
        (cl_command_queue q, cl_mem m, cl_bool b, size_t off, size_t n, const void *p, cl_uint nw,
         const cl_event *w, cl_event *e),
        (q, m, b, off, n, p, nw, w, e))
CL_CALL(clEnqueueFillBuffer, CL_OUT_OF_RESOURCES,
        (cl_command_queue q, cl_mem m, const void *pat, size_t ps, size_t off, size_t n, cl_uint nw,
         const cl_event *w, cl_event *e),
        (q, m, pat, ps, off, n, nw, w, e))
CL_CALL(clEnqueueCopyBuffer, CL_OUT_OF_RESOURCES,
        (cl_command_queue q, cl_mem a, cl_mem b, size_t ao, size_t bo, size_t n, cl_uint nw,
         const cl_event *w, cl_event *e),
        (q, a, b, ao, bo, n, nw, w, e))
CL_CALL(clFinish, CL_OUT_OF_RESOURCES, (cl_command_queue q), (q))
CL_CALL(clEnqueueMarkerWithWaitList, CL_OUT_OF_RESOURCES,
        (cl_command_queue q, cl_uint nw, const cl_event *w, cl_event *e), (q, nw, w, e))
CL_CALL(clWaitForEvents, CL_OUT_OF_RESOURCES, (cl_uint n, const cl_event *l), (n, l))
