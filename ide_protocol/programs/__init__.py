"""The command-line programs behind `python3 -m ide_protocol COMMAND`: `serve` (the main
job), `client`, `check` and `trace`. Each has a `main(argv) -> int` and is imported only
when run."""
