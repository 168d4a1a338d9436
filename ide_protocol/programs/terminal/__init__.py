"""What the command-line programs share about their terminal: output that is escaped and
never blocks the loop (`output`), standard input read for the loop (`stdin`), UTF-8 on
every platform (`stdio`) and the signals that stop a program cleanly (`signals`).
`serve` and `bridge` both stand on it; neither imports the other."""
