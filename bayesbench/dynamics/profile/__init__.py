"""`bayesbench profile`: the routing-law profiler, its statistics, report and figures."""
