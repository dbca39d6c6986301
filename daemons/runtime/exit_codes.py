"""The exit codes of `tandem` and of every daemon process, one meaning each."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1  # the command ran and failed (a daemon crashed, a run went FATAL, ...)
    USAGE = 2  # bad command line (click's own code for usage errors)
    CONFIG = 3  # the config file is unreadable or invalid
    UNREACHABLE = 4  # no answer from the supervisor or a daemon within the timeout
    UNHEALTHY = 5  # status found a process FATAL or hung
    SETUP = 6  # a daemon's setup cannot work here (env id, plug-in, algorithm vs env, device): no restart helps
    INTERRUPTED = 130  # stopped by Ctrl-C or SIGTERM before the run's stop condition
