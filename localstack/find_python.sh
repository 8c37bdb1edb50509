#!/bin/sh
# Prints the first Python 3.12 or newer that runs (LocalStack needs it), or nothing.
# Candidates: $LOCALSTACK_PYTHON, python3.14..python3.12 on PATH (a pyenv shim counts only
# when its version is active), then every pyenv-installed 3.12+.
ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
root="${PYENV_ROOT:-$HOME/.pyenv}"
for c in "${LOCALSTACK_PYTHON:-}" python3.14 python3.13 python3.12 \
         $(ls -d "$root"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -r); do
    [ -n "$c" ] && ok "$c" && { command -v "$c"; exit 0; }
done
exit 0
