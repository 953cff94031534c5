/*
 * allreduce.c - what a data-parallel step pays to sum its gradients: the
 * latency and bandwidth of MPI_Allreduce (float32, sum, in place), the call
 * clformer's trainer makes once per gradient bucket (cli/cli_mpi.c).
 *
 *   mpirun -np 2 build/bench/allreduce [--max-mib N] [--json]
 *
 * For each size from 4 bytes to --max-mib (default 64) MiB, doubling, the
 * median time of 20 calls (after 3 untimed), and the "bus bandwidth" of
 * NCCL's tests: bytes x 2 (N-1)/N / time, the traffic each rank's link
 * carries in a ring allreduce. Rank 0 prints one row per size (or one JSON
 * object). Built only where CMake found an MPI.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 20
#define WARMUP 3

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1, json = 0;
    long max_mib = 64;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--max-mib") == 0 && i + 1 < argc) {
            max_mib = strtol(argv[++i], NULL, 10);
        } else {
            if (rank == 0)
                fprintf(stderr, "usage: mpirun -np N allreduce [--max-mib N] [--json]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (max_mib < 1 || max_mib > 4096)
        max_mib = 64;
    const size_t max_floats = (size_t)max_mib * 1048576 / sizeof(float);
    float *buf = malloc(max_floats * sizeof *buf);
    if (buf == NULL) {
        fprintf(stderr, "allreduce: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < max_floats; i++)
        buf[i] = (float)(i % 7) * 0.25f;
    if (rank == 0 && !json)
        printf("MPI_Allreduce, float32 sum in place, %d ranks (median of %d calls)\n"
               "%12s %12s %14s\n",
               size, REPS, "bytes", "time us", "bus GB/s");
    if (rank == 0 && json)
        printf("{\"ranks\": %d, \"rows\": [", size);
    int first = 1;
    for (size_t n = 1; n <= max_floats; n *= 2) {
        double t[REPS];
        for (int r = 0; r < WARMUP + REPS; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            const double dt = MPI_Wtime() - t0;
            if (r >= WARMUP)
                t[r - WARMUP] = dt;
        }
        /* every rank's slowest call counts: the collective ends with it */
        MPI_Allreduce(MPI_IN_PLACE, t, REPS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        qsort(t, REPS, sizeof t[0], cmp_double);
        const double med = t[REPS / 2], bytes = (double)(n * sizeof(float));
        const double bus = bytes * 2.0 * (size - 1) / size / med / 1e9;
        if (rank == 0 && !json)
            printf("%12.0f %12.1f %14.3f\n", bytes, med * 1e6, bus);
        if (rank == 0 && json) {
            printf("%s{\"bytes\": %.0f, \"us\": %.2f, \"bus_gbs\": %.4f}", first ? "" : ", ", bytes,
                   med * 1e6, bus);
            first = 0;
        }
    }
    if (rank == 0 && json)
        printf("]}\n");
    free(buf);
    MPI_Finalize();
    return 0;
}
