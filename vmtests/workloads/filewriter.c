/* filewriter: writes --mib MiB into --path at --rate MiB/s (0 = fast), then
 * holds the file for --hold seconds and (with --unlink 1) removes it. On tmpfs
 * this is a memory-backed volume (shmem charged to the writer's cgroup). */
#include <fcntl.h>

#include "common.h"

int main(int argc, char** argv) {
  static const char* const known[] = {"--path", "--mib", "--rate", "--hold", "--unlink", "--fsync", NULL};
  check_args(argc, argv, known, "filewriter --path P --mib N [--rate R] [--hold S] [--unlink 0|1] [--fsync 0|1]");
  const char* path = arg_value(argc, argv, "--path", NULL);
  if (!path) {
    fprintf(stderr, "filewriter: --path is required\n");
    return 2;
  }
  const size_t mib = (size_t)arg_double(argc, argv, "--mib", 64, 1, 8192);
  const double rate = arg_double(argc, argv, "--rate", 0, 0, 100000);
  const double hold = arg_double(argc, argv, "--hold", 0, 0, 3600);
  const int do_unlink = (int)arg_double(argc, argv, "--unlink", 0, 0, 1);
  const int do_fsync = (int)arg_double(argc, argv, "--fsync", 0, 0, 1);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror("filewriter: open");
    return 1;
  }
  static char buf[MIB];
  const double t0 = now_s();
  for (size_t i = 0; i < mib; ++i) {
    memset(buf, (int)(i * 131 + 7) & 0xff, sizeof buf);
    for (size_t off = 0; off < sizeof buf;) {
      ssize_t n = write(fd, buf + off, sizeof buf - off);
      if (n <= 0) {
        perror("filewriter: write");
        return 1;
      }
      off += (size_t)n;
    }
    if (rate > 0) sleep_s(t0 + (double)(i + 1) / rate - now_s());
  }
  if (do_fsync) fsync(fd);
  close(fd);
  fprintf(stderr, "filewriter: %zu MiB to %s in %.2fs\n", mib, path, now_s() - t0);
  sleep_s(hold);
  if (do_unlink) unlink(path);
  return 0;
}
