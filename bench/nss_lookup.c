/* `make bench`, inside a namespace whose nsswitch.conf the bench chose:
 *   nss_lookup NAME COUNT           getpwnam(NAME) COUNT times in this process; prints the mean ns per call
 *   nss_lookup --getent NAME COUNT  runs `getent passwd NAME` COUNT times; prints each run's µs, one per line
 * Spawning here, not from the bench, keeps the bench's own process start (large, many threads) out of the figure.
 * Exits 1 when the name does not resolve. */
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static double now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1e9 + now.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--getent") == 0) {
        char *arguments[] = {"getent", "passwd", argv[2], NULL};
        for (long i = 0, count = atol(argv[3]); i < count; i++) {
            double start = now_ns();
            pid_t pid;
            int status;
            if (posix_spawn(&pid, "/usr/bin/getent", NULL, NULL, arguments, environ) != 0) return 2;
            if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
            printf("%.1f\n", (now_ns() - start) / 1e3);
        }
        return 0;
    }
    if (argc != 3) return 2;
    long count = atol(argv[2]);
    double start = now_ns();
    for (long i = 0; i < count; i++) {
        if (getpwnam(argv[1]) == NULL) return 1;
    }
    printf("%.0f\n", (now_ns() - start) / (double)count);
    return 0;
}
