/* spiker: bursty allocation: allocate --mib, hold --hold-ms, free, wait --gap-ms,
 * --bursts times. Bounded by the burst count and the per-burst size. */
#include <sys/mman.h>

#include "common.h"

int main(int argc, char** argv) {
  static const char* const known[] = {"--mib", "--hold-ms", "--gap-ms", "--bursts", NULL};
  check_args(argc, argv, known, "spiker --mib N [--hold-ms MS] [--gap-ms MS] [--bursts K]");
  const size_t mib = (size_t)arg_double(argc, argv, "--mib", 64, 1, 4096);
  const double hold = arg_double(argc, argv, "--hold-ms", 500, 0, 600000) / 1000.0;
  const double gap = arg_double(argc, argv, "--gap-ms", 500, 0, 600000) / 1000.0;
  const int bursts = (int)arg_double(argc, argv, "--bursts", 5, 1, 1000);
  for (int b = 0; b < bursts; ++b) {
    char* mem = mmap(NULL, mib * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      perror("spiker: mmap");
      return 1;
    }
    populate(mem, mib * MIB);
    sleep_s(hold);
    munmap(mem, mib * MIB);
    sleep_s(gap);
  }
  return 0;
}
