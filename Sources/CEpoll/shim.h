/* epoll, which Glibc's Swift module leaves out: the waiting-hosts benchmark drives 10,000 connections with it. */
#include <sys/epoll.h>
