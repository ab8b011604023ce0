"""`python -m sim` is the `trainsim` command."""

from sim.entry import main

main()
