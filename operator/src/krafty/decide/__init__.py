"""Pure decisions over observed state: what to restart next, which leaders to elect,
which conditions to report. No I/O: every function is table-tested."""
