# After files (local users win) and systemd.
passwd last xign
group last xign
