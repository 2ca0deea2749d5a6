"""Process control: stop requests (SIGINT/SIGTERM), run-directory locks, the worker pool."""
