/*
 * rusage: run a command and print what it cost, like GNU time's
 * -f "%U %S %M" but present on every machine with a C compiler:
 *
 *   rusage OUTFILE command [args...]
 *
 * appends one line to OUTFILE: user seconds, system seconds, peak RSS in
 * KiB, the exit status (or 128+signal) and wall seconds. The CPU and RSS
 * are wait4's for the command and every descendant it waited for (the
 * kernel's RUSAGE_BOTH), so an nvidia-smi that kubemedic-detect runs is
 * counted in its check, as GNU time counts it. The command's stdout and stderr are left as they are.
 *
 * The child is made with fork, not vfork: a vfork child shares this
 * process's memory until exec, and the kernel would carry this process's
 * peak RSS into the child's. fork's copy of this small program is under
 * 1 MiB, below any command measured here.
 *
 *   cc -O2 -o rusage rusage.c
 */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: rusage OUTFILE command [args...]\n");
		return 2;
	}
	FILE *out = fopen(argv[1], "a");
	if (out == NULL) {
		perror("rusage: open OUTFILE");
		return 2;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if (pid < 0) {
		perror("rusage: fork");
		return 2;
	}
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		perror("rusage: exec");
		_exit(127);
	}
	int status;
	struct rusage ru;
	if (wait4(pid, &status, 0, &ru) < 0) {
		perror("rusage: wait4");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	fprintf(out, "%ld.%06ld %ld.%06ld %ld %d %.6f\n",
		(long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec,
		(long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec,
		ru.ru_maxrss, code, wall);
	fclose(out);
	return code;
}
