#!/usr/bin/env bash
# The unit suite under the Windows CPython in Wine (after tools/windows/setup.sh), from
# the checkout's root; arguments go to pytest (default: the whole suite). Ends with
# pytest's summary line and exits with pytest's status.
set -uo pipefail
. tools/windows/env.sh
# The checkout's packages; pytest and the sitecustomize that fills in what Wine 8 lacks
# are in the CPython's own site-packages (tools/windows/setup.sh).
export PYTHONPATH="$(winpath "$WIN_ROOT")"
export PYTHONDONTWRITEBYTECODE=1
# -rfEs: every failure, error and skip (with its reason) in the summary (this replaces
# setup.cfg's -ra); no cache folder. -X utf8: pytest's own report in UTF-8 (a flag its
# subprocesses do not inherit, so the programs under test still meet the code page).
# faulthandler_timeout: a stack dump only for a test stuck far beyond the longest one's
# own guard (2000 sessions in test_server_leaks take about two minutes under Wine, and
# guard themselves at 600 s): the dump itself, from its watchdog thread, can crash Wine 8
# ("Unhandled page fault"), which ends the whole run.
[ $# -gt 0 ] || set -- tests
wine_run "$WIN_PYTHON" -X utf8 -m pytest -p no:cacheprovider -o faulthandler_timeout=900 -rfEs "$@"
