"""`bayesbench emsgd`: EM-like vs SGD on Paper II's attention toy, its data, report and figures."""
