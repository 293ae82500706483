/* `make bench`: getpwnam of one name, COUNT times in one process, through whatever /etc/nsswitch.conf says.
 * Prints the mean nanoseconds per call; exits 1 when the name does not resolve. */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    long count = atol(argv[2]);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long i = 0; i < count; i++) {
        if (getpwnam(argv[1]) == NULL) return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("%.0f\n", ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / (double)count);
    return 0;
}
