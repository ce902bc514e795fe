#!/usr/bin/env python3
"""Whole-program overhead of the fieldprof runtime, measured.

Runs COMMAND (stdin from --stdin FILE) RUNS times without and RUNS times
with the runtime, interleaved so that drifts of a shared machine hit both
alike, and reports CPU time (user + system, from wait4) and wall time:
medians, and the mean of the paired differences with a 95% confidence
interval. Each run under the runtime draws its own random APIs (the
default k unless FIELDPROF_K is set), as a volunteer's runs would.

  deploy/overhead.py --lib DIR --work DIR [--runs N] [--parallel] [--stdin FILE] -- COMMAND...
"""
import argparse
import os
import statistics
import sys
import time


def start(argv, env, stdin_path, cpu=None):
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})
            fd = os.open(stdin_path or os.devnull, os.O_RDONLY)
            os.dup2(fd, 0)
            out = os.open(os.devnull, os.O_WRONLY)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    return pid, t0


def finish(started, name):
    """CPU time (user + system) and wall time of a run, both in seconds."""
    pid, t0 = started
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        sys.exit(f"overhead: {name} failed (status {status})")
    return ru.ru_utime + ru.ru_stime, wall


def pair(argv, plain_env, rt_env, stdin_path, i, parallel):
    """One run each way. Sequential: one after the other, the order swapped
    every pair. Parallel: at the same time on two CPUs, so that both see the
    same moment of a shared machine; which starts first and which CPU each
    gets rotate over every 4 pairs."""
    first_plain = i % 2 == 0
    if not parallel:
        if first_plain:
            p = finish(start(argv, plain_env, stdin_path), argv[0])
            return p, finish(start(argv, rt_env, stdin_path), argv[0])
        r = finish(start(argv, rt_env, stdin_path), argv[0])
        return finish(start(argv, plain_env, stdin_path), argv[0]), r
    cpus = sorted(os.sched_getaffinity(0))[:2]
    if (i // 2) % 2:
        cpus.reverse()
    if first_plain:
        a = start(argv, plain_env, stdin_path, cpus[0])
        b = start(argv, rt_env, stdin_path, cpus[1])
    else:
        b = start(argv, rt_env, stdin_path, cpus[1])
        a = start(argv, plain_env, stdin_path, cpus[0])
    # Reap in the order they end, so neither's wall time includes a wait.
    done = {}
    for _ in range(2):
        pid, status, ru = os.wait4(-1, 0)
        done[pid] = (status, ru, time.monotonic())
    out = []
    for pid, t0 in (a, b):
        status, ru, t1 = done[pid]
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            sys.exit(f"overhead: {argv[0]} failed (status {status})")
        out.append((ru.ru_utime + ru.ru_stime, t1 - t0))
    return out[0], out[1]


def summary(name, plain, rt):
    diffs = [b - a for a, b in zip(plain, rt)]
    base = statistics.mean(plain)
    mean = statistics.mean(diffs)
    half = 1.96 * statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")
    print(f"{name}: median without {1000 * statistics.median(plain):.2f} ms, "
          f"with {1000 * statistics.median(rt):.2f} ms; "
          f"paired mean difference {1000 * mean:+.3f} ms = {100 * mean / base:+.2f}% "
          f"(95% CI {100 * (mean - half) / base:+.2f}% .. {100 * (mean + half) / base:+.2f}%)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", required=True, help="directory with libfieldprof.so")
    ap.add_argument("--work", required=True, help="scratch directory (spool and slots go here)")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--stdin", help="file fed to the command's standard input")
    ap.add_argument("--parallel", action="store_true",
                    help="run each pair at the same time on two CPUs (less noise from a shared machine)")
    ap.add_argument("--control", action="store_true",
                    help="A/A control: both sides run without the runtime (shows the method's own bias)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command")
    plain_env = dict(os.environ)
    rt_env = dict(os.environ, FIELDPROF_RUN="1", FIELDPROF_SPOOL=a.work + "/spool",
                  FIELDPROF_SLOT_DIR=a.work + "/slots", FIELDPROF_SLOTS="64",
                  FIELDPROF_MAX_LOAD="1000",
                  LD_PRELOAD=a.lib + "/libfieldprof.so")
    if a.control:
        rt_env = plain_env
    plain, rt = [], []
    for i in range(a.runs):
        p, r = pair(cmd, plain_env, rt_env, a.stdin, i, a.parallel)
        plain.append(p)
        rt.append(r)
        if sys.stderr.isatty():
            print(f"\r  {i + 1}/{a.runs} pairs", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    summary("CPU time", [p[0] for p in plain], [r[0] for r in rt])
    summary("wall time", [p[1] for p in plain], [r[1] for r in rt])


if __name__ == "__main__":
    main()
