"""hilsim analyzer/importers (the format names live here: the CLI reads them without
importing pandas)."""

#: formats ``hilsim import --format`` accepts (sniffed when ``auto``)
FORMATS: tuple[str, ...] = (
    "nsys-gpu-trace-csv",
    "nsys-kern-exec-csv",
    "wide-durations-csv",
    "sqlite",
    "kineto-json",
    "cupti-records",
    "gpgpusim-log",
)
