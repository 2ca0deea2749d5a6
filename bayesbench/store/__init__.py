"""The results store: run records, the SQLite file, the leaderboard and its figures."""
