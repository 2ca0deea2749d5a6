"""Reports built from the results store: the leaderboard as a static web site (`site.py`)."""
