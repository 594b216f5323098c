/* sampler: the guest-side ground truth. Every --interval-ms it reads
 * /proc/meminfo, the root memory.stat (or the process count, for --signal pid)
 * and each watched pod's cgroup.events/memory.current/pids.current, and
 * records (on cgroup v1, found by /sys/fs/cgroup/memory/memory.usage_in_bytes:
 * the root's usage and memory.stat, each pod's memory.usage_in_bytes, and its
 * tasks counted in the tasks files of its memory cgroup and those below, which
 * v1 has in place of cgroup.events and a hierarchical pids.current):
 *   - crossed_ms: the first time the node signal crossed --threshold
 *     (memory.available as the kubelet and pressured compute it, see
 *      available.h; pid.available = min(pid_max, threads-max) - processes);
 *   - per pod: peak usage, peak processes, and released_ms, the first sample at
 *     which the pod's cgroup had no process left (or was removed) after having
 *     had some: the victim's memory is back;
 *   - the kernel's oom_kill counter (/proc/vmstat) at start and end.
 *   - per phase (a phase starts at start-up and at each SIGUSR1, which a
 *     scenario of several phases sends when it begins the next one): its start,
 *     the minimum of the signal, the kernel's OOM kills, and per threshold
 *     (--threshold, and --threshold2 when given) the first crossing, the first
 *     sample back at or over it after that (recovered_ms), how often it was
 *     crossed downwards and how long the signal stayed under it in all.
 * Times are milliseconds since the sampler started (CLOCK_MONOTONIC), also
 * printed as absolute CLOCK_MONOTONIC ns (start_mono_ns) to join with logs.
 * It writes one JSON object to --out on SIGTERM/SIGINT or after --duration.
 *   sampler --signal memory|pid --threshold N --out FILE [--interval-ms 10]
 *           [--duration S] [--pods name=/sys/fs/cgroup/x,name2=...] [--threshold2 N] */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/sysinfo.h>

#include "available.h"
#include "common.h"

#define MAX_PODS 32
#define MAX_PHASES 8

/* One threshold's course within a phase. */
struct crossing {
  double threshold;
  long long crossed_ms, recovered_ms, below_ms, count;
  int below, below_at_start;
};

struct phase {
  long long start_ms;
  double min_avail;
  unsigned long long oom_start, oom_end;
  struct crossing th[2];
};

struct pod {
  char name[64];
  char dir[256];
  int events_fd, current_fd, pids_fd;
  int seen_populated, gone;
  long long released_ms;
  unsigned long long peak_current, peak_procs, last_current, last_procs;
};

static volatile sig_atomic_t stop, next_phase;
static void on_signal(int sig) { (void)sig; stop = 1; }
static void on_phase(int sig) {
  (void)sig;
  next_phase = 1;
}

static unsigned long long vmstat_oom_kills(void) {
  char vm[16384];
  int fd = open("/proc/vmstat", O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, vm, sizeof vm - 1) : -1;
  if (fd >= 0) close(fd);
  vm[n > 0 ? n : 0] = 0;
  return vmt_field(vm, "oom_kill");
}

/* A phase begins where the previous one (PREV, or none) left the signal: a
 * threshold already under at its start is not a crossing of this phase. */
static void phase_begin(struct phase* ph, const struct phase* prev, long long ms, const double* thresholds,
                        int nth) {
  memset(ph, 0, sizeof *ph);
  ph->start_ms = ms;
  ph->min_avail = 1e30;
  ph->oom_start = ph->oom_end = vmstat_oom_kills();
  for (int t = 0; t < nth; ++t) {
    ph->th[t].threshold = thresholds[t];
    ph->th[t].crossed_ms = ph->th[t].recovered_ms = -1;
    ph->th[t].below = ph->th[t].below_at_start = prev ? prev->th[t].below : 0;
  }
}

/* One sample of the signal, DT_MS after the previous one. */
static void phase_sample(struct phase* ph, int nth, long long ms, double avail, long long dt_ms) {
  if (avail < ph->min_avail) ph->min_avail = avail;
  for (int t = 0; t < nth; ++t) {
    struct crossing* c = &ph->th[t];
    if (c->below) c->below_ms += dt_ms;
    const int below = avail < c->threshold;
    if (below && !c->below) {
      ++c->count;
      if (c->crossed_ms < 0) c->crossed_ms = ms;
    }
    if (!below && c->below && c->recovered_ms < 0 && (c->crossed_ms >= 0 || c->below_at_start)) c->recovered_ms = ms;
    c->below = below;
  }
}

static ssize_t read_fd(int fd, char* buf, size_t len) {
  if (fd < 0) return -1;
  ssize_t n = pread(fd, buf, len - 1, 0);
  if (n < 0) return -1;
  buf[n] = 0;
  return n;
}

static unsigned long long read_ull_path(const char* path) {
  char buf[64] = {0};
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n > 0 ? strtoull(buf, NULL, 10) : 0;
}

