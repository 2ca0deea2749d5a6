"""`bayesbench geometry`: a trained transformer's geometry, its report and figures."""
