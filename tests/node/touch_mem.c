/* touch_mem <MiB> <seconds>: a bounded workload for host integration tests.
 * Maps <MiB> of anonymous memory, writes every page (so all of it is charged
 * to the caller's memory cgroup as RSS), then sleeps and exits by itself.
 * Refuses more than 128 MiB or 120 s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: touch_mem <MiB> <seconds>\n");
    return 2;
  }
  long mib = strtol(argv[1], NULL, 10);
  long secs = strtol(argv[2], NULL, 10);
  if (mib < 0 || mib > 128 || secs < 0 || secs > 120) {
    fprintf(stderr, "touch_mem: refusing %ld MiB / %ld s (max 128 MiB, 120 s)\n", mib, secs);
    return 2;
  }
  size_t len = (size_t)mib << 20;
  if (len > 0) {
    char* p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      perror("mmap");
      return 1;
    }
    long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < len; off += (size_t)page) p[off] = (char)(off / (size_t)page + 1);
  }
  sleep((unsigned)secs);
  return 0;
}
