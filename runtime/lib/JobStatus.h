//===- JobStatus.h - what each rank of a job is doing -----------*- C++ -*-===//
//
// When one rank of a job dies (a crash, an OOM kill, a signal), mpirun stops
// the others with SIGTERM, and without help they end silently. Each rank
// keeps a small status record (state, step, pid, host) in a file of the
// job's session directory; a rank stopped by SIGTERM reads the others' and
// says which rank failed and in which step before it ends:
//   spmd-run: rank 0: stopped in step 3: rank 2 ended in step 3 without a
//   message (killed or crashed)
// The directory is $SPMD_RUN_STATUS_DIR, else Open MPI's job session
// directory ($OMPI_MCA_orte_jobfam_session_dir, removed by mpirun at the
// end); with neither the records are off.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_JOBSTATUS_H
#define SPMD_RUNTIME_JOBSTATUS_H

#include <cstdint>

namespace spmd::rt {

/// Opens this rank's record (rank `rank` of `worldSize`), marks it
/// "setting up" and installs the SIGTERM handler. Once per process.
void jobStatusStart(int rank, int worldSize);
/// This rank runs step `step` (0-based).
void jobStatusStep(uint64_t step);
/// This rank is ending on an error it reported itself (spmd_rt_fatal).
void jobStatusFailed();
/// This rank finished: its record is removed.
void jobStatusDone();

} // namespace spmd::rt

#endif // SPMD_RUNTIME_JOBSTATUS_H
