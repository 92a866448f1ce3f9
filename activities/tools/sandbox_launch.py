"""Run inside the bash sandbox: start the command, wait, report how it went on a pipe.

Run as a script (`python -I -S sandbox_launch.py FD -- COMMAND...`), with only the
standard library. bubblewrap reports a killed command as exit 128+N and a program it
cannot start as exit 1, like any exit code; this tells the worker which it was.
"""

import json
import os
import sys


def main() -> int:
    report_fd = int(sys.argv[1])
    command = sys.argv[3:]
    os.set_inheritable(report_fd, False)  # the command must not hold the report open
    os.unsetenv("PWD")  # bwrap's, not part of the command's environment
    # Closed on exec (Python's pipes are not inheritable): data on it means exec failed.
    exec_failed_r, exec_failed_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(exec_failed_r)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(exec_failed_w, str(exc.errno).encode())
        os._exit(127)
    os.close(exec_failed_w)
    failure = os.read(exec_failed_r, 64)
    _, status = os.waitpid(pid, 0)
    if failure:
        os.write(report_fd, json.dumps({"errno": int(failure)}).encode())
        return 127
    os.write(report_fd, json.dumps({"status": status}).encode())
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
