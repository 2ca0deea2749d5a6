"""`bayesbench emsgd`: EM-like vs SGD on Paper II's attention toy, its data, report and figures."""

# The study's variants and each one's default steps and sequence length (light: the CLI reads them to
# build its parser without importing torch).
VARIANTS = ("paper", "beta", "deep")
DEFAULTS = {"paper": {"steps": 1000, "length": 2000}, "beta": {"steps": 1000, "length": 50},
            "deep": {"steps": 2000, "length": 2000}}
