"""What every layer shares: one-line user errors, atomic writes, result rows and their
signatures, output ownership and comma-separated option lists. Standard library (and pandas
for result rows) only."""
