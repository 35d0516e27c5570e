"""`python3 -I -S launcher.py FD TTY COMMAND...`: a session's command, in the worker's sandbox.

bwrap is the parent of what it runs and turns a death by signal N into exit status 128 + N,
so the emulator could not tell `kill -INT` from `exit 130`. This launcher runs inside the
sandbox, starts COMMAND in a session of its own (with TTY=1, its stdin, a terminal, as its
controlling terminal, as sshd does for a shell), and writes two lines to FD: COMMAND's pid
(the emulator signals its process group) and then its raw wait status. Standard library
only, no site: it runs before every command.
"""

import os
import sys


def main() -> None:
    fd, tty, argv = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3:]
    os.set_inheritable(fd, False)  # the command must not hold the report open
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if tty:
                import fcntl
                import termios

                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"tpuctl emulator: cannot run {argv[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    os.write(fd, b"%d\n" % pid)
    # Only the command holds its stdio now: its end is the session's end.
    null = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(null, std)
    _, status = os.waitpid(pid, 0)
    os.write(fd, b"%d\n" % status)


if __name__ == "__main__":
    main()
