"""What a scenario is and what it implies, before anything is simulated: the schema,
loading and overrides, the hardware catalogue, lifetime distributions, the step model,
the network and fabric, whether a configuration can run and finish, and sizing.
It imports nothing from the other groups."""
