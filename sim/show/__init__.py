"""What people look at: the figures and their palette, the HTML report of a run
directory, and the console's tables."""
