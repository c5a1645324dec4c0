#!/usr/bin/env python3
"""Presses Tab in an interactive bash on a terminal, as a person does, and prints the line bash made.

usage: tab-complete.py 'authflow token ci-'

Starts `bash -i` on a pseudo-terminal with an rc file that loads bash-completion the way Debian's
~/.bashrc does (/usr/share/bash-completion/bash_completion, whose loader finds a command's script in
.../bash-completion/completions/ at its first Tab), types the words, presses Tab, then Ctrl-A and
`echo ` and Return, so that bash prints the completed line on a line of its own. Prints that line
(the completed words) and exits 0; exits 1 when bash does not answer within 30 seconds.
"""
import os
import pty
import re
import select
import sys
import tempfile
import time

PROMPT = "TAB-COMPLETE-READY> "
MARK = "TAB-COMPLETE-LINE:"


def main() -> int:
    words = sys.argv[1]
    with tempfile.NamedTemporaryFile("w", suffix=".bashrc", delete=False) as rc:
        rc.write(". /usr/share/bash-completion/bash_completion\n")
        rc.write(f"PS1='{PROMPT}'\n")
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "dumb"
        os.environ.pop("PROMPT_COMMAND", None)
        os.execvp("bash", ["bash", "--noprofile", "--rcfile", rc.name, "-i"])
    deadline = time.monotonic() + 30
    seen = ""

    def read_until(pattern: str) -> re.Match[str] | None:
        nonlocal seen
        while time.monotonic() < deadline:
            found = re.search(pattern, seen)
            if found:
                return found
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk.decode("utf-8", "replace")
        return None

    try:
        if not read_until(re.escape(PROMPT)):
            print(f"tab-complete.py: no prompt from bash; it said: {seen!r}", file=sys.stderr)
            return 1
        seen = ""
        # Tab; then Ctrl-A (start of line) and `echo MARK` before the words, and Return.
        os.write(fd, (words + "\t").encode())
        os.write(fd, ("\x01echo " + MARK + " \r").encode())
        found = read_until("\n" + re.escape(MARK) + r" ([^\r\n]*)\r?\n")
        if not found:
            print(f"tab-complete.py: bash printed no completed line; it said: {seen!r}", file=sys.stderr)
            return 1
        print(found.group(1).rstrip())
        os.write(fd, b"exit\r")
        return 0
    finally:
        os.unlink(rc.name)
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


if __name__ == "__main__":
    sys.exit(main())
