/* cachereader: reads --file sequentially --passes times (at most --duration
 * seconds), filling the page cache with clean, reclaimable file pages. */
#include <fcntl.h>

#include "common.h"

int main(int argc, char** argv) {
  static const char* const known[] = {"--file", "--passes", "--duration", "--hold", NULL};
  check_args(argc, argv, known, "cachereader --file P [--passes K] [--duration S] [--hold S]");
  const char* path = arg_value(argc, argv, "--file", NULL);
  if (!path) {
    fprintf(stderr, "cachereader: --file is required\n");
    return 2;
  }
  const int passes = (int)arg_double(argc, argv, "--passes", 1, 1, 100);
  const double duration = arg_double(argc, argv, "--duration", 120, 1, 3600);
  const double hold = arg_double(argc, argv, "--hold", 0, 0, 3600);
  static char buf[MIB];
  const double t0 = now_s();
  unsigned long long total = 0;
  for (int p = 0; p < passes && now_s() - t0 < duration; ++p) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
      perror("cachereader: open");
      return 1;
    }
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0 && now_s() - t0 < duration) total += (unsigned long long)n;
    close(fd);
  }
  fprintf(stderr, "cachereader: read %llu MiB in %.2fs\n", total / MIB, now_s() - t0);
  sleep_s(hold);
  return 0;
}
