"""`python -m sim` is the `trainsim` command."""

from sim.cli.entry import main

main()
