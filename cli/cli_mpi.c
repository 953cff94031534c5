/*
 * cli_mpi.c - data-parallel training under mpirun (design in cli_mpi.h).
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_mpi.h"

#ifdef CLF_HAVE_MPI
#include <mpi.h>
#endif

/* The job's size from the launcher's environment, 0 when not launched as a
 * rank of one. */
static int launched_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && atoi(v) > 0)
            return atoi(v);
    }
    return getenv("PMIX_RANK") != NULL ? 1 : 0;
}

const char *cli_mpi_device(const cli_mpi *mp, const char *sel, char *buf, size_t cap)
{
    if (!mp->active || mp->size <= 1)
        return sel;
    static const char *const types[] = {"gpu", "cpu", "accelerator"};
    const char *type = NULL;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        if (sel != NULL && strcmp(sel, types[t]) == 0)
            type = types[t];
    if (type == NULL && sel != NULL && sel[0] != '\0')
        return sel; /* an index, a pair, an ordinal or a name: as given */
    clf_device_info *devs = NULL;
    int count = 0, n_type = 0;
    clf_error err;
    if (clf_devices_list(&devs, &count, &err) != CLF_OK)
        return sel;     /* opening the runtime reports it */
    if (type == NULL) { /* the default: the first GPU, else the first CPU */
        type = "cpu";
        for (int i = 0; i < count; i++)
            if (strcmp(devs[i].type, "gpu") == 0)
                type = "gpu";
    }
    for (int i = 0; i < count; i++)
        n_type += strcmp(devs[i].type, type) == 0;
    free(devs);
    if (n_type == 0)
        return sel;
    snprintf(buf, cap, "%s:%d", type, mp->local_rank % n_type);
    return buf;
}

#ifdef CLF_HAVE_MPI

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v != NULL && atoi(v) > 0 ? atoi(v) : fallback;
}

static int g_timeout_s; /* the collectives' watchdog (read by the signal handler) */
static char g_timeout_msg[160];

static void on_timeout(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, g_timeout_msg, strlen(g_timeout_msg));
    (void)w;
    _exit(124);
}

static clf_status mpi_error(int rc, const char *what, clf_error *err)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", rc);
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return clf_error_set(err, CLF_ERR_IO, "rank %d: %s failed: %s (did another rank end?)", rank,
                         what, s);
}

/* MPI counts are ints: larger arrays go in pieces. */
#define MPI_PIECE ((size_t)1 << 30)

static clf_status allreduce(void *buf, size_t n, MPI_Datatype t, size_t size, clf_error *err)
{
    for (size_t done = 0; done < n; done += MPI_PIECE) {
        const size_t k = n - done < MPI_PIECE ? n - done : MPI_PIECE;
        alarm((unsigned)g_timeout_s);
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + done * size, (int)k, t, MPI_SUM,
                               MPI_COMM_WORLD);
        alarm(0);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Allreduce", err);
    }
    return CLF_OK;
}

static clf_status allreduce_f32(void *user, float *buf, size_t n, clf_error *err)
{
    (void)user;
    return allreduce(buf, n, MPI_FLOAT, sizeof *buf, err);
}

static clf_status allreduce_f64(void *user, double *buf, size_t n, clf_error *err)
{
    (void)user;
    return allreduce(buf, n, MPI_DOUBLE, sizeof *buf, err);
}

/* ZeRO-1's gather, once per step: the counts live in the cli_mpi (user). */
static clf_status allgather_f32(void *user, float *buf, const size_t *offsets, clf_error *err)
{
    cli_mpi *mp = user;
    const int size = mp->size;
    if (offsets[size] > (size_t)INT_MAX)
        return clf_error_set(err, CLF_ERR_UNSUPPORTED,
                             "MPI_Allgatherv: %zu floats exceed MPI's int counts", offsets[size]);
    for (int r = 0; r < size; r++) {
        mp->counts[r] = (int)(offsets[r + 1] - offsets[r]);
        mp->displs[r] = (int)offsets[r];
    }
    alarm((unsigned)g_timeout_s);
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, mp->counts, mp->displs,
                            MPI_FLOAT, MPI_COMM_WORLD);
    alarm(0);
    return rc == MPI_SUCCESS ? CLF_OK : mpi_error(rc, "MPI_Allgatherv", err);
}

