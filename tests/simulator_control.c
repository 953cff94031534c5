/*
 * simulator_control.c - the control for scripts/test-simulator.sh: kernels
 * that the simulator must report, so that a run whose checks were silently
 * off (a plugin not loaded, an environment variable not read) fails instead
 * of passing.
 *
 *   race: every work-item writes out[0] (a write-write data race in global
 *         memory, caught only with data-race detection on);
 *   oob:  work-item i writes out[i + 1] on a buffer of as many floats as
 *         work-items (the last write is past the end).
 *
 * Not a CTest test: on a CPU runtime both kernels run and nothing reports
 * them. Runs on the first device of the first platform; exits 0 when both
 * kernels were built and launched, 1 otherwise (the report is the
 * simulator's, in its log).
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>

static const char *source =
    "__kernel void race(__global int *out) { out[0] = (int)get_global_id(0); }\n"
    "__kernel void oob(__global float *out) { out[get_global_id(0) + 1] = 1.0f; }\n";

int main(void)
{
    cl_platform_id platform;
    cl_device_id device;
    cl_int e = clGetPlatformIDs(1, &platform, NULL);
    if (e == CL_SUCCESS)
        e = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    if (e != CL_SUCCESS) {
        fprintf(stderr, "simulator_control: no OpenCL device (%d)\n", e);
        return 1;
    }
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &e);
    cl_command_queue q = e == CL_SUCCESS ? clCreateCommandQueue(ctx, device, 0, &e) : NULL;
    cl_program prog = e == CL_SUCCESS ? clCreateProgramWithSource(ctx, 1, &source, NULL, &e) : NULL;
    if (e == CL_SUCCESS)
        e = clBuildProgram(prog, 1, &device, "", NULL, NULL);
    const size_t n = 64, local = 16;
    cl_mem buf = e == CL_SUCCESS ? clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 4, NULL, &e) : NULL;
    const char *names[] = {"race", "oob"};
    for (int i = 0; i < 2 && e == CL_SUCCESS; i++) {
        cl_kernel k = clCreateKernel(prog, names[i], &e);
        if (e == CL_SUCCESS)
            e = clSetKernelArg(k, 0, sizeof buf, &buf);
        if (e == CL_SUCCESS)
            e = clEnqueueNDRangeKernel(q, k, 1, NULL, &n, &local, 0, NULL, NULL);
        if (e == CL_SUCCESS)
            e = clFinish(q);
        if (k)
            clReleaseKernel(k);
    }
    if (buf)
        clReleaseMemObject(buf);
    if (prog)
        clReleaseProgram(prog);
    if (q)
        clReleaseCommandQueue(q);
    if (ctx)
        clReleaseContext(ctx);
    if (e != CL_SUCCESS) {
        fprintf(stderr, "simulator_control: an OpenCL call failed (%d)\n", e);
        return 1;
    }
    printf("simulator_control: both kernels ran\n");
    return 0;
}
