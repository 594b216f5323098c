/* forker: forks --count children at --rate per second; each child sleeps until
 * --hold seconds after the start and exits. Bounded: count <= 20000. */
#include <signal.h>
#include <sys/wait.h>

#include "common.h"

int main(int argc, char** argv) {
  static const char* const known[] = {"--count", "--rate", "--hold", NULL};
  check_args(argc, argv, known, "forker --count N [--rate per-second] [--hold S]");
  const int count = (int)arg_double(argc, argv, "--count", 100, 1, 20000);
  const double rate = arg_double(argc, argv, "--rate", 0, 0, 100000);
  const double hold = arg_double(argc, argv, "--hold", 60, 0, 3600);
  const double t0 = now_s();
  int made = 0;
  for (int i = 0; i < count; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      sleep_s(t0 + hold - now_s());
      _exit(0);
    }
    if (pid < 0) {
      perror("forker: fork");
      break;
    }
    ++made;
    if (rate > 0) sleep_s(t0 + (double)(i + 1) / rate - now_s());
  }
  fprintf(stderr, "forker: %d children in %.2fs\n", made, now_s() - t0);
  while (wait(NULL) > 0 || errno == EINTR) {
  }
  return 0;
}
