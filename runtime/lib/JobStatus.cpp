//===- JobStatus.cpp - what each rank of a job is doing -------------------===//
//
// Records are fixed-size text lines rewritten in place with pwrite, so a
// reader never sees a torn or truncated one: "<state> <step> <pid> <host>"
// with state S (setting up), R (running), F (failed with a message), T
// (stopped by SIGTERM). The SIGTERM handler uses only async-signal-safe
// calls (open, pread, pwrite, write, kill, close) and no allocation.
//
//===----------------------------------------------------------------------===//

#include "JobStatus.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

constexpr size_t kRecordBytes = 128;
constexpr size_t kPathBytes = 512;

struct Status {
  int fd = -1;
  int rank = 0, worldSize = 0;
  std::atomic<uint64_t> step{0};
  char state = 'S';
  char dir[kPathBytes] = {};
  char host[64] = {};
  long pid = 0;
};
Status status;

/// Appends `text` to `out` (capacity `cap`, length `len`).
void append(char *out, size_t cap, size_t &len, const char *text) {
  while (*text && len + 1 < cap)
    out[len++] = *text++;
  out[len] = 0;
}
void appendNumber(char *out, size_t cap, size_t &len, uint64_t v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  char text[24];
  for (int i = 0; i < n; ++i)
    text[i] = digits[n - 1 - i];
  text[n] = 0;
  append(out, cap, len, text);
}

/// DIR/rank<r>.
void recordPath(int rank, char *path) {
  size_t len = 0;
  path[0] = 0;
  append(path, kPathBytes, len, status.dir);
  append(path, kPathBytes, len, "/rank");
  appendNumber(path, kPathBytes, len, static_cast<uint64_t>(rank));
}

void writeRecord() {
  if (status.fd < 0)
    return;
  char record[kRecordBytes];
  size_t len = 0;
  record[0] = 0;
  char state[2] = {status.state, 0};
  append(record, sizeof(record), len, state);
  append(record, sizeof(record), len, " ");
  appendNumber(record, sizeof(record), len,
               status.step.load(std::memory_order_relaxed));
  append(record, sizeof(record), len, " ");
  appendNumber(record, sizeof(record), len, static_cast<uint64_t>(status.pid));
  append(record, sizeof(record), len, " ");
  append(record, sizeof(record), len, status.host);
  // Fixed size: a rewrite always covers the previous record.
  std::memset(record + len, ' ', sizeof(record) - len);
  record[kRecordBytes - 1] = '\n';
  ssize_t ignored = pwrite(status.fd, record, sizeof(record), 0);
  (void)ignored;
}

/// Parses a record: state, step, pid, host (host points into `record`).
bool parseRecord(char *record, char &state, uint64_t &step, long &pid,
                 const char *&host) {
  char *p = record;
  state = *p++;
  if (*p++ != ' ')
    return false;
  auto number = [&](uint64_t &out) {
    if (*p < '0' || *p > '9')
      return false;
    out = 0;
    while (*p >= '0' && *p <= '9')
      out = out * 10 + static_cast<uint64_t>(*p++ - '0');
    return *p++ == ' ';
  };
  uint64_t pidValue;
  if (!number(step) || !number(pidValue))
    return false;
  pid = static_cast<long>(pidValue);
  host = p;
  while (*p && *p != ' ' && *p != '\n')
    ++p;
  *p = 0;
  return true;
}

