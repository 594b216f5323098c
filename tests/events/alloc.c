/* A bounded memory workload for the events host tests and benchmark.
 *   events_alloc <total MiB> <step MiB> <step pause ms> <hold ms> [free-and-hold ms]
 * Maps and touches <total> MiB in <step> MiB chunks, holds, then (optionally)
 * unmaps everything and holds again. Hard caps: 2048 MiB, 60 s (alarm).
 * PRESSURED_ALLOC_JOIN=<cgroup.procs path> first joins one more cgroup (e.g. a
 * cgroup v2 sandbox beside the v1 memory one, for PSI accounting), in both modes.
 *   events_alloc file <path> <MiB> <passes>
 * File-cache mode: writes <path> (<MiB> MiB, must not exist), reads it
 * <passes> times, removes it. Inside a memcg smaller than the file this drives
 * reclaim (scan/steal) and, from the second pass on, workingset refaults.
 * Caps: 512 MiB, 8 passes, 60 s. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

static int file_mode(const char *path, long mib, long passes)
{
	if (mib <= 0 || mib > 512 || passes <= 0 || passes > 8) {
		fprintf(stderr, "bad arguments (file <= 512 MiB, <= 8 passes)\n");
		return 2;
	}
	static char buf[1 << 20];
	memset(buf, 0x5a, sizeof(buf));
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror("create file");
		return 3;
	}
	int rc = 0;
	for (long i = 0; i < mib && rc == 0; i++) {
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			rc = 1;
		if (i % 8 == 7 && fdatasync(fd) != 0) /* keep dirty pages few: a small memcg reclaims clean ones */
			rc = 1;
	}
	if (fsync(fd) != 0 || close(fd) != 0)
		rc = 1;
	for (long p = 0; p < passes && rc == 0; p++) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = 1;
			break;
		}
		for (long i = 0; i < mib; i++)
			if (read(fd, buf, sizeof(buf)) <= 0)
				break;
		close(fd);
	}
	unlink(path);
	return rc;
}

static int join_extra_cgroup(void)
{
	const char *join = getenv("PRESSURED_ALLOC_JOIN");
	if (join && *join) {
		FILE *f = fopen(join, "w");
		if (!f || fprintf(f, "0\n") < 0 || fclose(f) != 0) {
			perror("join cgroup");
			return 3;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (join_extra_cgroup() != 0)
		return 3;
	if (argc == 5 && strcmp(argv[1], "file") == 0) {
		alarm(60);
		return file_mode(argv[2], atol(argv[3]), atol(argv[4]));
	}
	if (argc < 5) {
		fprintf(stderr, "usage: %s total_mib step_mib step_pause_ms hold_ms [free_hold_ms]\n", argv[0]);
		return 2;
	}
	long total = atol(argv[1]), step = atol(argv[2]), pause = atol(argv[3]), hold = atol(argv[4]);
	long free_hold = argc > 5 ? atol(argv[5]) : -1;
	if (total <= 0 || total > 2048 || step <= 0 || step > total || pause < 0 || hold < 0) {
		fprintf(stderr, "bad arguments (total <= 2048 MiB)\n");
		return 2;
	}
	alarm(60);
	long chunks = (total + step - 1) / step;
	void **maps = calloc((size_t)chunks, sizeof(void *));
	if (!maps)
		return 1;
	for (long i = 0; i < chunks; i++) {
		size_t len = (size_t)step << 20;
		maps[i] = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (maps[i] == MAP_FAILED)
			return 1;
		memset(maps[i], 0x5a, len);
		if (pause)
			sleep_ms(pause);
	}
	sleep_ms(hold);
	if (free_hold >= 0) {
		for (long i = 0; i < chunks; i++)
			munmap(maps[i], (size_t)step << 20);
		sleep_ms(free_hold);
	}
	free(maps);
	return 0;
}
