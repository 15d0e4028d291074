"""Chapter 11: automated troubleshooting (wrong GPU architecture, "INT8 is not faster", profiling)."""
