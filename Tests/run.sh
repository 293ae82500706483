#!/usr/bin/env bash
# `make test`'s run: the manager's suites (XignManagerTests) in a test process of their own, after the others. Swift's
# shared threads are as many as cores, and the synchronous suites of the other targets (PAM, SSH, the desktops) hold
# them for seconds at a time; the manager's in-process tier runs its handlers and services there, and in one full run
# a write waited a minute for a thread while another process waited for its lock. Each process has its own threads.
# After, not beside: a login request waits for the database within a 7 s budget and a database call is closed after
# 20 s (RequestBudget, PostgreSQLPool.watched), and beside the other targets on a slow day two runs in two each had a
# call cut that way (503 busy), in tests about something else.
set -uo pipefail
${SWIFT:-swift} test --skip-build --skip XignManagerTests
others=$?
# The failover test kills PostgreSQL and times answers against a client's 10 s: it runs alone (make failover-test).
${SWIFT:-swift} test --skip-build --filter XignManagerTests --skip FailoverTests
managers=$?
echo "make test: XignManagerTests exit $managers, the other targets exit $others"
[ "$managers" = 0 ] && [ "$others" = 0 ]
