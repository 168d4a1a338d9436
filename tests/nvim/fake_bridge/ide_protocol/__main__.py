"""A scripted bridge, for what the real one never does: the plugin starts it in place
of the library (g:copilot_ide_library names this folder) and it answers `hello` with
`ready`, then writes the lines of the file $FAKE_BRIDGE_SCRIPT (a JSON list: a string is
written as it is, anything else as one JSON line), and logs every line it reads to
$FAKE_BRIDGE_LOG. It ends at `stop` or at the end of its input."""
import json
import os
import sys


def main(argv):
    log = open(os.environ["FAKE_BRIDGE_LOG"], "a", encoding="utf-8")
    with open(os.environ["FAKE_BRIDGE_SCRIPT"], encoding="utf-8") as f:
        script = json.load(f)
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        log.write(line + "\n")
        log.flush()
        message = json.loads(line)
        if message.get("type") == "hello":
            out.write(json.dumps({"type": "ready", "protocol": 1, "unit": "bytes", "lock": "/nonexistent.lock",
                                  "socket": "/nonexistent.sock", "folders": [argv[1]], "name": "Neovim",
                                  "pid": os.getpid()}).encode() + b"\n")
            for item in script:
                out.write((item if isinstance(item, str) else json.dumps(item)).encode("utf-8", "surrogatepass")
                          + b"\n")
            out.flush()
        elif message.get("type") == "stop":
            break
    out.write(b'{"type": "stopped", "reason": "stop"}\n')
    out.flush()
    return 0
