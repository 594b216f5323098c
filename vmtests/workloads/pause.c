/* pause: the pod sandbox's process for the kubelet contenders' offline pause
 * image (no registry in the VM). Like the upstream pause container: sleeps
 * until SIGINT or SIGTERM, reaps orphans it inherits as a PID namespace init.
 * Not bounded in time on purpose: it lives as long as the pod; the guest
 * powers off at the end of every run. */
#include <signal.h>
#include <sys/wait.h>

#include "common.h"

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &stop, NULL);
  sigaction(SIGTERM, &stop, NULL);
  sigaction(SIGCHLD, &child, NULL);
  for (;;) pause();
}
