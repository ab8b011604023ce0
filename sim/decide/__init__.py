"""From tables to answers: the best interval with confidence intervals, paired
differences, the answer in words, the plan that meets a deadline, two runs compared.
It draws nothing: figures are passed in by the callers above it."""
