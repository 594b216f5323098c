/* memhog: grows anonymous memory at a set rate up to a bound, then holds it.
 *   memhog --mib N [--rate MiB/s (0 = as fast as possible)] [--hold SEC]
 *          [--start-mib M (allocated at once first)] [--ignore-term 1]
 * Bounded: N <= 4096 MiB, and the process exits after the hold (default 120 s)
 * even if nobody stops it. Pages are written so they are really charged. */
#include <signal.h>
#include <sys/mman.h>

#include "common.h"

int main(int argc, char** argv) {
  static const char* const known[] = {"--mib", "--rate", "--hold", "--start-mib", "--ignore-term", NULL};
  check_args(argc, argv, known, "memhog --mib N [--rate MiB/s] [--hold SEC] [--start-mib M] [--ignore-term 0|1]");
  const size_t mib = (size_t)arg_double(argc, argv, "--mib", 64, 1, 4096);
  const double rate = arg_double(argc, argv, "--rate", 0, 0, 100000);
  const double hold = arg_double(argc, argv, "--hold", 120, 0, 3600);
  const size_t start_mib = (size_t)arg_double(argc, argv, "--start-mib", 0, 0, 4096);
  if (arg_double(argc, argv, "--ignore-term", 0, 0, 1) != 0) signal(SIGTERM, SIG_IGN);  /* a pod slow to stop */
  char* mem = mmap(NULL, mib * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    perror("memhog: mmap");
    return 1;
  }
  const double t0 = now_s();
  for (size_t i = 0; i < mib; ++i) {
    populate(mem + i * MIB, MIB);
    if (rate > 0 && i + 1 > start_mib) sleep_s(t0 + (double)(i + 1 - start_mib) / rate - now_s());
  }
  fprintf(stderr, "memhog: %zu MiB in %.2fs, holding %.0fs\n", mib, now_s() - t0, hold);
  sleep_s(hold);
  return 0;
}
