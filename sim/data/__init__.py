"""From a user's own incident log: the fit of failure classes and repair laws, and the
forecast of a run in flight. It imports the model, the engine and runs."""
