"""Software P4 target: loads P4-16 source and executes it with v1model (BMv2) semantics."""
