/* Shared helpers for the vmtests workload programs. Every workload is bounded
 * in size and time: it stops by itself even if nobody kills it. */
#pragma once
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Parses "--name value" pairs; exits with a usage error on anything unknown. */
static inline const char* arg_value(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; i += 2)
    if (strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

static inline void check_args(int argc, char** argv, const char* const* known, const char* usage) {
  if ((argc - 1) % 2 != 0) {
    fprintf(stderr, "usage: %s\n", usage);
    exit(2);
  }
  for (int i = 1; i < argc; i += 2) {
    int ok = 0;
    for (const char* const* k = known; *k; ++k) ok |= strcmp(argv[i], *k) == 0;
    if (!ok) {
      fprintf(stderr, "unknown option %s\nusage: %s\n", argv[i], usage);
      exit(2);
    }
  }
}

static inline double arg_double(int argc, char** argv, const char* name, double def, double lo, double hi) {
  const char* v = arg_value(argc, argv, name, NULL);
  if (!v) return def;
  char* end = NULL;
  double d = strtod(v, &end);
  if (!end || *end || d < lo || d > hi) {
    fprintf(stderr, "bad value for %s: '%s' (allowed %g..%g)\n", name, v, lo, hi);
    exit(2);
  }
  return d;
}

#include <sys/mman.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Faults in and charges [p, p+len) as anonymous memory. MADV_POPULATE_WRITE
 * (5.14+) does it in the kernel in one call, which matters under TCG where
 * every page fault is an expensive emulated exception; else one write a page. */
static inline void populate(char* p, size_t len) {
  if (madvise(p, len, MADV_POPULATE_WRITE) == 0) return;
  for (size_t off = 0; off < len; off += 4096) p[off] = 1;
}