/// Which rank failed, as far as the records tell: one that reported an
/// error (F), else one on this host whose process is gone while its record
/// says it was still working.
void describeFailure(char *out, size_t cap, size_t &len) {
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < status.worldSize; ++r) {
      if (r == status.rank)
        continue;
      char path[kPathBytes];
      recordPath(r, path);
      int fd = open(path, O_RDONLY);
      if (fd < 0)
        continue;
      char record[kRecordBytes + 1];
      ssize_t n = pread(fd, record, kRecordBytes, 0);
      close(fd);
      if (n <= 0)
        continue;
      record[n] = 0;
      char state;
      uint64_t step;
      long pid;
      const char *host;
      if (!parseRecord(record, state, step, pid, host))
        continue;
      bool failed = pass == 0 && state == 'F';
      bool vanished = pass == 1 && (state == 'S' || state == 'R') &&
                      std::strcmp(host, status.host) == 0 &&
                      kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
      if (!failed && !vanished)
        continue;
      append(out, cap, len, "rank ");
      appendNumber(out, cap, len, static_cast<uint64_t>(r));
      append(out, cap, len, failed ? " failed in " : " ended in ");
      if (state == 'S') {
        append(out, cap, len, "set-up");
      } else {
        append(out, cap, len, "step ");
        appendNumber(out, cap, len, step);
      }
      append(out, cap, len,
             failed ? " (its error is above)"
                    : " without a message (killed or crashed)");
      return;
    }
  append(out, cap, len, "another rank of the job failed");
}

void onTerminate(int signal) {
  char where = status.state;
  status.state = 'T';
  writeRecord();
  char message[512];
  size_t len = 0;
  message[0] = 0;
  append(message, sizeof(message), len, "spmd-run: rank ");
  appendNumber(message, sizeof(message), len,
               static_cast<uint64_t>(status.rank));
  append(message, sizeof(message), len, ": stopped in ");
  if (where == 'S') {
    append(message, sizeof(message), len, "set-up");
  } else {
    append(message, sizeof(message), len, "step ");
    appendNumber(message, sizeof(message), len,
                 status.step.load(std::memory_order_relaxed));
  }
  append(message, sizeof(message), len, ": ");
  describeFailure(message, sizeof(message), len);
  append(message, sizeof(message), len, "\n");
  ssize_t ignored = write(STDERR_FILENO, message, len);
  (void)ignored;
  // End as the signal would have ended the process.
  std::signal(signal, SIG_DFL);
  raise(signal);
}

} // namespace

void spmd::rt::jobStatusStart(int rank, int worldSize) {
  if (status.fd >= 0 || worldSize < 2)
    return;
  const char *dir = std::getenv("SPMD_RUN_STATUS_DIR");
  size_t len = 0;
  if (dir && *dir) {
    append(status.dir, kPathBytes, len, dir);
  } else if (const char *session =
                 std::getenv("OMPI_MCA_orte_jobfam_session_dir")) {
    append(status.dir, kPathBytes, len, session);
    append(status.dir, kPathBytes, len, "/spmd-status");
  } else {
    return;
  }
  if (len + 32 >= kPathBytes)
    return;                // a path that long is not worth a record
  mkdir(status.dir, 0700); // every rank tries; EEXIST is fine
  status.rank = rank;
  status.worldSize = worldSize;
  status.pid = static_cast<long>(getpid());
  if (gethostname(status.host, sizeof(status.host) - 1) != 0)
    std::strcpy(status.host, "?");
  for (char *c = status.host; *c; ++c)
    if (*c == ' ')
      *c = '_';
  char path[kPathBytes];
  recordPath(rank, path);
  status.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (status.fd < 0)
    return;
  writeRecord();
  struct sigaction action = {};
  action.sa_handler = onTerminate;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

void spmd::rt::jobStatusStep(uint64_t step) {
  status.step.store(step, std::memory_order_relaxed);
  status.state = 'R';
  writeRecord();
}

void spmd::rt::jobStatusFailed() {
  status.state = 'F';
  writeRecord();
}

void spmd::rt::jobStatusDone() {
  if (status.fd < 0)
    return;
  std::signal(SIGTERM, SIG_DFL);
  close(status.fd);
  status.fd = -1;
  char path[kPathBytes];
  recordPath(status.rank, path);
  unlink(path);
  rmdir(status.dir); // the last rank out removes it
}
