/* cachereader: reads --file sequentially --passes times (at most --duration
 * seconds), filling the page cache with clean, reclaimable file pages. With
 * --mib it reads only [--offset-mib, --offset-mib + --mib) of the file, so
 * several pods can each keep their own part of one file hot; --rate caps the
 * reading (MiB/s, 0 = as fast as it goes), so that a reader re-reading its
 * range for a minute does not take a TCG guest's CPUs. A page read a second
 * time is on the active file list: the kubelet's memory.available counts it as
 * used, although the kernel can give it back at any time. */
#include <fcntl.h>

#include "common.h"

int main(int argc, char** argv) {
  static const char* const known[] = {"--file", "--passes", "--duration", "--hold", "--offset-mib", "--mib", "--rate",
                                      NULL};
  check_args(argc, argv, known,
             "cachereader --file P [--passes K] [--duration S] [--hold S] [--offset-mib O] [--mib N] [--rate R]");
  const char* path = arg_value(argc, argv, "--file", NULL);
  if (!path) {
    fprintf(stderr, "cachereader: --file is required\n");
    return 2;
  }
  const int passes = (int)arg_double(argc, argv, "--passes", 1, 1, 1000);
  const double duration = arg_double(argc, argv, "--duration", 120, 1, 3600);
  const double hold = arg_double(argc, argv, "--hold", 0, 0, 3600);
  const off_t offset = (off_t)arg_double(argc, argv, "--offset-mib", 0, 0, 65536) * (off_t)MIB;
  const unsigned long long range = (unsigned long long)arg_double(argc, argv, "--mib", 0, 0, 65536) * MIB;
  const double rate = arg_double(argc, argv, "--rate", 0, 0, 100000);
  static char buf[MIB];
  const double t0 = now_s();
  unsigned long long total = 0;
  int done = 0;
  for (int p = 0; p < passes && now_s() - t0 < duration; ++p) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
      perror("cachereader: open");
      return 1;
    }
    unsigned long long in_pass = 0;
    ssize_t n;
    while ((range == 0 || in_pass < range) && now_s() - t0 < duration &&
           (n = pread(fd, buf, range == 0 || range - in_pass > sizeof buf ? sizeof buf : range - in_pass,
                      offset + (off_t)in_pass)) > 0) {
      in_pass += (unsigned long long)n;
      total += (unsigned long long)n;
      if (rate > 0) sleep_s(t0 + (double)total / MIB / rate - now_s());
    }
    close(fd);
    done = p + 1;
  }
  fprintf(stderr, "cachereader: read %llu MiB in %.2fs (%d passes)\n", total / MIB, now_s() - t0, done);
  sleep_s(hold);
  return 0;
}