static clf_status bcast_f64(void *user, double *buf, size_t n, clf_error *err)
{
    (void)user;
    alarm((unsigned)g_timeout_s);
    int rc = MPI_Bcast(buf, (int)n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    alarm(0);
    return rc == MPI_SUCCESS ? CLF_OK : mpi_error(rc, "MPI_Bcast", err);
}

int cli_mpi_init(cli_mpi *mp)
{
    memset(mp, 0, sizeof *mp);
    mp->size = 1;
    if (launched_size() == 0)
        return CLI_EXIT_OK;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "clformer: MPI_Init failed (launched by mpirun?)\n");
        return CLI_EXIT_FAIL;
    }
    mp->active = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &mp->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mp->size);
    MPI_Comm local;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mp->rank, MPI_INFO_NULL,
                            &local) == MPI_SUCCESS) {
        MPI_Comm_rank(local, &mp->local_rank);
        MPI_Comm_free(&local);
    } else {
        mp->local_rank = mp->rank;
    }
    g_timeout_s = env_int("CLFORMER_MPI_TIMEOUT", 600);
    snprintf(g_timeout_msg, sizeof g_timeout_msg,
             "clformer: rank %d: no answer from the other ranks in %d s (one died or hangs; "
             "CLFORMER_MPI_TIMEOUT); ending\n",
             mp->rank, g_timeout_s);
    signal(SIGALRM, on_timeout);
    /* CLFORMER_MPI_BUCKET_KIB: the gradient bucket (default the trainer's
     * 1 MiB; a huge one reduces everything after backward, no overlap) */
    const size_t bucket = (size_t)env_int("CLFORMER_MPI_BUCKET_KIB", 0) * 1024;
    mp->counts = calloc(2 * (size_t)mp->size, sizeof *mp->counts);
    if (mp->counts == NULL) {
        fprintf(stderr, "clformer: out of host memory\n");
        MPI_Abort(MPI_COMM_WORLD, CLI_EXIT_FAIL);
    }
    mp->displs = mp->counts + mp->size;
    mp->dist = (clf_trainer_dist){.rank = mp->rank,
                                  .size = mp->size,
                                  .user = mp,
                                  .bucket_bytes = bucket,
                                  .allreduce_f32 = allreduce_f32,
                                  .allreduce_f64 = allreduce_f64,
                                  .bcast_f64 = bcast_f64,
                                  .allgather_f32 = allgather_f32};
    /* one voice: rank 0's (errors still go to every rank's stderr) */
    FILE *quiet = mp->rank != 0 ? freopen("/dev/null", "w", stdout) : stdout;
    (void)quiet;
    return CLI_EXIT_OK;
}

int cli_mpi_finish(cli_mpi *mp, int rc)
{
    if (!mp->active)
        return rc;
    fflush(stdout);
    fflush(stderr);
    /* An error: the others would wait on this rank forever. A stop by a
     * signal (128 + N) is not one: the ranks agree on the step to stop at
     * and each leaves here after the checkpoint (mpirun passes Ctrl-C on to
     * them as SIGTERM). */
    if (rc != CLI_EXIT_OK && rc < 128 && mp->size > 1)
        MPI_Abort(MPI_COMM_WORLD, rc);
    free(mp->counts);
    mp->counts = mp->displs = NULL;
    MPI_Finalize();
    mp->active = 0;
    return rc;
}

#else /* built without MPI */

int cli_mpi_init(cli_mpi *mp)
{
    memset(mp, 0, sizeof *mp);
    mp->size = 1;
    const int n = launched_size();
    if (n > 1) {
        fprintf(stderr,
                "clformer: launched as one of %d MPI ranks, but this clformer was built without "
                "MPI: install an MPI (Debian: libopenmpi-dev) and rebuild (CMake option "
                "CLF_MPI)\n",
                n);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

int cli_mpi_finish(cli_mpi *mp, int rc)
{
    (void)mp;
    return rc;
}

#endif
