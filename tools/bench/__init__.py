"""Benchmarks of the `/ide` server against peers measured in the same run.

    python3 -m tools.bench                     # everything; table on stdout, bench-results.json
    python3 -m tools.bench --quick             # a short end-to-end pass (the test suite's smoke run)
    python3 -m tools.bench --only throughput   # some groups: throughput, push, diff, startup
    python3 -m tools.bench --ours-root DIR     # our server imported from another checkout
    python3 -m tools.bench --profile DIR       # also cProfile our server in its first round

Groups, each in a module of its own:

1. throughput (throughput.py): `tools/call get_selection` per second at concurrency 1
   and 16, our server beside the peers of the side-by-side yardstick (peers.py: a bare
   node:http handler, VS Code's stack, the MCP Python SDK), one Node.js load client for
   all (load.py), rounds alternating the servers; the four ratios and our server's CPU
   time per request.
2. push (push.py, push_client.py): `set_selection` to arrival on the GET streams.
3. diff (diff.py): `open_diff` with 10 MB of contents: time and peak memory.
4. startup (startup.py): imports, `serve` to its lock file, idle RSS.

report.py turns the results into the targets and a table; serve.py runs the Python
servers, wire.py is the small CLI-shaped HTTP client of groups 2 to 4. Only the peers use
anything beyond the standard library: the MCP Python SDK from `.bench-venv/`
(`make bench-venv`), Node.js and the packages in `.bench-node/` (`make bench-node`);
a peer that is missing is reported skipped, saying why. Linux only (reads /proc).
"""