/* v1: the tasks in DIR and every cgroup below it; -1 when DIR is gone. */
static long long count_tasks_v1(const char* dir, int depth) {
  DIR* d = opendir(dir);
  if (!d) return -1;
  char p[512], buf[8192];
  long long n = 0;
  snprintf(p, sizeof p, "%s/tasks", dir);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0)
      for (ssize_t i = 0; i < r; ++i) n += buf[i] == '\n';
    close(fd);
  }
  struct dirent* e;
  while (depth < 8 && (e = readdir(d)) != NULL) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    long long c = count_tasks_v1(p, depth + 1);
    if (c > 0) n += c;
  }
  closedir(d);
  return n;
}

static int open_in(const char* dir, const char* name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return open(p, O_RDONLY | O_CLOEXEC);
}

int main(int argc, char** argv) {
  static const char* const known[] = {"--signal", "--threshold", "--out", "--interval-ms", "--duration", "--pods",
                                      "--threshold2", NULL};
  check_args(argc, argv, known,
             "sampler --signal memory|pid --threshold N --out FILE [--interval-ms 10] [--duration S] [--pods a=/dir,...]"
             " [--threshold2 N]");
  const char* signal_name = arg_value(argc, argv, "--signal", "memory");
  const int pid_signal = strcmp(signal_name, "pid") == 0;
  if (!pid_signal && strcmp(signal_name, "memory") != 0) {
    fprintf(stderr, "sampler: --signal must be memory or pid\n");
    return 2;
  }
  const double threshold = arg_double(argc, argv, "--threshold", 0, 0, 1e15);
  const char* out = arg_value(argc, argv, "--out", NULL);
  if (!out) {
    fprintf(stderr, "sampler: --out is required\n");
    return 2;
  }
  const double interval = arg_double(argc, argv, "--interval-ms", 10, 1, 10000) / 1000.0;
  const double duration = arg_double(argc, argv, "--duration", 300, 1, 3600);
  const double thresholds[2] = {threshold, arg_double(argc, argv, "--threshold2", -1, -1, 1e15)};
  const int nth = thresholds[1] >= 0 ? 2 : 1;

  const int v1 = access("/sys/fs/cgroup/memory/memory.usage_in_bytes", F_OK) == 0;
  struct pod pods[MAX_PODS];
  int npods = 0;
  const char* spec = arg_value(argc, argv, "--pods", "");
  char specbuf[8192];
  snprintf(specbuf, sizeof specbuf, "%s", spec);
  for (char* save = NULL, *tok = strtok_r(specbuf, ",", &save); tok && npods < MAX_PODS;
       tok = strtok_r(NULL, ",", &save)) {
    char* eq = strchr(tok, '=');
    if (!eq) {
      fprintf(stderr, "sampler: bad --pods entry '%s'\n", tok);
      return 2;
    }
    *eq = 0;
    struct pod* p = &pods[npods++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", tok);
    snprintf(p->dir, sizeof p->dir, "%s", eq + 1);
    p->events_fd = v1 ? -1 : open_in(p->dir, "cgroup.events");
    p->current_fd = open_in(p->dir, v1 ? "memory.usage_in_bytes" : "memory.current");
    p->pids_fd = v1 ? -1 : open_in(p->dir, "pids.current");
    p->released_ms = -1;
  }

  int meminfo_fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
  int rootstat_fd = open(v1 ? "/sys/fs/cgroup/memory/memory.stat" : "/sys/fs/cgroup/memory.stat", O_RDONLY | O_CLOEXEC);
  int rootusage_fd = v1 ? open("/sys/fs/cgroup/memory/memory.usage_in_bytes", O_RDONLY | O_CLOEXEC) : -1;
  unsigned long long pid_max = read_ull_path("/proc/sys/kernel/pid_max");
  unsigned long long threads_max = read_ull_path("/proc/sys/kernel/threads-max");
  if (threads_max && threads_max < pid_max) pid_max = threads_max;
  const unsigned long long oom_start = vmstat_oom_kills();

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sa.sa_handler = on_phase;
  sigaction(SIGUSR1, &sa, NULL);

  struct timespec start_ts;
  clock_gettime(CLOCK_MONOTONIC, &start_ts);
  const double t0 = now_s();
  long long crossed_ms = -1, samples = 0;
  double min_avail = 1e30, first_avail = -1;
  struct phase phases[MAX_PHASES];
  int nphases = 1;
  long long prev_ms = 0;
  phase_begin(&phases[0], NULL, 0, thresholds, nth);
  char buf[16384], stat_buf[16384];
  while (!stop && now_s() - t0 < duration) {
    const long long ms = (long long)((now_s() - t0) * 1000.0);
    double avail;
    if (pid_signal) {
      struct sysinfo si;
      sysinfo(&si);
      avail = (double)pid_max - (double)si.procs;
    } else {
      read_fd(meminfo_fd, buf, sizeof buf);
      read_fd(rootstat_fd, stat_buf, sizeof stat_buf);
      if (v1) {
        char u[64] = "0";
        read_fd(rootusage_fd, u, sizeof u);
        avail = vmt_memory_available_v1(buf, strtoull(u, NULL, 10), stat_buf);
      } else {
        avail = vmt_memory_available(buf, stat_buf);
      }
    }
    if (first_avail < 0) first_avail = avail;
    if (avail < min_avail) min_avail = avail;
    if (crossed_ms < 0 && avail < threshold) crossed_ms = ms;
    if (next_phase) {
      next_phase = 0;
      phases[nphases - 1].oom_end = vmstat_oom_kills();
      if (nphases < MAX_PHASES) {
        phase_begin(&phases[nphases], &phases[nphases - 1], ms, thresholds, nth);
        ++nphases;
      }
    }
    phase_sample(&phases[nphases - 1], nth, ms, avail, ms - prev_ms);
    prev_ms = ms;
    for (int i = 0; i < npods; ++i) {
      struct pod* p = &pods[i];
      if (p->gone) continue;
      int populated = 0;
      if (v1) {
        const long long tasks = count_tasks_v1(p->dir, 0);
        if (tasks < 0) {
          p->gone = 1;
        } else {
          populated = tasks > 0;
          p->last_procs = (unsigned long long)tasks;
        }
      } else if (read_fd(p->events_fd, buf, sizeof buf) < 0) {
        p->gone = 1;
      } else {
        populated = vmt_field(buf, "populated") != 0;
      }
      if (!p->gone && read_fd(p->current_fd, buf, sizeof buf) > 0) p->last_current = strtoull(buf, NULL, 10);
      if (!p->gone && !v1 && read_fd(p->pids_fd, buf, sizeof buf) > 0) p->last_procs = strtoull(buf, NULL, 10);
      if (p->gone) p->last_current = p->last_procs = 0;
      if (p->last_current > p->peak_current) p->peak_current = p->last_current;
      if (p->last_procs > p->peak_procs) p->peak_procs = p->last_procs;
      if (populated) p->seen_populated = 1;
      if (p->seen_populated && p->released_ms < 0 && (!populated || p->gone)) p->released_ms = ms;
    }
    ++samples;
    sleep_s(interval);
  }
  const double elapsed_ms = (now_s() - t0) * 1000.0;
  const unsigned long long oom_end = vmstat_oom_kills();
  phases[nphases - 1].oom_end = oom_end;
  FILE* f = fopen(out, "w");
  if (!f) {
    perror("sampler: open --out");
    return 1;
  }
  fprintf(f,
          "{\"signal\":\"%s\",\"threshold\":%.0f,\"interval_ms\":%.0f,\"samples\":%lld,\"elapsed_ms\":%.0f,"
          "\"start_mono_ns\":%lld,\"crossed_ms\":%lld,\"first_available\":%.0f,\"min_available\":%.0f,"
          "\"cgroup\":\"%s\",\"oom_kill_start\":%llu,\"oom_kill_end\":%llu,\"pods\":{",
          signal_name, threshold, interval * 1000.0, samples, elapsed_ms,
          (long long)start_ts.tv_sec * 1000000000LL + start_ts.tv_nsec, crossed_ms, first_avail, min_avail, v1 ? "v1" : "v2", oom_start,
          oom_end);
  for (int i = 0; i < npods; ++i) {
    const struct pod* p = &pods[i];
    fprintf(f,
            "%s\"%s\":{\"peak_current\":%llu,\"peak_procs\":%llu,\"final_current\":%llu,\"final_procs\":%llu,"
            "\"released_ms\":%lld,\"gone\":%s}",
            i ? "," : "", p->name, p->peak_current, p->peak_procs, p->last_current, p->last_procs, p->released_ms,
            p->gone ? "true" : "false");
  }
  fprintf(f, "},\"phases\":[");
  for (int i = 0; i < nphases; ++i) {
    const struct phase* ph = &phases[i];
    fprintf(f, "%s{\"start_ms\":%lld,\"min_available\":%.0f,\"oom_kills\":%llu,\"thresholds\":[", i ? "," : "",
            ph->start_ms, ph->min_avail < 1e30 ? ph->min_avail : -1.0, ph->oom_end - ph->oom_start);
    for (int t = 0; t < nth; ++t) {
      const struct crossing* c = &ph->th[t];
      fprintf(f,
              "%s{\"threshold\":%.0f,\"crossed_ms\":%lld,\"recovered_ms\":%lld,\"crossings\":%lld,"
              "\"below_ms\":%lld,\"below_at_start\":%s,\"below_at_end\":%s}",
              t ? "," : "", c->threshold, c->crossed_ms, c->recovered_ms, c->count, c->below_ms,
              c->below_at_start ? "true" : "false", c->below ? "true" : "false");
    }
    fprintf(f, "]}");
  }
  fprintf(f, "]}\n");
  fclose(f);
  return 0;
}
