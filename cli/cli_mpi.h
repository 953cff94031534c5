/*
 * cli_mpi.h - data-parallel training under mpirun: the MPI side of
 * clf_trainer_dist (model/train/trainer.h), kept in the CLI so that the
 * library never links MPI.
 *
 * A process is a rank of a job when the launcher says so in the
 * environment (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE); otherwise MPI is
 * never initialised and train runs as one process, exactly as without MPI.
 * Built without MPI (CLF_HAVE_MPI undefined, CMake's CLF_MPI off or no MPI
 * found), a job of more than one rank is refused with a message.
 *
 * Each rank takes its own device: a selector that names a type ("gpu",
 * "cpu", or none: the default type) becomes that type's (local rank mod
 * count)-th device; any other selector is used as given (per rank through
 * CLFORMER_DEVICE, e.g. mpirun -np 1 -x CLFORMER_DEVICE=0 ... : -np 1 -x
 * CLFORMER_DEVICE=1 ...). Ranks other than 0 print nothing on stdout.
 * CLFORMER_MPI_BUCKET_KIB sets the gradient bucket (default: 1 MiB on a
 * GPU, the whole gradient after backward on a CPU device).
 *
 * Failure: collectives return errors (MPI_ERRORS_RETURN) and the trainer
 * reports them; a rank that ends with an error aborts the job
 * (MPI_Abort), so the others never wait on it; a collective that gets no
 * answer within CLFORMER_MPI_TIMEOUT seconds (default 600) ends the rank
 * with a message (a peer died without the launcher noticing, or hangs).
 */
#ifndef CLF_CLI_MPI_H
#define CLF_CLI_MPI_H

#include <stddef.h>

#include "model/clformer.h"

typedef struct cli_mpi {
    int active; /* MPI initialised: a rank of a job */
    int rank, size, local_rank;
    clf_trainer_dist dist; /* the collectives (size > 1); user = this struct */
    int *counts, *displs;  /* [size] each: MPI_Allgatherv's, filled per call */
} cli_mpi;

/* Join the job if launched as one. Returns CLI_EXIT_OK or prints an error
 * and returns an exit code. */
int cli_mpi_init(cli_mpi *mp);
/* Leave the job: MPI_Finalize after rc == 0 or a stop by a signal (rc >=
 * 128: every rank stopped at the same step), else MPI_Abort with rc (the
 * other ranks end too). Returns rc. */
int cli_mpi_finish(cli_mpi *mp, int rc);
/* The device selector for this rank (see above), in buf or sel itself. */
const char *cli_mpi_device(const cli_mpi *mp, const char *sel, char *buf, size_t cap);

#endif
