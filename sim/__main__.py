"""`python -m sim` is the `trainsim` command."""

from sim.cli import main

main()
