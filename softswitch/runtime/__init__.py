"""Runtime servers: P4Runtime (gRPC) and BMv2 Thrift."""
