"""The `trainsim` command: its sub-commands, argument types, `init`, and the entry
point. It parses, calls the groups below and formats their answers."""
