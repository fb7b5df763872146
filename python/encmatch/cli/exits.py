"""The exit codes of every subcommand."""

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
#: A closed output pipe: quiet, as a shell's tools killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141

#: The exit-code policy of every subcommand, as ``--help`` states it.
EXIT_CODES = (
    "exit codes: 0 success; 1 disagreement with brute force, disk or internal error; "
    "2 bad input (arguments, files, dimensions, keys of another key set); "
    "3 service unavailable or refused (connection, timeout, token, overload)"
)
